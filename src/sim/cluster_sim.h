// A whole cluster in one process on virtual time, with a seeded adversary (issue 21): the
// scheduler's ring decisions (RingCore), the servers' request, replication and hand-off logic
// (ServerCore with its ChainReplicator and refill) and workers that push, resend and plan again
// as the real ones do, over a simulated network that delays, reorders, drops and duplicates
// data messages. The adversary crashes and pauses servers (a pause past the heartbeat timeout
// gets the server declared dead and fenced), has servers join and leave, and stops at a set
// time; then the run must settle. Invariants are checked as the run goes and at its end; a
// violation names the invariant (DESIGN §8), the seed and the last events. Same options, same
// seed: the same run, event for event.
#ifndef PS_SIM_CLUSTER_SIM_H_
#define PS_SIM_CLUSTER_SIM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

namespace ps {

struct ClusterSimOptions {
  int servers = 5;
  int workers = 4;
  int replicas = 2;  // k
  int vnodes = 8;
  uint64_t seed = 1;
  // The faulty phase, then at most this long (virtual) for every request to complete and
  // every range to have its copies (liveness).
  int64_t fault_us = 10000000;
  int64_t settle_us = 60000000;
  // Network: one-way latency plus a uniform jitter (messages of one link overtake each other,
  // as a delayed message does under the fault van); data messages are lost and duplicated at
  // these rates during the faulty phase. Control messages (scheduler to node) arrive in order.
  int64_t latency_us = 100;
  int64_t jitter_us = 1000;
  double loss = 0.02;
  double dup = 0.02;
  // Mean virtual time between faults of each kind (0: none).
  int64_t crash_every_us = 3000000;
  int64_t pause_every_us = 3000000;
  int64_t join_every_us = 4000000;
  int64_t leave_every_us = 5000000;
  // Workers killed (0: none), at most max_worker_kills per run and never the last one: the
  // scheduler declares them dead after timeout_us; their pushes not yet acknowledged may or may
  // not be applied (each at most once).
  int64_t kill_worker_every_us = 0;
  int max_worker_kills = 2;
  // Partitions of the data network (0: none): the live servers and workers split in two at
  // random, and no data message crosses between the halves for up to partition_max_us
  // (uniform). The scheduler's connections stay up (a switch between racks fails, the
  // control network does not), so nobody is declared dead for it; messages on their way when
  // it begins still arrive. One partition at a time; the last heals when the faults end.
  int64_t partition_every_us = 0;
  int64_t partition_max_us = 1500000;
  // Servers cut from the scheduler (0: none): for up to sched_cut_max_us (uniform) nothing
  // passes between the scheduler and one server (its heartbeats and refill reports, the
  // scheduler's rings wait, as on a control connection that stalls) while its data links stay
  // up: it goes on running and serves until its lease on the scheduler's heartbeat echoes
  // lapses. Past timeout_us the scheduler declares it dead. One server at a time.
  int64_t sched_cut_every_us = 0;
  int64_t sched_cut_max_us = 2500000;
  // Workers cut from the scheduler (0: none), the same for a worker: its beats and the
  // scheduler's notices wait while it goes on pushing, reading and clocking over its data
  // links. Past timeout_us the scheduler declares it dead, the servers refuse what it still
  // sends (fencing, DESIGN §8) and it stops at the first refusal or when the link is back. A
  // death counts against max_worker_kills. One worker at a time.
  int64_t worker_cut_every_us = 0;
  int64_t worker_cut_max_us = 2500000;
  // Scheduler pauses (0: none): the scheduler does not run for up to sched_pause_max_us
  // (uniform; SIGSTOP, swapped out, starved): it reads no beat or report, detects nothing,
  // decides nothing and echoes no beat, so every server's read lease lapses. When it runs
  // again, the pause is nobody's silence (Membership::Paused: the time is added to every
  // node's last word), and what waited is handled in order.
  int64_t sched_pause_every_us = 0;
  int64_t sched_pause_max_us = 3000000;
  // The scheduler's sending held up (0: never): the runtime sends a decision's messages after
  // letting go of its lock, one recipient after another, so a send that blocks on a slow peer
  // holds the rest of that fan-out back while the next decision's messages go out. About every
  // ctl_stall_every_us, the next fan-out to several nodes reaches those after a random one of
  // them up to ctl_stall_max_us (uniform) late, and later messages may overtake it.
  int64_t ctl_stall_every_us = 0;
  int64_t ctl_stall_max_us = 300000;
  // Pauses last up to this long (uniform); past timeout_us the server is declared dead.
  int64_t pause_max_us = 2500000;
  int64_t heartbeat_us = 100000;
  int64_t timeout_us = 1000000;
  // Workers: a push of keys_per_push keys out of `keys` every push_every_us, at most
  // `inflight` unacknowledged at once; parts not acknowledged within resend_us are sent
  // again under the worker's current ring.
  int keys = 2000;
  int keys_per_push = 16;
  int64_t push_every_us = 5000;
  int inflight = 4;
  int64_t resend_us = 200000;
  // How workers decide to resend: "fixed" (resend_us doubled per try, at most 8 times),
  // "timer" (KVWorker's own ResendTimer, src/kv/resend_timer.h, on virtual time: round-trip
  // estimates, back-off capped at an eighth of request_timeout_us, per-server budgets) or
  // "mixed" (one or the other for the whole run, drawn from the seed: half the runs make
  // KVWorker's own decisions, half the eager resends of the fixed rule, whose extra copies
  // and duplicates find races that the timer's rarer resends leave alone).
  std::string resend = "mixed";
  int64_t request_timeout_us = 12000000;
  int64_t tick_us = 200000;  // servers' refill and copy timers
  // Steps (0: none): each worker reads every worker's step counter at the start of a step
  // (held by the servers' barrier policy), works for a mean of step_every_us, adds 1 to its own
  // counter and calls Clock(), whose message waits until its step's pushes are acknowledged.
  // Under bsp or ssp:S a read at step t must see every counter at t - S at least.
  int64_t step_every_us = 20000;
  std::string policy = "ssp:1";
  // The servers' update rule: "sum" (the end check compares every chain member with the exact
  // sum of the pushes) or "assign" (the last write wins: the order of a range's updates decides
  // the value, so every chain member must have applied them in its master's order; the end
  // check compares the members' slots, and reads are not checked: the step counters count
  // under the sum rule only).
  std::string rule = "sum";
  // At most this many server failures since every range last had all its copies (more may
  // lose data: the run then ends in the abort the scheduler must raise). -1: k.
  int max_degraded = -1;
  // A run that makes more than this many events within one second of virtual time, for each
  // 16 nodes (beyond every node's heartbeats and their echoes), is a failure: a storm of
  // messages that beget messages holds the virtual time still. Runs of the defaults make about
  // 10 000 events a virtual second; the heaviest work that --fuzz draws about 400 000 with 12
  // nodes and 5 million with 70, 1000 servers and 10 000 workers about 1 million. (A budget
  // for the whole run, as before, failed healthy runs of heavy work or of 1000 servers; a
  // storm that lets time pass meets the settle bound.)
  uint64_t max_events = 5000000;
  // Whether workers put their low-water mark on their messages, as KVWorker does (servers then
  // trim their applied logs by it and take a request below it as applied where they have no
  // record of it). Without it a server's applied log never shrinks (runs of minutes of faults
  // slow down and grow) and the marks' own path is never walked: it lost copies (seeds 9 and
  // 320 of ClusterSimTest, docs/fault-tolerance.md).
  bool marks = true;
  bool trace = false;      // every event to the trace stream
  uint64_t watch_key = 0;  // when set: a trace line for every change of this key on a server
};

struct ClusterSimResult {
  bool ok = true;
  std::string failure;  // the invariant violated, the seed, the last events
  bool aborted = false;
  std::string abort;  // the scheduler's abort (a legitimate end when data was lost)
  uint64_t events = 0, messages = 0, dropped = 0, duplicated = 0;
  uint64_t pushes = 0, resends = 0, redirects = 0;
  uint64_t steps = 0, reads = 0;  // Clock() calls, and reads checked against the guarantee
  uint64_t crashes = 0, pauses = 0, long_pauses = 0, joins = 0, leaves = 0, refused_leaves = 0;
  uint64_t worker_kills = 0;
  uint64_t partitions = 0, partition_drops = 0;  // partitions made, messages they stopped
  uint64_t ctl_stalls = 0;  // fan-outs of the scheduler held up part-way (--ctl-stall-every-s)
  uint64_t sched_cuts = 0, sched_cut_deaths = 0;  // servers cut from the scheduler, declared dead
  // Workers cut from the scheduler, of them declared dead, and fenced workers (stopped by a
  // server's refusal or by the scheduler once the link was back).
  uint64_t worker_cuts = 0, worker_cut_deaths = 0, fenced_workers = 0;
  uint64_t sched_pauses = 0;                            // the scheduler's own pauses
  uint64_t declared_servers = 0, declared_workers = 0;  // declared dead by the scheduler
  uint64_t lease_drops = 0;  // requests a server dropped because its read lease had lapsed
  uint64_t epochs = 0;       // the last epoch issued
  // Messages of the membership protocol (range copies and their requests, hand-over reports)
  // and chain copies with their acknowledgements, and the wall-clock seconds spent in the
  // scheduler's decisions (its core's calls but the routine ones below) and in the servers'
  // handling of a new or prepared ring (their refill and hand-over plans): what a membership change
  // costs as the cluster grows.
  uint64_t refill_messages = 0, handover_messages = 0, copy_messages = 0;
  uint64_t relayed_replies = 0;  // push replies a chain's tail sent for its master
  double scheduler_s = 0, ring_change_s = 0;
  // The scheduler's routine work, apart: heartbeats and the periodic looks that found nothing.
  double scheduler_beats_s = 0;
  // Of scheduler_s, the registration of every node at the start (not a membership change).
  double scheduler_start_s = 0;
  int64_t settle_us = 0;  // virtual time from the end of the faults until all settled
  int64_t end_us = 0;     // virtual time at the end
  int final_servers = 0;
};

/// The number a ps_sim flag's value holds; throws ps::Error naming the flag if it holds none.
double ClusterFlagNumber(const std::string& flag, const std::string& value);
/// Sets the option a ps_sim --cluster flag names (`flag` "--rule", `value` "assign"; times in
/// seconds as on the command line); false for a flag that names none (ps_sim's own --seeds,
/// --hang-s). Throws ps::Error naming the flag for a value that is not a number.
bool SetClusterOption(const std::string& flag, const std::string& value, ClusterSimOptions* o);
/// Options from a line of ps_sim --cluster flags ("--rule assign --servers 8 --trace"), the
/// rest at their defaults: a run named by the line that replays it. Throws ps::Error for an
/// unknown flag or a bad value.
ClusterSimOptions ClusterOptionsFromFlags(const std::string& flags);
/// The flags of ps_sim --fuzz's run of `seed` (swarm testing, as FoundationDB's simulation
/// does: each run draws which faults it suffers and how often, and the shape of the cluster
/// and its work, so that faults that mask each other in one mix meet alone in another). The
/// same seed always draws the same line; `--cluster --seed S` with it replays the run.
std::string FuzzFlags(uint64_t seed);

class ClusterSim {
 public:
  /// Throws ps::Error for an unusable option (naming it).
  explicit ClusterSim(const ClusterSimOptions& options);
  ~ClusterSim();
  /// Runs the simulation to its end; trace (when not null) gets one line per event if
  /// options.trace. progress (when not null) counts the events, for a watchdog on another
  /// thread: code under test that loops for ever inside one event stops the virtual clock;
  /// virtual_us (when not null) follows the virtual clock, for progress reports of long runs.
  ClusterSimResult Run(std::ostream* trace = nullptr, std::atomic<uint64_t>* progress = nullptr,
                       std::atomic<int64_t>* virtual_us = nullptr);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace ps

#endif  // PS_SIM_CLUSTER_SIM_H_
