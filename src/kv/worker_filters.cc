// A worker's filter choice (KVWorker::SetFilters) and the receiving end of the
// significantly-modified filter on its pulls.
#include <glog/logging.h>

#include "filter/filter_chain.h"
#include "kv/worker_impl.h"

namespace ps {

void KVWorkerBase::SetFilters(const RequestFilters& f) {
  int compress = 0;
  if (!f.compress.empty()) {
    try {
      compress = static_cast<int>(FilterOptions::Parse(f.compress, 0).mode) + 1;
    } catch (const Error&) {
      throw Error(ErrorCode::kBadConfig, "RequestFilters.compress='" + f.compress +
                                             "': expected \"\", off, auto, delta, zero or snappy");
    }
  }
  if (f.quantize_bits != -1 && f.quantize_bits != 0 && f.quantize_bits != 8 &&
      f.quantize_bits != 16) {
    throw Error(ErrorCode::kBadConfig,
                "RequestFilters.quantize_bits=" + std::to_string(f.quantize_bits) +
                    ": expected -1 (node default), 0, 8 or 16");
  }
  if (std::isnan(f.significant))
    throw Error(ErrorCode::kBadConfig, "RequestFilters.significant is NaN");
  std::lock_guard<std::mutex> lk(impl_->sig_mu);
  impl_->compress = compress;
  impl_->quantize = f.quantize_bits == -1 ? 0 : (f.quantize_bits == 0 ? -1 : f.quantize_bits);
  impl_->significant = f.significant;
}

KVWorkerBase::SignificantStats KVWorkerBase::significant_stats() const {
  std::lock_guard<std::mutex> lk(impl_->sig_mu);
  SignificantStats s;
  s.refused = impl_->sig.stats().refused;
  s.epochs = impl_->sig.stats().epochs;
  return s;
}

void KVWorkerBase::Impl::MarkFilters(Message* m) {
  std::lock_guard<std::mutex> lk(sig_mu);
  m->meta.set_compress(compress);
  m->meta.set_quantize(quantize);
  // Only fixed-width pulls of whole keys: the reply is then n * width values in key order.
  if (significant >= 0 && m->meta.pull() && m->meta.op() == pb::Meta::DATA && m->meta.width() > 0 &&
      m->meta.val_total() == 0 && (dtype == DataType::kFloat || dtype == DataType::kDouble)) {
    m->meta.set_significant(significant);
    m->meta.set_significant_reset(sig.PendingReset(m->meta.receiver()));
  }
}

bool KVWorkerBase::Impl::DecodeSignificant(Message* msg, std::vector<Message>* resend) {
  const int server = msg->meta.sender();
  auto it = pending.find(msg->meta.timestamp());
  Pending* p = it == pending.end() ? nullptr : it->second.get();
  const size_t part = static_cast<size_t>(msg->meta.part());
  const bool known = p && msg->meta.attempt() == p->attempt && part < p->sent.size() &&
                     !p->sent[part].data.empty() && msg->data.size() == 1;
  const SArray<char> frame = msg->data.empty() ? SArray<char>() : msg->data[0];
  std::lock_guard<std::mutex> lk(sig_mu);
  if (!known) {
    // The request it answers is gone (a copy of a reply already taken): without its keys the
    // frame cannot be applied, so the copies may differ from now on.
    sig.Refuse(server, SignificantFilter::FrameEpoch(frame));
    return false;
  }
  const SArray<Key> keys(p->sent[part].data[0]);
  SArray<char> out;
  bool stale = false;
  const std::string err = sig.Decode(server, keys.data(), keys.size(), frame, &out, &stale);
  if (err.empty()) {
    msg->data[0] = out;
    msg->meta.set_significant_coded(false);
    return true;
  }
  VLOG(1) << "refused a reply of node " << server << " (request " << p->ts << " part " << part
          << "): " << err;
  if (!p->got[part]) {
    Message again = p->sent[part];
    again.meta.set_significant_reset(sig.PendingReset(server));
    p->sent_at[part] = std::chrono::steady_clock::now();
    resend->push_back(std::move(again));
  }
  return false;
}

}  // namespace ps
