// A worker's client of the count tables on the servers (lda.h): the pull of its rows that lays
// its shard's snapshot out, the push of what it changed, worker 0's reduction and recount delta.
#ifndef PS_APPS_LDA_MODEL_CLIENT_H_
#define PS_APPS_LDA_MODEL_CLIENT_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lda/corpus.h"
#include "lda/eval.h"
#include "lda/lda.h"
#include "lda/shard.h"

namespace lda {

// What one pull returns: the worker's own rows, or every row (`whole`: worker 0 when it
// evaluates or recounts the model), and the topic totals.
struct Pulled {
  bool whole = false;
  const std::vector<uint32_t>* dense_words = nullptr;  // the words of dense_vals' rows, in order
  ps::SArray<int32_t> dense_vals;
  ps::SArray<ps::Key> cell_keys;
  ps::SArray<int32_t> cell_vals;
  ps::SArray<int> cell_lens;
  ps::SArray<int64_t> totals;
  // With a reduction (worker 0's progress lines): per table, the sum over its nonzero counts
  // of lgamma(n + beta) - lgamma(beta), and their number (WordLLReducer), computed by the
  // servers.
  std::vector<double> dense_ll, sparse_ll;
};

// The servers' reducer kWordLLReducer over the count tables: the word half of the
// log-likelihood and the number of nonzero counts, so that worker 0 reports on the whole
// model without pulling it.
constexpr int kWordLLReducer = 1;
class WordLLReducer : public ps::RangeReducer<int32_t> {
 public:
  explicit WordLLReducer(double beta) : lg_(beta) {}
  int Width() const override { return 2; }
  void Add(ps::Key, const int32_t* vals, int n, double* acc) const override {
    for (int i = 0; i < n; ++i) {
      if (vals[i] == 0) continue;
      acc[0] += lg_(vals[i]);
      acc[1] += 1;
    }
  }

 private:
  const LgammaTable lg_;
};

// Calls f(w, topic, count) for each nonzero pulled cell whose row is one of `rows` ((row key,
// word) pairs, ascending): one walk, both lists being sorted by key.
template <typename F>
void ForEachPulledCell(const Pulled& p, const std::vector<std::pair<ps::Key, uint32_t>>& rows,
                       F f) {
  size_t r = 0;
  for (size_t i = 0; i < p.cell_keys.size(); ++i) {
    const ps::Key row = p.cell_keys[i] & ~static_cast<ps::Key>(kMaxTopics - 1);
    while (r < rows.size() && rows[r].first < row) ++r;
    if (r == rows.size()) break;
    if (rows[r].first != row || p.cell_vals[i] == 0) continue;
    f(rows[r].second, static_cast<uint32_t>(p.cell_keys[i] - row), p.cell_vals[i]);
  }
}

class ModelClient {
 public:
  ModelClient(ps::Node* node, const Options& o, const Vocab& vocab, const Shard& shard)
      : o_(o),
        dense_(node, o.job.dense),
        sparse_(node, o.job.sparse),
        totals_(node, o.job.totals),
        dense_min_(DenseMin(o)) {
    for (uint32_t w = 0; w < vocab.size(); ++w) {
      if (IsDense(vocab, w)) all_dense_.emplace_back(RowKey(w), w);
    }
    std::sort(all_dense_.begin(), all_dense_.end());
    for (const auto& d : all_dense_) {
      all_dense_keys_.push_back(d.first);
      all_dense_words_.push_back(d.second);
    }
    SetRows(vocab, shard);
  }
  // The rows this worker samples: its own words'. Keys ascend: requests take sorted keys.
  void SetRows(const Vocab& vocab, const Shard& shard);
  bool IsDense(const Vocab& v, uint32_t w) const { return v.freq[w] >= dense_min_; }
  // When --sparse_pull=auto has chosen anew how this worker pulls the sparse table: what it
  // chose and why (for its log); "" otherwise.
  std::string TakePlanNote() { return std::move(plan_note_); }

