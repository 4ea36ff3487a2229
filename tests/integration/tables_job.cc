// The job behind the named-table tests (tests/integration/run_tables.py). Every worker creates
// two tables over the same keys with different rules ("sums": int64 sum; "maxes": int64 max)
// and, halfway, a third one while the job runs ("late": double, width 2, assign, written by
// worker 0 only). Each step a worker adds rank + 1 to every key of "sums" and writes
// step * W + rank to every key of "maxes"; the runner SIGKILLs a server and adds one
// (ps-launch --join) meanwhile, and another server leaves (Node::Leave). At the end worker 0 checks
// every value exactly and lists the tables with their sizes (KVWorker::CountKeys). Servers serve
// every table with a TableServer.
//
//   tables_job --steps N --keys K [--step-ms MS] [--leave-rank R --leave-after-ms MS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "ps/ps.h"

namespace {

struct Options {
  int steps = 40;
  int keys = 200;
  int step_ms = 20;
  int leave_rank = -1;     // this server leaves the running job (Node::Leave) ...
  int leave_after_ms = 0;  // ... this long after it started serving
};

ps::TableSpec Spec(const std::string& name, ps::DataType dtype, int width,
                   const std::string& rule) {
  ps::TableSpec t;
  t.name = name;
  t.dtype = dtype;
  t.width = width;
  t.rule = rule;
  return t;
}

int RunWorker(ps::Node* node, const Options& o) {
  const int W = node->num_workers(), rank = node->rank();
  node->CreateTable(Spec("sums", ps::DataType::kInt64, 1, "sum"));
  node->CreateTable(Spec("maxes", ps::DataType::kInt64, 1, "max"));
  ps::KVWorker<int64_t> sums(node, "sums"), maxes(node, "maxes");
  ps::SArray<ps::Key> keys(o.keys);
  for (int i = 0; i < o.keys; ++i) keys[i] = ps::HashKey(static_cast<uint64_t>(i));
  std::sort(keys.begin(), keys.end());
  std::unique_ptr<ps::KVWorker<double>> late;
  ps::SArray<double> late_vals(2 * o.keys);
  for (int s = 0; s < o.steps; ++s) {
    if (rank == 0) {
      std::printf("STEP %d\n", s);
      std::fflush(stdout);
    }
    if (s == o.steps / 2 && rank == 0) {
      node->CreateTable(Spec("late", ps::DataType::kDouble, 2, "assign"));
      late.reset(new ps::KVWorker<double>(node, "late"));
    }
    const int64_t a = sums.Push(keys, ps::SArray<int64_t>(o.keys, rank + 1));
    const int64_t b = maxes.Push(keys, ps::SArray<int64_t>(o.keys, int64_t{s} * W + rank));
    if (late) {
      for (int i = 0; i < o.keys; ++i) {
        late_vals[2 * i] = s;
        late_vals[2 * i + 1] = -0.5 * i;
      }
      late->Wait(late->Push(keys, late_vals));  // waited: late_vals may change after
    }
    sums.Wait(a);
    maxes.Wait(b);
    std::this_thread::sleep_for(std::chrono::milliseconds(o.step_ms));
  }
  node->Barrier(ps::kWorkerGroup);
  int bad = 0;
  if (rank == 0) {
    ps::SArray<int64_t> sv, mv;
    ps::SArray<double> lv(2 * o.keys);
    sums.Wait(sums.Pull(keys, &sv));
    maxes.Wait(maxes.Pull(keys, &mv));
    late->Wait(late->Pull(keys, &lv));
    const int64_t want_sum = int64_t{o.steps} * W * (W + 1) / 2;
    const int64_t want_max = int64_t{o.steps - 1} * W + W - 1;
    for (int i = 0; i < o.keys; ++i) {
      if (sv[i] != want_sum || mv[i] != want_max || lv[2 * i] != o.steps - 1 ||
          lv[2 * i + 1] != -0.5 * i) {
        if (bad++ < 5) {
          std::printf("WRONG key %d: sums %lld (want %lld), maxes %lld (want %lld), late %g %g\n",
                      i, static_cast<long long>(sv[i]), static_cast<long long>(want_sum),
                      static_cast<long long>(mv[i]), static_cast<long long>(want_max), lv[2 * i],
                      lv[2 * i + 1]);
        }
      }
    }
    for (const ps::TableSpec& t : node->Tables()) {
      std::vector<double> n;
      auto count = [&n](auto* kv) { kv->Wait(kv->CountKeys({ps::Range::All()}, &n)); };
      if (t.name == "sums") count(&sums);
      if (t.name == "maxes") count(&maxes);
      if (t.name == "late") count(late.get());
      std::printf("TABLE %s app %d rule %s width %d keys %.0f\n", t.name.c_str(), t.app_id,
                  t.rule.c_str(), t.width, n.empty() ? -1.0 : n[0]);
    }
    std::printf("CHECKED %d keys, %d wrong\n", o.keys, bad);
    std::fflush(stdout);
  }
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::stoi(argv[i + 1]);
    if (k == "--steps") {
      o.steps = v;
    } else if (k == "--keys") {
      o.keys = v;
    } else if (k == "--step-ms") {
      o.step_ms = v;
    } else if (k == "--leave-rank") {
      o.leave_rank = v;
    } else if (k == "--leave-after-ms") {
      o.leave_after_ms = v;
    } else {
      std::cerr << "unknown option " << k << "\n";
      return 2;
    }
  }
  try {
    ps::Node node(ps::Config::FromEnv());
    node.Start();
    int rc = 0;
    if (node.role() == ps::Role::kServer) {
      ps::TableServer tables(&node);
      if (node.rank() == o.leave_rank) {
        std::this_thread::sleep_for(std::chrono::milliseconds(o.leave_after_ms));
        node.Leave();  // every table's ranges go to the others
        std::printf("LEFT server %d\n", node.rank());
        return 0;
      }
      node.Finalize();
      return 0;
    }
    if (node.role() == ps::Role::kWorker) rc = RunWorker(&node, o);
    node.Finalize();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tables_job: %s\n", e.what());
    return 1;
  }
}
