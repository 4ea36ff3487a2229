#include "lda/reference.h"

#include <cmath>

namespace lda {

ReferenceGibbs::ReferenceGibbs(const Corpus& c, const Hyper& h, uint64_t seed)
    : c_(c), h_(h), rng_(seed) {
  const uint32_t K = h.topics;
  z_.resize(c.tokens());
  nwt_.assign(static_cast<size_t>(h.words) * K, 0);
  ndt_.assign(c.docs() * K, 0);
  nt_.assign(K, 0);
  p_.resize(K);
  for (size_t d = 0; d < c.docs(); ++d) {
    for (uint64_t i = c.offsets[d]; i < c.offsets[d + 1]; ++i) {
      const uint32_t t = rng_.Below(K);
      z_[i] = t;
      nwt_[static_cast<size_t>(c.words[i]) * K + t]++;
      ndt_[d * K + t]++;
      nt_[t]++;
    }
  }
}

void ReferenceGibbs::Pass() {
  const uint32_t K = h_.topics;
  const double vb = h_.words * h_.beta;
  for (size_t d = 0; d < c_.docs(); ++d) {
    int32_t* nd = &ndt_[d * K];
    for (uint64_t i = c_.offsets[d]; i < c_.offsets[d + 1]; ++i) {
      int32_t* nw = &nwt_[static_cast<size_t>(c_.words[i]) * K];
      const uint32_t s = z_[i];
      nd[s]--;
      nw[s]--;
      nt_[s]--;
      double sum = 0;
      for (uint32_t t = 0; t < K; ++t) {
        sum += (nd[t] + h_.alpha) * (nw[t] + h_.beta) / (static_cast<double>(nt_[t]) + vb);
        p_[t] = sum;
      }
      const double u = rng_.Uniform() * sum;
      uint32_t t = 0;
      while (t + 1 < K && p_[t] <= u) ++t;
      z_[i] = t;
      nd[t]++;
      nw[t]++;
      nt_[t]++;
    }
  }
}

double ReferenceGibbs::LogLikelihoodPerToken() const {
  const uint32_t K = h_.topics;
  const double a = h_.alpha, b = h_.beta, vb = h_.words * b;
  double ll = 0;
  for (size_t d = 0; d < c_.docs(); ++d) {
    ll += std::lgamma(K * a) - std::lgamma(static_cast<double>(c_.length(d)) + K * a);
    for (uint32_t t = 0; t < K; ++t) {
      if (ndt_[d * K + t]) ll += std::lgamma(ndt_[d * K + t] + a) - std::lgamma(a);
    }
  }
  for (size_t i = 0; i < nwt_.size(); ++i) {
    if (nwt_[i]) ll += std::lgamma(nwt_[i] + b) - std::lgamma(b);
  }
  for (uint32_t t = 0; t < K; ++t)
    ll += std::lgamma(vb) - std::lgamma(static_cast<double>(nt_[t]) + vb);
  return c_.tokens() ? ll / static_cast<double>(c_.tokens()) : 0;
}

std::vector<float> ReferenceGibbs::Phi() const {
  const uint32_t K = h_.topics, V = h_.words;
  std::vector<float> phi(static_cast<size_t>(K) * V);
  for (uint32_t t = 0; t < K; ++t) {
    for (uint32_t w = 0; w < V; ++w) {
      phi[static_cast<size_t>(t) * V + w] =
          static_cast<float>((nwt_[static_cast<size_t>(w) * K + t] + h_.beta) /
                             (static_cast<double>(nt_[t]) + V * h_.beta));
    }
  }
  return phi;
}

}  // namespace lda
