// Step table, barrier policies, the server's pull gate and the worker's bounded delay.
#include <gtest/gtest.h>

#include <algorithm>

#include "consistency/barrier_policy.h"
#include "consistency/pull_gate.h"
#include "consistency/step_table.h"
#include "ps/base.h"

namespace ps {
namespace {

TEST(StepTableTest, StepsOnlyGrowAndMinTracksTheSlowest) {
  StepTable t;
  t.AddAt(3, 0);
  t.AddAt(1, 0);
  t.AddAt(2, 0);
  EXPECT_EQ(t.workers(), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(t.Advance(1, 5));
  EXPECT_TRUE(t.Advance(1, 2));  // late message: ignored, not a step back
  EXPECT_EQ(t.Step(1), 5);
  EXPECT_EQ(t.Min(), 0);
  t.Advance(2, 3);
  t.Advance(3, 4);
  EXPECT_EQ(t.Min(), 3);
  EXPECT_EQ(t.Max(), 5);
  EXPECT_EQ(t.CountBelow(4), 1u);
  EXPECT_EQ(t.CountBelow(6), 3u);
  EXPECT_FALSE(t.Advance(9, 1));  // unknown worker
  EXPECT_EQ(t.Step(9), -1);
}

TEST(StepTableTest, RemovedWorkerNoLongerHoldsTheMinimumAndJoinersEnterAtIt) {
  StepTable t;
  for (int w = 0; w < 4; ++w) t.AddAt(w, 0);
  t.Advance(0, 7);
  t.Advance(1, 6);
  t.Advance(2, 9);
  EXPECT_EQ(t.Min(), 0);
  t.Remove(3);
  EXPECT_EQ(t.Min(), 6);
  EXPECT_EQ(t.Add(10), 6);  // a joiner enters at the current minimum
  EXPECT_EQ(t.Step(10), 6);
  EXPECT_EQ(t.Add(10), 6);          // idempotent
  EXPECT_FALSE(t.Advance(3, 100));  // a dead worker's late message does not bring it back
  EXPECT_EQ(t.size(), 4u);
  StepTable empty;
  EXPECT_EQ(empty.Add(1), 0);
}

TEST(BarrierPolicyTest, ParsesEverySpecAndNamesTheOptionOnErrors) {
  EXPECT_EQ(ParsePolicy("bsp")->Spec(), "bsp");
  EXPECT_EQ(ParsePolicy("ssp:0")->Spec(), "bsp");
  EXPECT_EQ(ParsePolicy("ssp:4")->Spec(), "ssp:4");
  EXPECT_EQ(ParsePolicy("asp")->Spec(), "asp");
  EXPECT_EQ(ParsePolicy("psp:10")->Spec(), "psp:10:0");
  EXPECT_EQ(ParsePolicy("pbsp:10")->Spec(), "psp:10:0");
  EXPECT_EQ(ParsePolicy("pssp:10:3")->Spec(), "psp:10:3");
  EXPECT_EQ(ParsePolicy("backup:2")->Spec(), "backup:2:0");
  for (const char* bad : {"", "ssp", "ssp:-1", "ssp:x", "psp", "bsp:1", "foo", "psp:1:2:3"}) {
    try {
      ParsePolicy(bad, "PS_CONSISTENCY");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("PS_CONSISTENCY"), std::string::npos) << e.what();
    }
  }
}

TEST(BarrierPolicyTest, BackupWorkersWaitForAllButTheSlowestB) {
  StepTable t;
  for (int w = 0; w < 5; ++w) t.AddAt(w, 10);
  t.Advance(0, 12);
  auto p = MakeBackup(2, 0);
  Rng rng(1);
  EXPECT_TRUE(p->Pass(t, 0, 10, &rng));
  t.Remove(4);
  t.AddAt(4, 3);
  t.Remove(3);
  t.AddAt(3, 5);
  EXPECT_TRUE(p->Pass(t, 0, 10, &rng));  // two stragglers are tolerated
  t.Remove(2);
  t.AddAt(2, 9);
  EXPECT_FALSE(p->Pass(t, 0, 10, &rng));  // three are not
  EXPECT_TRUE(MakeBackup(2, 1)->Pass(t, 0, 10, &rng));
}

// A read at step t from a worker whose own pushes of step t-1 are not all acknowledged (done
// < t) counts only its done steps: under BSP it waits for its own clock too.
TEST(PullGateTest, AReadCountsOnlyTheStepsWhosePushesAreDone) {
  PullGate g(MakeSsp(0), 1);
  g.SetWorkers({1, 2});
  std::vector<uint64_t> rel;
  g.Report(2, 1, &rel);
  EXPECT_FALSE(g.Read(1, 1, 0, 7, &rel));
  EXPECT_EQ(g.table().Step(1), 0);
  EXPECT_TRUE(rel.empty());
  g.Report(1, 1, &rel);  // its clock, sent once its push of step 0 was acknowledged
  EXPECT_EQ(rel, std::vector<uint64_t>{7});
}

TEST(PullGateTest, HoldsReadsUntilTheTableAllowsThemInArrivalOrder) {
  PullGate g(MakeSsp(0), 1);
  g.SetWorkers({1, 2, 3});
  std::vector<uint64_t> rel;
  EXPECT_TRUE(g.Read(1, 0, 100, &rel));
  g.Report(1, 1, &rel);
  EXPECT_FALSE(g.Read(1, 1, 101, &rel));
  g.Report(2, 1, &rel);
  EXPECT_FALSE(g.Read(2, 1, 102, &rel));
  EXPECT_TRUE(rel.empty());
  EXPECT_EQ(g.held(), 2u);
  g.Report(3, 1, &rel);
  EXPECT_EQ(rel, (std::vector<uint64_t>{101, 102}));
  EXPECT_EQ(g.Clock(), 1);
  EXPECT_EQ(g.deferred(), 2u);
  EXPECT_EQ(g.reads(), 3u);
}

TEST(PullGateTest, DeadWorkerReleasesTheOthersAndItsOwnReadsAreDropped) {
  PullGate g(MakeSsp(0), 1);
  g.SetWorkers({1, 2, 3});
  std::vector<uint64_t> rel;
  g.Report(3, 1, &rel);
  EXPECT_FALSE(g.Read(3, 1, 7, &rel));
  g.Report(1, 1, &rel);
  EXPECT_FALSE(g.Read(1, 1, 8, &rel));
  // Worker 2 never finishes step 0 and is declared dead.
  g.RemoveWorker(3, &rel);  // first another one leaves: its own held read goes away
  EXPECT_TRUE(rel.empty());
  g.RemoveWorker(2, &rel);
  EXPECT_EQ(rel, (std::vector<uint64_t>{8}));
  EXPECT_EQ(g.held(), 0u);
  // A read from a worker outside the table is never held.
  EXPECT_TRUE(g.Read(2, 50, 9, &rel));
}

TEST(PullGateTest, PolicyChangeAtRunTimeReleasesWhatTheNewPolicyAllows) {
  PullGate g(MakeSsp(0), 1);
  g.SetWorkers({1, 2});
  std::vector<uint64_t> rel;
  EXPECT_FALSE(g.Read(1, 3, 1, &rel));
  g.SetPolicy(MakeSsp(2), &rel);
  EXPECT_TRUE(rel.empty());
  g.SetPolicy(MakeSsp(3), &rel);
  EXPECT_EQ(rel, (std::vector<uint64_t>{1}));
  g.SetPolicy(MakeSsp(0), &rel);
  EXPECT_FALSE(g.Read(1, 4, 2, &rel));
  g.SetPolicy(MakeAsp(), &rel);
  EXPECT_EQ(rel.back(), 2u);
}

TEST(PullGateTest, JoiningWorkerEntersAtTheMinimumAndDoesNotBlockOthersBelowIt) {
  PullGate g(MakeSsp(0), 1);
  g.SetWorkers({1, 2});
  std::vector<uint64_t> rel;
  g.Report(1, 5, &rel);
  g.Report(2, 4, &rel);
  g.AddWorker(3);
  EXPECT_EQ(g.table().Step(3), 4);
  EXPECT_TRUE(g.Read(2, 4, 1, &rel));
  EXPECT_FALSE(g.Read(1, 5, 2, &rel));
  g.Report(2, 5, &rel);
  EXPECT_TRUE(rel.empty());  // the joiner (at 4) must also finish step 4
  g.Report(3, 5, &rel);
  EXPECT_EQ(rel, (std::vector<uint64_t>{2}));
}

TEST(PullGateTest, EachWorkerGroupIsDecidedOverItsOwnStepsUnderItsOwnPolicy) {
  // Workers 1-3 train under BSP, 4 evaluates under ASP (the gate's default).
  PullGate g(MakeAsp(), 1);
  g.SetWorkers({1, 2, 3, 4});
  for (int w : {1, 2, 3}) g.SetGroup(w, 0);
  g.SetGroup(4, 1);
  std::vector<uint64_t> rel;
  g.SetPolicy(MakeSsp(0), &rel, 0);
  EXPECT_EQ(g.policy(0).Spec(), "bsp");
  EXPECT_EQ(g.policy(1).Spec(), "asp");
  // The evaluator never moves: training reads pass once the training workers are done.
  for (int w : {1, 2}) g.Report(w, 1, &rel);
  EXPECT_FALSE(g.Read(1, 1, 1, &rel));
  g.Report(3, 1, &rel);
  EXPECT_EQ(rel, (std::vector<uint64_t>{1}));
  EXPECT_EQ(g.Clock(1), 1);
  // ... and the evaluator's reads never wait for the trainers, however far ahead it is.
  EXPECT_TRUE(g.Read(4, 50, 2, &rel));
  EXPECT_EQ(g.Clock(4), 50);
  EXPECT_EQ(g.Clock(), 1);  // every group's slowest
  // A death in one group releases only that group's reads.
  rel.clear();
  g.Report(1, 2, &rel);
  g.Report(2, 2, &rel);
  EXPECT_FALSE(g.Read(1, 2, 3, &rel));
  g.RemoveWorker(4, &rel);
  EXPECT_TRUE(rel.empty());
  g.RemoveWorker(3, &rel);
  EXPECT_EQ(rel, (std::vector<uint64_t>{3}));
  // A job-wide policy replaces the group's own.
  g.SetPolicy(MakeSsp(2), &rel);
  EXPECT_EQ(g.policy(0).Spec(), "ssp:2");
  EXPECT_EQ(g.policy(1).Spec(), "ssp:2");
}

TEST(PullGateTest, AWorkerMovedToAGroupKeepsItsStepAndAJoinerEntersAtItsGroupsMinimum) {
  PullGate g(MakeSsp(0), 1);
  g.SetWorkers({1, 2, 3});
  std::vector<uint64_t> rel;
  g.Report(1, 4, &rel);
  g.Report(2, 9, &rel);
  g.Report(3, 9, &rel);
  g.SetGroup(2, 1);
  g.SetGroup(3, 1);
  EXPECT_EQ(g.table().Step(2), 9);
  g.SetGroup(5, 1);  // known before it joins (its node table entry came first)
  g.AddWorker(5);
  EXPECT_EQ(g.table().Step(5), 9);  // group 1's minimum, not group 0's 4
  EXPECT_TRUE(g.Read(2, 9, 1, &rel));
}

TEST(BoundedDelayTest, StepWaitsOnlyForRequestsOlderThanTau) {
  BoundedDelay d;
  d.Issued(1, 0);
  d.Issued(2, 1);
  d.Issued(3, 2);
  EXPECT_TRUE(d.MayStart(3, -1));  // tau = infinity never waits
  EXPECT_FALSE(d.MayStart(3, 0));  // sequential: everything before 3 must be done
  EXPECT_FALSE(d.MayStart(3, 2));  // step 0 still open
  d.Completed(1);
  EXPECT_TRUE(d.MayStart(3, 2));
  EXPECT_FALSE(d.MayStart(3, 1));
  d.Completed(2);
  EXPECT_TRUE(d.MayStart(3, 1));
  EXPECT_FALSE(d.MayStart(3, 0));
  d.Completed(3);
  d.Completed(3);  // twice is harmless
  EXPECT_TRUE(d.MayStart(3, 0));
  EXPECT_EQ(d.open(), 0u);
}

}  // namespace
}  // namespace ps
