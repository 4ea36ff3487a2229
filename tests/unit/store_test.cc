#include "store/store.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

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

}  // namespace
}  // namespace ps
