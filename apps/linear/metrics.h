// Quality of a linear model on labelled rows, from the margins w.x of every row.
#ifndef PS_APPS_LINEAR_METRICS_H_
#define PS_APPS_LINEAR_METRICS_H_

#include <vector>

namespace linear {

struct Quality {
  double logloss = 0;   // mean of log(1 + exp(-y m))
  double auc = 0;       // area under the ROC curve (ties count one half)
  double accuracy = 0;  // fraction with sign(m) == y (m = 0 counts as -1)
};

/// labels in {-1, +1}; margins[i] = w . x_i.
Quality Evaluate(const std::vector<float>& labels, const std::vector<double>& margins);

/// log(1 + exp(-z)) without overflow.
double LogLoss(double z);
/// 1 / (1 + exp(-z)) without overflow.
double Sigmoid(double z);

}  // namespace linear

#endif  // PS_APPS_LINEAR_METRICS_H_
