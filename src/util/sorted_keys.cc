#include "util/sorted_keys.h"

#include <cstdint>

namespace ps {
namespace {

// Blocks of B pairs with one branch each; lists of up to 2 * B keys go pair by pair, as a block
// would cost them more than it saves.
template <size_t B>
[[gnu::always_inline]] inline bool SortedBlocks(const Key* keys, size_t n) {
  size_t i = 1;
  if (n > 2 * B) {
    for (; i + B <= n; i += B) {
      uint64_t bad = 0;
      for (size_t j = 0; j < B; ++j) bad |= keys[i + j] <= keys[i + j - 1];
      if (bad) return false;
    }
  }
  for (; i < n; ++i) {
    if (keys[i] <= keys[i - 1]) return false;
  }
  return true;
}

using Check = bool (*)(const Key*, size_t);

// Every request's keys are checked once on the worker and once in the store, a pass over 8
// bytes a key. x86-64's baseline (SSE2) has no 64-bit vector compare; with AVX2, blocks of 32
// pairs become vector compares: a million keys in 130-140 µs instead of 230-300 on the
// development machine (docs/benchmarks.md). The baseline keeps blocks of 8, its best size.
#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx2")]] bool SortedAvx2(const Key* keys, size_t n) {
  return SortedBlocks<32>(keys, n);
}

Check Pick() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") ? SortedAvx2 : SortedUniqueBaseline;
}
#else
Check Pick() { return SortedUniqueBaseline; }
#endif

}  // namespace

bool SortedUniqueBaseline(const Key* keys, size_t n) { return SortedBlocks<8>(keys, n); }

bool SortedUnique(const Key* keys, size_t n) {
  static const Check check = Pick();
  return check(keys, n);
}

}  // namespace ps
