// How a node's process hands freed memory back to the kernel.
#ifndef PS_UTIL_RETAIN_MEMORY_H_
#define PS_UTIL_RETAIN_MEMORY_H_

#include <cstddef>

#include "ps/config.h"

namespace ps {

// Makes malloc keep up to `mb` MB of freed memory for reuse, and serve buffers of up to
// min(mb, 32) MB from its heaps instead of mapping each one afresh. A server receives and sends
// buffers of MBs every step; with glibc's defaults many of them were unmapped when freed and
// faulted in page by page when the next one was written (half the page faults and about 15%
// of a server's CPU time in the LDA app's K = 1000 job). A worker's request parts for several
// servers are gathered into fresh buffers of MBs: faulting them in took 4-5 ms of a 100K-key
// push to 2 servers, a tenth of the speed of the same push to one server (whose part is the
// caller's array). Process-wide (PS_MALLOC_RETAIN_MB). Returns false when the allocator
// refused (non-glibc).
bool RetainFreedMemory(size_t mb);

// Whether a node started with `cfg` sets RetainFreedMemory: servers and workers, in a process
// of their own (not the scheduler, which moves no data, nor in-process test clusters).
bool ShouldRetainFreedMemory(const Config& cfg);

}  // namespace ps

#endif  // PS_UTIL_RETAIN_MEMORY_H_
