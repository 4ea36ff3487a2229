// ps_sim --fuzz (issue 21): each seed draws its own mix of faults and its cluster's shape
// (FuzzFlags), and the run it names replays with --cluster. The seeds the fuzzer found bugs with
// stay here as regression tests, with the flags they drew written out (so that a change of the
// draw keeps them), and a fixed set of fuzz seeds runs in CI.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

#include "ps/base.h"
#include "sim/cluster_sim.h"

namespace ps {
namespace {

ClusterSimResult RunSim(uint64_t seed, const std::string& flags, uint64_t max_events = 0) {
  ClusterSimOptions o = ClusterOptionsFromFlags(flags);
  o.seed = seed;
  if (max_events > 0) o.max_events = max_events;
  std::ostringstream out;
  ClusterSim sim(o);
  return sim.Run(&out);
}

std::string Replay(uint64_t seed, const std::string& flags) {
  return "replay: ps_sim --cluster --seed " + std::to_string(seed) + " " + flags + " --trace";
}

// Runs seed under flags and expects every invariant to hold.
ClusterSimResult Holds(uint64_t seed, const std::string& flags) {
  const ClusterSimResult r = RunSim(seed, flags);
  EXPECT_TRUE(r.ok) << r.failure << Replay(seed, flags);
  return r;
}

TEST(ClusterFuzzTest, EachSeedDrawsItsOwnRunAndTheSameSeedTheSameOne) {
  std::set<std::string> lines;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const std::string f = FuzzFlags(seed);
    EXPECT_EQ(f, FuzzFlags(seed)) << "seed " << seed;
    EXPECT_NO_THROW(ClusterSim(ClusterOptionsFromFlags(f))) << "seed " << seed << ": " << f;
    lines.insert(f);
  }
  EXPECT_EQ(lines.size(), 50u);
  // Every kind of fault is on in some runs and off in others.
  for (const char* flag : {"--crash-every-s", "--partition-every-s", "--sched-pause-every-s",
                           "--worker-cut-every-s", "--ctl-stall-every-s"}) {
    int on = 0;
    for (const std::string& f : lines) {
      on += f.find(std::string(flag) + " 0.00 ") == std::string::npos;
    }
    EXPECT_GT(on, 0) << flag;
    EXPECT_LT(on, 50) << flag;
  }
}

TEST(ClusterFuzzTest, NodesSetsServersAndWorkers) {
  ClusterSimOptions o = ClusterOptionsFromFlags("--nodes 12,30");
  EXPECT_EQ(o.servers, 12);
  EXPECT_EQ(o.workers, 30);
  o = ClusterOptionsFromFlags("--nodes 7");
  EXPECT_EQ(o.servers, 7);
  EXPECT_EQ(o.workers, ClusterSimOptions().workers);
  EXPECT_THROW(ClusterOptionsFromFlags("--nodes 0,3"), Error);
  EXPECT_THROW(ClusterOptionsFromFlags("--nodes x"), Error);
}

TEST(ClusterFuzzTest, FuzzSeedsHoldEveryInvariant) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const std::string f = FuzzFlags(seed);
    const ClusterSimResult r = RunSim(seed, f);
    ASSERT_TRUE(r.ok) << r.failure << Replay(seed, f);
  }
}

// A joiner applied and acknowledged an old master's copy while it fetched the range, then
// imported a snapshot taken before it, and replayed the copy over it: it waited there for an
// earlier copy that had been lost. The old master died; the copy, acknowledged, was applied
// past its gap, but the worker's low-water mark had passed it (it was acknowledged), so it was
// taken for applied and an acknowledged update was lost. Fails without the points' say in
// ChainReplicator::ApplyOrphans (seen failing: server 15 held 0, the pushes summed to 149).
TEST(ClusterFuzzTest, Seed1811AReplayedCopyBelowItsWorkersMarkIsAppliedWhenItsMasterDies) {
  const std::string f =
      "--servers 7 --workers 7 --replicas 1 --vnodes 1 --fault-s 25.63 --loss 0.1 --dup 0 "
      "--latency-us 1000 --jitter-us 40000 --keys 20000 --keys-per-push 16 --inflight 1 "
      "--push-every-s 0.001 --step-every-s 0 --policy ssp:1 --rule sum --resend timer "
      "--pause-every-s 4.25 --join-every-s 4.70 --leave-every-s 0.57 --crash-every-s 0 "
      "--pause-max-s 2.75";
  EXPECT_GT(Holds(1811, f).joins, 0);
}

// Under PSP a read samples workers, and may wait for one more than S steps behind it. The
// settle phase began no new step, so such a read waited for ever (fuzz seed 20: liveness).
TEST(ClusterFuzzTest, Seed20UnderPspAReadThatWaitsForAStragglerSettles) {
  const std::string f =
      "--servers 7 --workers 4 --replicas 2 --vnodes 8 --fault-s 29.90 --loss 0.02 --dup 0 "
      "--latency-us 1000 --jitter-us 1000 --keys 200 --keys-per-push 1 --inflight 1 "
      "--push-every-s 0.001 --step-every-s 0.005 --policy psp:2:1 --rule assign --resend fixed "
      "--crash-every-s 2.37 --pause-every-s 0 --join-every-s 0 --leave-every-s 1.56 "
      "--pause-max-s 1.01";
  EXPECT_GT(Holds(20, f).reads, 0u);
}

// The storm check counts events per virtual second: a run's total grows with its length and
// its work (a budget for the whole run failed a healthy run of 1000 servers and 10 000 workers
// at 5 virtual seconds, and heavy fuzzed work at 18), a storm's rate does not stay bounded.
TEST(ClusterFuzzTest, TheStormCheckBoundsEventsPerVirtualSecondNotPerRun) {
  const std::string f = "--fault-s 30";
  const ClusterSimResult whole = Holds(1000, f);
  ASSERT_TRUE(whole.ok);
  // A budget of a fifth of the run's events, each second's well within it.
  const ClusterSimResult bounded = RunSim(1000, f, whole.events / 5);
  EXPECT_TRUE(bounded.ok) << bounded.failure << " (budget " << whole.events / 5 << " of "
                          << whole.events << " events)";
  const ClusterSimResult storm = RunSim(1000, f, 100);
  EXPECT_FALSE(storm.ok);
  EXPECT_NE(storm.failure.find("messages that beget messages"), std::string::npos) << storm.failure;
}

}  // namespace
}  // namespace ps
