#include "util/retain_memory.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ps {
namespace {

#if defined(__GLIBC__)
struct Held {
  int returned = 0;    // batches after which malloc gave freed memory back to the system
  int mmapped = 0;     // batches that had a buffer in a chunk of its own (munmapped on free)
  size_t peak_kb = 0;  // largest heap seen
};

// A server's traffic in small: batches of 2-5 message buffers of 1-4 MB are filled, as messages
// queue up in a van, then freed. Single-threaded and in a child process, so that every run
// makes the same calls. The child inherits the parent's heap, whose dynamic thresholds earlier
// tests in the same process may have raised (glibc raises them as large blocks are freed), so
// the control run sets glibc's documented initial values (128 KB) explicitly. Page faults are not
// counted: with transparent huge pages they depend on the heap's alignment; memory kept in the heap
// is what saves them.
Held RunInChild(bool retain) {
  int fd[2];
  if (pipe(fd) != 0) return {-1, -1, 0};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    if (retain && !RetainFreedMemory(64)) _exit(2);
    if (!retain &&
        (mallopt(M_MMAP_THRESHOLD, 128 << 10) != 1 || mallopt(M_TRIM_THRESHOLD, 128 << 10) != 1)) {
      _exit(2);
    }
    Held h;
    int i = 0;
    for (int b = 0; b < 24; ++b) {
      std::vector<char*> got;
      for (int k = 0; k < 2 + b % 4; ++k, ++i) {
        const size_t size = (1u << 20) + (i % 7) * (512u << 10);
        char* p = static_cast<char*>(malloc(size));
        memset(p, 1, size);
        got.push_back(p);
      }
      const struct mallinfo2 full = mallinfo2();
      if (full.hblkhd > 0) ++h.mmapped;
      for (char* p : got) free(p);
      const struct mallinfo2 after = mallinfo2();
      if (after.arena + after.hblkhd < full.arena + full.hblkhd) ++h.returned;
      h.peak_kb = std::max(h.peak_kb, (full.arena + full.hblkhd) >> 10);
    }
    (void)!write(fd[1], &h, sizeof(h));
    _exit(0);
  }
  close(fd[1]);
  Held h{-1, -1, 0};
  if (read(fd[0], &h, sizeof(h)) != static_cast<ssize_t>(sizeof(h))) h = {-1, -1, 0};
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return h;
}
#endif

TEST(RetainMemoryTest, FreedBuffersOfMBsStayInTheHeapForTheNextMessages) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "the tuning is for glibc's malloc";
#else
  const Held with = RunInChild(true);
  const Held without = RunInChild(false);
  ASSERT_GE(with.returned, 0) << "the child process failed";
  ASSERT_GE(without.returned, 0) << "the child process failed";
  // glibc's defaults put the first buffers of each new size in chunks of their own and give
  // them back on free (each is faulted in again page by page when next written), until its
  // dynamic threshold has grown past them; retained, nothing goes back.
  EXPECT_GT(without.mmapped + without.returned, 0) << "the pattern no longer shows the defaults";
  EXPECT_EQ(with.mmapped, 0);
  EXPECT_EQ(with.returned, 0) << "peak heap " << with.peak_kb << " KB";
#endif
}

// Workers gather request parts for several servers into fresh buffers of MBs: they retain
// freed memory too (a 100K-key push to 2 servers ran at a tenth of the speed of a push to one).
TEST(RetainMemoryTest, ServersAndWorkersRetainTheSchedulerAndInProcessClustersDoNot) {
  Config c;
  c.malloc_retain_mb = 64;
  c.role = Role::kServer;
  EXPECT_TRUE(ShouldRetainFreedMemory(c));
  c.role = Role::kWorker;
  EXPECT_TRUE(ShouldRetainFreedMemory(c));
  c.role = Role::kScheduler;
  EXPECT_FALSE(ShouldRetainFreedMemory(c));
  c.role = Role::kWorker;
  c.inproc = std::make_shared<InprocNetwork>();
  EXPECT_FALSE(ShouldRetainFreedMemory(c));
  c.inproc = nullptr;
  c.malloc_retain_mb = 0;
  EXPECT_FALSE(ShouldRetainFreedMemory(c));
}

}  // namespace
}  // namespace ps
