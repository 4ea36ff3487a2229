#include "util/retain_memory.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace ps {
namespace {

long MinorFaults() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct Faults {
  long faults = 0;
  long pages = 0;  // pages written in the measured part
};

// A server's traffic in small: a receive thread allocates message buffers of 1-4 MB and fills
// them, the handler frees each after writing a 3 MB reply of its own. Counts the page faults
// after a warm-up, in a child process so that malloc starts from its defaults.
Faults RunInChild(bool retain) {
  int fd[2];
  if (pipe(fd) != 0) return {-1, -1};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    if (retain && !RetainFreedMemory(64)) _exit(2);
    const int kMessages = 200, kWarmup = 40;
    std::deque<char*> q;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::thread io([&] {
      for (int i = 0; i < kMessages; ++i) {
        const size_t size = (1u << 20) + (i % 7) * (512u << 10);
        char* p = static_cast<char*>(malloc(size));
        memset(p, 1, size);
        std::lock_guard<std::mutex> l(mu);
        q.push_back(p);
        cv.notify_one();
      }
      std::lock_guard<std::mutex> l(mu);
      done = true;
      cv.notify_one();
    });
    Faults f;
    long start = 0;
    for (int i = 0;; ++i) {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return !q.empty() || done; });
      if (q.empty()) break;
      char* p = q.front();
      q.pop_front();
      l.unlock();
      if (i == kWarmup) start = MinorFaults();
      const size_t out = 3u << 20;
      char* r = static_cast<char*>(malloc(out));
      memset(r, 2, out);
      if (i >= kWarmup) f.pages += static_cast<long>(out / 4096);
      free(p);
      free(r);
    }
    io.join();
    f.faults = MinorFaults() - start;
    (void)!write(fd[1], &f, sizeof(f));
    _exit(0);
  }
  close(fd[1]);
  Faults f{-1, -1};
  if (read(fd[0], &f, sizeof(f)) != static_cast<ssize_t>(sizeof(f))) f = {-1, -1};
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return f;
}

TEST(RetainMemoryTest, BuffersOfMBsAreReusedWithoutFaultingPagesInAgain) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "the tuning is for glibc's malloc";
#endif
  const Faults with = RunInChild(true);
  const Faults without = RunInChild(false);
  ASSERT_GT(with.pages, 0) << "the child process failed";
  // With glibc's defaults this run faulted 11-43 thousand pages (of about 120 thousand written
  // by the handler alone); retained, the heap is faulted in once, during the warm-up.
  EXPECT_LT(with.faults, with.pages / 100)
      << "faults with RetainFreedMemory " << with.faults << ", without " << without.faults
      << ", pages written " << with.pages;
}

}  // namespace
}  // namespace ps
