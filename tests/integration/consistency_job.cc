// The job behind the consistency integration tests (tests/integration/run_consistency.py).
// Every worker owns one int64 key and adds 1 to it per step; before each step it pulls every
// worker's key, so the values it reads say how far each other worker had got. The barrier
// policy comes from PS_CONSISTENCY; --check says which guarantee to assert on every read:
//
//   ssp:S  a read at step t sees every update of every live worker from steps <= t-S-1
//          (value >= t - S), i.e. no worker is more than S steps ahead of the slowest
//   lock   BSP lockstep: every live worker's value is t or t+1 at a read of step t
//   none   no per-read check (ASP: the summary lines show it never waited)
//
// A worker given --stall-rank stops at --stall-step, prints "STALLED pid=N" and sleeps; the
// test kills it with SIGKILL. At the end the survivors check the exact sums and every node
// prints one JSON summary line.
//
// With --spread N every read also asks for N keys spread over the key space (no worker pushes
// them), so it reaches every server, a server that joins the running job too; a worker prints
// "STEPS DONE" once its steps' pushes are all acknowledged.
//
//   consistency_job --steps N --check ssp:S|lock|none [--straggler-rank R --straggler-ms M]
//                   [--stall-rank R --stall-step T] [--spread N] [--seed S]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ps/ps.h"

namespace {

struct Options {
  int steps = 20;
  std::string check = "none";
  int straggler_rank = -1;
  int straggler_ms = 0;
  int stall_rank = -1;
  int stall_step = -1;
  int spread = 0;
  uint64_t seed = 1;
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--steps") {
      o.steps = std::stoi(v);
    } else if (k == "--check") {
      o.check = v;
    } else if (k == "--straggler-rank") {
      o.straggler_rank = std::stoi(v);
    } else if (k == "--straggler-ms") {
      o.straggler_ms = std::stoi(v);
    } else if (k == "--stall-rank") {
      o.stall_rank = std::stoi(v);
    } else if (k == "--stall-step") {
      o.stall_step = std::stoi(v);
    } else if (k == "--spread") {
      o.spread = std::stoi(v);
    } else if (k == "--seed") {
      o.seed = std::stoull(v);
    } else {
      std::cerr << "unknown option " << k << "\n";
      std::exit(2);
    }
  }
  return o;
}

ps::Key KeyOf(int rank) { return static_cast<ps::Key>(rank) << 59; }

