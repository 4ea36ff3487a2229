// A node of a ps job: the scheduler, a server or a worker.
#ifndef PS_NODE_H_
#define PS_NODE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ps/base.h"
#include "ps/config.h"
#include "ps/table.h"

namespace ps {

/// One entry of the node table that the scheduler broadcasts.
struct NodeInfo {
  int id = -1;
  Role role = Role::kWorker;
  int rank = -1;
  std::string host;
  int port = 0;
  /// A worker's group (Config::worker_group; "" without groups) and its rank in that group.
  std::string group;
  int group_rank = -1;
};

/// Traffic and health counters of one node.
struct NodeStats {
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  /// Frames or messages dropped because they were malformed (garbage on the port), claimed
  /// more memory than they may (PS_MAX_MESSAGE_MB) or than the machine has.
  uint64_t malformed_dropped = 0;
  /// Messages not sent because the peer's queue was full (PS_SEND_QUEUE): the peer is stalled;
  /// what matters is resent.
  uint64_t send_queue_full = 0;
  /// Peers this node sends to through shared memory (PS_VAN=ucx, nodes on one host); the
  /// others go over TCP.
  uint64_t shared_memory_peers = 0;
  /// Messages that left packed with others in one transport message (PS_VAN=ucx: small
  /// messages queued for one peer at once travel together).
  uint64_t messages_batched = 0;
  /// Faults the test-only fault injection (PS_FAULT_*) applied to this node's sends.
  uint64_t injected_drops = 0;
  uint64_t injected_duplicates = 0;
  uint64_t injected_delays = 0;
  /// Server: requests not served because this node stalled (a hang, SIGSTOP) for longer than
  /// the heartbeat timeout and had not yet confirmed with the scheduler that it is still in the
  /// job (its read lease): it may have been declared dead and replaced meanwhile.
  uint64_t lease_dropped = 0;
};

/// Groups for Barrier(): any union of them.
enum BarrierGroup : int {
  kSchedulerGroup = 1,
  kServerGroup = 2,
  kWorkerGroup = 4,
  kAllGroups = 7,
};

/// A node object. Several can live in one process (each owns its transport and threads); no
/// state is global. Typical use:
///
///   ps::Node node(ps::Config::FromEnv());
///   node.Start();                 // joins the job; blocks until every node is known
///   ... KVWorker / KVServer work ...
///   node.Finalize();              // waits for every node, then stops
class Node {
 public:
  /// Takes the configuration; Validate() is called and may throw ps::Error.
  explicit Node(Config config);
  /// Stops the node if it is still running (without waiting for the others).
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// Binds the transport, registers with the scheduler (or, on the scheduler, waits for the
  /// expected servers and workers) and returns once the node table and ring are known.
  /// Throws ps::Error after Config::register_timeout_ms with what was missing.
  void Start();

  /// Blocks until every live node of the groups (a BarrierGroup union that includes this
  /// node's own group) has called Barrier with the same groups. Each call has its own sequence
  /// number, so a late message of one barrier never releases the next one. Throws ps::Error
  /// after Config::barrier_timeout_ms.
  void Barrier(int groups);
  /// Barrier of the live workers of one worker group (Config::worker_groups); "" = every
  /// worker. Only that group's workers may call it. Throws ps::Error for a group the job does
  /// not have, and as Barrier(int).
  void Barrier(const std::string& worker_group);

  /// Barrier over all nodes, then stops the transport and threads. Safe to call once. Waits for
  /// the slowest node however long the job runs (no Config::barrier_timeout_ms here: servers and
  /// the scheduler sit in Finalize while workers train); it logs what it waits for every
  /// barrier timeout, and throws ps::Error only when the job fails (a node dead with data lost,
  /// the scheduler lost), which failure detection bounds.
  void Finalize();

  /// Servers only: leaves the running job without losing anything. The scheduler prepares a
  /// ring without this server, the others copy the key ranges they will hold (from the current
  /// masters, this server included) while pushes go on, and at the cut-over they take over.
  /// Returns once the new ring is in force; the node is then stopped (no Finalize; destroy the
  /// KVServer and the Node). Throws ps::Error if the scheduler refuses (the last server) or
  /// after Config::barrier_timeout_ms.
  void Leave();

