// A worker's copy of the word-topic counts of the words it samples: small open-addressing hash
// rows sized by each word's distinct topics, dense rows (K counts) where a hash row would take
// as much memory, so memory and the sampler's cache footprint follow the number of nonzero
// counts. Tables hold the pulled snapshot and the live counts (snapshot plus this worker's
// changes); their difference is what the worker pushes. A hash row that fills up moves to a
// larger one (or turns dense); where rows sit depends only on the calls made, so two runs that
// make the same calls lay rows out alike and the sampler meets counts in the same order.
#ifndef PS_APPS_LDA_WORD_TOPIC_H_
#define PS_APPS_LDA_WORD_TOPIC_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace lda {

class WordTopicTable {
 public:
  explicit WordTopicTable(uint32_t num_topics = 1) : k_(num_topics) {}

  /// Forgets every row; words are ids below num_words.
  void Reset(uint32_t num_topics, uint32_t num_words);
  /// Adds word w's row with room for `distinct` topics and a third as many again: a hash row, or
  /// a dense one where the hash row would take as many bytes.
  void AddRow(uint32_t w, uint32_t distinct);
  /// Makes row w (added if missing) a copy of from's row w.
  void CopyRow(uint32_t w, const WordTopicTable& from);
  /// Adds word w's row: dense (K counts), or a hash row with room for `distinct` topics.
  void AddDense(uint32_t w);
  void AddSparse(uint32_t w, uint32_t distinct);

  uint32_t topics() const { return k_; }
  uint32_t num_words() const { return static_cast<uint32_t>(where_.size()); }
  bool Has(uint32_t w) const { return where_[w] != kNone; }
  bool IsDense(uint32_t w) const { return where_[w] >= 0; }
  /// Cells of hash row w (0 for a dense row).
  uint64_t RowCells(uint32_t w) const {
    return where_[w] >= 0 ? 0 : uint64_t{rows_[static_cast<size_t>(-where_[w] - 1)].mask} + 1;
  }
  /// Row w's K counts if it is dense (valid until a row is added or turns dense), else null.
  const int32_t* DenseRow(uint32_t w) const {
    return where_[w] >= 0 ? &dense_[static_cast<size_t>(where_[w])] : nullptr;
  }

