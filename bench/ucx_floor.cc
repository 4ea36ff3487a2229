#include "ucx_floor.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_util.h"

namespace ps_bench {
namespace {

constexpr ucp_tag_t kPing = 1, kPong = 2, kData = 3, kAck = 4;
constexpr ucp_tag_t kAll = ~ucp_tag_t{0};
constexpr double kTimeoutS = 20;  // any wait longer than this is a broken transport

// One process's UCP context and worker, on the transports that UCX_TLS names.
struct Ucp {
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_ep_h ep = nullptr;
  ucp_listener_h listener = nullptr;
  int efd = -1;
  bool busy = false;
  ucp_conn_request_h conn = nullptr;  // the listener's connection request  // busy-poll instead of sleeping on the worker's event fd

  bool Init() {
    ucp_config_t* config;
    if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return false;
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    ucs_status_t st = ucp_init(&p, config, &ctx);
    ucp_config_release(config);
    if (st != UCS_OK) return false;
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (ucp_worker_create(ctx, &wp, &worker) != UCS_OK) return false;
    return ucp_worker_get_efd(worker, &efd) == UCS_OK;
  }
  // Progresses once; when nothing happened and not busy, sleeps until the worker has events
  // (at most 100 ms, so that callers can check their deadlines).
  void Step() {
    if (ucp_worker_progress(worker) || busy) return;
    if (ucp_worker_arm(worker) == UCS_ERR_BUSY) return;
    pollfd pf{efd, POLLIN, 0};
    poll(&pf, 1, 100);
  }
  // Waits for a request of a *_nbx call; false on an error or past the timeout.
  bool Wait(void* r) {
    if (r == nullptr) return true;
    if (UCS_PTR_IS_ERR(r)) return false;
    const auto start = Clock::now();
    while (ucp_request_check_status(r) == UCS_INPROGRESS) {
      if (Sec(Clock::now() - start) > kTimeoutS) {
        ucp_request_cancel(worker, r);
        for (int i = 0; i < 1000 && ucp_request_check_status(r) == UCS_INPROGRESS; ++i) Step();
        ucp_request_free(r);
        return false;
      }
      Step();
    }
    const ucs_status_t st = ucp_request_check_status(r);
    ucp_request_free(r);
    return st == UCS_OK;
  }
  void* Send(const void* buf, size_t len, ucp_tag_t tag) {
    ucp_request_param_t p{};
    return ucp_tag_send_nbx(ep, buf, len, tag, &p);
  }
  void* Recv(void* buf, size_t len, ucp_tag_t tag) {
    ucp_request_param_t p{};
    return ucp_tag_recv_nbx(worker, buf, len, tag, kAll, &p);
  }
  bool Listen(int port, int ready_fd) {
    sockaddr_in sa = Loopback(port);
    ucp_listener_params_t lp{};
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
    lp.sockaddr.addrlen = sizeof(sa);
    lp.conn_handler.cb = [](ucp_conn_request_h req, void* arg) {
      *static_cast<ucp_conn_request_h*>(arg) = req;
    };
    lp.conn_handler.arg = &conn;
    if (ucp_listener_create(worker, &lp, &listener) != UCS_OK) return false;
    const char one = 1;
    if (write(ready_fd, &one, 1) != 1) return false;
    const auto start = Clock::now();
    while (conn == nullptr) {
      if (Sec(Clock::now() - start) > kTimeoutS) return false;
      Step();
    }
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
    ep_params.conn_request = conn;
    return ucp_ep_create(worker, &ep_params, &ep) == UCS_OK;
  }
  bool Connect(int port) {
    sockaddr_in sa = Loopback(port);
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
    p.sockaddr.addrlen = sizeof(sa);
    return ucp_ep_create(worker, &p, &ep) == UCS_OK;
  }
  void Close() {
    if (ep) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      Wait(ucp_ep_close_nbx(ep, &p));
    }
    if (listener) ucp_listener_destroy(listener);
    if (worker) ucp_worker_destroy(worker);
    if (ctx) ucp_cleanup(ctx);
  }
  static sockaddr_in Loopback(int port) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(static_cast<uint16_t>(port));
    return sa;
  }
};

// The partner in a child process: echoes `pings` 8-byte pings, then acks `blocks` messages of
// `bytes` each. Exits 0 when all went through.
int Partner(int port, int ready_fd, bool busy, int pings, int blocks, size_t bytes) {
  Ucp u;
  u.busy = busy;
  if (!u.Init() || !u.Listen(port, ready_fd)) return 1;
  char b[8];
  for (int i = 0; i < pings; ++i) {
    if (!u.Wait(u.Recv(b, sizeof(b), kPing)) || !u.Wait(u.Send(b, sizeof(b), kPong))) return 2;
  }
  std::vector<char> in(bytes);
  for (int i = 0; i < blocks; ++i) {
    if (!u.Wait(u.Recv(in.data(), bytes, kData)) || !u.Wait(u.Send(b, sizeof(b), kAck))) return 3;
  }
  // The last ack must leave before the endpoint closes.
  u.Wait(u.Recv(b, sizeof(b), kPing));
  u.Close();
  return 0;
}

