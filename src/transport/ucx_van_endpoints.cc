// UcxVan's endpoints: made, accepted and wired up (their first flush). The rest of the van is
// in ucx_van.cc, the progress role and the receive side in ucx_van_progress.cc.
#include <glog/logging.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "transport/ucx_van.h"

namespace ps {

void UcxVan::OnConnRequest(ucp_conn_request_h req) {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.conn_request = req;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  // A peer that connected to us is not one we send to: its failure is seen on our own
  // endpoint to it (Connect), so the error of this one only retires it.
  ep.err_handler.cb = [](void* arg, ucp_ep_h e, ucs_status_t) {
    static_cast<UcxVan*>(arg)->OnAcceptedError(e);
  };
  ep.err_handler.arg = this;
  ucp_ep_h e;
  if (ucp_ep_create(worker_, &ep, &e) != UCS_OK) return;
  accepted_.push_back(e);
  // Credits wait for the lanes as sends do (Peer::wired).
  unwired_[e];
  WhenWired(e, [this, e](bool ok) { OnAcceptedWired(e, ok); });
}

void UcxVan::WhenWired(ucp_ep_h ep, std::function<void(bool)> done) {
  ucp_request_param_t fp{};
  fp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  fp.cb.send = [](void* req, ucs_status_t st, void* user) {
    ucp_request_free(req);
    std::unique_ptr<std::function<void(bool)>> f(static_cast<std::function<void(bool)>*>(user));
    (*f)(st == UCS_OK);
  };
  auto f = std::make_unique<std::function<void(bool)>>(std::move(done));
  fp.user_data = f.get();
  void* r = ucp_ep_flush_nbx(ep, &fp);
  if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
    f.release();  // the callback owns it
    return;
  }
  (*f)(r == nullptr);  // done at once, or failed at once
}

void UcxVan::OnAcceptedWired(ucp_ep_h ep, bool ok) {
  auto it = unwired_.find(ep);
  if (it == unwired_.end()) return;
  const auto owed = std::move(it->second);
  unwired_.erase(it);
  if (!ok || closing_) return;  // the peer is gone (or Stop): its credits mean nothing
  for (const auto& o : owed) {
    Job job;
    job.credit_stream = o.first;
    job.credit = o.second.first;
    job.credit_bytes = o.second.second;
    SendCredit(job);
  }
}

void UcxVan::MakeEndpoint(Job* job) {
  Peer& peer = *job->peer;
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                 UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&job->addr);
  p.sockaddr.addrlen = sizeof(sockaddr_in);
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  // The peer lives as long as the endpoint: made_ holds it until Stop closes the endpoint.
  p.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t) {
    auto* peer = static_cast<Peer*>(arg);
    peer->van->OnPeerError(peer);
  };
  p.err_handler.arg = &peer;
  ucp_ep_h e;
  ucs_status_t st = ucp_ep_create(worker_, &p, &e);
  if (st != UCS_OK) {
    LOG(WARNING) << "UCX: cannot connect to node " << peer.id << ": " << ucs_status_string(st);
    peer.failed = true;
    std::lock_guard<std::mutex> lk(peers_mu_);
    auto it = peers_.find(peer.id);
    if (it == peers_.end() || it->second != job->peer) return;  // replaced since
    peers_.erase(it);
    lost_pending_.push_back(peer.id);  // told once the role is released (RunLost)
    return;
  }
  peer.ep = e;
  made_.push_back(job->peer);
  by_stream_[peer.stream] = &peer;
  // A failed flush (the peer died, or Stop cancels it) sends nothing more: the error handler
  // reports a dead peer.
  Peer* wired = &peer;
  WhenWired(e, [this, wired](bool ok) {
    if (ok) OnWired(wired);
  });
}

void UcxVan::OnWired(Peer* peer) {
  if (closing_) return;
  peer->wired = true;
  // Which transports UCX chose: only ucp_ep_print_info tells (UCX 1.13 has no query for it).
  char* text = nullptr;
  size_t size = 0;
  if (FILE* f = open_memstream(&text, &size)) {
    ucp_ep_print_info(peer->ep, f);
    fclose(f);
    const std::string lanes(text ? text : "", size);
    VLOG(1) << "UCX endpoint to node " << peer->id << ":\n" << lanes;
    for (const char* shm : {"sysv/", "posix/", "cma/", "xpmem/", "knem/"}) {
      if (lanes.find(shm) != std::string::npos) {
        peer->shared_memory = true;
        counters_.shared_memory_peers++;
        break;
      }
    }
  }
  free(text);
  Drain(peer);
}

void UcxVan::OnAcceptedError(ucp_ep_h ep) {
  auto it = std::find(accepted_.begin(), accepted_.end(), ep);
  if (it == accepted_.end()) return;  // reported before
  accepted_.erase(it);
  retired_.push_back(ep);  // closed once, at Stop
}

}  // namespace ps
