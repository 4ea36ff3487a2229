// The worker's side of ps_lda: data parts from the scheduler, the pull-sample-push loop under
// the job's barrier policy, and worker 0's progress lines, evaluation, topics and model file.
#include "lda/worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "lda/corpus.h"
#include "lda/eval.h"
#include "lda/model_client.h"
#include "lda/recovery.h"
#include "lda/shard.h"

namespace lda {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Per-iteration numbers every worker adds up on the servers (Job::stats, key = iteration).
// Per iteration, summed over the workers on the servers. kStale: steps between the iteration
// and the server clock its pull read (0 under BSP, at most s under SSP(s)).
enum Stat { kDocLL, kTokens, kChanged, kWorkers, kStale, kNumStats };

// Worker 0's view of the run: progress lines, evaluation, the final topics and model.
class Reporter {
 public:
  // append: a worker that takes over as coordinator goes on with the log its predecessor began.
  Reporter(ps::Node* node, const Options& o, const Vocab& vocab, ps::KVWorker<double>* stats,
           uint64_t corpus_tokens, bool append = false)
      : node_(node), o_(o), stats_(*stats), corpus_tokens_(corpus_tokens) {
    if (!o.test.empty()) test_ = ReadCorpus(o.test, vocab.size());
    // Row keys of every word, to read the whole sparse table.
    for (uint32_t w = 0; w < vocab.size(); ++w) row_of_key_.emplace_back(RowKey(w), w);
    std::sort(row_of_key_.begin(), row_of_key_.end());
    if (!o.log_json.empty()) {
      log_.open(o.log_json, append ? std::ios::app : std::ios::trunc);
      if (!log_) throw ps::Error("--log_json=" + o.log_json + ": cannot open for writing");
    }
    start_ = Clock::now();
  }

