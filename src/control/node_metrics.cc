// Job-wide metrics: what a node sends with its heartbeats, and what the scheduler serves.
#include <glog/logging.h>

#include "control/metrics_page.h"
#include "control/node_impl.h"

namespace ps {

namespace {
constexpr int64_t kMetricsEveryMs = 1000;
}

void Node::Impl::CollectMetrics(MetricSet* out) {
  const NodeStats s = Stats();
  out->Counter("ps_messages_sent_total", static_cast<double>(s.messages_sent));
  out->Counter("ps_messages_received_total", static_cast<double>(s.messages_received));
  out->Counter("ps_bytes_sent_total", static_cast<double>(s.bytes_sent));
  out->Counter("ps_bytes_received_total", static_cast<double>(s.bytes_received));
  out->Counter("ps_malformed_dropped_total", static_cast<double>(s.malformed_dropped));
  out->Counter("ps_send_queue_full_total", static_cast<double>(s.send_queue_full));
  out->Counter("ps_lease_dropped_total", static_cast<double>(s.lease_dropped));
  out->Counter("ps_messages_batched_total", static_cast<double>(s.messages_batched));
  out->Gauge("ps_shared_memory_peers", static_cast<double>(s.shared_memory_peers));
  out->Gauge("ps_ring_epoch", static_cast<double>(ring_epoch()));
  peer_sent_.Emit(out, "sent");
  peer_received_.Emit(out, "received");
  // Data traffic by peer and by frame kind and codec (what the filters saved).
  for (const auto& p : filters->sent_to()) {
    out->Counter("ps_peer_wire_bytes_sent_total", static_cast<double>(p.second.wire),
                 {{"peer", std::to_string(p.first)}});
  }
  for (const auto& p : filters->received_from()) {
    out->Counter("ps_peer_wire_bytes_received_total", static_cast<double>(p.second.wire),
                 {{"peer", std::to_string(p.first)}});
  }
  for (const auto& c : filters->sent_by_codec()) {
    out->Counter("ps_filter_raw_bytes_sent_total", static_cast<double>(c.second.raw),
                 {{"codec", c.first}});
    out->Counter("ps_filter_wire_bytes_sent_total", static_cast<double>(c.second.wire),
                 {{"codec", c.first}});
  }
  std::map<std::string, std::string> table_of;  // the named tables' application ids
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const TableSpec& t : tables_) table_of[std::to_string(t.app_id)] = t.name;
  }
  MetricSet apps;
  {
    std::lock_guard<std::mutex> lk(cust_mu_);
    for (auto& c : customers_) c.second->Metrics(&apps);
    for (const auto& r : retired_metrics_) apps.Append(r.second);
  }
  apps.NameTables(table_of);
  out->Append(apps);
}

void Node::Impl::SendMetrics(bool force) {
  if (cfg.role == Role::kScheduler || !want_metrics_.load()) return;
  const int64_t now = NowMs();
  if (!force && now - metrics_sent_ms_ < kMetricsEveryMs) return;
  metrics_sent_ms_ = now;
  MetricSet set;
  CollectMetrics(&set);
  pb::Control c;
  c.set_cmd(pb::Control::HEARTBEAT);
  set.ToProto(c.mutable_metrics());
  SendControl(0, c, true);
}

void Node::Impl::StoreMetrics(int from, const pb::Control& c) {
  MetricsTable::NodeKey key{from, "unknown", -1};
  for (const auto& n : nodes_) {
    if (n.id == from) key = {from, RoleName(n.role), n.rank, n.group};
  }
  const int dropped = metrics_table_.Update(key, c.metrics(), NowMs());
  LOG_IF(WARNING, dropped > 0) << "node " << from << " sent " << dropped
                               << " metric samples that are not valid Prometheus: dropped";
}

MetricSet Node::Impl::JobMetrics() {
  MetricSet job;
  std::map<std::string, int> by_role = {{"server", 0}, {"worker", 0}};
  for (const auto& n : nodes_) {
    if (n.id != 0 && !sched_->membership().IsDead(n.id) &&
        !(sched_->ring_core() && sched_->ring_core()->HasLeft(n.id)))
      by_role[RoleName(n.role)]++;
  }
  for (const auto& r : by_role) job.Gauge("ps_job_nodes", r.second, {{"role", r.first}});
  job.Gauge("ps_job_dead_nodes", static_cast<double>(dead_.size()));
  job.Gauge("ps_job_uptime_seconds", static_cast<double>(NowMs() - started_ms_) / 1000.0);
  job.Gauge("ps_job_ring_epoch", static_cast<double>(ring_ ? ring_->epoch() : 0));
  job.Gauge("ps_job_open_barriers",
            static_cast<double>(sched_->membership().OpenBarriers().size()));
  job.Gauge("ps_job_tasks_done", static_cast<double>(sched_->tasks().done()));
  job.Gauge("ps_job_tasks_outstanding", static_cast<double>(sched_->tasks().outstanding()));
  job.Gauge("ps_job_tasks_pending", static_cast<double>(sched_->tasks().pending()));
  job.Counter("ps_job_metrics_invalid_total", static_cast<double>(metrics_table_.invalid()));
  return job;
}

void Node::Impl::JobEvent(const std::string& what, bool warning) {
  if (warning) {
    LOG(WARNING) << what;
  } else {
    LOG(INFO) << what;
  }
  if (cfg.role != Role::kScheduler) return;
  std::lock_guard<std::mutex> lk(events_mu_);
  events_.emplace_back(NowMs() - started_ms_, what);
  if (events_.size() > 256) events_.pop_front();
}

bool Node::Impl::MetricsPage(const std::string& path, std::string* body, std::string* type) {
  std::lock_guard<std::mutex> lk(mu_);
  if (path == "/metrics") {
    *body = metrics_table_.Prometheus(JobMetrics());
    *type = "text/plain; version=0.0.4; charset=utf-8";
    return true;
  }
  if (path == "/" || path == "/index.html") {
    *body = LivePageHtml();
    *type = "text/html; charset=utf-8";
    return true;
  }
  if (path == "/stats") {
    std::lock_guard<std::mutex> ek(events_mu_);
    *body = metrics_table_.Json(JobMetrics(), NowMs(), std::set<int>(dead_.begin(), dead_.end()),
                                events_);
    *type = "application/json";
    return true;
  }
  return false;
}

void Node::Impl::StartMetricsServer() {
  if (cfg.role != Role::kScheduler || cfg.metrics_port == 0) return;
  metrics_http_ = std::make_unique<MetricsHttp>(
      cfg.metrics_host, cfg.metrics_port,
      [this](const std::string& path, std::string* body, std::string* type) {
        return MetricsPage(path, body, type);
      });
  LOG(INFO) << "job metrics at http://" << cfg.metrics_host << ":" << cfg.metrics_port
            << "/metrics (Prometheus) and /stats (JSON)";
}

}  // namespace ps
