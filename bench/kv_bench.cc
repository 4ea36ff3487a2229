// Push/pull benchmark, run as a ps job (every role runs this program):
//   tracker/ps-launch -s 1 -w 1 -- build/bench/kv_bench
// Each worker prints one JSON line per measurement; with several workers they run each phase
// at the same time (barriers between phases). bench/run_kv_bench.py runs it together with the
// floor measurements and prints ratios.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

#include "bench_util.h"
#include "ps/ps.h"

namespace {

using ps_bench::Clock;
using ps_bench::FreePort;
using ps_bench::Pct;
using ps_bench::Sec;

// A bare ZeroMQ echo (ROUTER) in a child process, forked before any thread exists. The worker
// alternates blocks of bare ping-pongs to it with blocks of ps round trips, so both see the
// same machine noise and their ratio is meaningful on a noisy host.
struct Echo {
  pid_t pid = -1;
  int port = 0;
  void* ctx = nullptr;
  void* sock = nullptr;

  void Start() {
    port = FreePort();
    pid = fork();
    if (pid == 0) {
      void* c = zmq_ctx_new();
      void* r = zmq_socket(c, ZMQ_ROUTER);
      std::string addr = "tcp://127.0.0.1:" + std::to_string(port);
      zmq_bind(r, addr.c_str());
      for (;;) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        zmq_msg_recv(&id, r, 0);
        zmq_msg_recv(&body, r, 0);
        bool stop = zmq_msg_size(&body) == 4 && memcmp(zmq_msg_data(&body), "stop", 4) == 0;
        zmq_msg_send(&id, r, ZMQ_SNDMORE);
        zmq_msg_send(&body, r, 0);
        if (stop) break;
      }
      zmq_close(r);
      zmq_ctx_term(c);
      _exit(0);
    }
  }
  double PingPong() {
    if (!sock) {
      ctx = zmq_ctx_new();
      sock = zmq_socket(ctx, ZMQ_DEALER);
      std::string addr = "tcp://127.0.0.1:" + std::to_string(port);
      zmq_connect(sock, addr.c_str());
    }
    char buf[64];
    auto t = Clock::now();
    zmq_send(sock, "ping-ping-ping-p", 16, 0);
    zmq_recv(sock, buf, sizeof(buf), 0);
    return Sec(Clock::now() - t) * 1e6;
  }
  void Stop() {
    if (pid <= 0) return;
    char buf[8];
    if (!sock) PingPong();
    zmq_send(sock, "stop", 4, 0);
    zmq_recv(sock, buf, sizeof(buf), 0);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
};

struct Bench {
  ps::Node* node;
  ps::KVWorker<float>* kv;
  int rank, S, W;
  double scale;
  Echo* echo;
  int sparse_reps = 0;     // --reps N: the sparse phase's repetitions (else from the scale)
  bool push_only = false;  // --push-only 1: the sparse phase pushes only

  void Emit(const std::string& op, const std::string& fields) {
    printf("{\"bench\":\"kv\",\"servers\":%d,\"workers\":%d,\"worker\":%d,\"op\":\"%s\",%s}\n", S,
           W, rank, op.c_str(), fields.c_str());
    fflush(stdout);
  }

  void Latency(int iters) {
    ps::SArray<ps::Key> key{ps::HashKey(1)};
    ps::SArray<float> val{1.0f}, out(1);
    std::vector<double> pp, push, pull, bare;
    for (int i = 0; i < 500; ++i) {
      kv->Wait(kv->PushPull(key, val, &out));
      echo->PingPong();
    }
    // Interleaved blocks: bare ZeroMQ, then ps, ten times over.
    const int block = std::max(1, iters / 10);
    for (int b = 0; b < 10; ++b) {
      for (int i = 0; i < block; ++i) bare.push_back(echo->PingPong());
      for (int i = 0; i < block; ++i) {
        auto t = Clock::now();
        kv->Wait(kv->PushPull(key, val, &out));
        pp.push_back(Sec(Clock::now() - t) * 1e6);
      }
      for (int i = 0; i < block / 2; ++i) {
        auto t = Clock::now();
        kv->Wait(kv->Push(key, val));
        push.push_back(Sec(Clock::now() - t) * 1e6);
        t = Clock::now();
        kv->Wait(kv->Pull(key, &out));
        pull.push_back(Sec(Clock::now() - t) * 1e6);
      }
    }
    char buf[384];
    snprintf(buf, sizeof(buf),
             "\"pushpull_p50_us\":%.1f,\"pushpull_p99_us\":%.1f,\"push_p50_us\":%.1f,"
             "\"pull_p50_us\":%.1f,\"bare_zmq_p50_us\":%.1f,\"bare_zmq_p99_us\":%.1f,"
             "\"ratio_pushpull_to_bare_p50\":%.3f,\"iters\":%d",
             Pct(pp, 0.5), Pct(pp, 0.99), Pct(push, 0.5), Pct(pull, 0.5), Pct(bare, 0.5),
             Pct(bare, 0.99), Pct(pp, 0.5) / Pct(bare, 0.5), iters);
    Emit("rtt_1key", buf);
  }

