// The limited-memory quasi-Newton solver of the linear app: L-BFGS for L2 and OWL-QN (Andrew
// and Gao, ICML 2007) under L1, with the model on the servers and the quasi-Newton history
// on the workers (lbfgs.h). Each worker keeps the vectors of the keys it needs: those of its
// data, and those of the slice of the key space it owns (for the dot products, which each
// owner adds up for its slice alone). One evaluation of the objective is one pass over the
// data and two BSP steps:
//   A. every worker computes, at the trial point it holds, its part of the gradient and of the
//      loss (kStatsApp) and pushes them (the gradient into kGradApp, a SumRule table, as the
//      change from its part of the evaluation before, so the table holds the sum of every
//      worker's newest part and nothing has to be zeroed between passes); at the
//      iterations that report and at least every kModelEvery, owners push the trial point of
//      their slice (kModelApp, Assign rule: the model the servers keep, which the reports,
//      the restarts and the final model read);
//   B. every worker pulls the summed gradient of its keys and pushes its part of the dot
//      products the line search and the new pair need; then it pulls their sums and decides
//      the same way as every other (accept the trial point or shorten the step; the new
//      direction's coefficients), and computes the next trial point of its keys itself.
// Workers that share a key compute its trial point from the same sums in the same order, so
// they agree on it to the bit: no worker needs to pull the model between two evaluations.
// With the step of 1 accepted (the common case once the history holds curvature), an
// iteration costs one pass, where DBPG takes a pass per (much shorter) step.
#include <sched.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <future>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "linear/lbfgs.h"
#include "linear/worker_parts.h"

namespace linear {
namespace {

// Keys of the stats table: per evaluation e, 2e holds [loss, rows] and 2e + 1 the partials.
ps::Key LossKey(int64_t e) { return static_cast<ps::Key>(2 * e); }
ps::Key PartialKey(int64_t e) { return static_cast<ps::Key>(2 * e + 1); }

// OWL-QN's pseudo-gradient of f + l1 |w|_1 at w, per coordinate (g: the smooth part's).
double PseudoGradient(double w, double g, double l1) {
  if (l1 == 0) return g;
  if (w > 0) return g + l1;
  if (w < 0) return g - l1;
  if (g + l1 < 0) return g + l1;
  if (g - l1 > 0) return g - l1;
  return 0;
}

// The key range rank r of W owns (keys are hashed: equal slices hold about equal shares).
ps::Range OwnedRange(int r, int W) {
  const unsigned __int128 span = static_cast<unsigned __int128>(ps::kMaxKey);
  const ps::Key b =
      static_cast<ps::Key>(span * static_cast<unsigned>(r) / static_cast<unsigned>(W));
  const ps::Key e =
      static_cast<ps::Key>(span * static_cast<unsigned>(r + 1) / static_cast<unsigned>(W));
  return ps::Range(b, e);
}

// Runs f(t) for t in [0, n): t = 0 on this thread, the others on threads of their own (joined
// before this returns, also when one throws).
template <typename F>
void ParallelFor(int n, const F& f) {
  std::vector<std::future<void>> rest;
  for (int t = 1; t < n; ++t) rest.push_back(std::async(std::launch::async, [&f, t] { f(t); }));
  f(0);
  for (auto& r : rest) r.get();
}

// [b, e) of chunk t of n equal chunks of [0, size).
std::pair<size_t, size_t> Chunk(size_t size, int t, int n) {
  return {size * static_cast<size_t>(t) / static_cast<size_t>(n),
          size * static_cast<size_t>(t + 1) / static_cast<size_t>(n)};
}

// The threads of a worker's passes: --threads, or the cores this process may run on shared
// among the job's workers on its host (the servers mostly wait while workers compute).
int PassThreads(const ps::Node& node, const Options& o) {
  if (o.threads > 0) return o.threads;
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  const auto nodes = node.nodes();
  std::string host;
  for (const auto& n : nodes) {
    if (n.id == node.id()) host = n.host;
  }
  int here = 0;
  for (const auto& n : nodes) here += n.role == ps::Role::kWorker && n.host == host;
  return std::max(1, std::min(64, cores / std::max(1, here)));
}

// How many nonzeros ahead a pass prefetches the weight and the gradient sum it will touch
// (their addresses are known from the column indices: a gather the hardware cannot guess).
constexpr size_t kPrefetch = 24;

// The data's columns renumbered hottest first (by how many nonzeros hit them, ties in key
// order). A pass reads a weight and adds to a gradient sum at random for every nonzero; in key
// order (keys are hashes) those land anywhere in vectors larger than the caches, in this order
// most of them land in the first few cache lines, since feature counts are skewed. Costs one
// more index per nonzero.
struct HotOrder {
  std::vector<uint32_t> col;     // per nonzero: its column's rank
  std::vector<uint32_t> key_of;  // per rank: the column (its index in data.keys)

