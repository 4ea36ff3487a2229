// The scheduler's count of copies per key range (DESIGN §8, invariant 6; issue 15 item 7): a
// job stops only when some range has no copy left, and names those ranges — not after any
// k + 1 failures before a refill ends.
#include "control/copy_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "util/rng.h"

namespace ps {
namespace {

// Server ids 1..n.
std::vector<int> ServerIds(int n) {
  std::vector<int> ids;
  for (int i = 1; i <= n; ++i) ids.push_back(i);
  return ids;
}

// The ranges whose chain under ring is exactly {a, b} in some order (what dies with a and b).
std::vector<Range> SharedBy(const Ring& ring, int a, int b) {
  std::vector<Range> out;
  for (size_t i = 0; i < ring.segments().size(); ++i) {
    auto c = ring.Chain(i);
    std::sort(c.begin(), c.end());
    if (c == std::vector<int>{std::min(a, b), std::max(a, b)}) {
      const Range r = ring.segments()[i].range;
      if (!out.empty() && out.back().end == r.begin) {
        out.back().end = r.end;
      } else {
        out.push_back(r);
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Range& x, const Range& y) { return x.begin < y.begin; });
  return out;
}

TEST(CopyTrackerTest, FailuresInDifferentChainsLoseNothing) {
  // One position per server and one replica: each chain is a server and its predecessor, so
  // two servers that are not neighbours on the circle share no chain.
  Ring ring({1, 2, 3, 4, 5, 6}, 1, 1, 1);
  const auto& segs = ring.segments();
  std::vector<int> order;
  for (const auto& s : segs) {
    if (order.empty() || order.back() != s.server) order.push_back(s.server);
  }
  ASSERT_GE(order.size(), 6u);
  CopyTracker t;
  t.Reset(ring);
  EXPECT_TRUE(t.Lost(order[0]).empty());
  EXPECT_TRUE(t.Lost(order[3]).empty()) << "two failures in different chains lose nothing";
  // A third failure next to the first (and not next to the second): the ranges whose chain
  // was exactly those two are gone, and only those.
  const auto lost = t.Lost(order[1]);
  const auto want = SharedBy(ring, order[0], order[1]);
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(lost.size(), want.size());
  for (size_t i = 0; i < lost.size(); ++i) {
    EXPECT_EQ(lost[i], want[i]) << i;
  }
}

TEST(CopyTrackerTest, ARefilledServerCountsAsACopy) {
  Ring ring({1, 2, 3, 4}, 8, 1, 1);
  CopyTracker t;
  t.Reset(ring);
  ASSERT_TRUE(t.Lost(1).empty());
  // Ring without 1: every server that reports its refill done holds its new chains' ranges.
  Ring next({2, 3, 4}, 8, 1, 2);
  for (int s : {2, 3, 4}) t.Holds(s, next);
  for (size_t i = 0; i < next.segments().size(); ++i) {
    EXPECT_EQ(t.Holders(next.segments()[i].range.begin), 2u) << "segment " << i;
  }
  // Now any one more failure is survivable.
  EXPECT_TRUE(t.Lost(2).empty());
}

// Reset builds the map in one pass; it must count the chain members of every segment, and
// equal what adding every server's held ranges (Holds, through Add) builds.
TEST(CopyTrackerTest, ResetCountsEveryChainMemberAsHoldsWould) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Rng rng(seed);
    const std::vector<int> ids = ServerIds(1 + static_cast<int>(rng.Below(9)));
    Ring ring(ids, 1 + static_cast<int>(rng.Below(8)), static_cast<int>(rng.Below(3)), 1);
    CopyTracker reset, added;
    reset.Reset(ring);
    for (int s : ids) added.Holds(s, ring);
    for (size_t i = 0; i < ring.segments().size(); ++i) {
      const Range r = ring.segments()[i].range;
      for (Key k : {r.begin, r.begin + (r.end - r.begin) / 2, r.end - 1}) {
        ASSERT_EQ(reset.Holders(k), ring.Chain(i).size()) << "seed " << seed << " segment " << i;
        ASSERT_EQ(added.Holders(k), reset.Holders(k)) << "seed " << seed << " segment " << i;
      }
    }
    const int victim = ids[rng.Below(ids.size())];
    const auto a = reset.Lost(victim), b = added.Lost(victim);
    ASSERT_EQ(a.size(), b.size()) << "seed " << seed;
    for (size_t j = 0; j < a.size(); ++j) ASSERT_TRUE(a[j] == b[j]) << "seed " << seed;
  }
}

// Against a brute force over random rings and failure orders: a range is lost exactly when
// every member of its chain failed (no refill in between).
TEST(CopyTrackerTest, LostIsExactlyWhereEveryChainMemberFailed) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Rng rng(seed);
    const int n = 3 + static_cast<int>(rng.Below(6));
    const std::vector<int> ids = ServerIds(n);
    const int k = 1 + static_cast<int>(rng.Below(2));
    Ring ring(ids, 1 + static_cast<int>(rng.Below(8)), k, 1);
    CopyTracker t;
    t.Reset(ring);
    std::vector<int> dead;
    for (int f = 0; f < n - 1; ++f) {
      int victim;
      do {
        victim = ids[rng.Below(ids.size())];
      } while (std::find(dead.begin(), dead.end(), victim) != dead.end());
      dead.push_back(victim);
      const auto lost = t.Lost(victim);
      for (size_t i = 0; i < ring.segments().size(); ++i) {
        const auto chain = ring.Chain(i);
        const bool gone = std::all_of(chain.begin(), chain.end(), [&](int s) {
          return std::find(dead.begin(), dead.end(), s) != dead.end();
        });
        const Key mid = ring.segments()[i].range.begin;
        const bool reported =
            std::any_of(lost.begin(), lost.end(), [&](const Range& r) { return r.Contains(mid); });
        ASSERT_EQ(gone, reported) << "seed " << seed << ", segment " << i << ", failures "
                                  << dead.size();
      }
    }
  }
}

TEST(CopyTrackerTest, DescribeNamesRangesAndTheirShare) {
  const std::string d =
      CopyTracker::Describe({Range(0, kMaxKey / 4), Range(kMaxKey / 2, kMaxKey / 2 + 16)});
  EXPECT_NE(d.find("[0000000000000000, 3fffffffffffffff)"), std::string::npos) << d;
  EXPECT_NE(d.find("25"), std::string::npos) << d;  // about a quarter of the key space
}

}  // namespace
}  // namespace ps
