// The job behind the worker-group tests (tests/integration/run_groups.py): a training group
// and an evaluation group on the same servers, each under its own barrier policy
// (PS_GROUP_CONSISTENCY) and, with --tasks, its own task pool.
//
// Training workers (group "train") own one int64 key each and add 1 to it per step; before
// each step they pull every training worker's key and check BSP's lockstep within their group
// (every live member's value is t or t + 1 at a read of step t). One of them may straggle.
//
// Evaluation workers (group "eval") read the training keys in steps of their own. With
// --tasks N the scheduler puts N tasks in the eval group's pool (and N in the training
// group's, which training worker 0 drains between steps), and each eval step is one task,
// printed as "DID eval TASK" when reported done. An eval worker given --stall-eval-rank stops
// holding its --stall-task'th task ("STALLED pid=N") and waits to be SIGKILLed; a training
// worker given --stall-train-rank stops at --stall-step the same way.
//
// Every worker prints a JSON summary line: its group, steps, the time servers held its pulls,
// lockstep violations, and the tasks it did.
//
//   groups_job --steps N [--eval-steps M] [--eval-ms MS] [--straggler-ms MS] [--tasks N]
//              [--self-tasks N (eval group rank 0 adds N tasks to its group's pool itself)]
//              [--stall-eval-rank R --stall-task K] [--stall-train-rank R --stall-step T]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "ps/ps.h"

namespace {

struct Options {
  int steps = 15;
  int eval_steps = 5;
  int eval_ms = 100;
  int straggler_ms = 20;
  int tasks = 0;
  int self_tasks = 0;
  int stall_eval_rank = -1;
  int stall_task = -1;
  int stall_train_rank = -1;
  int stall_step = -1;
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::stoi(argv[i + 1]);
    if (k == "--steps") {
      o.steps = v;
    } else if (k == "--eval-steps") {
      o.eval_steps = v;
    } else if (k == "--eval-ms") {
      o.eval_ms = v;
    } else if (k == "--straggler-ms") {
      o.straggler_ms = v;
    } else if (k == "--tasks") {
      o.tasks = v;
    } else if (k == "--self-tasks") {
      o.self_tasks = v;
    } else if (k == "--stall-eval-rank") {
      o.stall_eval_rank = v;
    } else if (k == "--stall-task") {
      o.stall_task = v;
    } else if (k == "--stall-train-rank") {
      o.stall_train_rank = v;
    } else if (k == "--stall-step") {
      o.stall_step = v;
    } else {
      std::cerr << "unknown option " << k << "\n";
      std::exit(2);
    }
  }
  return o;
}

ps::Key KeyOf(int train_rank) { return static_cast<ps::Key>(train_rank) << 58; }

int TrainSize(const ps::Node& node) {
  for (const auto& g : node.worker_groups()) {
    if (g.first == "train") return g.second;
  }
  return 0;
}