  void Sparse(size_t n) {
    ps::SArray<ps::Key> keys(n);
    for (size_t i = 0; i < n; ++i) keys[i] = ps::HashKey(i);
    std::sort(keys.begin(), keys.end());
    ps::SArray<float> vals(n, 0.5f), out(n);
    kv->Wait(kv->Push(keys, vals));  // inserts: not timed
    node->Barrier(ps::kWorkerGroup);
    const int reps = sparse_reps > 0
                         ? sparse_reps
                         : std::max(5, std::min(3000, static_cast<int>(scale * 2e7 / n)));
    const double mb = n * sizeof(float) / 1e6 * reps;
    char buf[256];
    auto t = Clock::now();
    for (int r = 0; r < reps; ++r) kv->Wait(kv->Push(keys, vals));
    double push = mb / Sec(Clock::now() - t);
    if (push_only) {
      snprintf(buf, sizeof(buf), "\"keys\":%zu,\"push_MBps\":%.1f,\"reps\":%d", n, push, reps);
      Emit("sparse", buf);
      node->Barrier(ps::kWorkerGroup);
      return;
    }
    t = Clock::now();
    for (int r = 0; r < reps; ++r) kv->Wait(kv->Pull(keys, &out));
    double pull = mb / Sec(Clock::now() - t);
    // Sanity (one worker only: then every key holds 0.5 * (1 + reps)).
    bool ok = W > 1 || (out.size() == n && out[n / 2] == 0.5f * (1 + reps));
    t = Clock::now();
    for (int r = 0; r < reps; ++r) kv->Wait(kv->PushPull(keys, vals, &out));
    double pushpull = mb / Sec(Clock::now() - t);
    snprintf(
        buf, sizeof(buf),
        "\"keys\":%zu,\"push_MBps\":%.1f,\"pull_MBps\":%.1f,\"pushpull_MBps\":%.1f,\"reps\":%d,"
        "\"values_ok\":%s",
        n, push, pull, pushpull, reps, ok ? "true" : "false");
    Emit("sparse", buf);
    node->Barrier(ps::kWorkerGroup);
  }

  // Pulls every stored key (what saving a model does); run after the sparse phases.
  void RangePull() {
    ps::SArray<ps::Key> keys;
    ps::SArray<float> vals;
    ps::SArray<int> lens;
    auto t = Clock::now();
    const int reps = 3;
    for (int r = 0; r < reps; ++r) kv->Wait(kv->PullRange(ps::Range::All(), &keys, &vals, &lens));
    double sec = Sec(Clock::now() - t);
    char buf[160];
    snprintf(buf, sizeof(buf), "\"keys\":%zu,\"keys_per_s\":%.0f,\"MBps\":%.1f", keys.size(),
             keys.size() * reps / sec, vals.size() * sizeof(float) * reps / sec / 1e6);
    Emit("range_pull_all", buf);
    node->Barrier(ps::kWorkerGroup);
  }

  // Pushes `count` times with at most `window` pushes in flight; returns the seconds taken.
  double PushWindowed(const ps::SArray<ps::Key>& keys, const ps::SArray<float>& vals, int window,
                      int count) {
    std::deque<int64_t> inflight;
    auto t = Clock::now();
    for (int i = 0; i < count; ++i) {
      if (static_cast<int>(inflight.size()) == window) {
        kv->Wait(inflight.front());
        inflight.pop_front();
      }
      inflight.push_back(kv->Push(keys, vals));
    }
    for (int64_t ts : inflight) kv->Wait(ts);
    return Sec(Clock::now() - t);
  }

