#include "control/addresses.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "ps/base.h"

namespace ps {

bool IsNumericAddress(const std::string& host) {
  in_addr a;
  return inet_pton(AF_INET, host.c_str(), &a) == 1;
}

std::string ResolveIPv4(const std::string& host) {
  if (IsNumericAddress(host)) return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return "";
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof(buf));
  freeaddrinfo(res);
  return buf;
}

bool IsLocalAddress(const std::string& addr) {
  in_addr a;
  if (inet_pton(AF_INET, addr.c_str(), &a) != 1) return false;
  if ((ntohl(a.s_addr) >> 24) == 127) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    found = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == a.s_addr;
  }
  freeifaddrs(list);
  return found;
}

std::string InterfaceAddress(const std::string& name) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string out;
  for (ifaddrs* i = list; i && out.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || name != i->ifa_name) continue;
    char buf[INET_ADDRSTRLEN] = {0};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof(buf));
    out = buf;
  }
  freeifaddrs(list);
  return out;
}

std::string RouteSource(const std::string& addr, int port) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port > 0 ? port : 9));
  if (inet_pton(AF_INET, addr.c_str(), &to.sin_addr) != 1) return "";
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return "";
  std::string out;
  // A UDP connect only picks the route and source address; no packet leaves.
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0) {
    sockaddr_in me{};
    socklen_t len = sizeof(me);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) == 0) {
      char buf[INET_ADDRSTRLEN] = {0};
      inet_ntop(AF_INET, &me.sin_addr, buf, sizeof(buf));
      out = buf;
    }
  }
  close(fd);
  return out;
}

NodeAddresses ChooseAddresses(const Config& cfg) {
  NodeAddresses a;
  a.scheduler = ResolveIPv4(cfg.scheduler_host);
  if (a.scheduler.empty()) {
    throw Error(ErrorCode::kBadConfig, "PS_SCHEDULER_HOST (or DMLC_PS_ROOT_URI)='" +
                                           cfg.scheduler_host + "': the name does not resolve");
  }
  if (cfg.role == Role::kScheduler) {
    // A service name may resolve to an address this host does not hold (a cluster IP):
    // listening everywhere is then the only way to be reached through it.
    a.bind = cfg.kubernetes || !IsLocalAddress(a.scheduler) ? "0.0.0.0" : a.scheduler;
    return a;
  }
  if (!cfg.host.empty()) {
    a.advertise = cfg.host;
  } else if (!cfg.interface.empty()) {
    a.advertise = InterfaceAddress(cfg.interface);
    if (a.advertise.empty()) {
      throw Error(ErrorCode::kBadConfig, "PS_INTERFACE (or DMLC_INTERFACE)='" + cfg.interface +
                                             "': no such interface with an IPv4 address");
    }
  } else {
    a.advertise = RouteSource(a.scheduler, cfg.scheduler_port);
    if (a.advertise.empty()) {
      throw Error(ErrorCode::kBadConfig, "no route to the scheduler at " + a.scheduler +
                                             ": set PS_NODE_HOST (or DMLC_NODE_HOST) to this "
                                             "node's address, or PS_INTERFACE to its interface");
    }
  }
  a.bind = cfg.kubernetes ? "0.0.0.0" : a.advertise;
  return a;
}

}  // namespace ps
