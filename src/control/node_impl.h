// The runtime behind ps::Node: transport, receive loop, membership view, barriers, customers.
#ifndef PS_CONTROL_NODE_IMPL_H_
#define PS_CONTROL_NODE_IMPL_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "control/copy_tracker.h"
#include "control/membership.h"
#include "control/metrics.h"
#include "control/metrics_http.h"
#include "control/read_lease.h"
#include "control/ring_core.h"
#include "control/scheduler_core.h"
#include "control/table_registry.h"
#include "control/task_pool.h"
#include "filter/filter_chain.h"
#include "ps/node.h"
#include "replication/refill.h"
#include "ring/ring.h"
#include "transport/van.h"

namespace ps {

/// Receives the data messages of one application id (a KVWorker or KVServer). Process runs on
/// the node's receive thread, one message at a time.
class Customer {
 public:
  virtual ~Customer() = default;
  virtual void Process(Message& msg) = 0;
  /// The scheduler declared node id dead.
  virtual void OnNodeDead(int /*id*/) {}
  /// A node joined the running job.
  virtual void OnNodeJoined(const NodeInfo& /*node*/) {}
  /// The ring changed (a server left): here is the new one.
  virtual void OnRingChange(std::shared_ptr<const Ring> /*ring*/) {}
  /// The node cannot go on (it lost the scheduler): fail what is waiting, with `why`.
  virtual void OnFatal(const std::string& /*why*/, ErrorCode /*code*/) {}
  /// A server is joining: `next` becomes the ring at the cut-over (servers pre-copy for it).
  virtual void OnPrepare(std::shared_ptr<const Ring> /*next*/) {}
  /// The barrier policy ("" = unchanged) or bounded delay (when set_delay) of worker group
  /// `group` (-1: of every group) changed.
  virtual void OnConsistency(int /*group*/, const std::string& /*policy*/, bool /*set_delay*/,
                             int /*max_delay*/) {}
  /// Adds this customer's counters to the node's metrics (receive thread, about once a second
  /// while the scheduler serves metrics; and when the customer goes).
  virtual void Metrics(MetricSet* /*out*/) {}
};

struct Node::Impl {
  explicit Impl(Config c)
      : cfg(std::move(c)),
        filters(new FilterChain(FilterOptions::Parse(cfg.compress, cfg.quantize_bits,
                                                     cfg.key_cache_mb, cfg.max_message_mb),
                                cfg.seed * 0x9E3779B97F4A7C15ull + 77)),
        lease_(cfg.heartbeat_timeout_ms, cfg.heartbeat_interval_ms),
        policy_(cfg.consistency),
        max_delay_(cfg.max_delay) {
    for (const auto& g : cfg.group_consistency) {
      const int i = cfg.GroupIndex(g.first);
      if (i >= 0) group_policy_[i] = g.second;
    }
    for (const auto& g : cfg.group_max_delay) {
      const int i = cfg.GroupIndex(g.first);
      if (i >= 0) group_delay_[i] = g.second;
    }
  }
  ~Impl() { Stop(); }

  void Start();
  // final: the end-of-job barrier of Finalize, which waits as long as the job lives.
  void Barrier(int groups, bool final = false);
  void Finalize();
  void Leave();
  void Stop();

