// A worker's client of the count tables on the servers (lda.h): the pull that lays its
// shard's snapshot out, the push of what it changed, and worker 0's recount delta.
#ifndef PS_APPS_LDA_MODEL_CLIENT_H_
#define PS_APPS_LDA_MODEL_CLIENT_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "lda/corpus.h"
#include "lda/eval.h"
#include "lda/lda.h"
#include "lda/shard.h"

namespace lda {

// The whole model as one pull returns it: dense rows, sparse cells, totals.
struct Pulled {
  ps::SArray<int32_t> dense_vals;
  ps::SArray<ps::Key> cell_keys;
  ps::SArray<int32_t> cell_vals;
  ps::SArray<int> cell_lens;
  ps::SArray<int64_t> totals;
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
  ModelClient(ps::Node* node, const Options& o, const Vocab& vocab, const Shard& shard, bool all)
      : o_(o),
        dense_(node, kDenseApp),
        sparse_(node, kSparseApp),
        totals_(node, kTotalsApp),
        dense_min_(DenseMin(o)) {
    SetRows(vocab, shard, all);
  }
  // The rows this worker reads: its own words' (all dense words on worker 0, which reports
  // the whole model's likelihood). Keys ascend: requests take sorted keys.
  void SetRows(const Vocab& vocab, const Shard& shard, bool all);
  bool IsDense(const Vocab& v, uint32_t w) const { return v.freq[w] >= dense_min_; }

  // Pulls the rows this worker reads (the sparse table whole: its rows are scattered) and
  // lays the shard's snapshot out from them.
  void Pull(Shard* s, const Vocab& vocab, Pulled* p) {
    PullStart(p);
    PullFinish(s, vocab, p);
  }
  // The same in steps: the pulls leave, then (PullDone() says when) the layout.
  void PullStart(Pulled* p);
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

  // Pushes want - have over the whole model (worker 0 at a recount: it reads every dense row)
  // and waits until it is applied.
  void PushDelta(const Vocab& vocab, const Model& want, const Model& have);

  const std::vector<uint32_t>& dense_words() const { return dense_words_; }
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
  ps::SArray<ps::Key> dense_keys_;
  std::vector<uint32_t> dense_words_;
  std::vector<std::pair<ps::Key, uint32_t>> sparse_rows_;  // (row key, word), ascending
  std::vector<int64_t> clocks_;
  std::vector<std::pair<ps::KVWorkerBase*, int64_t>> pulls_;
};

// The whole model as worker 0 pulls it: every count, by (word, topic).
template <typename F>
void ForEachCount(const Pulled& p, const std::vector<uint32_t>& dense_words,
                  const std::vector<std::pair<ps::Key, uint32_t>>& row_of_key, uint32_t K, F f) {
  for (size_t i = 0; i < dense_words.size(); ++i) {
    for (uint32_t t = 0; t < K; ++t) {
      if (p.dense_vals[i * K + t]) f(dense_words[i], t, p.dense_vals[i * K + t]);
    }
  }
  ForEachPulledCell(p, row_of_key, f);
}

// The whole model from worker 0's pull, rows in ascending topic order.
Model ModelOf(const Pulled& p, const Options& o, const std::vector<uint32_t>& dense_words,
              const std::vector<std::pair<ps::Key, uint32_t>>& row_of_key);

}  // namespace lda

#endif  // PS_APPS_LDA_MODEL_CLIENT_H_
