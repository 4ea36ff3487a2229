// The worker's side of the sparse linear app: data parts from the scheduler, the DBPG and FTRL
// loops, evaluation, progress lines and the model file (model_file.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <future>
#include <iostream>
#include <sstream>
#include <thread>

#include "linear/linear.h"
#include "linear/metrics.h"
#include "linear/model_file.h"
#include "linear/rules.h"
#include "linear/worker_parts.h"

namespace linear {
namespace {

// The whole model (every stored key), pulled by range.
struct Model {
  ps::SArray<ps::Key> keys;
  ps::SArray<double> w;
  ps::SArray<int> lens;
  double l1norm = 0, l2sq = 0;
  size_t nnz = 0;
};

Model PullModel(ps::KVWorker<double>* kv) {
  Model m;
  kv->Wait(kv->PullRange(ps::Range::All(), &m.keys, &m.w, &m.lens));
  for (double x : m.w) {
    m.l1norm += std::fabs(x);
    m.l2sq += x * x;
    m.nnz += x != 0;
  }
  return m;
}

// The model's norms and nonzeros as the servers compute them (ModelNormReducer): a progress
// line's regularizer without pulling the model.
Model ReduceModel(ps::KVWorker<double>* kv) {
  std::vector<double> r;
  kv->Wait(kv->Reduce(kNormReducer, {ps::Range::All()}, &r));
  if (r.size() != 3) throw ps::Error("the servers' model norms came back malformed");
  Model m;
  m.l1norm = r[0];
  m.l2sq = r[1];
  m.nnz = static_cast<size_t>(r[2]);
  return m;
}

// Per-iteration statistics every worker adds up on the servers (app kStatsApp, key = step):
// data loss and rows.
void PushStats(ps::KVWorker<double>* stats, int t, double loss, double rows) {
  stats->Push(ps::SArray<ps::Key>{static_cast<ps::Key>(t)}, ps::SArray<double>{loss, rows});
}
void PullStats(ps::KVWorker<double>* stats, int t, double* loss, double* rows) {
  ps::SArray<double> v(2);
  stats->Wait(stats->Pull(ps::SArray<ps::Key>{static_cast<ps::Key>(t)}, &v));
  *loss = v[0];
  *rows = v[1];
}

// Rank 0's report after step t: objective, model size, test quality (its time is the line's
// "report" phase, counted in the next line).
void Report(Reporter* rep, ps::KVWorker<double>* kv, ps::KVWorker<double>* stats, const char* unit,
            int t, Phases* ph) {
  double loss, rows;
  Model m;
  Quality q;
  ph->Time(Phases::kReport, [&] {
    PullStats(stats, t, &loss, &rows);
    m = ReduceModel(kv);
    if (rep->has_test()) q = rep->TestQuality(kv);
  });
  rep->Line(unit, t, loss, rows, m.l1norm, m.l2sq, m.nnz, rep->has_test() ? &q : nullptr, ph);
}

// Takes this worker's share of the data parts, and (later) parts that dead workers left.
// The parts are read at once, each on a thread but the first (reading is on the way to the
// first step, and the cores are idle then); they join the shard in the order taken.
void TakeParts(ps::Node* node, const Options& o, Shard* s) {
  const int nparts = o.parts_per_worker * o.team.size;
  std::vector<int> tasks;
  for (int i = 0; i < o.parts_per_worker; ++i) {
    const int task = node->NextTask();
    if (task < 0) break;
    tasks.push_back(task);
  }
  std::vector<std::future<Dataset>> rest;
  for (size_t i = 1; i < tasks.size(); ++i) {
    rest.push_back(std::async(std::launch::async, [&o, nparts, task = tasks[i]] {
      return ReadPart(o.train, o.format, task % nparts, nparts);
    }));
  }
  if (tasks.empty()) return;
  // Every thread is joined before an error leaves (a future's destructor waits for it).
  s->Add(tasks[0], o, nparts);
  for (size_t i = 1; i < tasks.size(); ++i) s->Add(tasks[i], nparts, rest[i - 1].get());
}

int RunDbpg(ps::Node* node, const Options& o, Shard* s, ps::KVWorker<double>* kv,
            ps::KVWorker<double>* stats, Reporter* rep) {
  const int W = o.team.size, B = std::max(1, o.blocks);
  // The KKT filter: a coordinate at zero whose gradient lies inside the band cannot move
  // (when every worker's part of it is within l1 / W, the sum is within l1).
  if (o.kkt && o.l1 > 0) {
    kv->SetPushFilter([&](ps::Key k, const double* v, int) {
      return !(s->w[s->Index(k)] == 0 && std::fabs(v[0]) <= o.l1 / W - o.kkt_delta);
    });
  }
  std::vector<std::vector<uint32_t>> blk;
  std::vector<ps::SArray<ps::Key>> blk_keys;
  std::vector<int> block_of;
  auto index_blocks = [&] {
    blk.assign(B, {});
    blk_keys.assign(B, {});
    block_of.resize(s->data.keys.size());
    for (uint32_t j = 0; j < s->data.keys.size(); ++j) {
      const int b = static_cast<int>(s->data.keys[j] % static_cast<uint64_t>(B));
      block_of[j] = b;
      blk[b].push_back(j);
      blk_keys[b].push_back(s->data.keys[j]);
    }
  };
  index_blocks();
  PullAll(kv, s);
  struct InFlight {
    int64_t ts;
    int iter, block;
    ps::SArray<double> w;
  };
  std::deque<InFlight> inflight;
  Phases ph;
  auto apply = [&](InFlight& f) {
    ph.Time(Phases::kPull, [&] { kv->Wait(f.ts); });
    for (size_t i = 0; i < blk[f.block].size(); ++i) s->w[blk[f.block][i]] = f.w[i];
  };
  std::vector<double> margin, g, u;
  const bool reporting = rep && rep->reporting();
  for (int t = 0; t < o.iterations; ++t) {
    ++ph.iterations;
    if (AdoptParts(node, o, s)) {
      for (auto& f : inflight) kv->Wait(f.ts);  // their indices are stale: drop them
      inflight.clear();
      index_blocks();
      PullAll(kv, s);
    }
    // Bounded delay tau: iteration t uses every block pulled at iterations <= t - 1 - tau.
    const int tau = kv->max_delay();
    while (!inflight.empty() && ((tau >= 0 && inflight.front().iter <= t - 1 - tau) ||
                                 kv->IsDone(inflight.front().ts))) {
      apply(inflight.front());
      inflight.pop_front();
    }
    const int b = t % B;
    const auto compute_start = Clock::now();
    const double loss = s->Margins(&margin);
    g.assign(s->data.keys.size(), 0.0);
    u.assign(s->data.keys.size(), 0.0);
    const auto& d = s->data;
    for (size_t i = 0; i < d.rows(); ++i) {
      const double c = -d.label[i] * Sigmoid(-d.label[i] * margin[i]);
      // The diagonal bound of the block's Hessian: X_b' D X_b <= diag(|X_b|' (D r)) where r_i
      // is the sum of |x_ij| over the block (Gershgorin) and D <= 1/4 (the logistic loss'
      // curvature), so the step with h = u (eta = 1) never increases the objective.
      double r = 0;
      for (size_t e = d.row[i]; e < d.row[i + 1]; ++e) {
        if (block_of[d.col[e]] == b) r += std::fabs(d.val[e]);
      }
      const double p = Sigmoid(margin[i]);
      const double dcurv = o.curvature == "local" ? std::max(p * (1 - p), o.curvature_floor) : 0.25;
      for (size_t e = d.row[i]; e < d.row[i + 1]; ++e) {
        g[d.col[e]] += c * d.val[e];
        u[d.col[e]] += dcurv * std::fabs(d.val[e]) * r;
      }
    }
    // Under a delay a step is taken on gradients up to tau iterations old: shorter steps
    // (curvature times 1 + tau; under an unbounded delay, times 1 + 2 W) keep it stable.
    const double damp = tau == 0 ? 1.0 : 1.0 + (tau > 0 ? tau : 2 * W);
    ps::SArray<double> rows(3 * blk[b].size());
    for (size_t i = 0; i < blk[b].size(); ++i) {
      rows[3 * i] = g[blk[b][i]];
      rows[3 * i + 1] = damp * u[blk[b][i]];
      // Negative: no momentum (the last iteration, and under a delay).
      rows[3 * i + 2] = t + 1 == o.iterations || tau != 0 ? -(t + 1) : t + 1;
    }
    ph.Since(Phases::kCompute, compute_start);
    ph.Time(Phases::kPush, [&] {
      kv->Push(blk_keys[b], rows);
      PushStats(stats, t, loss, static_cast<double>(d.rows()));
    });
    ph.Time(Phases::kClock, [&] { kv->Clock(); });
    InFlight f{0, t, b, ps::SArray<double>(blk[b].size())};
    f.ts = ph.Time(Phases::kPush, [&] { return kv->Pull(blk_keys[b], &f.w); });
    inflight.push_back(std::move(f));
    if (reporting && (t % o.eval_every == 0 || t + 1 == o.iterations)) {
      for (auto& x : inflight) apply(x);  // rank 0 reports the weights of step t + 1
      inflight.clear();
      Report(rep, kv, stats, "iteration", t, &ph);
    }
  }
  for (auto& f : inflight) apply(f);
  return 0;
}

int RunFtrl(ps::Node* node, const Options& o, Shard* s, ps::KVWorker<double>* kv,
            ps::KVWorker<double>* stats, Reporter* rep) {
  struct Batch {
    size_t begin, end;  // rows
    std::vector<uint32_t> idx;
    ps::SArray<ps::Key> keys;
  };
  std::vector<Batch> batches;
  auto make_batches = [&] {
    batches.clear();
    const size_t n = s->data.rows(), bs = std::max(1, o.batch);
    for (size_t b = 0; b < n; b += bs) {
      Batch x{b, std::min(n, b + bs), {}, {}};
      for (size_t e = s->data.row[x.begin]; e < s->data.row[x.end]; ++e) {
        x.idx.push_back(s->data.col[e]);
      }
      std::sort(x.idx.begin(), x.idx.end());
      x.idx.erase(std::unique(x.idx.begin(), x.idx.end()), x.idx.end());
      for (uint32_t j : x.idx) x.keys.push_back(s->data.keys[j]);
      batches.push_back(std::move(x));
    }
  };
  make_batches();
  std::vector<double> g(s->data.keys.size(), 0.0);
  Phases ph;
  const bool reporting = rep && rep->reporting();
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    ++ph.iterations;
    if (AdoptParts(node, o, s)) {
      make_batches();
      g.assign(s->data.keys.size(), 0.0);
    }
    double loss = 0;  // progressive: each row's loss before its batch's update
    for (const Batch& bt : batches) {
      ps::SArray<double> w(bt.keys.size());
      ph.Time(Phases::kPull, [&] { kv->Wait(kv->Pull(bt.keys, &w)); });
      const auto compute_start = Clock::now();
      for (size_t i = 0; i < bt.idx.size(); ++i) s->w[bt.idx[i]] = w[i];
      const auto& d = s->data;
      for (size_t i = bt.begin; i < bt.end; ++i) {
        const double m = Margin(d, i, s->w.data());
        loss += LogLoss(d.label[i] * m);
        const double c = -d.label[i] * Sigmoid(-d.label[i] * m);
        for (size_t e = d.row[i]; e < d.row[i + 1]; ++e) g[d.col[e]] += c * d.val[e];
      }
      ps::SArray<double> push(bt.idx.size());
      for (size_t i = 0; i < bt.idx.size(); ++i) {
        push[i] = g[bt.idx[i]];
        g[bt.idx[i]] = 0;
      }
      ph.Since(Phases::kCompute, compute_start);
      ph.Time(Phases::kPush, [&] { kv->Push(bt.keys, push); });
    }
    // One step per epoch: workers hold different numbers of minibatches, and a barrier policy
    // counts steps, so per-minibatch steps would leave a worker waiting for steps another
    // never takes.
    ph.Time(Phases::kClock, [&] {
      kv->Clock();
      PushStats(stats, epoch, loss, static_cast<double>(s->data.rows()));
      node->Barrier(o.team.group);  // every worker's epoch is in (the stats too)
    });
    if (reporting && (epoch % o.eval_every == 0 || epoch + 1 == o.epochs)) {
      Report(rep, kv, stats, "epoch", epoch, &ph);
    }
  }
  return 0;
}

}  // namespace

