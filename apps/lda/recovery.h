// Worker failures without a lost or doubled count (docs/apps/lda.md, "A worker dies").
//
// The counts on the servers are a function of the topic assignments: n = C(z). A worker that
// dies leaves its last pushes applied on some servers and not on others, so the counts no
// longer match any assignment. Worker 0 coordinates a pause: every live worker finishes its
// pushes, saves its assignments on the servers and says so; worker 0 takes the dead worker's
// data parts with their last saved assignments, computes C(z) over the whole corpus and pushes
// C(z) minus the counts it pulls. A request stamped with a worker's death waits on each server
// until that server has fenced the dead worker (Meta.dead_workers), so the pull sees all the
// dead worker will ever have applied. Any saved assignment will do: counts are rebuilt from it.
#ifndef PS_APPS_LDA_RECOVERY_H_
#define PS_APPS_LDA_RECOVERY_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "lda/corpus.h"
#include "lda/eval.h"
#include "lda/lda.h"
#include "lda/shard.h"

namespace lda {

/// The job's control state (Job::control): key 0 is the coordinator's, key 1 + r is worker r's
/// (team ranks). Each key has one writer, which pushes differences from what it set before (the Sum
/// rule); a worker that takes over as coordinator reads key 0 first (AdoptJob).
struct JobState {
  int64_t pause = 0;      // pauses the coordinators have called
  int64_t step = 0;       // the step every live worker reaches before it saves (CatchUpStep)
  int64_t go = 0;         // the last pause whose recount is done
  int64_t terminate = 0;  // every live worker finished: stop
};
struct MemberState {
  int64_t acked = 0;     // the last pause this worker saved its assignments for
  int64_t finished = 0;  // all iterations done and assignments saved
};

class Recovery {
 public:
  Recovery(ps::Node* node, const Options& o);

  JobState ReadJob();
  /// This worker writes the job state from now on (the coordinator died): it goes on from the
  /// state on the servers. The read carries the death, so no push of the dead one that is not
  /// in it can be applied after it (causal fencing).
  void AdoptJob() { job_ = ReadJob(); }
  /// The job state as this worker last set or adopted it.
  const JobState& job() const { return job_; }
  /// Every worker's state, by rank.
  std::vector<MemberState> ReadMembers();
  void SetJob(const JobState& s);
  void SetMember(const MemberState& s);

  /// Saves the shard's assignments (one key per document) and waits until they are stored.
  void SaveTopics(const Shard& s);
  /// Saves them without waiting (a periodic checkpoint); the next save waits for it.
  void SaveTopicsAsync(const Shard& s);
  /// The saved assignments of documents `ids` (ascending corpus indices; document i of `docs`
  /// is ids[i]), one after another; a document never saved gets its initial topics
  /// (Shard::RandomTopics).
  std::vector<uint32_t> LoadTopics(const Corpus& docs, const std::vector<uint64_t>& ids);

  /// Ranks of workers the scheduler declared dead (from this node's view).
  std::vector<int> DeadRanks() const;

  /// Waits until cond() holds, polling; throws ps::Error after the barrier timeout with what().
  template <typename C, typename W>
  void Await(C cond, W what);

 private:
  ps::Node* node_;
  const Options& o_;
  ps::KVWorker<int64_t> control_;
  ps::KVWorker<int32_t> topics_;
  JobState job_;
  MemberState me_;
  // The last save in flight (its arrays must live until it is acknowledged).
  int64_t saving_ = -1;
  ps::SArray<ps::Key> save_keys_;
  ps::SArray<int32_t> save_vals_;
  ps::SArray<int> save_lens_;
};

/// The counts of assignments z of the documents `docs` of `all` (z laid out one document
/// after another, in the order of `docs`), rows in ascending topic order.
void AddCounts(const Corpus& all, const std::vector<uint64_t>& docs, const uint32_t* z, Model* m);

/// The step other workers must have completed for a pull of worker 0 at `step` to pass the
/// barrier policy `policy` (a PS_CONSISTENCY spec): step under BSP, step - s under SSP(s) and
/// the sampled policies' staleness, 0 under ASP. Workers behind it skip iterations to it.
int64_t CatchUpStep(const std::string& policy, int64_t step);

/// A shard of documents `ids` (ascending corpus indices) of `all`, with assignments z.
Shard ShardOf(const Hyper& h, const Corpus& all, const std::vector<uint64_t>& ids,
              const std::vector<uint32_t>& z);

/// The documents of data part `part` of `parts` of a corpus of `docs` documents.
std::vector<uint64_t> PartDocs(uint64_t docs, int part, int parts);

template <typename C, typename W>
void Recovery::Await(C cond, W what) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(node_->config().barrier_timeout_ms);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw ps::Error("ps_lda: no progress within PS_BARRIER_TIMEOUT_MS=" +
                      std::to_string(node_->config().barrier_timeout_ms) + " ms: " + what());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace lda

#endif  // PS_APPS_LDA_RECOVERY_H_
