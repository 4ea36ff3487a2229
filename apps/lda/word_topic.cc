#include "lda/word_topic.h"

#include <algorithm>
#include <cstddef>

namespace lda {

void WordTopicTable::Reset(uint32_t num_topics, uint32_t num_words) {
  k_ = num_topics;
  fork_ = 0;
  where_.assign(num_words, kNone);
  dense_.clear();
  rows_.clear();
  cells_.clear();
}

void WordTopicTable::AddDense(uint32_t w) {
  where_[w] = static_cast<int64_t>(dense_.size());
  dense_.resize(dense_.size() + k_, 0);
}

uint64_t WordTopicTable::HashCells(uint32_t distinct) {
  uint64_t cap = 4;
  while (cap < 2 * (uint64_t{distinct} + 1)) cap <<= 1;
  return cap;
}

void WordTopicTable::AddRow(uint32_t w, uint32_t distinct) {
  if (HashCells(distinct) * sizeof(uint64_t) >= uint64_t{k_} * sizeof(int32_t)) {
    AddDense(w);
  } else {
    AddSparse(w, distinct);
  }
}

void WordTopicTable::AddSparse(uint32_t w, uint32_t distinct) {
  const uint64_t cap = HashCells(distinct);
  where_[w] = -static_cast<int64_t>(rows_.size()) - 1;
  rows_.push_back(Row{cells_.size(), static_cast<uint32_t>(cap - 1), 0, 1});
  cells_.resize(cells_.size() + cap, kEmpty);
}

void WordTopicTable::ForkFrom(WordTopicTable* base) {
  for (Row& r : base->rows_) r.moved = 0;
  base->fork_base_ = base;
  base->fork_ = ++base->forks_;
  *this = *base;
  forks_ = 0;
}

void WordTopicTable::CopyRow(uint32_t w, const WordTopicTable& from) {
  const int64_t at = from.where_[w];
  if (at == kNone) {
    AddSparse(w, 0);
    return;
  }
  if (at >= 0) {
    if (where_[w] < 0) AddDense(w);
    std::copy(from.dense_.begin() + at, from.dense_.begin() + at + k_, dense_.begin() + where_[w]);
    return;
  }
  const Row& r = from.rows_[static_cast<size_t>(-at - 1)];
  const auto src = from.cells_.begin() + static_cast<std::ptrdiff_t>(r.at);
  if (where_[w] < 0 && where_[w] != kNone) {
    Row& mine = rows_[static_cast<size_t>(-where_[w] - 1)];
    if (mine.mask == r.mask) {  // in place: the cells stay warm
      std::copy(src, src + r.mask + 1, cells_.begin() + static_cast<std::ptrdiff_t>(mine.at));
      mine.used = r.used;
      mine.moved = 1;
      return;
    }
  }
  // A hash row of another size takes new cells (the old ones stay unused until the next Reset).
  where_[w] = -static_cast<int64_t>(rows_.size()) - 1;
  rows_.push_back(Row{cells_.size(), r.mask, r.used, 1});
  cells_.insert(cells_.end(), src, src + r.mask + 1);
}

bool WordTopicTable::Aligned(uint32_t w, const WordTopicTable& base) const {
  const Row& r = rows_[static_cast<size_t>(-where_[w] - 1)];
  const Row& q = base.rows_[static_cast<size_t>(-base.where_[w] - 1)];
  if (r.mask != q.mask) return false;
  for (uint64_t i = 0; i <= r.mask; ++i) {
    const uint64_t e = base.cells_[q.at + i];
    if (e != kEmpty && (e >> 32) != (cells_[r.at + i] >> 32)) return false;
  }
  return true;
}

void WordTopicTable::Grow(uint32_t w) {
  const size_t r = static_cast<size_t>(-where_[w] - 1);
  const uint64_t at = rows_[r].at, cap = uint64_t{rows_[r].mask} + 1;
  std::vector<uint64_t> old(cells_.begin() + static_cast<std::ptrdiff_t>(at),
                            cells_.begin() + static_cast<std::ptrdiff_t>(at + cap));
  // The old cells stay unused until the next Reset: rows are laid out anew every pass.
  if (2 * cap * sizeof(uint64_t) >= uint64_t{k_} * sizeof(int32_t)) {
    AddDense(w);
  } else {
    where_[w] = -static_cast<int64_t>(r) - 1;
    rows_[r] = Row{cells_.size(), static_cast<uint32_t>(2 * cap - 1), 0, 1};
    cells_.resize(cells_.size() + 2 * cap, kEmpty);
  }
  for (uint64_t c : old) {
    if (c != kEmpty && static_cast<int32_t>(c) != 0) {
      Add(w, static_cast<uint32_t>(c >> 32), static_cast<int32_t>(c));
    }
  }
}

}  // namespace lda
