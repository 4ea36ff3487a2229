#include "kv/slicer.h"

#include <gtest/gtest.h>

#include <random>

namespace ps {
namespace {

// Every key lands in exactly one part, on its owner, parts respect the size bound, and a key
// larger than the bound is cut into value parts that tile its values.
TEST(SlicerTest, PartsCoverEveryKeyOnceWithinTheBound) {
  const uint64_t seed = 7;
  std::mt19937_64 rng(seed);
  Ring ring({1, 2, 3}, 32, 0, 1);
  std::vector<Key> keys(5000);
  for (auto& k : keys) k = rng() % kMaxKey;
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<uint64_t> pre{0};
  for (size_t i = 0; i < keys.size(); ++i) pre.push_back(pre.back() + (i == 17 ? 1000 : rng() % 5));
  std::vector<RequestPart> parts;
  const uint64_t bound = 300;
  PlanParts(
      ring, keys.data(), keys.size(), [&](size_t i) { return pre[i]; }, bound, &parts);
  std::vector<uint64_t> covered(keys.size(), 0);
  for (const auto& p : parts) {
    uint64_t vals = 0;
    for (auto r : p.runs) {
      for (size_t i = r.first; i < r.second; ++i) {
        ASSERT_EQ(ring.Owner(keys[i]), p.server) << "seed " << seed;
        vals += pre[i + 1] - pre[i];
        covered[i] += p.value_part ? p.val_count : pre[i + 1] - pre[i];
      }
    }
    if (p.value_part) {
      EXPECT_LE(p.val_count, bound);
    } else {
      EXPECT_LE(vals, bound);
    }
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(covered[i], pre[i + 1] - pre[i]) << "key index " << i << " seed " << seed;
  }
}

TEST(SlicerTest, OneServerOneRunWhenUnbounded) {
  Ring ring({1}, 8, 0, 1);
  std::vector<Key> keys{1, 2, 3, 1ull << 60};
  std::vector<RequestPart> parts;
  PlanParts(
      ring, keys.data(), keys.size(), [](size_t i) { return i; }, 0, &parts);
  ASSERT_EQ(parts.size(), 1u);
  ASSERT_EQ(parts[0].runs.size(), 1u);
  EXPECT_EQ(parts[0].runs[0], std::make_pair(size_t{0}, size_t{4}));
}

}  // namespace
}  // namespace ps