void Error(const char* op, const char* tls, const char* what) {
  printf("{\"bench\":\"floor\",\"op\":\"%s\",\"tls\":\"%s\",\"error\":\"%s\"}\n", op, tls, what);
}

// One run against a fresh partner: ping-pong (pings > 0) or a stream (blocks > 0).
void Run(const char* op, const char* tls, bool busy, int iters, int blocks, size_t bytes,
         int window) {
  setenv("UCX_TLS", tls, 1);
  const int warm = iters > 0 ? 1000 : 0, warm_blocks = blocks > 0 ? 2 : 0;
  const int port = FreePort();
  int ready[2];
  if (pipe(ready) != 0) return Error(op, tls, "pipe");
  fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    _exit(Partner(port, ready[1], busy, iters + warm, blocks + warm_blocks, bytes));
  }
  close(ready[1]);
  char c;
  pollfd pf{ready[0], POLLIN, 0};
  const bool up =
      poll(&pf, 1, static_cast<int>(kTimeoutS * 1000)) == 1 && read(ready[0], &c, 1) == 1;
  close(ready[0]);
  Ucp u;
  u.busy = busy;
  bool ok = up && u.Init() && u.Connect(port);
  std::vector<double> lat;
  char b[8] = "ping";
  for (int i = 0; ok && i < iters + warm; ++i) {
    const auto t = Clock::now();
    void* r = u.Recv(b, sizeof(b), kPong);
    ok = u.Wait(u.Send(b, sizeof(b), kPing)) && u.Wait(r);
    if (i >= warm) lat.push_back(Us(Clock::now() - t));
  }
  double mbps = 0;
  if (ok && blocks > 0) {
    std::vector<char> data(bytes, 1);
    for (int i = 0; ok && i < warm_blocks; ++i) {
      void* r = u.Recv(b, sizeof(b), kAck);
      ok = u.Wait(u.Send(data.data(), bytes, kData)) && u.Wait(r);
    }
    std::vector<void*> sends;
    const auto start = Clock::now();
    int sent = 0, acked = 0;
    while (ok && acked < blocks) {
      while (sent < blocks && sent - acked < window) {
        sends.push_back(u.Send(data.data(), bytes, kData));
        ++sent;
      }
      ok = u.Wait(u.Recv(b, sizeof(b), kAck));
      ++acked;
    }
    for (void* r : sends) ok = u.Wait(r) && ok;
    mbps = ok ? blocks * static_cast<double>(bytes) / Sec(Clock::now() - start) / 1e6 : 0;
  }
  if (ok) ok = u.Wait(u.Send(b, sizeof(b), kPing));  // lets the partner close
  u.Close();
  int status = 0;
  waitpid(pid, &status, 0);
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Error(op, tls, up ? "a transfer failed or timed out" : "the partner did not listen");
  }
  if (iters > 0) {
    printf(
        "{\"bench\":\"floor\",\"op\":\"%s\",\"tls\":\"%s\",\"p50_us\":%.1f,\"p99_us\":%.1f,"
        "\"iters\":%d}\n",
        op, tls, Pct(lat, 0.5), Pct(lat, 0.99), iters);
  } else {
    printf(
        "{\"bench\":\"floor\",\"op\":\"%s\",\"tls\":\"%s\",\"bytes\":%zu,\"window\":%d,"
        "\"MBps\":%.1f}\n",
        op, tls, bytes, window, mbps);
  }
}

}  // namespace

void UcxFloors(int iters, const std::string& only) {
  auto want = [&](const char* w) { return only.empty() || std::string(w).rfind(only, 0) == 0; };
  const char* old = getenv("UCX_TLS");
  const std::string saved = old ? old : "";
  for (const char* tls : {"tcp", "sm,self,tcp"}) {
    if (want("ucx_pingpong")) {
      Run("ucx_pingpong", tls, false, iters, 0, 0, 0);
      Run("ucx_pingpong_busy", tls, true, iters, 0, 0, 0);
    }
    if (want("ucx_stream")) {
      Run("ucx_stream", tls, false, 0, 200, 4 << 20, 1);
      Run("ucx_stream", tls, false, 0, 200, 4 << 20, 4);
    }
  }
  if (old) {
    setenv("UCX_TLS", saved.c_str(), 1);
  } else {
    unsetenv("UCX_TLS");
  }
}

}  // namespace ps_bench