  /// Sends msg to msg.meta.receiver (sender and magic are filled in), connecting on first use.
  bool Send(Message& msg);
  /// The current ring (never null after Start()).
  std::shared_ptr<const Ring> ring() const;
  /// Its epoch, without a lock (checked on every request).
  uint64_t ring_epoch() const { return ring_epoch_.load(std::memory_order_acquire); }
  // Workers this node knows to be dead.
  uint32_t dead_workers() const { return dead_workers_.load(std::memory_order_acquire); }
  // Whether node `id` is (or was) a worker, by the node table.
  bool IsWorker(int id) const;
  // The worker group index of node `id` (Config::worker_groups), or -1 if it is no worker.
  int WorkerGroupOf(int id) const;
  int WorkerGroupLocked(int id) const;  // mu_ held
  // The index of a worker group named by a caller of `call`: -1 for "" (every group); throws
  // ps::Error for a name that is not one of the job's groups.
  int GroupIndexOf(const std::string& group, const char* call) const;
  /// Registers the customer for app_id and hands it the messages that arrived before it.
  void AddCustomer(int app_id, Customer* c);
  void RemoveCustomer(int app_id);
  int id() const;
  /// Asks the scheduler to change every node's consistency settings (see Node).
  /// group: a worker group index, or -1 for every group.
  void SetConsistency(const std::string& policy, bool set_delay, int max_delay, int group = -1);
  /// The current barrier policy spec and bounded delay (of worker group `group`; -1: the job's,
  /// which groups without a setting of their own follow).
  std::string policy(int group = -1) const;
  int max_delay(int group = -1) const;
  /// Why this node cannot go on, or "" (a cheap check first: it is on every request's path).
  std::string fatal() const {
    if (!has_fatal_.load(std::memory_order_acquire)) return "";
    std::lock_guard<std::mutex> lk(mu_);
    return fatal_;
  }
  /// True on the thread that is handling a received message (a callback's thread).
  bool InDispatch() const { return dispatcher_.load() == std::this_thread::get_id(); }
  /// The kind of the fatal condition (meaningful when fatal() is not empty).
  ErrorCode fatal_code() const {
    std::lock_guard<std::mutex> lk(mu_);
    return fatal_code_;
  }
  /// Live worker ids (the node table minus the nodes declared dead).
  std::vector<int> LiveWorkers() const;
  /// Server: tells the scheduler that app still has `pending` ranges to fetch under the ring of
  /// `epoch` (0: it holds everything its chains give it there).
  void ReportRefill(int app, const RefillReport& r);
  Role role() const { return cfg.role; }

  /// The receive token. Whoever holds it receives and handles messages; by default the
  /// background receive thread. A thread that waits for a reply takes it over (interrupting
  /// the background thread) so the reply wakes the waiter directly, saving a thread hand-off
  /// per round trip. Returns false if another thread holds or wants it (then wait normally).
  bool AcquireReceiver();
  void ReleaseReceiver();
  /// Receives and handles at most one message; the caller holds the receive token.
  void PollOnce(int timeout_ms);
  // The receive thread's steps (public for tests): a data message to its customer (or parked
  // until the customer exists or older ones for it are handed over) ...
  void Dispatch(Message& msg);
  // ... and up to max parked messages (fewer once budget_us has passed) to customers that
  // exist now, in the order they came. Returns true when some are left. Runs between two
  // receives, so that a backlog, however slow to handle, never keeps the scheduler's
  // heartbeats waiting behind it.
  bool DrainParked(size_t max, int64_t budget_us = INT64_MAX / 2);

  Config cfg;
  std::string bind_host_;        // what the van binds (Start; addresses.h)
  std::string scheduler_addr_;   // the scheduler's host, resolved
  int reconnects_ = 0;           // to the scheduler before its node table came (Start)
  bool scheduler_seen_ = false;  // seen listening since Start (a break then means it died)
  std::unique_ptr<Van> van;
  /// The filter chain: encodes what this node sends (as configured), decodes what it receives
  /// (whatever the sender applied). Never null after construction.
  std::unique_ptr<FilterChain> filters;

  // Calls f for every named table this node knows and, until removed, for each it learns of
  // (on the receive thread); a TableServer's way of serving them.
  int AddTableListener(std::function<void(const TableSpec&)> f);
  void RemoveTableListener(int id);

