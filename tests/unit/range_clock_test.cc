// Range vector clocks: Algorithm 3 of the Parameter Server paper, merging, wire form.
#include "clock/range_clock.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "util/rng.h"

namespace ps {
namespace {

using R = std::vector<std::pair<Range, int64_t>>;

TEST(RangeClockTest, SetSplitsThePartlyCoveredRangesAndMergesEqualNeighbours) {
  RangeVectorClock c;
  c.Set(1, Range(10, 20), 5);
  EXPECT_EQ(c.Ranges(1), (R{{Range(0, 10), 0}, {Range(10, 20), 5}, {Range(20, kMaxKey), 0}}));
  c.Set(1, Range(15, 30), 7);
  EXPECT_EQ(
      c.Ranges(1),
      (R{{Range(0, 10), 0}, {Range(10, 15), 5}, {Range(15, 30), 7}, {Range(30, kMaxKey), 0}}));
  c.Set(1, Range(10, 15), 7);  // now [10, 30) has one time: one range again
  EXPECT_EQ(c.Ranges(1), (R{{Range(0, 10), 0}, {Range(10, 30), 7}, {Range(30, kMaxKey), 0}}));
  c.Set(1, Range(0, kMaxKey), 9);
  EXPECT_EQ(c.Ranges(1), (R{{Range(0, kMaxKey), 9}}));
  EXPECT_EQ(c.Get(1, 12345), 9);
  EXPECT_EQ(c.Get(2, 12345), 0);  // a node never set reads 0 everywhere
  EXPECT_EQ(c.Ranges(2), (R{{Range(0, kMaxKey), 0}}));
  EXPECT_THROW(c.Set(1, Range(5, 5), 1), Error);
}

// The paper's claim behind Algorithm 3: a set touches at most the two ranges at its ends, so
// each set adds at most two ranges, and the clock of a node that pushes whole ranges stays
// small. Checked against a brute-force clock over a small key space with random sets.
TEST(RangeClockTest, MatchesBruteForceAndEachSetAddsAtMostTwoRanges) {
  const uint64_t seed = 2024;
  Rng rng(seed);
  const int K = 64;  // keys i * step for i < K; the last range runs to kMaxKey
  const Key step = kMaxKey / K;
  RangeVectorClock c;
  std::vector<std::vector<int64_t>> ref(3, std::vector<int64_t>(K, 0));
  for (int i = 0; i < 3000; ++i) {
    const int node = static_cast<int>(rng.Below(3));
    int a = static_cast<int>(rng.Below(K)), b = static_cast<int>(rng.Below(K)) + 1;
    if (a >= b) std::swap(a, b);
    if (a == b) b = a + 1;
    const int64_t t = static_cast<int64_t>(rng.Below(6));
    const size_t before = c.NumRanges(node);
    c.Set(node, Range(a * step, b == K ? kMaxKey : b * step), t);
    ASSERT_LE(c.NumRanges(node), before + 2) << "seed " << seed << " set " << i;
    for (int k = a; k < b; ++k) ref[node][k] = t;
    // Canonical: neighbours never share a time, so the count is the number of runs.
    size_t runs = 1;
    for (int k = 1; k < K; ++k) runs += ref[node][k] != ref[node][k - 1];
    ASSERT_EQ(c.NumRanges(node), runs) << "seed " << seed << " set " << i;
    for (int k = 0; k < K; ++k) {
      ASSERT_EQ(c.Get(node, k * step + rng.Below(step)), ref[node][k]) << "seed " << seed;
    }
    int x = static_cast<int>(rng.Below(K)), y = static_cast<int>(rng.Below(K)) + 1;
    if (x >= y) std::swap(x, y);
    if (x == y) y = x + 1;
    auto lo = std::min_element(ref[node].begin() + x, ref[node].begin() + y);
    auto hi = std::max_element(ref[node].begin() + x, ref[node].begin() + y);
    ASSERT_EQ(c.Min(node, Range(x * step, y * step)), *lo) << "seed " << seed;
    ASSERT_EQ(c.Max(node, Range(x * step, y * step)), *hi) << "seed " << seed;
  }
  EXPECT_EQ(c.Nodes(), (std::vector<int>{0, 1, 2}));
}

TEST(RangeClockTest, MergeTakesTheLargerTimeEverywhere) {
  Rng rng(5);
  const Key step = kMaxKey / 32;
  for (int trial = 0; trial < 200; ++trial) {
    RangeVectorClock a, b;
    std::vector<int64_t> ra(32, 0), rb(32, 0);
    for (int i = 0; i < 10; ++i) {
      for (auto* pr : {&ra, &rb}) {
        int x = static_cast<int>(rng.Below(32)), y = x + 1 + static_cast<int>(rng.Below(32 - x));
        int64_t t = static_cast<int64_t>(rng.Below(9));
        (pr == &ra ? a : b).Set(4, Range(x * step, y == 32 ? kMaxKey : y * step), t);
        for (int k = x; k < y; ++k) (*pr)[k] = t;
      }
    }
    b.Set(7, Range(0, 100), 3);  // a node only b knows
    a.Merge(b);
    for (int k = 0; k < 32; ++k) {
      ASSERT_EQ(a.Get(4, k * step), std::max(ra[k], rb[k])) << "trial " << trial;
    }
    EXPECT_EQ(a.Get(7, 50), 3);
    for (size_t i = 1; i < a.Ranges(4).size(); ++i) {
      ASSERT_NE(a.Ranges(4)[i].second, a.Ranges(4)[i - 1].second) << "not merged";
    }
  }
}

TEST(RangeClockTest, WireFormRoundTripsAndRejectsMalformedInput) {
  RangeVectorClock c;
  c.Set(3, Range(100, 200), 4);
  c.Set(-1, Range(0, 5), 2);
  c.Set(9, Range(7, kMaxKey), 1);
  RangeVectorClock d = RangeVectorClock::Decode(c.Encode());
  for (int n : {3, -1, 9}) EXPECT_EQ(d.Ranges(n), c.Ranges(n));
  EXPECT_EQ(d.TotalRanges(), c.TotalRanges());
  SArray<uint64_t> w = c.Encode();
  EXPECT_THROW(RangeVectorClock::Decode(w.Segment(0, w.size() - 1)), Error);  // truncated
  SArray<uint64_t> gap;
  for (uint64_t x : std::vector<uint64_t>{1, 2, 0, 10, 1, 11, kMaxKey, 2}) gap.push_back(x);
  EXPECT_THROW(RangeVectorClock::Decode(gap), Error);  // [10, 11) missing
  SArray<uint64_t> shorted;
  for (uint64_t x : {1ull, 1ull, 0ull, 10ull, 1ull}) shorted.push_back(x);
  EXPECT_THROW(RangeVectorClock::Decode(shorted), Error);  // does not reach kMaxKey
  EXPECT_EQ(RangeVectorClock::Decode(SArray<uint64_t>()).TotalRanges(), 0u);
}

// The direct forms a range hand-off uses (AppliedLog::Export and Import) say what Set then
// Encode, and Decode then Min, say, and refuse what Decode refuses.
TEST(RangeClockTest, DirectEncodingAndMinsAgreeWithTheClock) {
  const uint64_t seed = 77;
  Rng rng(seed);
  const Key step = kMaxKey / 16;
  auto range = [&] {
    int a = static_cast<int>(rng.Below(16)), b = static_cast<int>(rng.Below(16)) + 1;
    if (a >= b) std::swap(a, b);
    if (a == b) b = a + 1;
    return Range(a * step, b == 16 ? kMaxKey : b * step);
  };
  for (int i = 0; i < 500; ++i) {
    RangeVectorClock c;
    SArray<uint64_t> direct;
    const int nodes = 1 + static_cast<int>(rng.Below(5));
    for (int n = 0; n < nodes; ++n) {
      const Range r = range();
      const int64_t t = 1 + static_cast<int64_t>(rng.Below(9));
      c.Set(n * 3 - 2, r, t);  // ascending ids, as Encode lists them
      RangeVectorClock::EncodeOne(n * 3 - 2, r, t, &direct);
    }
    const SArray<uint64_t> wire = c.Encode();
    ASSERT_EQ(std::vector<uint64_t>(direct.begin(), direct.end()),
              std::vector<uint64_t>(wire.begin(), wire.end()))
        << "seed " << seed << " case " << i;
    // Mins of a clock with several ranges per node (Set twice), over any range.
    c.Set(static_cast<int>(rng.Below(nodes)) * 3 - 2, range(), static_cast<int64_t>(rng.Below(9)));
    const Range q = range();
    const auto mins = RangeVectorClock::MinsOver(c.Encode(), q);
    const RangeVectorClock d = RangeVectorClock::Decode(c.Encode());
    ASSERT_EQ(mins.size(), d.Nodes().size()) << "seed " << seed << " case " << i;
    for (const auto& m : mins) {
      ASSERT_EQ(m.second, d.Min(m.first, q)) << "seed " << seed << " case " << i;
    }
  }
  SArray<uint64_t> twice;
  RangeVectorClock::EncodeOne(4, Range(1, 9), 3, &twice);
  RangeVectorClock::EncodeOne(4, Range(2, 9), 5, &twice);
  EXPECT_THROW(RangeVectorClock::Decode(twice), Error);
  EXPECT_THROW(RangeVectorClock::MinsOver(twice, Range(0, 5)), Error);
  SArray<uint64_t> gap;
  for (uint64_t x : std::vector<uint64_t>{1, 2, 0, 10, 1, 11, kMaxKey, 2}) gap.push_back(x);
  EXPECT_THROW(RangeVectorClock::MinsOver(gap, Range(0, 5)), Error);
  SArray<uint64_t> w = twice.Segment(0, 10);  // the first node, its last range cut short
  EXPECT_THROW(RangeVectorClock::MinsOver(w, Range(0, 5)), Error);
  EXPECT_TRUE(RangeVectorClock::MinsOver(SArray<uint64_t>(), Range(0, 5)).empty());
}

}  // namespace
}  // namespace ps
