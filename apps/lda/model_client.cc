#include "lda/model_client.h"

#include <algorithm>

namespace lda {

void ModelClient::SetRows(const Vocab& vocab, const Shard& shard) {
  const uint32_t K = o_.hyper.topics;
  dense_keys_ = ps::SArray<ps::Key>();
  dense_words_.clear();
  for (const auto& d : all_dense_) {
    if (shard.local_freq(d.second) == 0) continue;
    dense_keys_.push_back(d.first);
    dense_words_.push_back(d.second);
  }
  sparse_rows_.clear();
  for (uint32_t w = 0; w < vocab.size(); ++w) {
    if (!IsDense(vocab, w) && shard.local_freq(w) > 0) sparse_rows_.emplace_back(RowKey(w), w);
  }
  std::sort(sparse_rows_.begin(), sparse_rows_.end());
  sparse_ranges_.clear();
  for (const auto& r : sparse_rows_) sparse_ranges_.emplace_back(r.first, r.first + K);
  switch (o_.sparse_pull) {
    case SparsePull::kRows:
      plan_ = Plan::kRows;
      break;
    case SparsePull::kTable:
      plan_ = Plan::kTable;
      break;
    case SparsePull::kAuto:
      plan_ = Plan::kUndecided;  // the next pull reads the table and decides (PullFinish)
      break;
  }
}

void ModelClient::PullStart(Pulled* p, bool whole, bool reduce) {
  const uint32_t K = o_.hyper.topics;
  p->whole = whole;
  const ps::SArray<ps::Key>& dk = whole ? all_dense_keys_ : dense_keys_;
  p->dense_words = whole ? &all_dense_words_ : &dense_words_;
  p->dense_vals = ps::SArray<int32_t>(dk.size() * K);
  p->cell_keys = ps::SArray<ps::Key>();
  p->cell_vals = ps::SArray<int32_t>();
  p->cell_lens = ps::SArray<int>();
  p->totals = ps::SArray<int64_t>(K);
  p->dense_ll.clear();
  p->sparse_ll.clear();
  pulls_.clear();
  if (!dk.empty()) pulls_.emplace_back(&dense_, dense_.Pull(dk, &p->dense_vals));
  // A worker reads only its words' rows (each a range of K cell keys, all in one message per
  // server), or the whole table as one range where that costs less (decided in PullFinish).
  // Counts concentrate as training goes on (fewer cells per row), so auto measures again now
  // and then, with a pull of the table.
  if (o_.sparse_pull == SparsePull::kAuto && !whole && ++pulls_since_plan_ >= kReplanPulls) {
    plan_ = Plan::kUndecided;
  }
  if (whole || plan_ != Plan::kRows) {
    pulls_.emplace_back(
        &sparse_, sparse_.PullRange(ps::Range::All(), &p->cell_keys, &p->cell_vals, &p->cell_lens));
  } else if (!sparse_ranges_.empty()) {
    pulls_.emplace_back(
        &sparse_, sparse_.PullRanges(sparse_ranges_, &p->cell_keys, &p->cell_vals, &p->cell_lens));
  }
  pulls_.emplace_back(&totals_, totals_.Pull(ps::SArray<ps::Key>{0}, &p->totals));
  if (reduce) {
    pulls_.emplace_back(&dense_, dense_.Reduce(kWordLLReducer, {ps::Range::All()}, &p->dense_ll));
    pulls_.emplace_back(&sparse_,
                        sparse_.Reduce(kWordLLReducer, {ps::Range::All()}, &p->sparse_ll));
  }
}

void ModelClient::PullFinish(Shard* s, const Vocab& vocab, Pulled* p) {
  const uint32_t K = o_.hyper.topics;
  PullWait();
  if (p->totals.size() != K) throw ps::Error("the topic totals hold a width other than K");
  // Distinct topics per row, then the layout, then the counts in key (topic) order.
  const std::vector<uint32_t>& dense_words = *p->dense_words;
  std::vector<uint32_t> known(vocab.size(), 0);
  for (size_t i = 0; i < dense_words.size(); ++i) {
    const int32_t* row = p->dense_vals.data() + i * K;
    known[dense_words[i]] = static_cast<uint32_t>(K - std::count(row, row + K, 0));
  }
  uint64_t own_cells = 0;
  ForEachCell(*p, [&](uint32_t w, uint32_t, int32_t) {
    known[w]++;
    own_cells++;
  });
  if (plan_ == Plan::kUndecided) {
    // On the wire a row's range costs 24 bytes (16 in the request, 8 for its count in the
    // reply) and a cell 16 (key, count, length): pull the rows when they and their cells cost
    // less than the whole table, as measured on this pull of it.
    const uint64_t all_cells =
        p->cell_vals.size() - std::count(p->cell_vals.begin(), p->cell_vals.end(), 0);
    const uint64_t rows = sparse_rows_.size();
    plan_ = 24 * rows + 16 * own_cells < 16 * all_cells ? Plan::kRows : Plan::kTable;
    pulls_since_plan_ = 0;
    if (plan_ != decided_) {
      decided_ = plan_;
      plan_note_ = "pulls " +
                   std::string(plan_ == Plan::kRows ? "its rare words' rows (key ranges)"
                                                    : "the whole sparse table") +
                   ": its " + std::to_string(rows) + " rare words hold " +
                   std::to_string(own_cells) + " of the table's " + std::to_string(all_cells) +
                   " cells";
    }
  }
  s->Layout([&](uint32_t w) { return known[w]; });
  WordTopicTable& snap = s->snapshot();
  for (size_t i = 0; i < dense_words.size(); ++i) {
    const uint32_t w = dense_words[i];
    if (!snap.Has(w)) continue;  // a whole pull reads rows this worker does not sample
    const int32_t* row = p->dense_vals.data() + i * K;
    for (uint32_t t = 0; t < K; ++t) {
      if (row[t]) snap.Add(w, t, row[t]);
    }
  }
  ForEachCell(*p, [&](uint32_t w, uint32_t t, int32_t n) { snap.Add(w, t, n); });
  std::copy(p->totals.begin(), p->totals.end(), s->snapshot_totals().begin());
}

std::vector<std::pair<ps::KVWorkerBase*, int64_t>> ModelClient::Push(const Shard& s) {
  const uint32_t K = o_.hyper.topics;
  const WordTopicTable& live = s.live();
  const WordTopicTable& snap = s.snapshot();
  ps::SArray<ps::Key> dk, ck;
  ps::SArray<int32_t> dv, cv;
  // Most rows change every pass: room for as many as the last push held.
  dk.reserve(pushed_rows_);
  dv.reserve(pushed_rows_ * K);
  ck.reserve(pushed_cells_);
  cv.reserve(pushed_cells_);
  std::vector<int32_t> row(K);
  for (size_t i = 0; i < dense_words_.size(); ++i) {
    const uint32_t w = dense_words_[i];
    if (!live.Has(w)) continue;
    const int32_t *a = live.DenseRow(w), *b = snap.DenseRow(w);
    if (a && b) {  // both dense (the common case): loops the compiler vectorises
      int32_t differ = 0;
      for (uint32_t t = 0; t < K; ++t) differ |= a[t] ^ b[t];
      if (!differ) continue;
      const size_t at = dv.size();
      dv.resize(at + K);
      int32_t* out = dv.data() + at;
      for (uint32_t t = 0; t < K; ++t) out[t] = a[t] - b[t];
    } else {
      std::fill(row.begin(), row.end(), 0);
      bool any = false;
      s.RowDelta(w, [&](uint32_t t, int32_t d) {
        row[t] = d;
        any = true;
      });
      if (!any) continue;
      const size_t at = dv.size();
      dv.resize(at + K);
      std::copy(row.begin(), row.end(), dv.data() + at);
    }
    dk.push_back(dense_keys_[i]);
  }
  std::vector<std::pair<uint32_t, int32_t>> cells;
  for (const auto& r : sparse_rows_) {
    cells.clear();
    s.RowDelta(r.second, [&](uint32_t t, int32_t d) { cells.emplace_back(t, d); });
    std::sort(cells.begin(), cells.end());
    for (const auto& c : cells) {
      ck.push_back(r.first | c.first);
      cv.push_back(c.second);
    }
  }
  pushed_rows_ = dk.size();
  pushed_cells_ = ck.size();
  const std::vector<int64_t> td = s.TotalsDelta();
  std::vector<std::pair<ps::KVWorkerBase*, int64_t>> out;
  if (!dk.empty()) out.emplace_back(&dense_, dense_.Push(dk, dv));
  if (!ck.empty()) out.emplace_back(&sparse_, sparse_.Push(ck, cv));
  out.emplace_back(&totals_, totals_.Push(ps::SArray<ps::Key>{0}, ps::SArray<int64_t>(td)));
  return out;
}

void ModelClient::PushDelta(const Vocab& vocab, const Model& want, const Model& have) {
  const uint32_t K = o_.hyper.topics;
  auto delta = [&](uint32_t w, std::vector<std::pair<uint32_t, int64_t>>* out) {
    out->clear();
    const auto &a = want.rows[w], &b = have.rows[w];
    size_t i = 0, j = 0;
    while (i < a.size() || j < b.size()) {
      if (j == b.size() || (i < a.size() && a[i].first < b[j].first)) {
        out->push_back(a[i++]);
      } else if (i == a.size() || b[j].first < a[i].first) {
        out->emplace_back(b[j].first, -b[j].second);
        ++j;
      } else {
        if (a[i].second != b[j].second) out->emplace_back(a[i].first, a[i].second - b[j].second);
        ++i;
        ++j;
      }
    }
  };
  std::vector<std::pair<uint32_t, int64_t>> d;
  ps::SArray<ps::Key> dk, ck;
  ps::SArray<int32_t> dv, cv;
  for (size_t i = 0; i < all_dense_words_.size(); ++i) {
    delta(all_dense_words_[i], &d);
    if (d.empty()) continue;
    dk.push_back(all_dense_keys_[i]);
    const size_t at = dv.size();
    dv.resize(at + K, 0);
    for (const auto& c : d) dv[at + c.first] = static_cast<int32_t>(c.second);
  }
  std::vector<std::pair<ps::Key, uint32_t>> rows;
  for (uint32_t w = 0; w < vocab.size(); ++w) {
    if (!IsDense(vocab, w)) rows.emplace_back(RowKey(w), w);
  }
  std::sort(rows.begin(), rows.end());
  for (const auto& r : rows) {
    delta(r.second, &d);
    for (const auto& c : d) {
      ck.push_back(r.first | c.first);
      cv.push_back(static_cast<int32_t>(c.second));
    }
  }
  ps::SArray<int64_t> td(K);
  for (uint32_t t = 0; t < K; ++t) td[t] = want.totals[t] - have.totals[t];
  if (!dk.empty()) dense_.Wait(dense_.Push(dk, dv));
  if (!ck.empty()) sparse_.Wait(sparse_.Push(ck, cv));
  totals_.Wait(totals_.Push(ps::SArray<ps::Key>{0}, td));
}

Model ModelOf(const Pulled& p, const Options& o,
              const std::vector<std::pair<ps::Key, uint32_t>>& row_of_key) {
  Model m = Model::Empty(o.hyper);
  m.totals.assign(p.totals.begin(), p.totals.end());
  // Each row comes from one table, in topic order.
  ForEachCount(p, row_of_key, m.topics,
               [&](uint32_t w, uint32_t t, int32_t n) { m.rows[w].emplace_back(t, n); });
  return m;
}

}  // namespace lda
