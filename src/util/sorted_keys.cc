#include "util/sorted_keys.h"

#include <cstdint>

namespace ps {
namespace {

// Blocks of B pairs with one branch each, the pairs' results gathered in an Acc.
template <size_t B, typename Acc>
[[gnu::always_inline]] inline bool SortedBlocks(const Key* keys, size_t n) {
  size_t i = 1;
  for (; i + B <= n; i += B) {
    Acc bad = 0;
    for (size_t j = 0; j < B; ++j) bad |= keys[i + j] <= keys[i + j - 1];
    if (bad) return false;
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
// development machine (docs/benchmarks.md), and only with a 64-bit accumulator. The baseline
// keeps the loop it always had: blocks of 8 into a bool, its best shape.
#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx2")]] bool SortedAvx2(const Key* keys, size_t n) {
  return SortedBlocks<32, uint64_t>(keys, n);
}

Check Pick() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") ? SortedAvx2 : SortedUniqueBaseline;
}
#else
Check Pick() { return SortedUniqueBaseline; }
#endif

}  // namespace

bool SortedUniqueBaseline(const Key* keys, size_t n) { return SortedBlocks<8, bool>(keys, n); }

bool SortedUnique(const Key* keys, size_t n) {
  static const Check check = Pick();
  return check(keys, n);
}

}  // namespace ps
