// How the ring, refill and copy-tracking plans scale with the number of servers (issue 21,
// item 4): for N servers with PS_VNODES virtual nodes and k replicas, the time to build a ring,
// and for one membership change (a server fails; a server joins) the time every server's
// refill plan takes, the fetches it asks for (one request per fetched range: the messages of
// the change) and the share of the key space that moves, and the scheduler's copy tracking.
// One JSON line per N. Pure logic in one process (no network): the cost of the plans alone.
//
//   build/bench/ring_scale [--vnodes 128] [--replicas 2] [--servers 10,30,100,300,1000]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "control/copy_tracker.h"
#include "replication/refill.h"
#include "ring/ring.h"

namespace {

using ps_bench::Clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Plans {
  double ms = 0;       // every server's plan
  size_t fetches = 0;  // ranges fetched, summed over servers
  double share = 0;    // of the key space fetched, summed over servers (copies)
};

// Every server of `servers` plans its refill under `current` (and `next`, for a join) from
// what it held under `before`.
Plans PlanAll(const ps::Ring& before, const ps::Ring& current, const ps::Ring* next,
              const std::vector<int>& servers) {
  Plans p;
  for (int s : servers) {
    const ps::RangeSet held = ps::HeldRanges(before, s);
    const auto t = Clock::now();
    const ps::RefillPlan plan = ps::PlanRefill(current, next, s, held);
    p.ms += Ms(Clock::now() - t);
    p.fetches += plan.fetch.size();
    p.share += static_cast<double>(ps::Size(plan.missing)) / static_cast<double>(ps::kMaxKey);
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  int vnodes = 128, replicas = 2;
  std::vector<int> sizes = {10, 30, 100, 300, 1000};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--vnodes")) {
      vnodes = std::atoi(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--replicas")) {
      replicas = std::atoi(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--servers")) {
      sizes.clear();
      std::stringstream ss(argv[i + 1]);
      for (std::string x; std::getline(ss, x, ',');) sizes.push_back(std::atoi(x.c_str()));
    } else {
      std::fprintf(stderr, "ring_scale: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  for (int n : sizes) {
    std::vector<int> ids(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
    auto t = Clock::now();
    const ps::Ring ring(ids, vnodes, replicas, 1);
    const double build_ms = Ms(Clock::now() - t);

    // Server 0 fails: the others refill the chains it was in.
    std::vector<int> rest(ids.begin() + 1, ids.end());
    t = Clock::now();
    const ps::Ring after(rest, vnodes, replicas, 2);
    const double fail_ring_ms = Ms(Clock::now() - t);
    const Plans fail = PlanAll(ring, after, nullptr, rest);

    // Server n joins: everyone (the joiner too) pre-copies what the next ring gives it.
    std::vector<int> more = ids;
    more.push_back(n);
    const ps::Ring next(more, vnodes, replicas, 2);
    const Plans join = PlanAll(ring, ring, &next, more);

    // The scheduler's copy tracking for the failure: reset, the loss, every refill reported.
    ps::CopyTracker tracker;
    t = Clock::now();
    tracker.Reset(ring);
    const double reset_ms = Ms(Clock::now() - t);
    t = Clock::now();
    const auto lost = tracker.Lost(0);
    for (int s : rest) tracker.Holds(s, after);
    const double track_ms = Ms(Clock::now() - t);
    if (!lost.empty() || !tracker.Orphans().empty()) {
      std::fprintf(stderr, "ring_scale: a single failure left ranges without a copy\n");
      return 1;
    }
    std::printf(
        "{\"bench\":\"ring_scale\",\"servers\":%d,\"vnodes\":%d,\"replicas\":%d,"
        "\"segments\":%zu,\"ring_build_ms\":%.3f,\"failure\":{\"ring_ms\":%.3f,"
        "\"plan_ms_all_servers\":%.3f,\"fetches\":%zu,\"keyspace_copies_moved\":%.4f},"
        "\"join\":{\"plan_ms_all_servers\":%.3f,\"fetches\":%zu,\"keyspace_copies_moved\":%.4f},"
        "\"copy_tracker\":{\"reset_ms\":%.3f,\"failure_and_refills_ms\":%.3f}}\n",
        n, vnodes, replicas, ring.segments().size(), build_ms, fail_ring_ms, fail.ms, fail.fetches,
        fail.share, join.ms, join.fetches, join.share, reset_ms, track_ms);
    std::fflush(stdout);
  }
  return 0;
}
