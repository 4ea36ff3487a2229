// Server-side update rules of the sparse linear app. The objective is
//   F(w) = sum_i log(1 + exp(-y_i w.x_i)) + l1 |w|_1 + l2/2 |w|^2,
// so liblinear's -s 0 with C matches l2 = 1/C and -s 6 with C matches l1 = 1/C.
#ifndef PS_APPS_LINEAR_RULES_H_
#define PS_APPS_LINEAR_RULES_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ps/update_rule.h"

namespace linear {

/// What a progress line needs of the whole model, computed by the servers over the weights a
/// pull would read (KVWorker::Reduce): [sum |w|, sum w^2, nonzeros], so that no line pulls the
/// model.
constexpr int kNormReducer = 1;
class ModelNormReducer : public ps::RangeReducer<double> {
 public:
  int Width() const override { return 3; }
  void Add(ps::Key, const double* w, int n, double* acc) const override {
    for (int i = 0; i < n; ++i) {
      acc[0] += std::fabs(w[i]);
      acc[1] += w[i] * w[i];
      acc[2] += w[i] != 0;
    }
  }
};

/// The proximal step of one coordinate: argmin_x g (x - w) + h/2 (x - w)^2 + l1 |x| + l2/2 x^2,
/// that is soft-thresholding of h w - g by l1, scaled by 1 / (h + l2).
inline double ProxStep(double w, double g, double h, double l1, double l2) {
  const double z = h * w - g;
  const double a = std::fabs(z) - l1;
  return a > 0 ? std::copysign(a, z) / (h + l2) : 0.0;
}

/// Delayed block proximal gradient, the server's half (the Parameter Server paper, section 5.1).
/// Workers push, per key of the block, [g, u, tag]: their part of the gradient, of the diagonal
/// bound of the Hessian, and the iteration t + 1 (negated on the last iteration). The slot keeps
/// [y, sum of g, sum of u] and, as state, the tag of the sums, w and the key's momentum count
/// k. The proximal step w' = prox(y - g / h) with h = u / eta is taken with an iteration's sums
/// when a push of a later iteration first touches the key; then y' = w' + beta (w' - w),
/// Nesterov's extrapolation with beta = (k - 1) / (k + 2), restarted per key when the gradient
/// opposes the move (0 without momentum, and on the last iteration, so that the model ends
/// at w). Pulls return y (ReadWidth 1), the point the next gradient is taken at;
/// under BSP every worker reads the step of the complete sums.
template <typename V>
class DbpgRule : public ps::UpdateRule<V> {
 public:
  DbpgRule(double eta, double l1, double l2, bool momentum = true)
      : eta_(eta), l1_(l1), l2_(l2), momentum_(momentum) {}
  int StateWidth() const override { return 2; }  // [tag, w, k, last curvature sum, -, -]
  int ReadWidth(int n) const override { return n == 3 ? 1 : n; }
  void Apply(ps::Key, const V* p, V* v, V* s, int n) const override {
    if (n != 3) return;  // not a DBPG push: nothing sensible to do with it
    // A push of a later iteration closes the sums; a late one (bounded delay: a worker up to
    // tau iterations behind) joins the open sums as a delayed gradient.
    const double tag = std::fabs(static_cast<double>(p[2])),
                 open = std::fabs(static_cast<double>(s[0]));
    if (tag > open) {
      if (v[2] > 0) Commit(v, s);
      v[1] = v[2] = 0;
      s[0] = p[2];
    }
    // A late push (its worker behind by up to the delay) joins the open sums: a delayed
    // gradient, which the workers' shorter steps under a delay keep stable.
    v[1] += p[0];
    v[2] += p[1];
  }
  void Read(ps::Key k, const V* v, const V* s, V* out, int n) const override {
    ReadAt(k, v, s, out, n, INT64_MAX);
  }
  // A pull of step t reads the state after iterations < t: the pending sums are stepped only
  // when they belong to such an iteration (their tag, iteration + 1, is at most t). Sums of
  // iteration t itself may be partial.
  void ReadAt(ps::Key, const V* v, const V* s, V* out, int n, int64_t step) const override {
    if (n != 3) {
      for (int i = 0; i < n; ++i) out[i] = v[i];
      return;
    }
    if (v[2] > 0 && std::fabs(static_cast<double>(s[0])) <= static_cast<double>(step)) {
      V tmp[3] = {v[0], v[1], v[2]}, st[6] = {s[0], s[1], s[2], s[3], s[4], s[5]};
      Commit(tmp, st);
      out[0] = tmp[0];
    } else {
      out[0] = v[0];
    }
  }

 private:
  // s[1] = w, s[2] = k, the steps since the key's momentum last restarted.
  void Commit(V* v, V* s) const {
    // Under a delay the sums may hold fewer workers' parts than the last ones: the curvature
    // of the last step keeps the step from growing with the missing parts.
    const double h = std::max(static_cast<double>(v[2]), static_cast<double>(s[3]));
    // A slowly decaying memory of the key's curvature: partial sums in a row cannot walk it
    // down, and a curvature that truly falls is followed within a few steps.
    s[3] = static_cast<V>(std::max(static_cast<double>(v[2]), 0.5 * static_cast<double>(s[3])));
    const double w = ProxStep(v[0], v[1], h / eta_, l1_, l2_);
    // Restart (O'Donoghue and Candes, per coordinate): when the gradient at y points against
    // the last move, the momentum is carrying the key uphill.
    double k = s[2] + 1;
    if (v[1] * (w - s[1]) > 0) k = 1;
    const double beta = momentum_ && s[0] > 0 ? (k - 1) / (k + 2) : 0.0;
    v[0] = static_cast<V>(w + beta * (w - s[1]));
    s[1] = static_cast<V>(w);
    s[2] = static_cast<V>(k);
  }
  double eta_, l1_, l2_;
  bool momentum_;
};

/// FTRL-proximal (McMahan et al., KDD 2013), per coordinate: workers push gradients; the slot
/// keeps the weight, state z and n. w = 0 when |z| <= l1, else
/// -(z - sign(z) l1) / ((beta + sqrt(n)) / alpha + l2).
template <typename V>
class FtrlRule : public ps::UpdateRule<V> {
 public:
  FtrlRule(double alpha, double beta, double l1, double l2)
      : alpha_(alpha), beta_(beta), l1_(l1), l2_(l2) {}
  int StateWidth() const override { return 2; }
  void Apply(ps::Key, const V* g, V* w, V* s, int n) const override {
    for (int i = 0; i < n; ++i) {
      double z = s[2 * i], q = s[2 * i + 1];
      const double gi = g[i];
      const double sigma = (std::sqrt(q + gi * gi) - std::sqrt(q)) / alpha_;
      z += gi - sigma * w[i];
      q += gi * gi;
      s[2 * i] = static_cast<V>(z);
      s[2 * i + 1] = static_cast<V>(q);
      w[i] = std::fabs(z) <= l1_ ? V(0)
                                 : static_cast<V>(-(z - std::copysign(l1_, z)) /
                                                  ((beta_ + std::sqrt(q)) / alpha_ + l2_));
    }
  }

 private:
  double alpha_, beta_, l1_, l2_;
};

}  // namespace linear

#endif  // PS_APPS_LINEAR_RULES_H_
