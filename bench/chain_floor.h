// Chain floors for bench/floor_bench: what one replica copy costs on bare ZeroMQ, with no ps
// code, in ps's 2-server/2-worker shape (issue 17's bars for replication on). Two "servers"
// and two "clients" in four processes; client i sends its one-key requests to server i, and
// its sparse pushes in halves to both servers (as ps's ring slices a push). Without a copy the
// server that got a request sums its values and answers; with one it sums, forwards the frames
// to the other server, which sums them and answers the client (the chain's tail answers, as in
// ps). Both modes alternate in blocks, both clients at once, so their ratio does not depend on
// the minute each ran in.
#ifndef PS_BENCH_CHAIN_FLOOR_H_
#define PS_BENCH_CHAIN_FLOOR_H_

#include <string>

namespace ps_bench {

/// Runs the chain floors whose op names start with `only` (all when empty): "zmq_chain_rtt"
/// (one-key round trips, `iters` per mode and client) and "zmq_chain_stream" (1M-key pushes of
/// 8-byte keys and 4-byte values). Prints one JSON line each with both modes and their ratio.
/// "zmq_chain_stream_none" (only when named exactly) runs the pushes without copies alone,
/// `iters` blocks of 4 pushes per client, and adds the user and system CPU of its processes.
void ChainFloors(int iters, const std::string& only);

}  // namespace ps_bench

#endif  // PS_BENCH_CHAIN_FLOOR_H_
