// KVWorker's resend decisions on their own (kv/resend_timer.h): the wait of a part that gets no
// reply, its back-off and cap, the round-trip estimate that stretches it, and the budget that
// keeps a slow server from being sent a flood of copies.
#include "kv/resend_timer.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace ps {
namespace {

constexpr int kServer = 8;

// The first time after which a part with `tries` resends goes again: the smallest wait that
// Due accepts (found by bisection on a fresh copy of the timer each time, so the search itself
// moves nothing).
int64_t WaitOf(const ResendTimer& t, int server, uint8_t tries) {
  int64_t lo = 0, hi = int64_t{1} << 40;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    ResendTimer copy = t;
    uint8_t k = tries;
    if (copy.Due(server, mid, &k)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

TEST(ResendTimerTest, APartWaitsTheBaseThenTwiceAsLongEachTimeUpToTheCap) {
  // Base 100 ms; request timeout 30 s: the cap is 3.75 s, above 2^5 x 100 ms = 3.2 s.
  ResendTimer t(100000, 30e6);
  EXPECT_EQ(WaitOf(t, kServer, 0), 100000);
  uint8_t tries = 0;
  int64_t want = 100000;
  for (int i = 0; i < 8; ++i) {
    EXPECT_FALSE(t.Due(kServer, want - 1, &tries)) << "resend " << i;
    ASSERT_TRUE(t.Due(kServer, want, &tries)) << "resend " << i;
    EXPECT_EQ(tries, i + 1);
    want = 100000 * (int64_t{1} << std::min(i + 1, ResendTimer::kMaxBackoffShift));
  }
  // An eighth of a short request timeout caps the back-off instead.
  ResendTimer capped(100000, 2.4e6);
  EXPECT_EQ(WaitOf(capped, kServer, 200), 300000);
}

TEST(ResendTimerTest, RoundTripsStretchTheWaitAndAResendsReplyIsNoSample) {
  ResendTimer t(1000, 30e6);
  // Replies of parts sent once: 10 ms each, so the wait is srtt + 4 rttvar, not the base.
  for (int i = 0; i < 20; ++i) t.Answered(kServer, /*sent_once=*/true, 10000);
  const int64_t stretched = WaitOf(t, kServer, 0);
  EXPECT_GT(stretched, 10000);
  EXPECT_LT(stretched, 20000);
  // Karn's rule: the reply to a part that went twice may answer either copy; it moves nothing.
  t.Answered(kServer, /*sent_once=*/false, 1);
  EXPECT_EQ(WaitOf(t, kServer, 0), stretched);
  // Another server has its own estimate.
  EXPECT_EQ(WaitOf(t, kServer + 1, 0), 1000);
}

TEST(ResendTimerTest, AResendRaisesTheServersBackOffUntilACleanReply) {
  ResendTimer t(1000, 30e6);
  uint8_t tries = 0;
  ASSERT_TRUE(t.Due(kServer, 1000, &tries));
  ASSERT_TRUE(t.Due(kServer, 2000, &tries));  // tries 2: the server's back-off is 2 now
  // A part sent once to the same server waits as long as the resent one.
  EXPECT_EQ(WaitOf(t, kServer, 0), 4000);
  t.Answered(kServer, /*sent_once=*/true, 100);  // srtt + 4 rttvar = 300: the base again
  EXPECT_EQ(WaitOf(t, kServer, 0), 1000);
}

TEST(ResendTimerTest, EachTickAServerTakesAsManyResendsAsItAnsweredAtLeastTheMinimum) {
  ResendTimer t(1000, 30e6);
  auto resends = [&t](int server, int parts) {
    int sent = 0;
    for (int i = 0; i < parts; ++i) {
      uint8_t tries = 0;
      sent += t.Due(server, 1 << 30, &tries);
    }
    return sent;
  };
  t.Tick();
  EXPECT_EQ(resends(kServer, 100), ResendTimer::kMinBudget);
  EXPECT_EQ(resends(kServer, 100), 0);  // spent until the next tick
  for (int i = 0; i < 70; ++i) t.Answered(kServer, /*sent_once=*/false, 0);
  t.Tick();
  EXPECT_EQ(resends(kServer, 100), 70);
  t.Tick();  // nothing answered since: the minimum
  EXPECT_EQ(resends(kServer, 100), ResendTimer::kMinBudget);
  // Budgets are per server.
  EXPECT_EQ(resends(kServer + 1, 5), 5);
}

}  // namespace
}  // namespace ps
