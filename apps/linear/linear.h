// Distributed sparse logistic regression on ps: options and the worker's side of the two
// solvers (DBPG and FTRL). apps/linear/main.cc runs the roles; docs/apps/linear.md explains.
#ifndef PS_APPS_LINEAR_LINEAR_H_
#define PS_APPS_LINEAR_LINEAR_H_

#include <string>

#include "linear/data.h"
#include "ps/ps.h"
#include "team.h"

namespace linear {

/// The workers that train: every worker of the job, or its training group when it has worker
/// groups (their ranks in it; Node::rank() counts every group's workers).
struct Team : apps::Team {
  bool evaluator = false;  // this worker is in the evaluation group instead (rank -1)
};
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
  // L-BFGS: pairs kept; stop when |v| <= epsilon min(pos, neg) / rows |v at w = 0| (v: the
  // (pseudo-)gradient; 2-norm, 1-norm with L1), liblinear's test; main.cc picks the default
  int memory = 10;
  double epsilon = 0.01;
  int threads = 0;  // a worker's threads for its passes (0: its share of its host's cores)
  // FTRL
  int epochs = 5;
  int batch = 100;
  double alpha = 0.1, beta = 1;
  // Both
  int parts_per_worker = 2;  // data parts (tasks) = this x workers
  int eval_every = 10;
  std::string model_out, log_json;
  bool quiet = false;
  // Worker groups (a job launched with -w train:N,eval:M): the group that trains, and the one
  // whose workers evaluate the model on the test set while it trains (under its own policy,
  // ASP by default), a line every eval_interval_ms.
  std::string train_group = "train", eval_group = "eval";
  int eval_interval_ms = 200;
  // This node's view of them (TeamOf), set once the node has started.
  Team team;
};

/// Throws ps::Error when the job has groups but none named o.train_group, or this worker is in
/// a group that neither trains nor evaluates.
Team TeamOf(const ps::Node& node, const Options& o);

/// The app id of the model and of the per-iteration statistics (loss sums).
constexpr int kModelApp = 0;
constexpr int kStatsApp = 1;
/// The L-BFGS solver's gradient sums (SumRule: every worker pushes the change of its part).
constexpr int kGradApp = 2;
/// The stats table's key that every training worker adds 1 to when training has ended (an
/// evaluation group's evaluator then reports the final model).
constexpr ps::Key kDoneKey = ps::kMaxKey - 1;

/// A worker's whole run: takes its data parts from the scheduler, trains, and (rank 0)
/// evaluates on the test set, prints progress and writes the model. Returns 0 on success.
int RunWorker(ps::Node* node, const Options& o);
/// A worker of the evaluation group: evaluates the model on the test set while the training
/// group trains (a line every o.eval_interval_ms), and once more when it has finished.
int RunEvaluator(ps::Node* node, const Options& o);

}  // namespace linear

#endif  // PS_APPS_LINEAR_LINEAR_H_
