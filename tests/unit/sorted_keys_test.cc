#include "util/sorted_keys.h"

#include <gtest/gtest.h>

#include <vector>

namespace ps {
namespace {

// Every length around the block size (short lists, whole blocks, a tail), and a defect at
// every place: inside a block, at its first or last key, across two blocks, in the tail.
TEST(SortedKeysTest, SortedUniqueFindsAnEqualOrFallingPairAnywhere) {
  for (size_t n = 0; n <= 200; ++n) {
    std::vector<Key> keys(n);
    for (size_t i = 0; i < n; ++i) keys[i] = 3 * i + 1;
    ASSERT_TRUE(SortedUnique(keys.data(), n)) << "n " << n;
    for (size_t j = 1; j < n; ++j) {
      const Key was = keys[j];
      keys[j] = keys[j - 1];  // equal
      EXPECT_FALSE(SortedUnique(keys.data(), n)) << "n " << n << ", key " << j << " repeated";
      keys[j] = keys[j - 1] - 1;  // falling
      EXPECT_FALSE(SortedUnique(keys.data(), n)) << "n " << n << ", key " << j << " falls";
      keys[j] = was;
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
  EXPECT_TRUE(SortedUnique(keys.data(), keys.size()));
  std::vector<Key> wrapped(keys.rbegin(), keys.rend());
  EXPECT_FALSE(SortedUnique(wrapped.data(), wrapped.size()));
}

}  // namespace
}  // namespace ps
