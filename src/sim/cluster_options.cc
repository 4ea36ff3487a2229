// The flags of ps_sim --cluster, read in one place: the command line and the tests that name a
// run by its replay line (tests/unit/cluster_sim_test.cc) set options through the same code.
#include <cstdlib>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "ps/base.h"
#include "sim/cluster_sim.h"
#include "util/rng.h"

namespace ps {

double ClusterFlagNumber(const std::string& name, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') throw Error(name + ": not a number: '" + v + "'");
  return x;
}

namespace {

int64_t Us(const std::string& name, const std::string& v) {
  return static_cast<int64_t>(ClusterFlagNumber(name, v) * 1e6);
}

int Int(const std::string& name, const std::string& v) {
  return static_cast<int>(ClusterFlagNumber(name, v));
}

}  // namespace

bool SetClusterOption(const std::string& k, const std::string& v, ClusterSimOptions* o) {
  // Times in seconds on the command line (microseconds in the options), and counts.
  struct Field {
    const char* flag;
    int64_t ClusterSimOptions::*us;
    int ClusterSimOptions::*count;
  };
  static const Field kFields[] = {
      {"--fault-s", &ClusterSimOptions::fault_us, nullptr},
      {"--settle-s", &ClusterSimOptions::settle_us, nullptr},
      {"--crash-every-s", &ClusterSimOptions::crash_every_us, nullptr},
      {"--pause-every-s", &ClusterSimOptions::pause_every_us, nullptr},
      {"--join-every-s", &ClusterSimOptions::join_every_us, nullptr},
      {"--leave-every-s", &ClusterSimOptions::leave_every_us, nullptr},
      {"--pause-max-s", &ClusterSimOptions::pause_max_us, nullptr},
      {"--timeout-s", &ClusterSimOptions::timeout_us, nullptr},
      {"--heartbeat-s", &ClusterSimOptions::heartbeat_us, nullptr},
      {"--push-every-s", &ClusterSimOptions::push_every_us, nullptr},
      {"--kill-worker-every-s", &ClusterSimOptions::kill_worker_every_us, nullptr},
      {"--partition-every-s", &ClusterSimOptions::partition_every_us, nullptr},
      {"--partition-max-s", &ClusterSimOptions::partition_max_us, nullptr},
      {"--sched-cut-every-s", &ClusterSimOptions::sched_cut_every_us, nullptr},
      {"--sched-cut-max-s", &ClusterSimOptions::sched_cut_max_us, nullptr},
      {"--sched-pause-every-s", &ClusterSimOptions::sched_pause_every_us, nullptr},
      {"--sched-pause-max-s", &ClusterSimOptions::sched_pause_max_us, nullptr},
      {"--worker-cut-every-s", &ClusterSimOptions::worker_cut_every_us, nullptr},
      {"--ctl-stall-every-s", &ClusterSimOptions::ctl_stall_every_us, nullptr},
      {"--ctl-stall-max-s", &ClusterSimOptions::ctl_stall_max_us, nullptr},
      {"--worker-cut-max-s", &ClusterSimOptions::worker_cut_max_us, nullptr},
      {"--step-every-s", &ClusterSimOptions::step_every_us, nullptr},
      {"--resend-s", &ClusterSimOptions::resend_us, nullptr},
      {"--request-timeout-s", &ClusterSimOptions::request_timeout_us, nullptr},
      {"--servers", nullptr, &ClusterSimOptions::servers},
      {"--workers", nullptr, &ClusterSimOptions::workers},
      {"--replicas", nullptr, &ClusterSimOptions::replicas},
      {"--vnodes", nullptr, &ClusterSimOptions::vnodes},
      {"--max-degraded", nullptr, &ClusterSimOptions::max_degraded},
      {"--keys", nullptr, &ClusterSimOptions::keys},
      {"--keys-per-push", nullptr, &ClusterSimOptions::keys_per_push},
      {"--inflight", nullptr, &ClusterSimOptions::inflight},
      {"--max-worker-kills", nullptr, &ClusterSimOptions::max_worker_kills},
  };
  for (const auto& f : kFields) {
    if (k != f.flag) continue;
    if (f.us) {
      o->*f.us = Us(k, v);
    } else {
      o->*f.count = Int(k, v);
    }
    return true;
  }
  if (k == "--nodes") {  // S or S,W: servers and workers
    const size_t comma = v.find(',');
    o->servers = Int(k, v.substr(0, comma));
    if (comma != std::string::npos) o->workers = Int(k, v.substr(comma + 1));
    if (o->servers < 1 || o->workers < 1)
      throw Error(k + ": S or S,W of at least 1, not '" + v + "'");
  } else if (k == "--seed") {
    o->seed = static_cast<uint64_t>(ClusterFlagNumber(k, v));
  } else if (k == "--loss") {
    o->loss = ClusterFlagNumber(k, v);
  } else if (k == "--dup") {
    o->dup = ClusterFlagNumber(k, v);
  } else if (k == "--latency-us") {
    o->latency_us = static_cast<int64_t>(ClusterFlagNumber(k, v));
  } else if (k == "--jitter-us") {
    o->jitter_us = static_cast<int64_t>(ClusterFlagNumber(k, v));
  } else if (k == "--watch-key") {
    char* end = nullptr;  // a key: all 64 bits, not a double's 53
    o->watch_key = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0') throw Error(k + ": not a key: '" + v + "'");
  } else if (k == "--rule") {
    o->rule = v;
  } else if (k == "--policy") {
    o->policy = v;
  } else if (k == "--marks") {
    if (v != "0" && v != "1") throw Error(k + ": 0 or 1, not '" + v + "'");
    o->marks = v == "1";
  } else if (k == "--resend") {
    if (v != "fixed" && v != "timer" && v != "mixed") {
      throw Error(k + ": 'fixed', 'timer' or 'mixed', not '" + v + "'");
    }
    o->resend = v;
  } else {
    return false;
  }
  return true;
}

ClusterSimOptions ClusterOptionsFromFlags(const std::string& flags) {
  ClusterSimOptions o;
  std::istringstream in(flags);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "--trace") {
      o.trace = true;
      continue;
    }
    if (i + 1 >= words.size()) throw Error(words[i] + ": missing value");
    if (!SetClusterOption(words[i], words[i + 1], &o)) {
      throw Error("unknown option " + words[i] + " (ps_sim --cluster --help lists them)");
    }
    ++i;
  }
  return o;
}

