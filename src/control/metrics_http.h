// The scheduler's HTTP endpoint for job-wide metrics (PS_METRICS_PORT): libmicrohttpd with
// its own polling thread; the pages are produced by a callback on that thread.
#ifndef PS_CONTROL_METRICS_HTTP_H_
#define PS_CONTROL_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <string>

struct MHD_Daemon;

namespace ps {

struct MhdCalls;

class MetricsHttp {
 public:
  /// Renders the page at `path` into *body and *content_type; false: 404.
  using Page =
      std::function<bool(const std::string& path, std::string* body, std::string* content_type)>;
  /// Serves on host:port (an IPv4 address). Throws ps::Error (kBadConfig, naming
  /// PS_METRICS_PORT) when it cannot bind, or cannot load libmicrohttpd (loaded here, not
  /// linked: it and the libraries it pulls in cost every process of a job CPU at start).
  MetricsHttp(const std::string& host, int port, Page page);
  ~MetricsHttp();
  MetricsHttp(const MetricsHttp&) = delete;
  MetricsHttp& operator=(const MetricsHttp&) = delete;

  /// Pages served and requests refused (an unknown path or method).
  uint64_t served() const { return served_; }

 private:
  friend struct MetricsHttpAccess;
  // dlopen's handle of libmicrohttpd, closed last (after the daemon stops), also when the
  // constructor throws.
  std::unique_ptr<void, int (*)(void*)> lib_{nullptr, nullptr};
  std::unique_ptr<MhdCalls> mhd_;
  MHD_Daemon* daemon_ = nullptr;
  Page page_;
  uint64_t served_ = 0;
};

}  // namespace ps

#endif  // PS_CONTROL_METRICS_HTTP_H_