  // Whether the line of iteration t needs the whole model (to evaluate, or the final topics);
  // the others need only the servers' reduction.
  bool NeedsModel(int t) const {
    return t == o_.iterations || (test_.docs() && o_.eval_every > 0 && t % o_.eval_every == 0);
  }
  // The model after iteration t (pulled at the start of t + 1, or at the end), with the
  // reduction; the whole model where NeedsModel(t).
  void ModelAfter(int t, const Pulled& p) {
    const uint32_t K = o_.hyper.topics;
    if (p.dense_ll.size() != 2 || p.sparse_ll.size() != 2) {
      throw ps::Error("the servers' log-likelihood reduction is missing from the pull");
    }
    Line& l = lines_[t];
    l.word_ll = TotalsLogLikelihood(p.totals.data(), K, o_.hyper.words, o_.hyper.beta) +
                p.dense_ll[0] + p.sparse_ll[0];
    l.nnz = static_cast<uint64_t>(p.dense_ll[1] + p.sparse_ll[1]);
    l.have_model = true;
    const bool whole = NeedsModel(t);
    const bool eval = whole && test_.docs();
    if (whole) {
      Phi phi = lda::ModelOf(p, o_, row_of_key_).ToPhi();
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
  // Prints the lines whose model and every live worker's numbers are in. Until the last call
  // it does not wait for the servers: the numbers of the next line are pulled in the
  // background (the pull queues behind the iteration's pushes) and read at a later call.
  void Flush(bool last, int live) {
    while (!lines_.empty()) {
      auto it = lines_.begin();
      if (!it->second.have_model) return;
      if (pulling_ != it->first) {
        pulling_ = it->first;
        pulled_ = ps::SArray<double>(kNumStats);
        pull_ts_ = stats_.Pull(ps::SArray<ps::Key>{static_cast<ps::Key>(it->first)}, &pulled_);
      }
      if (!last && !stats_.IsDone(pull_ts_)) return;
      stats_.Wait(pull_ts_);
      pulling_ = -1;  // read: a line still short of workers pulls again next time
      if (!last && pulled_[kWorkers] < live) return;
      Print(it->first, it->second, pulled_);
      lines_.erase(it);
    }
  }
  const Phi& final_phi() const { return final_phi_; }
  Model ModelOf(const Pulled& p) const { return lda::ModelOf(p, o_, row_of_key_); }
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
      std::printf(" stale %.2f", v[kStale] / std::max(1.0, v[kWorkers]));
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
           << ",\"staleness\":" << v[kStale] / std::max(1.0, v[kWorkers])
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
  int pulling_ = -1;  // the line whose numbers are being pulled
  int64_t pull_ts_ = 0;
  ps::SArray<double> pulled_;
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
// lda/recovery.h. The lowest live rank coordinates it (worker 0 until it dies).
class Trainer {
 public:
  // all: the training file with the documents of `tasks` read (the others empty); tokens: the
  // file's.
  Trainer(ps::Node* node, const Options& o, const Vocab& vocab, Corpus all, uint64_t tokens,
          std::vector<int> tasks)
      : node_(node),
        o_(o),
        vocab_(vocab),
        all_(std::move(all)),
        corpus_tokens_(tokens),
        rank_(o.job.team.rank),
        tasks_(std::move(tasks)),
        coordinator_(rank_ == 0),
        shard_(MakeShard()),
        mc_(node, o, vocab, *shard_),
        stats_(node, o.job.stats),
        rec_(node, o),
        sampler_(o.hyper, o.mh_steps, SamplerSeed(o.seed, rank_)) {
    if (coordinator_) rep_.reset(new Reporter(node, o, vocab, &stats_, corpus_tokens_));
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
      for (uint64_t d : PartDocs(all_.docs(), PartOf(o_, task), nparts())) ids.push_back(d);
    }
    std::sort(ids.begin(), ids.end());
    Corpus docs;
    for (uint64_t d : ids) docs.Add(&all_.words[all_.offsets[d]], all_.length(d));
    std::unique_ptr<Shard> s(new Shard(o_.hyper, std::move(docs), std::move(ids)));
    s->RandomTopics(o_.seed);
    return s;
  }

  int Live() const { return o_.job.team.size - static_cast<int>(rec_.DeadRanks().size()); }

  // Becomes the coordinator when every lower rank is dead: it takes the job state's key and the
  // report (lines, evaluation, model file), and, as it knows of dead workers it has not
  // handled, calls a pause next. True when it just did.
  bool Promote() {
    if (coordinator_) return false;
    const auto dead = rec_.DeadRanks();
    for (int r = 0; r < rank_; ++r) {
      if (!Dead(dead, r)) return false;
    }
    coordinator_ = true;
    std::cerr << "worker " << rank_ << " coordinates from now on (the workers below it "
              << "died)" << std::endl;
    rec_.AdoptJob();
    rep_.reset(new Reporter(node_, o_, vocab_, &stats_, corpus_tokens_, true));
    known_dead_ = 0;
    return true;
  }
  bool Dead(const std::vector<int>& dead, int r) const {
    return std::binary_search(dead.begin(), dead.end(), r);
  }
  // The other live workers whose state is not yet done, as read now; dead: the dead ranks.
  std::vector<int> Waiting(const std::function<bool(const MemberState&)>& done,
                           std::vector<int>* dead) {
    *dead = rec_.DeadRanks();
    const auto members = rec_.ReadMembers();
    std::vector<int> out;
    for (int r = 0; r < o_.job.team.size; ++r) {
      if (r != rank_ && !done(members[r]) && !Dead(*dead, r)) out.push_back(r);
    }
    return out;
  }
  static std::string Ranks(const std::vector<int>& rs) {
    std::string s;
    for (int r : rs) s += " " + std::to_string(r);
    return s;
  }

  void Straggle(int64_t t) const {
    if (o_.straggle_ms <= 0) return;
    uint64_t x = o_.seed * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(rank_ + 1) << 40 ^
                 static_cast<uint64_t>(t);
    Rng r(Rng::SplitMix(&x));
    if (r.Uniform() < o_.straggle_p) {
      std::this_thread::sleep_for(std::chrono::milliseconds(o_.straggle_ms));
    }
  }
  double DocLL() const {
    const Corpus& d = shard_->docs();
    return DocLogLikelihood(d, 0, d.docs(), shard_->z().data(), o_.hyper.topics, o_.hyper.alpha);
  }
  void PushStats(int64_t t, uint64_t changed, double doc_ll) {
    const int64_t read = mc_.ReadClock();
    const double stale = read < 0 ? 0.0 : static_cast<double>(std::max<int64_t>(0, t - read));
    stats_.Push(ps::SArray<ps::Key>{static_cast<ps::Key>(t)},
                ps::SArray<double>{doc_ll, static_cast<double>(shard_->docs().tokens()),
                                   static_cast<double>(changed), 1.0, stale});
  }

  void Iteration() {
    const int64_t t = mc_.step();
    const auto t0 = Clock::now();
    Promote();
    if (coordinator_ && rec_.DeadRanks().size() > known_dead_) {
      Pause();
      return;  // pulls afresh
    }
    // Worker 0 reads its own rows too, with the servers' reduction for its line, and the whole
    // model only for the lines that evaluate it.
    const bool line = rep_ && t > 1;
    mc_.PullStart(&pulled_, line && rep_->NeedsModel(static_cast<int>(t - 1)), line);
    if (!coordinator_) {
      // While the pull is out (a barrier policy may hold it), watch for a pause (the
      // coordinator waits in one for this worker) and for the coordinator's death.
      JobState j = rec_.ReadJob();
      auto polled = Clock::now();
      // Past the barrier timeout PullFinish's wait reports the pull that never came.
      const double limit_s = node_->config().barrier_timeout_ms / 1000.0;
      bool promoted = false;
      while (j.pause <= handled_ && !promoted && !mc_.PullDone() && Since(t0) < limit_s) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        if (Since(polled) > 0.005) {
          j = rec_.ReadJob();
          promoted = Promote();
          polled = Clock::now();
        }
      }
      if (promoted || j.pause > handled_) {
        if (!promoted) Follow(j);
        mc_.PullWait();  // read before the recount: pull again (a new coordinator pauses first)
        return;
      }
    }
    mc_.PullFinish(shard_.get(), vocab_, &pulled_);
    const std::string plan = mc_.TakePlanNote();
    if (!plan.empty() && !o_.quiet) std::cerr << "worker " << rank_ << " " << plan << "\n";
    shard_->StartPass();
    const double pull_s = Since(t0);
    if (line) rep_->ModelAfter(static_cast<int>(t - 1), pulled_);
    const auto t1 = Clock::now();
    const uint64_t changed = shard_->Pass(&sampler_, shard_->Blocks(o_.block_tokens));
    Straggle(t);
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

  // A worker that does not coordinate, in pause j: its pushes applied, its step at least the
  // coordinator's (so that the coordinator's pull passes any barrier policy), its assignments
  // saved; then it waits for the recount. A newer pause meanwhile means the coordinator died
  // in this one and the next rank took over: it follows that one. False: this worker took
  // over itself (it calls the pause next).
  bool Follow(JobState j) {
    for (;;) {
      mc_.FlushClocks();
      while (mc_.step() < j.step) {  // iterations it skips: counted as unchanged
        PushStats(mc_.step(), 0, DocLL());
        mc_.Clock();
      }
      mc_.FlushClocks();
      rec_.SaveTopics(*shard_);
      me_.acked = j.pause;
      rec_.SetMember(me_);
      JobState n;
      bool promoted = false;
      rec_.Await(
          [&] {
            n = rec_.ReadJob();
            if (n.go >= j.pause || n.terminate || n.pause > j.pause) return true;
            promoted = Promote();
            return promoted;
          },
          [&] {
            return "pause " + std::to_string(j.pause) + ": waiting for the coordinator's recount";
          });
      if (promoted) return false;
      if (n.pause > j.pause && n.go < j.pause && !n.terminate) {
        j = n;
        continue;
      }
      handled_ = j.pause;
      return true;
    }
  }

  // The coordinator: a worker died. Every live worker saves its assignments; the coordinator
  // takes the dead ones' data parts with their saved assignments and sets the counts to those
  // of all. A coordinator that took over numbers its pause past any its predecessor called.
  void Pause() {
    mc_.FlushClocks();
    const int64_t p = std::max(handled_, rec_.job().pause) + 1;
    handled_ = p;
    JobState j{p, CatchUpStep(node_->consistency_policy(o_.job.team.group), mc_.step()),
               rec_.job().go, 0};
    rec_.SetJob(j);
    std::vector<int> waiting, dead;
    rec_.Await(
        [&] {
          waiting = Waiting([p](const MemberState& m) { return m.acked >= p; }, &dead);
          return waiting.empty();
        },
        [&] {
          return "pause " + std::to_string(p) + ": waiting for workers" + Ranks(waiting) +
                 " to save their topics";
        });
    known_dead_ = dead.size();
    // The dead workers' parts came back to the pool when they were declared dead.
    std::vector<uint64_t> adopted;
    for (int task = node_->TryNextTask(); task >= 0; task = node_->TryNextTask()) {
      std::cerr << "worker " << rank_ << " takes over data part " << PartOf(o_, task)
                << " (its worker died)" << std::endl;
      tasks_.push_back(task);
      for (uint64_t d : PartDocs(all_.docs(), PartOf(o_, task), nparts())) adopted.push_back(d);
    }
    if (!adopted.empty()) {
      std::sort(adopted.begin(), adopted.end());
      // Read the adopted documents (this worker held only its own).
      const std::vector<uint64_t>& own = shard_->doc_ids();
      all_ = ReadCorpus(o_.train, vocab_.size(), [&](uint64_t d) {
        return std::binary_search(own.begin(), own.end(), d) ||
               std::binary_search(adopted.begin(), adopted.end(), d);
      });
      Corpus adopted_docs;
      for (uint64_t d : adopted) adopted_docs.Add(&all_.words[all_.offsets[d]], all_.length(d));
      const std::vector<uint32_t> az = rec_.LoadTopics(adopted_docs, adopted);
      // Merge the shard's documents and the adopted ones, both ascending.
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
      mc_.SetRows(vocab_, *shard_);
    }
    const Model want = AllCounts();
    mc_.Pull(shard_.get(), vocab_, &pulled_, /*whole=*/true, /*reduce=*/false);
    const Model have = rep_->ModelOf(pulled_);
    mc_.PushDelta(vocab_, want, have);
    std::cerr << "worker " << rank_
              << ": counts rebuilt from the assignments of every document (pause " << p << ", step "
              << j.step << ")" << std::endl;
    j.go = p;
    rec_.SetJob(j);
  }

  // The counts of every document's assignment: this shard's own, the others' as saved, read
  // from the training file batch by batch (a worker holds only its own documents, and the
  // whole corpus need not fit in its memory).
  Model AllCounts() {
    const auto& own = shard_->doc_ids();
    Model m = Model::Empty(o_.hyper);
    std::vector<uint64_t> local(own.size());
    for (size_t i = 0; i < local.size(); ++i) local[i] = i;
    AddCounts(shard_->docs(), local, shard_->z().data(), &m);
    ForEachBatch(o_.train, vocab_.size(), kRecountBatchDocs,
                 [&](uint64_t first, const Corpus& batch) {
                   Corpus others;
                   std::vector<uint64_t> ids, idx;
                   for (uint64_t d = 0; d < batch.docs(); ++d) {
                     if (std::binary_search(own.begin(), own.end(), first + d)) continue;
                     others.Add(&batch.words[batch.offsets[d]], batch.length(d));
                     ids.push_back(first + d);
                     idx.push_back(idx.size());
                   }
                   const std::vector<uint32_t> oz = rec_.LoadTopics(others, ids);
                   AddCounts(others, idx, oz.data(), &m);
                 });
    return m;
  }
  // Small enough that the process tests' corpora (1500 documents) span two batches.
  static constexpr uint64_t kRecountBatchDocs = 1024;

  // All iterations done: save the assignments, then wait (taking part in pauses) until every
  // live worker is done.
  void Finish() {
    mc_.FlushClocks();
    rec_.SaveTopics(*shard_);
    for (int task : tasks_) node_->TaskDone(task);
    me_.finished = 1;
    rec_.SetMember(me_);
    if (!coordinator_) {
      rec_.Await(
          [&] {
            const JobState j = rec_.ReadJob();
            if (j.terminate) return true;
            if (j.pause > handled_ && !Follow(j)) return true;
            return Promote();
          },
          [] { return std::string("waiting for the coordinator to end the job"); });
    }
    if (coordinator_) {
      std::vector<int> waiting, dead;
      rec_.Await(
          [&] {
            if (rec_.DeadRanks().size() > known_dead_) Pause();
            waiting = Waiting([](const MemberState& m) { return m.finished != 0; }, &dead);
            return waiting.empty() && dead.size() == known_dead_;
          },
          [&] { return "waiting for workers" + Ranks(waiting) + " to finish"; });
      rec_.SetJob({handled_, mc_.step(), handled_, 1});
    }
    node_->Barrier(o_.job.team.group);
  }

  // The coordinator after every worker finished: the last lines, topics, model and the
  // invariant.
  int Report() {
    mc_.Pull(shard_.get(), vocab_, &pulled_, /*whole=*/true, /*reduce=*/true);
    rep_->ModelAfter(o_.iterations, pulled_);
    rep_->Flush(true, Live());
    PrintTopics(rep_->final_phi(), vocab_, o_.top_words);
    // The count invariant over the whole model: each topic total is its column's sum, the
    // totals add up to the tokens of the corpus, and every count is that of the documents'
    // final assignments (each saved by its worker, or held here).
    const Model m = rep_->ModelOf(pulled_);
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
        !negative && columns == m.totals && exact && sum == static_cast<int64_t>(corpus_tokens_);
    std::printf("INVARIANT %s tokens %llu counted %lld%s%s\n", ok ? "ok" : "BROKEN",
                static_cast<unsigned long long>(corpus_tokens_), static_cast<long long>(sum),
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
  Corpus all_;  // the training file: this worker's documents (the others read as empty)
  const uint64_t corpus_tokens_;
  int nparts() const { return o_.parts_per_worker * o_.job.team.size; }
  const int rank_;  // this worker's rank in its team
  std::vector<int> tasks_;
  bool coordinator_;
  std::unique_ptr<Shard> shard_;
  ModelClient mc_;
  ps::KVWorker<double> stats_;
  Recovery rec_;
  Sampler sampler_;
  std::unique_ptr<Reporter> rep_;
  Pulled pulled_;
  MemberState me_;
  int64_t handled_ = 0;    // pauses seen through (the coordinator: called)
  size_t known_dead_ = 0;  // the coordinator: dead workers whose parts it took
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
  // Everyone holds its share before the coordinator looks for parts left by the dead.
  node->Barrier(o.job.team.group);
  // This worker's documents: its parts of the training file, in file order (every line is
  // checked; the other documents are not kept).
  const int nparts = o.parts_per_worker * o.job.team.size;
  const uint64_t docs = CountDocs(o.train);
  std::vector<bool> mine(docs, false);
  for (int task : tasks) {
    for (uint64_t d : PartDocs(docs, PartOf(o, task), nparts)) mine[d] = true;
  }
  uint64_t tokens = 0;
  Corpus all = ReadCorpus(
      o.train, vocab.size(), [&](uint64_t d) { return d < docs && mine[d]; }, &tokens);
  if (all.docs() != docs) throw ps::Error(o.train + ": changed while it was read");
  Trainer trainer(node, o, vocab, std::move(all), tokens, std::move(tasks));
  return trainer.Run();
}

ps::TableRules TableRules() {
  // Counts come and go: slots that return to zero are dropped, so memory follows the nonzero
  // counts.
  return ps::TableRules().Add<int32_t>("lda.words", [](const std::vector<double>& args) {
    if (args.size() != 1) throw ps::Error("rule lda.words:BETA takes one number, the prior beta");
    return ps::TableRule<int32_t>{std::make_shared<ps::CountRule<int32_t>>(),
                                  {{kWordLLReducer, std::make_shared<WordLLReducer>(args[0])}}};
  });
}

Job OpenJob(ps::Node* node, const Options& o) {
  Job j;
  j.team = apps::OwnTeam(*node);
  char beta[64];
  std::snprintf(beta, sizeof(beta), "lda.words:%.17g", o.hyper.beta);
  auto open = [&](const char* part, ps::DataType dtype, int width, const std::string& rule) {
    return apps::OpenTable(node, o.tables, part, dtype, width, rule);
  };
  const int K = static_cast<int>(o.hyper.topics);
  j.dense = open("dense", ps::DataType::kInt32, K, beta);
  j.sparse = open("sparse", ps::DataType::kInt32, 1, beta);
  j.totals = open("totals", ps::DataType::kInt64, K, "count");
  j.stats = open("stats", ps::DataType::kDouble, 0, "sum");
  j.control = open("control", ps::DataType::kInt64, 0, "sum");
  j.topics = open("topics", ps::DataType::kInt32, 0, "assign");
  j.first_task = node->AddTasksOnce(o.parts_per_worker * j.team.size, j.team.group);
  // One source of truth: the flag, else the job's setting for the run's group, else SSP(1)
  // (Gibbs sampling's natural fit). Set before the start barrier: the scheduler passes the
  // policy on to the servers before it releases this worker (its messages arrive in order).
  std::string policy = o.consistency;
  if (policy.empty()) {
    const char* job = std::getenv("PS_CONSISTENCY");
    const bool set = (job && *job) || (!j.team.group.empty() &&
                                       node->config().group_consistency.count(j.team.group));
    if (!set) policy = "ssp:1";
  }
  if (!policy.empty()) node->SetConsistency(policy, ps::Node::kKeepDelay, j.team.group);
  return j;
}

void RunServer(ps::Node* node, const Options& o) {
  ps::TableServer tables(node, TableRules());
  node->Barrier(ps::kAllGroups);
  node->Finalize();
  const auto st = node->stats();
  auto keys = [&](const char* part) {
    const ps::KVServerBase* t = tables.Find(o.tables + "." + part);
    return std::make_pair(t ? t->NumKeys() : 0, t ? t->StoreBytes() : 0);
  };
  const auto dense = keys("dense"), sparse = keys("sparse");
  std::printf(
      "SERVER rank %d dense_keys %zu dense_bytes %zu sparse_keys %zu sparse_bytes %zu MB sent "
      "%.2f received %.2f\n",
      node->rank(), dense.first, dense.second, sparse.first, sparse.second, st.bytes_sent / 1e6,
      st.bytes_received / 1e6);
  std::fflush(stdout);
}

}  // namespace lda
