// ps_sim --cluster: the whole-cluster simulation with its seeded adversary (src/sim/
// cluster_sim.h). One JSON line per seed; a violated invariant prints its report, the command
// that replays the run, and exits 1.
#include <glog/logging.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "ps/base.h"
#include "sim/cluster_sim.h"

namespace ps {
namespace {

// The process's resident memory in MB (/proc/self/statm), 0 where there is none.
double RssMb() {
  std::ifstream f("/proc/self/statm");
  double pages = 0, resident = 0;
  if (!(f >> pages >> resident)) return 0;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// The process's peak resident memory so far in MB (of every seed run so far).
double PeakRssMb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024;
}

const char kClusterUsage[] =
    "ps_sim --cluster: the scheduler's ring logic, real server cores (chain replication,\n"
    "refill, hand-off) and workers that push and resend, in one process on virtual time, with\n"
    "a seeded adversary (docs/fault-tolerance.md, \"The whole-cluster simulation\").\n"
    "\n"
    "ps_sim --fuzz [flags]: the same, but each seed draws its own mix of faults, their rates,\n"
    "the cluster's shape and its work (swarm testing); flags given override the draw. Each\n"
    "JSON line names its run's flags; a failure prints the --cluster line that replays it.\n"
    "\n"
    "  --servers S --workers W --replicas K --vnodes V\n"
    "  --seed S             the first seed (default 1)\n"
    "  --seeds N            run N seeds from --seed on (default 1; 1000 with --fuzz); stops at\n"
    "                       the first failure\n"
    "  --nodes S[,W]        S servers (and W workers)\n"
    "  --fault-s T          seconds (virtual) of faults, then the run must settle\n"
    "  --settle-s T         the bound on settling (default 60)\n"
    "  --loss P --dup P     data messages lost and duplicated during the faults\n"
    "  --latency-us L --jitter-us J\n"
    "  --crash-every-s T --pause-every-s T --join-every-s T --leave-every-s T\n"
    "                       mean time between faults of each kind (0: none)\n"
    "  --pause-max-s T      the longest pause (past --timeout-s the server is declared dead)\n"
    "  --timeout-s T --heartbeat-s T\n"
    "  --max-degraded N     at most N server failures before every range has its copies again\n"
    "                       (default k; more can end in the scheduler's abort, a legitimate end)\n"
    "  --keys N --keys-per-push N --push-every-s T --inflight N --resend-s T\n"
    "  --resend fixed|timer|mixed\n"
    "                       workers resend after --resend-s doubled per try (fixed), by\n"
    "                       KVWorker's ResendTimer (round trips, back-off capped at\n"
    "                       --request-timeout-s / 8, default 12, per-server budgets), or by one\n"
    "                       of the two per run, drawn from the seed (mixed, the default)\n"
    "  --marks 0|1          workers put their low-water mark on their messages, as KVWorker\n"
    "                       does (default 1)\n"
    "  --kill-worker-every-s T --max-worker-kills N\n"
    "                       workers killed (default none; at most N, default 2, never the last)\n"
    "  --partition-every-s T --partition-max-s D\n"
    "                       the data network split in two halves at random for up to D (default\n"
    "                       1.5) seconds (default none); the scheduler's links stay up\n"
    "  --sched-cut-every-s T --sched-cut-max-s D\n"
    "                       one server cut from the scheduler for up to D (default 2.5) seconds\n"
    "                       (default none): its data links stay up, it serves until its lease\n"
    "                       lapses, and past --timeout-s it is declared dead\n"
    "  --sched-pause-every-s T --sched-pause-max-s D\n"
    "                       the scheduler stops for up to D (default 3) seconds (default none):\n"
    "                       no beat is read or echoed, every server's lease lapses\n"
    "  --worker-cut-every-s T --worker-cut-max-s D\n"
    "                       the same for one worker: it pushes on; declared dead, it is fenced\n"
    "                       by the servers (a death: counted in --max-worker-kills)\n"
    "  --ctl-stall-every-s T --ctl-stall-max-s D\n"
    "                       the scheduler's sending held up (default never): a fan-out reaches\n"
    "                       the nodes after a random one of them up to D (default 0.3) seconds\n"
    "                       late, and the next decisions' messages may overtake it\n"
    "  --step-every-s T     workers' steps: read every step counter, work for about T, add 1 to\n"
    "                       their own and call Clock() (default 0.02; 0: no steps)\n"
    "  --rule sum|assign    the servers' update rule (default sum; assign: the last write wins,\n"
    "                       so replicas that apply a range's updates out of order differ)\n"
    "  --policy P           the servers' barrier policy (default ssp:1); under bsp and ssp:S\n"
    "                       every read is checked against the SSP read guarantee\n"
    "  --hang-s T           a seed that makes no event for T wall-clock seconds is a hang\n"
    "                       (default 30)\n"
    "  --progress-s T       every T wall-clock seconds a line on stderr: the seed, its events\n"
    "                       and virtual time so far, and the process's memory (default none)\n"
    "  --trace              every event of the run on stdout\n"
    "  --watch-key K        with --trace: every change of key K's value on a server\n";

}  // namespace

int ClusterMain(int argc, char** argv) {
  const bool fuzz = std::string(argv[1]) == "--fuzz";
  int seeds = fuzz ? 1000 : 1, hang_s = 30, progress_s = 0;
  // The options' flags go to ClusterOptionsFromFlags, as the tests' do; --seeds and --hang-s
  // are the command's own. The replay line is every flag but the seeds (and --trace, which it
  // adds).
  std::string flags, replay;
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--help" || k == "-h") {
      std::cout << kClusterUsage;
      return 0;
    }
    if (k == "--trace") {
      flags += " " + k;
      continue;
    }
    if (i + 1 >= argc) throw Error(k + ": missing value");
    const std::string v = argv[++i];
    if (k != "--seed" && k != "--seeds") replay += " " + k + " " + v;
    if (k == "--hang-s") {
      hang_s = static_cast<int>(ClusterFlagNumber(k, v));
    } else if (k == "--progress-s") {
      progress_s = static_cast<int>(ClusterFlagNumber(k, v));
    } else if (k == "--seeds") {
      seeds = static_cast<int>(ClusterFlagNumber(k, v));
    } else {
      flags += " " + k + " " + v;
    }
  }
  ClusterSimOptions o = ClusterOptionsFromFlags(flags);  // checks the flags before any run
  if (seeds < 1) throw Error("--seeds must be at least 1");
  // The servers' own log lines (refills, take-overs) would drown the JSON lines: errors only,
  // unless PS_SIM_LOG is set (to follow a replayed run).
  if (!getenv("PS_SIM_LOG")) FLAGS_minloglevel = 2;
  const uint64_t first = o.seed;
  // A watchdog: code under test that loops for ever inside one event would hang the hunt.
  std::atomic<uint64_t> progress{0}, current{first};
  std::atomic<int64_t> virtual_us{0};
  std::thread([&progress, &current, &virtual_us, hang_s, progress_s, &replay] {
    uint64_t last = ~uint64_t{0};
    int still = 0;
    for (int tick = 1;; ++tick) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      const uint64_t p = progress.load(std::memory_order_relaxed);
      if (progress_s > 0 && tick % progress_s == 0) {
        std::cerr << "{\"progress\":\"cluster_sim\",\"seed\":" << current.load()
                  << ",\"events\":" << p << ",\"virtual_s\":" << virtual_us.load() / 1e6
                  << ",\"wall_s\":" << tick << ",\"rss_mb\":" << RssMb() << "}" << std::endl;
      }
      still = p == last ? still + 1 : 0;
      last = p;
      if (still >= hang_s) {
        std::cerr << "invariant violated: liveness: seed " << current.load() << " made no event in "
                  << hang_s << " s after " << p
                  << " events (an endless loop inside one event of the code under test)\n"
                  << "replay: ps_sim --cluster --seed " << current.load() << replay << " --trace\n";
        std::_Exit(1);
      }
    }
  }).detach();
  for (int n = 0; n < seeds; ++n) {
    const uint64_t seed = first + static_cast<uint64_t>(n);
    // A fuzzed run's drawn flags come first, so that the command line's own override them; the
    // replay line names them all and replays the run with --cluster.
    const std::string drawn = fuzz ? " " + FuzzFlags(seed) : "";
    if (fuzz) o = ClusterOptionsFromFlags(drawn + flags);
    o.seed = seed;
    current = o.seed;
    progress = 0;
    ClusterSim sim(o);
    const auto t0 = std::chrono::steady_clock::now();
    const ClusterSimResult r = sim.Run(&std::cout, &progress, &virtual_us);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "{\"bench\":\"cluster_sim\",\"seed\":" << o.seed
              << ",\"ok\":" << (r.ok ? "true" : "false")
              << ",\"aborted\":" << (r.aborted ? "true" : "false") << ",\"events\":" << r.events
              << ",\"events_per_s\":" << static_cast<uint64_t>(r.events / std::max(sec, 1e-9))
              << ",\"messages\":" << r.messages << ",\"dropped\":" << r.dropped
              << ",\"duplicated\":" << r.duplicated << ",\"pushes\":" << r.pushes
              << ",\"steps\":" << r.steps << ",\"reads\":" << r.reads
              << ",\"resends\":" << r.resends << ",\"redirects\":" << r.redirects
              << ",\"crashes\":" << r.crashes << ",\"pauses\":" << r.pauses
              << ",\"long_pauses\":" << r.long_pauses << ",\"joins\":" << r.joins
              << ",\"leaves\":" << r.leaves << ",\"refused_leaves\":" << r.refused_leaves
              << ",\"worker_kills\":" << r.worker_kills << ",\"partitions\":" << r.partitions
              << ",\"partition_drops\":" << r.partition_drops << ",\"sched_cuts\":" << r.sched_cuts
              << ",\"ctl_stalls\":" << r.ctl_stalls
              << ",\"sched_cut_deaths\":" << r.sched_cut_deaths
              << ",\"worker_cuts\":" << r.worker_cuts
              << ",\"worker_cut_deaths\":" << r.worker_cut_deaths
              << ",\"fenced_workers\":" << r.fenced_workers
              << ",\"sched_pauses\":" << r.sched_pauses << ",\"lease_drops\":" << r.lease_drops
              << ",\"declared_servers\":" << r.declared_servers << ",\"epochs\":" << r.epochs
              << ",\"refill_messages\":" << r.refill_messages
              << ",\"handover_messages\":" << r.handover_messages
              << ",\"copy_messages\":" << r.copy_messages
              << ",\"relayed_replies\":" << r.relayed_replies
              << ",\"scheduler_s\":" << r.scheduler_s
              << ",\"scheduler_beats_s\":" << r.scheduler_beats_s
              << ",\"scheduler_start_s\":" << r.scheduler_start_s
              << ",\"ring_change_s\":" << r.ring_change_s
              << ",\"final_servers\":" << r.final_servers << ",\"settle_ms\":" << r.settle_us / 1000
              << ",\"virtual_s\":" << r.end_us / 1e6 << ",\"peak_rss_mb\":" << PeakRssMb();
    if (fuzz) std::cout << ",\"flags\":\"" << (drawn + replay).substr(1) << "\"";
    std::cout << "}" << std::endl;
    if (!r.ok) {
      std::cerr << r.failure << "replay: ps_sim --cluster --seed " << o.seed << drawn << replay
                << " --trace\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace ps
