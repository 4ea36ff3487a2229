// ps_linear: distributed sparse logistic regression (L1/L2) with DBPG or FTRL, launched by
// tracker/ps-launch (every role runs this program), or `--predict` on one machine.
//
//   tracker/ps-launch -s 2 -w 2 -- build/apps/linear/ps_linear
//       --train data/spam/train.libsvm --test data/spam/test.libsvm --solver dbpg --l2 1
//   build/apps/linear/ps_linear --predict --model_in model.txt --test data/spam/test.libsvm
//
// docs/apps/linear.md has the algorithms, the flags and the measured results.
#include <gflags/gflags.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "app_help.h"
#include "linear/linear.h"
#include "linear/metrics.h"
#include "linear/model_file.h"
#include "linear/rules.h"

DEFINE_string(train, "", "training data (libsvm or criteo text)");
DEFINE_string(test, "", "test data, evaluated by worker 0 (and by --predict)");
DEFINE_string(format, "libsvm", "data format: libsvm or criteo");
DEFINE_string(solver, "dbpg",
              "dbpg (delayed block proximal gradient), lbfgs (L-BFGS; OWL-QN with --l1; "
              "needs --consistency bsp) or ftrl");
DEFINE_int32(memory, 10, "lbfgs: the (s, y) pairs of the quasi-Newton history kept");
DEFINE_double(epsilon, -1,
              "lbfgs: stop once the (pseudo-)gradient's norm is at most epsilon * min(pos, "
              "neg) / rows of its norm at w = 0, liblinear's -e test (2-norm; 1-norm with "
              "--l1); -1: 0.01 with --l1 (liblinear -s 6's default), 0.0003 with L2 alone; "
              "0: run --iterations");
DEFINE_int32(threads, 0,
             "lbfgs: threads of a worker's passes over its data (0: the cores of its host "
             "shared among the workers there)");
DEFINE_double(l1, 0, "L1 regularization (liblinear -s 6 with C: 1/C)");
DEFINE_double(l2, 1, "L2 regularization (liblinear -s 0 with C: 1/C)");
DEFINE_int32(iterations, 150, "dbpg: iterations");
DEFINE_int32(blocks, 1, "dbpg: feature blocks (iteration t updates block t mod blocks)");
DEFINE_double(eta, 1, "dbpg: learning rate of the proximal step (h = curvature bound / eta)");
DEFINE_bool(kkt, true, "dbpg with l1 > 0: the KKT filter (drop pushes that cannot move a zero)");
DEFINE_double(kkt_delta, 0, "dbpg: KKT filter margin (drop when w = 0, |g| <= l1/W - delta)");
DEFINE_bool(momentum, true, "dbpg: Nesterov extrapolation of the proximal steps (FISTA)");
DEFINE_string(curvature, "local",
              "dbpg: local (p(1-p) of each row, at least --curvature_floor) or bound (1/4)");
DEFINE_double(curvature_floor, 1e-4, "dbpg: smallest local curvature");
DEFINE_int32(epochs, 5, "ftrl: passes over the data");
DEFINE_int32(batch, 100, "ftrl: rows per minibatch");
DEFINE_double(alpha, 0.1, "ftrl: alpha");
DEFINE_double(beta, 1, "ftrl: beta");
DEFINE_string(consistency, "bsp",
              "barrier policy of the run (bsp, ssp:S, asp, psp:BETA[:S]); when not given, "
              "PS_CONSISTENCY if set, else bsp");
DEFINE_int32(tau, 0,
             "bounded delay of the workers (-1: unbounded; -2: PS_MAX_DELAY); when not given, "
             "PS_MAX_DELAY if set, else 0");
DEFINE_double(significant, -1,
              "pulls through the significantly-modified filter at this threshold (-1: off; "
              "0: lossless, only changed weights travel)");
DEFINE_int32(parts_per_worker, 2, "data parts (scheduler tasks) per worker");
DEFINE_int32(eval_every, 10, "report every this many iterations (epochs), and after the last");
DEFINE_string(model_out, "",
              "write the model here (worker 0): feature and weight per line (model_file.h)");
