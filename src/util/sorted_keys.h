// Searches over sorted key arrays, shared by the ring (slicing a request by segment), the store
// (checking a request's order) and the applied log (matching a push against its records).
#ifndef PS_UTIL_SORTED_KEYS_H_
#define PS_UTIL_SORTED_KEYS_H_

#include <cstddef>

#include "ps/base.h"

namespace ps {

/// keys[0, n) are strictly increasing. Uses AVX2 where the CPU has it.
bool SortedUnique(const Key* keys, size_t n);
/// The same with x86-64's baseline instructions only (what SortedUnique runs without AVX2).
bool SortedUniqueBaseline(const Key* keys, size_t n);

/// First index in [lo, hi) whose value get(index) is >= target (values sorted), by exponential
/// then binary search from lo: O(log(distance)) comparisons, added to *steps when given.
template <typename Get>
size_t Gallop(size_t lo, size_t hi, Key target, Get get, size_t* steps = nullptr) {
  size_t n = 0, step = 1, prev = lo, cur = lo;
  while (cur < hi && get(cur) < target) {
    ++n;
    prev = cur + 1;
    cur = lo + step;
    step *= 2;
  }
  if (cur > hi) cur = hi;
  while (prev < cur) {  // answer in [prev, cur]
    ++n;
    size_t mid = prev + (cur - prev) / 2;
    if (get(mid) < target) {
      prev = mid + 1;
    } else {
      cur = mid;
    }
  }
  if (steps) *steps += n;
  return prev;
}

}  // namespace ps

#endif  // PS_UTIL_SORTED_KEYS_H_
