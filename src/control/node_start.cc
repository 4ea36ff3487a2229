// Node::Impl, how a node enters its job: the addresses it binds and advertises, its
// connection to the scheduler (made again while the scheduler was never seen listening) and the
// registration that ends with the node table. The rest of the runtime is node.cc.
#include <glog/logging.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "control/addresses.h"
#include "control/node_impl.h"
#include "util/retain_memory.h"

namespace ps {
namespace {

void WritePortFile(const std::string& path, int port) {
  // Write then rename, so a launcher polling the file never reads half a number.
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << port << "\n";
    if (!f) throw Error(ErrorCode::kBadConfig, "PS_SCHEDULER_PORT_FILE: cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw Error(ErrorCode::kBadConfig,
                "PS_SCHEDULER_PORT_FILE: cannot rename " + tmp + " to " + path);
  }
}

}  // namespace

void Node::Impl::Start() {
  if (running_) throw Error("Node::Start called twice");
  if (cfg.join && !cfg.inproc && cfg.role != Role::kScheduler &&
      !TcpListening(cfg.scheduler_host, cfg.scheduler_port, 3000)) {
    throw Error(ErrorCode::kSchedulerLost,
                "no scheduler listens at " + cfg.scheduler_host + ":" +
                    std::to_string(cfg.scheduler_port) +
                    " (PS_SCHEDULER_HOST/PS_SCHEDULER_PORT): a node can join only a running job; "
                    "ps-launch prints the address to give --join when the job starts");
  }
  if (ShouldRetainFreedMemory(cfg)) RetainFreedMemory(static_cast<size_t>(cfg.malloc_retain_mb));
  van = MakeVan(cfg);
  const bool scheduler = cfg.role == Role::kScheduler;
  if (!cfg.inproc) {
    // Names and empty hosts become addresses here (docs/operations.md, "Kubernetes").
    const NodeAddresses a = ChooseAddresses(cfg);
    if (!scheduler) cfg.host = a.advertise;
    bind_host_ = a.bind;
    scheduler_addr_ = a.scheduler;
  } else {
    if (cfg.host.empty()) cfg.host = "127.0.0.1";
    bind_host_ = scheduler ? cfg.scheduler_host : cfg.host;
    scheduler_addr_ = cfg.scheduler_host;
  }
  port_ = van->Bind(bind_host_, scheduler ? cfg.scheduler_port : cfg.port);
  if (scheduler) {
    std::lock_guard<std::mutex> lk(mu_);
    my_id_ = 0;
    my_rank_ = 0;
    SchedulerCore::Options o;
    o.num_servers = cfg.num_servers;
    o.num_workers = cfg.num_workers;
    o.host = cfg.scheduler_host;
    o.port = port_;
    o.worker_groups = cfg.worker_groups;
    o.vnodes = cfg.vnodes;
    o.replicas = cfg.EffectiveReplicas();
    o.heartbeat_timeout_ms = cfg.heartbeat_timeout_ms;
    o.heartbeat_interval_ms = cfg.heartbeat_interval_ms;
    o.task_timeout_ms = cfg.task_timeout_ms;
    o.task_keep_ms = TaskKeepMs();
    o.barrier_report_ms = BarrierReportMs();
    sched_ = std::make_unique<SchedulerCore>(std::move(o));
    if (!cfg.scheduler_port_file.empty()) WritePortFile(cfg.scheduler_port_file, port_);
  }
  if (scheduler) {
    StartMetricsServer();
  } else {
    // The scheduler's process dying closes our connection to it: noted here, acted on while
    // registering (below) and then by the heartbeat thread after a grace period (the last
    // messages it sent may still be queued for our receive thread, such as the release of the
    // final barrier). Watched before connecting: a connection refused at once is seen too.
    van->WatchPeers([this](int id) {
      if (id == 0) scheduler_broken_ms_ = NowMs();
    });
    // Whether the scheduler listens already: a connection that breaks before the node table
    // came means "not up yet" (connect again) only while it was never seen listening.
    scheduler_seen_ = cfg.inproc || TcpListening(scheduler_addr_, cfg.scheduler_port, 200);
    van->Connect(0, scheduler_addr_, cfg.scheduler_port);
  }
  running_ = true;
  recv_thread_ = std::thread([this] { RecvLoop(); });
  pb::Control reg;
  if (!scheduler) {
    reg.set_cmd(pb::Control::REGISTER);
    auto* e = reg.add_nodes();
    e->set_role(static_cast<int>(cfg.role));
    e->set_host(cfg.host);
    e->set_port(port_);
    e->set_rank_hint(cfg.rank_hint);
    e->set_join(cfg.join);
    e->set_group(cfg.worker_group);
  }
  // Registration is repeated until the table arrives: the scheduler may bind after us, and
  // the in-process van does not queue for an address nobody holds yet. Repeats are
  // recognised by host:port and ignored.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(cfg.register_timeout_ms);
  std::unique_lock<std::mutex> lk(mu_);
  bool ok = false;
  auto backoff = std::chrono::milliseconds(20);
  const auto started = std::chrono::steady_clock::now();
  auto next_note = started + std::chrono::seconds(5);
  for (;;) {
    if (std::chrono::steady_clock::now() >= next_note) {
      // Never silent: a node that waits for its table says for what, every 5 s.
      next_note += std::chrono::seconds(5);
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::steady_clock::now() - started)
                              .count();
      if (scheduler) {
        LOG(WARNING) << "scheduler: waiting for " << cfg.num_servers << " server(s) and "
                     << cfg.num_workers << " worker(s) to register on port " << port_ << " ("
                     << waited << " s; PS_REGISTER_TIMEOUT_MS=" << cfg.register_timeout_ms << ")";
      } else {
        LOG(WARNING) << RoleName(cfg.role) << " at " << cfg.host << ":" << port_
                     << ": no node table yet from the scheduler at " << cfg.scheduler_host << ":"
                     << cfg.scheduler_port << " (" << waited
                     << " s; it waits for every expected node, PS_NUM_SERVERS and "
                        "PS_NUM_WORKERS"
                     << (reconnects_ ? "; connected again " + std::to_string(reconnects_) +
                                           " time(s): refused or broken"
                                     : std::string())
                     << ")";
      }
    }
    if (!scheduler) {
      const int64_t broken = scheduler_broken_ms_;
      bool again = false;
      if (broken > 0 && !scheduler_seen_) {
        lk.unlock();
        const bool listening = TcpListening(scheduler_addr_, cfg.scheduler_port, 200);
        lk.lock();
        // Nodes started by hand (a Kubernetes job's pods) start in any order: a scheduler never
        // seen listening is not up yet, so connect again until the registration deadline, as
        // ZeroMQ does by itself (the UCX van gives up on a refused connection). One that
        // listens now is up: connect again too, and from now on a break means it died.
        scheduler_seen_ = listening;
        again = true;
      }
      if (again) {
        scheduler_broken_ms_ = 0;
        reconnects_++;
        lk.unlock();
        van->Connect(0, scheduler_addr_, cfg.scheduler_port);
        lk.lock();
      } else if (broken > 0 && NowMs() - broken > cfg.heartbeat_timeout_ms) {
        // A connection that worked, then broke: the scheduler died.
        lk.unlock();
        Stop();
        throw Error(ErrorCode::kSchedulerLost,
                    std::string(RoleName(cfg.role)) + ": lost the scheduler at " +
                        cfg.scheduler_host + ":" + std::to_string(cfg.scheduler_port) +
                        " before its node table arrived: the connection broke " +
                        std::to_string(NowMs() - broken) + " ms ago");
      }
      lk.unlock();
      SendControl(0, reg, /*quiet=*/true);
      lk.lock();
    }
    auto next = std::min(deadline, std::chrono::steady_clock::now() + backoff);
    backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::seconds(1));
    ok = cv_.wait_until(lk, next, [this] { return ready_ || !reject_.empty(); });
    if (ok || std::chrono::steady_clock::now() >= deadline) break;
  }
  if (!reject_.empty()) {
    std::string why = reject_;
    lk.unlock();
    Stop();
    throw Error(ErrorCode::kRejected, "registration rejected by the scheduler: " + why);
  }
  if (!ok) {
    std::string what =
        scheduler ? "scheduler: " + sched_->membership().Missing()
                  : std::string(RoleName(cfg.role)) + ": no node table from the scheduler at " +
                        cfg.scheduler_host + ":" + std::to_string(cfg.scheduler_port);
    lk.unlock();
    Stop();
    throw Error(ErrorCode::kTimeout, what + " after " + std::to_string(cfg.register_timeout_ms) +
                                         " ms (PS_REGISTER_TIMEOUT_MS)");
  }
  lk.unlock();
  if (scheduler) {
    // A node whose process dies closes its connections at once: declare it dead then,
    // instead of waiting out the heartbeat timeout (a hang still needs the timeout).
    van->WatchPeers([this](int id) {
      std::unique_lock<std::mutex> lk(mu_);
      Apply(sched_->ConnectionBroke(id, NowMs()), &lk);
    });
  }
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
}

}  // namespace ps
