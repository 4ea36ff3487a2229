#include "util/retain_memory.h"

#include <algorithm>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ps {

bool RetainFreedMemory(size_t mb) {
#if defined(__GLIBC__)
  // glibc refuses an mmap threshold above half its largest per-thread heap (32 MB on 64-bit).
  const size_t mmap_mb = std::min<size_t>(mb, 32);
  const bool a = mallopt(M_MMAP_THRESHOLD, static_cast<int>(mmap_mb << 20)) == 1;
  const bool b = mallopt(M_TRIM_THRESHOLD, static_cast<int>(std::min<size_t>(mb, 1024) << 20)) == 1;
  return a && b;
#else
  (void)mb;
  return false;
#endif
}

bool ShouldRetainFreedMemory(const Config& cfg) {
  return cfg.role != Role::kScheduler && !cfg.inproc && cfg.malloc_retain_mb > 0;
}

}  // namespace ps
