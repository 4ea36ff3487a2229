// KVWorker's resend timer: parts not answered within their server's round-trip timeout go
// again, with back-off, and no more per server and tick than that server answered in the
// previous one.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <vector>

#include "kv/worker_impl.h"

namespace ps {
namespace {

// Resends of a part wait timeout * 2^tries, at most timeout * 2^kMaxBackoffShift.
constexpr int kMaxBackoffShift = 5;
// Resends per server and tick of the resend timer, whatever the server answered.
constexpr int64_t kMinResendBudget = 32;

}  // namespace

void KVWorkerBase::Impl::ResendLoop() {
  const auto timeout = std::chrono::milliseconds(rt->cfg.resend_timeout_ms);
  const auto tick = std::max<std::chrono::milliseconds>(std::chrono::milliseconds(1), timeout / 4);
  std::unique_lock<std::mutex> lk(mu);
  while (!stopping) {
    resend_cv.wait_for(lk, tick);
    if (stopping) break;
    const auto now = std::chrono::steady_clock::now();
    std::vector<Message> again;
    const double base_us = timeout.count() * 1000.0;
    // Never wait longer than an eighth of the request timeout between two sends of a part: a
    // round-trip estimate inflated by a burst (replies a replica held back until a lost copy
    // came again) times the back-off must not outlast the request itself.
    const double cap_us = std::max(base_us, rt->cfg.request_timeout_ms * 1000.0 / 8);
    const int64_t lwm = open_ts.empty() ? next_ts : *open_ts.begin(), safe = steps.SafeStep();
    // Per server, no more resends in a tick than the replies it sent in the last one (at least
    // kMinResendBudget): a server that answers slowly, not one that loses messages, would
    // only queue them behind the originals, each a copy in its memory. Oldest first.
    std::unordered_map<int, int64_t> budget;
    for (auto& a : answered) {
      budget[a.first] = std::max<int64_t>(kMinResendBudget, a.second.now - a.second.before);
      a.second.before = a.second.now;
    }
    for (int64_t ts : open_ts) {  // the pending requests' timestamps, in order
      auto e = pending.find(ts);
      if (e == pending.end()) continue;
      Pending* p = e->second.get();
      for (size_t k = 0; k < p->sent.size(); ++k) {
        // Capped exponential back-off: a slow or stalled server is not flooded with copies
        // (each one queued for it costs memory here and there).
        if (p->got[k]) continue;
        const int to = p->sent[k].meta.receiver();
        auto b = budget.find(to);
        if (b == budget.end()) b = budget.emplace(to, kMinResendBudget).first;
        if (b->second <= 0) continue;
        RttEstimate& r = rtt[to];
        const int shift = std::min<int>(std::max<int>(p->tries[k], r.backoff), kMaxBackoffShift);
        const auto wait = std::chrono::microseconds(static_cast<int64_t>(
            std::min(cap_us, r.Timeout(base_us) * static_cast<double>(1 << shift))));
        if (now - p->sent_at[k] < wait) continue;
        p->sent_at[k] = now;
        b->second--;
        p->sent[k].meta.set_done_step(safe);
        if (p->tries[k] < 255) p->tries[k]++;
        r.backoff = std::max<int>(r.backoff, std::min<int>(p->tries[k], kMaxBackoffShift));
        again.push_back(p->sent[k]);
        again.back().meta.set_lwm(lwm);
      }
    }
    if (again.empty()) continue;
    lk.unlock();
    for (auto& m : again) {
      resends++;
      VLOG(1) << "resending request " << m.meta.timestamp() << " part " << m.meta.part()
              << " to node " << m.meta.receiver();
      rt->Send(m);
    }
    lk.lock();
  }
}

}  // namespace ps
