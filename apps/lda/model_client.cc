#include "lda/model_client.h"

#include <algorithm>

namespace lda {

void ModelClient::SetRows(const Vocab& vocab, const Shard& shard, bool all) {
  std::vector<std::pair<ps::Key, uint32_t>> dense, sparse;
  for (uint32_t w = 0; w < vocab.size(); ++w) {
    const bool mine = shard.local_freq(w) > 0;
    if (IsDense(vocab, w)) {
      if (mine || all) dense.emplace_back(RowKey(w), w);
    } else if (mine) {
      sparse.emplace_back(RowKey(w), w);
    }
  }
  std::sort(dense.begin(), dense.end());
  std::sort(sparse.begin(), sparse.end());
  dense_keys_ = ps::SArray<ps::Key>();
  dense_words_.clear();
  for (const auto& d : dense) {
    dense_keys_.push_back(d.first);
    dense_words_.push_back(d.second);
  }
  sparse_rows_ = std::move(sparse);
}

void ModelClient::PullStart(Pulled* p) {
  const uint32_t K = o_.hyper.topics;
  p->dense_vals = ps::SArray<int32_t>(dense_keys_.size() * K);
  p->totals = ps::SArray<int64_t>(K);
  pulls_.clear();
  if (!dense_keys_.empty()) pulls_.emplace_back(&dense_, dense_.Pull(dense_keys_, &p->dense_vals));
  pulls_.emplace_back(
      &sparse_, sparse_.PullRange(ps::Range::All(), &p->cell_keys, &p->cell_vals, &p->cell_lens));
  pulls_.emplace_back(&totals_, totals_.Pull(ps::SArray<ps::Key>{0}, &p->totals));
}

void ModelClient::PullFinish(Shard* s, const Vocab& vocab, Pulled* p) {
  const uint32_t K = o_.hyper.topics;
  PullWait();
  if (p->totals.size() != K) throw ps::Error("the topic totals hold a width other than K");
  // Distinct topics per row, then the layout, then the counts in key (topic) order.
  std::vector<uint32_t> known(vocab.size(), 0);
  for (size_t i = 0; i < dense_words_.size(); ++i) {
    const int32_t* row = p->dense_vals.data() + i * K;
    known[dense_words_[i]] = static_cast<uint32_t>(K - std::count(row, row + K, 0));
  }
  ForEachCell(*p, [&](uint32_t w, uint32_t, int32_t) { known[w]++; });
  s->Layout([&](uint32_t w) { return known[w]; });
  WordTopicTable& snap = s->snapshot();
  for (size_t i = 0; i < dense_words_.size(); ++i) {
    const uint32_t w = dense_words_[i];
    if (!snap.Has(w)) continue;  // worker 0 reads rows it does not sample
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
  ps::SArray<ps::Key> dk, ck;
  ps::SArray<int32_t> dv, cv;
  std::vector<int32_t> row(K);
  for (size_t i = 0; i < dense_words_.size(); ++i) {
    const uint32_t w = dense_words_[i];
    if (!live.Has(w)) continue;
    std::fill(row.begin(), row.end(), 0);
    bool any = false;
    s.RowDelta(w, [&](uint32_t t, int32_t d) {
      row[t] = d;
      any = true;
    });
    if (!any) continue;
    dk.push_back(dense_keys_[i]);
    for (int32_t d : row) dv.push_back(d);
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
  for (size_t i = 0; i < dense_words_.size(); ++i) {
    delta(dense_words_[i], &d);
    if (d.empty()) continue;
    dk.push_back(dense_keys_[i]);
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

Model ModelOf(const Pulled& p, const Options& o, const std::vector<uint32_t>& dense_words,
              const std::vector<std::pair<ps::Key, uint32_t>>& row_of_key) {
  Model m = Model::Empty(o.hyper);
  m.totals.assign(p.totals.begin(), p.totals.end());
  // Each row comes from one table, in topic order.
  ForEachCount(p, dense_words, row_of_key, m.topics,
               [&](uint32_t w, uint32_t t, int32_t n) { m.rows[w].emplace_back(t, n); });
  return m;
}

}  // namespace lda
