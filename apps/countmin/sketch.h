// The CountMin sketch (Cormode and Muthukrishnan, 2005): its shape from (ε, δ), a seeded
// pairwise-independent hash family, and a local sketch that the distributed one is checked
// against and measured beside.
#ifndef PS_APPS_COUNTMIN_SKETCH_H_
#define PS_APPS_COUNTMIN_SKETCH_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace countmin {

/// The Mersenne prime 2^61 - 1: the hash family works in the field of this size.
constexpr uint64_t kPrime = (1ull << 61) - 1;

/// 64-bit id of a string item: FNV-1a over its bytes, then the splitmix64 finalizer (FNV-1a
/// alone leaves short strings' ids close together). Stable across platforms and runs.
uint64_t ItemId(std::string_view item);

/// Width w and depth d. From the error bounds: w = ceil(e / ε) and d = ceil(ln(1 / δ)), so that
/// an estimate exceeds the true count by more than ε·N with probability at most δ (N: the
/// number of items inserted).
struct Shape {
  uint32_t width = 0;
  uint32_t depth = 0;
  static Shape FromError(double epsilon, double delta);
  uint64_t cells() const { return static_cast<uint64_t>(width) * depth; }
};

/// Row j hashes an item id x to h_j(x) = floor(((a_j x' + b_j) mod p) · w / 2^61), with
/// p = 2^61 - 1, x' = x mod p, a_j in [1, p) and b_j in [0, p) drawn from splitmix64 seeded by
/// `seed` (the ((a x + b) mod p) family is pairwise independent over [0, p); the last step maps
/// [0, p) onto [0, w) by a multiply and a shift instead of a division, with a bias below w / p).
class HashFamily {
 public:
  HashFamily(Shape shape, uint64_t seed);
  /// Column of item id x in row j.
  uint32_t Column(uint32_t row, uint64_t x) const {
    const unsigned __int128 t = static_cast<unsigned __int128>(a_[row]) * Reduce(x) + b_[row];
    uint64_t r = static_cast<uint64_t>(t & kPrime) + static_cast<uint64_t>(t >> 61);
    r = (r & kPrime) + (r >> 61);
    if (r >= kPrime) r -= kPrime;
    return static_cast<uint32_t>((static_cast<unsigned __int128>(r) * width_) >> 61);
  }
  /// Index of item id x's cell in row j of a row-major w × d array.
  uint64_t Cell(uint32_t row, uint64_t x) const {
    return static_cast<uint64_t>(row) * width_ + Column(row, x);
  }
  Shape shape() const { return {width_, static_cast<uint32_t>(a_.size())}; }
  uint64_t seed() const { return seed_; }

 private:
  static uint64_t Reduce(uint64_t x) {
    const uint64_t r = (x & kPrime) + (x >> 61);
    return r >= kPrime ? r - kPrime : r;
  }
  uint32_t width_;
  uint64_t seed_;
  std::vector<uint64_t> a_, b_;
};

/// The largest count a 32-bit cell holds (--counter_bits 32): a cell that reaches it stays
/// there, and an estimate read from such cells is "at least" that much.
constexpr int64_t kCap32 = 0xFFFFFFFFll;

/// A sketch in one process: the reference the distributed sketch must equal cell for cell, and
/// the speed limit it is measured against.
class LocalSketch {
 public:
  LocalSketch(Shape shape, uint64_t seed) : hash_(shape, seed), cells_(shape.cells(), 0) {}
  /// Adds count to item id x's cell in every row.
  void Add(uint64_t x, int64_t count = 1) {
    const uint32_t d = hash_.shape().depth;
    for (uint32_t j = 0; j < d; ++j) cells_[hash_.Cell(j, x)] += count;
  }
  /// Conservative update (Estan and Varghese): raises each of x's cells only as far as the new
  /// estimate (the old minimum plus count). Estimates never fall below the true counts and err
  /// less, but the result depends on the order of the inserts (see docs/apps/countmin.md).
  void AddConservative(uint64_t x, int64_t count = 1);
  /// The smallest of x's cells: never below the number of times x was added.
  int64_t Estimate(uint64_t x) const;
  /// Clamps every cell to cap: 32-bit cells (--counter_bits 32) saturate at 2^32 - 1. Cells
  /// only grow, so clamping at the end gives the cells of clamping at every insert, plain or
  /// conservative, and the servers' saturating sums. Returns the cells at cap.
  uint64_t Saturate(int64_t cap);
  const std::vector<int64_t>& cells() const { return cells_; }
  std::vector<int64_t>* mutable_cells() { return &cells_; }
  const HashFamily& hash() const { return hash_; }

 private:
  HashFamily hash_;
  std::vector<int64_t> cells_;
};

/// A sketch file: "countmin W D SEED\n" and then the W·D cells, row-major, int64
/// little-endian. Two runs that counted the same multiset of items write identical files.
void WriteSketch(const std::string& path, Shape shape, uint64_t seed,
                 const std::vector<int64_t>& cells);
/// Reads a file written by WriteSketch; throws std::runtime_error naming the file and what is
/// wrong with it.
LocalSketch ReadSketch(const std::string& path);

}  // namespace countmin

#endif  // PS_APPS_COUNTMIN_SKETCH_H_
