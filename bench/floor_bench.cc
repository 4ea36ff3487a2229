// The floor under ps, measured between two processes on loopback: a bare ZeroMQ DEALER/ROUTER
// ping-pong, a bare ZeroMQ stream of 4 MB messages, 64 one-key requests in flight, a raw TCP
// ping-pong, memcpy, and UCX's tagged round trip and 4 MB stream over TCP and shared memory
// (ucx_floor.h); and among four processes, what one replica copy costs bare ZeroMQ in ps's
// 2-server/2-worker shape (chain_floor.h). Prints
// one JSON line per measurement. bench/run_kv_bench.py runs it beside kv_bench so that every
// ps number is reported as a ratio to a floor of the same run.
//
//   floor_bench [--iters N]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "chain_floor.h"
#include "ucx_floor.h"

namespace {

using ps_bench::Clock;
using ps_bench::FreePort;
using ps_bench::Pct;
using ps_bench::Us;

void NoFree(void*, void*) {}

void PrintLatency(const char* op, const std::vector<double>& lat, int iters) {
  printf("{\"bench\":\"floor\",\"op\":\"%s\",\"p50_us\":%.1f,\"p99_us\":%.1f,\"iters\":%d}\n", op,
         Pct(lat, 0.5), Pct(lat, 0.99), iters);
}

// Child: ROUTER that echoes every message (ping-pong) or acks every message (stream). With
// `sum`, it first adds the received floats into an accumulator: the least work a
// parameter server must do with a dense push.
void ZmqServer(int port, int total, bool ack_only, bool sum = false) {
  std::vector<float> acc;
  void* ctx = zmq_ctx_new();
  void* s = zmq_socket(ctx, ZMQ_ROUTER);
  std::string addr = "tcp://127.0.0.1:" + std::to_string(port);
  zmq_bind(s, addr.c_str());
  for (int i = 0; i < total; ++i) {
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    zmq_msg_recv(&id, s, 0);
    zmq_msg_recv(&body, s, 0);
    if (sum) {
      size_t n = zmq_msg_size(&body) / sizeof(float);
      if (acc.size() < n) acc.resize(n, 0.0f);
      const float* in = static_cast<const float*>(zmq_msg_data(&body));
      for (size_t j = 0; j < n; ++j) acc[j] += in[j];
    }
    zmq_msg_send(&id, s, ZMQ_SNDMORE);
    if (ack_only) {
      zmq_msg_close(&body);
      zmq_msg_init_size(&body, 1);
    }
    zmq_msg_send(&body, s, 0);
  }
  zmq_close(s);
  zmq_ctx_term(ctx);
}

// Ping-pong over one connection with a ROUTER echo. The client is a DEALER, or with
// router_client a ROUTER that connects and names the connection (ZMQ_CONNECT_ROUTING_ID),
// addressing every message to it: the layout of a node that binds and connects one socket.
void ZmqPingPong(int iters, bool router_client) {
  int port = FreePort();
  const int warm = 1000;
  pid_t pid = fork();
  if (pid == 0) {
    ZmqServer(port, iters + warm, false);
    _exit(0);
  }
  void* ctx = zmq_ctx_new();
  void* s = zmq_socket(ctx, router_client ? ZMQ_ROUTER : ZMQ_DEALER);
  if (router_client) {
    zmq_setsockopt(s, ZMQ_ROUTING_ID, "client", 6);
    zmq_setsockopt(s, ZMQ_CONNECT_ROUTING_ID, "server", 6);
  }
  std::string addr = "tcp://127.0.0.1:" + std::to_string(port);
  zmq_connect(s, addr.c_str());
  std::vector<double> lat;
  char buf[64];
  for (int i = 0; i < iters + warm; ++i) {
    auto t = Clock::now();
    if (router_client) zmq_send(s, "server", 6, ZMQ_SNDMORE);
    zmq_send(s, "ping-ping-ping-p", 16, 0);
    if (router_client) zmq_recv(s, buf, sizeof(buf), 0);  // the routing id
    zmq_recv(s, buf, sizeof(buf), 0);
    if (i >= warm) lat.push_back(Us(Clock::now() - t));
  }
  PrintLatency(router_client ? "zmq_pingpong_router_router" : "zmq_pingpong", lat, iters);
  zmq_close(s);
  zmq_ctx_term(ctx);
  waitpid(pid, nullptr, 0);
}

// Receives one whole multipart message (all its frames).
void RecvAll(void* s) {
  char buf[64];
  int more = 1;
  size_t len = sizeof(more);
  do {
    zmq_recv(s, buf, sizeof(buf), 0);
    zmq_getsockopt(s, ZMQ_RCVMORE, &more, &len);
  } while (more);
}

// Sends one message as ps sends a one-key push+pull: a meta frame of a ps request's size, then
// 8 bytes of key and 4 of value; or one 16-byte frame when !ps_shape.
void SendShaped(void* s, bool ps_shape) {
  static const char meta[48] = {1};
  const char key[8] = {2}, val[4] = {3};
  if (!ps_shape) {
    zmq_send(s, "ping-ping-ping-p", 16, 0);
    return;
  }
  zmq_send(s, meta, sizeof(meta), ZMQ_SNDMORE);
  zmq_send(s, key, sizeof(key), ZMQ_SNDMORE);
  zmq_send(s, val, sizeof(val), 0);
}

void* Open(void* ctx, int type, bool bind, int port) {
  void* s = zmq_socket(ctx, type);
  std::string addr = "tcp://127.0.0.1:" + std::to_string(port);
  bind ? zmq_bind(s, addr.c_str()) : zmq_connect(s, addr.c_str());
  return s;
}

// A ping-pong partner in a child process, in one of three shapes: one DEALER-to-ROUTER
// connection (the bar's floor); ps's layout, where each side sends on its own DEALER and
// receives on its own ROUTER (two TCP connections); and that layout carrying a ps request's
// frames (meta, key, value) — ZeroMQ's cost for ps's wire shape and layout with no ps code.
struct EchoPair {
  enum Shape { kOneConnection, kTwoConnections, kPsShape };
  Shape shape;
  int port_a = FreePort(), port_b = FreePort();
  pid_t pid = -1;
  void *ctx = nullptr, *in = nullptr, *out = nullptr;
  std::vector<double> lat;

