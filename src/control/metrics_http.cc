#include "control/metrics_http.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <microhttpd.h>
#include <netinet/in.h>

#include <cstring>
#include <memory>
#include <type_traits>

#include "ps/base.h"

namespace ps {

// The calls into libmicrohttpd, found in the library loaded by MetricsHttp. Linked instead, it
// and the eleven libraries it pulls in (GnuTLS and its own) took every process of a job, most
// of which never serve metrics, about 4.5 ms of CPU at start.
struct MhdCalls {
  decltype(&MHD_start_daemon) start_daemon;
  decltype(&MHD_stop_daemon) stop_daemon;
  decltype(&MHD_create_response_from_buffer) create_response_from_buffer;
  decltype(&MHD_add_response_header) add_response_header;
  decltype(&MHD_queue_response) queue_response;
  decltype(&MHD_destroy_response) destroy_response;
};

struct MetricsHttpAccess {
  static MHD_Result Answer(void* cls, MHD_Connection* conn, const char* url, const char* method,
                           const char*, const char*, size_t*, void**) {
    auto* self = static_cast<MetricsHttp*>(cls);
    std::string body, type = "text/plain; charset=utf-8";
    unsigned status = MHD_HTTP_OK;
    if (std::strcmp(method, "GET") != 0 && std::strcmp(method, "HEAD") != 0) {
      status = MHD_HTTP_METHOD_NOT_ALLOWED;
      body = "only GET\n";
    } else if (!self->page_(url, &body, &type)) {
      status = MHD_HTTP_NOT_FOUND;
      body = "not found: / (live page), /metrics (Prometheus text) and /stats (JSON) are served\n";
      type = "text/plain; charset=utf-8";
    } else {
      self->served_++;
    }
    MHD_Response* r =
        self->mhd_->create_response_from_buffer(body.size(), body.data(), MHD_RESPMEM_MUST_COPY);
    if (r == nullptr) return MHD_NO;
    self->mhd_->add_response_header(r, "Content-Type", type.c_str());
    self->mhd_->add_response_header(r, "Cache-Control", "no-store");
    const MHD_Result ret = self->mhd_->queue_response(conn, status, r);
    self->mhd_->destroy_response(r);
    return ret;
  }
};

MetricsHttp::MetricsHttp(const std::string& host, int port, Page page) : page_(std::move(page)) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (port <= 0 || port > 65535 || inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    throw Error(ErrorCode::kBadConfig, "PS_METRICS_PORT/PS_METRICS_HOST: cannot serve metrics on " +
                                           host + ":" + std::to_string(port) +
                                           " (an IPv4 address and a port 1-65535)");
  }
  lib_ = {dlopen(PS_MHD_SONAME, RTLD_NOW | RTLD_LOCAL), dlclose};
  if (lib_ == nullptr) {
    const char* why = dlerror();
    throw Error(ErrorCode::kBadConfig, std::string("PS_METRICS_PORT: cannot load ") +
                                           PS_MHD_SONAME + " to serve metrics (" +
                                           (why ? why : "unknown error") +
                                           "; Debian: apt-get install " PS_MHD_PACKAGE ")");
  }
  mhd_ = std::make_unique<MhdCalls>();
  bool all = true;
  auto find = [&](auto* fn, const char* name) {
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(lib_.get(), name));
    all = all && *fn != nullptr;
  };
  find(&mhd_->start_daemon, "MHD_start_daemon");
  find(&mhd_->stop_daemon, "MHD_stop_daemon");
  find(&mhd_->create_response_from_buffer, "MHD_create_response_from_buffer");
  find(&mhd_->add_response_header, "MHD_add_response_header");
  find(&mhd_->queue_response, "MHD_queue_response");
  find(&mhd_->destroy_response, "MHD_destroy_response");
  if (!all) {
    throw Error(ErrorCode::kBadConfig, std::string("PS_METRICS_PORT: ") + PS_MHD_SONAME +
                                           " lacks a function the metrics server calls");
  }
  // Bounded: a few scrapers at a time, and a connection that sends nothing is closed.
  daemon_ = mhd_->start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, static_cast<uint16_t>(port), nullptr, nullptr,
      &MetricsHttpAccess::Answer, this, MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&addr),
      MHD_OPTION_CONNECTION_LIMIT, 16u, MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
  if (daemon_ == nullptr) {
    throw Error(ErrorCode::kBadConfig, "PS_METRICS_PORT: cannot listen on " + host + ":" +
                                           std::to_string(port) + " for metrics (in use?)");
  }
}

MetricsHttp::~MetricsHttp() {
  if (daemon_) mhd_->stop_daemon(daemon_);
}

}  // namespace ps