  void Dense(size_t bytes, int window) {
    const size_t per_key = bytes / 2 / sizeof(float);
    ps::SArray<ps::Key> keys{ps::HashKey(100 + bytes), ps::HashKey(200 + bytes)};
    std::sort(keys.begin(), keys.end());
    ps::SArray<float> vals(2 * per_key, 0.25f), out(2 * per_key);
    kv->Wait(kv->Push(keys, vals));
    node->Barrier(ps::kWorkerGroup);
    const int reps = std::max(4, static_cast<int>(scale * (800 << 20) / bytes));
    double push = bytes * reps / 1e6 / PushWindowed(keys, vals, window, reps);
    double pull = 0;
    if (window == 1) {
      auto t = Clock::now();
      for (int r = 0; r < reps; ++r) kv->Wait(kv->Pull(keys, &out));
      pull = bytes * reps / 1e6 / Sec(Clock::now() - t);
    }
    char buf[256];
    snprintf(buf, sizeof(buf),
             "\"bytes\":%zu,\"window\":%d,\"push_MBps\":%.1f,\"pull_MBps\":%.1f,\"reps\":%d", bytes,
             window, push, pull, reps);
    Emit("dense", buf);
    node->Barrier(ps::kWorkerGroup);
  }

  void InFlight(int window, int total) {
    ps::SArray<ps::Key> key{ps::HashKey(7)};
    ps::SArray<float> val{1.0f};
    double rate = total / PushWindowed(key, val, window, total);
    char buf[128];
    snprintf(buf, sizeof(buf), "\"window\":%d,\"requests_per_s\":%.0f,\"total\":%d", window, rate,
             total);
    Emit("inflight_1key_push", buf);
    node->Barrier(ps::kWorkerGroup);
  }
};

}  // namespace

int main(int argc, char** argv) {
  double scale = 1.0;
  std::string only;
  size_t keys_only = 0;  // --keys N: the sparse phase with N keys only
  int reps = 0;
  bool push_only = false, rusage = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--scale") scale = std::stod(argv[i + 1]);
    if (k == "--only") only = argv[i + 1];
    if (k == "--keys") keys_only = std::stoul(argv[i + 1]);
    if (k == "--reps") reps = std::stoi(argv[i + 1]);
    if (k == "--push-only") push_only = std::stoi(argv[i + 1]) != 0;
    if (k == "--rusage") rusage = std::stoi(argv[i + 1]) != 0;
  }
  // --rusage 1: every process prints the user and system CPU it used (all its threads) as it
  // ends, for bench/cpu_split.py.
  const char* role = getenv("PS_ROLE");
  auto report_cpu = [&] {
    if (!rusage) return;
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    printf("{\"bench\":\"kv\",\"op\":\"rusage\",\"role\":\"%s\",\"user_s\":%.3f,\"sys_s\":%.3f}\n",
           role ? role : "", u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6,
           u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6);
    fflush(stdout);
  };
  Echo echo;
  if (role && std::string(role) == "worker") echo.Start();  // before any thread exists
  try {
    ps::Node node(ps::Config::FromEnv());
    node.Start();
    if (node.role() == ps::Role::kServer) {
      ps::KVServer<float> server(&node);
      node.Finalize();
      report_cpu();
      return 0;
    }
    if (node.role() == ps::Role::kWorker) {
      ps::KVWorker<float> kv(&node);
      Bench b{&node, &kv, node.rank(), node.num_servers(), node.num_workers(), scale, &echo};
      b.sparse_reps = reps;
      b.push_only = push_only;
      auto want = [&](const char* what) { return only.empty() || only == what; };
      if (want("rtt")) b.Latency(static_cast<int>(20000 * scale));
      if (want("sparse")) {
        for (size_t n : {1000u, 100000u, 1000000u}) {
          if (keys_only == 0 || n == keys_only) b.Sparse(n);
        }
        if (keys_only == 0) b.RangePull();
      }
      if (want("dense")) {
        b.Dense(4 << 20, 1);
        b.Dense(4 << 20, 4);
        b.Dense(64 << 20, 1);
      }
      if (want("inflight")) b.InFlight(64, static_cast<int>(200000 * scale));
    }
    node.Finalize();
    echo.Stop();
    if (node.role() == ps::Role::kWorker) report_cpu();
  } catch (const ps::Error& e) {
    fprintf(stderr, "error: %s\n", e.what());
    echo.Stop();
    return 1;
  }
  return 0;
}
