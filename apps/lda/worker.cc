// The worker's side of ps_lda: data parts from the scheduler, the pull-sample-push loop under
// the job's barrier policy, and worker 0's progress lines, evaluation, topics and model file.
#include "lda/worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "lda/corpus.h"
#include "lda/eval.h"
#include "lda/shard.h"

namespace lda {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Per-iteration numbers every worker adds up on the servers (kStatsApp, key = iteration).
enum Stat { kDocLL, kTokens, kChanged, kWorkers, kNumStats };

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
    // The rows this worker reads: its own words' (all dense words on worker 0, which reports
    // the whole model's likelihood). Keys ascend: requests take sorted keys.
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
    for (const auto& d : dense) {
      dense_keys_.push_back(d.first);
      dense_words_.push_back(d.second);
    }
    sparse_rows_ = std::move(sparse);
  }
  bool IsDense(const Vocab& v, uint32_t w) const { return v.freq[w] >= dense_min_; }

  // Pulls the rows this worker reads (the sparse table whole: its rows are scattered) and
  // lays the shard's snapshot out from them.
  void Pull(Shard* s, const Vocab& vocab, Pulled* p) {
    const uint32_t K = o_.hyper.topics;
    p->dense_vals = ps::SArray<int32_t>(dense_keys_.size() * K);
    p->totals = ps::SArray<int64_t>(K);
    const int64_t a = dense_keys_.empty() ? -1 : dense_.Pull(dense_keys_, &p->dense_vals);
    const int64_t b =
        sparse_.PullRange(ps::Range::All(), &p->cell_keys, &p->cell_vals, &p->cell_lens);
    const int64_t c = totals_.Pull(ps::SArray<ps::Key>{0}, &p->totals);
    if (a >= 0) dense_.Wait(a);
    sparse_.Wait(b);
    totals_.Wait(c);
    if (p->totals.size() != K) throw ps::Error("the topic totals hold a width other than K");
    // Distinct topics per sparse row, then the layout, then the counts in key (topic) order.
    std::vector<uint32_t> known(vocab.size(), 0);
    ForEachCell(*p, [&](uint32_t w, uint32_t, int32_t) { known[w]++; });
    s->Layout([&](uint32_t w) { return IsDense(vocab, w); }, [&](uint32_t w) { return known[w]; });
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

  // Pushes what the shard changed since the pull: rows of dense words, cells of the others,
  // the totals. Returns the timestamps to wait for.
  std::vector<std::pair<ps::KVWorkerBase*, int64_t>> Push(const Shard& s) {
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

  // Calls f(w, topic, count) for each nonzero pulled cell of a sparse row this worker reads.
  template <typename F>
  void ForEachCell(const Pulled& p, F f) const {
    ForEachPulledCell(p, sparse_rows_, f);
  }

  const std::vector<uint32_t>& dense_words() const { return dense_words_; }
  // Ends a step on every table; the clocks leave once the step's pushes are acknowledged.
  void Clock() { clocks_ = {dense_.Clock(), sparse_.Clock(), totals_.Clock()}; }
  // Waits until the last clocks reached the servers: a worker that stops (and destroys its
  // KVWorkers) before that would leave the others' reads of the next step waiting for it.
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
              const std::vector<std::pair<ps::Key, uint32_t>>& row_of_key) {
  Model m;
  m.topics = o.hyper.topics;
  m.words = o.hyper.words;
  m.alpha = o.hyper.alpha;
  m.beta = o.hyper.beta;
  m.totals.assign(p.totals.begin(), p.totals.end());
  m.rows.resize(m.words);
  // Each row comes from one table, in topic order.
  ForEachCount(p, dense_words, row_of_key, m.topics,
               [&](uint32_t w, uint32_t t, int32_t n) { m.rows[w].emplace_back(t, n); });
  return m;
}

// Worker 0's view of the run: progress lines, evaluation, the final topics and model.
class Reporter {
 public:
  Reporter(ps::Node* node, const Options& o, const Vocab& vocab, ps::KVWorker<double>* stats)
      : node_(node), o_(o), stats_(*stats) {
    if (!o.test.empty()) test_ = ReadCorpus(o.test, vocab.size());
    // Row keys of every word, to read the whole sparse table.
    for (uint32_t w = 0; w < vocab.size(); ++w) row_of_key_.emplace_back(RowKey(w), w);
    std::sort(row_of_key_.begin(), row_of_key_.end());
    if (!o.log_json.empty()) {
      log_.open(o.log_json);
      if (!log_) throw ps::Error("--log_json=" + o.log_json + ": cannot open for writing");
    }
    start_ = Clock::now();
  }

  // The model after iteration t (pulled at the start of t + 1, or at the end).
  void ModelAfter(int t, const Pulled& p, const std::vector<uint32_t>& dense_words) {
    const uint32_t K = o_.hyper.topics;
    const double lgb = std::lgamma(o_.hyper.beta);
    double word_ll = TotalsLogLikelihood(p.totals.data(), K, o_.hyper.words, o_.hyper.beta);
    uint64_t nnz = 0;
    ForEachCount(p, dense_words, row_of_key_, K, [&](uint32_t, uint32_t, int32_t n) {
      word_ll += std::lgamma(n + o_.hyper.beta) - lgb;
      nnz++;
    });
    Line& l = lines_[t];
    l.word_ll = word_ll;
    l.nnz = nnz;
    l.have_model = true;
    const bool eval =
        test_.docs() && (t == o_.iterations || (o_.eval_every > 0 && t % o_.eval_every == 0));
    if (eval || t == o_.iterations) {
      Phi phi = lda::ModelOf(p, o_, dense_words, row_of_key_).ToPhi();
      if (eval) {
        l.perplexity =
            DocumentCompletion(phi, test_, o_.hyper.alpha, o_.fold_in_iterations).perplexity;
      }
      if (t == o_.iterations) final_phi_ = std::move(phi);
    }
  }
  void Timing(int t, double iter_s, double pull_s, double sample_s, double push_s, double wait_s) {
    Line& l = lines_[t];
    l.iter_s = iter_s;
    l.pull_s = pull_s;
    l.sample_s = sample_s;
    l.push_s = push_s;
    l.wait_s = wait_s;
    const auto st = node_->stats();
    l.sent = st.bytes_sent;
    l.received = st.bytes_received;
  }
  // Prints the lines whose model and every worker's numbers are in.
  void Flush(bool last) {
    while (!lines_.empty()) {
      auto it = lines_.begin();
      if (!it->second.have_model) return;
      ps::SArray<double> v(kNumStats);
      stats_.Wait(stats_.Pull(ps::SArray<ps::Key>{static_cast<ps::Key>(it->first)}, &v));
      if (!last && v[kWorkers] < node_->num_workers()) return;
      Print(it->first, it->second, v);
      lines_.erase(it);
    }
  }
  const Phi& final_phi() const { return final_phi_; }
  Model ModelOf(const Pulled& p, const std::vector<uint32_t>& dense_words) const {
    return lda::ModelOf(p, o_, dense_words, row_of_key_);
  }
  double final_perplexity() const { return final_perplexity_; }
  double final_ll() const { return final_ll_; }

 private:
  struct Line {
    bool have_model = false;
    double word_ll = 0, perplexity = 0;
    uint64_t nnz = 0;
    double iter_s = 0, pull_s = 0, sample_s = 0, push_s = 0, wait_s = 0;
    uint64_t sent = 0, received = 0;
  };
  void Print(int t, const Line& l, const ps::SArray<double>& v) {
    const double tokens = v[kTokens];
    const double ll = (v[kDocLL] + l.word_ll) / std::max(1.0, tokens);
    const double elapsed = Since(start_);
    if (!o_.quiet) {
      std::printf(
          "iteration %d loglik/token %.5f changed %.3f tokens/s %.0f nnz %llu time %.2f s (pull "
          "%.3f sample %.3f push %.3f wait %.3f) MB sent %.2f received %.2f",
          t, ll, v[kChanged] / std::max(1.0, tokens), tokens / std::max(1e-9, l.iter_s),
          static_cast<unsigned long long>(l.nnz), l.iter_s, l.pull_s, l.sample_s, l.push_s,
          l.wait_s, (l.sent - sent_) / 1e6, (l.received - received_) / 1e6);
      if (l.perplexity > 0) std::printf(" perplexity %.2f", l.perplexity);
      std::printf("\n");
      std::fflush(stdout);
    }
    sent_ = l.sent;
    received_ = l.received;
    if (log_) {
      log_ << "{\"iteration\":" << t << ",\"elapsed_s\":" << elapsed << ",\"loglik\":" << ll
           << ",\"tokens_per_s\":" << tokens / std::max(1e-9, l.iter_s)
           << ",\"perplexity\":" << l.perplexity << "}\n";
      log_.flush();
    }
    if (t == o_.iterations) {
      final_ll_ = ll;
      final_perplexity_ = l.perplexity;
    }
  }

  ps::Node* node_;
  const Options& o_;
  ps::KVWorker<double>& stats_;
  Corpus test_;
  std::vector<std::pair<ps::Key, uint32_t>> row_of_key_;
  std::map<int, Line> lines_;
  std::ofstream log_;
  Clock::time_point start_;
  uint64_t sent_ = 0, received_ = 0;
  Phi final_phi_;
  double final_perplexity_ = 0, final_ll_ = 0;
};

void PrintTopics(const Phi& phi, const Vocab& vocab, int n) {
  std::vector<uint32_t> idx(phi.words);
  for (uint32_t t = 0; t < phi.topics; ++t) {
    for (uint32_t w = 0; w < phi.words; ++w) idx[w] = w;
    const float* row = phi.row(t);
    const size_t k = std::min<size_t>(static_cast<size_t>(n), idx.size());
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                      [row](uint32_t a, uint32_t b) { return row[a] > row[b]; });
    std::printf("topic %u:", t);
    for (size_t i = 0; i < k; ++i) std::printf(" %s", vocab.words[idx[i]].c_str());
    std::printf("\n");
  }
  std::fflush(stdout);
}

}  // namespace

