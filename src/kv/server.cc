#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "control/node_impl.h"
#include "kv/server_core.h"
#include "ps/kv_server.h"

namespace ps {

// Binds a ServerCore to a node: requests come from the node's receive thread, replies leave
// through the node's transport.
struct KVServerBase::Impl : public Customer {
  Impl(Node* n, int a, DataType t, std::shared_ptr<StoreBase> s)
      : rt(n->impl()),
        app(a),
        core(
            a, t, std::move(s), ParsePolicy(rt->policy()),
            rt->cfg.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(n->id()) * 1000 + a,
            rt->LiveWorkers(),
            [this](Message& m) {
              if (!rt->Send(m)) VLOG(1) << "cannot reply to node " << m.meta.receiver();
            },
            [] {
              return std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                  .count();
            },
            n->id(), [rt = n->impl()] { return rt->ring(); }) {
    core.SetReport([this](const ServerCore::RefillReport& r) { rt->ReportRefill(app, r); });
    for (int id : n->dead_nodes()) core.Tombstone(id, rt->IsWorker(id));
    for (int id : rt->LiveWorkers()) core.SetWorkerGroup(id, rt->WorkerGroupOf(id));
    // A thread of its own for timers (not the node's heartbeat thread: a tick waits for the
    // core's lock, which a large range copy can hold for a while, and heartbeats must not
    // wait): refill retries and copy resends every tick, aggregation batches every half window.
    const int window = rt->cfg.replication_window_ms;
    if (window > 0) core.SetAggregation(int64_t{window} * 1000);
    core.SetPieceBytes(uint64_t{static_cast<uint32_t>(rt->cfg.refill_piece_mb)} << 20);
    // At most 200 ms, whatever the heartbeat interval: copy resends (from 0.5 s) and gap and
    // refill timeouts run on this tick, and a job must not wait a long heartbeat interval for
    // them (in-process tests beat every 30 s).
    const int64_t tick_us = int64_t{std::min(rt->cfg.heartbeat_interval_ms, 200)} * 1000;
    const int64_t step_us = window > 0 ? std::min<int64_t>(window * 500, tick_us) : tick_us;
    timer = std::thread([this, window, tick_us, step_us] {
      std::unique_lock<std::mutex> lk(timer_mu);
      auto next_tick = std::chrono::steady_clock::now() + std::chrono::microseconds(tick_us);
      while (!stop) {
        timer_cv.wait_for(lk, std::chrono::microseconds(step_us));
        if (stop) break;
        lk.unlock();
        if (window > 0) core.Poll();
        if (std::chrono::steady_clock::now() >= next_tick) {
          core.Tick();
          next_tick = std::chrono::steady_clock::now() + std::chrono::microseconds(tick_us);
        }
        lk.lock();
      }
    });
  }
  ~Impl() override {
    {
      std::lock_guard<std::mutex> lk(timer_mu);
      stop = true;
    }
    timer_cv.notify_all();
    if (timer.joinable()) timer.join();
  }

  void Metrics(MetricSet* out) override;
  void Process(Message& msg) override {
    // A node that cannot go on (fenced, the scheduler lost, data lost) serves nothing more,
    // whether or not its program chose to exit (PS_ON_SCHEDULER_LOSS=throw keeps it alive).
    if (!rt->fatal().empty()) return;
    core.Process(msg);
  }
  void OnNodeDead(int id) override { core.WorkerDead(id, rt->IsWorker(id)); }
  void OnRingChange(std::shared_ptr<const Ring> ring) override { core.RingChanged(ring); }
  void OnNodeJoined(const NodeInfo& n) override {
    if (n.role != Role::kWorker) return;
    core.SetWorkerGroup(n.id, rt->WorkerGroupOf(n.id));
    core.WorkerJoined(n.id);
  }
  void OnPrepare(std::shared_ptr<const Ring> next) override { core.Prepare(std::move(next)); }
  void OnConsistency(int group, const std::string& policy, bool, int) override {
    if (!policy.empty()) core.SetPolicy(ParsePolicy(policy), group);
  }