void Stall() {
  std::printf("STALLED pid=%d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::hours(1));
}

void Summary(const ps::Node& node, const ps::KVWorker<int64_t>& kv, int violations,
             const std::string& tasks) {
  const auto b = kv.barrier_stats();
  std::printf(
      "SUMMARY {\"group\":\"%s\",\"group_rank\":%d,\"steps\":%lld,\"barrier_wait_s\":%.4f,"
      "\"elapsed_s\":%.4f,\"violations\":%d,\"tasks\":[%s]}\n",
      node.group().c_str(), node.group_rank(), static_cast<long long>(b.step), b.barrier_wait_s,
      b.elapsed_s, violations, tasks.c_str());
  std::fflush(stdout);
}

int RunTrain(ps::Node* node, const Options& o) {
  const int n = TrainSize(*node), me = node->group_rank();
  ps::KVWorker<int64_t> kv(node);
  ps::SArray<ps::Key> keys(n);
  for (int v = 0; v < n; ++v) keys[v] = KeyOf(v);
  int violations = 0;
  std::string tasks;
  for (int64_t t = 0; t < o.steps; ++t) {
    if (me == 0) {
      std::printf("STEP %lld\n", static_cast<long long>(t));
      std::fflush(stdout);
    }
    if (me == o.stall_train_rank && t == o.stall_step) Stall();
    ps::SArray<int64_t> vals;
    kv.Wait(kv.Pull(keys, &vals));
    for (int v = 0; v < n; ++v) {
      // A killed member stops; its last push and clock may die with it (run_consistency.py).
      if (v == o.stall_train_rank && t >= o.stall_step) continue;
      if ((vals[v] < t || vals[v] > t + 1) && violations++ < 10) {
        std::printf("VIOLATION train worker %d at step %lld read %lld for train worker %d\n", me,
                    static_cast<long long>(t), static_cast<long long>(vals[v]), v);
      }
    }
    if (me == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(o.straggler_ms));
    if (o.tasks > 0 && me == 0) {
      // The training group's own pool, drained between steps: the eval group's never reaches it.
      for (int task = node->TryNextTask(); task >= 0; task = node->TryNextTask()) {
        node->TaskDone(task);
        tasks += (tasks.empty() ? "" : ",") + std::to_string(task);
      }
    }
    kv.Wait(kv.Push(ps::SArray<ps::Key>(1, keys[me]), ps::SArray<int64_t>(1, 1)));
    kv.Clock();
  }
  if (o.tasks > 0 && me == 0) {
    // The rest of the group's pool (all of it, if the scheduler added it only now).
    for (int task = node->NextTask(); task >= 0; task = node->NextTask()) {
      node->TaskDone(task);
      tasks += (tasks.empty() ? "" : ",") + std::to_string(task);
    }
  }
  node->Barrier("train");
  Summary(*node, kv, violations, tasks);
  return violations ? 1 : 0;
}

int RunEval(ps::Node* node, const Options& o) {
  const int n = TrainSize(*node), me = node->group_rank();
  ps::KVWorker<int64_t> kv(node);
  ps::SArray<ps::Key> keys(n);
  for (int v = 0; v < n; ++v) keys[v] = KeyOf(v);
  std::string tasks;
  int done = 0;
  // A group that joined the running job fills its own pool (the scheduler's program knows
  // nothing of it).
  if (o.self_tasks > 0 && me == 0) node->AddTasks(o.self_tasks, node->group());
  for (int64_t t = 0;; ++t) {
    int task = -1;
    if (o.tasks > 0 || o.self_tasks > 0) {
      task = node->NextTask();
      if (task < 0) break;
    } else if (t >= o.eval_steps) {
      break;
    }
    ps::SArray<int64_t> vals;
    kv.Wait(kv.Pull(keys, &vals));
    if (me == o.stall_eval_rank && done == o.stall_task) Stall();
    std::this_thread::sleep_for(std::chrono::milliseconds(o.eval_ms));
    kv.Clock();
    if (task >= 0) {
      node->TaskDone(task);
      std::printf("DID eval %d\n", task);
      std::fflush(stdout);
      tasks += (tasks.empty() ? "" : ",") + std::to_string(task);
    }
    done++;
  }
  node->Barrier("eval");
  Summary(*node, kv, 0, tasks);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  try {
    ps::Node node(ps::Config::FromEnv());
    node.Start();
    int rc = 0;
    if (node.role() == ps::Role::kScheduler && o.tasks > 0) {
      node.AddTasks(o.tasks, "eval");
      node.AddTasks(o.tasks, "train");
    }
    if (node.role() == ps::Role::kServer) {
      ps::KVServer<int64_t> server(&node);
      node.Finalize();
      return 0;
    }
    if (node.role() == ps::Role::kWorker) {
      rc = node.group() == "train" ? RunTrain(&node, o) : RunEval(&node, o);
    }
    if (node.role() == ps::Role::kScheduler) {
      node.Finalize();
      const auto t = node.task_stats();
      std::printf("TASKS added %d done %d redone %d\n", t.added, t.done, t.redone);
      return 0;
    }
    node.Finalize();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "groups_job: %s\n", e.what());
    return 1;
  }
}
