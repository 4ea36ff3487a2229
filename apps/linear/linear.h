// Distributed sparse logistic regression on ps: options and the worker's side of the two
// solvers (DBPG and FTRL). apps/linear/main.cc runs the roles; docs/apps/linear.md explains.
#ifndef PS_APPS_LINEAR_LINEAR_H_
#define PS_APPS_LINEAR_LINEAR_H_

#include <string>

#include "linear/data.h"
#include "ps/ps.h"

namespace linear {

struct Options {
  std::string train, test;
  Format format = Format::kLibsvm;
  std::string solver = "dbpg";  // dbpg | ftrl | lbfgs
  double l1 = 0, l2 = 1;
  // DBPG
  int iterations = 150;
  int blocks = 1;
  double eta = 1;
  bool kkt = true;
  double significant = -1;  // RequestFilters::significant of the model's pulls
  double kkt_delta = 0;
  std::string curvature = "bound";
  double curvature_floor =
      1e-3;  // KKT filter: drop a push when w = 0 and |g| <= l1 / W - kkt_delta
  // L-BFGS: pairs kept; stop when |v| <= epsilon |v at the start| (v: the (pseudo-)gradient)
  int memory = 10;
  double epsilon = 1e-4;
  // FTRL
  int epochs = 5;
  int batch = 100;
  double alpha = 0.1, beta = 1;
  // Both
  int parts_per_worker = 2;  // data parts (tasks) = this x workers
  int eval_every = 10;
  std::string model_out, log_json;
  bool quiet = false;
};

/// The app id of the model and of the per-iteration statistics (loss sums).
constexpr int kModelApp = 0;
constexpr int kStatsApp = 1;
/// The L-BFGS solver's gradient sums (TaggedSumRule: key -> [sum, evaluation]).
constexpr int kGradApp = 2;

/// A worker's whole run: takes its data parts from the scheduler, trains, and (rank 0)
/// evaluates on the test set, prints progress and writes the model. Returns 0 on success.
int RunWorker(ps::Node* node, const Options& o);

}  // namespace linear

#endif  // PS_APPS_LINEAR_LINEAR_H_
