#include "store/store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <random>

#include "store/block.h"
#include "util/rng.h"

namespace ps {
namespace {

template <typename V>
std::vector<V> PullAll(Store<V>* s, const std::vector<Key>& keys, int width) {
  SArray<char> vals;
  SArray<int> lens;
  EXPECT_EQ(s->Pull(keys.data(), keys.size(), width, &vals, &lens), "");
  SArray<V> v(vals);
  return v.ToVector();
}

TEST(StoreTest, SumAccumulatesAndMissingKeysReadZero) {
  Store<int64_t> s(std::make_shared<SumRule<int64_t>>());
  std::vector<Key> k{1, 5, 9};
  std::vector<int64_t> v{10, 20, 30};
  ASSERT_EQ(s.Push(k.data(), 3, reinterpret_cast<char*>(v.data()), 3, nullptr), "");
  ASSERT_EQ(s.Push(k.data(), 3, reinterpret_cast<char*>(v.data()), 3, nullptr), "");
  EXPECT_EQ(PullAll(&s, {1, 2, 5, 9}, 1), (std::vector<int64_t>{20, 0, 40, 60}));
}

// bytes() follows what is stored: keys and values, a few words per key more in the side table.
TEST(StoreTest, BytesFollowTheStoredKeysAndValues) {
  Store<int32_t> s(std::make_shared<SumRule<int32_t>>());
  EXPECT_EQ(s.bytes(), 0u);
  std::vector<Key> k;
  for (Key i = 0; i < 20000; ++i) k.push_back(i * 7);
  std::vector<int32_t> v(k.size() * 3, 1);
  ASSERT_EQ(s.Push(k.data(), k.size(), reinterpret_cast<char*>(v.data()), v.size(), nullptr), "");
  const size_t per_key = 3 * sizeof(int32_t) + sizeof(Key);
  EXPECT_GE(s.bytes(), k.size() * per_key);
  // Slots of one size need no offsets: the key and the values, nothing more per key (a slot
  // offset took 8 bytes more).
  EXPECT_LE(s.bytes(), k.size() * per_key + 64);
  const size_t before = s.bytes();
  s.EraseRange(Range(0, 70000));  // the first 10000 keys
  EXPECT_LT(s.bytes(), before * 6 / 10);
  EXPECT_GE(s.bytes(), 10000 * per_key);
}

// CountRule drops slots that return to zero: memory follows the nonzero counts, pulls read
// zeros, and range pulls and exports hold the same keys whether a block has merged its zero
// slots away yet or not (two stores with different histories export alike).
TEST(StoreTest, CountRuleDropsSlotsThatReturnToZero) {
  Store<int32_t> s(std::make_shared<CountRule<int32_t>>());
  Store<int32_t> calm(std::make_shared<CountRule<int32_t>>());
  std::vector<Key> k;
  for (Key i = 0; i < 20000; ++i) k.push_back(i * 3);
  std::vector<int32_t> one(k.size(), 1), minus(k.size(), -1), zero(k.size(), 0);
  auto push = [](Store<int32_t>* st, const std::vector<Key>& keys, const std::vector<int32_t>& v) {
    ASSERT_EQ(st->Push(keys.data(), keys.size(), reinterpret_cast<const char*>(v.data()), v.size(),
                       nullptr),
              "");
  };
  push(&s, k, zero);  // zero pushes to new keys store nothing
  EXPECT_EQ(s.size(), 0u);
  push(&s, k, one);
  const size_t full = s.bytes();
  // Every key but the last 100 back to zero, in pieces.
  for (size_t b = 0; b + 100 < k.size(); b += 1000) {
    const size_t e = std::min(k.size() - 100, b + 1000);
    std::vector<Key> part(k.begin() + b, k.begin() + e);
    push(&s, part, std::vector<int32_t>(part.size(), -1));
  }
  EXPECT_LT(s.bytes(), full / 3) << "zero slots are merged away";
  std::vector<Key> tail(k.end() - 100, k.end());
  push(&calm, tail, std::vector<int32_t>(100, 1));
  SArray<Key> k1, k2;
  SArray<char> s1, s2;
  SArray<uint64_t> z1, z2;
  s.ExportRange(Range::All(), &k1, &s1, &z1);
  calm.ExportRange(Range::All(), &k2, &s2, &z2);
  EXPECT_EQ(k1.size(), 100u);
  EXPECT_EQ(std::vector<Key>(k1.begin(), k1.end()), std::vector<Key>(k2.begin(), k2.end()));
  EXPECT_EQ(std::string(s1.data(), s1.size()), std::string(s2.data(), s2.size()));
  SArray<Key> rk;
  SArray<char> rv;
  SArray<int> rl;
  s.PullRange(Range::All(), &rk, &rv, &rl);
  EXPECT_EQ(rk.size(), 100u);
  EXPECT_EQ(PullAll(&s, {0, 3, k.back()}, 1), (std::vector<int32_t>{0, 0, 1}));
  // A plain SumRule keeps its zero slots.
  Store<int32_t> sum(std::make_shared<SumRule<int32_t>>());
  push(&sum, k, one);
  push(&sum, k, minus);
  EXPECT_EQ(sum.size(), k.size());
}

// The pattern of count tables (LDA): each push moves counts between keys, so some slots return
// to zero and new keys appear, in batches small enough for the side table and large enough
// for a merge; zero slots dropped at merges leave room that the merge closes. Against a
// std::map reference, with the whole range read after every push.
TEST(StoreTest, CountRuleMatchesReferenceWhileKeysComeAndGo) {
  const uint64_t seed = 7;
  std::mt19937_64 rng(seed);
  Store<int32_t> s(std::make_shared<CountRule<int32_t>>());
  std::map<Key, int32_t> ref;
  for (int round = 0; round < 300; ++round) {
    const size_t n = 1 + rng() % (round % 7 == 0 ? 4000 : 40);
    std::map<Key, int32_t> batch;
    while (batch.size() < n) {
      const Key k = rng() % 20000;
      auto it = ref.find(k);
      // Half the time take a key's whole count away (it returns to zero), else add.
      batch[k] = it != ref.end() && it->second > 0 && rng() % 2
                     ? -it->second
                     : 1 + static_cast<int32_t>(rng() % 3);
    }
    std::vector<Key> keys;
    std::vector<int32_t> vals;
    for (auto& e : batch) {
      keys.push_back(e.first);
      vals.push_back(e.second);
      if ((ref[e.first] += e.second) == 0) ref.erase(e.first);
    }
    ASSERT_EQ(s.Push(keys.data(), n, reinterpret_cast<char*>(vals.data()), n, nullptr), "")
        << "seed " << seed;
    // Zero slots stay only while they are at most a quarter of the block (the whole store:
    // 20 000 keys fit one block), counted at merges and as pushes zero them.
    ASSERT_LE(4 * (s.size() - ref.size()), s.size() + 64)
        << "zero slots kept past a quarter, round " << round << ", seed " << seed;
    SArray<Key> rk;
    SArray<char> rv;
    SArray<int> rl;
    s.PullRange(Range::All(), &rk, &rv, &rl);
    ASSERT_EQ(rk.size(), ref.size()) << "round " << round << ", seed " << seed;
    const SArray<int32_t> v(rv);
    size_t i = 0;
    for (const auto& e : ref) {
      ASSERT_EQ(rk[i], e.first) << "round " << round << ", seed " << seed;
      ASSERT_EQ(v[i], e.second) << "key " << e.first << ", round " << round << ", seed " << seed;
      ++i;
    }
  }
}

// Random pushes against a std::map reference exercise the side table and its merges.
TEST(StoreTest, MatchesReferenceUnderRandomPushes) {
  const uint64_t seed = 42;
  std::mt19937_64 rng(seed);
  Store<int64_t> s(std::make_shared<SumRule<int64_t>>());
  std::map<Key, int64_t> ref;
  for (int round = 0; round < 200; ++round) {
    size_t n = 1 + rng() % (round % 10 == 0 ? 5000 : 50);
    std::map<Key, int64_t> batch;
    while (batch.size() < n) batch[rng() % 100000] = static_cast<int64_t>(rng() % 1000) - 500;
    std::vector<Key> keys;
    std::vector<int64_t> vals;
    for (auto& e : batch) {
      keys.push_back(e.first);
      vals.push_back(e.second);
      ref[e.first] += e.second;
    }
    ASSERT_EQ(s.Push(keys.data(), n, reinterpret_cast<char*>(vals.data()), n, nullptr), "");
  }
  std::vector<Key> all;
  std::vector<int64_t> want;
  for (auto& e : ref) {
    all.push_back(e.first);
    want.push_back(e.second);
  }
  EXPECT_EQ(PullAll(&s, all, 1), want) << "seed " << seed;
  SArray<Key> rk;
  SArray<char> rv;
  SArray<int> rl;
  s.PullRange(Range(1000, 50000), &rk, &rv, &rl);
  auto lo = ref.lower_bound(1000), hi = ref.lower_bound(50000);
  ASSERT_EQ(rk.size(), static_cast<size_t>(std::distance(lo, hi))) << "seed " << seed;
  size_t i = 0;
  for (auto it = lo; it != hi; ++it, ++i) {
    EXPECT_EQ(rk[i], it->first);
    EXPECT_EQ(SArray<int64_t>(rv)[i], it->second);
  }
}

// Scattered subsets of the stored keys (a worker's share of the features), pushed and pulled
// round after round while keys keep arriving (side table, merges), at width 2: the walks that
// find a request's stored keys a stretch at a time must miss none and invent none. Pulls ask
// for keys never pushed too.
TEST(StoreTest, ScatteredSubsetsPushAndPullLikeAMap) {
  const uint64_t seed = 7;
  Rng rng(seed);
  std::vector<Key> universe(20000);
  for (size_t i = 0; i < universe.size(); ++i) universe[i] = HashKey(i);
  std::sort(universe.begin(), universe.end());
  Store<double> s(std::make_shared<SumRule<double>>());
  std::map<Key, std::pair<double, double>> ref;
  for (int round = 0; round < 120; ++round) {
    // Early rounds reach few keys (inserts); later ones take dense and sparse subsets.
    const double share = round < 10 ? 0.02 : 0.05 + 0.9 * rng.Uniform();
    std::vector<Key> keys;
    std::vector<double> vals;
    for (Key k : universe) {
      if (rng.Uniform() >= share) continue;
      const double a = static_cast<double>(rng.Below(64)), b = static_cast<double>(rng.Below(64));
      keys.push_back(k);
      vals.push_back(a);
      vals.push_back(b);
      ref[k].first += a;
      ref[k].second += b;
    }
    ASSERT_EQ(s.Push(keys.data(), keys.size(), reinterpret_cast<const char*>(vals.data()),
                     vals.size(), nullptr),
              "")
        << "round " << round << ", seed " << seed;
    std::vector<Key> ask;
    const double pull_share = 0.05 + 0.9 * rng.Uniform();
    for (Key k : universe) {
      if (rng.Uniform() < pull_share) ask.push_back(k);
    }
    const std::vector<double> got = PullAll(&s, ask, 2);
    ASSERT_EQ(got.size(), 2 * ask.size()) << "round " << round << ", seed " << seed;
    for (size_t i = 0; i < ask.size(); ++i) {
      const auto it = ref.find(ask[i]);
      const double a = it == ref.end() ? 0 : it->second.first;
      const double b = it == ref.end() ? 0 : it->second.second;
      ASSERT_EQ(got[2 * i], a) << "key " << ask[i] << ", round " << round << ", seed " << seed;
      ASSERT_EQ(got[2 * i + 1], b) << "key " << ask[i] << ", round " << round << ", seed " << seed;
    }
  }
}

// Range pulls copy the stored values in runs for the library's rules that read them as they
// are; a subclass that overrides Read is still read key by key.
TEST(StoreTest, ARangePullReadsAroundOnlyRulesThatReadRaw) {
  struct Doubling : SumRule<float> {
    void Read(Key, const float* val, const float*, float* out, int n) const override {
      for (int i = 0; i < n; ++i) out[i] = 2 * val[i];
    }
  };
  EXPECT_TRUE(SumRule<float>().ReadsRaw());
  EXPECT_TRUE(CountRule<float>().ReadsRaw());
  EXPECT_TRUE(AssignRule<float>().ReadsRaw());
  EXPECT_FALSE(Doubling().ReadsRaw());
  for (bool doubling : {false, true}) {
    std::shared_ptr<const UpdateRule<float>> rule;
    if (doubling) {
      rule = std::make_shared<Doubling>();
    } else {
      rule = std::make_shared<SumRule<float>>();
    }
    Store<float> s(rule);
    std::vector<Key> k{3, 4, 9};
    std::vector<int> lens{2, 3, 1};
    std::vector<float> v{1, 2, 3, 4, 5, 6};
    ASSERT_EQ(s.Push(k.data(), 3, reinterpret_cast<char*>(v.data()), 6, lens.data()), "");
    SArray<Key> rk;
    SArray<char> rv;
    SArray<int> rl;
    s.PullRange(Range(4, 10), &rk, &rv, &rl);
    EXPECT_EQ(std::vector<Key>(rk.begin(), rk.end()), (std::vector<Key>{4, 9}));
    EXPECT_EQ(std::vector<int>(rl.begin(), rl.end()), (std::vector<int>{3, 1}));
    const SArray<float> got(rv);
    const float f = doubling ? 2 : 1;
    EXPECT_EQ(std::vector<float>(got.begin(), got.end()),
              (std::vector<float>{3 * f, 4 * f, 5 * f, 6 * f}));
  }
}

TEST(StoreTest, VariableLengthValuesAndLengthMismatchIsRejected) {
  Store<float> s(std::make_shared<SumRule<float>>());
  std::vector<Key> k{3, 4};
  std::vector<int> lens{2, 3};
  std::vector<float> v{1, 2, 3, 4, 5};
  ASSERT_EQ(s.Push(k.data(), 2, reinterpret_cast<char*>(v.data()), 5, lens.data()), "");
  SArray<char> vals;
  SArray<int> out_lens;
  ASSERT_EQ(s.Pull(k.data(), 2, 0, &vals, &out_lens), "");
  EXPECT_EQ(out_lens.ToVector(), lens);
  EXPECT_EQ(SArray<float>(vals).ToVector(), v);
  // Key 3 holds 2 values: a fixed-width push of 1 value per key must be refused, untouched.
  std::vector<float> one{7, 7};
  EXPECT_NE(s.Push(k.data(), 2, reinterpret_cast<char*>(one.data()), 2, nullptr), "");
  ASSERT_EQ(s.Pull(k.data(), 2, 0, &vals, &out_lens), "");
  EXPECT_EQ(SArray<float>(vals).ToVector(), v);
}

TEST(StoreTest, ValuePartsOfOneLargeKey) {
  Store<double> s(std::make_shared<SumRule<double>>());
  std::vector<double> a(10, 1.0), b(6, 2.0);
  ASSERT_EQ(s.PushPart(7, 0, 16, reinterpret_cast<char*>(a.data()), 10), "");
  ASSERT_EQ(s.PushPart(7, 10, 16, reinterpret_cast<char*>(b.data()), 6), "");
  SArray<char> vals;
  ASSERT_EQ(s.PullPart(7, 8, 4, 16, &vals), "");
  EXPECT_EQ(SArray<double>(vals).ToVector(), (std::vector<double>{1, 1, 2, 2}));
  EXPECT_NE(s.PushPart(7, 0, 17, reinterpret_cast<char*>(a.data()), 10), "");
}

TEST(StoreTest, BuiltinRules) {
  std::vector<Key> k{1};
  auto run = [&](std::shared_ptr<const UpdateRule<double>> rule, std::vector<double> pushes) {
    Store<double> s(rule);
    for (double p : pushes) s.Push(k.data(), 1, reinterpret_cast<char*>(&p), 1, nullptr);
    return PullAll(&s, k, 1)[0];
  };
  EXPECT_DOUBLE_EQ(run(std::make_shared<AssignRule<double>>(), {3, 5}), 5);
  EXPECT_DOUBLE_EQ(run(std::make_shared<SgdRule<double>>(0.1), {1, 2}), -0.3);
  // AdaGrad: first step -lr*g/|g| = -lr; second: -lr*g2/sqrt(g1^2+g2^2).
  double ada = run(std::make_shared<AdaGradRule<double>>(0.5, 0), {2, 2});
  EXPECT_NEAR(ada, -0.5 - 0.5 * 2 / std::sqrt(8.0), 1e-12);
  EXPECT_DOUBLE_EQ(run(std::make_shared<MaxRule<double>>(), {-3, -5}), -3);
  EXPECT_DOUBLE_EQ(run(std::make_shared<MinRule<double>>(), {4, 9}), 4);
}

// A user-defined rule is a small class; this one counts pushes and reads value * 10.
class CountTimesTen : public UpdateRule<int32_t> {
 public:
  int StateWidth() const override { return 1; }
  void Apply(Key, const int32_t* p, int32_t* v, int32_t* st, int n) const override {
    for (int i = 0; i < n; ++i) {
      v[i] += p[i];
      st[i] += 1;
    }
  }
  void Read(Key, const int32_t* v, const int32_t* st, int32_t* out, int n) const override {
    for (int i = 0; i < n; ++i) out[i] = v[i] * 10 + st[i];
  }
};

TEST(StoreTest, UserDefinedRuleSeesValueAndState) {
  Store<int32_t> s(std::make_shared<CountTimesTen>());
  std::vector<Key> k{2};
  int32_t p = 4;
  s.Push(k.data(), 1, reinterpret_cast<char*>(&p), 1, nullptr);
  s.Push(k.data(), 1, reinterpret_cast<char*>(&p), 1, nullptr);
  EXPECT_EQ(PullAll(&s, k, 1)[0], 82);
}

// Blocks (src/store/block.h) a few hundred bytes large, so every operation crosses, splits and
// empties them: pushes of new and old keys with fixed and variable widths, value parts, range
// imports and removals, checked after every step against a std::map of the same updates, and
// the block count stays in proportion to the contents.
TEST(StoreTest, SmallBlocksMatchReferenceUnderPushesImportsAndErases) {
  // Odd seeds: lengths 1-3 per key (blocks of mixed slots). Even seeds: almost every key holds
  // one value, so blocks keep no offsets until a rare longer slot arrives, and lose them again
  // when it goes.
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    Store<int64_t> s(std::make_shared<SumRule<int64_t>>(), 256);
    std::map<Key, std::vector<int64_t>> ref;
    const Key space = rng() % 3 == 0 ? 100 : 5000;
    for (int step = 0; step < 300; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 6) {  // a push of sorted keys, lengths 1..3 per key where new
        std::map<Key, int> batch;
        const size_t n = 1 + rng() % 40;
        while (batch.size() < n) {
          const Key k = rng() % space;
          auto it = ref.find(k);
          const int fresh = seed % 2 ? 1 + static_cast<int>(rng() % 3) : rng() % 50 ? 1 : 2;
          batch[k] = it != ref.end() ? static_cast<int>(it->second.size()) : fresh;
        }
        std::vector<Key> keys;
        std::vector<int> lens;
        std::vector<int64_t> vals;
        for (auto& b : batch) {
          keys.push_back(b.first);
          lens.push_back(b.second);
          auto& slot = ref[b.first];
          slot.resize(b.second, 0);
          for (int i = 0; i < b.second; ++i) {
            const int64_t v = static_cast<int64_t>(rng() % 100) - 50;
            vals.push_back(v);
            slot[i] += v;
          }
        }
        ASSERT_EQ(s.Push(keys.data(), keys.size(), reinterpret_cast<char*>(vals.data()),
                         vals.size(), lens.data()),
                  "")
            << "seed " << seed;
      } else if (op < 8) {  // a range replaced by an export of a reference range (or erased)
        Key b = rng() % space, e = rng() % space;
        if (b > e) std::swap(b, e);
        if (b == e) continue;
        SArray<Key> keys;
        SArray<int64_t> slots;
        SArray<uint64_t> sizes;
        const bool erase = rng() % 3 == 0;
        for (auto it = ref.lower_bound(b); it != ref.end() && it->first < e;) {
          if (erase) {
            it = ref.erase(it);
            continue;
          }
          for (auto& v : it->second) v += 1000;  // the import holds other values
          keys.push_back(it->first);
          sizes.push_back(it->second.size());
          for (int64_t v : it->second) slots.push_back(v);
          ++it;
        }
        ASSERT_EQ(s.ImportRanges({Range(b, e)}, keys, SArray<char>(slots), sizes), "")
            << "seed " << seed;
      } else {  // an export in pieces of at most 100 bytes covers the range exactly
        Key b = rng() % space, e = b + 1 + rng() % space;
        std::vector<Key> got;
        for (Key at = b; at < e;) {
          SArray<Key> keys;
          SArray<char> slots;
          SArray<uint64_t> sizes;
          Key stop = 0;
          s.ExportRange(Range(at, e), &keys, &slots, &sizes, 100, &stop);
          ASSERT_GT(stop, at) << "seed " << seed;
          ASSERT_TRUE(keys.empty() || keys.size() == 1 || slots.size() <= 100) << "seed " << seed;
          for (Key k : keys) got.push_back(k);
          at = stop;
        }
        std::vector<Key> want;
        for (auto it = ref.lower_bound(b); it != ref.end() && it->first < e; ++it) {
          want.push_back(it->first);
        }
        ASSERT_EQ(got, want) << "seed " << seed;
      }
      ASSERT_EQ(s.size(), ref.size()) << "seed " << seed << " step " << step;
    }
    std::vector<Key> all;
    std::vector<int64_t> want;
    for (auto& e : ref) {
      all.push_back(e.first);
      want.insert(want.end(), e.second.begin(), e.second.end());
    }
    SArray<char> vals;
    SArray<int> lens;
    ASSERT_EQ(s.Pull(all.data(), all.size(), 0, &vals, &lens), "");
    EXPECT_EQ(SArray<int64_t>(vals).ToVector(), want) << "seed " << seed;
    EXPECT_EQ(s.CountRange(Range(0, space / 2)),
              static_cast<size_t>(std::distance(ref.begin(), ref.lower_bound(space / 2))));
    // Each block holds at most 256 bytes plus one slot; blocks that emptied were dropped.
    EXPECT_LE(s.blocks(), 1 + ref.size()) << "seed " << seed;
    EXPECT_GT(s.blocks(), ref.size() / 64) << "seed " << seed;
  }
}

