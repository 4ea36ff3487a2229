// Replication after aggregation (src/replication/aggregator.h): what a batch sends its replicas
// is the exact sum of the pushes added, with every push listed over its own keys.
#include "replication/aggregator.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "util/rng.h"

namespace ps {
namespace {

const char* Bytes(const std::vector<int64_t>& v) { return reinterpret_cast<const char*>(v.data()); }

// Seeded random batches over a few chains: pushes of overlapping and disjoint sorted keys with
// `width` values each; Take must give, per chain, the sorted keys of the union with the summed
// values, and the list of pushes (worker, timestamp, keys) as added.
TEST(AggregatorTest, ACopyIsTheExactSumOfItsPushes) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Rng rng(seed);
    Aggregator agg(DataType::kInt64);
    const int width = 1 + static_cast<int>(rng.Below(3));
    std::map<std::vector<int>, std::map<Key, std::vector<int64_t>>> want;
    std::map<std::vector<int>, std::vector<std::pair<int, std::vector<Key>>>> want_pushes;
    const int pushes = 1 + static_cast<int>(rng.Below(12));
    for (int p = 0; p < pushes; ++p) {
      const std::vector<int> path = {static_cast<int>(2 + rng.Below(3))};
      // Keys from a small space so that pushes overlap, sometimes all of them.
      std::set<Key> ks;
      const int n = 1 + static_cast<int>(rng.Below(50));
      for (int i = 0; i < n; ++i) ks.insert(rng.Below(rng.Below(2) ? 40 : 4000));
      std::vector<Key> keys(ks.begin(), ks.end());
      std::vector<int64_t> vals;
      for (Key k : keys) {
        auto& sum = want[path][k];
        sum.resize(width);
        for (int j = 0; j < width; ++j) {
          vals.push_back(static_cast<int64_t>(rng.Below(1000)) - 500);
          sum[j] += vals.back();
        }
      }
      ASSERT_GE(agg.Add(path, 7, p % 3, 100 + p, keys.data(), keys.size(), Bytes(vals), width), 0)
          << "seed " << seed;
      want_pushes[path].emplace_back(100 + p, keys);
    }
    auto copies = agg.Take();
    EXPECT_TRUE(agg.empty());
    ASSERT_EQ(copies.size(), want.size()) << "seed " << seed;
    for (const auto& c : copies) {
      const auto& sums = want[c.path];
      const SArray<Key> keys(c.msg.data[0]);
      const SArray<int64_t> vals(c.msg.data[1]);
      ASSERT_EQ(keys.size(), sums.size()) << "seed " << seed;
      ASSERT_EQ(vals.size(), sums.size() * width) << "seed " << seed;
      size_t i = 0;
      for (const auto& kv : sums) {
        ASSERT_EQ(keys[i], kv.first) << "seed " << seed;
        for (int j = 0; j < width; ++j) {
          EXPECT_EQ(vals[i * width + j], kv.second[j]) << "seed " << seed << " key " << kv.first;
        }
        ++i;
      }
      EXPECT_EQ(c.msg.meta.width(), width);
      EXPECT_EQ(c.pushes, want_pushes[c.path].size());
      std::vector<Aggregator::Push> listed;
      ASSERT_TRUE(Aggregator::Pushes(c.msg, &listed));
      ASSERT_EQ(listed.size(), want_pushes[c.path].size()) << "seed " << seed;
      for (size_t p = 0; p < listed.size(); ++p) {
        EXPECT_EQ(listed[p].ts, want_pushes[c.path][p].first);
        EXPECT_EQ(std::vector<Key>(listed[p].keys.begin(), listed[p].keys.end()),
                  want_pushes[c.path][p].second)
            << "seed " << seed;
      }
    }
  }
}

