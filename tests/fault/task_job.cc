// The job behind fault.kill_worker, stop_worker and worker_cut: the scheduler puts --shards data
// shards in the task pool; workers take them one at a time, "process" each (a short sleep, then
// adding 1 to the shard's key as push 0 of its task, KVWorker::PushForTask) and report it done.
// The tests kill, stop or cut off a worker while it holds a shard: the shard must be redone by
// another worker, and in the end every shard is marked exactly once (a worker cut from the
// scheduler pushes its shard and its report is lost: the redone push is the same request, and
// with a plain Push the shard would read 2) and reported done exactly once.
//
//   task_job [--shards N] [--work-ms M] [--seed S]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "ps/ps.h"

int main(int argc, char** argv) {
  int shards = 60, work_ms = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--shards") {
      shards = std::atoi(argv[i + 1]);
    } else if (k == "--work-ms") {
      work_ms = std::atoi(argv[i + 1]);
    } else if (k == "--seed") {
      // Nothing here is random; the driver passes a seed to every job.
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    ps::Node node(ps::Config::FromEnv());
    node.Start();
    if (node.role() == ps::Role::kScheduler) {
      node.AddTasks(shards);
      node.Finalize();
      auto t = node.task_stats();
      std::printf("TASKS added=%d done=%d redone=%d\n", t.added, t.done, t.redone);
      return 0;
    }
    if (node.role() == ps::Role::kServer) {
      // Sum, not Assign: a shard marked twice (done twice) reads 2.
      ps::KVServer<int64_t> server(&node);
      node.Finalize();
      return 0;
    }
    ps::KVWorker<int64_t> kv(&node);
    int mine = 0;
    for (int t; (t = node.NextTask()) >= 0;) {
      std::printf("TAKEN %d\n", t);
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::milliseconds(work_ms));
      kv.Wait(kv.PushForTask(t, 0, ps::SArray<ps::Key>(1, ps::HashKey(t) % (ps::kMaxKey - 1)),
                             ps::SArray<int64_t>(1, 1)));
      node.TaskDone(t);
      mine++;
    }
    node.Barrier(ps::kWorkerGroup);
    if (node.rank() == 0) {
      ps::SArray<ps::Key> keys;
      for (int t = 0; t < shards; ++t) keys.push_back(ps::HashKey(t) % (ps::kMaxKey - 1));
      std::sort(keys.begin(), keys.end());
      ps::SArray<int64_t> vals;
      kv.Wait(kv.Pull(keys, &vals));
      int ok = 0, twice = 0;
      for (int64_t v : vals) {
        ok += v == 1;
        twice += v > 1;
      }
      std::printf("SHARDS ok=%d of %d (done more than once: %d)\n", ok, shards, twice);
      if (ok != shards) return 1;
    }
    std::printf("WORKER did %d shards\n", mine);
    node.Finalize();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "task_job: %s\n", e.what());
    return 1;
  }
}
