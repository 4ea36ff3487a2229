// The pieces of the linear app's worker that its solvers share (internal): the timing of an
// iteration's phases, the worker's shard of the data, and rank 0's progress lines.
#ifndef PS_APPS_LINEAR_WORKER_PARTS_H_
#define PS_APPS_LINEAR_WORKER_PARTS_H_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "linear/linear.h"
#include "linear/metrics.h"

namespace linear {

using Clock = std::chrono::steady_clock;

// Where this worker's iterations spent their time, summed since the last progress line:
// computing, handing pushes to the van, in Clock() (the bounded delay holding the next step),
// waiting for pulls (which a barrier policy holds on the servers), and reporting.
struct Phases {
  enum Phase { kCompute, kPush, kClock, kPull, kReport, kCount };
  double secs[kCount] = {};
  int iterations = 0;
  // Adds the time since t0 to phase p.
  void Since(Phase p, Clock::time_point t0) {
    secs[p] += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  // Runs f and adds its time to phase p (also when f returns a value).
  template <typename F>
  auto Time(Phase p, F&& f) -> decltype(f()) {
    struct Add {
      Phases* ph;
      Phase p;
      Clock::time_point t0;
      ~Add() { ph->Since(p, t0); }
    } add{this, p, Clock::now()};
    return f();
  }
};

// The rows this worker trains on (its data parts) and its copy of their weights.
struct Shard {
  Dataset data;
  std::vector<int> parts, tasks;
  std::vector<double> w;  // per data.keys
  ps::SArray<ps::Key> keys;

  void Add(int task, const Options& o, int nparts) {
    Add(task, nparts, ReadPart(o.train, o.format, task % nparts, nparts));
  }
  // Adds part task % nparts, read already.
  void Add(int task, int nparts, Dataset d) {
    const int part = task % nparts;
    if (parts.empty()) {
      data = std::move(d);
    } else {
      data.Append(d);
    }
    parts.push_back(part);
    tasks.push_back(task);
    keys = ps::SArray<ps::Key>(data.keys);
    w.assign(data.keys.size(), 0.0);
  }
  size_t Index(ps::Key k) const {
    return static_cast<size_t>(std::lower_bound(data.keys.begin(), data.keys.end(), k) -
                               data.keys.begin());
  }
  // Margins w.x of every row, and the data loss sum.
  double Margins(std::vector<double>* m) const {
    m->resize(data.rows());
    double loss = 0;
    for (size_t i = 0; i < data.rows(); ++i) {
      (*m)[i] = Margin(data, i, w.data());
      loss += LogLoss(data.label[i] * (*m)[i]);
    }
    return loss;
  }
};

// Progress of the job as rank 0 sees it: one line per iteration (or epoch) and a JSON log.
class Reporter {
 public:
  // test: the test set when the caller read it already (else it is read here).
  Reporter(ps::Node* node, const Options& o, ps::KVWorkerBase* kv, Dataset* test = nullptr)
      : node_(node), o_(o), kv_(kv), start_(Clock::now()) {
    if (test) {
      test_ = std::move(*test);
    } else if (!o.test.empty()) {
      test_ = ReadFile(o.test, o.format);
    }
    if (!o.log_json.empty()) {
      log_.open(o.log_json);
      if (!log_) throw ps::Error("--log_json=" + o.log_json + ": cannot open for writing");
    }
  }
  bool has_test() const { return test_.rows() > 0; }
  // Whether anything reads the reports: with --quiet and no --log_json nothing is pulled for
  // them (the model and the test set's weights cost a pass over the wire each time).
  bool reporting() const { return !o_.quiet || log_.is_open(); }

  // Quality on the test set with the model's current weights.
  Quality TestQuality(ps::KVWorker<double>* kv) const {
    ps::SArray<double> w(test_.keys.size());
    kv->Wait(kv->Pull(ps::SArray<ps::Key>(test_.keys), &w));
    std::vector<double> m(test_.rows());
    for (size_t i = 0; i < test_.rows(); ++i) m[i] = Margin(test_, i, w.data());
    return Evaluate(test_.label, m);
  }

