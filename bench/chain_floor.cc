// Chain floors (chain_floor.h): bare ZeroMQ in ps's 2-server/2-worker shape, with and without
// one replica copy.
#include "chain_floor.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "ps/config.h"
#include "util/retain_memory.h"

namespace ps_bench {
namespace {

enum Mode : uint8_t { kNoCopy = 0, kCopy = 1, kStop = 2 };

// The first frame of every message: what the servers need to route it.
struct Header {
  uint8_t mode;
  uint8_t client;  // 0 or 1: whom the answer goes to
  uint8_t hop;     // 0 from the client, 1 from the other server (a copy)
  uint8_t pad;
  uint32_t seq;
};

// A process that hears nothing for this long gives up (a peer died): the bench reports an
// error line instead of waiting for ever.
constexpr int kRecvTimeoutMs = 60000;

// Processes 0 and 1 are the servers, 2 and 3 the clients; each binds a ROUTER to receive and
// sends on a DEALER per peer (ps's layout).
struct Proc {
  void* ctx = zmq_ctx_new();
  void* in = nullptr;
  std::vector<void*> out;

  Proc(int self, const std::vector<int>& ports) : out(ports.size(), nullptr) {
    in = zmq_socket(ctx, ZMQ_ROUTER);
    zmq_setsockopt(in, ZMQ_RCVTIMEO, &kRecvTimeoutMs, sizeof(kRecvTimeoutMs));
    zmq_bind(in, ("tcp://127.0.0.1:" + std::to_string(ports[self])).c_str());
    for (size_t p = 0; p < ports.size(); ++p) {
      if (static_cast<int>(p) == self) continue;
      out[p] = zmq_socket(ctx, ZMQ_DEALER);
      zmq_setsockopt(out[p], ZMQ_LINGER, &kRecvTimeoutMs, sizeof(kRecvTimeoutMs));
      zmq_connect(out[p], ("tcp://127.0.0.1:" + std::to_string(ports[p])).c_str());
    }
  }
  ~Proc() {
    for (void* s : out) {
      if (s) zmq_close(s);
    }
    zmq_close(in);
    zmq_ctx_term(ctx);
  }
  // One message's frames, without the routing id.
  std::vector<zmq_msg_t> Recv() {
    std::vector<zmq_msg_t> frames;
    int more = 1;
    bool id = true;
    while (more) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      if (zmq_msg_recv(&m, in, 0) < 0) {
        std::fprintf(stderr, "chain floor: nothing received for %d ms (%s)\n", kRecvTimeoutMs,
                     zmq_strerror(zmq_errno()));
        _exit(1);  // the parent reports the missing measurement
      }
      more = zmq_msg_more(&m);
      if (id) {
        zmq_msg_close(&m);
        id = false;
      } else {
        frames.push_back(m);
      }
    }
    return frames;
  }
  // Sends the frames (taking them over) to process p.
  void Send(int p, std::vector<zmq_msg_t>* frames) {
    for (size_t i = 0; i < frames->size(); ++i) {
      zmq_msg_send(&(*frames)[i], out[p], i + 1 < frames->size() ? ZMQ_SNDMORE : 0);
    }
    frames->clear();
  }
};

zmq_msg_t Frame(const void* data, size_t n) {
  zmq_msg_t m;
  zmq_msg_init_size(&m, n);
  std::memcpy(zmq_msg_data(&m), data, n);
  return m;
}

void NoFree(void*, void*) {}

// Freed receive buffers are reused rather than handed back to the kernel and faulted in again
// for the next message, with the settings of ps's nodes: without it each 4 MB frame costs a
// thousand page faults, and the floor ran below ps itself.
void RetainFreedMemory() { ps::RetainFreedMemory(ps::Config().malloc_retain_mb); }

// A frame that refers to `data` (which outlives the send): ps sends its arrays without a copy.
zmq_msg_t Borrowed(const void* data, size_t n) {
  zmq_msg_t m;
  zmq_msg_init_data(&m, const_cast<void*>(data), n, NoFree, nullptr);
  return m;
}

// A server: sums each request's values (its last frame) into a flat array, then answers the
// client, or with a copy forwards the frames to the other server, whose sum answers.
void Server(int self, const std::vector<int>& ports) {
  RetainFreedMemory();
  Proc p(self, ports);
  std::vector<float> acc;
  const char meta[48] = {1};
  int stops = 0;
  while (stops < 2) {
    std::vector<zmq_msg_t> f = p.Recv();
    Header h;
    std::memcpy(&h, zmq_msg_data(&f[0]), sizeof(h));
    if (h.mode == kStop) {
      ++stops;
    } else {
      const size_t n = zmq_msg_size(&f.back()) / sizeof(float);
      if (acc.size() < n) acc.resize(n, 0.0f);
      const float* v = static_cast<const float*>(zmq_msg_data(&f.back()));
      for (size_t j = 0; j < n; ++j) acc[j] += v[j];
      if (h.mode == kCopy && h.hop == 0) {
        h.hop = 1;
        std::memcpy(zmq_msg_data(&f[0]), &h, sizeof(h));
        p.Send(1 - self, &f);
        continue;
      }
      std::vector<zmq_msg_t> ans{Frame(&h, sizeof(h)), Frame(meta, sizeof(meta))};
      p.Send(2 + h.client, &ans);
    }
    for (auto& m : f) zmq_msg_close(&m);
  }
}

// A client: `rounds` blocks of `block` requests in each mode, alternating; one-key requests to
// its own server, or pushes of `keys` keys in halves to both. Writes what it measured to fd.
void Client(int self, const std::vector<int>& ports, bool stream, bool none_only, int block,
            int rounds, size_t keys, int fd) {
  RetainFreedMemory();
  Proc p(self, ports);
  const int me = self - 2;
  const char meta[48] = {2};
  std::vector<uint64_t> key(keys);
  std::vector<float> val(keys, 1.0f);
  for (size_t i = 0; i < keys; ++i) key[i] = i * 7919;
  std::vector<double> lat[2];
  double sec[2] = {0, 0};
  uint32_t seq = 0;
  auto request = [&](Mode mode) {
    const int servers = stream ? 2 : 1;
    for (int s = 0; s < servers; ++s) {
      const size_t half = keys / servers, at = s * half;
      Header h{mode, static_cast<uint8_t>(me), 0, 0, seq++};
      std::vector<zmq_msg_t> f{Frame(&h, sizeof(h)), Frame(meta, sizeof(meta)),
                               Borrowed(key.data() + at, half * sizeof(uint64_t)),
                               Borrowed(val.data() + at, half * sizeof(float))};
      p.Send(stream ? s : me, &f);
    }
    for (int s = 0; s < servers; ++s) {
      for (auto& m : p.Recv()) zmq_msg_close(&m);
    }
  };
  for (int i = 0; i < 2 * block; ++i) request(i % 2 && !none_only ? kCopy : kNoCopy);  // warm-up
  for (int r = 0; r < 2 * rounds; ++r) {
    if (none_only && r % 2) continue;
    const Mode mode = r % 2 ? kCopy : kNoCopy;
    const auto start = Clock::now();
    for (int i = 0; i < block; ++i) {
      const auto t = Clock::now();
      request(mode);
      lat[mode].push_back(Us(Clock::now() - t));
    }
    sec[mode] += Sec(Clock::now() - start);
  }
  for (int s = 0; s < 2; ++s) {
    std::vector<zmq_msg_t> f;
    Header h{kStop, static_cast<uint8_t>(me), 0, 0, 0};
    f.push_back(Frame(&h, sizeof(h)));
    p.Send(s, &f);
  }
  const double n = static_cast<double>(block) * rounds;
  char line[160];
  const int len = std::snprintf(line, sizeof(line), "%.2f %.2f %.2f %.2f\n", Pct(lat[kNoCopy], 0.5),
                                Pct(lat[kCopy], 0.5), n * keys * sizeof(float) / sec[kNoCopy] / 1e6,
                                (sec[kCopy] > 0 ? n * keys * sizeof(float) / sec[kCopy] / 1e6 : 0));
  if (write(fd, line, len) != len) std::perror("chain floor: write");
}

double CpuSec(const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; }

void Run(bool stream, bool none_only, int block, int rounds, size_t keys) {
  rusage before;
  getrusage(RUSAGE_CHILDREN, &before);
  std::vector<int> ports;
  for (int i = 0; i < 4; ++i) ports.push_back(FreePort());
  int fds[2];
  if (pipe(fds) != 0) return;
  std::vector<pid_t> pids;
  for (int i = 0; i < 4; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      if (i < 2) {
        Server(i, ports);
      } else {
        Client(i, ports, stream, none_only, block, rounds, keys, fds[1]);
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  close(fds[1]);
  FILE* in = fdopen(fds[0], "r");
  double v[2][4] = {};
  int got = 0;
  while (got < 2 &&
         std::fscanf(in, "%lf %lf %lf %lf", &v[got][0], &v[got][1], &v[got][2], &v[got][3]) == 4) {
    ++got;
  }
  std::fclose(in);
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  if (got < 2) {
    std::printf("{\"bench\":\"floor\",\"op\":\"%s\",\"error\":\"a client did not report\"}\n",
                stream ? "zmq_chain_stream" : "zmq_chain_rtt");
    return;
  }
  if (none_only) {
    // The CPU of all four processes (set-up and warm-up included) for `rounds` blocks of
    // pushes from each client: bench/cpu_split.py subtracts two runs of different lengths.
    rusage after;
    getrusage(RUSAGE_CHILDREN, &after);
    std::printf(
        "{\"bench\":\"floor\",\"op\":\"zmq_chain_stream_none\",\"keys\":%zu,\"pushes\":%d,"
        "\"no_copy_MBps\":%.1f,\"user_s\":%.3f,\"sys_s\":%.3f}\n",
        keys, block * rounds, v[0][2] + v[1][2], CpuSec(after.ru_utime) - CpuSec(before.ru_utime),
        CpuSec(after.ru_stime) - CpuSec(before.ru_stime));
  } else if (stream) {
    const double none = v[0][2] + v[1][2], copy = v[0][3] + v[1][3];
    std::printf(
        "{\"bench\":\"floor\",\"op\":\"zmq_chain_stream\",\"keys\":%zu,\"pushes\":%d,"
        "\"no_copy_MBps\":%.1f,\"copy_MBps\":%.1f,\"ratio_copy_to_none\":%.3f}\n",
        keys, block * rounds, none, copy, copy / none);
  } else {
    const double none = (v[0][0] + v[1][0]) / 2, copy = (v[0][1] + v[1][1]) / 2;
    std::printf(
        "{\"bench\":\"floor\",\"op\":\"zmq_chain_rtt\",\"iters\":%d,\"no_copy_p50_us\":%.1f,"
        "\"copy_p50_us\":%.1f,\"ratio_copy_to_none\":%.3f}\n",
        block * rounds, none, copy, copy / none);
  }
}

}  // namespace

void ChainFloors(int iters, const std::string& only) {
  auto want = [&](const char* op) { return only.empty() || std::string(op).rfind(only, 0) == 0; };
  if (want("zmq_chain_rtt")) Run(false, false, 250, std::max(1, iters / 250), 1);
  if (only == "zmq_chain_stream_none") {
    Run(true, true, 4, std::max(1, iters), 1000000);
  } else if (want("zmq_chain_stream")) {
    Run(true, false, 4, 16, 1000000);
  }
}

}  // namespace ps_bench