 private:
  void RecvLoop();
  void HeartbeatLoop();
  // Job-wide metrics (node_metrics.cc). Nodes: collect this node's counters and send them to
  // the scheduler when it asked for them and a second has passed (or `force`, at Finalize).
  NodeStats Stats() const;
  void AbortJob(const std::string& why, ErrorCode code);
  std::atomic<bool> aborting_{false};  // this node asked for the abort: its caller exits
  void CollectMetrics(MetricSet* out);
  void SendMetrics(bool force);
  std::atomic<bool> want_metrics_{false};
  PeerTraffic peer_sent_, peer_received_;  // every message this node sent and received
  std::atomic<int64_t> metrics_sent_ms_{0};
  // Scheduler: the nodes' last metrics and the HTTP endpoint that serves them.
  void StartMetricsServer();
  void StoreMetrics(int from, const pb::Control& c);  // mu_ held
  MetricSet JobMetrics();                             // mu_ held
  bool MetricsPage(const std::string& path, std::string* body, std::string* type);
  MetricsTable metrics_table_;
  // Logs a membership or ring change and, on the scheduler, keeps it for the live page
  // (bounded).
  void JobEvent(const std::string& what, bool warning = true);
  std::mutex events_mu_;
  std::deque<std::pair<int64_t, std::string>> events_;
  const int64_t started_ms_ = NowMs();
  std::unique_ptr<MetricsHttp> metrics_http_;
  void HandleControl(const Message& msg);
  // Scheduler: does what the core decided (scheduler_core.h). With mu_ held (*lk): the node's
  // own view (table, ring, dead nodes, metrics); then, with *lk released, the rest in order.
  // Returns true when the core left the message to the runtime (kForward).
  bool Apply(SchedulerCore::Actions acts, std::unique_lock<std::mutex>* lk);
  // Scheduler: the control messages the runtime answers itself (tables, tasks added from
  // another node, consistency settings).
  void Forwarded(int from, const pb::Control& c);
  // The node table, ring and released barrier sequences as a NODE_TABLE (scheduler).
  pb::Control TableMessage() const;
  void NotifyJoined(const NodeInfo& n);
  void ReleaseBarrier(const std::vector<int>& ids, int groups, uint64_t seq);
  void SendControl(int to, pb::Control control, bool quiet = false);
  // Applies a consistency change here and hands it to the customers.
  void ApplyConsistency(const pb::Control& c);
  void NotifyDead(int id);
  void NotifyRing(std::shared_ptr<const Ring> ring);
  void NotifyPrepare(std::shared_ptr<const Ring> next);
  // Named tables (node_tables.cc): the list every node keeps, the scheduler's registry, and
  // the listeners told of each table this node had not seen (also of those it has, when they
  // start listening). Listeners run on the receive thread.
  TableSpec CreateTable(TableSpec spec);
  TableSpec Table(const std::string& name) const;
  void OnCreateTable(int from, const pb::Control& c);
  void AdoptTables(const pb::Control& c);
  void FillTables(pb::Control* c) const;  // mu_ held
  static void TablesFrom(const pb::Control& c, std::vector<TableSpec>* out);
  // A data message routed under the prepared ring: the cut-over reached its sender first.
  void AdoptNextRing(uint64_t epoch);
  // The node cannot go on (lost the scheduler, the job was aborted): wake every wait with the
  // reason, then exit (PS_ON_SCHEDULER_LOSS=exit) or let the waits throw.
  void Fatal(const std::string& why, ErrorCode code);

  enum class Holder { kNone, kBackground, kUser };
  std::mutex token_mu_;
  std::condition_variable token_cv_;
  Holder holder_ = Holder::kNone;
  bool want_ = false;
  // When a waiting thread last gave the token back. The background thread leaves it alone for
  // a short grace period, so a Push/Wait loop takes it back without interrupting anyone.
  std::chrono::steady_clock::time_point user_released_{};

