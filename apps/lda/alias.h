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

/// One alias table that owns its cells.
class AliasTable {
 public:
  void Build(const uint32_t* values, const float* weights, size_t n) {
    cells_.resize(n);
    BuildAlias(values, weights, n, cells_.data());
  }
  uint32_t Draw(Rng* r) const { return DrawAlias(cells_.data(), cells_.size(), r); }
  bool empty() const { return cells_.empty(); }

 private:
  std::vector<AliasCell> cells_;
};

}  // namespace lda

#endif  // PS_APPS_LDA_ALIAS_H_
