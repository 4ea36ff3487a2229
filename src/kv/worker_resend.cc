// KVWorker's resend timer: parts not answered within their server's round-trip timeout go
// again, with back-off, and no more per server and tick than that server answered in the
// previous one (the decisions: kv/resend_timer.h).
#include <glog/logging.h>

#include <chrono>
#include <vector>

#include "kv/worker_impl.h"

namespace ps {

void KVWorkerBase::Impl::ResendLoop() {
  const auto tick = std::chrono::microseconds(resend.tick_us());
  std::unique_lock<std::mutex> lk(mu);
  while (!stopping) {
    resend_cv.wait_for(lk, tick);
    if (stopping) break;
    const auto now = std::chrono::steady_clock::now();
    std::vector<Message> again;
    const int64_t lwm = open_ts.empty() ? next_ts : *open_ts.begin(), safe = steps.SafeStep();
    resend.Tick();
    for (int64_t ts : open_ts) {  // the pending requests' timestamps, in order: oldest first
      auto e = pending.find(ts);
      if (e == pending.end()) continue;
      Pending* p = e->second.get();
      for (size_t k = 0; k < p->sent.size(); ++k) {
        if (p->got[k]) continue;
        const auto waited =
            std::chrono::duration_cast<std::chrono::microseconds>(now - p->sent_at[k]).count();
        if (!resend.Due(p->sent[k].meta.receiver(), waited, &p->tries[k])) continue;
        p->sent_at[k] = now;
        p->sent[k].meta.set_done_step(safe);
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