  Node::Impl* rt;
  int app;
  ServerCore core;
  std::thread timer;
  std::mutex timer_mu;
  std::condition_variable timer_cv;
  bool stop = false;
};

KVServerBase::KVServerBase(Node* node, int app_id, DataType dtype, std::shared_ptr<StoreBase> store)
    : impl_(node->role() == Role::kServer ? new Impl(node, app_id, dtype, std::move(store))
                                          : nullptr) {
  if (!impl_) throw Error("KVServer needs a server node");
  node->impl()->AddCustomer(app_id, impl_.get());
}

KVServerBase::~KVServerBase() { impl_->rt->RemoveCustomer(impl_->app); }

namespace {

// A distribution kept as value -> count, as a histogram with bounds 0, 1, 2, 4 ... 64.
void StepHistogram(MetricSet* out, const std::string& name, const std::map<int64_t, uint64_t>& d,
                   const MetricSet::Labels& labels) {
  const std::vector<double> bounds = {0, 1, 2, 4, 8, 16, 32, 64};
  std::vector<uint64_t> counts(bounds.size() + 1, 0);
  double sum = 0;
  for (const auto& e : d) {
    size_t i = 0;
    while (i < bounds.size() && static_cast<double>(e.first) > bounds[i]) ++i;
    counts[i] += e.second;
    sum += static_cast<double>(e.first) * static_cast<double>(e.second);
  }
  out->Histogram(name, bounds, counts, sum, labels);
}

}  // namespace

void KVServerBase::Impl::Metrics(MetricSet* out) {
  const MetricSet::Labels a = {{"app", std::to_string(app)}};
  out->Gauge("ps_server_keys", static_cast<double>(core.NumKeys()), a);
  out->Gauge("ps_server_mastered_keys", static_cast<double>(core.NumMastered()), a);
  out->Gauge("ps_server_store_bytes", static_cast<double>(core.StoreBytes()), a);
  out->Gauge("ps_server_pending_ranges", static_cast<double>(core.PendingRanges()), a);
  out->Counter("ps_server_rejected_total", static_cast<double>(core.rejected()), a);
  out->Counter("ps_server_duplicate_pushes_total", static_cast<double>(core.duplicates()), a);
  const auto b = core.Stats();
  out->Gauge("ps_server_clock", static_cast<double>(b.clock), a);
  out->Counter("ps_server_pulls_total", static_cast<double>(b.reads), a);
  out->Counter("ps_server_pulls_deferred_total", static_cast<double>(b.deferred), a);
  out->Gauge("ps_server_pulls_held", static_cast<double>(b.held), a);
  StepHistogram(out, "ps_server_push_staleness", b.staleness, a);
  StepHistogram(out, "ps_server_read_lag", b.read_lag, a);
  const auto c = core.copy_stats();
  out->Counter("ps_server_copies_total", static_cast<double>(c.copies), a);
  out->Counter("ps_server_copy_bytes_total", static_cast<double>(c.bytes), a);
  const auto o = core.order_stats();
  out->Counter("ps_server_copies_held_total", static_cast<double>(o.held), a);
  out->Counter("ps_server_ranges_refetched_total", static_cast<double>(o.refetched), a);
  out->Gauge("ps_server_refill_buffered_bytes", static_cast<double>(o.buffered_bytes), a);
}

KVServerBase::BarrierStats KVServerBase::barrier_stats() const { return impl_->core.Stats(); }
size_t KVServerBase::NumKeys() const { return impl_->core.NumKeys(); }
size_t KVServerBase::StoreBytes() const { return impl_->core.StoreBytes(); }
size_t KVServerBase::NumMasteredKeys() const { return impl_->core.NumMastered(); }
size_t KVServerBase::PendingRanges() const { return impl_->core.PendingRanges(); }
std::vector<std::pair<Range, uint64_t>> KVServerBase::ChainDigests() const {
  return impl_->core.ChainDigests();
}
uint64_t KVServerBase::RejectedRequests() const { return impl_->core.rejected(); }
uint64_t KVServerBase::DuplicatePushes() const { return impl_->core.duplicates(); }
KVServerBase::SignificantStats KVServerBase::significant_stats() const {
  const auto c = impl_->core.significant_stats();
  SignificantStats r;
  r.sent = c.sent;
  r.suppressed = c.suppressed;
  r.epochs = c.epochs;
  return r;
}

KVServerBase::ReplicationStats KVServerBase::replication_stats() const {
  auto c = impl_->core.copy_stats();
  ReplicationStats r;
  r.copies = c.copies;
  r.bytes = c.bytes;
  r.aggregated = c.aggregated;
  r.conflicts = c.conflicts;
  return r;
}

template <typename V>
std::shared_ptr<StoreBase> KVServerBase::MakeStore(std::shared_ptr<const UpdateRule<V>> rule,
                                                   Reducers<V> reducers) {
  if (!rule) throw Error("KVServer: update rule must not be null");
  for (const auto& r : reducers) {
    if (r.first <= 0)
      throw Error("KVServer: reducer ids start at 1 (got " + std::to_string(r.first) + ")");
    if (!r.second || r.second->Width() < 1) {
      throw Error("KVServer: reducer " + std::to_string(r.first) +
                  " is null or adds into no value (Width() < 1)");
    }
  }
  return std::make_shared<Store<V>>(std::move(rule), Store<V>::kBlockBytes, std::move(reducers));
}
#define PS_MAKE_STORE(V)                                          \
  template std::shared_ptr<StoreBase> KVServerBase::MakeStore<V>( \
      std::shared_ptr<const UpdateRule<V>>, Reducers<V>);
PS_MAKE_STORE(float)
PS_MAKE_STORE(double)
PS_MAKE_STORE(int32_t)
PS_MAKE_STORE(int64_t)
#undef PS_MAKE_STORE

}  // namespace ps
