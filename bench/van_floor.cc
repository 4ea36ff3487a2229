// The vans alone, without the rest of ps: an 8-byte round trip and a stream of 4 MB messages
// (--bytes) (window 4, each acknowledged by an 8-byte message) between two processes over ZmqVan
// and UcxVan, to set beside the raw floors of floor_bench (a van's cost over its transport) and
// kv_bench (ps's cost over its van). JSON lines.
//
//   van_floor [--van zmq|ucx] [--iters 20000] [--blocks 400] [--bytes 4194304]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "transport/ucx_van.h"
#include "transport/zmq_van.h"

namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<ps::Van> Make(const std::string& van) {
  if (van == "ucx") return std::make_unique<ps::UcxVan>();
  return std::make_unique<ps::ZmqVan>();
}

ps::Message Msg(int to, int app, ps::SArray<char> data) {
  ps::Message m;
  m.meta.set_magic(ps::kMagic);
  m.meta.set_receiver(to);
  m.meta.set_app_id(app);
  if (!data.empty()) m.data.push_back(data);
  return m;
}

bool Wait(ps::Van* v, ps::Message* m) {
  for (int i = 0; i < 100; ++i) {
    if (v->Recv(m, 100)) return true;
  }
  return false;
}

// The partner: acknowledges every message with an 8-byte one until app id -1.
int Partner(const std::string& van, int port_out, int port_in) {
  auto v = Make(van);
  const int port = v->Bind("127.0.0.1", 0);
  if (write(port_out, &port, sizeof(port)) != sizeof(port)) return 2;
  int peer = 0;
  if (read(port_in, &peer, sizeof(peer)) != sizeof(peer)) return 2;
  v->Connect(0, "127.0.0.1", peer);
  ps::SArray<char> ack(8);
  ps::Message m;
  while (Wait(v.get(), &m)) {
    if (m.meta.app_id() < 0) break;
    v->Send(Msg(0, m.meta.app_id(), ack));
  }
  v->Stop(1000);
  return 0;
}

double Pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(q * (v.size() - 1))];
}

void Run(const std::string& van, int iters, int blocks, size_t bytes) {
  int a[2], b[2];
  if (pipe(a) != 0 || pipe(b) != 0) return;
  const pid_t pid = fork();
  if (pid == 0) _exit(Partner(van, a[1], b[0]));
  auto v = Make(van);
  const int port = v->Bind("127.0.0.1", 0);
  int child = 0;
  bool ok = write(b[1], &port, sizeof(port)) == sizeof(port) &&
            read(a[0], &child, sizeof(child)) == sizeof(child);
  if (ok) v->Connect(1, "127.0.0.1", child);
  ps::Message m;
  ps::SArray<char> small(8);
  std::vector<double> lat;
  for (int i = 0; ok && i < iters + 200; ++i) {
    const auto t0 = Clock::now();
    ok = v->Send(Msg(1, 1, small)) && Wait(v.get(), &m);
    if (i >= 200)
      lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  ps::SArray<char> big(bytes);
  const int window = 4;
  double mbps = 0;
  if (ok) {
    const auto t0 = Clock::now();
    int sent = 0, acked = 0;
    while (ok && acked < blocks) {
      while (ok && sent < blocks && sent - acked < window) {
        ok = v->Send(Msg(1, 2, big));
        ++sent;
      }
      ok = ok && Wait(v.get(), &m);
      ++acked;
    }
    mbps = blocks * static_cast<double>(bytes) /
           std::chrono::duration<double>(Clock::now() - t0).count() / 1e6;
  }
  v->Send(Msg(1, -1, small));
  v->Stop(1000);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!ok) {
    printf("{\"bench\":\"van_floor\",\"van\":\"%s\",\"error\":\"a message was lost or late\"}\n",
           van.c_str());
    return;
  }
  printf(
      "{\"bench\":\"van_floor\",\"van\":\"%s\",\"op\":\"pingpong\",\"p50_us\":%.1f,"
      "\"p99_us\":%.1f,\"iters\":%d}\n",
      van.c_str(), Pct(lat, 0.5), Pct(lat, 0.99), iters);
  printf(
      "{\"bench\":\"van_floor\",\"van\":\"%s\",\"op\":\"stream\",\"bytes\":%zu,\"window\":%d,"
      "\"MBps\":%.1f}\n",
      van.c_str(), bytes, window, mbps);
  fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string only;
  int iters = 20000, blocks = 400;
  size_t bytes = 4 << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--van") only = argv[i + 1];
    if (k == "--iters") iters = std::stoi(argv[i + 1]);
    if (k == "--blocks") blocks = std::stoi(argv[i + 1]);
    if (k == "--bytes") bytes = std::stoul(argv[i + 1]);
  }
  for (const char* van : {"zmq", "ucx"}) {
    if (only.empty() || only == van) Run(van, iters, blocks, bytes);
  }
  return 0;
}