// Every worker pushing the same list (the usual step): the sums are taken in one pass and the
// list of pushes names every key for each, across a partial last bitmap word (70 keys).
TEST(AggregatorTest, PushesOverTheSameKeysAreSummedAndListedWhole) {
  Aggregator agg(DataType::kInt64);
  std::vector<Key> keys;
  for (Key k = 0; k < 70; ++k) keys.push_back(3 * k + 1);
  std::vector<int64_t> want(2 * keys.size(), 0);
  for (int w = 0; w < 3; ++w) {
    std::vector<int64_t> vals(2 * keys.size());
    for (size_t i = 0; i < vals.size(); ++i) {
      vals[i] = static_cast<int64_t>(i) * (w + 1) - 7;
      want[i] += vals[i];
    }
    ASSERT_GE(agg.Add({2}, 1, w, 20 + w, keys.data(), keys.size(), Bytes(vals), 2), 0);
  }
  auto copies = agg.Take();
  ASSERT_EQ(copies.size(), 1u);
  const SArray<Key> got_keys(copies[0].msg.data[0]);
  const SArray<int64_t> got(copies[0].msg.data[1]);
  EXPECT_EQ(std::vector<Key>(got_keys.begin(), got_keys.end()), keys);
  EXPECT_EQ(std::vector<int64_t>(got.begin(), got.end()), want);
  std::vector<Aggregator::Push> pushes;
  ASSERT_TRUE(Aggregator::Pushes(copies[0].msg, &pushes));
  ASSERT_EQ(pushes.size(), 3u);
  for (const auto& p : pushes) {
    EXPECT_EQ(std::vector<Key>(p.keys.begin(), p.keys.end()), keys) << "push of " << p.worker;
  }
}

// A push that does not fit a batch adds nothing: another width, or keys not strictly
// increasing (the server replicates it alone).
TEST(AggregatorTest, APushThatDoesNotFitAddsNothing) {
  Aggregator agg(DataType::kInt64);
  const std::vector<Key> keys = {1, 5, 9};
  const std::vector<int64_t> vals = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(agg.Add({2}, 1, 0, 10, keys.data(), 3, Bytes(vals), 1), 1);
  EXPECT_EQ(agg.Add({2}, 1, 0, 11, keys.data(), 3, Bytes(vals), 2), -1);
  const std::vector<Key> repeated = {1, 5, 5};
  EXPECT_EQ(agg.Add({3}, 2, 0, 12, repeated.data(), 3, Bytes(vals), 1), -1);
  const std::vector<Key> unsorted = {5, 1, 9};
  EXPECT_EQ(agg.Add({3}, 2, 0, 13, unsorted.data(), 3, Bytes(vals), 1), -1);
  EXPECT_FALSE(agg.Holds(0, 11));
  EXPECT_FALSE(agg.Holds(0, 12));
  auto copies = agg.Take();
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].pushes, 1u);
  const SArray<int64_t> sums(copies[0].msg.data[1]);
  EXPECT_EQ(std::vector<int64_t>(sums.begin(), sums.end()), (std::vector<int64_t>{1, 2, 3}));
}

// The list of pushes comes from another server: a bit past the aggregate's last key is a
// malformed frame, not a key.
TEST(AggregatorTest, AListWithABitPastTheLastKeyIsMalformed) {
  Aggregator agg(DataType::kInt64);
  const std::vector<Key> keys = {1, 5, 9};
  const std::vector<int64_t> vals = {1, 2, 3};
  ASSERT_EQ(agg.Add({2}, 1, 4, 10, keys.data(), 3, Bytes(vals), 1), 1);
  auto copies = agg.Take();
  ASSERT_EQ(copies.size(), 1u);
  std::vector<Aggregator::Push> pushes;
  ASSERT_TRUE(Aggregator::Pushes(copies[0].msg, &pushes));
  ASSERT_EQ(pushes.size(), 1u);
  EXPECT_EQ(pushes[0].keys.size(), 3u);
  SArray<uint64_t> list(copies[0].msg.data[2]);
  SArray<uint64_t> bad;
  bad.CopyFrom(list.data(), list.size());
  bad[2] |= uint64_t{1} << 3;
  Message m = copies[0].msg;
  m.data[2] = SArray<char>(bad);
  pushes.clear();
  EXPECT_FALSE(Aggregator::Pushes(m, &pushes));
}

}  // namespace
}  // namespace ps