  /// This node's role.
  Role role() const;
  /// This node's id (the scheduler is 0; -1 before Start()).
  int id() const;
  /// This node's rank among the nodes of its role (0-based; -1 before Start()).
  int rank() const;
  /// The numbers of servers and workers the job was configured with.
  int num_servers() const;
  int num_workers() const;
  /// A copy of the node table (valid after Start()).
  std::vector<NodeInfo> nodes() const;
  /// Worker groups: this worker's group ("" when the job has none) and its rank in it (0-based,
  /// valid after Start(); -1 on servers and the scheduler), and the job's groups with their
  /// configured sizes, in order (one unnamed group of every worker when it has none).
  std::string group() const;
  int group_rank() const;
  std::vector<std::pair<std::string, int>> worker_groups() const;
  /// Keeps the current bounded delay in SetConsistency.
  static constexpr int kKeepDelay = -2;
  /// Changes, at run time and for the whole job, the barrier policy of every server (a spec
  /// as in PS_CONSISTENCY: "bsp", "ssp:4", "asp", "psp:BETA[:S]", "backup:B[:S]"; "" keeps
  /// it) and the bounded delay tau of every worker (-1 = unbounded; kKeepDelay keeps it).
  /// Callable on any node after Start(): the scheduler relays it to every live node. Returns
  /// once sent; nodes apply it when it arrives. Throws ps::Error for a malformed spec.
  void SetConsistency(const std::string& policy, int max_delay = kKeepDelay);
  /// The same for one worker group only: its workers' reads are decided over their own steps
  /// (a BSP group waits for its own members only), and their bounded delay is its own. A later
  /// job-wide call sets the field it changes for every group again. "" = every group. Throws
  /// ps::Error for a group the job does not have.
  void SetConsistency(const std::string& policy, int max_delay, const std::string& group);
  /// The barrier policy spec and bounded delay this node currently knows (the job's, which
  /// groups without their own follow; or one group's).
  std::string consistency_policy() const;
  int max_delay() const;
  std::string consistency_policy(const std::string& group) const;
  int max_delay(const std::string& group) const;
  /// Data shards (tasks). The scheduler keeps a pool; workers take tasks one at a time and
  /// report them done; the unfinished tasks of a worker that dies (or holds one longer than
  /// PS_TASK_TIMEOUT_MS) go back to the pool for the others.
  ///
  /// Adds n tasks to the pool and returns the id of the first (ids are consecutive and never
  /// reused). Until the first call, workers asking for a task wait. The scheduler keeps the
  /// pool; another node's call asks it (and throws ps::Error after Config::request_timeout_ms).
  int AddTasks(int n);
  /// The same for the pool of one worker group (each group has its own; a worker takes tasks
  /// from its group's pool only, and a dead worker's unfinished tasks go back to its group's).
  /// AddTasks(n) adds to the first group's pool. A group that joined a running job adds its
  /// own this way.
  int AddTasks(int n, const std::string& group);
  /// Adds n tasks to a group's pool unless tasks were ever added to it (by any node), and
  /// returns the id of the group's first task either way: every worker of a group can call it
  /// with the same n before its first NextTask, and the first call adds, so the group has its
  /// work even when the job's scheduler runs a program that knows nothing of it, and whichever
  /// of its workers dies. Task ids count across groups: a group's part i is task first + i.
  /// Adds nothing to a pool opened by OpenTasks (a stream), and returns -1 while it has none.
  int AddTasksOnce(int n, const std::string& group);
  /// One task that carries its own input (at most 64 MB: a part of a stream that only one node
  /// can read, a file name, a byte range): the worker that takes it gets the data with
  /// NextTask(&data), and so does a worker that redoes it after a death. The scheduler keeps
  /// the data until the task is done. Returns the task's id.
  int AddTask(const std::string& data, const std::string& group = "");
  /// A stream of tasks: while a group's pool is open, its workers asking for a task wait even
  /// when none is pending or out with others (more are coming); CloseTasks ends the stream,
  /// after which NextTask returns -1 once every task is done, as for a pool never opened.
  void OpenTasks(const std::string& group = "");
  void CloseTasks(const std::string& group = "");
  /// Worker only: the next task to do. Blocks while the pool is empty but tasks are still out
  /// with other workers (one may die and its tasks come back) or the pool is open; returns -1
  /// when every task is done. The scheduler answers a request it held for a quarter of
  /// Config::barrier_timeout_ms with "ask again", so the wait lasts as long as the scheduler
  /// answers; throws ps::Error when no answer comes within barrier_timeout_ms.
  int NextTask();
  /// NextTask, and the task's data (AddTask; empty for a task without) into *data.
  int NextTask(std::string* data);
  /// Worker only: a task waiting in the pool now (one a dead worker left, say), else -1 at once;
  /// never blocks on other workers. Throws ps::Error after Config::barrier_timeout_ms.
  int TryNextTask();
  /// Worker only: reports a task finished. A report for a task that was taken away (this worker
  /// was too slow or declared dead) is ignored by the scheduler.
  void TaskDone(int task);
  /// Stops the whole job with `why` (bad input that every other node would meet too, say):
  /// the scheduler tells every node, whose blocking calls then throw ps::Error(code, why) (or
  /// which exit, under PS_ON_SCHEDULER_LOSS=exit), and hands out no more tasks. Returns once
  /// the scheduler has passed the word back (or after the larger of 2 s and the heartbeat
  /// timeout); the caller then ends its own process.
  void AbortJob(const std::string& why, ErrorCode code = ErrorCode::kInvalidArgument);
  /// Scheduler only: tasks added, done, and handed out more than once (redone).
  struct TaskStats {
    int added = 0;
    int done = 0;
    int redone = 0;
  };
  TaskStats task_stats() const;

  /// Named tables (include/ps/table.h). Creates the table `spec` names on every server, or
  /// finds it when it exists with the same spec (so every worker may call it with the same
  /// spec; the first creates), and returns it with its application id. Callable on any node
  /// after Start(), also while the job runs; servers serve it through a TableServer. Throws
  /// ps::Error naming the field of a malformed spec, or when the name exists with another
  /// spec, or after Config::request_timeout_ms.
  TableSpec CreateTable(const TableSpec& spec);
  /// The table of that name as this node knows it; throws ps::Error when it knows none (another
  /// node's CreateTable reaches every node shortly after it returns).
  TableSpec Table(const std::string& name) const;
  /// Every table this node knows, in order of creation.
  std::vector<TableSpec> Tables() const;

  /// Ids of nodes the scheduler declared dead (silent beyond PS_HEARTBEAT_TIMEOUT_MS).
  std::vector<int> dead_nodes() const;
  /// Epoch of the ring this node knows (grows with every membership change).
  uint64_t ring_epoch() const;
  /// The configuration the node runs with.
  const Config& config() const;
  /// Counters of this node.
  NodeStats stats() const;
  /// The counters as one JSON object (one line).
  std::string StatsJson() const;

  /// Internal runtime (used by KVWorker/KVServer; not part of the stable API).
  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ps

#endif  // PS_NODE_H_