void PullAll(ps::KVWorker<double>* kv, Shard* s) {
  ps::SArray<double> w(s->keys.size());
  kv->Wait(kv->Pull(s->keys, &w));
  s->w.assign(w.begin(), w.end());
}

bool AdoptParts(ps::Node* node, const Options& o, Shard* s) {
  const int nparts = o.parts_per_worker * o.team.size;
  bool any = false;
  for (int task = node->TryNextTask(); task >= 0; task = node->TryNextTask()) {
    std::cerr << "worker " << o.team.rank << " takes over data part " << task % nparts
              << " (its worker died)" << std::endl;
    s->Add(task, o, nparts);
    any = true;
  }
  return any;
}

int RunWorker(ps::Node* node, const Options& o) {
  if (!HasRows(o.train, o.format)) {
    throw DataError("--train=" + o.train + ": no training rows (the file is empty)");
  }
  Shard s;
  const Team& team = o.team;
  // The reporting rank reads the test set while it reads its training parts (both are on the
  // way to the first step; the other core is idle then).
  std::future<Dataset> test;
  if (team.rank == 0 && !o.test.empty()) {
    test = std::async(std::launch::async, [&o] { return ReadFile(o.test, o.format); });
  }
  TakeParts(node, o, &s);
  // Everyone holds its share before anyone looks for parts left by the dead (TryNextTask
  // would otherwise take a part meant for a worker still starting).
  node->Barrier(team.group);
  ps::KVWorker<double> kv(node, kModelApp);
  ps::KVWorker<double> stats(node, kStatsApp);
  if (o.significant >= 0) {
    ps::RequestFilters f;
    f.significant = o.significant;
    kv.SetFilters(f);
  }
  std::unique_ptr<Reporter> rep;
  if (team.rank == 0) {
    Dataset t;
    const bool read = test.valid();
    if (read) t = test.get();
    rep.reset(new Reporter(node, o, &kv, read ? &t : nullptr));
  }
  int rc = o.solver == "ftrl"    ? RunFtrl(node, o, &s, &kv, &stats, rep.get())
           : o.solver == "lbfgs" ? RunLbfgs(node, o, &s, &kv, &stats, rep.get())
                                 : RunDbpg(node, o, &s, &kv, &stats, rep.get());
  node->Barrier(team.group);
  // With an evaluation group, its evaluator reports the end, told by the done key: every
  // trainer adds to it, so a dead rank 0 does not leave the evaluator waiting.
  if (!team.group.empty()) stats.Wait(stats.Push({kDoneKey}, ps::SArray<double>{1.0, 0.0}));
  if (rep) {
    const Model m = o.model_out.empty() ? ReduceModel(&kv) : PullModel(&kv);
    if (!o.model_out.empty()) {
      WriteModel(o.model_out, o.format, o.train, m.keys.data(), m.w.data(), m.keys.size());
    }
    if (rep->has_test() && team.group.empty()) {
      const Quality q = rep->TestQuality(&kv);
      std::printf("RESULT solver %s test_logloss %.6f test_auc %.6f test_accuracy %.4f nnz %zu\n",
                  o.solver.c_str(), q.logloss, q.auc, q.accuracy, m.nnz);
      std::fflush(stdout);
    }
  }
  for (int task : s.tasks) node->TaskDone(task);
  return rc;
}

