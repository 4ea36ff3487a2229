#include "linear/lbfgs.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace linear {
template <typename H>
void VectorFreeLbfgs::AddPartials(const double* s, const double* y, const double* v,
                                  const std::vector<std::pair<const H*, const H*>>& held, size_t n,
                                  double* out) const {
  // One pass over the keys, in chunks that stay in the L1 cache while every held pair meets
  // them, instead of a pass per dot product: each of the 6m + 6 sums is a dependent chain of n
  // additions, and six chains interleaved keep the adder busy where one chain waited on each
  // addition's latency (and every vector is read once). Each sum still adds its terms in key
  // order, so the partials are bit for bit those of one Dot per product.
  constexpr size_t kChunk = 512;
  const size_t m = held.size();
  std::vector<double> acc(6 * m + 6, 0.0);
  for (size_t b = 0; b < n; b += kChunk) {
    const size_t e = std::min(n, b + kChunk);
    size_t i = 0;
    // Two pairs at a time: twelve chains keep both adders busy.
    for (; i + 2 <= m; i += 2) {
      const H *hs = held[i].first, *hy = held[i].second;
      const H *gs = held[i + 1].first, *gy = held[i + 1].second;
      double* a = &acc[6 * i];
      double a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], a5 = a[5];
      double b0 = a[6], b1 = a[7], b2 = a[8], b3 = a[9], b4 = a[10], b5 = a[11];
      for (size_t j = b; j < e; ++j) {
        const double sj = s[j], yj = y[j], vj = v[j];
        a0 += sj * hs[j];
        a1 += sj * hy[j];
        a2 += yj * hs[j];
        a3 += yj * hy[j];
        a4 += vj * hs[j];
        a5 += vj * hy[j];
        b0 += sj * gs[j];
        b1 += sj * gy[j];
        b2 += yj * gs[j];
        b3 += yj * gy[j];
        b4 += vj * gs[j];
        b5 += vj * gy[j];
      }
      a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3, a[4] = a4, a[5] = a5;
      a[6] = b0, a[7] = b1, a[8] = b2, a[9] = b3, a[10] = b4, a[11] = b5;
    }
    for (; i < m; ++i) {
      const H* hs = held[i].first;
      const H* hy = held[i].second;
      double* a = &acc[6 * i];
      double a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], a5 = a[5];
      for (size_t j = b; j < e; ++j) {
        a0 += s[j] * hs[j];
        a1 += s[j] * hy[j];
        a2 += y[j] * hs[j];
        a3 += y[j] * hy[j];
        a4 += v[j] * hs[j];
        a5 += v[j] * hy[j];
      }
      a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3, a[4] = a4, a[5] = a5;
    }
    double* a = &acc[6 * m];
    double a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], a5 = a[5];
    for (size_t j = b; j < e; ++j) {
      a0 += s[j] * s[j];
      a1 += s[j] * y[j];
      a2 += y[j] * y[j];
      a3 += v[j] * s[j];
      a4 += v[j] * y[j];
      a5 += v[j] * v[j];
    }
    a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3, a[4] = a4, a[5] = a5;
  }
  for (size_t k = 0; k < acc.size(); ++k) out[k] += acc[k];
}

template void VectorFreeLbfgs::AddPartials<double>(
    const double*, const double*, const double*,
    const std::vector<std::pair<const double*, const double*>>&, size_t, double*) const;
template void VectorFreeLbfgs::AddPartials<float>(
    const double*, const double*, const double*,
    const std::vector<std::pair<const float*, const float*>>&, size_t, double*) const;

