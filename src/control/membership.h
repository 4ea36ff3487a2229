// The scheduler's membership bookkeeping: registration, ids, liveness, barriers.
// Pure logic: inputs are calls with the current time, outputs are return values.
#ifndef PS_CONTROL_MEMBERSHIP_H_
#define PS_CONTROL_MEMBERSHIP_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ps/node.h"

namespace ps {

/// What a node says when it registers.
struct Registration {
  Role role = Role::kWorker;
  std::string host;
  int port = 0;
  int rank_hint = -1;
  /// The node joins a job that is already running (PS_JOIN).
  bool join = false;
  /// A worker's group (PS_WORKER_GROUP; "" without groups).
  std::string group;
};

/// A worker of `group` joined a running job: the group grows by one, and a group the job did
/// not have is added at the end (a job without groups first gets its one unnamed group of
/// num_workers). Every node applies the joins in the scheduler's order, so group indexes agree.
void JoinGroup(std::vector<std::pair<std::string, int>>* groups, const std::string& group,
               int num_workers);

/// Barrier groups of one worker group: the workers of group `index` (Config::worker_groups)
/// only, encoded above the BarrierGroup bits.
inline int WorkerGroupBarrier(int index) { return kWorkerGroup | ((index + 1) << 8); }
/// The worker group index a barrier's groups name, or -1 for every worker.
inline int BarrierWorkerGroup(int groups) { return (groups >> 8) - 1; }

class Membership {
 public:
  /// The scheduler itself is node 0 at scheduler_host:scheduler_port.
  Membership(int num_servers, int num_workers, const std::string& scheduler_host,
             int scheduler_port);

  enum class RegisterResult {
    kPending,    // recorded; still waiting for others
    kComplete,   // this registration completed the table: ids and ranks are assigned
    kDuplicate,  // the same host:port registered before (a resend); ignored
    kRejected,   // the job is full or the role is not server/worker; *why says which
    kJoined,     // a node joined the running job: nodes().back() describes it
  };
  RegisterResult Register(const Registration& r, std::string* why);
  /// The job's worker groups and their sizes (Config::worker_groups; none: one unnamed group).
  /// Set before the first registration: a worker must then name one of them, and each group
  /// takes its size in workers.
  void SetWorkerGroups(std::vector<std::pair<std::string, int>> groups) {
    groups_ = std::move(groups);
  }

  /// True once every expected node has registered and ids are assigned.
  bool complete() const { return complete_; }
  /// The node table (scheduler first), valid once complete.
  const std::vector<NodeInfo>& nodes() const { return nodes_; }
  /// The node with this id, or null.
  const NodeInfo* Find(int id) const {
    for (const auto& n : nodes_) {
      if (n.id == id) return &n;
    }
    return nullptr;
  }
  /// Server ids in rank order.
  std::vector<int> ServerIds() const;
  /// Ring epoch: 1 for the first table, and it only grows.
  uint64_t epoch() const { return epoch_; }
  /// Who is still missing, for the timeout message ("1 of 2 servers, 0 of 4 workers").
  std::string Missing() const;

  /// Records a heartbeat (or any message) from id at now_ms. Returns how long id had been
  /// silent (0 for its first word, or a node already declared dead), so the caller can warn of
  /// a node that came close to the timeout.
  int64_t Heartbeat(int id, int64_t now_ms);
  /// Ids of nodes silent for longer than timeout_ms at now_ms (the scheduler excluded).
  std::vector<int> Silent(int64_t now_ms, int64_t timeout_ms) const;
  /// Records that the scheduler itself did not run for pause_ms up to now_ms (its process was
  /// stopped, swapped out or starved of CPU). Silence is counted only while the scheduler was
  /// listening: a pause is added to every node's last word (at most up to now_ms), so that the
  /// first look after it does not declare dead every node whose beats wait unread.
  void Paused(int64_t now_ms, int64_t pause_ms);

  /// Records that node id entered barrier (groups, seq). Returns the ids to release (every
  /// member of the groups) when this arrival completes the barrier, else nothing. Arrivals of
  /// a node that is not a member of the groups are ignored.
  std::vector<int> EnterBarrier(int id, int groups, uint64_t seq);
  /// The live members of `groups` that have not entered barrier (groups, seq) yet.
  std::vector<int> Awaited(int groups, uint64_t seq) const;
  /// A barrier that some of its members entered and others not yet.
  struct OpenBarrier {
    int groups;
    uint64_t seq;
    std::vector<int> arrived, awaited;  // live members (ids), in id order
  };
  std::vector<OpenBarrier> OpenBarriers() const;
  /// "worker 1 (node 11)": a node as users know it (its role and rank), for logs and errors.
  std::string Describe(int id) const;
  /// "the workers", "the servers and workers", "every node": a barrier's groups in words;
  /// "the workers of group eval" for one worker group (named from `worker_groups`).
  static std::string GroupNames(int groups,
                                const std::vector<std::pair<std::string, int>>& worker_groups = {});
  /// The last released sequence number of every barrier group union: a node that joins starts
  /// counting from there, so it takes part in every barrier not released yet.
  const std::map<int, uint64_t>& released() const { return released_; }
  /// The id of the node registered from host:port, or -1.
  int IdOf(const std::string& host, int port) const;

  /// A barrier that a death completed: release `ids` from barrier (groups, seq).
  struct Release {
    std::vector<int> ids;
    int groups;
    uint64_t seq;
  };
  /// Declares node id dead: it no longer counts for barriers, liveness or the live tables.
  /// Returns the barriers that only waited for it. Unknown or already dead ids: nothing.
  std::vector<Release> MarkDead(int id);
  bool IsDead(int id) const { return dead_.count(id) > 0; }
  /// Every id declared dead so far (never reused).
  const std::set<int>& dead() const { return dead_; }
  /// The job's worker groups as joins made them (SetWorkerGroups, JoinGroup).
  const std::vector<std::pair<std::string, int>>& groups() const { return groups_; }
  /// The index of worker group `name` in groups(), or -1.
  int GroupIndex(const std::string& name) const;

 private:
  int num_servers_, num_workers_;
  std::vector<std::pair<std::string, int>> groups_;
  // Is n a member of a barrier's groups?
  bool InBarrier(const NodeInfo& n, int groups) const;
  bool complete_ = false;
  uint64_t epoch_ = 0;
  std::vector<std::pair<Registration, int>> pending_;  // with arrival order
  // What Register asks of pending_ and nodes_ for every registration, kept as it grows (a scan
  // per registration made 11 000 registrations cost 0.57 s).
  std::set<std::pair<std::string, int>> pending_at_;  // host, port
  int pending_servers_ = 0, pending_workers_ = 0;
  std::map<std::string, int> pending_in_group_;
  std::map<std::pair<std::string, int>, int> id_at_;  // host, port -> id (not the scheduler)
  std::map<Role, int> count_of_;                      // nodes of a role in nodes_
  std::map<std::string, int> workers_in_group_;       // workers of a group in nodes_
  // Appends info to nodes_ and to the indexes above.
  void AddNode(const NodeInfo& info);
  std::vector<NodeInfo> nodes_;
  std::map<int, int64_t> last_seen_;
  std::map<std::pair<int, uint64_t>, std::set<int>> barriers_;
  std::set<int> dead_;
  std::map<int, uint64_t> released_;
  std::vector<int> Members(int groups) const;
};

/// True if a node of this role belongs to a union of BarrierGroup bits.
bool InGroups(Role role, int groups);

}  // namespace ps

#endif  // PS_CONTROL_MEMBERSHIP_H_