  explicit EchoPair(Shape s) : shape(s) {}
  bool two() const { return shape != kOneConnection; }

  // Forks the partner for `total` round trips and connects to it.
  void Start(int total) {
    pid = fork();
    if (pid == 0) {
      if (!two()) {
        ZmqServer(port_b, total, false);
        _exit(0);
      }
      void* c = zmq_ctx_new();
      void* r = Open(c, ZMQ_ROUTER, true, port_b);
      void* d = Open(c, ZMQ_DEALER, false, port_a);
      for (int i = 0; i < total; ++i) {
        RecvAll(r);  // routing id, then the frames
        SendShaped(d, shape == kPsShape);
      }
      zmq_close(d);
      zmq_close(r);
      zmq_ctx_term(c);
      _exit(0);
    }
    ctx = zmq_ctx_new();
    out = Open(ctx, ZMQ_DEALER, false, port_b);
    in = two() ? Open(ctx, ZMQ_ROUTER, true, port_a) : out;
  }
  // One round trip, recorded unless it is a warm-up.
  void PingPong(bool record) {
    auto t = Clock::now();
    SendShaped(out, shape == kPsShape);
    RecvAll(in);
    if (record) lat.push_back(Us(Clock::now() - t));
  }
  void Stop() {
    if (two()) zmq_close(in);
    zmq_close(out);
    zmq_ctx_term(ctx);
    waitpid(pid, nullptr, 0);
  }
};

// Ping-pong in ps's two-connection layout on its own.
void ZmqPingPongTwoSockets(int iters) {
  const int warm = 1000;
  EchoPair p(EchoPair::kTwoConnections);
  p.Start(iters + warm);
  for (int i = 0; i < iters + warm; ++i) p.PingPong(i >= warm);
  PrintLatency("zmq_pingpong_two_sockets", p.lat, iters);
  p.Stop();
}

// The three shapes at the same time, in alternating blocks of 500, so that their ratios do
// not depend on which minute each ran in.
void ZmqLayouts(int iters) {
  const int warm = 500, block = 500, total = iters + warm;
  std::vector<EchoPair> pairs{EchoPair(EchoPair::kOneConnection),
                              EchoPair(EchoPair::kTwoConnections), EchoPair(EchoPair::kPsShape)};
  for (auto& p : pairs) p.Start(total);
  for (int done = 0; done < total; done += block) {
    for (auto& p : pairs) {
      for (int i = done; i < std::min(total, done + block); ++i) p.PingPong(i >= warm);
    }
  }
  const double one = Pct(pairs[0].lat, 0.5), two = Pct(pairs[1].lat, 0.5),
               shape = Pct(pairs[2].lat, 0.5);
  printf(
      "{\"bench\":\"floor\",\"op\":\"zmq_layouts\",\"one_connection_p50_us\":%.1f,"
      "\"two_connections_p50_us\":%.1f,\"ps_shape_p50_us\":%.1f,\"ratio_two_to_one\":%.3f,"
      "\"ratio_ps_shape_to_one\":%.3f,\"iters\":%d}\n",
      one, two, shape, two / one, shape / one, iters);
  for (auto& p : pairs) p.Stop();
}

// One-key requests with `window` in flight, each answered by the partner: the floor under
// kv_bench's "64 one-key pushes in flight" (issue 17's 320 K req/s bar), in ZeroMQ's one
// connection and in ps's layout and frames, with no parameter-server work at either end.
void ZmqInFlight(int count, int window) {
  for (auto shape : {EchoPair::kOneConnection, EchoPair::kPsShape}) {
    EchoPair p(shape);
    const int warm = 1000;
    p.Start(count + warm);
    for (int i = 0; i < warm; ++i) p.PingPong(false);
    auto t = Clock::now();
    int sent = 0, answered = 0;
    while (answered < count) {
      while (sent < count && sent - answered < window) {
        SendShaped(p.out, shape == EchoPair::kPsShape);
        ++sent;
      }
      RecvAll(p.in);
      ++answered;
    }
    const double sec = Us(Clock::now() - t) / 1e6;
    printf(
        "{\"bench\":\"floor\",\"op\":\"zmq_inflight\",\"layout\":\"%s\",\"window\":%d,"
        "\"requests_per_s\":%.0f,\"requests\":%d}\n",
        shape == EchoPair::kPsShape ? "ps" : "one_connection", window, count / sec, count);
    p.Stop();
  }
}

// 4 MB messages with `window` in flight, each acked by the receiver: the same shape as a
// pipelined push, without any parameter-server work.
void ZmqStream(size_t bytes, int count, int window, bool sum) {
  int port = FreePort();
  pid_t pid = fork();
  if (pid == 0) {
    ZmqServer(port, count + 2, true, sum);
    _exit(0);
  }
  void* ctx = zmq_ctx_new();
  void* s = zmq_socket(ctx, ZMQ_DEALER);
  std::string addr = "tcp://127.0.0.1:" + std::to_string(port);
  zmq_connect(s, addr.c_str());
  std::vector<char> data(bytes, 1);
  char ack[8];
  for (int i = 0; i < 2; ++i) {  // warm-up
    zmq_msg_t m;
    zmq_msg_init_data(&m, data.data(), bytes, NoFree, nullptr);
    zmq_msg_send(&m, s, 0);
    zmq_recv(s, ack, sizeof(ack), 0);
  }
  auto t = Clock::now();
  int sent = 0, acked = 0;
  while (acked < count) {
    while (sent < count && sent - acked < window) {
      zmq_msg_t m;
      zmq_msg_init_data(&m, data.data(), bytes, NoFree, nullptr);
      zmq_msg_send(&m, s, 0);
      ++sent;
    }
    zmq_recv(s, ack, sizeof(ack), 0);
    ++acked;
  }
  double sec = Us(Clock::now() - t) / 1e6;
  printf("{\"bench\":\"floor\",\"op\":\"%s\",\"bytes\":%zu,\"window\":%d,\"MBps\":%.1f}\n",
         sum ? "zmq_stream_sum" : "zmq_stream", bytes, window, count * bytes / sec / 1e6);
  zmq_close(s);
  zmq_ctx_term(ctx);
  waitpid(pid, nullptr, 0);
}

void TcpPingPong(int iters) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  listen(lfd, 1);
  socklen_t len = sizeof(sa);
  getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len);
  const int warm = 1000;
  pid_t pid = fork();
  if (pid == 0) {
    int c = accept(lfd, nullptr, nullptr);
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char b[16];
    for (int i = 0; i < iters + warm; ++i) {
      if (read(c, b, 16) != 16 || write(c, b, 16) != 16) break;
    }
    _exit(0);
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::vector<double> lat;
  char b[16] = "ping";
  for (int i = 0; i < iters + warm; ++i) {
    auto t = Clock::now();
    if (write(fd, b, 16) != 16 || read(fd, b, 16) != 16) break;
    if (i >= warm) lat.push_back(Us(Clock::now() - t));
  }
  PrintLatency("tcp_pingpong", lat, iters);
  close(fd);
  close(lfd);
  waitpid(pid, nullptr, 0);
}

