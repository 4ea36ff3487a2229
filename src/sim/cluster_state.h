// The whole-cluster simulation's state and the handlers of its events (private to src/sim):
// cluster_sim.cc holds the scheduler, the servers, the adversary and the run; cluster_workers.cc
// the workers (pushes, steps with their pulls and clocks, resends) and the read checks.
#ifndef PS_SIM_CLUSTER_STATE_H_
#define PS_SIM_CLUSTER_STATE_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <ostream>
#include <queue>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "control/read_lease.h"
#include "control/ring_core.h"
#include "control/scheduler_core.h"
#include "kv/resend_timer.h"
#include "kv/server_core.h"
#include "kv/slicer.h"
#include "kv/step_gate.h"
#include "message/message.h"
#include "replication/refill.h"
#include "ring/ring.h"
#include "sim/cluster_sim.h"
#include "store/store.h"
#include "util/rng.h"

namespace ps {

// Adds the wall-clock time of its scope to *acc (measurement only: never changes a run).
class ScopeTimer {
 public:
  explicit ScopeTimer(double* acc) : acc_(acc), t0_(std::chrono::steady_clock::now()) {}
  ~ScopeTimer() {
    *acc_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  double* acc_;
  std::chrono::steady_clock::time_point t0_;
};

struct ClusterSim::State {
  static constexpr size_t kTraceKeep = 40;

  enum Kind {
    kData,         // a data message reaches a node
    kControl,      // a control message reaches a node (or the scheduler: node 0)
    kTick,         // a server's timers
    kPush,         // a worker issues a push
    kResend,       // a worker resends what is overdue
    kSchedTick,    // the scheduler's periodic look (SchedulerCore::Tick): silent nodes die
    kCrash,        // the adversary: a server dies
    kPause,        // the adversary: a server stops for a while
    kResume,       // the end of a pause
    kBeat,         // a node's heartbeat to the scheduler
    kJoin,         // the adversary: a server joins
    kLeave,        // the adversary: a server asks to leave
    kFaultsEnd,    // the faulty phase ends
    kStep,         // a worker begins a step: it reads every worker's step counter
    kCompute,      // a worker ends its step's work: it pushes its counter and calls Clock()
    kKillWorker,   // the adversary: a worker dies
    kPartition,    // the adversary: the data network splits in two
    kHeal,         // the end of a partition
    kSchedCut,     // the adversary: a server's control link to the scheduler stalls
    kSchedHeal,    // the end of a server's cut from the scheduler
    kWorkerCut,    // the adversary: a worker's control link to the scheduler stalls
    kWorkerHeal,   // the end of a worker's cut
    kSchedPause,   // the adversary: the scheduler stops for a while
    kSchedResume,  // the end of the scheduler's pause
    kBroken        // the scheduler sees a dead process's connection break
  };
  static const char* KindName(int k);

  // A control message, between the scheduler and a node, as the runtime sends it; the ring it
  // carries is resolved once per epoch (one Ring object per epoch, as a node would build).
  struct Ctl {
    pb::Control msg;
    std::shared_ptr<const Ring> ring;
  };

  struct Event {
    int64_t t;
    uint64_t seq;
    int kind, node, arg;
    std::shared_ptr<Message> msg;
    std::shared_ptr<Ctl> ctl;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };

  struct TraceLine {
    int64_t t;
    int kind, node, arg;
    std::string what;
  };

  // The int64 value a store holds for k (0 when it holds none).
  static int64_t ValueOf(StoreBase* store, Key k);
  static std::string Str(const std::shared_ptr<const Ring>& r);

  struct Server {
    int id = 0;
    std::shared_ptr<Store<int64_t>> store;
    std::unique_ptr<ServerCore> core;
    std::shared_ptr<const Ring> view, prepared;
    uint64_t prepare_seen = 0;  // the last preparation taken (RingCore::TakePrepare)
    bool crashed = false, fenced = false, gone = false, paused = false, leaving = false;
    bool long_pause = false;   // paused past half the timeout: it may be declared dead
    int64_t silent_since = 0;  // crashed, paused or cut since
    // Cut from the scheduler until this time (0: not cut; silent_since is when it began): its
    // beats wait and no echo comes back, so its read lease (control/read_lease.h) lapses.
    int64_t sched_cut_until = 0;
    std::unique_ptr<ReadLease> lease;
    uint64_t processed = 0;      // messages handled
    std::set<int> dead_workers;  // workers whose death it has heard of
    std::deque<Event> inbox;     // what arrived during a pause, in order
    bool up() const { return !crashed && !fenced && !gone; }
  };
  struct Request {
    enum Op { kPushOp, kPullOp, kClockOp } op = kPushOp;
    int64_t ts = 0;
    int attempt = 0;
    int64_t step = 0;         // the worker's step when it was issued (a clock: the step it ends)
    bool held = false;        // a clock that waits for the pushes of its step and before
    uint64_t epoch = 0;       // the ring epoch of its plan
    bool redirected = false;  // a server answered that it no longer masters a part
    std::vector<Key> keys;
    std::vector<int64_t> vals;
    std::set<int> open;  // parts not answered yet
    // Each part as sent, when, and its resends (each waits twice as long as the one before).
    struct Part {
      Message msg;
      int64_t sent_at = 0;
      int tries = 0;
    };
    std::map<int, Part> parts;
    std::map<int, std::vector<Key>> part_keys;  // a pull: the keys of each part as sent
    std::map<Key, int64_t> got;                 // a pull: the values received
  };
  struct Worker {
    int id = 0;
    int index = 0;  // its step counter is counters[index]
    std::shared_ptr<const Ring> view;
    std::map<int64_t, Request> inflight;  // by timestamp
    int64_t next_ts = 0;
    StepGate steps;                      // KVWorker's: steps ended by Clock(), and the clocks held
    std::shared_ptr<ResendTimer> timer;  // KVWorker's resend decisions (--resend timer)
    bool dead = false, declared = false;
    int64_t sched_cut_until = 0;  // cut from the scheduler until then (0: not cut)
  };