  int32_t Get(uint32_t w, uint32_t t) const {
    const int64_t at = where_[w];
    if (at >= 0) return dense_[static_cast<size_t>(at) + t];
    const Row& r = rows_[static_cast<size_t>(-at - 1)];
    for (uint32_t i = t & r.mask;; i = (i + 1) & r.mask) {
      const uint64_t c = cells_[r.at + i];
      if (static_cast<uint32_t>(c >> 32) == t) return static_cast<int32_t>(c);
      if (c == kEmpty) return 0;
    }
  }
  /// Where a lookup of (w, t) starts (to prefetch).
  const void* Where(uint32_t w, uint32_t t) const {
    const int64_t at = where_[w];
    if (at >= 0) return &dense_[static_cast<size_t>(at) + t];
    const Row& r = rows_[static_cast<size_t>(-at - 1)];
    return &cells_[r.at + (t & r.mask)];
  }
  /// Adds d to count (w, t).
  void Add(uint32_t w, uint32_t t, int32_t d) {
    const int64_t at = where_[w];
    if (at >= 0) {
      dense_[static_cast<size_t>(at) + t] += d;
      return;
    }
    Row& r = rows_[static_cast<size_t>(-at - 1)];
    for (uint32_t i = t & r.mask;; i = (i + 1) & r.mask) {
      uint64_t& c = cells_[r.at + i];
      if (static_cast<uint32_t>(c >> 32) == t) {
        c = (c & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(static_cast<int32_t>(c) + d);
        return;
      }
      if (c == kEmpty) {
        // Load at most 2/3 keeps probes short (most lookups are of topics the row does not
        // hold) and leaves an empty cell to end every lookup.
        if ((uint64_t{r.used} + 1) * 3 > (uint64_t{r.mask} + 1) * 2) {
          Grow(w);
          Add(w, t, d);
          return;
        }
        r.used++;
        // A topic new to a fork's base may take a cell the fork gave to another topic.
        if (fork_base_ == this) r.moved = 1;
        c = (uint64_t{t} << 32) | static_cast<uint32_t>(d);
        return;
      }
    }
  }
  /// Calls f(topic, count) for each topic of row w with a nonzero count (dense: in topic order).
  template <typename F>
  void ForEach(uint32_t w, F f) const {
    const int64_t at = where_[w];
    if (at >= 0) {
      const int32_t* row = &dense_[static_cast<size_t>(at)];
      for (uint32_t t = 0; t < k_; ++t) {
        if (row[t]) f(t, row[t]);
      }
      return;
    }
    const Row& r = rows_[static_cast<size_t>(-at - 1)];
    for (uint64_t i = 0; i <= r.mask; ++i) {
      const uint64_t c = cells_[r.at + i];
      if (c != kEmpty && static_cast<int32_t>(c) != 0) {
        f(static_cast<uint32_t>(c >> 32), static_cast<int32_t>(c));
      }
    }
  }
  /// Makes this table a copy of base whose rows share base's layout until either table moves
  /// a row (a hash row growing, a row added or copied anew): ForEachDifference against base
  /// then walks such rows' cells together without first checking that they line up.
  void ForkFrom(WordTopicTable* base);
  /// Calls f(topic, this count - base's count) for each topic of row w where they differ
  /// (dense rows in topic order). One walk over the cells where the rows share their layout (a
  /// fork that only gained topics since), lookups otherwise.
  template <typename F>
  void ForEachDifference(uint32_t w, const WordTopicTable& base, F f) const {
    const int64_t a = where_[w], b = base.where_[w];
    if (a >= 0 && b >= 0) {
      const int32_t* x = &dense_[static_cast<size_t>(a)];
      const int32_t* y = &base.dense_[static_cast<size_t>(b)];
      for (uint32_t t = 0; t < k_; ++t) {
        if (x[t] != y[t]) f(t, x[t] - y[t]);
      }
      return;
    }
    if (a < 0 && b < 0 && a != kNone && b != kNone && (Forked(w, base) || Aligned(w, base))) {
      const Row& r = rows_[static_cast<size_t>(-a - 1)];
      const Row& q = base.rows_[static_cast<size_t>(-b - 1)];
      for (uint64_t i = 0; i <= r.mask; ++i) {
        const uint64_t c = cells_[r.at + i], e = base.cells_[q.at + i];
        const int32_t d = static_cast<int32_t>(c) - (e == kEmpty ? 0 : static_cast<int32_t>(e));
        if (c != kEmpty && d != 0) f(static_cast<uint32_t>(c >> 32), d);
      }
      return;
    }
    ForEach(w, [&](uint32_t t, int32_t n) {
      const int32_t d = n - base.Get(w, t);
      if (d) f(t, d);
    });
    // Topics whose count here fell to zero are not visited above.
    base.ForEach(w, [&](uint32_t t, int32_t n) {
      if (Get(w, t) == 0) f(t, -n);
    });
  }
  /// Sets every count to zero, keeping the layout (and the topics sparse rows hold).
  void ZeroCounts() {
    std::fill(dense_.begin(), dense_.end(), 0);
    for (auto& c : cells_) {
      if (c != kEmpty) c &= 0xFFFFFFFF00000000ull;
    }
  }
  /// Bytes held by the rows.
  size_t bytes() const {
    return dense_.size() * sizeof(int32_t) + cells_.size() * sizeof(uint64_t) +
           rows_.size() * sizeof(Row) + where_.size() * sizeof(int64_t);
  }

 private:
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Row {
    uint64_t at;
    uint32_t mask;
    uint32_t used : 31;
    uint32_t moved : 1;  // since the last ForkFrom that involved this table
  };
  // Whether hash row w holds every topic of base's hash row w in the same cell.
  bool Aligned(uint32_t w, const WordTopicTable& base) const;
  // The same, known without a look at the cells: both tables descend from one ForkFrom and
  // neither has moved the row since.
  bool Forked(uint32_t w, const WordTopicTable& base) const {
    if (fork_ == 0 || fork_ != base.fork_ || fork_base_ != base.fork_base_) return false;
    return !rows_[static_cast<size_t>(-where_[w] - 1)].moved &&
           !base.rows_[static_cast<size_t>(-base.where_[w] - 1)].moved;
  }
  // Moves hash row w to one twice as large (dropping zero counts), or to a dense row if that
  // would be as large.
  void Grow(uint32_t w);
  static uint64_t HashCells(uint32_t distinct);

  uint32_t k_;
  std::vector<int64_t> where_;  // per word: dense offset (>= 0), -(1 + sparse row), or kNone
  std::vector<int32_t> dense_;
  std::vector<Row> rows_;
  std::vector<uint64_t> cells_;  // topic << 32 | count (as uint32); kEmpty for a free cell
  // The fork both tables of a ForkFrom share: the base's address and its count of forks.
  const void* fork_base_ = nullptr;
  uint64_t fork_ = 0;
  uint64_t forks_ = 0;
};

}  // namespace lda

#endif  // PS_APPS_LDA_WORD_TOPIC_H_
