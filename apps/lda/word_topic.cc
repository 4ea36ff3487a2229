#include "lda/word_topic.h"

#include <string>

namespace lda {

void WordTopicTable::Reset(uint32_t num_topics, uint32_t num_words) {
  k_ = num_topics;
  where_.assign(num_words, kNone);
  dense_.clear();
  rows_.clear();
  cells_.clear();
}

void WordTopicTable::AddDense(uint32_t w) {
  where_[w] = static_cast<int64_t>(dense_.size());
  dense_.resize(dense_.size() + k_, 0);
}

void WordTopicTable::AddSparse(uint32_t w, uint32_t max_distinct) {
  // Load at most 3/4 (linear probing stays short), never more cells than topics need.
  uint64_t cap = 4;
  while (cap * 3 < uint64_t{max_distinct} * 4 + 4) cap <<= 1;
  where_[w] = -static_cast<int64_t>(rows_.size()) - 1;
  rows_.push_back(Row{cells_.size(), static_cast<uint32_t>(cap - 1), 0});
  cells_.resize(cells_.size() + cap, kEmpty);
}

void WordTopicTable::Full(uint32_t w) const {
  throw std::length_error("word " + std::to_string(w) +
                          ": more distinct topics than its row was laid out for");
}

}  // namespace lda