  // One progress line: the iteration, the objective over all workers' rows (data loss as the
  // workers reported it, plus the regularizer of the whole model), nonzeros, test quality.
  void Line(const char* unit, int t, double loss, double rows, double l1norm, double l2sq,
            size_t nnz, const Quality* q, Phases* ph) {
    const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    const double objective = loss + o_.l1 * l1norm + o_.l2 / 2 * l2sq;
    const auto st = node_->stats();
    const auto b = kv_->barrier_stats();
    const double wait =
        b.elapsed_s > 0 ? 100 * (b.barrier_wait_s + b.delay_wait_s) / b.elapsed_s : 0;
    // Milliseconds per iteration in each phase since the last line (this worker's).
    double ms[Phases::kCount];
    for (int i = 0; i < Phases::kCount; ++i) {
      ms[i] = ph->iterations > 0 ? 1e3 * ph->secs[i] / ph->iterations : 0;
    }
    char buf[640];
    std::snprintf(buf, sizeof(buf),
                  "%s %d time %.2fs objective %.6g train_logloss %.5f nnz %zu%s sent_mb %.2f "
                  "barrier_wait %.1f%% ms/iter compute %.1f push %.1f clock %.1f pull_wait %.1f "
                  "report %.1f",
                  unit, t, secs, objective, rows > 0 ? loss / rows : 0.0, nnz,
                  q ? (" test_auc " + Fmt(q->auc, 5) + " test_logloss " + Fmt(q->logloss, 5) +
                       " test_accuracy " + Fmt(q->accuracy, 4))
                          .c_str()
                    : "",
                  st.bytes_sent / 1e6, wait, ms[Phases::kCompute], ms[Phases::kPush],
                  ms[Phases::kClock], ms[Phases::kPull], ms[Phases::kReport]);
    if (!o_.quiet) std::cout << buf << std::endl;
    if (log_) {
      log_ << "{\"" << unit << "\":" << t << ",\"time_s\":" << secs
           << ",\"objective\":" << objective
           << ",\"train_logloss\":" << (rows > 0 ? loss / rows : 0.0) << ",\"nnz\":" << nnz
           << ",\"bytes_sent\":" << st.bytes_sent << ",\"barrier_wait_pct\":" << wait;
      const char* names[Phases::kCount] = {"compute", "push", "clock", "pull_wait", "report"};
      for (int i = 0; i < Phases::kCount; ++i) log_ << ",\"" << names[i] << "_ms\":" << ms[i];
      if (q) {
        log_ << ",\"test_auc\":" << q->auc << ",\"test_logloss\":" << q->logloss
             << ",\"test_accuracy\":" << q->accuracy;
      }
      log_ << ",\"solver\":\"" << o_.solver << "\",\"consistency\":\""
           << node_->consistency_policy(o_.team.group)
           << "\",\"tau\":" << node_->max_delay(o_.team.group) << ",\"workers\":" << o_.team.size
           << "}" << std::endl;
    }
    *ph = Phases();
  }

 private:
  static std::string Fmt(double v, int digits) {
    char b[32];
    std::snprintf(b, sizeof(b), "%.*f", digits, v);
    return b;
  }
  ps::Node* node_;
  const Options& o_;
  ps::KVWorkerBase* kv_;
  Clock::time_point start_;
  Dataset test_;
  std::ofstream log_;
};

/// Pulls the weights of every key of the shard's data into s->w.
void PullAll(ps::KVWorker<double>* kv, Shard* s);

/// Takes the data parts dead workers left in the scheduler's pool (they come back when the
/// worker is declared dead); true when it took any.
bool AdoptParts(ps::Node* node, const Options& o, Shard* s);

/// The limited-memory quasi-Newton solver (lbfgs_solver.cc): L-BFGS, OWL-QN under L1.
int RunLbfgs(ps::Node* node, const Options& o, Shard* s, ps::KVWorker<double>* kv,
             ps::KVWorker<double>* stats, Reporter* rep);

}  // namespace linear

#endif  // PS_APPS_LINEAR_WORKER_PARTS_H_
