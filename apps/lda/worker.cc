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
#include <string>
#include <thread>

#include "lda/corpus.h"
#include "lda/eval.h"
#include "lda/recovery.h"
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
    SetRows(vocab, shard, all);
  }
  // The rows this worker reads: its own words' (all dense words on worker 0, which reports
  // the whole model's likelihood). Keys ascend: requests take sorted keys.
  void SetRows(const Vocab& vocab, const Shard& shard, bool all) {
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
  bool IsDense(const Vocab& v, uint32_t w) const { return v.freq[w] >= dense_min_; }

  // Pulls the rows this worker reads (the sparse table whole: its rows are scattered) and
  // lays the shard's snapshot out from them.
  void Pull(Shard* s, const Vocab& vocab, Pulled* p) {
    PullStart(p);
    PullFinish(s, vocab, p);
  }
  // The same in steps: the pulls leave, then (PullDone() says when) the layout.
  void PullStart(Pulled* p) {
    const uint32_t K = o_.hyper.topics;
    p->dense_vals = ps::SArray<int32_t>(dense_keys_.size() * K);
    p->totals = ps::SArray<int64_t>(K);
    pulls_.clear();
    if (!dense_keys_.empty())
      pulls_.emplace_back(&dense_, dense_.Pull(dense_keys_, &p->dense_vals));
    pulls_.emplace_back(
        &sparse_, sparse_.PullRange(ps::Range::All(), &p->cell_keys, &p->cell_vals, &p->cell_lens));
    pulls_.emplace_back(&totals_, totals_.Pull(ps::SArray<ps::Key>{0}, &p->totals));
  }
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
  void PullFinish(Shard* s, const Vocab& vocab, Pulled* p) {
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

  // Pushes want - have over the whole model (worker 0 at a recount: it reads every dense row)
  // and waits until it is applied.
  void PushDelta(const Vocab& vocab, const Model& want, const Model& have) {
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

  const std::vector<uint32_t>& dense_words() const { return dense_words_; }
  int64_t step() const { return dense_.step(); }
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
  Reporter(ps::Node* node, const Options& o, const Vocab& vocab, ps::KVWorker<double>* stats,
           uint64_t corpus_tokens)
      : node_(node), o_(o), stats_(*stats), corpus_tokens_(corpus_tokens) {
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
  // Prints the lines whose model and every live worker's numbers are in.
  void Flush(bool last, int live) {
    while (!lines_.empty()) {
      auto it = lines_.begin();
      if (!it->second.have_model) return;
      ps::SArray<double> v(kNumStats);
      stats_.Wait(stats_.Pull(ps::SArray<ps::Key>{static_cast<ps::Key>(it->first)}, &v));
      if (!last && v[kWorkers] < live) return;
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
    // A worker that died during the iteration left its documents' numbers out: the document
    // half of the likelihood would not match the word half.
    const bool whole = tokens >= static_cast<double>(corpus_tokens_);
    char lls[32] = "n/a";
    if (whole) std::snprintf(lls, sizeof(lls), "%.5f", ll);
    const double elapsed = Since(start_);
    if (!o_.quiet) {
      std::printf(
          "iteration %d loglik/token %s changed %.3f tokens/s %.0f nnz %llu time %.2f s (pull "
          "%.3f sample %.3f push %.3f wait %.3f) MB sent %.2f received %.2f",
          t, lls, v[kChanged] / std::max(1.0, tokens), tokens / std::max(1e-9, l.iter_s),
          static_cast<unsigned long long>(l.nnz), l.iter_s, l.pull_s, l.sample_s, l.push_s,
          l.wait_s, (l.sent - sent_) / 1e6, (l.received - received_) / 1e6);
      if (l.perplexity > 0) std::printf(" perplexity %.2f", l.perplexity);
      std::printf("\n");
      std::fflush(stdout);
    }
    sent_ = l.sent;
    received_ = l.received;
    if (log_) {
      log_ << "{\"iteration\":" << t << ",\"elapsed_s\":" << elapsed
           << ",\"loglik\":" << (whole ? lls : "null")
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
  const uint64_t corpus_tokens_;
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

// One worker's run: its data parts, the pull-sample-push loop, and the pause protocol of
// lda/recovery.h (worker 0 coordinates it).
class Trainer {
 public:
  Trainer(ps::Node* node, const Options& o, const Vocab& vocab, const Corpus& all,
          std::vector<int> tasks)
      : node_(node),
        o_(o),
        vocab_(vocab),
        all_(all),
        nparts_(o.parts_per_worker * node->num_workers()),
        tasks_(std::move(tasks)),
        coordinator_(node->rank() == 0),
        shard_(MakeShard()),
        mc_(node, o, vocab, *shard_, coordinator_),
        stats_(node, kStatsApp),
        rec_(node, o),
        sampler_(o.hyper, o.mh_steps, SamplerSeed(o.seed, node->rank())) {
    if (coordinator_) rep_.reset(new Reporter(node, o, vocab, &stats_, all.tokens()));
  }

  int Run() {
    // Step 0: every worker adds the counts of its initial topics.
    shard_->StartFromZero();
    for (auto& p : mc_.Push(*shard_)) p.first->Wait(p.second);
    mc_.Clock();
    // Iteration t runs as step t (step 0 was the initial counts).
    while (mc_.step() <= o_.iterations) Iteration();
    Finish();
    return coordinator_ ? Report() : 0;
  }

 private:
  std::unique_ptr<Shard> MakeShard() {
    std::vector<uint64_t> ids;
    for (int task : tasks_) {
      for (uint64_t d : PartDocs(all_, task % nparts_, nparts_)) ids.push_back(d);
    }
    std::sort(ids.begin(), ids.end());
    Corpus docs;
    for (uint64_t d : ids) docs.Add(&all_.words[all_.offsets[d]], all_.length(d));
    std::unique_ptr<Shard> s(new Shard(o_.hyper, std::move(docs), std::move(ids)));
    s->RandomTopics(o_.seed);
    return s;
  }

  int Live() const { return node_->num_workers() - static_cast<int>(rec_.DeadRanks().size()); }

  double DocLL() const {
    const Corpus& d = shard_->docs();
    return DocLogLikelihood(d, 0, d.docs(), shard_->z().data(), o_.hyper.topics, o_.hyper.alpha);
  }
  void PushStats(int64_t t, uint64_t changed, double doc_ll) {
    stats_.Push(ps::SArray<ps::Key>{static_cast<ps::Key>(t)},
                ps::SArray<double>{doc_ll, static_cast<double>(shard_->docs().tokens()),
                                   static_cast<double>(changed), 1.0});
  }

  void Iteration() {
    const int64_t t = mc_.step();
    const auto t0 = Clock::now();
    if (coordinator_ && rec_.DeadRanks().size() > known_dead_) {
      Pause();
      return;  // pulls afresh
    }
    mc_.PullStart(&pulled_);
    if (!coordinator_) {
      // While the pull is out (a barrier policy may hold it), watch for a pause: worker 0
      // waits in one for this worker.
      JobState j = rec_.ReadJob();
      auto polled = Clock::now();
      while (j.pause <= handled_ && !mc_.PullDone()) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        if (Since(polled) > 0.005) {
          j = rec_.ReadJob();
          polled = Clock::now();
        }
      }
      if (j.pause > handled_) {
        Follow(j);
        mc_.PullWait();  // read before the recount: pull again
        return;
      }
    }
    mc_.PullFinish(shard_.get(), vocab_, &pulled_);
    shard_->StartPass();
    const double pull_s = Since(t0);
    if (rep_ && t > 1) rep_->ModelAfter(static_cast<int>(t - 1), pulled_, mc_.dense_words());
    const auto t1 = Clock::now();
    const uint64_t changed = shard_->Pass(&sampler_, o_.blocks);
    const double sample_s = Since(t1);
    const double doc_ll = DocLL();
    const auto t2 = Clock::now();
    mc_.Push(*shard_);
    PushStats(t, changed, doc_ll);
    if (o_.checkpoint_every > 0 && t % o_.checkpoint_every == 0) rec_.SaveTopicsAsync(*shard_);
    const double push_s = Since(t2);
    const auto t3 = Clock::now();
    mc_.Clock();
    const double wait_s = Since(t3);
    if (rep_) {
      rep_->Timing(static_cast<int>(t), Since(t0), pull_s, sample_s, push_s, wait_s);
      rep_->Flush(false, Live());
    }
  }

  // A worker other than 0 in pause j: its pushes applied, its step at least worker 0's (so
  // that worker 0's pull passes any barrier policy), its assignments saved; then it waits
  // for the recount.
  void Follow(const JobState& j) {
    mc_.FlushClocks();
    while (mc_.step() < j.step) {  // iterations it skips: counted as unchanged
      PushStats(mc_.step(), 0, DocLL());
      mc_.Clock();
    }
    mc_.FlushClocks();
    rec_.SaveTopics(*shard_);
    me_.acked = j.pause;
    rec_.SetMember(me_);
    rec_.Await(
        [&] {
          const JobState n = rec_.ReadJob();
          return n.go >= j.pause || n.terminate;
        },
        [&] { return "pause " + std::to_string(j.pause) + ": waiting for worker 0's recount"; });
    handled_ = j.pause;
  }

  // Worker 0: a worker died. Every live worker saves its assignments; worker 0 takes the dead
  // ones' data parts with their saved assignments and sets the counts to those of all.
  void Pause() {
    mc_.FlushClocks();
    const int64_t p = ++handled_;
    JobState j{p, CatchUpStep(node_->consistency_policy(), mc_.step()), p - 1, 0};
    rec_.SetJob(j);
    const int W = node_->num_workers();
    std::vector<int> waiting, dead;
    rec_.Await(
        [&] {
          dead = rec_.DeadRanks();
          const auto members = rec_.ReadMembers();
          waiting.clear();
          for (int r = 1; r < W; ++r) {
            if (members[r].acked < p && !std::binary_search(dead.begin(), dead.end(), r)) {
              waiting.push_back(r);
            }
          }
          return waiting.empty();
        },
        [&] {
          std::string s = "pause " + std::to_string(p) + ": waiting for workers";
          for (int r : waiting) s += " " + std::to_string(r);
          return s + " to save their topics";
        });
    known_dead_ = dead.size();
    // The dead workers' parts came back to the pool when they were declared dead.
    std::vector<uint64_t> adopted;
    for (int task = node_->TryNextTask(); task >= 0; task = node_->TryNextTask()) {
      std::cerr << "worker 0 takes over data part " << task % nparts_ << " (its worker died)"
                << std::endl;
      tasks_.push_back(task);
      for (uint64_t d : PartDocs(all_, task % nparts_, nparts_)) adopted.push_back(d);
    }
    if (!adopted.empty()) {
      std::sort(adopted.begin(), adopted.end());
      const std::vector<uint32_t> az = rec_.LoadTopics(all_, adopted);
      // Merge the shard's documents and the adopted ones, both ascending.
      const auto& own = shard_->doc_ids();
      std::vector<uint64_t> ids;
      std::vector<uint32_t> z;
      size_t i = 0, a = 0, ai = 0;
      while (i < own.size() || a < adopted.size()) {
        const bool take_own = a == adopted.size() || (i < own.size() && own[i] < adopted[a]);
        const uint64_t d = take_own ? own[i] : adopted[a];
        const size_t n = all_.length(d);
        if (take_own) {
          const uint64_t off = shard_->docs().offsets[i++];
          z.insert(z.end(), shard_->z().begin() + off, shard_->z().begin() + off + n);
        } else {
          z.insert(z.end(), az.begin() + ai, az.begin() + ai + n);
          ai += n;
          ++a;
        }
        ids.push_back(d);
      }
      shard_.reset(new Shard(ShardOf(o_.hyper, all_, ids, z)));
      mc_.SetRows(vocab_, *shard_, true);
    }
    const Model want = AllCounts();
    mc_.Pull(shard_.get(), vocab_, &pulled_);
    const Model have = rep_->ModelOf(pulled_, mc_.dense_words());
    mc_.PushDelta(vocab_, want, have);
    std::cerr << "worker 0: counts rebuilt from the assignments of every document (pause " << p
              << ", step " << j.step << ")" << std::endl;
    j.go = p;
    rec_.SetJob(j);
  }

  // The counts of every document's assignment: this shard's own, the others' as saved.
  Model AllCounts() {
    const auto& own = shard_->doc_ids();
    std::vector<uint64_t> others;
    for (uint64_t d = 0, i = 0; d < all_.docs(); ++d) {
      if (i < own.size() && own[i] == d) {
        ++i;
      } else {
        others.push_back(d);
      }
    }
    Model m;
    m.topics = o_.hyper.topics;
    m.words = o_.hyper.words;
    m.alpha = o_.hyper.alpha;
    m.beta = o_.hyper.beta;
    m.totals.assign(m.topics, 0);
    m.rows.resize(m.words);
    AddCounts(all_, own, shard_->z().data(), &m);
    const std::vector<uint32_t> oz = rec_.LoadTopics(all_, others);
    AddCounts(all_, others, oz.data(), &m);
    return m;
  }

  // All iterations done: save the assignments, then wait (taking part in pauses) until every
  // live worker is done.
  void Finish() {
    mc_.FlushClocks();
    rec_.SaveTopics(*shard_);
    for (int task : tasks_) node_->TaskDone(task);
    me_.finished = 1;
    rec_.SetMember(me_);
    if (coordinator_) {
      const int W = node_->num_workers();
      std::vector<int> waiting;
      rec_.Await(
          [&] {
            if (rec_.DeadRanks().size() > known_dead_) Pause();
            const auto members = rec_.ReadMembers();
            const auto dead = rec_.DeadRanks();
            waiting.clear();
            for (int r = 1; r < W; ++r) {
              if (!members[r].finished && !std::binary_search(dead.begin(), dead.end(), r)) {
                waiting.push_back(r);
              }
            }
            return waiting.empty() && dead.size() == known_dead_;
          },
          [&] {
            std::string s = "waiting for workers";
            for (int r : waiting) s += " " + std::to_string(r);
            return s + " to finish";
          });
      rec_.SetJob({handled_, mc_.step(), handled_, 1});
    } else {
      rec_.Await(
          [&] {
            const JobState j = rec_.ReadJob();
            if (j.terminate) return true;
            if (j.pause > handled_) Follow(j);
            return false;
          },
          [] { return std::string("waiting for worker 0 to end the job"); });
    }
    node_->Barrier(ps::kWorkerGroup);
  }

  // Worker 0 after every worker finished: the last lines, topics, model and the invariant.
  int Report() {
    mc_.Pull(shard_.get(), vocab_, &pulled_);
    rep_->ModelAfter(o_.iterations, pulled_, mc_.dense_words());
    rep_->Flush(true, Live());
    PrintTopics(rep_->final_phi(), vocab_, o_.top_words);
    // The count invariant over the whole model: each topic total is its column's sum, the
    // totals add up to the tokens of the corpus, and every count is that of the documents'
    // final assignments (each saved by its worker, or held here).
    const Model m = rep_->ModelOf(pulled_, mc_.dense_words());
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
    const Model want = AllCounts();
    const bool exact = want.rows == m.rows && want.totals == m.totals;
    const bool ok =
        !negative && columns == m.totals && exact && sum == static_cast<int64_t>(all_.tokens());
    std::printf("INVARIANT %s tokens %zu counted %lld%s%s\n", ok ? "ok" : "BROKEN", all_.tokens(),
                static_cast<long long>(sum),
                columns == m.totals ? "" : " (a topic total differs from its column's sum)",
                exact ? " (= the counts of the final assignments)"
                      : " (the counts differ from those of the final assignments)");
    if (!o_.model_out.empty()) WriteModel(m, o_.model_out);
    std::printf("RESULT loglik/token %.6f perplexity %.4f\n", rep_->final_ll(),
                rep_->final_perplexity());
    std::fflush(stdout);
    return ok ? 0 : 3;
  }

  ps::Node* node_;
  const Options& o_;
  const Vocab& vocab_;
  const Corpus& all_;
  const int nparts_;
  std::vector<int> tasks_;
  const bool coordinator_;
  std::unique_ptr<Shard> shard_;
  ModelClient mc_;
  ps::KVWorker<double> stats_;
  Recovery rec_;
  Sampler sampler_;
  std::unique_ptr<Reporter> rep_;
  Pulled pulled_;
  MemberState me_;
  int64_t handled_ = 0;    // pauses seen through (worker 0: called)
  size_t known_dead_ = 0;  // worker 0: dead workers whose parts it took
};

}  // namespace

int RunWorker(ps::Node* node, const Options& opts) {
  Options o = opts;
  if (o.train.empty() || o.vocab.empty()) throw ps::Error("--train and --vocab are required");
  if (node->config().task_timeout_ms > 0) {
    // A part taken from a live worker would be sampled by two workers and counted twice.
    throw ps::Error("ps_lda needs PS_TASK_TIMEOUT_MS=0 (it is " +
                    std::to_string(node->config().task_timeout_ms) +
                    "): a data part moves to another worker only when its worker is dead");
  }
  const Vocab vocab = ReadVocab(o.vocab);
  o.hyper.words = vocab.size();
  std::vector<int> tasks;
  for (int i = 0; i < o.parts_per_worker; ++i) {
    const int task = node->NextTask();
    if (task < 0) break;
    tasks.push_back(task);
  }
  // Everyone holds its share before worker 0 looks for parts left by the dead.
  node->Barrier(ps::kWorkerGroup);
  // This worker's documents: its parts of the training file, in file order.
  const Corpus all = ReadCorpus(o.train, vocab.size());
  Trainer trainer(node, o, vocab, all, std::move(tasks));
  return trainer.Run();
}

void RunServer(ps::Node* node) {
  // Counts come and go: slots that return to zero are dropped, so memory follows the nonzero
  // counts.
  ps::KVServer<int32_t> dense(node, kDenseApp, std::make_shared<ps::CountRule<int32_t>>());
  ps::KVServer<int32_t> sparse(node, kSparseApp, std::make_shared<ps::CountRule<int32_t>>());
  ps::KVServer<int64_t> totals(node, kTotalsApp, std::make_shared<ps::CountRule<int64_t>>());
  ps::KVServer<double> stats(node, kStatsApp);
  ps::KVServer<int64_t> control(node, kControlApp);
  ps::KVServer<int32_t> topics(node, kTopicsApp, std::make_shared<ps::AssignRule<int32_t>>());
  node->Barrier(ps::kAllGroups);
  node->Finalize();
  std::printf("SERVER rank %d dense_keys %zu dense_bytes %zu sparse_keys %zu sparse_bytes %zu\n",
              node->rank(), dense.NumKeys(), dense.StoreBytes(), sparse.NumKeys(),
              sparse.StoreBytes());
  std::fflush(stdout);
}

}  // namespace lda
