// SeqMap (src/replication/seq_map.h): the sequence points behind the order along a chain.
#include "replication/seq_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "util/rng.h"

namespace ps {
namespace {

const std::vector<Range> kAll{Range::All()};

TEST(SeqMapTest, BumpNumbersEachRangeAndReportsPrevAndNext) {
  SeqMap m;
  std::vector<uint64_t> e;
  m.Bump(Range(10, 20), &e);
  ASSERT_EQ(e, (std::vector<uint64_t>{10, 20, 0, 1}));
  e.clear();
  m.Bump(Range(10, 20), &e);
  EXPECT_EQ(e, (std::vector<uint64_t>{10, 20, 1, 2}));
  EXPECT_EQ(m.Min(Range(10, 20)), 2u);
  EXPECT_EQ(m.Min(Range(0, 10)), 0u);
  EXPECT_EQ(m.Min(Range(20, 30)), 0u);
}

TEST(SeqMapTest, ARangeWhosePartsStandApartMovesAsOneGroup) {
  SeqMap m;
  std::vector<uint64_t> e;
  m.Bump(Range(0, 10), &e);
  m.Bump(Range(0, 10), &e);
  e.clear();
  m.Bump(Range(0, 20), &e);  // [0,10) at 2, [10,20) at 0: both go to 3
  ASSERT_EQ(e.size(), 8u);
  EXPECT_EQ(e[2], 2u);
  EXPECT_EQ(e[3], 3u | SeqMap::kLinked);
  EXPECT_EQ(e[6], 0u);
  EXPECT_EQ(e[7], 3u);
  EXPECT_EQ(m.intervals(), 2u);  // [0,20) at 3, then the rest at 0
  // A piece of the update holding keys of the second part only still carries the whole group.
  const Key k = 15;
  EXPECT_EQ(SeqMap::Touching(e, &k, 1), e);
  const Key far = 25;
  EXPECT_TRUE(SeqMap::Touching(e, &far, 1).empty());
}

TEST(SeqMapTest, CheckTellsApplyDuplicateGapAndMismatch) {
  SeqMap r;
  const std::vector<uint64_t> first{0, 10, 0, 1}, second{0, 10, 1, 2}, jump{0, 10, 1, 99};
  EXPECT_EQ(r.Check(second.data(), 4, kAll), SeqMap::Verdict::kGap);
  EXPECT_EQ(r.Check(first.data(), 4, kAll), SeqMap::Verdict::kApply);
  r.Advance(first.data(), 4);
  EXPECT_EQ(r.Check(first.data(), 4, kAll), SeqMap::Verdict::kDuplicate);
  EXPECT_EQ(r.Check(second.data(), 4, kAll), SeqMap::Verdict::kApply);
  r.Advance(second.data(), 4);
  // A jump from point 1: this replica went on to 2 on its own, another history.
  EXPECT_EQ(r.Check(jump.data(), 4, kAll), SeqMap::Verdict::kMismatch);
  EXPECT_EQ(r.Behind(jump.data(), 4, kAll), (std::vector<Range>{Range(0, 10)}));
  // Ranges this server does not hold are not checked.
  EXPECT_EQ(r.Check(jump.data(), 4, {Range(50, 60)}), SeqMap::Verdict::kDuplicate);
}

// A copy may be applied (kApply) with some of its parts past their next already (taken with a
// newer snapshot of those ranges): AtPrev tells the copy that is the next update everywhere, which
// a replica applies whatever the worker's low-water mark says, from one applied in part, whose
// applied parts only the log and the mark can tell (ChainReplicator::Deliver).
TEST(SeqMapTest, AtPrevTellsTheNextUpdateEverywhereFromOneAppliedInPart) {
  SeqMap r;
  const std::vector<uint64_t> first{0, 10, 0, 1, 10, 20, 0, 1};
  EXPECT_EQ(r.Check(first.data(), 8, kAll), SeqMap::Verdict::kApply);
  EXPECT_TRUE(r.AtPrev(first.data(), 8, kAll));
  const std::vector<uint64_t> part{10, 20, 0, 1};  // [10, 20) came with a snapshot past it
  r.Advance(part.data(), 4);
  EXPECT_EQ(r.Check(first.data(), 8, kAll), SeqMap::Verdict::kApply);
  EXPECT_FALSE(r.AtPrev(first.data(), 8, kAll));
  // Only the ranges held are looked at.
  EXPECT_TRUE(r.AtPrev(first.data(), 8, {Range(0, 10)}));
}

TEST(SeqMapTest, LacksTellsAnUpdateNoPartOfWhichIsHere) {
  SeqMap r;
  // The update 3 -> 4 over [0, 10) and [10, 20), with a gap before it everywhere.
  const std::vector<uint64_t> e{0, 10, 3, 4, 10, 20, 3, 4};
  EXPECT_TRUE(r.Lacks(e.data(), 8, kAll));
  EXPECT_TRUE(r.Lacks(e.data(), 8, {Range(0, 5), Range(5, 20)}));
  // A range it names that is not held: the points say nothing there.
  EXPECT_FALSE(r.Lacks(e.data(), 8, {Range(0, 10)}));
  EXPECT_FALSE(r.Lacks(e.data(), 8, {Range(0, 15)}));
  // Applied in one part ([10, 20) came with a snapshot past it): not lacking everywhere.
  const std::vector<uint64_t> part{10, 20, 0, 4};
  r.Advance(part.data(), 4);
  EXPECT_FALSE(r.Lacks(e.data(), 8, kAll));
  EXPECT_TRUE(r.Lacks(e.data(), 4, kAll));   // [0, 10) alone still lacks it
  EXPECT_FALSE(r.Lacks(e.data(), 0, kAll));  // no entries: nothing to tell by
}

// A new master that takes an old master's copy only outside the ranges it masters keeps its
// own points there (its replicas follow those).
TEST(SeqMapTest, AdvanceWithinRangesLeavesThePointsOutsideThem) {
  SeqMap r;
  const std::vector<uint64_t> e{0, 10, 0, 7};
  r.Advance(e.data(), 4, {Range(0, 4), Range(6, 8)});
  EXPECT_EQ(r.Min(Range(0, 4)), 7u);
  EXPECT_EQ(r.Min(Range(6, 8)), 7u);
  EXPECT_EQ(r.Min(Range(4, 6)), 0u);
  EXPECT_EQ(r.Min(Range(8, 10)), 0u);
  EXPECT_EQ(r.Min(Range(10, 20)), 0u);
}

TEST(SeqMapTest, AJumpGoesAboveEveryEarlierPoint) {
  SeqMap m;
  std::vector<uint64_t> e;
  for (int i = 0; i < 5; ++i) m.Bump(Range(0, 10), &e);
  m.Jump(Range(0, 10), SeqMap::Base(3));
  e.clear();
  m.Bump(Range(0, 10), &e);
  EXPECT_EQ(e, (std::vector<uint64_t>{0, 10, 5, SeqMap::Base(3) + 1}));
  e.clear();
  m.Bump(Range(0, 10), &e);
  EXPECT_EQ(e[2] + 1, e[3]);  // once: the next bump counts on
}

TEST(SeqMapTest, ExportImportRoundTripsAndRejectsMalformedTriples) {
  SeqMap a, b;
  std::vector<uint64_t> e;
  a.Bump(Range(0, 10), &e);
  a.Bump(Range(5, 30), &e);
  std::vector<uint64_t> t;
  a.Export(Range(0, 40), &t);
  ASSERT_EQ(b.Import(Range(0, 40), t.data(), t.size()), "");
  for (Key k : {0, 4, 5, 9, 10, 29, 30, 39}) {
    EXPECT_EQ(a.Min(Range(k, k + 1)), b.Min(Range(k, k + 1))) << k;
  }
  const std::vector<uint64_t> gap{0, 5, 1, 6, 40, 7};  // [5,6) missing
  EXPECT_NE(b.Import(Range(0, 40), gap.data(), gap.size()), "");
  const std::vector<uint64_t> pairs{0, 40};
  EXPECT_NE(b.Import(Range(0, 40), pairs.data(), pairs.size()), "");
  EXPECT_EQ(b.Min(Range(29, 30)), 2u) << "a rejected import changed the points";
}

// Property: whatever order the copies of a master's updates arrive in, a replica that applies
// each only when Check allows it (holding the others) ends with the master's points and the
// master's order of application. Seeded; the seed is printed on failure.
TEST(SeqMapTest, HeldCopiesAreAppliedInTheMastersOrder) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng(seed);
    SeqMap master, replica;
    struct Copy {
      int id;
      std::vector<uint64_t> e;
    };
    std::vector<Copy> copies;
    for (int i = 0; i < 40; ++i) {
      const Key b = rng.Below(8) * 10, len = 10 * (1 + rng.Below(3));
      Copy c{i, {}};
      master.Bump(Range(b, b + len), &c.e);
      copies.push_back(c);
    }
    for (size_t i = copies.size(); i > 1; --i) std::swap(copies[i - 1], copies[rng.Below(i)]);
    std::vector<Copy> held;
    std::vector<int> applied;
    for (auto& c : copies) {
      held.push_back(c);
      for (bool progress = true; progress;) {
        progress = false;
        for (size_t i = 0; i < held.size(); ++i) {
          const auto v = replica.Check(held[i].e.data(), held[i].e.size(), kAll);
          ASSERT_NE(v, SeqMap::Verdict::kMismatch) << "seed " << seed;
          if (v == SeqMap::Verdict::kGap) continue;
          replica.Advance(held[i].e.data(), held[i].e.size());
          applied.push_back(held[i].id);
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
          progress = true;
          break;
        }
      }
    }
    ASSERT_TRUE(held.empty()) << "seed " << seed;
    // Updates of overlapping ranges are applied in the master's order.
    for (size_t i = 0; i < applied.size(); ++i) {
      for (size_t j = i + 1; j < applied.size(); ++j) {
        if (applied[i] < applied[j]) continue;
        // j was applied after i but issued before it: their ranges must not overlap.
        const auto& a = std::find_if(copies.begin(), copies.end(), [&](const Copy& c) {
                          return c.id == applied[i];
                        })->e;
        const auto& b = std::find_if(copies.begin(), copies.end(), [&](const Copy& c) {
                          return c.id == applied[j];
                        })->e;
        for (size_t x = 0; x < a.size(); x += 4) {
          for (size_t y = 0; y < b.size(); y += 4) {
            EXPECT_GE(std::max(a[x], b[y]), std::min(a[x + 1], b[y + 1]))
                << "seed " << seed << ": updates " << applied[j] << " and " << applied[i]
                << " of one range applied out of order";
          }
        }
      }
    }
    for (Key k = 0; k < 120; k += 5) {
      ASSERT_EQ(replica.Min(Range(k, k + 1)), master.Min(Range(k, k + 1))) << "seed " << seed;
    }
  }
}

}  // namespace
}  // namespace ps
