#include "util/sorted_keys.h"

#include <cstdint>

namespace ps {

// Every request's keys are checked once on the worker and once in the store, a pass over 8
// bytes a key. x86-64's baseline (SSE2) has no 64-bit compare, so that build compares one key
// at a time; with AVX2, blocks of 32 become vector compares: a million keys in 150 µs instead
// of 300 on the development machine (docs/benchmarks.md). Short lists go key by key: a block
// would cost them more than it saves.
[[gnu::target_clones("avx2", "default")]] bool SortedUnique(const Key* keys, size_t n) {
  constexpr size_t kBlock = 32;
  size_t i = 1;
  if (n > 2 * kBlock) {
    for (; i + kBlock <= n; i += kBlock) {
      uint64_t bad = 0;
      for (size_t j = 0; j < kBlock; ++j) bad |= keys[i + j] <= keys[i + j - 1];
      if (bad) return false;
    }
  }
  for (; i < n; ++i) {
    if (keys[i] <= keys[i - 1]) return false;
  }
  return true;
}

}  // namespace ps
