// Tasks in one process (the process tests are tests/fault/task_job.cc and the apps'): a stream
// of tasks that carry their data, and waits for tasks longer than the barrier timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "inproc_job.h"
#include "ps/ps.h"

namespace ps {
namespace {

TEST(TaskInprocTest, AStreamOfTasksWithDataOutlastsTheBarrierTimeoutAndEndsWhenClosed) {
  std::mutex mu;
  std::multiset<std::string> got;
  Job::Run(
      true, 1, 3,
      [&](Node* node, int rank) {
        if (rank == 0) {
          // The producer: parts come slower than the barrier timeout (1 s), so the other
          // workers' requests are held longer than any one wait may last.
          node->OpenTasks();
          node->Barrier(kWorkerGroup);
          for (int i = 0; i < 4; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(i == 1 ? 1500 : 100));
            node->AddTask("part " + std::to_string(i) + std::string(100000, 'x'));
          }
          node->CloseTasks();
          return;
        }
        node->Barrier(kWorkerGroup);
        std::string data;
        for (int t = node->NextTask(&data); t >= 0; t = node->NextTask(&data)) {
          {
            std::lock_guard<std::mutex> lk(mu);
            got.insert(data.substr(0, 6));
          }
          EXPECT_EQ(data.size(), 100006u);
          node->TaskDone(t);
        }
      },
      static_cast<int64_t*>(nullptr), [](Config* c) { c->barrier_timeout_ms = 1000; });
  EXPECT_EQ(got, (std::multiset<std::string>{"part 0", "part 1", "part 2", "part 3"}));
}

}  // namespace
}  // namespace ps
