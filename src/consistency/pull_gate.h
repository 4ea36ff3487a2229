// A server's consistency controller: keeps the step table, holds reads the barrier policy does
// not pass yet and releases them when the table changes. Pure logic: the server runtime (and
// the simulator) feed it events and answer the reads it releases.
#ifndef PS_CONSISTENCY_PULL_GATE_H_
#define PS_CONSISTENCY_PULL_GATE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "consistency/barrier_policy.h"
#include "consistency/step_table.h"
#include "util/rng.h"

namespace ps {

class PullGate {
 public:
  /// `seed` drives the sampling policies; the same seed and inputs give the same decisions.
  PullGate(std::shared_ptr<const BarrierPolicy> policy, uint64_t seed);

  /// Initial membership: every worker at step 0.
  void SetWorkers(const std::vector<int>& workers);
  /// Puts `worker` in worker group `group` (0 unless set): a read is decided over the steps of
  /// its group's workers only, under its group's policy. A worker in the table keeps its step.
  void SetGroup(int worker, int group);
  /// A worker joined at run time: it enters at the current minimum step of its group.
  void AddWorker(int worker);
  /// A worker left or was declared dead: it leaves the table and its held reads are dropped.
  /// Appends the reads of others that may now be answered to *released.
  void RemoveWorker(int worker, std::vector<uint64_t>* released);
  /// A push or Clock() reported that `worker` completed `step` steps.
  void Report(int worker, int64_t step, std::vector<uint64_t>* released);
  /// A read by `worker` at `step`, which has completed `done` steps (recorded first: a worker
  /// can be in step t with pushes of earlier steps not yet applied everywhere). Returns true
  /// when it may be answered now; otherwise it is held under `handle` until a later call
  /// releases it.
  bool Read(int worker, int64_t step, int64_t done, uint64_t handle,
            std::vector<uint64_t>* released);
  /// Shorthand for a worker whose every step before `step` is done.
  bool Read(int worker, int64_t step, uint64_t handle, std::vector<uint64_t>* released) {
    return Read(worker, step, step, handle, released);
  }
  /// Changes the policy of worker group `group` (-1: of every group, and of groups not seen
  /// yet); held reads are re-checked under the new one.
  void SetPolicy(std::shared_ptr<const BarrierPolicy> policy, std::vector<uint64_t>* released,
                 int group = -1);

  /// The server clock: the smallest step of the live workers (0 with no workers).
  int64_t Clock() const;
  /// The clock of `worker`'s group: the smallest step of its live workers.
  int64_t Clock(int worker) const;
  /// Every live worker's step, whatever its group.
  const StepTable& table() const { return table_; }
  /// The policy of groups that were not given one of their own.
  const BarrierPolicy& policy() const { return *policy_; }
  /// The policy of one group.
  const BarrierPolicy& policy(int group) const;
  size_t held() const { return held_.size(); }
  /// Reads that had to wait, and all reads seen.
  uint64_t deferred() const { return deferred_; }
  uint64_t reads() const { return reads_; }
  /// Policy decisions taken: one per read plus one per re-check of a held read.
  uint64_t checks() const { return checks_; }

 private:
  struct Held {
    uint64_t handle;
    int worker;
    int64_t step;
  };
  struct Group {
    StepTable table;
    std::shared_ptr<const BarrierPolicy> policy;  // null: policy_
  };
  int GroupOf(int worker) const;
  Group& GroupState(int group);
  const BarrierPolicy& PolicyOf(const Group& g) const { return g.policy ? *g.policy : *policy_; }
  // Re-checks held reads in arrival order (of one group, or of all with -1).
  void Recheck(std::vector<uint64_t>* released, int group = -1);

  std::shared_ptr<const BarrierPolicy> policy_;
  Rng rng_;
  StepTable table_;                        // every group's workers
  std::map<int, Group> groups_;            // by group index
  std::unordered_map<int, int> group_of_;  // worker -> group (absent: 0)
  std::deque<Held> held_;
  uint64_t deferred_ = 0, reads_ = 0, checks_ = 0;
};

/// Worker-side bounded delay: step t may start only when every request issued during steps
/// before t - tau has completed (tau = 0: sequential; tau < 0: never wait).
class BoundedDelay {
 public:
  void Issued(int64_t ts, int64_t step);
  void Completed(int64_t ts);
  bool MayStart(int64_t t, int tau) const;
  /// Requests not completed yet.
  size_t open() const { return open_.size(); }

 private:
  std::unordered_map<int64_t, int64_t> open_;  // ts -> step
  std::map<int64_t, size_t> per_step_;         // step -> open requests
};

}  // namespace ps

#endif  // PS_CONSISTENCY_PULL_GATE_H_
