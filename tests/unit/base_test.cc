// The small helpers of the public API: HashKey, UnhashKey and SortByKey.
#include "ps/base.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "ps/kv_worker.h"

namespace ps {
namespace {

// The inverse of splitmix64's finalizer, to find the id it maps to a given key.
uint64_t UnXorShift(uint64_t y, int s) {
  uint64_t x = y;
  for (int i = 0; i < 64 / s + 1; ++i) x = y ^ (x >> s);
  return x;
}
uint64_t InverseOfOdd(uint64_t a) {  // Newton's iteration modulo 2^64
  uint64_t x = a;
  for (int i = 0; i < 6; ++i) x *= 2 - a * x;
  return x;
}
uint64_t Unmix(uint64_t k) {
  uint64_t z = UnXorShift(k, 31) * InverseOfOdd(0x94d049bb133111ebULL);
  z = UnXorShift(z, 27) * InverseOfOdd(0xbf58476d1ce4e5b9ULL);
  return UnXorShift(z, 30) - 0x9e3779b97f4a7c15ULL;
}

TEST(HashKeyTest, NeverReturnsTheEndOfTheKeySpace) {
  // The finalizer maps exactly one id to kMaxKey, which Push refuses.
  const uint64_t id = Unmix(kMaxKey);
  const uint64_t some = Unmix(HashKey(12345));
  ASSERT_EQ(some, 12345u) << "the test's inverse is wrong";
  EXPECT_NE(HashKey(id), kMaxKey) << "id " << id;
  EXPECT_EQ(HashKey(id), HashKey(kMaxKey)) << "it shares the key of the largest id only";
  // Elsewhere still a bijection: the keys of the ids around it are their own.
  for (uint64_t d = 1; d < 1000; ++d) {
    EXPECT_EQ(Unmix(HashKey(id + d)), id + d);
    EXPECT_EQ(Unmix(HashKey(id - d)), id - d);
  }
}

TEST(HashKeyTest, UnhashKeyGivesBackTheId) {
  const uint64_t seed = 11;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t id = i < 1000 ? static_cast<uint64_t>(i) : rng();
    ASSERT_EQ(UnhashKey(HashKey(id)), id) << "seed " << seed << " id " << id;
  }
  // The two ids that share a key: the one below 2^64 - 1 comes back.
  const uint64_t id = Unmix(kMaxKey);
  EXPECT_EQ(UnhashKey(HashKey(kMaxKey)), id);
  EXPECT_EQ(UnhashKey(HashKey(kMaxKey - 1)), kMaxKey - 1);
}

TEST(SortByKeyTest, ValuesAndLengthsMoveWithTheirKeys) {
  const uint64_t seed = 7;
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 50; ++round) {
    const size_t n = rng() % 40;
    const int width = 1 + static_cast<int>(rng() % 3);
    SArray<Key> keys, keys2;
    SArray<float> fixed;
    SArray<int64_t> var;
    SArray<int> lens;
    std::map<Key, std::vector<float>> want_fixed;
    std::map<Key, std::vector<int64_t>> want_var;
    for (size_t i = 0; i < n; ++i) {
      Key k;
      do k = HashKey(rng() % 1000);
      while (want_fixed.count(k));
      keys.push_back(k);
      keys2.push_back(k);
      for (int j = 0; j < width; ++j) {
        fixed.push_back(static_cast<float>(rng() % 100));
        want_fixed[k].push_back(fixed.back());
      }
      lens.push_back(static_cast<int>(rng() % 4));
      want_var[k];
      for (int j = 0; j < lens.back(); ++j) {
        var.push_back(static_cast<int64_t>(rng()));
        want_var[k].push_back(var.back());
      }
    }
    SortByKey(&keys, &fixed);
    SortByKey(&keys2, &var, &lens);
    ASSERT_TRUE(std::is_sorted(keys.begin(), keys.end())) << "seed " << seed;
    ASSERT_EQ(keys.size(), n);
    size_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(keys2[i], keys[i]);
      for (int j = 0; j < width; ++j) {
        EXPECT_EQ(fixed[i * width + j], want_fixed[keys[i]][j]) << "seed " << seed;
      }
      ASSERT_EQ(static_cast<size_t>(lens[i]), want_var[keys[i]].size()) << "seed " << seed;
      for (int j = 0; j < lens[i]; ++j) EXPECT_EQ(var[at++], want_var[keys[i]][j]);
    }
  }
}

TEST(SortByKeyTest, SizesThatDoNotFitAreRefused) {
  SArray<Key> keys{3, 1};
  SArray<float> vals{1, 2, 3};
  EXPECT_THROW(SortByKey(&keys, &vals), Error);
  SArray<int> lens{1};
  EXPECT_THROW(SortByKey(&keys, &vals, &lens), Error);
  SArray<int> bad{1, 1};
  EXPECT_THROW(SortByKey(&keys, &vals, &bad), Error);
  EXPECT_EQ(keys[0], 3u) << "nothing moved";
}

}  // namespace
}  // namespace ps
