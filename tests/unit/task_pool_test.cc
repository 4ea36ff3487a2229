#include "control/task_pool.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(TaskPoolTest, HandsOutEachTaskOnceAndEndsWhenAllAreDone) {
  TaskPool p;
  EXPECT_EQ(p.Add(3), 0);
  int t = -1;
  ASSERT_EQ(p.Take(10, 0, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 0);
  ASSERT_EQ(p.Take(11, 0, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 1);
  ASSERT_EQ(p.Take(10, 0, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 2);
  EXPECT_EQ(p.Take(12, 0, &t), TaskPool::Answer::kWait);  // out with others: may come back
  EXPECT_FALSE(p.Done(11, 0));                            // not 11's task
  EXPECT_TRUE(p.Done(10, 0));
  EXPECT_TRUE(p.Done(11, 1));
  EXPECT_TRUE(p.Done(10, 2));
  EXPECT_EQ(p.Take(12, 0, &t), TaskPool::Answer::kNone);
  EXPECT_EQ(p.done(), 3u);
}

TEST(TaskPoolTest, DeadWorkersTasksAreRedoneFirstAndItsLateReportIsIgnored) {
  TaskPool p;
  p.Add(4);
  int t;
  p.Take(1, 0, &t);  // 0
  p.Take(2, 0, &t);  // 1
  p.Take(1, 0, &t);  // 2
  EXPECT_EQ(p.WorkerDead(1), (std::vector<int>{0, 2}));
  ASSERT_EQ(p.Take(2, 5, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 0);
  ASSERT_EQ(p.Take(2, 5, &t), TaskPool::Answer::kTask);
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
  p.Take(1, 100, &t);
  p.Take(2, 150, &t);
  EXPECT_TRUE(p.Expire(160, 0).empty());                   // no timeout configured
  EXPECT_EQ(p.Expire(1120, 1000), (std::vector<int>{0}));  // task 1 is out 970 ms only
  ASSERT_EQ(p.Take(3, 1200, &t), TaskPool::Answer::kTask);
  EXPECT_EQ(t, 0);
  EXPECT_FALSE(p.Done(1, 0));  // the slow worker's report is ignored
  EXPECT_TRUE(p.Done(3, 0));
}

}  // namespace
}  // namespace ps
