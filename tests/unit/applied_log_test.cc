// The server's record of applied pushes (exactly-once under resends and re-slicing).
#include "kv/applied_log.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace ps {
namespace {

SArray<Key> Keys(std::initializer_list<Key> k) {
  SArray<Key> a;
  for (Key x : k) a.push_back(x);
  return a;
}

TEST(AppliedLogTest, RecognisesAppliedKeysOfARequestEvenWhenRegrouped) {
  AppliedLog log;
  log.RecordKeys(1, 7, Keys({10, 20, 30}));
  log.RecordKeys(1, 7, Keys({50, 60}));
  std::vector<bool> seen;
  // The same keys regrouped (a resend re-sliced under a new ring), mixed with new ones.
  const auto k = Keys({5, 20, 30, 40, 50});
  EXPECT_EQ(log.CheckKeys(1, 7, k.data(), k.size(), &seen), 3u);
  EXPECT_EQ(seen, (std::vector<bool>{false, true, true, false, true}));
  // Another request, another worker: nothing applied.
  EXPECT_EQ(log.CheckKeys(1, 8, k.data(), k.size(), &seen), 0u);
  EXPECT_EQ(log.CheckKeys(2, 7, k.data(), k.size(), &seen), 0u);
}

// Recorded frames that overlap the query, lie before or after it, or interleave with it: the
// answer must equal plain set membership.
TEST(AppliedLogTest, CheckKeysMatchesSetMembershipForAnyFrames) {
  const uint64_t seed = 2026;
  std::mt19937_64 rng(seed);
  auto sorted_unique = [&](size_t n, Key lo, Key hi) {
    std::set<Key> s;
    while (s.size() < n) s.insert(lo + rng() % (hi - lo));
    return std::vector<Key>(s.begin(), s.end());
  };
  for (int round = 0; round < 300; ++round) {
    AppliedLog log;
    std::set<Key> recorded;
    const int frames = 1 + static_cast<int>(rng() % 5);
    for (int f = 0; f < frames; ++f) {
      const Key lo = rng() % 1000, hi = lo + 1 + rng() % 500;
      auto k = sorted_unique(std::min<size_t>(hi - lo, 1 + rng() % 40), lo, hi);
      recorded.insert(k.begin(), k.end());
      log.RecordKeys(4, 9, SArray<Key>(k));
    }
    const Key lo = rng() % 1200, hi = lo + 1 + rng() % 600;
    auto q = sorted_unique(std::min<size_t>(hi - lo, 1 + rng() % 60), lo, hi);
    std::vector<bool> seen;
    size_t want = 0;
    for (Key k : q) want += recorded.count(k);
    ASSERT_EQ(log.CheckKeys(4, 9, q.data(), q.size(), &seen), want)
        << "seed " << seed << " round " << round;
    for (size_t i = 0; i < q.size(); ++i) {
      ASSERT_EQ(seen[i], recorded.count(q[i]) == 1) << "seed " << seed << " round " << round;
    }
  }
}

TEST(AppliedLogTest, DenseRangesAndValuePartsAreRecognisedPiecewise) {
  AppliedLog log;
  log.RecordRange(3, 1, Range(100, 200));
  log.RecordRange(3, 1, Range(300, 400));
  auto fresh = log.FreshRanges(3, 1, Range(50, 350));
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(fresh[0], Range(50, 100));
  EXPECT_EQ(fresh[1], Range(200, 300));
  EXPECT_TRUE(log.FreshRanges(3, 1, Range(120, 180)).empty());
  log.RecordValuePart(3, 2, 99, 1 << 20);
  EXPECT_TRUE(log.HasValuePart(3, 2, 99, 1 << 20));
  EXPECT_FALSE(log.HasValuePart(3, 2, 99, 0));
}

TEST(AppliedLogTest, LowWaterMarkBoundsTheLog) {
  AppliedLog log;
  for (int ts = 0; ts < 100; ++ts) log.RecordKeys(1, ts, Keys({static_cast<Key>(ts)}));
  EXPECT_EQ(log.size(), 100u);
  log.Advance(1, 90);
  EXPECT_EQ(log.size(), 10u);
  EXPECT_TRUE(log.Below(1, 89));  // complete: any copy of it is a duplicate
  EXPECT_FALSE(log.Below(1, 90));
  log.Advance(1, 50);  // marks never go back
  EXPECT_TRUE(log.Below(1, 89));
  log.Forget(1);
  EXPECT_EQ(log.size(), 0u);
  EXPECT_FALSE(log.Below(1, 89));
}

}  // namespace
}  // namespace ps