  // Pulls the rows this worker samples (every row when `whole`), with the reduction when
  // `reduce`, and lays the shard's snapshot out from them.
  void Pull(Shard* s, const Vocab& vocab, Pulled* p, bool whole, bool reduce) {
    PullStart(p, whole, reduce);
    PullFinish(s, vocab, p);
  }
  // The same in steps: the pulls leave, then (PullDone() says when) the layout.
  void PullStart(Pulled* p, bool whole, bool reduce);
  bool PullDone() const {
    for (const auto& r : pulls_) {
      if (!r.first->IsDone(r.second)) return false;
    }
    return true;
  }
  void PullWait() {
    for (const auto& r : pulls_) r.first->Wait(r.second);
    pulls_.clear();
  }
  void PullFinish(Shard* s, const Vocab& vocab, Pulled* p);

  // Pushes what the shard changed since the pull: rows of dense words, cells of the others,
  // the totals. Returns the timestamps to wait for.
  std::vector<std::pair<ps::KVWorkerBase*, int64_t>> Push(const Shard& s);

  // Calls f(w, topic, count) for each nonzero pulled cell of a sparse row this worker reads.
  template <typename F>
  void ForEachCell(const Pulled& p, F f) const {
    ForEachPulledCell(p, sparse_rows_, f);
  }

  // Pushes want - have over the whole model (worker 0 at a recount) and waits until it is
  // applied.
  void PushDelta(const Vocab& vocab, const Model& want, const Model& have);

  int64_t step() const { return dense_.step(); }
  // The server clock the last pull read, on the stalest of the tables (-1: none yet).
  int64_t ReadClock() const {
    return std::min({dense_.barrier_stats().read_clock, sparse_.barrier_stats().read_clock,
                     totals_.barrier_stats().read_clock});
  }
  // Ends a step on every table; the clocks leave once the step's pushes are acknowledged.
  void Clock() { clocks_ = {dense_.Clock(), sparse_.Clock(), totals_.Clock()}; }
  // Waits until the last clocks reached the servers: a pause's acknowledgement and the final
  // save say that this worker's steps so far count everywhere.
  void FlushClocks() {
    if (clocks_.size() != 3) return;
    dense_.Wait(clocks_[0]);
    sparse_.Wait(clocks_[1]);
    totals_.Wait(clocks_[2]);
  }

 private:
  const Options& o_;
  ps::KVWorker<int32_t> dense_, sparse_;
  ps::KVWorker<int64_t> totals_;
  uint64_t dense_min_;
  std::vector<std::pair<ps::Key, uint32_t>> all_dense_;  // (row key, word), ascending
  ps::SArray<ps::Key> all_dense_keys_;
  std::vector<uint32_t> all_dense_words_;
  ps::SArray<ps::Key> dense_keys_;  // this worker's dense rows
  std::vector<uint32_t> dense_words_;
  std::vector<std::pair<ps::Key, uint32_t>> sparse_rows_;  // (row key, word), ascending
  std::vector<ps::Range> sparse_ranges_;                   // their cells' key ranges
  // How the sparse table is pulled: its rows' key ranges or the whole table (--sparse_pull;
  // auto: undecided until a pull of the table measured both).
  enum class Plan { kUndecided, kRows, kTable };
  Plan plan_ = Plan::kUndecided;
  Plan decided_ = Plan::kUndecided;  // the last decision auto logged
  static constexpr int kReplanPulls = 10;
  int pulls_since_plan_ = 0;
  std::string plan_note_;
  std::vector<int64_t> clocks_;
  std::vector<std::pair<ps::KVWorkerBase*, int64_t>> pulls_;
  size_t pushed_rows_ = 0, pushed_cells_ = 0;  // dense rows and cells of the last push
};

// Every count of a whole pull, by (word, topic).
template <typename F>
void ForEachCount(const Pulled& p, const std::vector<std::pair<ps::Key, uint32_t>>& row_of_key,
                  uint32_t K, F f) {
  if (!p.whole) throw ps::Error("the whole model was read from a pull of some rows only");
  const std::vector<uint32_t>& dense_words = *p.dense_words;
  for (size_t i = 0; i < dense_words.size(); ++i) {
    for (uint32_t t = 0; t < K; ++t) {
      if (p.dense_vals[i * K + t]) f(dense_words[i], t, p.dense_vals[i * K + t]);
    }
  }
  ForEachPulledCell(p, row_of_key, f);
}

// The whole model from a whole pull, rows in ascending topic order.
Model ModelOf(const Pulled& p, const Options& o,
              const std::vector<std::pair<ps::Key, uint32_t>>& row_of_key);

}  // namespace lda

#endif  // PS_APPS_LDA_MODEL_CLIENT_H_
