// A small deterministic random generator (splitmix64). The same seed gives the same sequence on
// every platform, which the simulator's byte-identical traces and seeded tests rely on (the
// standard distributions are implementation-defined).
#ifndef PS_UTIL_RNG_H_
#define PS_UTIL_RNG_H_

#include <cmath>
#include <cstdint>

namespace ps {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n) without modulo bias (n > 0).
  uint64_t Below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
      x = Next();
    } while (x >= limit);
    return x % n;
  }
  /// Uniform in [0, 1) with 53 random bits.
  double Uniform() { return (Next() >> 11) * 0x1.0p-53; }
  /// Uniform in (0, 1]: safe under log().
  double UniformOpen() { return ((Next() >> 11) + 1) * 0x1.0p-53; }
  /// Exponential with the given mean.
  double Exponential(double mean) { return -mean * std::log(UniformOpen()); }

 private:
  uint64_t state_;
};

}  // namespace ps

#endif  // PS_UTIL_RNG_H_
