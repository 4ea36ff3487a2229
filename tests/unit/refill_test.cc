// The pure parts of the range hand-off: range sets, what a server holds and fetches under a
// ring (src/replication/refill.h), and the exports a hand-off carries (store slots with the
// update rule's state, the applied log with its range vector clock).
#include "replication/refill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "kv/applied_log.h"
#include "store/store.h"
#include "util/rng.h"

namespace ps {
namespace {

RangeSet RandomSet(Rng* rng, Key universe) {
  RangeSet s;
  for (int i = 0, n = static_cast<int>(rng->Below(6)); i < n; ++i) {
    Key a = rng->Below(universe), b = rng->Below(universe);
    s.emplace_back(std::min(a, b), std::max(a, b));
  }
  return Normalize(s);
}

std::vector<bool> Bits(const RangeSet& s, Key universe) {
  std::vector<bool> b(universe, false);
  for (const Range& r : s) {
    for (Key k = r.begin; k < r.end; ++k) b[k] = true;
  }
  return b;
}

TEST(RangeSetTest, OperationsMatchABitmap) {
  const Key u = 64;
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    Rng rng(seed);
    RangeSet a = RandomSet(&rng, u), b = RandomSet(&rng, u);
    auto A = Bits(a, u), B = Bits(b, u);
    std::vector<bool> un(u), in(u), sub(u);
    for (Key k = 0; k < u; ++k) {
      un[k] = A[k] || B[k];
      in[k] = A[k] && B[k];
      sub[k] = A[k] && !B[k];
    }
    ASSERT_EQ(Bits(Union(a, b), u), un) << "seed " << seed;
    ASSERT_EQ(Bits(Intersect(a, b), u), in) << "seed " << seed;
    ASSERT_EQ(Bits(Subtract(a, b), u), sub) << "seed " << seed;
    // Results are normalized: sorted, non-empty, neither overlapping nor touching.
    for (const RangeSet& r : {Union(a, b), Intersect(a, b), Subtract(a, b)}) {
      for (size_t i = 0; i < r.size(); ++i) {
        ASSERT_LT(r[i].begin, r[i].end);
        if (i > 0) {
          ASSERT_LT(r[i - 1].end, r[i].begin) << "seed " << seed;
        }
      }
    }
  }
}

std::vector<int> Ids(int n) {
  std::vector<int> v;
  for (int i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

TEST(RefillPlanTest, EveryRangeIsHeldByExactlyItsChain) {
  for (int k : {0, 1, 2}) {
    Ring ring(Ids(5), 16, k, 1);
    for (size_t i = 0; i < ring.segments().size(); ++i) {
      const Range r = ring.segments()[i].range;
      auto chain = ring.Chain(i);
      ASSERT_EQ(chain.size(), static_cast<size_t>(k + 1));
      for (int s = 1; s <= 5; ++s) {
        const bool in = std::find(chain.begin(), chain.end(), s) != chain.end();
        EXPECT_EQ(Subtract({r}, HeldRanges(ring, s)).empty(), in) << "server " << s;
      }
    }
  }
}

// DESIGN §8 invariant 5 (refill before trust) rests on this: when a server fails, every chain
// keeps its surviving members in order and only gains new ones at the tail, so while at most k
// members of a chain fail before the refill ends, its master holds a complete copy and the
// only servers that fetch are the new tail members, from that master.
TEST(RefillPlanTest, AFailureOnlyAppendsMembersAtTheTailOfChains) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Rng rng(seed);
    const int n = 3 + static_cast<int>(rng.Below(5)), k = 1 + static_cast<int>(rng.Below(2));
    Ring before(Ids(n), 8, k, 1);
    const int dead = 1 + static_cast<int>(rng.Below(n));
    std::vector<int> left;
    for (int s = 1; s <= n; ++s) {
      if (s != dead) left.push_back(s);
    }
    Ring after(left, 8, k, 2);
    for (int probe = 0; probe < 500; ++probe) {
      const Key key = rng.Next() % kMaxKey;
      auto old_chain = before.Chain(before.SegmentOf(key));
      auto new_chain = after.Chain(after.SegmentOf(key));
      old_chain.erase(std::remove(old_chain.begin(), old_chain.end(), dead), old_chain.end());
      ASSERT_LE(old_chain.size(), new_chain.size());
      for (size_t i = 0; i < old_chain.size(); ++i) {
        ASSERT_EQ(old_chain[i], new_chain[i]) << "seed " << seed << " key " << key;
      }
    }
    for (int s : left) {
      RefillPlan p = PlanRefill(after, nullptr, s, HeldRanges(before, s));
      EXPECT_TRUE(p.orphans.empty()) << "seed " << seed;
      EXPECT_TRUE(p.drop.empty()) << "seed " << seed;  // a failure never takes a range away
      for (const auto& f : p.fetch) {
        // Fetched from the master under the new ring, which held it before.
        EXPECT_EQ(after.Owner(f.first.begin), f.second);
        EXPECT_TRUE(Subtract({f.first}, HeldRanges(before, f.second)).empty());
      }
    }
  }
}

TEST(RefillPlanTest, AJoinerFetchesEverythingAndOldOwnersDropAfterTheCutOver) {
  Ring before(Ids(4), 16, 1, 1), after(Ids(5), 16, 1, 2);
  // Preparing: only the joiner lacks anything, and it fetches from the current masters.
  RefillPlan joiner = PlanRefill(before, &after, 5, {});
  EXPECT_EQ(Size(joiner.missing), Size(HeldRanges(after, 5)));
  EXPECT_TRUE(joiner.orphans.empty());
  uint64_t fetched = 0;
  for (const auto& f : joiner.fetch) {
    EXPECT_EQ(before.Owner(f.first.begin), f.second);
    fetched += f.first.size();
  }
  EXPECT_EQ(fetched, Size(joiner.missing));
  for (int s = 1; s <= 4; ++s) {
    RefillPlan p = PlanRefill(before, &after, s, HeldRanges(before, s));
    EXPECT_TRUE(p.missing.empty()) << "server " << s;
    EXPECT_TRUE(p.drop.empty()) << "server " << s;  // nothing is dropped before the cut-over
  }
  // After the cut-over the old owners drop exactly what they no longer hold.
  uint64_t dropped = 0;
  for (int s = 1; s <= 4; ++s) {
    RefillPlan p = PlanRefill(after, nullptr, s, HeldRanges(before, s));
    EXPECT_TRUE(p.missing.empty());
    EXPECT_EQ(Intersect(p.drop, HeldRanges(after, s)), RangeSet{});
    dropped += Size(p.drop);
  }
  EXPECT_GT(dropped, 0u);
}

// DESIGN §8 invariant 6 (no silent loss): when every member of a chain is gone, the server
// that now masters the range knows it has no complete copy to fetch from; it never treats the
// range as held (the scheduler stops the job).
TEST(RefillPlanTest, AChainWithoutSurvivorsShowsAsOrphans) {
  Ring before(Ids(4), 8, 1, 1);
  const auto chain = before.Chain(0);
  std::vector<int> left;
  for (int s = 1; s <= 4; ++s) {
    if (std::find(chain.begin(), chain.end(), s) == chain.end()) left.push_back(s);
  }
  Ring after(left, 8, 1, 2);
  const Key k = before.segments()[0].range.begin;
  const int heir = after.Owner(k);
  RefillPlan p = PlanRefill(after, nullptr, heir, HeldRanges(before, heir));
  EXPECT_TRUE(Subtract({Range(k, k + 1)}, p.orphans).empty())
      << "the lost range must be reported as an orphan";
}

TEST(StoreHandoffTest, ExportImportCarriesRuleStateAndReplacesTheRange) {
  auto rule = std::make_shared<AdaGradRule<float>>(0.5f);
  Store<float> a(rule), b(rule);
  std::vector<Key> keys;
  for (Key k = 10; k < 200; k += 3) keys.push_back(k);
  std::vector<float> g(keys.size(), 1.5f);
  ASSERT_EQ(
      a.Push(keys.data(), keys.size(), reinterpret_cast<const char*>(g.data()), g.size(), nullptr),
      "");
  // b holds other values in the range (to be replaced) and a key outside it (to be kept).
  std::vector<Key> bk{50, 51, 500};
  std::vector<float> bv{9, 9, 7};
  ASSERT_EQ(b.Push(bk.data(), 3, reinterpret_cast<const char*>(bv.data()), 3, nullptr), "");
  const Range r(40, 120);
  SArray<Key> ek;
  SArray<char> slots;
  SArray<uint64_t> sizes;
  a.ExportRange(r, &ek, &slots, &sizes);
  ASSERT_EQ(b.ImportRanges({r}, ek, slots, sizes), "");
  EXPECT_EQ(b.CountRange(r), a.CountRange(r));
  EXPECT_EQ(b.CountRange(Range(500, 501)), 1u);
  EXPECT_EQ(b.CountRange(Range(50, 52)), a.CountRange(Range(50, 52)));
  // The same next push gives the same values: the AdaGrad state came along.
  std::vector<Key> in(ek.begin(), ek.end());
  std::vector<float> g2(in.size(), -0.7f);
  ASSERT_EQ(
      a.Push(in.data(), in.size(), reinterpret_cast<const char*>(g2.data()), g2.size(), nullptr),
      "");
  ASSERT_EQ(
      b.Push(in.data(), in.size(), reinterpret_cast<const char*>(g2.data()), g2.size(), nullptr),
      "");
  SArray<char> va, vb;
  SArray<int> la, lb;
  a.Pull(in.data(), in.size(), 1, &va, &la);
  b.Pull(in.data(), in.size(), 1, &vb, &lb);
  ASSERT_EQ(va.size(), vb.size());
  EXPECT_EQ(0, std::memcmp(va.data(), vb.data(), va.size()));
}

TEST(StoreHandoffTest, MalformedImportChangesNothing) {
  Store<int64_t> s(std::make_shared<SumRule<int64_t>>());
  std::vector<Key> k{5, 6};
  std::vector<int64_t> v{1, 2};
  ASSERT_EQ(s.Push(k.data(), 2, reinterpret_cast<const char*>(v.data()), 2, nullptr), "");
  SArray<Key> keys{7, 100};  // 100 lies outside [0, 50)
  SArray<int64_t> vals{3, 4};
  SArray<uint64_t> sizes{1, 1};
  EXPECT_NE(s.ImportRanges({Range(0, 50)}, keys, SArray<char>(vals), sizes), "");
  SArray<uint64_t> bad_sizes{1, 2};
  EXPECT_NE(s.ImportRanges({Range(0, 200)}, keys, SArray<char>(vals), bad_sizes), "");
  EXPECT_EQ(s.size(), 2u);
}

TEST(AppliedLogHandoffTest, ImportedLogRecognisesAppliedPushesInTheRangeOnly) {
  AppliedLog master, replica;
  master.Advance(7, 3);
  master.RecordKeys(7, 4, SArray<Key>{10, 20, 30, 900});
  master.RecordRange(8, 0, Range(15, 1000));
  // The replica recorded something of its own in the range (replaced) and outside (kept).
  replica.RecordKeys(9, 1, SArray<Key>{25, 2000});
  const Range r(0, 100);
  SArray<uint64_t> clock, records;
  master.Export(r, &clock, &records);
  ASSERT_EQ(replica.Import(r, clock, records), "");
  std::vector<bool> seen;
  const Key a[] = {10, 20, 30, 900};
  EXPECT_EQ(replica.CheckKeys(7, 4, a, 4, &seen), 3u);  // 900 lies outside the range
  EXPECT_TRUE(replica.Below(7, 2));                     // the mark came with the clock
  auto fresh = replica.FreshRanges(8, 0, Range(0, 200));
  ASSERT_EQ(fresh.size(), 2u);  // [15, 100) is known, the rest is not
  EXPECT_EQ(fresh[0], Range(0, 15));
  EXPECT_EQ(fresh[1], Range(100, 200));
  const Key b[] = {25, 2000};
  EXPECT_EQ(replica.CheckKeys(9, 1, b, 2, &seen), 1u);  // 25 replaced, 2000 kept
  EXPECT_TRUE(seen[1]);
  // A truncated export is refused and changes nothing.
  AppliedLog other;
  other.RecordKeys(9, 1, SArray<Key>{25});
  EXPECT_NE(other.Import(r, clock, records.Segment(0, records.size() - 1)), "");
  EXPECT_EQ(other.CheckKeys(9, 1, b, 2, &seen), 1u);
}

// The records frame of a range piece is a view of the whole piece's receive buffer (the UCX van
// delivers a message in one buffer): the imported log must not keep it alive. It did, and a
// refilling server of fault.big_handoff.ucx held 600-700 MB of finished pieces until the
// workers' next pushes dropped the records.
TEST(AppliedLogHandoffTest, ImportedRecordsDoNotHoldTheReceivedFrame) {
  AppliedLog master, replica;
  master.RecordKeys(7, 4, SArray<Key>{10, 20, 30});
  const Range r(0, 100);
  SArray<uint64_t> clock, records;
  master.Export(r, &clock, &records);
  // As received: the records inside a larger buffer (the piece's other frames around it).
  SArray<uint64_t> buffer(records.size() + 1000, 0);
  for (size_t i = 0; i < records.size(); ++i) buffer[500 + i] = records[i];
  const SArray<uint64_t> frame = buffer.Segment(500, 500 + records.size());
  ASSERT_EQ(replica.Import(r, clock, frame), "");
  const Key a[] = {10, 20, 30};
  std::vector<bool> seen;
  EXPECT_EQ(replica.CheckKeys(7, 4, a, 3, &seen), 3u);
  // Only this test's two handles (buffer and frame) share the buffer.
  EXPECT_EQ(buffer.ptr().use_count(), 2);
}

}  // namespace
}  // namespace ps
