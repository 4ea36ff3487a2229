#include "ring/ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

namespace ps {
namespace {

constexpr uint64_t kSeed = 20261122;

std::vector<Key> RandomKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Key> keys(n);
  for (auto& k : keys) k = rng() % kMaxKey;
  return keys;
}

std::vector<int> Ids(int n) {
  std::vector<int> ids;
  for (int i = 1; i <= n; ++i) ids.push_back(i);
  return ids;
}

TEST(RingTest, SegmentsCoverTheKeySpaceInOrder) {
  Ring ring(Ids(5), 16, 0, 1);
  const auto& segs = ring.segments();
  ASSERT_FALSE(segs.empty());
  EXPECT_EQ(segs.front().range.begin, 0u);
  EXPECT_EQ(segs.back().range.end, kMaxKey);
  for (size_t i = 1; i < segs.size(); ++i) {
    EXPECT_EQ(segs[i - 1].range.end, segs[i].range.begin);
    EXPECT_NE(segs[i - 1].server, segs[i].server) << "neighbours with one owner are merged";
  }
}

TEST(RingTest, KeysBelowTheFirstPositionWrapToTheLastPosition) {
  Ring ring(Ids(3), 4, 0, 1);
  // The segment [0, first position) belongs to the owner of the highest position.
  EXPECT_EQ(ring.Owner(0), ring.segments().back().server);
}

// 8 servers, V = 128: the most loaded server holds at most 1.25x the mean of 10^6 keys.
TEST(RingTest, LoadBalanceWithVirtualNodes) {
  Ring ring(Ids(8), 128, 0, 1);
  auto keys = RandomKeys(1000000, kSeed);
  std::map<int, size_t> load;
  for (Key k : keys) load[ring.Owner(k)]++;
  ASSERT_EQ(load.size(), 8u);
  size_t most = 0;
  for (auto& l : load) most = std::max(most, l.second);
  double mean = 1e6 / 8;
  EXPECT_LE(most, 1.25 * mean) << "seed " << kSeed;
}

// Adding a 9th server moves between 0.8/9 and 1.25/9 of the keys, all of them to the new one.
TEST(RingTest, AddingAServerMovesAboutOneNinthOfTheKeys) {
  Ring before(Ids(8), 128, 0, 1);
  Ring after(Ids(9), 128, 0, 2);
  auto keys = RandomKeys(1000000, kSeed + 1);
  size_t moved = 0;
  for (Key k : keys) {
    int a = before.Owner(k), b = after.Owner(k);
    if (a != b) {
      ++moved;
      ASSERT_EQ(b, 9) << "a key moved between two old servers; seed " << kSeed + 1;
    }
  }
  double frac = moved / 1e6;
  EXPECT_GE(frac, 0.8 / 9) << "seed " << kSeed + 1;
  EXPECT_LE(frac, 1.25 / 9) << "seed " << kSeed + 1;
}

TEST(RingTest, SliceKeysMatchesOwnerOfEveryKey) {
  Ring ring(Ids(4), 32, 0, 1);
  auto keys = RandomKeys(20000, kSeed + 2);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<KeySlice> slices;
  ring.SliceKeys(keys.data(), keys.size(), &slices);
  size_t next = 0;
  for (const auto& s : slices) {
    EXPECT_EQ(s.begin, next);
    EXPECT_LT(s.begin, s.end);
    for (size_t i = s.begin; i < s.end; ++i) ASSERT_EQ(ring.Owner(keys[i]), s.server);
    next = s.end;
  }
  EXPECT_EQ(next, keys.size());
}

// Slicing a sorted key list costs O(keys + ranges) comparisons, not O(keys * log ranges),
// and a single key costs O(log ranges).
TEST(RingTest, SliceKeysIsLinearNotKeysTimesLog) {
  Ring ring(Ids(8), 128, 0, 1);
  const size_t segs = ring.segments().size();
  for (size_t n : {1000u, 100000u, 1000000u}) {
    auto keys = RandomKeys(n, kSeed + n);
    std::sort(keys.begin(), keys.end());
    std::vector<KeySlice> slices;
    size_t steps = 0;
    ring.SliceKeys(keys.data(), keys.size(), &slices, &steps);
    EXPECT_LE(steps, 2 * (n + segs)) << "n=" << n;
    // keys * log2(segments) would be about 10x n here.
    EXPECT_LT(steps, n * 10 / 4) << "n=" << n;
  }
  Key one = 12345678901234ULL;
  size_t steps = 0;
  std::vector<KeySlice> slices;
  ring.SliceKeys(&one, 1, &slices, &steps);
  EXPECT_LE(steps, 4u);
}

TEST(RingTest, ChainHoldsMasterAndKDistinctSuccessors) {
  Ring ring(Ids(5), 8, 2, 1);
  for (size_t s = 0; s < ring.segments().size(); ++s) {
    auto chain = ring.Chain(s);
    ASSERT_EQ(chain.size(), 3u);
    EXPECT_EQ(chain[0], ring.segments()[s].server);
    std::sort(chain.begin(), chain.end());
    EXPECT_EQ(std::unique(chain.begin(), chain.end()), chain.end());
  }
  Ring small(Ids(2), 8, 3, 1);
  EXPECT_EQ(small.Chain(0).size(), 2u) << "a chain never repeats a server";
}

// Fail-over needs the replicas to be the heirs: when the master of a segment leaves, every key of
// the segment belongs to the first server of its chain under the new ring; when that one has
// left too, to the second.
// SegmentsHeldBy walks forward from a server's own segments instead of building every chain:
// it must name exactly the segments whose chains hold the server, for rings of every shape.
TEST(RingTest, SegmentsHeldByAreThoseWhoseChainsHoldTheServer) {
  std::mt19937_64 rng(kSeed);
  for (int round = 0; round < 300; ++round) {
    const int n = 1 + static_cast<int>(rng() % 12), vnodes = 1 + static_cast<int>(rng() % 8),
              k = static_cast<int>(rng() % 4);
    std::vector<int> ids;
    for (int i = 0; i < n; ++i) ids.push_back(3 * i + static_cast<int>(rng() % 3));
    const Ring ring(ids, vnodes, k, 1);
    for (int s : ids) {
      std::vector<size_t> want;
      for (size_t i = 0; i < ring.segments().size(); ++i) {
        const auto chain = ring.Chain(i);
        if (std::find(chain.begin(), chain.end(), s) != chain.end()) want.push_back(i);
      }
      ASSERT_EQ(ring.SegmentsHeldBy(s), want)
          << "seed " << kSeed << " round " << round << ": " << n << " servers, " << vnodes
          << " vnodes, k " << k << ", server " << s;
    }
  }
}

TEST(RingTest, ChainOrderIsTheOrderOfInheritance) {
  const auto ids = Ids(6);
  Ring ring(ids, 16, 2, 1);
  for (size_t s = 0; s < ring.segments().size(); ++s) {
    const auto chain = ring.Chain(s);
    const Range r = ring.segments()[s].range;
    for (size_t gone = 1; gone < chain.size(); ++gone) {
      std::vector<int> left;
      for (int id : ids) {
        if (std::find(chain.begin(), chain.begin() + gone, id) == chain.begin() + gone) {
          left.push_back(id);
        }
      }
      Ring after(left, 16, 2, 2);
      for (Key k : {r.begin, r.begin + (r.end - r.begin) / 2, r.end - 1}) {
        ASSERT_EQ(after.Owner(k), chain[gone]) << "segment " << s << " after " << gone;
      }
    }
  }
}

TEST(RingTest, SliceRangeSplitsAtSegmentBoundaries) {
  Ring ring(Ids(3), 16, 0, 1);
  Range r(ring.segments()[2].range.begin + 5, ring.segments()[6].range.begin + 7);
  std::vector<RingSegment> parts;
  ring.SliceRange(r, &parts);
  ASSERT_EQ(parts.size(), 5u);
  EXPECT_EQ(parts.front().range.begin, r.begin);
  EXPECT_EQ(parts.back().range.end, r.end);
  for (size_t i = 1; i < parts.size(); ++i) {
    EXPECT_EQ(parts[i - 1].range.end, parts[i].range.begin);
  }
}

TEST(RingTest, EveryNodeBuildsTheSameRing) {
  Ring a({3, 1, 2}, 64, 1, 7), b({1, 2, 3}, 64, 1, 7);  // order of ids must not matter
  ASSERT_EQ(a.segments().size(), b.segments().size());
  for (size_t i = 0; i < a.segments().size(); ++i) {
    EXPECT_EQ(a.segments()[i].range, b.segments()[i].range);
    EXPECT_EQ(a.segments()[i].server, b.segments()[i].server);
  }
}

}  // namespace
}  // namespace ps