bool VectorFreeLbfgs::Accept(const std::vector<double>& p) {
  const int m = pairs();
  const size_t last = 6 * static_cast<size_t>(m);
  const double ss = p[last], sy = p[last + 1], yy = p[last + 2];
  const double vs = p[last + 3], vy = p[last + 4];
  vv_ = p[last + 5];
  // v's dots with the pairs held so far, then with the new pair if it stays.
  std::vector<double> nvs(m), nvy(m);
  for (int i = 0; i < m; ++i) {
    nvs[i] = p[6 * i + 4];
    nvy[i] = p[6 * i + 5];
  }
  // The curvature condition: a pair with s.y <= 0 would make the implied Hessian indefinite.
  const bool keep = sy > 1e-12 * ss && sy > 0;
  if (keep) {
    for (int i = 0; i < m; ++i) {
      ss_[i].push_back(p[6 * i]);      // s_i.s
      sy_[i].push_back(p[6 * i + 2]);  // s_i.y = y.s_i
      yy_[i].push_back(p[6 * i + 3]);  // y_i.y
    }
    std::vector<double> srow(m + 1), syrow(m + 1), yyrow(m + 1);
    for (int i = 0; i < m; ++i) {
      srow[i] = p[6 * i];       // s.s_i
      syrow[i] = p[6 * i + 1];  // s.y_i
      yyrow[i] = p[6 * i + 3];  // y.y_i
    }
    srow[m] = ss;
    syrow[m] = sy;
    yyrow[m] = yy;
    ss_.push_back(srow);
    sy_.push_back(syrow);
    yy_.push_back(yyrow);
    nvs.push_back(vs);
    nvy.push_back(vy);
    if (pairs() > memory_) {
      ss_.erase(ss_.begin());
      sy_.erase(sy_.begin());
      yy_.erase(yy_.begin());
      for (auto* mat : {&ss_, &sy_, &yy_}) {
        for (auto& row : *mat) row.erase(row.begin());
      }
      nvs.erase(nvs.begin());
      nvy.erase(nvy.begin());
    }
  }
  vs_ = std::move(nvs);
  vy_ = std::move(nvy);
  return keep;
}

VectorFreeLbfgs::Direction VectorFreeLbfgs::Compute() const {
  const int m = pairs();
  Direction d;
  d.cs.assign(m, 0.0);
  d.cy.assign(m, 0.0);
  d.cv = 1;
  if (m == 0) return d;
  // q = v; for i newest to oldest: a_i = rho_i s_i.q, q -= a_i y_i. Every dot product is a
  // combination of the held dots: s_i.q = sum_j cs_j s_i.s_j + cy_j s_i.y_j + cv s_i.v.
  auto s_dot = [&](int i) {
    double r = d.cv * vs_[i];
    for (int j = 0; j < m; ++j) r += d.cs[j] * ss_[i][j] + d.cy[j] * sy_[i][j];
    return r;
  };
  auto y_dot = [&](int i) {
    double r = d.cv * vy_[i];
    for (int j = 0; j < m; ++j) r += d.cs[j] * sy_[j][i] + d.cy[j] * yy_[i][j];
    return r;
  };
  std::vector<double> a(m), rho(m);
  for (int i = 0; i < m; ++i) rho[i] = 1.0 / sy_[i][i];
  for (int i = m - 1; i >= 0; --i) {
    a[i] = rho[i] * s_dot(i);
    d.cy[i] -= a[i];
  }
  // H0 = gamma I with gamma = s.y / y.y of the newest pair.
  const double gamma = sy_[m - 1][m - 1] / yy_[m - 1][m - 1];
  for (auto& c : d.cs) c *= gamma;
  for (auto& c : d.cy) c *= gamma;
  d.cv *= gamma;
  for (int i = 0; i < m; ++i) {
    const double b = rho[i] * y_dot(i);
    d.cs[i] += a[i] - b;
  }
  return d;
}

double VectorFreeLbfgs::VDotD(const Direction& d) const {
  double r = d.cv * vv_;
  for (int j = 0; j < pairs(); ++j) r += d.cs[j] * vs_[j] + d.cy[j] * vy_[j];
  return -r;
}

double FirstStepLength(double vv, double xv2, double l2) {
  const double curve = xv2 / 4 + l2 * vv;
  return curve > 0 ? vv / curve : 1.0 / std::max(1e-12, std::sqrt(vv));
}

}  // namespace linear