  void Build(const Dataset& d) {
    const size_t nk = d.keys.size();
    std::vector<uint32_t> count(nk, 0);
    for (uint32_t c : d.col) ++count[c];
    uint32_t most = 0;
    for (uint32_t n : count) most = std::max(most, n);
    // A counting sort by count, most first: start[most - n] is where count n begins.
    std::vector<size_t> start(static_cast<size_t>(most) + 2, 0);
    for (uint32_t n : count) ++start[most - n + 1];
    for (size_t i = 1; i < start.size(); ++i) start[i] += start[i - 1];
    key_of.resize(nk);
    std::vector<uint32_t> rank(nk);
    for (uint32_t c = 0; c < nk; ++c) {
      const size_t r = start[most - count[c]]++;
      key_of[r] = c;
      rank[c] = static_cast<uint32_t>(r);
    }
    // Padded: a pass prefetches kPrefetch nonzeros ahead of the one it reads.
    col.assign(d.col.size() + kPrefetch, 0);
    for (size_t k = 0; k < d.col.size(); ++k) col[k] = rank[d.col[k]];
  }
};

// The rows cut into at most `threads` runs of about equal nonzeros: run t is [cut[t], cut[t+1]).
std::vector<size_t> RowRuns(const Dataset& data, int threads) {
  const size_t rows = data.rows();
  const int T = static_cast<int>(std::max<size_t>(1, std::min<size_t>(threads, rows)));
  std::vector<size_t> cut(static_cast<size_t>(T) + 1, rows);
  cut[0] = 0;
  const size_t nnz = rows > 0 ? data.row[rows] : 0;  // a worker may hold no rows
  for (int t = 1; t < T; ++t) {
    const size_t want = nnz * static_cast<size_t>(t) / static_cast<size_t>(T);
    cut[t] = std::max(
        cut[t - 1],
        static_cast<size_t>(std::lower_bound(data.row.begin(), data.row.begin() + rows, want) -
                            data.row.begin()));
  }
  return cut;
}

// One pass over the data at the weights hw (by hot rank): the data loss, and the gradient of
// each data key into gp in key order as its change from *prev (this worker's part pushed at
// the evaluation before, kept in *prev for the next: zeros after a fresh start). The gradient
// table then sums the newest part of every worker with no tag per key and no reset: half the
// bytes of [sum, evaluation] pairs each way, and a plain SumRule on the servers, whose rounding
// over the evaluations (about the evaluations times the unit roundoff of the first gradient)
// stays far below what the stopping tests look at. Rows are cut into `threads`
// runs of about equal nonzeros, each adding into a buffer of its own; the buffers are summed in
// run order, so a given thread count gives the same bits every
// time (the column order changes no sum: each still adds its row's terms in row order).
double DataPass(const Dataset& data, const HotOrder& hot, const std::vector<double>& hw,
                int threads, std::vector<std::vector<double>>* buf, std::vector<double>* prev,
                ps::SArray<double>* gp) {
  const size_t nk = data.keys.size();
  const std::vector<size_t> cut = RowRuns(data, threads);
  const int T = static_cast<int>(cut.size()) - 1;
  buf->resize(static_cast<size_t>(T));
  std::vector<double> loss(static_cast<size_t>(T), 0.0);
  const uint32_t* col = hot.col.data();
  const float* val = data.val.data();
  const double* w = hw.data();
  ParallelFor(T, [&](int t) {
    std::vector<double>& gd = (*buf)[t];
    gd.assign(nk, 0.0);
    double l = 0;
    for (size_t i = cut[t]; i < cut[t + 1]; ++i) {
      const size_t b = data.row[i], f = data.row[i + 1];
      const double m = SparseDot<kPrefetch>(col, val, b, f, w);
      l += LogLoss(data.label[i] * m);
      const double c = -data.label[i] * Sigmoid(-data.label[i] * m);
      for (size_t k = b; k < f; ++k) {
        __builtin_prefetch(&gd[col[k + kPrefetch]], 1);
        gd[col[k]] += c * val[k];
      }
    }
    loss[t] = l;
  });
  *gp = ps::SArray<double>(nk);
  double* out = gp->data();
  prev->resize(nk, 0.0);
  double* pv = prev->data();
  ParallelFor(T, [&](int t) {
    const auto r = Chunk(nk, t, T);
    for (size_t h = r.first; h < r.second; ++h) {
      double sum = (*buf)[0][h];
      for (int u = 1; u < T; ++u) sum += (*buf)[u][h];
      const size_t j = hot.key_of[h];
      out[j] = sum - pv[j];
      pv[j] = sum;
    }
  });
  double total = 0;
  for (double l : loss) total += l;
  return total;
}

// (*out)[h] = v[at[h]] for every hot rank h (at: where each rank's key is among the worker's
// keys), on the pass's threads: the vector a pass reads, from one kept in key order.
void ByHotRank(const std::vector<double>& v, const std::vector<size_t>& at, int threads,
               std::vector<double>* out) {
  out->resize(at.size());
  ParallelFor(threads, [&](int c) {
    const auto r = Chunk(at.size(), c, threads);
    for (size_t h = r.first; h < r.second; ++h) (*out)[h] = v[at[h]];
  });
}

// |X u|^2 over this worker's rows, u given by hot rank (runs as in DataPass, summed in order).
double SquaredMargins(const Dataset& data, const HotOrder& hot, const std::vector<double>& hu,
                      int threads) {
  const std::vector<size_t> cut = RowRuns(data, threads);
  const int T = static_cast<int>(cut.size()) - 1;
  std::vector<double> sums(static_cast<size_t>(T), 0.0);
  const uint32_t* col = hot.col.data();
  const float* val = data.val.data();
  const double* u = hu.data();
  ParallelFor(T, [&](int t) {
    double q = 0;
    for (size_t i = cut[t]; i < cut[t + 1]; ++i) {
      const double m = SparseDot<kPrefetch>(col, val, data.row[i], data.row[i + 1], u);
      q += m * m;
    }
    sums[t] = q;
  });
  double total = 0;
  for (double q : sums) total += q;
  return total;
}

// The numbers before the dot products in step B's sums: |x|^2, |x|_1, nonzeros of x,
// v.(x - w) and |v|_1 (v: the (pseudo-)gradient), over the slices; then, at a first point,
// |X v|^2 over the rows (for the first step's length).
constexpr size_t kHead = 6;

// The most iterations between two refreshes of the servers' copy of the model.
constexpr int kModelEvery = 10;

// Values [b, e) of v, to push.
ps::SArray<double> Slice(const std::vector<double>& v, size_t b, size_t e) {
  return ps::SArray<double>(std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(b),
                                                v.begin() + static_cast<std::ptrdiff_t>(e)));
}

// Zeroes the range r of the gradient table. After a worker died the table still holds its
// last part of the gradient (and the survivors' parts of an evaluation left behind): the
// survivors zero their slices, which cover the key space, before they push afresh. x + (-x) is
// exactly 0, and nothing else pushes to r meanwhile (every survivor is between evaluations).
void ZeroGradients(ps::KVWorker<double>* grad, ps::Range r) {
  ps::SArray<ps::Key> keys;
  ps::SArray<double> vals;
  ps::SArray<int> lens;
  grad->Wait(grad->PullRange(r, &keys, &vals, &lens));
  std::vector<ps::Key> zk;
  std::vector<double> zv;
  for (size_t j = 0, at = 0; j < keys.size(); at += static_cast<size_t>(lens[j]), ++j) {
    if (lens[j] != 1) throw ps::Error("--solver lbfgs: a gradient slot holds more than one value");
    if (vals[at] != 0) {
      zk.push_back(keys[j]);
      zv.push_back(-vals[at]);
    }
  }
  if (!zk.empty()) grad->Wait(grad->Push(ps::SArray<ps::Key>(zk), ps::SArray<double>(zv)));
}

}  // namespace

