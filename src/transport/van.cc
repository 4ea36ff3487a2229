#include "transport/van.h"

#include <dlfcn.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "transport/fault_van.h"
#include "transport/inproc_van.h"
#include "transport/zmq_van.h"

namespace ps {
namespace {

// The UCX van lives in libps_ucx, next to libps, loaded on the first PS_VAN=ucx: linked into
// libps, UCX's libraries cost every process about 4 ms of CPU at start, ZeroMQ jobs included.
// The library stays loaded (UCX keeps state of its own for the process's life).
std::unique_ptr<Van> MakeUcxVan(int64_t max_message, int queue, int busy_poll_us) {
  Dl_info self{};
  std::string path = "libps_ucx.so.0";
  if (dladdr(reinterpret_cast<void*>(&MakeVan), &self) != 0 && self.dli_fname != nullptr) {
    const std::string lib = self.dli_fname;
    const size_t slash = lib.rfind('/');
    if (slash != std::string::npos) path = lib.substr(0, slash + 1) + path;
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw Error(ErrorCode::kBadConfig,
                "PS_VAN=ucx: cannot load " + path + " (" + (why ? why : "unknown error") + ")");
  }
  using Make = Van* (*)(int64_t, int, int);
  auto make = reinterpret_cast<Make>(dlsym(handle, "PsMakeUcxVan"));
  if (make == nullptr) {
    throw Error(ErrorCode::kBadConfig, "PS_VAN=ucx: " + path + " lacks PsMakeUcxVan");
  }
  return std::unique_ptr<Van>(make(max_message, queue, busy_poll_us));
}

}  // namespace

std::unique_ptr<Van> MakeVan(const Config& config) {
  std::unique_ptr<Van> van;
  if (config.inproc) {
    van = std::make_unique<InprocVan>(config.inproc->hub());
  } else if (config.van == "ucx") {
    van = MakeUcxVan(static_cast<int64_t>(config.max_message_mb) << 20, config.send_queue,
                     config.ucx_busy_poll_us);
  } else {
    van = std::make_unique<ZmqVan>(static_cast<int64_t>(config.max_message_mb) << 20,
                                   config.send_queue);
  }
  FaultSpec f;
  f.drop = config.fault_drop;
  f.duplicate = config.fault_duplicate;
  f.delay = config.fault_delay;
  f.delay_ms = config.fault_delay_ms;
  f.mute_scheduler_file = config.fault_mute_scheduler_file;
  // Every node its own stream, reproducible from the seed and the launcher's role and rank.
  f.seed = config.seed * 1000003 + static_cast<uint64_t>(config.role) * 1009 +
           static_cast<uint64_t>(config.rank_hint + 1);
  if (f.any()) van = std::make_unique<FaultVan>(std::move(van), f);
  return van;
}

bool TcpListening(const std::string& host, int port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return false;
  bool ok = false;
  for (addrinfo* a = res; a && !ok; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      ok = poll(&p, 1, timeout_ms) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
           err == 0;
    }
    close(fd);
  }
  freeaddrinfo(res);
  return ok;
}

}  // namespace ps