// The store checks the order of a request's keys in the walk that finds their slots (the
// server no longer reads the key frame once more to check it): a key out of order anywhere (in
// a stretch of stored keys, where one starts, among new keys, at a seam between blocks) is
// refused by Push and Pull, and a refused push changes nothing.
TEST(StoreTest, KeysOutOfOrderAreRefusedWhereverTheyAreAndChangeNothing) {
  struct Shape {
    const char* name;
    std::shared_ptr<const UpdateRule<float>> rule;
    int width;  // 0: lengths 1..3 per key
  };
  const std::vector<Shape> shapes = {
      {"sum, width 1", std::make_shared<SumRule<float>>(), 1},
      {"sum, width 2", std::make_shared<SumRule<float>>(), 2},
      {"sum, lengths", std::make_shared<SumRule<float>>(), 0},
      {"adagrad (state)", std::make_shared<AdaGradRule<float>>(0.1f), 1}};
  for (const Shape& shape : shapes) {
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      SCOPED_TRACE(std::string(shape.name) + ", seed " + std::to_string(seed));
      std::mt19937_64 rng(seed);
      Store<float> s(shape.rule, 4096);  // small blocks: many seams
      auto len_of = [&](Key k) {
        return shape.width > 0 ? shape.width : 1 + static_cast<int>(k % 3);
      };
      auto push = [&](const std::vector<Key>& keys) {
        std::vector<int> lens;
        size_t nv = 0;
        for (Key k : keys) {
          lens.push_back(len_of(k));
          nv += lens.back();
        }
        std::vector<float> vals(nv, 1.0f);
        return s.Push(keys.data(), keys.size(), reinterpret_cast<char*>(vals.data()), nv,
                      shape.width > 0 ? nullptr : lens.data());
      };
      std::vector<Key> stored;
      for (Key k = 0; k < 3000; ++k) {
        if (rng() % 3 != 0) stored.push_back(k * 4);
      }
      ASSERT_EQ(push(stored), "");
      // A request: stretches of stored keys and new keys between them, sorted.
      std::vector<Key> req;
      for (Key k = 0; k < 12000; ++k) {
        const bool is_stored = std::binary_search(stored.begin(), stored.end(), k);
        if ((is_stored && rng() % 8 != 0) || (!is_stored && rng() % 50 == 0)) req.push_back(k);
      }
      ASSERT_EQ(push(req), "") << "the sorted request is taken";
      SArray<Key> k0;
      SArray<char> s0;
      SArray<uint64_t> z0;
      s.ExportRange(Range::All(), &k0, &s0, &z0);
      // One defect at a random place: two neighbours swapped, or a key repeated.
      const size_t j = 1 + rng() % (req.size() - 1);
      if (rng() % 2) {
        std::swap(req[j], req[j - 1]);
      } else {
        req[j] = req[j - 1];
      }
      EXPECT_EQ(push(req), kUnsortedKeys) << "defect at " << j << " of " << req.size();
      SArray<Key> k1;
      SArray<char> s1;
      SArray<uint64_t> z1;
      s.ExportRange(Range::All(), &k1, &s1, &z1);
      EXPECT_EQ(k0.ToVector(), k1.ToVector());
      EXPECT_EQ(s0.ToVector(), s1.ToVector());
      EXPECT_EQ(z0.ToVector(), z1.ToVector());
      SArray<char> out;
      SArray<int> lens;
      EXPECT_EQ(s.Pull(req.data(), req.size(), shape.width, &out, &lens), kUnsortedKeys);
    }
  }
}

