// The limited-memory quasi-Newton solver of the linear app: L-BFGS for L2 and OWL-QN (Andrew
// and Gao, ICML 2007) under L1, with the model on the servers and the quasi-Newton history
// on the workers, each owning a slice of the key space (lbfgs.h). One evaluation of the
// objective is one pass over the data and three BSP steps:
//   A. every worker pulls the trial point's weights of its data, pushes its part of the
//      gradient (kGradApp, tagged with the evaluation) and of the loss (kStatsApp);
//   B. every owner pulls the summed gradient of its keys and pushes its part of the dot
//      products the line search and the new pair need;
//   C. every worker pulls the summed dot products and decides the same way (accept the trial
//      point or shorten the step; the new direction's coefficients); owners push the next
//      trial point of their keys (kModelApp, Assign rule).
// With the step of 1 accepted (the common case once the history holds curvature), an
// iteration costs one pass, where DBPG takes a pass per (much shorter) step.
#include <algorithm>
#include <cmath>
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
  // This worker's keys (those of the data in its slice) and their vectors.
  ps::SArray<ps::Key> keys;
  std::vector<double> w, x, g, gx, v, d;
  std::vector<std::vector<double>> hs, hy;  // held pairs, oldest first
  double f = 0, alpha = 1, v0 = 0, total_rows = -1;
  // A first point: at the start, and after a worker died (the survivors start afresh from
  // the model on the servers, with no history: the dead one's slice of it is lost).
  bool fresh = true;
  auto clock = [&] {
    kv->Clock();
    grad.Clock();
    stats->Clock();
  };
  Phases ph;
  std::vector<double> margin;
  int iter = 0;
  const bool reporting = rep && rep->reporting();
  Quality q;
  bool have_q = false;
  // Whether accepting the point makes iteration `iter` print a line.
  auto line_due = [&] {
    return reporting && (iter % o.eval_every == 0 || iter + 1 >= o.iterations);
  };
  int64_t e = 0;  // evaluations of the objective: one pass over the data each
  for (;; ++e) {
    ++ph.iterations;
    // A: the data pass at the trial point.
    ph.Time(Phases::kPull, [&] { PullAll(kv, s); });
    const auto t0 = Clock::now();
    const double loss = s->Margins(&margin);
    std::vector<double> gd(s->data.keys.size(), 0.0);
    const auto& data = s->data;
    for (size_t i = 0; i < data.rows(); ++i) {
      const double c = -data.label[i] * Sigmoid(-data.label[i] * margin[i]);
      for (size_t k = data.row[i]; k < data.row[i + 1]; ++k) gd[data.col[k]] += c * data.val[k];
    }
    ps::SArray<double> gp(2 * gd.size());
    for (size_t j = 0; j < gd.size(); ++j) {
      gp[2 * j] = gd[j];
      gp[2 * j + 1] = static_cast<double>(e);
    }
    ph.Since(Phases::kCompute, t0);
    ph.Time(Phases::kPush, [&] {
      grad.Push(s->keys, gp);
      stats->Push(ps::SArray<ps::Key>{LossKey(e)},
                  ps::SArray<double>{loss, static_cast<double>(data.rows())});
    });
    ph.Time(Phases::kClock, clock);

    // B: this worker's slice of the summed gradient, and its part of the dot products.
    ps::SArray<ps::Key> gk;
    ps::SArray<double> gv;
    ps::SArray<int> gl;
    ps::SArray<double> ls(2);
    ph.Time(Phases::kPull, [&] {
      // A fresh start learns the slice's keys from a range pull; later passes pull those keys
      // (two values each: no keys or lengths come back).
      int64_t a;
      if (fresh) {
        a = grad.PullRange(mine, &gk, &gv, &gl);
      } else {
        gv = ps::SArray<double>(2 * keys.size());
        a = grad.Pull(keys, &gv);
      }
      const int64_t b = stats->Pull(ps::SArray<ps::Key>{LossKey(e)}, &ls);
      grad.Wait(a);
      stats->Wait(b);
    });
    const auto t1 = Clock::now();
    if (fresh) {
      for (size_t j = 0; j < gk.size(); ++j) {
        if (gl[j] != 2) throw ps::Error("--solver lbfgs: a gradient slot is not [sum, evaluation]");
      }
      keys = gk;
      x.assign(keys.size(), 0.0);
      if (e > 0) {
        // The point every worker just evaluated: the model's values of this slice.
        ps::SArray<ps::Key> mk;
        ps::SArray<double> mv;
        ps::SArray<int> ml;
        ph.Time(Phases::kPull, [&] { kv->Wait(kv->PullRange(mine, &mk, &mv, &ml)); });
        for (size_t i = 0, j = 0; i < mk.size(); ++i) {
          while (j < keys.size() && keys[j] < mk[i]) ++j;
          if (j < keys.size() && keys[j] == mk[i] && ml[i] == 1) x[j] = mv[i];
        }
      }
      w = x;
    } else if (gv.size() != 2 * keys.size()) {
      throw ps::Error("--solver lbfgs: the gradient pull returned a width other than 2");
    }
    gx.assign(keys.size(), 0.0);
    for (size_t j = 0; j < keys.size(); ++j) {
      // A key no worker pushed at this evaluation has no data gradient here.
      const double sum = gv[2 * j + 1] == static_cast<double>(e) ? gv[2 * j] : 0.0;
      gx[j] = sum + l2 * x[j];
    }
    std::vector<double> vx(keys.size()), sv(keys.size()), yv(keys.size());
    for (size_t j = 0; j < keys.size(); ++j) {
      vx[j] = PseudoGradient(x[j], gx[j], l1);
      sv[j] = x[j] - w[j];
      yv[j] = fresh ? 0.0 : gx[j] - g[j];
    }
    // [|x|^2, |x|_1, nonzeros, v.(x - w)], the candidate pair's partials, then a 1 in the
    // slot of this worker's rank: the sums say who took part in this step.
    const size_t np = lb.PartialCount();
    std::vector<double> part(4 + np + W, 0.0);
    for (size_t j = 0; j < keys.size(); ++j) {
      part[0] += x[j] * x[j];
      part[1] += std::fabs(x[j]);
      part[2] += x[j] != 0;
      if (!fresh) part[3] += v[j] * sv[j];
    }
    part[4 + np + team.rank] = 1;
    std::vector<std::pair<const double*, const double*>> held;
    for (size_t i = 0; i < hs.size(); ++i) held.emplace_back(hs[i].data(), hy[i].data());
    lb.AddPartials(sv.data(), yv.data(), vx.data(), held, keys.size(), part.data() + 4);
    ph.Since(Phases::kCompute, t1);
    ph.Time(Phases::kPush,
            [&] { stats->Push(ps::SArray<ps::Key>{PartialKey(e)}, ps::SArray<double>(part)); });
    // The line's test quality at the trial point (reported if it is accepted): the model
    // table holds it until step C, which waits for this step.
    have_q = false;
    if (line_due() && rep->has_test()) {
      ph.Time(Phases::kReport, [&] { q = rep->TestQuality(kv); });
      have_q = true;
    }
    ph.Time(Phases::kClock, clock);

    // C: the same decision on every worker.
    ps::SArray<double> tot(part.size());
    ph.Time(Phases::kPull,
            [&] { stats->Wait(stats->Pull(ps::SArray<ps::Key>{PartialKey(e)}, &tot)); });
    if (tot.size() != part.size()) throw ps::Error("--solver lbfgs: malformed dot products");
    // Who took part: a worker that died before its step B left its slice (and perhaps part of
    // its gradient) out of these sums, and its rows out of the loss.
    std::vector<int> took;
    for (int r = 0; r < W; ++r) {
      if (tot[4 + np + r] > 0.5) took.push_back(r);
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
      fresh = true;
      ph.Time(Phases::kClock, clock);
      continue;
    }
    const double fx = ls[0] + l2 / 2 * tot[0] + l1 * tot[1];
    bool accept = fresh;
    if (!fresh) {
      // Armijo's sufficient decrease along the (projected) path.
      accept = fx <= f + 1e-4 * tot[3];
    }
    bool done = false;
    if (accept) {
      std::vector<double> p(tot.begin() + 4, tot.begin() + 4 + np);
      if (fresh) {
        lb.SetGradient(p.back());
      } else if (lb.Accept(p)) {
        hs.push_back(sv);
        hy.push_back(yv);
        if (static_cast<int>(hs.size()) > o.memory) {
          hs.erase(hs.begin());
          hy.erase(hy.begin());
        }
      }
      const double decrease = fresh ? INFINITY : f - fx;
      w = x;
      g = gx;
      v = vx;
      f = fx;
      if (line_due()) {
        ph.Time(Phases::kReport, [&] {
          rep->Line("iteration", iter, ls[0], ls[1], tot[1], tot[0], static_cast<size_t>(tot[2]),
                    have_q ? &q : nullptr, &ph);
        });
      }
      ++iter;
      // Stop at the iteration budget, when the (pseudo-)gradient has shrunk to epsilon of its
      // size at the start, or when a step no longer moves the objective.
      const double vnorm = std::sqrt(lb.vv());
      if (e == 0) v0 = vnorm;
      done = iter >= o.iterations || vnorm <= o.epsilon * v0 ||
             (!fresh && decrease <= 1e-12 * std::fabs(f));
      fresh = false;
      if (!done) {
        const VectorFreeLbfgs::Direction dir = lb.Compute();
        // Pair by pair over all keys (each key's sum in the same order as key by key, so the
        // same bits), which vectorizes where a key's own loop over the pairs did not.
        const size_t nk = keys.size();
        d.resize(nk);
        for (size_t j = 0; j < nk; ++j) d[j] = dir.cv * v[j];
        for (size_t i = 0; i < hs.size(); ++i) {
          const double a = dir.cs[i], b = dir.cy[i];
          const double* si = hs[i].data();
          const double* yi = hy[i].data();
          for (size_t j = 0; j < nk; ++j) d[j] += a * si[j] + b * yi[j];
        }
        for (size_t j = 0; j < nk; ++j) {
          d[j] = -d[j];
          // OWL-QN: a coordinate moves only where it descends along the pseudo-gradient.
          if (l1 > 0 && d[j] * v[j] >= 0) d[j] = 0;
        }
        // The first step is scaled to the gradient's size; later the quasi-Newton step is 1.
        alpha = lb.pairs() == 0 ? 1.0 / std::max(1e-12, std::sqrt(lb.vv())) : 1.0;
      }
    } else {
      alpha *= 0.5;
      if (alpha < 1e-20) done = true;  // no decrease along the direction: converged
    }
    if (done) {
      // The model table holds w (the accepted point) unless the last trial was refused.
      if (!accept) {
        ps::SArray<double> pv(w);
        kv->Wait(kv->Push(keys, pv));
      }
      ph.Time(Phases::kClock, clock);
      break;
    }
    for (size_t j = 0; j < keys.size(); ++j) {
      double t = w[j] + alpha * d[j];
      if (l1 > 0) {
        // The orthant of w (of -v where w is 0): a coordinate that would cross it stops at 0.
        const double xi = w[j] != 0 ? w[j] : -v[j];
        if (t * xi <= 0) t = 0;
      }
      x[j] = t;
    }
    if (!keys.empty()) {
      ps::SArray<double> pv(x);
      ph.Time(Phases::kPush, [&] { kv->Push(keys, pv); });
    }
    ph.Time(Phases::kClock, clock);
  }
  std::cerr << "worker " << team.rank << ": lbfgs took " << iter << " iterations in " << e + 1
            << " passes over the data" << std::endl;
  return 0;
}

}  // namespace linear