int RunWorker(ps::Node* node, const Options& o) {
  const int W = node->num_workers(), rank = node->rank();
  ps::KVWorker<int64_t> kv(node);
  std::set<ps::Key> all;
  for (int v = 0; v < W; ++v) all.insert(KeyOf(v));
  for (int i = 0; i < o.spread; ++i) all.insert(ps::kMaxKey / o.spread * i + 1);
  ps::SArray<ps::Key> keys;  // sorted: the workers' keys and the spread ones
  for (ps::Key k : all) keys.push_back(k);
  std::vector<size_t> at(W);  // where worker v's key is in keys (and in a read's values)
  for (int v = 0; v < W; ++v) {
    at[v] =
        static_cast<size_t>(std::lower_bound(keys.begin(), keys.end(), KeyOf(v)) - keys.begin());
  }
  int64_t s = -1;
  if (o.check.rfind("ssp:", 0) == 0) s = std::stoll(o.check.substr(4));
  int64_t max_ahead = 0;
  int violations = 0;
  uint64_t rng = o.seed * 7919 + rank;
  std::vector<int64_t> pushes;
  for (int64_t t = 0; t < o.steps; ++t) {
    if (rank == o.stall_rank && t == o.stall_step) {
      std::printf("STALLED pid=%d step=%lld\n", static_cast<int>(getpid()),
                  static_cast<long long>(t));
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::hours(1));
    }
    if (rank == 0) {
      std::printf("STEP %lld\n", static_cast<long long>(t));
      std::fflush(stdout);
    }
    ps::SArray<int64_t> vals;
    kv.Wait(kv.Pull(keys, &vals));
    int64_t slowest = INT64_MAX;
    for (int v = 0; v < W; ++v) {
      // The stalled worker is killed; its key stops growing and it is out of every guarantee
      // (this node may learn of its death after the server that let this read through).
      if (v == o.stall_rank && t > o.stall_step) continue;
      // At its last step the stalled worker's final push and clock may die with it, unsent
      // (SIGKILL right after it stalls, while they still sit in its transport queue); a read
      // released by its death then sees one step less from it, and nothing more or less.
      const bool dying = v == o.stall_rank && t == o.stall_step;
      const int64_t floor = dying ? t - 1 : t;
      const int64_t got = vals[at[v]];
      if (!dying) slowest = std::min(slowest, got);
      bool bad = (s >= 0 && got < t - s) || (o.check == "lock" && (got < floor || got > t + 1));
      if (bad && violations++ < 10) {
        std::printf("VIOLATION worker %d at step %lld read %lld for worker %d (check %s)\n", rank,
                    static_cast<long long>(t), static_cast<long long>(got), v, o.check.c_str());
      }
    }
    if (slowest != INT64_MAX) max_ahead = std::max(max_ahead, t - slowest);
    int ms = rank == o.straggler_rank
                 ? o.straggler_ms
                 : static_cast<int>((rng = rng * 6364136223846793005ull + 1) >> 60);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    pushes.push_back(kv.Push(ps::SArray<ps::Key>(1, KeyOf(rank)), ps::SArray<int64_t>(1, 1)));
    kv.Clock();
  }
  // The last pushes may still be in flight (lost and resent): the exact check below needs them.
  for (int64_t ts : pushes) kv.Wait(ts);
  std::printf("STEPS DONE\n");
  std::fflush(stdout);
  auto b = kv.barrier_stats();
  // Exact reference after everyone is done: each live worker pushed exactly `steps` ones.
  node->Barrier(ps::kWorkerGroup);
  ps::SArray<int64_t> vals;
  kv.Wait(kv.Pull(keys, &vals));
  for (int v = 0; v < W; ++v) {
    if (v == o.stall_rank) continue;
    if (vals[at[v]] != o.steps) {
      std::printf("VIOLATION final value of worker %d is %lld, want %d\n", v,
                  static_cast<long long>(vals[at[v]]), o.steps);
      violations++;
    }
  }
  std::printf(
      "SUMMARY {\"role\":\"worker\",\"rank\":%d,\"steps\":%lld,\"max_ahead\":%lld,"
      "\"barrier_wait_s\":%.4f,\"delay_wait_s\":%.4f,\"elapsed_s\":%.4f,\"violations\":%d}"
      " resends=%llu\n",
      rank, static_cast<long long>(b.step), static_cast<long long>(max_ahead), b.barrier_wait_s,
      b.delay_wait_s, b.elapsed_s, violations, static_cast<unsigned long long>(kv.Resends()));
  std::fflush(stdout);
  return violations ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = Parse(argc, argv);
  try {
    ps::Node node(ps::Config::FromEnv());
    node.Start();
    int rc = 0;
    if (node.role() == ps::Role::kWorker) {
      rc = RunWorker(&node, o);
    } else if (node.role() == ps::Role::kServer) {
      ps::KVServer<int64_t> server(&node);
      node.Finalize();
      auto b = server.barrier_stats();
      auto json = [](const std::map<int64_t, uint64_t>& h) {
        std::string out;
        for (const auto& e : h) {
          out += (out.empty() ? "" : ",") + std::string("\"") + std::to_string(e.first) +
                 "\":" + std::to_string(e.second);
        }
        return out;
      };
      std::printf(
          "SUMMARY {\"role\":\"server\",\"rank\":%d,\"policy\":\"%s\",\"reads\":%llu,"
          "\"deferred\":%llu,\"live_workers\":%zu,\"staleness\":{%s},\"read_lag\":{%s}}\n",
          node.rank(), b.policy.c_str(), static_cast<unsigned long long>(b.reads),
          static_cast<unsigned long long>(b.deferred), b.steps.size(), json(b.staleness).c_str(),
          json(b.read_lag).c_str());
      return 0;
    }
    node.Finalize();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consistency_job: %s\n", e.what());
    return 1;
  }
}
