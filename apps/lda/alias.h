// Walker's alias method (Vose's construction): O(n) to build, O(1) per draw.
#ifndef PS_APPS_LDA_ALIAS_H_
#define PS_APPS_LDA_ALIAS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lda/rng.h"

namespace lda {

struct AliasCell {
  float prob;  // chance of keeping this cell's own value
  uint32_t value, alias;
};

/// Fills out[0, n) so that DrawAlias picks values[i] with probability weights[i] / sum. Cell i
/// keeps values[i]; alias_at (if given) receives the index of each cell's alias value.
void BuildAlias(const uint32_t* values, const float* weights, size_t n, AliasCell* out,
                uint32_t* alias_at = nullptr);

inline uint32_t DrawAlias(const AliasCell* cells, size_t n, Rng* r) {
  const double u = r->Uniform() * static_cast<double>(n);
  size_t i = static_cast<size_t>(u);
  if (i >= n) i = n - 1;
  const AliasCell& c = cells[i];
  return (u - static_cast<double>(i)) < c.prob ? c.value : c.alias;
}

/// An alias table over 0, 1, ..., n - 1 that owns its cells: 8 bytes a value (a cell keeps its
/// own index), so a table over every topic takes less of the cache the sampler shares with it.
class AliasTable {
 public:
  /// Draws i with probability weights[i] / sum.
  void Build(const float* weights, size_t n);
  uint32_t Draw(Rng* r) const {
    const double u = r->Uniform() * static_cast<double>(cells_.size());
    size_t i = static_cast<size_t>(u);
    if (i >= cells_.size()) i = cells_.size() - 1;
    const Cell& c = cells_[i];
    return (u - static_cast<double>(i)) < c.prob ? static_cast<uint32_t>(i) : c.alias;
  }
  bool empty() const { return cells_.empty(); }

 private:
  struct Cell {
    float prob;
    uint32_t alias;
  };
  std::vector<Cell> cells_;
};

}  // namespace lda

#endif  // PS_APPS_LDA_ALIAS_H_