  std::atomic<bool> running_{false};
  std::atomic<bool> stopped_{false};
  std::thread recv_thread_, heartbeat_thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  std::string reject_;
  std::atomic<int> my_id_{-1};  // also read without mu_ on the send path
  int my_rank_ = -1;
  std::vector<NodeInfo> nodes_;
  std::shared_ptr<const Ring> ring_;
  std::atomic<uint64_t> ring_epoch_{0};
  // Replaces the ring (mu_ held).
  void SetRing(std::shared_ptr<const Ring> r) {
    ring_ = std::move(r);
    ring_epoch_.store(ring_->epoch(), std::memory_order_release);
  }
  std::map<int, uint64_t> barrier_sent_, barrier_done_;
  // Scheduler: when each open barrier (groups, seq) was first seen open, and the next report.
  std::map<std::pair<int, uint64_t>, int64_t> barrier_open_ms_;
  int64_t next_barrier_report_ms_ = 0;
  // The scheduler's last word on a barrier this node waits in (by groups): its seq and text.
  std::map<int, std::pair<uint64_t, std::string>> barrier_wait_;
  // The scheduler's decisions (membership, ring, tasks, barriers); null on other nodes.
  std::unique_ptr<SchedulerCore> sched_;
  std::vector<int> dead_;
  // How many of dead_ are workers (requests carry it: Meta.dead_workers). Set by
  // CountDeadWorkers() with mu_ held after dead_ or nodes_ change.
  std::atomic<uint32_t> dead_workers_{0};
  void CountDeadWorkers();
  bool IsWorkerLocked(int id) const;  // mu_ held
  // Elasticity. Servers: the ring prepared for a join or leave. Scheduler: the ring's decisions
  // (from the job's start).
  std::shared_ptr<const Ring> next_ring_;
  uint64_t prepare_seen_ = 0;  // the last preparation taken (RingCore::TakePrepare)
  // How long a barrier is open before it is reported, and between reports.
  int64_t BarrierReportMs() const;
  std::string leave_error_;  // server: why the scheduler refused Leave
  // Tasks (the scheduler's pools are in sched_). Worker: the last answer.
  int task_answer_ = 0;
  std::string task_data_;  // the last answer's data
  uint64_t task_answers_ = 0;

 public:
  // What AddTasks does to a group's pool: n tasks (once: only if it never had any), one task
  // with data, or opening or closing it.
  struct TaskAdd {
    int n = 0;
    bool once = false;
    const std::string* data = nullptr;
    int pool = 0;  // 1: open, 2: close
  };
  int AddTasks(int group, const TaskAdd& add);
  int AddTasks(int n, int group, bool once = false) {
    TaskAdd a;
    a.n = n;
    a.once = once;
    return AddTasks(group, a);
  }
  // The scheduler's side of AddTasks: into the pool, and to the workers waiting for one.
  int AddToPool(int group, const TaskAdd& add);
  // A request to the scheduler that it answers (CreateTable, AddTasks on another node): its
  // number, then a wait of at most request_timeout_ms for the answer the receive thread files
  // under that number in *answers.
  uint64_t NewRequest(const char* call);
  void CheckStarted(const char* call) const;  // throws ps::Error before Start
  template <typename T>
  T AwaitAnswer(std::map<uint64_t, T>* answers, uint64_t request, const char* call) {
    std::unique_lock<std::mutex> lk(mu_);
    const bool answered = cv_.wait_for(lk, std::chrono::milliseconds(cfg.request_timeout_ms), [&] {
      return answers->count(request) > 0 || !fatal_.empty();
    });
    if (!fatal_.empty()) throw Error(fatal_code_, std::string(call) + ": " + fatal_);
    if (!answered) {
      throw Error(ErrorCode::kTimeout,
                  std::string(call) + ": the scheduler did not answer within " +
                      std::to_string(cfg.request_timeout_ms) + " ms (PS_REQUEST_TIMEOUT_MS)");
    }
    T answer = std::move((*answers)[request]);
    answers->erase(request);
    return answer;
  }
  int NextTask(bool wait = true, std::string* data = nullptr);
  void TaskDone(int task);
  Node::TaskStats GetTaskStats() const;