int RunWorker(ps::Node* node, const Options& opts) {
  Options o = opts;
  if (o.train.empty() || o.vocab.empty()) throw ps::Error("--train and --vocab are required");
  const Vocab vocab = ReadVocab(o.vocab);
  o.hyper.words = vocab.size();
  const int nparts = o.parts_per_worker * node->num_workers();
  std::vector<int> parts, tasks;
  for (int i = 0; i < o.parts_per_worker; ++i) {
    const int task = node->NextTask();
    if (task < 0) break;
    tasks.push_back(task);
    parts.push_back(task % nparts);
  }
  std::sort(parts.begin(), parts.end());
  node->Barrier(ps::kWorkerGroup);
  // This worker's documents: its parts of the training file, in file order.
  const Corpus all = ReadCorpus(o.train, vocab.size());
  Corpus docs;
  std::vector<uint64_t> ids;
  for (int part : parts) {
    const size_t b = all.docs() * static_cast<size_t>(part) / nparts;
    const size_t e = all.docs() * static_cast<size_t>(part + 1) / nparts;
    for (size_t d = b; d < e; ++d) {
      docs.Add(&all.words[all.offsets[d]], all.length(d));
      ids.push_back(d);
    }
  }
  Shard shard(o.hyper, std::move(docs), std::move(ids));
  shard.RandomTopics(o.seed);
  const bool reporter = node->rank() == 0;
  ModelClient mc(node, o, vocab, shard, reporter);
  ps::KVWorker<double> stats(node, kStatsApp);
  std::unique_ptr<Reporter> rep;
  if (reporter) rep.reset(new Reporter(node, o, vocab, &stats));
  Sampler sampler(o.hyper, o.mh_steps, SamplerSeed(o.seed, node->rank()));
  // Step 0: every worker adds the counts of its initial topics.
  shard.Layout([&](uint32_t w) { return mc.IsDense(vocab, w); },
               [&](uint32_t w) { return shard.local_freq(w); });
  shard.StartFromZero();
  for (auto& p : mc.Push(shard)) p.first->Wait(p.second);
  mc.Clock();
  Pulled pulled;
  int rc = 0;
  for (int t = 1; t <= o.iterations; ++t) {
    const auto t0 = Clock::now();
    mc.Pull(&shard, vocab, &pulled);
    shard.StartPass();
    const double pull_s = Since(t0);
    if (rep && t > 1) rep->ModelAfter(t - 1, pulled, mc.dense_words());
    const auto t1 = Clock::now();
    const uint64_t changed = shard.Pass(&sampler, o.blocks);
    const double sample_s = Since(t1);
    const Corpus& d = shard.docs();
    const double doc_ll =
        DocLogLikelihood(d, 0, d.docs(), shard.z().data(), o.hyper.topics, o.hyper.alpha);
    const auto t2 = Clock::now();
    mc.Push(shard);
    stats.Push(ps::SArray<ps::Key>{static_cast<ps::Key>(t)},
               ps::SArray<double>{doc_ll, static_cast<double>(d.tokens()),
                                  static_cast<double>(changed), 1.0});
    const double push_s = Since(t2);
    const auto t3 = Clock::now();
    mc.Clock();
    const double wait_s = Since(t3);
    if (rep) {
      rep->Timing(t, Since(t0), pull_s, sample_s, push_s, wait_s);
      rep->Flush(false);
    }
  }
  mc.FlushClocks();
  node->Barrier(ps::kWorkerGroup);
  if (rep) {
    mc.Pull(&shard, vocab, &pulled);
    rep->ModelAfter(o.iterations, pulled, mc.dense_words());
    rep->Flush(true);
    PrintTopics(rep->final_phi(), vocab, o.top_words);
    // The count invariant over the whole model: each topic total is its column's sum, and the
    // totals add up to the tokens of the corpus.
    const Model m = rep->ModelOf(pulled, mc.dense_words());
    std::vector<int64_t> columns(m.topics, 0);
    bool negative = false;
    for (const auto& row : m.rows) {
      for (const auto& c : row) {
        columns[c.first] += c.second;
        negative |= c.second < 0;
      }
    }
    int64_t sum = 0;
    for (int64_t n : m.totals) sum += n;
    const bool ok = !negative && columns == m.totals && sum == static_cast<int64_t>(all.tokens());
    std::printf("INVARIANT %s tokens %zu counted %lld%s\n", ok ? "ok" : "BROKEN", all.tokens(),
                static_cast<long long>(sum),
                columns == m.totals ? "" : " (a topic total differs from its column's sum)");
    if (!o.model_out.empty()) WriteModel(m, o.model_out);
    if (!ok) rc = 3;
    std::printf("RESULT loglik/token %.6f perplexity %.4f\n", rep->final_ll(),
                rep->final_perplexity());
    std::fflush(stdout);
  }
  for (int task : tasks) node->TaskDone(task);
  return rc;
}

void RunServer(ps::Node* node) {
  // Counts come and go: slots that return to zero are dropped, so memory follows the nonzero
  // counts.
  ps::KVServer<int32_t> dense(node, kDenseApp, std::make_shared<ps::CountRule<int32_t>>());
  ps::KVServer<int32_t> sparse(node, kSparseApp, std::make_shared<ps::CountRule<int32_t>>());
  ps::KVServer<int64_t> totals(node, kTotalsApp, std::make_shared<ps::CountRule<int64_t>>());
  ps::KVServer<double> stats(node, kStatsApp);
  node->Barrier(ps::kAllGroups);
  node->Finalize();
  std::printf("SERVER rank %d dense_keys %zu dense_bytes %zu sparse_keys %zu sparse_bytes %zu\n",
              node->rank(), dense.NumKeys(), dense.StoreBytes(), sparse.NumKeys(),
              sparse.StoreBytes());
  std::fflush(stdout);
}

}  // namespace lda
