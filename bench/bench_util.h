// Small helpers shared by the benchmark programs.
#ifndef PS_BENCH_BENCH_UTIL_H_
#define PS_BENCH_BENCH_UTIL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace ps_bench {

using Clock = std::chrono::steady_clock;

inline double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }
inline double Sec(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

/// The p-quantile (0..1) of v.
inline double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

/// A loopback port that was free a moment ago (for the bare ZeroMQ floors; ps itself never
/// guesses ports).
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  close(fd);
  return ntohs(sa.sin_port);
}

}  // namespace ps_bench

#endif  // PS_BENCH_BENCH_UTIL_H_
