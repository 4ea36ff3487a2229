#include "linear/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace linear {

double LogLoss(double z) { return z > 0 ? std::log1p(std::exp(-z)) : -z + std::log1p(std::exp(z)); }

double Sigmoid(double z) {
  if (z >= 0) return 1 / (1 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1 + e);
}

Quality Evaluate(const std::vector<float>& labels, const std::vector<double>& margins) {
  Quality q;
  const size_t n = labels.size();
  if (n == 0) return q;
  size_t right = 0;
  for (size_t i = 0; i < n; ++i) {
    q.logloss += LogLoss(labels[i] * margins[i]);
    right += (margins[i] > 0) == (labels[i] > 0);
  }
  q.logloss /= static_cast<double>(n);
  q.accuracy = static_cast<double>(right) / static_cast<double>(n);
  // AUC by ranks (Mann-Whitney), with tied margins sharing their average rank.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return margins[a] < margins[b]; });
  double pos = 0, rank_sum = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && margins[order[j]] == margins[order[i]]) ++j;
    const double avg = (static_cast<double>(i) + static_cast<double>(j) + 1) / 2;
    for (size_t k = i; k < j; ++k) {
      if (labels[order[k]] > 0) {
        rank_sum += avg;
        pos += 1;
      }
    }
    i = j;
  }
  const double neg = static_cast<double>(n) - pos;
  q.auc = pos > 0 && neg > 0 ? (rank_sum - pos * (pos + 1) / 2) / (pos * neg) : 0.5;
  return q;
}

}  // namespace linear
