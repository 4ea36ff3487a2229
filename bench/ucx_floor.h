// UCX floors for bench/floor_bench: what UCX itself costs between two processes on one host,
// over its TCP transport and over shared memory, with no ps code, so that a UCX van's numbers
// can be reported as ratios to a floor of the same run (issue 17).
#ifndef PS_BENCH_UCX_FLOOR_H_
#define PS_BENCH_UCX_FLOOR_H_

#include <string>

namespace ps_bench {

/// Runs the UCX floors whose op names start with `only` (all when empty): "ucx_pingpong",
/// "ucx_pingpong_busy", "ucx_stream";
/// and prints one JSON line each: an 8-byte tagged round trip (event-driven waiting, and
/// busy-polling) and a stream of 4 MB tagged messages, each over UCX_TLS=tcp and over shared
/// memory (UCX_TLS=sm,self). A transport UCX cannot bring up prints an "error" line instead.
void UcxFloors(int iters, const std::string& only);

}  // namespace ps_bench

#endif  // PS_BENCH_UCX_FLOOR_H_