Team TeamOf(const ps::Node& node, const Options& o) {
  Team t;
  const auto groups = node.worker_groups();
  if (groups.size() == 1 && groups[0].first.empty()) {
    t.size = node.num_workers();
    t.rank = node.rank();
    return t;
  }
  t.group = o.train_group;
  t.size = apps::GroupSize(node, t.group);
  if (t.size == 0) {
    std::string names;
    for (const auto& g : groups) names += (names.empty() ? "" : ", ") + g.first;
    throw ps::Error("the job's worker groups (" + names + ") have none named '" + o.train_group +
                    "' (--train_group)");
  }
  if (node.role() == ps::Role::kWorker) {
    if (node.group() == o.train_group) {
      t.rank = node.group_rank();
    } else if (node.group() == o.eval_group) {
      t.evaluator = true;
    } else {
      throw ps::Error("worker group '" + node.group() + "' neither trains (--train_group " +
                      o.train_group + ") nor evaluates (--eval_group " + o.eval_group + ")");
    }
  }
  return t;
}

int RunEvaluator(ps::Node* node, const Options& o) {
  if (o.test.empty()) throw ps::Error("the evaluation group needs --test");
  ps::KVWorker<double> kv(node, kModelApp);
  ps::KVWorker<double> stats(node, kStatsApp);
  Reporter rep(node, o, &kv);
  const auto start = Clock::now();
  for (int n = 0;; ++n) {
    // Read before evaluating: a model read after the training group said it was done is its
    // final one.
    ps::SArray<double> done(2);
    stats.Wait(stats.Pull({kDoneKey}, &done));
    const Quality q = rep.TestQuality(&kv);
    const Model m = ReduceModel(&kv);
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    // The loop ends with the training: its end, or the death of every trainer.
    if (done[0] == 0 && apps::DeadRanks(*node, o.team).size() >= static_cast<size_t>(o.team.size)) {
      throw ps::Error("every worker of group '" + o.team.group + "' died before training ended");
    }
    if (done[0] > 0) {
      std::printf("RESULT solver %s test_logloss %.6f test_auc %.6f test_accuracy %.4f nnz %zu\n",
                  o.solver.c_str(), q.logloss, q.auc, q.accuracy, m.nnz);
      std::fflush(stdout);
      return 0;
    }
    {  // printed whatever --quiet says: reporting is this group's work, not the trainers'
      std::printf("eval %d time %.2fs test_auc %.5f test_logloss %.5f test_accuracy %.4f nnz %zu\n",
                  n, secs, q.auc, q.logloss, q.accuracy, m.nnz);
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o.eval_interval_ms));
  }
}

}  // namespace linear