std::string FuzzFlags(uint64_t seed) {
  // Its own stream, apart from the run's (which the seed itself seeds).
  Rng r(HashKey(seed ^ 0x6675'7a7a'6d69'7831ull));
  std::ostringstream f;
  f.setf(std::ios::fixed);
  f.precision(2);
  auto pick = [&r](std::initializer_list<const char*> xs) {
    return *(xs.begin() + r.Below(xs.size()));
  };
  auto between = [&r](double lo, double hi) { return lo + (hi - lo) * r.Uniform(); };
  const int servers = 3 + static_cast<int>(r.Below(10));
  const int workers = 1 + static_cast<int>(r.Below(8));
  f << "--servers " << servers << " --workers " << workers << " --replicas " << 1 + r.Below(2)
    << " --vnodes " << pick({"1", "4", "8", "32"}) << " --fault-s " << between(3, 30) << " --loss "
    << pick({"0", "0.02", "0.05", "0.1"}) << " --dup " << pick({"0", "0.02", "0.05"})
    << " --latency-us " << pick({"10", "100", "1000", "5000"}) << " --jitter-us "
    << pick({"0", "1000", "10000", "40000"}) << " --keys " << pick({"200", "2000", "20000"})
    << " --keys-per-push " << pick({"1", "16", "100"}) << " --inflight " << pick({"1", "4", "16"})
    << " --push-every-s " << pick({"0.001", "0.005", "0.05"}) << " --step-every-s "
    << pick({"0", "0.005", "0.02", "0.1"}) << " --policy "
    << pick({"bsp", "ssp:1", "ssp:1", "ssp:3", "asp", "psp:2:1"}) << " --rule "
    << pick({"sum", "sum", "sum", "assign"}) << " --resend " << pick({"fixed", "timer"});
  // Each kind of fault is on or off in a run; the server faults more often than the rest.
  struct Fault {
    const char* flag;
    double on, lo, hi;
  };
  static const Fault kFaults[] = {
      {"--crash-every-s", 0.75, 0.3, 5},      {"--pause-every-s", 0.75, 0.3, 5},
      {"--join-every-s", 0.75, 0.3, 5},       {"--leave-every-s", 0.75, 0.3, 5},
      {"--kill-worker-every-s", 0.3, 0.5, 6}, {"--partition-every-s", 0.3, 0.5, 4},
      {"--sched-cut-every-s", 0.3, 0.5, 4},   {"--sched-pause-every-s", 0.3, 0.5, 4},
      {"--worker-cut-every-s", 0.3, 0.5, 4},  {"--ctl-stall-every-s", 0.3, 0.2, 3},
  };
  for (const Fault& x : kFaults) {
    const bool on = r.Uniform() < x.on;
    f << " " << x.flag << " " << (on ? between(x.lo, x.hi) : 0.0);
  }
  f << " --pause-max-s " << between(0.2, 4) << " --max-worker-kills " << r.Below(workers);
  return f.str();
}

}  // namespace ps
