// The job behind bench/run_failover.py: one worker pushes single keys spread over every server,
// one at a time, for --seconds, and at the end prints one line per push: when it was issued
// and answered (wall clock, ms) and which server mastered its key when the job started. The
// driver kills a server and reads from these lines how long the ranges of the dead server
// were unavailable and how the push rate dipped.
//
//   failover_job [--seconds S] [--keys N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "control/node_impl.h"
#include "ps/ps.h"
#include "ring/ring.h"

namespace {

double WallMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3;
  int nkeys = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (k == "--keys") {
      nkeys = std::atoi(argv[i + 1]);
    } else {
      std::cerr << "unknown option " << k << "\n";
      return 2;
    }
  }
  try {
    ps::Node node(ps::Config::FromEnv());
    node.Start();
    if (node.role() == ps::Role::kServer) {
      ps::KVServer<int64_t> server(&node);
      node.Finalize();
      return 0;
    }
    if (node.role() == ps::Role::kWorker) {
      ps::KVWorker<int64_t> kv(&node);
      auto ring = node.impl()->ring();  // the ring at the start: who mastered each key then
      std::vector<ps::Key> keys;
      std::vector<int> owner;
      for (int i = 0; i < nkeys; ++i) {
        keys.push_back(ps::HashKey(1000 + i) % (ps::kMaxKey - 1));
        owner.push_back(ring->Owner(keys.back()));
      }
      struct Rec {
        double issued, done;
        int owner;
      };
      std::vector<Rec> recs;
      recs.reserve(1 << 20);
      std::printf("READY\n");
      std::fflush(stdout);
      const double end = WallMs() + seconds * 1000;
      for (size_t i = 0; WallMs() < end; ++i) {
        const size_t k = i % keys.size();
        const double t0 = WallMs();
        kv.Wait(kv.Push(ps::SArray<ps::Key>(1, keys[k]), ps::SArray<int64_t>(1, 1)));
        recs.push_back({t0, WallMs(), owner[k]});
      }
      for (const auto& r : recs) std::printf("P %.3f %.3f %d\n", r.issued, r.done, r.owner);
      std::fflush(stdout);
    }
    node.Finalize();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "failover_job: %s\n", e.what());
    return 1;
  }
}