void Memcpy() {
  const size_t n = 64 << 20;
  std::vector<char> a(n, 1), b(n, 2);
  auto t = Clock::now();
  for (int i = 0; i < 10; ++i) std::memcpy(b.data(), a.data(), n);
  double sec = Us(Clock::now() - t) / 1e6;
  printf("{\"bench\":\"floor\",\"op\":\"memcpy\",\"bytes\":%zu,\"MBps\":%.1f,\"check\":%d}\n", n,
         10.0 * n / sec / 1e6, b[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 20000;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--iters") iters = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--only") only = argv[i + 1];
  }
  auto want = [&](const char* w) { return only.empty() || only == w; };
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (want("zmq_pingpong")) ZmqPingPong(iters, false);
  if (want("zmq_pingpong_two_sockets")) ZmqPingPongTwoSockets(iters);
  if (want("zmq_layouts")) ZmqLayouts(iters);
  if (want("zmq_pingpong_router_router")) ZmqPingPong(iters, true);
  if (want("tcp_pingpong")) TcpPingPong(iters);
  if (want("zmq_inflight")) ZmqInFlight(std::max(iters, 20000) * 5, 64);
  if (want("zmq_stream")) {
    ZmqStream(4 << 20, 200, 1, false);
    ZmqStream(4 << 20, 200, 4, false);
    ZmqStream(4 << 20, 200, 1, true);
    ZmqStream(4 << 20, 200, 4, true);
  }
  if (want("memcpy")) Memcpy();
  if (only.empty() || only.rfind("ucx", 0) == 0) ps_bench::UcxFloors(iters, only);
  ps_bench::ChainFloors(iters, only);
  return 0;
}
