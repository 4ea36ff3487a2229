// Cutting an applied push by the replica chains of its keys (src/replication/chain.h): every key
// goes to the replicas of its segment with its own values, and a piece that is one run of the
// push is a view of its frames, not a copy.
#include "replication/chain.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "replication/seq_map.h"
#include "util/rng.h"

namespace ps {
namespace {

Message Push(const std::vector<Key>& keys, const std::vector<int64_t>& vals,
             const std::vector<int>& lens = {}) {
  Message m;
  m.meta.set_op(pb::Meta::DATA);
  m.meta.set_push(true);
  m.meta.set_dtype(static_cast<int>(DataType::kInt64));
  SArray<Key> k;
  k.CopyFrom(keys.data(), keys.size());
  SArray<int64_t> v;
  v.CopyFrom(vals.data(), vals.size());
  m.data = {SArray<char>(k), SArray<char>(v)};
  if (!lens.empty()) {
    m.meta.set_has_lens(true);
    SArray<int> l;
    l.CopyFrom(lens.data(), lens.size());
    m.data.push_back(SArray<char>(l));
  }
  return m;
}

// Seeded pushes over rings of 2-6 servers with k = 1 or 2, fixed widths and lengths per key:
// each key lands in exactly one piece, the one of its segment's replicas, with its values.
TEST(ChainTest, EveryKeyGoesToTheReplicasOfItsSegmentWithItsValues) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Rng rng(seed);
    std::vector<int> ids;
    const int servers = 2 + static_cast<int>(rng.Below(5));
    for (int i = 1; i <= servers; ++i) ids.push_back(i);
    const int k = 1 + static_cast<int>(rng.Below(std::min(2, servers - 1)));
    const Ring ring(ids, 1 + static_cast<int>(rng.Below(16)), k, 1);
    std::set<Key> ks;
    const int n = 1 + static_cast<int>(rng.Below(300));
    while (static_cast<int>(ks.size()) < n) ks.insert(rng.Next());
    const std::vector<Key> keys(ks.begin(), ks.end());
    const bool var = rng.Below(2);
    std::vector<int> lens;
    std::vector<int64_t> vals;
    std::map<Key, std::vector<int64_t>> want;
    for (Key key : keys) {
      const int len = var ? static_cast<int>(rng.Below(4)) : 2;
      if (var) lens.push_back(len);
      for (int j = 0; j < len; ++j) {
        vals.push_back(static_cast<int64_t>(rng.Below(1000)));
        want[key].push_back(vals.back());
      }
    }
    const auto pieces = SplitByChain(Push(keys, vals, lens), ring, sizeof(int64_t));
    std::set<Key> seen;
    for (const auto& p : pieces) {
      const SArray<Key> pk(p.msg.data[0]);
      const SArray<int64_t> pv(p.msg.data[1]);
      ASSERT_EQ(p.msg.data.size(), var ? 3u : 2u) << "seed " << seed;
      size_t at = 0;
      for (size_t i = 0; i < pk.size(); ++i) {
        const auto chain = ring.Chain(ring.SegmentOf(pk[i]));
        EXPECT_EQ(p.path, std::vector<int>(chain.begin() + 1, chain.end())) << "seed " << seed;
        EXPECT_TRUE(seen.insert(pk[i]).second) << "seed " << seed << ": a key in two pieces";
        if (i > 0) {
          EXPECT_LT(pk[i - 1], pk[i]) << "seed " << seed;
        }
        const size_t len = var ? SArray<int>(p.msg.data[2])[i] : 2;
        ASSERT_LE(at + len, pv.size()) << "seed " << seed;
        EXPECT_EQ(std::vector<int64_t>(pv.begin() + at, pv.begin() + at + len), want[pk[i]])
            << "seed " << seed;
        at += len;
      }
      EXPECT_EQ(at, pv.size()) << "seed " << seed;
    }
    EXPECT_EQ(seen.size(), keys.size()) << "seed " << seed;
  }
}

// With two servers every segment of one master has the other as its replica: its whole part
// of a push is one piece, and that piece's frames are the push's own memory.
TEST(ChainTest, OneRunIsAViewOfThePushNotACopy) {
  const Ring ring({1, 2}, 16, 1, 1);
  std::vector<Key> keys;
  for (Key k = 0; keys.size() < 500; k += 0x9E3779B97F4A7C15ull) {
    if (ring.Owner(k) == 1) keys.push_back(k);
  }
  std::sort(keys.begin(), keys.end());
  const std::vector<int64_t> vals(keys.size(), 7);
  const Message m = Push(keys, vals);
  const auto pieces = SplitByChain(m, ring, sizeof(int64_t));
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].path, std::vector<int>{2});
  EXPECT_EQ(pieces[0].msg.data[0].data(), m.data[0].data()) << "the keys were copied";
  EXPECT_EQ(pieces[0].msg.data[1].data(), m.data[1].data()) << "the values were copied";
  EXPECT_EQ(pieces[0].msg.data[0].size(), m.data[0].size());
}

// A copy numbered under one ring and cut by the chains of a newer one (a master re-routing the
// copies it had on their way when the ring changed): a receiver's points move only over keys
// the pieces bring it, wherever it holds them under the new ring. Its numbering units are the
// old ring's segments, which the new ring's cut across; a piece kept every unit its keys
// touched, so a server that masters part of a unit under the new ring (its keys go to the
// chain's other members) took them as applied (ps_sim --cluster --seed 492 ... --resend timer).
TEST(ChainTest, APieceCutByANewerRingMovesPointsOnlyWhereItsKeysGo) {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Rng rng(seed);
    const Ring before({1, 2, 3, 4}, 1 + static_cast<int>(rng.Below(4)), 2, 1);
    const Ring after({2, 3, 4, 5}, 1 + static_cast<int>(rng.Below(8)), 2, 2);
    std::set<Key> ks;
    while (ks.size() < 200) ks.insert(rng.Next());
    const std::vector<Key> keys(ks.begin(), ks.end());
    // The master numbers the update by the old ring's segments that hold a key.
    SeqMap seq;
    std::vector<uint64_t> entries;
    for (const Range& unit : SegmentsOf(Push(keys, std::vector<int64_t>(keys.size(), 1)), before)) {
      seq.Bump(unit, &entries);
    }
    Message copy = Push(keys, std::vector<int64_t>(keys.size(), 1));
    for (uint64_t w : entries) copy.meta.add_seq(w);
    std::map<int, std::set<Key>> brought;
    std::map<int, std::vector<Range>> moved;
    for (auto& p : SplitByChain(copy, after, sizeof(int64_t))) {
      RestrictSeq(copy, &p.msg);
      CutSeq(SegmentsOf(p.msg, after), &p.msg);
      const SArray<Key> pk(p.msg.data[0]);
      for (int r : p.path) {
        brought[r].insert(pk.begin(), pk.end());
        for (int i = 0; i + 4 <= p.msg.meta.seq_size(); i += 4) {
          moved[r].push_back(Range(p.msg.meta.seq(i), p.msg.meta.seq(i + 1)));
        }
      }
    }
    for (Key k : keys) {
      for (int r : after.Chain(after.SegmentOf(k))) {
        const bool moves = std::any_of(moved[r].begin(), moved[r].end(),
                                       [k](const Range& m) { return m.Contains(k); });
        if (!moves) continue;
        checked++;
        EXPECT_TRUE(brought[r].count(k))
            << "seed " << seed << ": server " << r << " moves its point over key " << k
            << " without receiving it";
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

}  // namespace
}  // namespace ps
