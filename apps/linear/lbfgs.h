// Vector-free L-BFGS (Chen, Wang and Zhang, "Large-scale L-BFGS using MapReduce", NIPS 2014):
// the two-loop recursion run on the dot products of the base vectors (the m newest pairs s_i,
// y_i and the gradient) instead of on the vectors. The vectors live cut by key range on the
// workers that own the ranges; each owner adds up its part of the dot products a new pair
// needs, one exchange sums them, and every worker runs this recursion on the same numbers, so
// all agree on the direction's coefficients: d = -(sum_i cs_i s_i + sum_i cy_i y_i + cv v).
// Pure: no I/O; apps/linear/lbfgs_solver.cc does the exchanges.
#ifndef PS_APPS_LINEAR_LBFGS_H_
#define PS_APPS_LINEAR_LBFGS_H_

#include <cstddef>
#include <vector>

namespace linear {

class VectorFreeLbfgs {
 public:
  explicit VectorFreeLbfgs(int memory) : memory_(memory < 1 ? 1 : memory) {}

  /// Pairs held now (at most the memory).
  int pairs() const { return static_cast<int>(ss_.size()); }

  /// How many partial dot products a candidate pair (s, y) with the gradient v at its new
  /// point needs, given pairs() pairs held: for each held pair i (oldest first) s.s_i, s.y_i,
  /// y.s_i, y.y_i, v.s_i, v.y_i; then s.s, s.y, y.y, v.s, v.y, v.v.
  size_t PartialCount() const { return 6 * static_cast<size_t>(pairs()) + 6; }

  /// The partial dot products of a candidate, in PartialCount()'s order, from one owner's
  /// part of the vectors (n values each; held[i] = {s_i, y_i}, oldest first, as double or
  /// float: the solver keeps the history in float). Added up over the owners, they are what
  /// Accept takes.
  template <typename H>
  void AddPartials(const double* s, const double* y, const double* v,
                   const std::vector<std::pair<const H*, const H*>>& held, size_t n,
                   double* out) const;

  /// Takes the candidate pair (its summed partials): the oldest pair leaves when the memory is
  /// full. A pair whose s.y is not positive (the curvature condition fails) is not kept, but v
  /// becomes the gradient all the same. Returns whether the pair was kept.
  bool Accept(const std::vector<double>& partials);
  /// Sets the gradient alone (the first point: no pair yet), from v.v.
  void SetGradient(double vv) { vv_ = vv; }

  /// The direction's coefficients: d = -(sum_i cs[i] s_i + sum_i cy[i] y_i + cv v), i over the
  /// held pairs oldest first. With no pair, d = -v.
  struct Direction {
    std::vector<double> cs, cy;
    double cv = 1;
  };
  Direction Compute() const;
  /// v.v of the current gradient.
  double vv() const { return vv_; }
  /// v.d for the direction's coefficients (the directional derivative at the current point).
  double VDotD(const Direction& d) const;

 private:
  int memory_;
  // Dots among the held pairs (row-major, oldest first) and with the current gradient v.
  std::vector<std::vector<double>> ss_, sy_, yy_;  // ss_[i][j] = s_i.s_j, sy_[i][j] = s_i.y_j
  std::vector<double> vs_, vy_;
  double vv_ = 0;
};

/// The length a of the first step w - a v from a first point (v: the (pseudo-)gradient at w,
/// vv = v.v, xv2 = |X v|^2 over every row): the minimiser of the bound
///   F(w - a v) <= F(w) - a vv + a^2/2 (xv2 / 4 + l2 vv)
/// (the logistic loss curves by at most 1/4 along any direction; the l1 term is linear while
/// no coordinate crosses zero, as none does from w = 0). So the step passes Armijo's test at
/// once; at w = 0, where every row's curvature is exactly 1/4, it is the exact minimiser along
/// -v of the loss's quadratic model. Without curvature (v = 0 on the data), 1/|v|.
double FirstStepLength(double vv, double xv2, double l2);

}  // namespace linear

#endif  // PS_APPS_LINEAR_LBFGS_H_
