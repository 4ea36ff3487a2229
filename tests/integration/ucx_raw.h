// A bare UCX client for tests: sends active messages of any bytes to a UcxVan's listener, to
// check what the van does with messages no UcxVan would send (garbage, crafted headers, gaps).
// The wire format it crafts is UcxVan's (src/transport/ucx_wire.h): active message id 7; the
// header is {u32 magic "PSUX", u32 meta size, u32 frames, u32 spare, u64 stream, u64 seq},
// then a u64 size per frame, then the meta; the data is the frames, each padded to 8 bytes.
#ifndef PS_TESTS_UCX_RAW_H_
#define PS_TESTS_UCX_RAW_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ps_test {

class RawUcx {
 public:
  static constexpr unsigned kAmId = 7;
  static constexpr uint32_t kMagic = 0x50535558;

  RawUcx(const std::string& host, int port) {
    ucp_config_t* config = nullptr;
    ucp_config_read(nullptr, nullptr, &config);
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_AM;
    ok_ = ucp_init(&p, config, &context_) == UCS_OK;
    ucp_config_release(config);
    ucp_worker_params_t wp{};
    ok_ = ok_ && ucp_worker_create(context_, &wp, &worker_) == UCS_OK;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &sa.sin_addr);
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                    UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
    ep.sockaddr.addrlen = sizeof(sa);
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ok_ = ok_ && ucp_ep_create(worker_, &ep, &ep_) == UCS_OK;
  }
  ~RawUcx() {
    if (ep_) {
      ucp_request_param_t p{};
      Wait(ucp_ep_close_nbx(ep_, &p));
    }
    if (worker_) ucp_worker_destroy(worker_);
    if (context_) ucp_cleanup(context_);
  }
  bool ok() const { return ok_; }

  // Sends header and data as one active message and waits (up to 10 s) until it is out.
  bool Send(const std::string& header, const std::string& data) {
    if (!ok_) return false;
    ucp_request_param_t p{};
    void* r = ucp_am_send_nbx(ep_, kAmId, header.data(), header.size(),
                              data.empty() ? nullptr : data.data(), data.size(), &p);
    return Wait(r);
  }

  // A header in UcxVan's format for frames of the given sizes and a meta of those bytes.
  static std::string Header(uint64_t stream, uint64_t seq, const std::string& meta,
                            const std::vector<uint64_t>& frames, uint32_t magic = kMagic) {
    std::string h(32 + 8 * frames.size(), '\0');
    const uint32_t fixed[4] = {magic, static_cast<uint32_t>(meta.size()),
                               static_cast<uint32_t>(frames.size()), 0};
    std::memcpy(&h[0], fixed, 16);
    std::memcpy(&h[16], &stream, 8);
    std::memcpy(&h[24], &seq, 8);
    for (size_t i = 0; i < frames.size(); ++i) std::memcpy(&h[32 + 8 * i], &frames[i], 8);
    return h + meta;
  }
  // Frames laid out as UcxVan sends them: each padded to 8 bytes.
  static std::string Data(const std::vector<std::string>& frames) {
    std::string d;
    for (const auto& f : frames) {
      d += f;
      d.append((8 - f.size() % 8) % 8, '\0');
    }
    return d;
  }

 private:
  bool Wait(void* r) {
    if (r == nullptr) return true;
    if (UCS_PTR_IS_ERR(r)) return false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    ucs_status_t st;
    while ((st = ucp_request_check_status(r)) == UCS_INPROGRESS &&
           std::chrono::steady_clock::now() < until) {
      ucp_worker_progress(worker_);
    }
    ucp_request_free(r);
    return st == UCS_OK;
  }

  bool ok_ = false;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
};

}  // namespace ps_test

#endif  // PS_TESTS_UCX_RAW_H_
