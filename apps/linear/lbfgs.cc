#include "linear/lbfgs.h"

#include <utility>
#include <vector>

namespace linear {
namespace {

double Dot(const double* a, const double* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

void VectorFreeLbfgs::AddPartials(const double* s, const double* y, const double* v,
                                  const std::vector<std::pair<const double*, const double*>>& held,
                                  size_t n, double* out) const {
  size_t k = 0;
  for (const auto& h : held) {
    out[k++] += Dot(s, h.first, n);
    out[k++] += Dot(s, h.second, n);
    out[k++] += Dot(y, h.first, n);
    out[k++] += Dot(y, h.second, n);
    out[k++] += Dot(v, h.first, n);
    out[k++] += Dot(v, h.second, n);
  }
  out[k++] += Dot(s, s, n);
  out[k++] += Dot(s, y, n);
  out[k++] += Dot(y, y, n);
  out[k++] += Dot(v, s, n);
  out[k++] += Dot(v, y, n);
  out[k++] += Dot(v, v, n);
}

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

}  // namespace linear
