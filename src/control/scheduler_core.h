// The scheduler's decisions as one pure state machine (DESIGN §2, §8), in the style of etcd
// raft's Step: events in (registrations, heartbeats and their absence, broken connections,
// join, leave and refill reports, task requests and adds, barrier arrivals; the time is an
// input), actions out, in the order the runtime must carry them out. No sockets, threads or
// clocks. It holds the membership table, the ring's decisions (RingCore), the task pools and
// the barrier reports; the node runtime (node.cc, node_control.cc) feeds it under its lock and
// then does what the actions say. The node table's contents (tables, consistency settings) and
// the job's metrics stay with the runtime: they are operations, not protocol decisions.
#ifndef PS_CONTROL_SCHEDULER_CORE_H_
#define PS_CONTROL_SCHEDULER_CORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "control/membership.h"
#include "control/ring_core.h"
#include "control/task_pool.h"
#include "meta.pb.h"
#include "ps/base.h"
#include "replication/refill.h"
#include "ring/ring.h"

namespace ps {

class SchedulerCore {
 public:
  struct Options {
    int num_servers = 0, num_workers = 0;
    std::string host;  // the scheduler's own address (node 0)
    int port = 0;
    std::vector<std::pair<std::string, int>> worker_groups;
    int vnodes = 1, replicas = 0;
    int64_t heartbeat_timeout_ms = 0, heartbeat_interval_ms = 0;
    int64_t task_timeout_ms = 0;
    // A held task request is answered "ask again" after this long.
    int64_t task_keep_ms = 200;
    // How long a barrier is open before it is reported, and between reports.
    int64_t barrier_report_ms = 1000;
  };

  /// One thing for the runtime to do. Kinds that change the node's own view (kComplete,
  /// kJoined, kRing, kDead) are applied under the runtime's lock right after the step; the
  /// rest, in order, once it is released.
  struct Action {
    enum Kind {
      kSend,      // control message `msg` to node `to` (0: the scheduler's own barrier waits)
      kTable,     // the node table to node `to` (its contents are the runtime's)
      kReject,    // a REJECT with `text` to the unregistered node at host:port
      kEvent,     // a line for the job's event log (`warning`: logged as a warning)
      kLog,       // a line for the log only (`warning` or info)
      kComplete,  // registration is complete: the table and ring are set (after the tables)
      kJoined,    // `node` joined the running job
      kRing,      // the scheduler's own ring is now `ring` (customers hear of it)
      kDead,      // node `to` is out: `warning` set when it died (customers hear of it), not
                  // set when it left
      kRelease,   // barrier (`release`) released: BARRIER_DONE to its members
      kAbort,     // the job stops with `text` (`code`)
      kForward,   // the runtime handles the message itself (tables, tasks added, consistency,
                  // the metrics a heartbeat carries)
    };
    explicit Action(Kind k) : kind(k) {}
    Kind kind;
    int to = -1;
    // kSend to many: one message for every node here (`to` is then -1). The scheduler's
    // fan-outs (a new ring to every node) are built once, not once per recipient.
    std::vector<int> fanout;
    pb::Control msg;
    std::string text;
    bool warning = true;
    bool quiet = false;  // a send whose failure is not logged (the node may be gone)
    ErrorCode code = ErrorCode::kInvalidArgument;
    NodeInfo node;
    std::shared_ptr<const Ring> ring;
    Membership::Release release;
    std::string host;
    int port = 0;
  };
  using Actions = std::vector<Action>;
  /// The nodes a kSend goes to: `fanout`, or `to` alone.
  static std::vector<int> Recipients(const Action& a) {
    return a.fanout.empty() ? std::vector<int>{a.to} : a.fanout;
  }

  explicit SchedulerCore(Options o);

  /// A control message from node `from` (-2 or less: one without an id yet) at now_ms.
  Actions OnControl(int from, const pb::Control& c, int64_t now_ms);
  /// The scheduler's periodic look at now_ms, tick_ms after the previous one: a gap longer
  /// than a beat interval is the scheduler's own pause (nobody's silence); silent nodes are
  /// declared dead; barriers held long are reported; held task requests expire or are asked
  /// again; and when `beat`, every live node gets the scheduler's heartbeat.
  Actions Tick(int64_t now_ms, int64_t gap_ms, int64_t tick_ms, bool beat, bool want_metrics);
  /// Node `id` is declared dead (`how` says why) at now_ms: its tasks go back, barriers stop
  /// waiting for it, the ring fails over or the job aborts. Nothing for a node already dead or
  /// unknown, or once the job's last barrier is released.
  Actions NodeDead(int id, const std::string& how, int64_t now_ms);
  /// The connection to node `id` broke (a process that dies closes its connections at once).
  Actions ConnectionBroke(int id, int64_t now_ms);
  /// Node `from` (0: the scheduler itself) enters barrier (groups, seq).
  Actions EnterBarrier(int from, int groups, uint64_t seq);
  /// Tasks added to the pool of worker group `group`: n of them (once: only if the group never
  /// had any), or one with `data`, or the pool opened (pool 1) or closed (pool 2). *first: the
  /// first id added (-1 when none).
  Actions AddTasks(int group, int n, bool once, const std::string* data, int pool, int64_t now_ms,
                   int* first);

  /// The job was aborted (by anyone): no task is handed out any more.
  void Aborted() { aborted_ = true; }
  /// The last barrier (Finalize's) is released: everyone is leaving; deaths mean nothing.
  void Finished() { finished_ = true; }
  bool finished() const { return finished_; }

  const Membership& membership() const { return membership_; }
  /// Null until registration is complete.
  const RingCore* ring_core() const { return ring_core_.get(); }
  const TaskPool& tasks() const { return tasks_; }
  /// The live nodes but the scheduler, or the live servers only.
  std::vector<int> Live(bool servers_only = false) const;

  /// A node table entry on the wire and back.
  static void FillEntry(const NodeInfo& n, pb::NodeEntry* e);
  static NodeInfo EntryInfo(const pb::NodeEntry& e);
  /// A server's refill report for `app` as it goes to the scheduler (REFILL).
  static pb::Control RefillMessage(int app, const RefillReport& r);

 private:
  void Send(int to, pb::Control c, bool quiet, Actions* out) const;
  void SendAll(std::vector<int> to, pb::Control c, bool quiet, Actions* out) const;
  void Log(std::string text, bool warning, Actions* out) const;
  void Register(const pb::Control& c, int64_t now_ms, Actions* out);
  // The ring's decision d acted on (dead: the node whose death made it, or -1).
  void ActOnRing(const RingCore::Decision& d, int dead, Actions* out);
  void AnswerTasks(const std::vector<TaskPool::Reply>& replies, Actions* out) const;
  void ServeTaskWaiters(int64_t now_ms, Actions* out);
  void ReportOpenBarriers(int64_t now_ms, Actions* out);
  void Released(const std::vector<int>& ids, int groups, uint64_t seq, Actions* out) const;
  int WorkerGroup(int id) const;

  Options o_;
  Membership membership_;
  std::unique_ptr<RingCore> ring_core_;
  TaskPool tasks_;
  std::map<int, int64_t> late_warned_ms_;  // when a node's late beat was last logged
  // When each open barrier (groups, seq) was first seen open, and the next report.
  std::map<std::pair<int, uint64_t>, int64_t> barrier_open_ms_;
  int64_t next_barrier_report_ms_ = 0;
  bool aborted_ = false;
  bool finished_ = false;
};

}  // namespace ps

#endif  // PS_CONTROL_SCHEDULER_CORE_H_
