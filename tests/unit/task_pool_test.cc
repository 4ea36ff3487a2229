#include "control/task_pool.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(TaskPoolTest, HandsOutEachTaskOnceAndEndsWhenAllAreDone) {
  TaskPool p;
  EXPECT_EQ(p.Add(3), 0);
  int t = -1;
  ASSERT_EQ(p.Take(10, 0, 0, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 0);
  ASSERT_EQ(p.Take(11, 0, 0, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 1);
  ASSERT_EQ(p.Take(10, 0, 0, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 2);
  EXPECT_EQ(p.Take(12, 0, 0, &t), TaskPool::Answer::kWait);  // out with others: may come back
  EXPECT_FALSE(p.Done(11, 0));                               // not 11's task
  EXPECT_TRUE(p.Done(10, 0));
  EXPECT_TRUE(p.Done(11, 1));
  EXPECT_TRUE(p.Done(10, 2));
  EXPECT_EQ(p.Take(12, 0, 0, &t), TaskPool::Answer::kNone);
  EXPECT_EQ(p.done(), 3u);
}

TEST(TaskPoolTest, DeadWorkersTasksAreRedoneFirstAndItsLateReportIsIgnored) {
  TaskPool p;
  p.Add(4);
  int t;
  p.Take(1, 0, 0, &t);  // 0
  p.Take(2, 0, 0, &t);  // 1
  p.Take(1, 0, 0, &t);  // 2
  EXPECT_EQ(p.WorkerDead(1), (std::vector<int>{0, 2}));
  ASSERT_EQ(p.Take(2, 0, 5, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 0);
  ASSERT_EQ(p.Take(2, 0, 5, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 2);
  EXPECT_FALSE(p.Done(1, 0));  // the dead worker's report, arriving late
  EXPECT_TRUE(p.Done(2, 0));
  EXPECT_EQ(p.handouts().at(0), 2);
  EXPECT_EQ(p.handouts().count(3), 0u);  // never handed out
}

TEST(TaskPoolTest, TimedOutTasksGoBackToThePool) {
  TaskPool p;
  p.Add(2);
  int t;
  p.Take(1, 0, 100, &t);
  p.Take(2, 0, 150, &t);
  EXPECT_TRUE(p.Expire(160, 0).empty());                   // no timeout configured
  EXPECT_EQ(p.Expire(1120, 1000), (std::vector<int>{0}));  // task 1 is out 970 ms only
  ASSERT_EQ(p.Take(3, 0, 1200, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 0);
  EXPECT_FALSE(p.Done(1, 0));  // the slow worker's report is ignored
  EXPECT_TRUE(p.Done(3, 0));
}

}  // namespace
TEST(TaskPoolTest, EachWorkerGroupTakesFromItsOwnPoolAndGetsItsDeadMembersTasksBack) {
  TaskPool p;
  int t = -1;
  EXPECT_EQ(p.Take(20, 1, 0, &t), TaskPool::Answer::kWait);  // nothing for group 1 yet
  EXPECT_EQ(p.Add(2, 1), 0);
  EXPECT_EQ(p.Add(2, 0), 2);  // ids go on across groups
  EXPECT_TRUE(p.Added(0) && p.Added(1) && !p.Added(2));
  ASSERT_EQ(p.Take(10, 0, 0, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 2);
  ASSERT_EQ(p.Take(20, 1, 0, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 0);
  ASSERT_EQ(p.Take(21, 1, 0, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 1);
  // Group 1's pool is empty with tasks out; group 0's still holds one.
  EXPECT_EQ(p.Take(22, 1, 0, &t), TaskPool::Answer::kWait);
  EXPECT_EQ(p.WorkerDead(21), (std::vector<int>{1}));
  ASSERT_EQ(p.Take(22, 1, 0, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 1);  // back to its own group, not to group 0
  ASSERT_EQ(p.Take(11, 0, 0, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 3);
  EXPECT_TRUE(p.Done(20, 0) && p.Done(22, 1));
  EXPECT_EQ(p.Take(22, 1, 0, &t), TaskPool::Answer::kNone);  // group 1 is done...
  EXPECT_EQ(p.Take(12, 0, 0, &t), TaskPool::Answer::kWait);  // ... group 0 is not
  EXPECT_TRUE(p.Done(10, 2) && p.Done(11, 3));
  EXPECT_EQ(p.Take(12, 0, 0, &t), TaskPool::Answer::kNone);
}

TEST(TaskPoolTest, AddOnceAddsAGroupsTasksOnceAndAnswersItsFirstTaskToEveryCaller) {
  TaskPool p;
  EXPECT_EQ(p.Add(3, 0), 0);
  EXPECT_EQ(p.AddOnce(2, 1), 3);  // group 1's first call adds...
  EXPECT_EQ(p.AddOnce(2, 1), 3);  // ... the others find its tasks
  EXPECT_EQ(p.AddOnce(5, 0), 0);  // group 0 had tasks (Add): nothing more
  EXPECT_EQ(p.pending(), 5u);
  int t = -1;
  for (int want : {3, 4}) {
    ASSERT_EQ(p.Take(7, 1, 0, &t), TaskPool::Answer::kTask);
    EXPECT_EQ(t, want);
    EXPECT_TRUE(p.Done(7, t));
  }
  EXPECT_EQ(p.AddOnce(2, 1), 3);  // done, still not added again
  EXPECT_EQ(p.Take(7, 1, 0, &t), TaskPool::Answer::kNone);
}

TEST(TaskPoolTest, AnOpenPoolKeepsItsWorkersWaitingAndTasksKeepTheirDataUntilDone) {
  TaskPool p;
  int t = -1;
  p.Open(1);
  EXPECT_TRUE(p.Added(1));
  EXPECT_EQ(p.Take(7, 1, 0, &t), TaskPool::Answer::kWait);  // open and empty: more will come
  EXPECT_EQ(p.AddData("part zero", 1), 0);
  EXPECT_EQ(p.AddData("", 1), 1);
  ASSERT_EQ(p.Take(7, 1, 0, &t), TaskPool::Answer::kTask);
  ASSERT_EQ(t, 0);
  ASSERT_NE(p.Data(0), nullptr);
  EXPECT_EQ(*p.Data(0), "part zero");
  EXPECT_EQ(p.Data(1), nullptr);
  // Its worker dies: the task, data and all, goes to the next one.
  EXPECT_EQ(p.WorkerDead(7), (std::vector<int>{0}));
  ASSERT_EQ(p.Take(8, 1, 0, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 0);
  EXPECT_EQ(*p.Data(0), "part zero");
  EXPECT_TRUE(p.Done(8, 0));
  EXPECT_EQ(p.Data(0), nullptr);  // done: dropped
  ASSERT_EQ(p.Take(8, 1, 0, &t), TaskPool::Answer::kTask);
  EXPECT_TRUE(p.Done(8, 1));
  EXPECT_EQ(p.Take(8, 1, 0, &t), TaskPool::Answer::kWait);  // all done, but still open
  p.Close(1);
  EXPECT_EQ(p.Take(8, 1, 0, &t), TaskPool::Answer::kNone);
  // A pool opened before its first add numbers its first task from that add (other groups'
  // adds in between), and AddOnce adds nothing to an open pool.
  p.Open(2);
  EXPECT_EQ(p.AddOnce(9, 2), -1);
  EXPECT_EQ(p.Add(3, 0), 2);
  EXPECT_EQ(p.AddData("x", 2), 5);
  EXPECT_EQ(p.AddOnce(9, 2), 5);
  EXPECT_EQ(p.pending(), 4u);
}

TEST(TaskPoolTest, HeldRequestsAreAnsweredInOrderOrToldToAskAgainAndDieWithTheirWorker) {
  TaskPool p;
  TaskPool::Reply r{};
  // Nothing added yet: a request that waits is held, one that does not gets -1 at once.
  EXPECT_FALSE(p.Request(10, 0, true, 0, &r));
  EXPECT_FALSE(p.Request(11, 0, true, 5, &r));
  EXPECT_FALSE(p.Request(10, 0, true, 6, &r));  // asked again while held: still one request
  EXPECT_FALSE(p.Request(20, 1, true, 7, &r));
  ASSERT_TRUE(p.Request(12, 0, false, 8, &r));
  EXPECT_EQ(r.task, -1);
  EXPECT_EQ(p.held(), 3u);
  EXPECT_TRUE(p.Serve(9).empty());
  // One task for group 0: the first to ask gets it; the other two stay held.
  p.Add(1, 0);
  auto got = p.Serve(10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].worker, 10);
  EXPECT_EQ(got[0].task, 0);
  // Held 100 ms or more at 105: worker 11 (since 5) is told to ask again, worker 20 (7) not.
  got = p.AskAgain(105, 100);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].worker, 11);
  EXPECT_EQ(got[0].task, TaskPool::kAskAgain);
  // A dead worker's request goes with it.
  p.WorkerDead(20);
  EXPECT_EQ(p.held(), 0u);
  // Worker 10 is done: group 0 has nothing left, so a new request gets -1 at once.
  EXPECT_TRUE(p.Done(10, 0));
  ASSERT_TRUE(p.Request(11, 0, true, 200, &r));
  EXPECT_EQ(r.task, -1);
}

}  // namespace ps