int RunLbfgs(ps::Node* node, const Options& o, Shard* s, ps::KVWorker<double>* kv,
             ps::KVWorker<double>* stats, Reporter* rep) {
  const Team& team = o.team;
  if (node->consistency_policy(team.group) != "bsp") {
    throw ps::Error("--solver lbfgs needs --consistency bsp (not " +
                    node->consistency_policy(team.group) +
                    "): its line search compares objectives of whole evaluations");
  }
  const int W = team.size;
  // The workers that take part (all at the start; the survivors after a death) and the slice
  // this one owns among them.
  std::vector<int> members(W);
  for (int r = 0; r < W; ++r) members[r] = r;
  ps::Range mine = OwnedRange(team.rank, W);
  ps::KVWorker<double> grad(node, kGradApp);
  const double l1 = o.l1, l2 = o.l2;
  VectorFreeLbfgs lb(o.memory);
  // This worker's keys (those of its data and of its slice, sorted) and the slice's among them
  // ([ob, oe): the slice is a key interval).
  ps::SArray<ps::Key> keys, owned;
  size_t ob = 0, oe = 0;
  std::vector<size_t> at_hot;  // per hot rank of a data column: where its key is among keys
  std::vector<double> w, x, g, gx, v, d, vx, sv, yv;
  // Held pairs, oldest first, in float: the history is most of a worker's memory and of the
  // bytes each pass reads (twice: the partials and the direction), and the direction it
  // shapes needs no more digits (the line search takes the objective's own values).
  std::vector<std::vector<float>> hs, hy;
  double f = 0, alpha = 1, v0 = 0, stop_below = 0, total_rows = -1;
  std::string stopped_by;  // why the run ended
  // A first point: at the start, and after a worker died (the survivors start afresh from
  // the model on the servers, with no history: the dead one's slice of it is lost).
  bool fresh = true;
  auto clock = [&] {
    kv->Clock();
    grad.Clock();
    stats->Clock();
  };
  Phases ph;
  // The pass's threads and their gradient buffers (kept: no fresh pages every pass).
  const int threads = PassThreads(*node, o);
  std::vector<std::vector<double>> gbuf;
  std::vector<double> prev;  // this worker's part of the gradient table (DataPass)
  // The data's columns hottest first, and the trial point's weights in that order.
  HotOrder hot;
  std::vector<double> hw;
  std::vector<double> hv;  // v by hot rank, at a first point (the first step's length)
  double positives = 0;    // this worker's rows labelled +1
  int iter = 0;
  const bool reporting = rep && rep->reporting();
  Quality q;
  bool have_q = false;
  // Whether accepting the point makes iteration `iter` print a line.
  auto line_due = [&] {
    return reporting && (iter % o.eval_every == 0 || iter + 1 >= o.iterations);
  };
  // Whether the owners refresh the servers' copy of the model with the trial point of
  // iteration `iter`: at every line (whose test quality reads it), at least every
  // kModelEvery iterations (a restart after a worker's death starts from it; so do the
  // evaluation group's reports), and at the last. Alike on every worker (not on whether it
  // reports), so the table holds one point. Every pass used to push it: a third of the keys
  // the servers took per pass.
  auto model_due = [&] {
    return iter % o.eval_every == 0 || iter % kModelEvery == 0 || iter + 1 >= o.iterations;
  };
  int64_t e = 0;  // evaluations of the objective: one pass over the data each
  for (;; ++e) {
    ++ph.iterations;
    // A: the data pass at the trial point (a first point is the servers' model).
    if (fresh) {
      // The job's first point is w = 0 (the model table starts empty): nothing to pull.
      if (e > 0) ph.Time(Phases::kPull, [&] { PullAll(kv, s); });
      const auto t = Clock::now();
      hot.Build(s->data);
      hw.resize(hot.key_of.size());
      for (size_t r = 0; r < hw.size(); ++r) hw[r] = s->w[hot.key_of[r]];
      positives = 0;
      for (float y : s->data.label) positives += y > 0;
      ph.Since(Phases::kCompute, t);
    }
    const auto t0 = Clock::now();
    // Whether this pass pushes its trial point to the model table; the table holds the trial
    // point once step A is done if it does, or if the point is a first point (the model
    // itself: zero at the start, what a restart pulled).
    const bool push_model = !fresh && model_due();
    const bool model_at_trial = fresh || push_model;
    ps::SArray<double> gp;
    const double loss = DataPass(s->data, hot, hw, threads, &gbuf, &prev, &gp);
    const auto& data = s->data;
    ph.Since(Phases::kCompute, t0);
    ph.Time(Phases::kPush, [&] {
      grad.Push(s->keys, gp);
      stats->Push(ps::SArray<ps::Key>{LossKey(e)},
                  ps::SArray<double>{loss, static_cast<double>(data.rows()), positives});
      // The trial point of this worker's slice, for the servers' copy of the model.
      if (push_model && oe > ob) kv->Push(owned, Slice(x, ob, oe));
    });
    // Step B pulls the gradient and the losses, and a report pulls the model if this pass
    // pushed it: their tables end the step. The model table's steps count its pushes alone
    // (every worker decides alike), and a pass that pushes no model clocks it not.
    ph.Time(Phases::kClock, [&] {
      grad.Clock();
      stats->Clock();
      if (push_model) kv->Clock();
    });

    // B: the summed gradient of this worker's keys, and its slice's part of the dot products.
    ps::SArray<double> gv;
    ps::SArray<double> ls(3);  // loss, rows, positive rows
    ph.Time(Phases::kPull, [&] {
      const int64_t b = stats->Pull(ps::SArray<ps::Key>{LossKey(e)}, &ls);
      if (fresh) {
        // A fresh start learns its slice's keys from a range pull of the gradients (every key
        // some worker's data holds), then takes its data's keys beside them.
        ps::SArray<ps::Key> gk;
        ps::SArray<double> gr;
        ps::SArray<int> gl;
        grad.Wait(grad.PullRange(mine, &gk, &gr, &gl));
        for (size_t j = 0; j < gk.size(); ++j) {
          if (gl[j] != 1) {
            throw ps::Error("--solver lbfgs: a gradient slot holds more than one value");
          }
        }
        std::vector<ps::Key> u;
        u.reserve(gk.size() + s->keys.size());
        std::set_union(gk.begin(), gk.end(), s->keys.begin(), s->keys.end(), std::back_inserter(u));
        keys = ps::SArray<ps::Key>(u);
        ob = static_cast<size_t>(std::lower_bound(u.begin(), u.end(), mine.begin) - u.begin());
        oe = static_cast<size_t>(std::lower_bound(u.begin(), u.end(), mine.end) - u.begin());
        owned = ps::SArray<ps::Key>(std::vector<ps::Key>(u.begin() + ob, u.begin() + oe));
        std::vector<size_t> at_data(s->keys.size());
        for (size_t i = 0, j = 0; i < s->keys.size(); ++i) {
          while (u[j] != s->keys[i]) ++j;
          at_data[i] = j;
        }
        at_hot.resize(hot.key_of.size());
        for (size_t r = 0; r < at_hot.size(); ++r) at_hot[r] = at_data[hot.key_of[r]];
      }
      gv = ps::SArray<double>(keys.size());
      grad.Wait(grad.Pull(keys, &gv));
      stats->Wait(b);
    });
    const auto t1 = Clock::now();
    if (gv.size() != keys.size()) {
      throw ps::Error("--solver lbfgs: the gradient pull returned a width other than 1");
    }
    if (fresh) {
      // The point every worker just evaluated: the model's values of these keys.
      x.assign(keys.size(), 0.0);
      if (e > 0) {
        ps::SArray<double> mv(keys.size());
        ph.Time(Phases::kPull, [&] { kv->Wait(kv->Pull(keys, &mv)); });
        std::copy(mv.begin(), mv.end(), x.begin());
      }
      w = x;
    }
    const size_t nk = keys.size();
    gx.resize(nk);
    vx.resize(nk);
    sv.resize(nk);
    yv.resize(nk);
    // Over the slice: the kHead numbers (each thread adds up those of its run; the runs' sums
    // are added in order), the candidate pair's partials, then a 1 in the slot of this
    // worker's rank: the sums say who took part in this step.
    const size_t np = lb.PartialCount();
    std::vector<double> part(kHead + np + W, 0.0);
    std::vector<std::array<double, kHead>> heads(static_cast<size_t>(threads));
    ParallelFor(threads, [&](int t) {
      const auto r = Chunk(nk, t, threads);
      for (size_t j = r.first; j < r.second; ++j) {
        const double sum = gv[j];
        gx[j] = sum + l2 * x[j];
        vx[j] = PseudoGradient(x[j], gx[j], l1);
        sv[j] = x[j] - w[j];
        yv[j] = fresh ? 0.0 : gx[j] - g[j];
      }
      std::array<double, kHead> h{};
      for (size_t j = std::max(r.first, ob), end = std::min(r.second, oe); j < end; ++j) {
        h[0] += x[j] * x[j];
        h[1] += std::fabs(x[j]);
        h[2] += x[j] != 0;
        if (!fresh) h[3] += v[j] * sv[j];
        h[4] += std::fabs(vx[j]);
      }
      heads[t] = h;
    });
    for (const auto& h : heads) {
      for (size_t k = 0; k < kHead; ++k) part[k] += h[k];
    }
    if (fresh) {
      ByHotRank(vx, at_hot, threads, &hv);
      part[5] = SquaredMargins(s->data, hot, hv, threads);
    }
    part[kHead + np + team.rank] = 1;
    std::vector<std::pair<const float*, const float*>> held;
    for (size_t i = 0; i < hs.size(); ++i) held.emplace_back(hs[i].data() + ob, hy[i].data() + ob);
    {
      // Each thread adds up a run of the slice; the runs' sums are added in order.
      const size_t n = oe - ob;
      const int T = static_cast<int>(std::max<size_t>(1, std::min<size_t>(threads, n / 4096)));
      std::vector<std::vector<double>> sums(static_cast<size_t>(T), std::vector<double>(np, 0.0));
      ParallelFor(T, [&](int t) {
        const auto r = Chunk(n, t, T);
        std::vector<std::pair<const float*, const float*>> at;
        for (const auto& h : held) at.emplace_back(h.first + r.first, h.second + r.first);
        lb.AddPartials(sv.data() + ob + r.first, yv.data() + ob + r.first, vx.data() + ob + r.first,
                       at, r.second - r.first, sums[t].data());
      });
      // part's partials start at 0, so one run's sums come out as they are.
      for (int t = 0; t < T; ++t) {
        for (size_t k = 0; k < np; ++k) part[kHead + k] += sums[t][k];
      }
    }
    ph.Since(Phases::kCompute, t1);
    ph.Time(Phases::kPush,
            [&] { stats->Push(ps::SArray<ps::Key>{PartialKey(e)}, ps::SArray<double>(part)); });
    // The line's test quality at the trial point (reported if it is accepted): the model
    // table has it since step A.
    have_q = false;
    if (line_due() && rep->has_test()) {
      ph.Time(Phases::kReport, [&] { q = rep->TestQuality(kv); });
      have_q = true;
    }
    // Step C pulls the dot products only. No worker pushes to the gradient table again before
    // every worker's step B (and its pull of the gradient) is done: its next push comes after
    // step C's pull, which waits for this clock of every worker.
    ph.Time(Phases::kClock, [&] { stats->Clock(); });

    // The same decision on every worker.
    ps::SArray<double> tot(part.size());
    ph.Time(Phases::kPull,
            [&] { stats->Wait(stats->Pull(ps::SArray<ps::Key>{PartialKey(e)}, &tot)); });
    if (tot.size() != part.size()) throw ps::Error("--solver lbfgs: malformed dot products");
    // Who took part: a worker that died before its step B left its slice (and perhaps part of
    // its gradient) out of these sums, and its rows out of the loss.
    std::vector<int> took;
    for (int r = 0; r < W; ++r) {
      if (tot[kHead + np + r] > 0.5) took.push_back(r);
    }
    if (total_rows < 0) total_rows = ls[1];
    if (took != members || ls[1] < total_rows) {
      // Start afresh among those who took part, from the point on the servers, once every data
      // part is held again (the dead one's return to the scheduler's pool when it is declared
      // dead; until then an evaluation misses rows and this repeats).
      std::cerr << "worker " << team.rank << ": lbfgs restarts without its history (" << took.size()
                << " of " << members.size() << " workers took part, " << ls[1] << " of "
                << total_rows << " rows counted)" << std::endl;
      const auto me_at = std::find(took.begin(), took.end(), team.rank);
      if (me_at == took.end()) {
        throw ps::Error("--solver lbfgs: this worker is not among those that took part");
      }
      members = took;
      const int me = static_cast<int>(me_at - took.begin());
      mine = OwnedRange(me, static_cast<int>(took.size()));
      AdoptParts(node, o, s);
      lb = VectorFreeLbfgs(o.memory);
      hs.clear();
      hy.clear();
      ZeroGradients(&grad, mine);
      prev.clear();
      // The fresh evaluation's pull of the model waits for every survivor's clock, so no
      // survivor pushes its first part before the table is zero everywhere.
      clock();
      fresh = true;
      continue;
    }
    const double fx = ls[0] + l2 / 2 * tot[0] + l1 * tot[1];
    bool accept = fresh;
    if (!fresh) {
      // Armijo's sufficient decrease along the (projected) path.
      accept = fx <= f + 1e-4 * tot[3];
    }
    bool done = false;
    // The decision, the direction and the next trial point are compute too.
    auto t2 = Clock::now();
    if (accept) {
      std::vector<double> p(tot.begin() + kHead, tot.begin() + kHead + np);
      if (fresh) {
        lb.SetGradient(p.back());
      } else if (lb.Accept(p)) {
        // The pair joins the history in the oldest pair's buffers when it leaves (no fresh
        // pages for every pass).
        std::vector<float> ns, ny;
        if (static_cast<int>(hs.size()) >= std::max(1, o.memory)) {
          ns = std::move(hs.front());
          ny = std::move(hy.front());
          hs.erase(hs.begin());
          hy.erase(hy.begin());
        }
        ns.resize(nk);
        ny.resize(nk);
        ParallelFor(threads, [&](int c) {
          const auto r = Chunk(nk, c, threads);
          for (size_t j = r.first; j < r.second; ++j) {
            ns[j] = static_cast<float>(sv[j]);
            ny[j] = static_cast<float>(yv[j]);
          }
        });
        hs.push_back(std::move(ns));
        hy.push_back(std::move(ny));
      }
      const double decrease = fresh ? INFINITY : f - fx;
      // Every one of x, gx and vx is written afresh for the next trial point before it is read.
      std::swap(w, x);
      std::swap(g, gx);
      std::swap(v, vx);
      f = fx;
      if (line_due()) {
        ph.Since(Phases::kCompute, t2);
        ph.Time(Phases::kReport, [&] {
          rep->Line("iteration", iter, ls[0], ls[1], tot[1], tot[0], static_cast<size_t>(tot[2]),
                    have_q ? &q : nullptr, &ph);
        });
        t2 = Clock::now();
      }
      ++iter;
      // Stop at the iteration budget, when the (pseudo-)gradient has shrunk to epsilon of its
      // size at the start, or when a step no longer moves the objective.
      // liblinear's test (its -e): the norm against eps min(pos, neg) / rows of the norm at
      // w = 0; with L1 the 1-norm of the pseudo-gradient (the smallest subgradient).
      const double vnorm = l1 > 0 ? tot[4] : std::sqrt(lb.vv());
      if (e == 0) {
        v0 = vnorm;
        const double pos = ls[2], neg = ls[1] - ls[2];
        stop_below = o.epsilon * std::max(std::min(pos, neg), 1.0) / std::max(ls[1], 1.0) * v0;
      }
      if (vnorm <= stop_below) {
        char why[160];
        std::snprintf(why, sizeof(why), "%s-norm %.6g <= %.6g, liblinear's test",
                      l1 > 0 ? "1" : "2", vnorm, stop_below);
        stopped_by = why;
      }
      if (!fresh && decrease <= 1e-12 * std::fabs(f)) stopped_by = "no decrease";
      if (iter >= o.iterations) stopped_by = "--iterations";
      done = !stopped_by.empty();
      const bool first = fresh;  // the accepted point is a first point
      fresh = false;
      if (!done) {
        const VectorFreeLbfgs::Direction dir = lb.Compute();
        // Pair by pair over all keys (each key's sum in the same order as key by key, so the
        // same bits), which vectorizes where a key's own loop over the pairs did not.
        d.resize(nk);
        ParallelFor(threads, [&](int t) {
          const auto r = Chunk(nk, t, threads);
          for (size_t j = r.first; j < r.second; ++j) d[j] = dir.cv * v[j];
          for (size_t i = 0; i < hs.size(); ++i) {
            const double a = dir.cs[i], b = dir.cy[i];
            const float* si = hs[i].data();
            const float* yi = hy[i].data();
            for (size_t j = r.first; j < r.second; ++j) d[j] += a * si[j] + b * yi[j];
          }
          for (size_t j = r.first; j < r.second; ++j) {
            d[j] = -d[j];
            // OWL-QN: a coordinate moves only where it descends along the pseudo-gradient.
            if (l1 > 0 && d[j] * v[j] >= 0) d[j] = 0;
          }
        });
        // The quasi-Newton step is 1. From a first point, the minimiser of a bound of the
        // objective along -v (lbfgs.h): 1/|v| was about 7 times too long at w = 0 on the spam
        // words and cost three passes of halving. With no pair otherwise (the first pairs
        // failed the curvature condition), a step of 1/|v|.
        alpha = 1.0;
        if (lb.pairs() == 0) {
          alpha = first ? FirstStepLength(lb.vv(), tot[5], l2)
                        : 1.0 / std::max(1e-12, std::sqrt(lb.vv()));
        }
      }
    } else {
      alpha *= 0.5;
      if (alpha < 1e-20) {  // no decrease along the direction: converged
        done = true;
        stopped_by = "no step decreases";
      }
    }
    ph.Since(Phases::kCompute, t2);
    if (done) {
      // The model table holds w (the accepted point) if the last trial was accepted and
      // pushed (or was a first point).
      if (!(accept && model_at_trial) && oe > ob) {
        kv->Wait(kv->Push(owned, Slice(w, ob, oe)));
      }
      ph.Time(Phases::kClock, clock);
      break;
    }
    const auto t3 = Clock::now();
    ParallelFor(threads, [&](int c) {
      const auto r = Chunk(nk, c, threads);
      for (size_t j = r.first; j < r.second; ++j) {
        double t = w[j] + alpha * d[j];
        if (l1 > 0) {
          // The orthant of w (of -v where w is 0): a coordinate that would cross it stops at 0.
          const double xi = w[j] != 0 ? w[j] : -v[j];
          if (t * xi <= 0) t = 0;
        }
        x[j] = t;
      }
    });
    // The next pass reads the trial point of its data's keys from here (s->w is left as the
    // fresh start pulled it: nothing reads it until the next fresh start pulls it again).
    ByHotRank(x, at_hot, threads, &hw);
    ph.Since(Phases::kCompute, t3);
  }
  std::cerr << "worker " << team.rank << ": lbfgs took " << iter << " iterations in " << e + 1
            << " passes over the data (stopped by " << stopped_by << ")" << std::endl;
  return 0;
}

}  // namespace linear
