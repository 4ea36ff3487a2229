// StepGate: when a worker's clocks may leave and what its requests report as done (DESIGN §7).
// The same code runs in KVWorker and in the cluster simulation's workers.
#include "kv/step_gate.h"

#include <gtest/gtest.h>

#include <climits>
#include <set>

namespace ps {
namespace {

// For ReleaseClocks: no request has failed.
bool NoneGone(int64_t) { return false; }

// Clock(): the clock of the step in progress is issued, then the next step begins.
bool Clock(StepGate* g, int64_t ts) {
  const bool held = g->HoldClock(ts, g->step());
  g->NextStep();
  return held;
}

TEST(StepGateTest, AClockWaitsForThePushesOfItsStep) {
  StepGate g;
  g.PushIssued(0);
  EXPECT_TRUE(Clock(&g, 1)) << "the clock of step 0 left with a push of it open";
  EXPECT_EQ(g.SafeStep(), 0);
  EXPECT_TRUE(g.ReleaseClocks(NoneGone).empty());
  g.PushDone(0);
  EXPECT_EQ(g.ReleaseClocks(NoneGone), std::vector<int64_t>{1});
  EXPECT_EQ(g.SafeStep(), 1);
  EXPECT_FALSE(g.has_held());
}

TEST(StepGateTest, ClocksLeaveInOrder) {
  StepGate g;
  g.PushIssued(0);
  EXPECT_TRUE(Clock(&g, 1));
  // Step 1 has no open push, but its clock follows the one before it.
  EXPECT_TRUE(Clock(&g, 2));
  g.PushIssued(2);
  EXPECT_TRUE(Clock(&g, 4));
  g.PushDone(0);
  EXPECT_EQ(g.ReleaseClocks(NoneGone), (std::vector<int64_t>{1, 2}));
  g.PushDone(2);
  EXPECT_EQ(g.ReleaseClocks(NoneGone), std::vector<int64_t>{4});
}

TEST(StepGateTest, AClockWhoseRequestFailedIsDropped) {
  StepGate g;
  g.PushIssued(0);
  EXPECT_TRUE(Clock(&g, 1));
  EXPECT_TRUE(Clock(&g, 2));
  g.PushDone(0);
  const std::set<int64_t> failed = {1};
  EXPECT_EQ(g.ReleaseClocks([&](int64_t ts) { return failed.count(ts) > 0; }),
            std::vector<int64_t>{2});
}

TEST(StepGateTest, RequestsReportOnlyStepsWhosePushesAreAcknowledged) {
  StepGate g;
  EXPECT_EQ(g.DoneStep(true, 0), 1);  // a clock of step 0 with nothing open: one step done
  g.PushIssued(0);
  EXPECT_EQ(g.DoneStep(true, 0), 0);
  Clock(&g, 1);
  EXPECT_EQ(g.step(), 1);
  EXPECT_EQ(g.DoneStep(false, 1), 0) << "a pull of step 1 claimed step 0 with its push open";
  g.PushDone(0);
  EXPECT_EQ(g.DoneStep(false, 1), 1);
  EXPECT_EQ(g.OldestOpenPush(), INT64_MAX);
}

// A worker reports its progress to servers that joined (they have seen none of its clocks).
// The report is the last clock again: a clock of the step in progress claimed that step as done
// before the worker had issued its pushes, and a read at the next step at another worker passed
// the barrier without them (ps_sim --cluster --policy bsp --join-every-s 1, seed 61).
TEST(StepGateTest, AReportOfProgressClaimsOnlyTheStepsEnded) {
  StepGate g;
  Clock(&g, 0);
  Clock(&g, 1);
  Clock(&g, 2);
  ASSERT_EQ(g.step(), 3);  // in step 3, its push not issued yet
  EXPECT_FALSE(g.HoldClock(3, g.ReportStep()));
  EXPECT_EQ(g.DoneStep(true, g.ReportStep()), 3) << "the report claimed step 3, in progress";
  // Behind a clock that waits for its step's push, a report waits too, and claims no more.
  g.PushIssued(3);
  EXPECT_TRUE(Clock(&g, 4));
  EXPECT_TRUE(g.HoldClock(5, g.ReportStep()));
  EXPECT_EQ(g.DoneStep(true, g.ReportStep()), 3);
  g.PushDone(3);
  EXPECT_EQ(g.ReleaseClocks(NoneGone), (std::vector<int64_t>{4, 5}));
}

TEST(StepGateTest, AJoinerAdoptsTheServersStep) {
  StepGate g;
  g.Adopt(7);
  EXPECT_EQ(g.step(), 7);
  g.Adopt(3);
  EXPECT_EQ(g.step(), 7);
}

}  // namespace
}  // namespace ps