 private:
  // A task request held for TaskKeepMs() is answered TaskPool::kAskAgain, so that a worker's
  // wait for a task (a stream's next part, a task out with a slow worker) is never one
  // unbounded wait but a bounded one repeated while the scheduler answers.
  int64_t TaskKeepMs() const { return std::max<int64_t>(200, cfg.barrier_timeout_ms / 4); }
  // The most data one task carries (a part of a stream).
  static constexpr size_t kMaxTaskData = 64u << 20;
  std::atomic<int64_t> heard_scheduler_ms_{INT64_MAX / 2};  // ms clock; far future until Start
  std::atomic<int64_t> scheduler_broken_ms_{0};  // when the connection to it broke (0: never)
  std::string fatal_;  // why this node cannot go on (lost the scheduler, fenced, data lost)
  ErrorCode fatal_code_ = ErrorCode::kShutDown;
  std::atomic<bool> has_fatal_{false};
  std::atomic<uint64_t> filter_rejected_{0};  // messages whose frames did not decode
  std::atomic<uint64_t> alloc_dropped_{0};    // messages dropped: memory ran out handling them
  // Read lease (DESIGN §8, invariant 2; read_lease.h): a server that stalled, or that heard no
  // echo of its heartbeats for the lease, may have been declared dead and replaced: it serves
  // no request until the scheduler echoes a later beat (a dead node gets ABORT instead).
  ReadLease lease_;
  std::atomic<int64_t> beat_ran_ms_{INT64_MAX / 2};  // the heartbeat thread's last run
  std::atomic<bool> unechoed_{false};                // said that the echoes stopped
  std::atomic<uint64_t> lease_dropped_{0};
  std::atomic<bool> stalled_{false};             // this node stalled at least once
  std::atomic<uint64_t> served_since_stall_{0};  // requests it served since its last stall
  std::atomic<int64_t> last_served_us_{0};       // when its lease last let a request in
  void Stalled(int64_t gap_ms);
  // Whether a request may be served at now_us (SteadyUs).
  bool LeaseValid(int64_t now_us);
  // The heartbeat thread ran at now_ms (after a gap longer than StallMs: a stall).
  void BeatRan(int64_t now_ms);
  int64_t StallMs() const { return lease_.StallMs(); }
  static int64_t SteadyUs() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  static int64_t NowMs() { return SteadyUs() / 1000; }
  // The thread handling a received message right now (replies run callbacks there).
  std::atomic<std::thread::id> dispatcher_{};
  // Sends a message as it is (the transport, connecting on first use).
  bool SendRaw(Message& msg);
  bool SendOrConnect(Message& msg);
  std::string policy_;
  int max_delay_;
  // Worker groups whose policy or delay was set on its own (SetConsistency with a group); a
  // job-wide setting of the same field clears them.
  std::map<int, std::string> group_policy_;
  std::map<int, int> group_delay_;
  std::vector<TableSpec> tables_;
  TableRegistry table_registry_;  // the scheduler's
  uint64_t requests_ = 0;         // requests to the scheduler that it answers (AwaitAnswer)
  std::map<uint64_t, std::string> table_answers_;  // CreateTable requests answered: "" or why not
  std::map<uint64_t, int> tasks_added_;  // AddTasks requests of a non-scheduler: the first id
  std::mutex table_listen_mu_;           // the listeners (not mu_: they run outside it)
  int table_listener_ids_ = 0;
  std::map<int, std::function<void(const TableSpec&)>> table_listeners_;
  bool finalized_ = false;

  std::mutex connect_mu_;
  std::mutex cust_mu_;
  std::unordered_map<int, Customer*> customers_;
  std::map<int, MetricSet> retired_metrics_;  // last counters of customers gone, by app id
  // Messages for an app id whose customer does not exist yet (a worker may be faster than a
  // server's KVServer constructor), bounded in number and bytes; beyond, they are dropped and
  // their senders resend them. Once the customer exists the receive thread hands them to it
  // a few at a time (DrainParked), before anything newer for it.
  std::unordered_map<int, std::deque<Message>> parked_;
  size_t parked_count_ = 0;
  uint64_t parked_bytes_ = 0;
  std::atomic<bool> draining_{false};

  friend class Node;
};

}  // namespace ps

#endif  // PS_CONTROL_NODE_IMPL_H_