// Keys that arrive in a small batch after the block was built go to the side table (a tree);
// read again and again (a feature first seen late is pushed every iteration after) they are
// merged into the main arrays once their lookups pay for it, by pushes and by pulls alike.
// Without that the side table kept them for ever: a tree walk per key per request.
TEST(StoreTest, KeysReadOftenLeaveTheSideTable) {
  SumRule<float> rule;
  for (const bool by_pulls : {false, true}) {
    SCOPED_TRACE(by_pulls ? "pulls" : "pushes");
    Block<float> b(&rule, 0);
    std::vector<Block<float>::Span> spans;
    auto push = [&](const std::vector<Key>& k, float v) {
      std::vector<float> vals(k.size(), v);
      ASSERT_EQ(b.Check(k.data(), k.size(), nullptr, 1, &spans), "");
      b.Apply(k.data(), k.size(), vals.data(), nullptr, 1, spans);
    };
    std::vector<Key> base, late, all;
    for (Key i = 0; i < 32768; ++i) base.push_back(i * 4);
    for (Key i = 0; i < 500; ++i) late.push_back(i * 64 + 1);
    push(base, 1);
    push(late, 1);
    ASSERT_EQ(b.side_size(), late.size()) << "a small batch of new keys waits in the side table";
    std::merge(base.begin(), base.end(), late.begin(), late.end(), std::back_inserter(all));
    std::vector<float> out(all.size());
    float want = 1;  // every key got the same pushes
    for (int r = 0; r < 40 && b.side_size() > 0; ++r) {
      if (by_pulls) {
        ASSERT_EQ(b.Read(all.data(), all.size(), 1, out.data(), 0), "");
      } else {
        push(all, 1);
        ++want;
      }
    }
    EXPECT_EQ(b.side_size(), 0u) << "keys read 40 times stayed in the side table";
    ASSERT_EQ(b.Read(all.data(), all.size(), 1, out.data(), 0), "");
    for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(out[i], want) << "key " << all[i];
  }
}

}  // namespace
}  // namespace ps
