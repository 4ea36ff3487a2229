// The read lease (DESIGN §8, invariant 2): a server serves only while the scheduler cannot have
// declared it dead, judged by its own clock (control/read_lease.h).
#include "control/read_lease.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

constexpr int64_t kMs = 1000;  // the lease takes microseconds

// Timeout 800 ms, beats every 200 ms: a stall is 400 ms, the lease 750 ms after a beat.
TEST(ReadLeaseTest, AnEchoKeepsTheLeaseForTheTimeoutLessAQuarterInterval) {
  ReadLease l(800, 200);
  EXPECT_EQ(l.StallMs(), 400);
  EXPECT_EQ(l.LeaseMs(), 750);
  EXPECT_TRUE(l.Holds(5 * kMs)) << "no claim before the node table";
  l.Start(10 * kMs);
  EXPECT_TRUE(l.Holds(760 * kMs));
  EXPECT_FALSE(l.Holds(761 * kMs)) << "no echo since the node table: the lease lapsed";
  l.Echoed(700 * kMs);
  EXPECT_TRUE(l.Holds(1450 * kMs));
  EXPECT_FALSE(l.Holds(1451 * kMs));
  EXPECT_EQ(l.EchoAgeMs(1451 * kMs), 751);
  // An older beat's echo arriving late does not move the lease back.
  l.Echoed(500 * kMs);
  EXPECT_TRUE(l.Holds(1450 * kMs));
}

// The scheduler counts the timeout from the last beat it got, at or after the beat's send
// time: a lease that ends before that timeout ends before any declaration could.
TEST(ReadLeaseTest, TheLeaseEndsBeforeTheSchedulerCanDeclareTheNodeDead) {
  for (int64_t timeout : {300, 800, 1000, 60000}) {
    for (int64_t interval : {50, 200, 250, 30000}) {
      if (timeout <= interval) continue;  // Config refuses it
      ReadLease l(timeout, interval);
      EXPECT_LT(l.LeaseMs(), timeout) << timeout << "/" << interval;
      // And it outlasts the gap between two beats whenever the timeout is 1.25 intervals.
      if (4 * timeout > 5 * interval) {
        EXPECT_GT(l.LeaseMs(), interval) << timeout << "/" << interval;
      }
    }
  }
}

// A stall suspends the lease whatever the echoes say, until the echo of a beat sent after it.
TEST(ReadLeaseTest, AStallHoldsUntilTheEchoOfALaterBeat) {
  ReadLease l(800, 200);
  l.Start(0);
  l.Echoed(100 * kMs);
  EXPECT_TRUE(l.Stall(300 * kMs));
  EXPECT_FALSE(l.Stall(310 * kMs)) << "already suspect";
  EXPECT_FALSE(l.Holds(320 * kMs));
  EXPECT_FALSE(l.Echoed(250 * kMs)) << "a beat sent before the stall says nothing about it";
  EXPECT_FALSE(l.Holds(330 * kMs));
  EXPECT_TRUE(l.Echoed(300 * kMs));
  EXPECT_TRUE(l.Holds(340 * kMs));
}

}  // namespace
}  // namespace ps