  ClusterSimOptions o;
  Rng rng;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> q;
  uint64_t seq = 0;
  int64_t now = 0;
  int64_t next_settle_check = 0;
  bool faults = true, done = false;
  ClusterSimResult res;
  std::ostream* trace_out = nullptr;
  std::atomic<uint64_t>* progress = nullptr;
  std::atomic<int64_t>* virtual_us = nullptr;
  std::deque<TraceLine> trace;

  // The scheduler: the production core, fed what the runtime would feed it.
  std::unique_ptr<SchedulerCore> core;
  const RingCore& rc() const { return *core->ring_core(); }
  int64_t sched_last_look = 0;  // its last Tick (for the gap a pause makes)
  std::set<int> declared;       // servers the scheduler declared dead (not those that left)
  std::vector<int> worker_ids;  // by index: worker i's step counter is counters[i]
  bool IsWorker(int id) const { return workers.count(id) > 0; }
  std::map<int, Server> servers;
  std::map<int, Worker> workers;
  std::map<std::pair<int, int>, int64_t> ctl_last;  // per control link: the last arrival
  int64_t next_ctl_stall = 0;                       // the next fan-out held up after this
  std::map<int, int64_t> ctl_late_last;             // per node: the last late arrival
  std::map<Key, int64_t> ref;  // every acknowledged push's values (and live workers'), summed
  // Values of dead workers' pushes that were not acknowledged: each may be applied or not.
  std::map<Key, std::vector<int64_t>> maybe;
  std::vector<Key> universe;
  // Steps: worker i adds 1 to counters[i] in each of its steps, so a read of the counters at
  // step t under ssp:S (bsp: S = 0) must see each at t - S at least (the SSP read guarantee).
  std::vector<Key> counters;
  int64_t staleness = -1;  // -1: the policy promises no bound to check (asp, psp)
  // Under PSP, its S (-1: another policy): a read may wait for a worker more than S behind.
  int64_t sampled_staleness = -1;
  int next_port = 1;
  // Every ring seen on the wire, by epoch (invariant 1: an epoch names one ring), and the
  // last one published.
  std::map<uint64_t, std::pair<std::vector<int>, std::weak_ptr<const Ring>>> rings;
  uint64_t ring_epoch = 0;

  explicit State(const ClusterSimOptions& opt) : o(opt), rng(opt.seed) {}

  // ---- events and the trace ----
  void At(int64_t t, int kind, int node, int arg = 0, std::shared_ptr<Message> m = nullptr,
          std::shared_ptr<Ctl> c = nullptr);
  void Note(int kind, int node, int arg, const std::string& what);
  void Fail(const std::string& invariant, const std::string& what);
  int64_t Delay();
  int64_t Exp(int64_t mean);

  // ---- network ----
  void SendData(Message& m);
  // late > 0: held up that long in the scheduler's sending (ctl_stall), out of the link's order.
  void SendCtl(int from, int to, std::shared_ptr<Ctl> c, int64_t late = 0);

  // ---- setup ----
  void AddServer(int id, std::shared_ptr<const Ring> view);
  // A node registers with the scheduler (a joiner: join set) from a new port, which it
  // returns; *acts: the scheduler's answer.
  int Register(Role role, bool join, SchedulerCore::Actions* acts);

  // ---- the scheduler (cluster_scheduler.cc) ----
  // Carries out what the core decided, as the node runtime's Apply does: control messages
  // sent, deaths and aborts noted, rings checked (invariant 1).
  void Apply(SchedulerCore::Actions acts);
  // The ring a control message carries, one object per epoch; a second ring under an epoch
  // already seen is a violation.
  std::shared_ptr<const Ring> RingOf(const pb::Control& c);
  void SchedulerControl(int from, const pb::Control& c);
  void SchedulerTick();
  void ConnectionBroke(int id);
  void Beat(int id);  // a node's heartbeat timer
  void SendBeat(int id);

