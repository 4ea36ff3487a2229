// The topic counts of one block's documents while the sampler visits the block word by word:
// its tokens reach the documents in random order, so the rows must be small enough for the
// block's documents to stay in cache together. Each document's row is an open-addressing hash
// of 32-bit cells (topic + 1 in the high half, count in the low half; 0 is a free cell), half
// the bytes of a WordTopicTable cell, sized for twice the topics the document holds when the
// block starts so that lookups of absent topics, the common case, end after few probes. A row
// is dense (K 16-bit counts) where that takes at most four times the hash row's bytes: a dense
// lookup is one load without a branch, and a lookup touches one cache line either way, so
// dense rows win until the block's rows no longer fit the caches; rows of documents with few
// topics among many stay small (measured against one, eight and sixteen times: see
// docs/apps/lda.md, "The sampler").
// Usable when K < 2^16 - 1 and no document is longer than 2^16 - 1 tokens (Fits); the sampler
// falls back to a WordTopicTable otherwise.
#ifndef PS_APPS_LDA_DOC_COUNTS_H_
#define PS_APPS_LDA_DOC_COUNTS_H_

#include <cstdint>
#include <vector>

namespace lda {

class DocCounts {
 public:
  /// Whether counts of K topics in documents of up to max_len tokens fit the cells.
  static bool Fits(uint32_t num_topics, uint64_t max_len) {
    return num_topics < 0xFFFF && max_len < 0xFFFF;
  }

  /// Forgets every row; documents are ids below num_docs.
  void Reset(uint32_t num_topics, uint32_t num_docs);
  /// Adds document d's row with room for `distinct` topics (it grows when more arrive): dense
  /// (K 16-bit counts) where that takes at most four times the hash row's bytes.
  void AddRow(uint32_t d, uint32_t distinct);

  int32_t Get(uint32_t d, uint32_t t) const {
    const Row& r = rows_[d];
    if (r.mask == kDense) return dense_[r.at + t];
    const uint32_t key = (t + 1) << 16;
    for (uint32_t i = t & r.mask;; i = (i + 1) & r.mask) {
      const uint32_t c = cells_[r.at + i];
      if ((c & 0xFFFF0000u) == key) return static_cast<int32_t>(c & 0xFFFF);
      if (c == 0) return 0;
    }
  }
  /// Where a lookup of (d, t) starts (to prefetch).
  const void* Where(uint32_t d, uint32_t t) const {
    const Row& r = rows_[d];
    if (r.mask == kDense) return &dense_[r.at + t];
    return &cells_[r.at + (t & r.mask)];
  }
  /// Adds delta to count (d, t); a count never goes below zero (it counts tokens).
  void Add(uint32_t d, uint32_t t, int32_t delta) {
    Row& r = rows_[d];
    if (r.mask == kDense) {
      dense_[r.at + t] = static_cast<uint16_t>(dense_[r.at + t] + delta);
      return;
    }
    const uint32_t key = (t + 1) << 16;
    for (uint32_t i = t & r.mask;; i = (i + 1) & r.mask) {
      uint32_t& c = cells_[r.at + i];
      if ((c & 0xFFFF0000u) == key) {
        c = key | static_cast<uint32_t>(static_cast<int32_t>(c & 0xFFFF) + delta);
        return;
      }
      if (c == 0) {
        if ((r.used + 1) * 2 > r.mask + 1) {  // keep the load at most 1/2
          Grow(d);
          Add(d, t, delta);
          return;
        }
        r.used++;
        c = key | static_cast<uint32_t>(delta);
        return;
      }
    }
  }

 private:
  static constexpr uint64_t kDenseFactor = 4;  // see the top of this file
  static constexpr uint32_t kDense = ~0u;      // mask of a dense row: K 16-bit counts at dense_[at]
  struct Row {
    uint64_t at;
    uint32_t mask, used;
  };
  // The smallest power of two that holds n topics at load at most 1/2.
  static uint32_t Cells(uint32_t n);
  // Moves row d to one twice as large at the end of the cells (dropping zero counts).
  void Grow(uint32_t d);

  std::vector<Row> rows_;
  uint32_t k_ = 0;
  std::vector<uint32_t> cells_;
  std::vector<uint16_t> dense_;
};

}  // namespace lda

#endif  // PS_APPS_LDA_DOC_COUNTS_H_
