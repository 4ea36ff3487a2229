#include "lda/doc_counts.h"

namespace lda {

uint32_t DocCounts::Cells(uint32_t n) {
  uint32_t cap = 4;
  while (cap < 2 * (n + 1)) cap <<= 1;
  return cap;
}

void DocCounts::Reset(uint32_t num_topics, uint32_t num_docs) {
  k_ = num_topics;
  rows_.assign(num_docs, Row{0, 0, 0});
  cells_.clear();
  dense_.clear();
}

void DocCounts::AddRow(uint32_t d, uint32_t distinct) {
  const uint32_t cap = Cells(distinct);
  if (kDenseFactor * uint64_t{cap} * sizeof(uint32_t) >= uint64_t{k_} * sizeof(uint16_t)) {
    rows_[d] = Row{dense_.size(), kDense, 0};
    dense_.resize(dense_.size() + k_, 0);
    return;
  }
  rows_[d] = Row{cells_.size(), cap - 1, 0};
  cells_.resize(cells_.size() + cap, 0);
}

void DocCounts::Grow(uint32_t d) {
  const Row old = rows_[d];
  uint32_t live = 0;
  for (uint64_t i = 0; i <= old.mask; ++i) live += (cells_[old.at + i] & 0xFFFF) != 0;
  // Twice the room for what is left, so a row that fills with topics again soon grows rarely.
  AddRow(d, 2 * live);
  for (uint64_t i = 0; i <= old.mask; ++i) {
    const uint32_t c = cells_[old.at + i];
    if (c & 0xFFFF) Add(d, (c >> 16) - 1, static_cast<int32_t>(c & 0xFFFF));
  }
}

}  // namespace lda