  // ---- nodes receive ----
  std::shared_ptr<Ctl> CtlOf(pb::Control c);
  void ServerView(Server& s, std::shared_ptr<const Ring> r);
  // A server that will never run again (it left, was fenced, or crashed and was declared dead)
  // keeps only its flags: its store, core and rings go. Each one kept pinned the rings of its
  // last view, most of what runs of thousands of faults grew by.
  void Retire(Server& s);
  void ServerControl(Server& s, const Ctl& c);
  void ServerData(Server& s, Message& m);
  void WorkerControl(Worker& w, const Ctl& c);
  void WorkerReply(Worker& w, const Message& m);

  // ---- workers send ----
  // Plans r under the worker's ring (a new attempt) and sends it, unless it is a held clock:
  // that goes as planned once released (ReleaseClocks), as in KVWorker.
  void Send(Worker& w, Request* r);
  void Push(Worker& w);
  void Resend(Worker& w);
  // With --marks 1 (the default): the worker's low-water mark (its oldest request still open; every
  // request below it is complete) on a message of a request, as KVWorker puts it on every one.
  // Servers drop what their applied logs remember below it, and take a copy below it as applied.
  void Mark(const Worker& w, Message* m) const {
    if (o.marks) m->meta.set_lwm(w.inflight.empty() ? w.next_ts : w.inflight.begin()->first);
  }
  // How long until the worker's resend timer looks again.
  int64_t ResendTick(const Worker& w) const;
  void BeginStep(Worker& w);
  bool ReadWaitsOn(const Worker& w) const;  // under PSP: a read waits for w's next steps
  void Compute(Worker& w);
  // Sends the clocks whose steps' pushes are all acknowledged.
  void ReleaseClocks(Worker& w);
  void CheckRead(const Worker& w, const Request& r);
  void KillWorker();
  void Partition();
  void SchedCut();
  void SchedHeal(Server& s);
  void WorkerCut();
  void WorkerHeal(Worker& w);
  void SchedPause();
  void SchedResume();
  // The scheduler does not run until this time (0: it runs), and until its resume event ran.
  int64_t sched_paused_until = 0, sched_paused_at = 0;
  bool SchedPaused() const { return sched_paused_until != 0; }
  // The worker stops, as a real one does at a fenced refusal or ABORT (Node::Fatal).
  void FenceWorker(Worker& w, const std::string& why);
  // A worker is gone: its pushes not acknowledged may have been applied or not.
  void Abandon(Worker& w);
  // How many server failures the adversary allows before every range has its copies again.
  int FailureBudget() const { return o.max_degraded >= 0 ? o.max_degraded : o.replicas; }
  // A process dies: half the time its connections break, which the scheduler sees after a
  // network delay (a SIGKILL); the other half it falls silent (a host that lost power).
  // Returns whether they broke.
  bool BreakConnections(int id);
  // A node's first heartbeat, at a random phase of the interval.
  void FirstBeat(int id) {
    At(now + 1 + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(o.heartbeat_us))), kBeat, id);
  }
  // A cut past half the timeout counts as a failure (the server may be declared dead).
  bool LongCut(const Server& s) const {
    return s.sched_cut_until - s.silent_since > o.timeout_us / 2;
  }
  // A server cut from the scheduler: control messages to or from it wait until the cut heals.
  bool CutFromScheduler(int id) const {
    auto w = workers.find(id);
    if (w != workers.end()) return w->second.sched_cut_until > 0;
    auto it = servers.find(id);
    return it != servers.end() && it->second.sched_cut_until > 0;
  }
  struct HeldCtl {
    int from, to;
    std::shared_ptr<Ctl> ctl;
  };
  std::map<int, std::vector<HeldCtl>> held_ctl;  // per cut node, in the order sent
  // True while a partition keeps a data message from `from` to `to`.
  bool Cut(int from, int to) const {
    return !cut_side.empty() && cut_side.count(from) != cut_side.count(to);
  }
  // True when extra (a server's value minus the acknowledged pushes' sum) is the sum of some of
  // the dead workers' unacknowledged values for k, each taken at most once.
  bool Explained(int64_t extra, Key k) const;

  // ---- the adversary ----
  std::vector<int> Candidates(bool in_ring);
  int Degraded() const;
  bool MayFail();
  void Crash();
  void Pause();
  void Resume(Server& s);
  void Join();
  void Leave();

  // ---- the end ----
  bool Settled() const;
  std::string Pending() const;
  void CheckFinal();
  void Run();

  // --watch-key: a trace line whenever a server's value of the key changes, naming the event.
  std::set<int> cut_side;  // one half of the partition in force (empty: none)
  std::map<int, std::pair<int64_t, uint64_t>> watched_;  // value, sequence point
  void Watch(const Event& e);
  void Step(Event& e);
  void StepOnce(Event& e);
};

}  // namespace ps

#endif  // PS_SIM_CLUSTER_STATE_H_
