#include "lda/alias.h"

namespace lda {

void BuildAlias(const uint32_t* values, const float* weights, size_t n, AliasCell* out,
                uint32_t* alias_at) {
  if (n == 0) return;
  thread_local std::vector<double> scaled;
  thread_local std::vector<uint32_t> small, large;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += weights[i];
  scaled.resize(n);
  small.clear();
  large.clear();
  for (size_t i = 0; i < n; ++i) {
    scaled[i] = sum > 0 ? weights[i] * static_cast<double>(n) / sum : 1.0;
    out[i].value = values[i];
    (scaled[i] < 1.0 ? small : large).push_back(static_cast<uint32_t>(i));
  }
  while (!small.empty() && !large.empty()) {
    const uint32_t s = small.back(), l = large.back();
    small.pop_back();
    out[s].prob = static_cast<float>(scaled[s]);
    out[s].alias = values[l];
    if (alias_at) alias_at[s] = l;
    scaled[l] -= 1.0 - scaled[s];
    if (scaled[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  // What rounding leaves over holds a scaled weight of 1 up to error: it keeps its own value.
  for (const auto* rest : {&large, &small}) {
    for (uint32_t i : *rest) {
      out[i] = AliasCell{1.0f, values[i], values[i]};
      if (alias_at) alias_at[i] = i;
    }
  }
}

void AliasTable::Build(const float* weights, size_t n) {
  thread_local std::vector<uint32_t> index;
  thread_local std::vector<AliasCell> full;
  index.resize(n);
  full.resize(n);
  for (size_t i = 0; i < n; ++i) index[i] = static_cast<uint32_t>(i);
  BuildAlias(index.data(), weights, n, full.data());
  cells_.resize(n);
  for (size_t i = 0; i < n; ++i) cells_[i] = Cell{full[i].prob, full[i].alias};
}

}  // namespace lda
