#include "util/sorted_keys.h"

#include <gtest/gtest.h>

#include <vector>

namespace ps {
namespace {

// Every length around the block size (short lists, whole blocks, a tail), and a defect at
// every place: inside a block, at its first or last key, across two blocks, in the tail.
// Both builds: the one this CPU runs and the baseline one.
const struct {
  const char* name;
  bool (*check)(const Key*, size_t);
} kChecks[] = {{"SortedUnique", SortedUnique}, {"SortedUniqueBaseline", SortedUniqueBaseline}};

TEST(SortedKeysTest, SortedUniqueFindsAnEqualOrFallingPairAnywhere) {
  for (const auto& c : kChecks) {
    SCOPED_TRACE(c.name);
    for (size_t n = 0; n <= 200; ++n) {
      std::vector<Key> keys(n);
      for (size_t i = 0; i < n; ++i) keys[i] = 3 * i + 1;
      ASSERT_TRUE(c.check(keys.data(), n)) << "n " << n;
      for (size_t j = 1; j < n; ++j) {
        const Key was = keys[j];
        keys[j] = keys[j - 1];  // equal
        EXPECT_FALSE(c.check(keys.data(), n)) << "n " << n << ", key " << j << " repeated";
        keys[j] = keys[j - 1] - 1;  // falling
        EXPECT_FALSE(c.check(keys.data(), n)) << "n " << n << ", key " << j << " falls";
        keys[j] = was;
      }
    }
  }
}

TEST(SortedKeysTest, SortedUniqueComparesKeysAsUnsigned) {
  // Keys above 2^63 sort after those below; a signed compare would call them falling.
  const std::vector<Key> keys = [] {
    std::vector<Key> k;
    for (Key i = 0; i < 100; ++i) k.push_back(i << 57);  // from 64 on, above 2^63
    return k;
  }();
  const std::vector<Key> falling(keys.rbegin(), keys.rend());
  for (const auto& c : kChecks) {
    EXPECT_TRUE(c.check(keys.data(), keys.size())) << c.name;
    EXPECT_FALSE(c.check(falling.data(), falling.size())) << c.name;
  }
}

}  // namespace
}  // namespace ps