DEFINE_string(log_json, "", "write one JSON object per report here (worker 0)");
DEFINE_bool(quiet, false, "no progress lines (nothing is pulled for them unless --log_json asks)");
DEFINE_string(train_group, "train",
              "with worker groups (ps-launch -w train:N,eval:M): the group that trains");
DEFINE_string(eval_group, "eval",
              "with worker groups: the group whose workers evaluate the model on --test while "
              "the training group trains (its own barrier policy: PS_CONSISTENCY's, ASP by "
              "default), and report the final model");
DEFINE_int32(eval_interval_ms, 200, "evaluation group: pause between evaluations");
DEFINE_bool(predict, false, "evaluate --model_in on --test locally (no cluster)");
DEFINE_string(model_in, "", "--predict: the model file");
DEFINE_string(predictions_out, "", "--predict: write the probability of +1 per test row");

namespace {

linear::Options FromFlags() {
  linear::Options o;
  o.train = FLAGS_train;
  o.test = FLAGS_test;
  o.train_group = FLAGS_train_group;
  o.eval_group = FLAGS_eval_group;
  if (FLAGS_eval_interval_ms < 0) throw ps::Error("--eval_interval_ms must be >= 0");
  o.eval_interval_ms = FLAGS_eval_interval_ms;
  o.format = linear::ParseFormat(FLAGS_format);
  o.solver = FLAGS_solver;
  if (o.solver != "dbpg" && o.solver != "ftrl" && o.solver != "lbfgs") {
    throw ps::Error("--solver=" + o.solver + ": expected dbpg, lbfgs or ftrl");
  }
  if (FLAGS_memory < 1) throw ps::Error("--memory must be >= 1");
  o.memory = FLAGS_memory;
  if (FLAGS_epsilon != -1 && (!(FLAGS_epsilon >= 0) || !std::isfinite(FLAGS_epsilon))) {
    throw ps::Error("--epsilon must be a finite number >= 0, or -1 for the default");
  }
  if (FLAGS_threads < 0 || FLAGS_threads > 256) throw ps::Error("--threads must be in [0, 256]");
  o.threads = FLAGS_threads;
  auto nonneg = [](const char* name, double v) {
    if (!(v >= 0) || !std::isfinite(v)) {
      throw ps::Error(std::string("--") + name + " must be a finite number >= 0");
    }
    return v;
  };
  o.l1 = nonneg("l1", FLAGS_l1);
  o.l2 = nonneg("l2", FLAGS_l2);
  // A quasi-Newton iterate at a given gradient norm is farther from the optimum than the
  // trust-region Newton one liblinear -s 0 stops at (its norm zigzags): at liblinear's 0.01
  // the spam words' test logloss came out 6% above liblinear's, the bigrams' 20%. 0.0003
  // stops where liblinear's quality is (docs/apps/linear.md). OWL-QN under L1 takes -s 6's.
  o.epsilon = FLAGS_epsilon != -1 ? FLAGS_epsilon : o.l1 > 0 ? 0.01 : 0.0003;
  o.iterations = FLAGS_iterations;
  o.blocks = FLAGS_blocks;
  o.eta = FLAGS_eta;
  if (!(o.eta > 0)) throw ps::Error("--eta must be > 0");
  o.kkt = FLAGS_kkt;
  o.significant = FLAGS_significant;
  o.kkt_delta = FLAGS_kkt_delta;
  o.curvature = FLAGS_curvature;
  o.curvature_floor = FLAGS_curvature_floor;
  o.epochs = FLAGS_epochs;
  o.batch = FLAGS_batch;
  o.alpha = FLAGS_alpha;
  o.beta = FLAGS_beta;
  if (!(o.alpha > 0)) throw ps::Error("--alpha must be > 0");
  o.parts_per_worker = FLAGS_parts_per_worker;
  if (o.parts_per_worker < 1) throw ps::Error("--parts_per_worker must be >= 1");
  if (FLAGS_blocks < 1) throw ps::Error("--blocks must be >= 1");
  if (FLAGS_eval_every < 1) throw ps::Error("--eval_every must be >= 1");
  o.eval_every = FLAGS_eval_every;
  o.model_out = FLAGS_model_out;
  o.log_json = FLAGS_log_json;
  o.quiet = FLAGS_quiet;
  return o;
}

// Waits until this node has applied the run's barrier policy and delay, which the scheduler
// relays: a pull handled under the previous policy would break BSP's guarantees.
void AwaitConsistency(ps::Node* node, const linear::Team& team) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // The training group's (every worker's without groups); an evaluator's own delay is not set.
  auto ready = [&] {
    return (FLAGS_consistency.empty() ||
            node->consistency_policy(team.group) == FLAGS_consistency) &&
           (FLAGS_tau == -2 || node->role() != ps::Role::kWorker || team.evaluator ||
            node->max_delay(team.group) == FLAGS_tau);
  };
  while (!ready()) {
    if (std::chrono::steady_clock::now() > until) {
      throw ps::Error("--consistency=" + FLAGS_consistency + " --tau=" + std::to_string(FLAGS_tau) +
                      ": the scheduler's setting did not reach this node within 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

int Predict(const linear::Options& o) {
  if (FLAGS_model_in.empty() || o.test.empty()) {
    throw ps::Error("--predict needs --model_in and --test");
  }
  const std::unordered_map<ps::Key, double> w = linear::ReadModel(FLAGS_model_in, o.format);
  const linear::Dataset d = linear::ReadFile(o.test, o.format);
  std::vector<double> m(d.rows());
  std::vector<double> wk(d.keys.size(), 0.0);
  for (size_t j = 0; j < d.keys.size(); ++j) {
    auto it = w.find(d.keys[j]);
    if (it != w.end()) wk[j] = it->second;
  }
  for (size_t i = 0; i < d.rows(); ++i) m[i] = linear::Margin(d, i, wk.data());
  if (!FLAGS_predictions_out.empty()) {
    std::ofstream out(FLAGS_predictions_out);
    // Enough digits to read back the same double: with 6, confident predictions came out as
    // 0 or 1 and a logloss computed from the file was wrong.
    out << std::setprecision(17);
    for (double x : m) out << linear::Sigmoid(x) << "\n";
    if (!out) throw ps::Error("--predictions_out=" + FLAGS_predictions_out + ": write failed");
  }
  const linear::Quality q = linear::Evaluate(d.label, m);
  std::printf("PREDICT rows %zu test_logloss %.6f test_auc %.6f test_accuracy %.4f nnz %zu\n",
              d.rows(), q.logloss, q.auc, q.accuracy, w.size());
  return 0;
}

// True when the library's variable `var` is set (not empty): it then wins over app defaults.
bool EnvSet(const char* var) {
  const char* v = std::getenv(var);
  return v != nullptr && *v != '\0';
}

}  // namespace

// One source of truth for the barrier policy and delay: a flag given on the command line wins;
// else the library's variable when set (it used to be overridden by the flags' defaults in
// silence); else the app's default.
void ResolveConsistency() {
  auto given = [](const char* flag) {
    gflags::CommandLineFlagInfo info;
    return gflags::GetCommandLineFlagInfo(flag, &info) && !info.is_default;
  };
  if (!given("consistency") && EnvSet("PS_CONSISTENCY")) FLAGS_consistency = "";
  if (!given("tau") && EnvSet("PS_MAX_DELAY")) FLAGS_tau = -2;
}

// MB of key lists kept per peer at each end of a link (PS_KEY_CACHE_MB's default here).
constexpr int kKeyCacheMb = 64;

int main(int argc, char** argv) {
  gflags::SetUsageMessage("distributed sparse logistic regression on ps (docs/apps/linear.md)");
  apps::HandleHelp(argc, argv, "apps/linear/");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ResolveConsistency();
  try {
    linear::Options o = FromFlags();
    if (FLAGS_predict) return Predict(o);
    ps::Config cfg = ps::Config::FromEnv();
    // DBPG and L-BFGS send the same key lists every pass (their data's keys and slices):
    // they travel as references unless PS_KEY_CACHE_MB says otherwise. Every node of the job
    // runs this binary with the same flags, so both ends of each link agree.
    if (!EnvSet("PS_KEY_CACHE_MB") && o.solver != "ftrl") cfg.key_cache_mb = kKeyCacheMb;
    ps::Node node(cfg);
    node.Start();
    o.team = linear::TeamOf(node, o);
    const linear::Team& team = o.team;
    int rc = 0;
    switch (node.role()) {
      case ps::Role::kScheduler:
        // The run's barrier policy and delay reach every node before the barrier releases it
        // (the scheduler's messages to a node arrive in order).
        // With worker groups, the training group's: an evaluation group keeps the job's.
        node.SetConsistency(FLAGS_consistency, FLAGS_tau == -2 ? ps::Node::kKeepDelay : FLAGS_tau,
                            team.group);
        node.AddTasks(o.parts_per_worker * team.size, team.group);
        node.Barrier(ps::kAllGroups);
        node.Finalize();
        break;
      case ps::Role::kServer: {
        std::shared_ptr<const ps::UpdateRule<double>> rule;
        if (o.solver == "ftrl") {
          rule = std::make_shared<linear::FtrlRule<double>>(o.alpha, o.beta, o.l1, o.l2);
        } else if (o.solver == "lbfgs") {
          rule = std::make_shared<ps::AssignRule<double>>();  // the owners' trial points
        } else {
          rule = std::make_shared<linear::DbpgRule<double>>(o.eta, o.l1, o.l2, FLAGS_momentum);
        }
        ps::KVServer<double> model(
            &node, linear::kModelApp, rule,
            {{linear::kNormReducer, std::make_shared<linear::ModelNormReducer>()}});
        ps::KVServer<double> stats(&node, linear::kStatsApp);
        std::unique_ptr<ps::KVServer<double>> grad;  // the lbfgs solver's gradient sums
        if (o.solver == "lbfgs") {
          grad.reset(new ps::KVServer<double>(&node, linear::kGradApp,
                                              std::make_shared<ps::SumRule<double>>()));
        }
        AwaitConsistency(&node, team);
        node.Barrier(ps::kAllGroups);
        node.Finalize();
        const auto st = node.stats();
        std::printf(
            "SERVER_STATS rank %d bytes_sent %llu bytes_received %llu duplicates %llu rejected "
            "%llu\n",
            node.rank(), static_cast<unsigned long long>(st.bytes_sent),
            static_cast<unsigned long long>(st.bytes_received),
            static_cast<unsigned long long>(model.DuplicatePushes()),
            static_cast<unsigned long long>(model.RejectedRequests()));
        break;
      }
      case ps::Role::kWorker:
        if (o.train.empty()) throw ps::Error("--train is required");
        AwaitConsistency(&node, team);
        node.Barrier(ps::kAllGroups);
        try {
          rc = team.evaluator ? linear::RunEvaluator(&node, o) : linear::RunWorker(&node, o);
        } catch (const linear::DataError& e) {
          // The whole job stops with the message: another worker given this part would fail
          // the same way (before, the part went from worker to worker).
          std::cerr << "ps_linear: bad input: " << e.what() << std::endl;
          node.AbortJob(std::string("bad input: ") + e.what());
          std::fflush(stdout);
          _exit(linear::kDataErrorExit);
        }
        node.Finalize();
        break;
    }
    return rc;
  } catch (const linear::DataError& e) {
    std::cerr << "ps_linear: bad input: " << e.what() << std::endl;
    std::fflush(stdout);
    _exit(linear::kDataErrorExit);
  } catch (const ps::Error& e) {
    std::cerr << "ps_linear: " << e.what() << std::endl;
    return 1;
  }
}
