// Steps of a worker (DESIGN §7): Clock() and the bounded delay, the clocks held until their
// steps' pushes are acknowledged, and the statistics of the time spent waiting.
#include <chrono>

#include "kv/worker_impl.h"

namespace ps {

void KVWorkerBase::Impl::ReleaseClocks() {
  const auto gone = [this](int64_t ts) { return !pending.count(ts); };  // failed: going down
  for (int64_t ts : steps.ReleaseClocks(gone)) {
    Pending* c = pending.at(ts).get();
    c->held = false;
    const auto now = std::chrono::steady_clock::now();
    const int64_t lwm = *open_ts.begin(), safe = steps.SafeStep();
    for (size_t k = 0; k < c->sent.size(); ++k) {
      c->sent[k].meta.set_lwm(lwm);
      c->sent[k].meta.set_done_step(safe);
      c->sent_at[k] = now;
      due.push_back(c->sent[k]);
    }
  }
}

int64_t KVWorkerBase::CloseTask(int task) {
  if (task < 0 || task >= kMaxTasks) throw Error("CloseTask: task must be in [0, 2^30)");
  detail::KVRequest r;
  r.op = detail::KVRequest::kTaskClose;
  r.task = task;
  return impl_->Submit(std::move(r));
}

int64_t KVWorkerBase::Clock() {
  auto* d = impl_.get();
  detail::KVRequest r;
  r.op = detail::KVRequest::kClock;
  const int64_t ts = d->Submit(std::move(r));
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(d->rt->cfg.request_timeout_ms);
  std::unique_lock<std::mutex> lk(d->mu);
  d->steps.NextStep();
  const int64_t step = d->steps.step();
  while (!d->delay.MayStart(step, d->tau)) {
    if (d->cv.wait_until(lk, deadline) == std::cv_status::timeout &&
        !d->delay.MayStart(step, d->tau)) {
      throw Error(ErrorCode::kTimeout,
                  "Clock: requests of steps before " + std::to_string(step - d->tau) +
                      " not answered within " + std::to_string(d->rt->cfg.request_timeout_ms) +
                      " ms (PS_REQUEST_TIMEOUT_MS); bounded delay " + std::to_string(d->tau));
    }
  }
  d->delay_wait_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return ts;
}

int64_t KVWorkerBase::step() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->steps.step();
}

void KVWorkerBase::SetMaxDelay(int tau) {
  if (tau < -1) throw Error("SetMaxDelay: tau must be -1 (unbounded) or >= 0");
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->tau = tau;
  impl_->cv.notify_all();
}

int KVWorkerBase::max_delay() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->tau;
}

void KVWorkerBase::Impl::Metrics(MetricSet* out) {
  std::lock_guard<std::mutex> lk(mu);
  const MetricSet::Labels a = {{"app", std::to_string(app)}};
  const int64_t step = steps.step();
  out->Gauge("ps_worker_step", static_cast<double>(step), a);
  out->Gauge("ps_worker_read_clock", static_cast<double>(read_clock), a);
  // How stale the last pull was: 0 under BSP, at most s under SSP(s).
  if (read_clock >= 0) out->Gauge("ps_worker_read_lag", static_cast<double>(step - read_clock), a);
  out->Counter("ps_worker_barrier_wait_seconds_total", barrier_wait_us * 1e-6, a);
  out->Counter("ps_worker_delay_wait_seconds_total", delay_wait_s, a);
  out->Counter("ps_worker_resends_total", static_cast<double>(resends.load()), a);
  out->Gauge("ps_worker_requests_open", static_cast<double>(pending.size()), a);
  for (const auto* h : {&push_latency, &pull_latency}) {
    MetricSet::Labels l = a;
    l.emplace_back("op", h == &push_latency ? "push" : "pull");
    out->Histogram("ps_worker_request_seconds", h->bounds(), h->counts(), h->sum_seconds(), l);
  }
}

KVWorkerBase::BarrierStats KVWorkerBase::barrier_stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  BarrierStats b;
  b.step = impl_->steps.step();
  b.barrier_wait_s = impl_->barrier_wait_us * 1e-6;
  b.delay_wait_s = impl_->delay_wait_s;
  b.read_clock = impl_->read_clock;
  b.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->created).count();
  return b;
}

}  // namespace ps
