// Node::Impl, second half: the scheduler's decisions carried out (Apply: what SchedulerCore,
// scheduler_core.h, returns) and what every node does with them — the node table, joins, dead
// nodes and rings, the consistency relay, heartbeats, Finalize, and giving up (Fatal). The
// runtime half is node.cc, the entry into the job node_start.cc, barriers node_barrier.cc.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "control/node_impl.h"

namespace ps {

pb::Control Node::Impl::TableMessage() const {
  pb::Control c;
  c.set_cmd(pb::Control::NODE_TABLE);
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& n : nodes_) SchedulerCore::FillEntry(n, c.add_nodes());
  RingCore::FillRing(*ring_, c.mutable_ring());
  for (int id : sched_->membership().dead()) c.add_dead(id);
  c.set_policy(policy_);
  c.set_set_delay(true);
  c.set_max_delay(max_delay_);
  FillTables(&c);
  for (const auto& g : cfg.worker_groups) {
    c.add_group_names(g.first);
    c.add_group_sizes(g.second);
  }
  for (const auto& g : group_policy_) {
    c.add_policy_groups(g.first);
    c.add_group_policies(g.second);
  }
  for (const auto& g : group_delay_) {
    c.add_delay_groups(g.first);
    c.add_group_delays(g.second);
  }
  for (const auto& g : sched_->membership().released()) {
    c.add_released_groups(g.first);
    c.add_released_seqs(g.second);
  }
  return c;
}

bool Node::Impl::Apply(SchedulerCore::Actions acts, std::unique_lock<std::mutex>* lk) {
  using Kind = SchedulerCore::Action::Kind;
  for (auto& a : acts) {
    switch (a.kind) {
      case Kind::kComplete:
        nodes_ = sched_->membership().nodes();
        SetRing(a.ring);
        break;
      case Kind::kJoined:
        nodes_ = sched_->membership().nodes();
        if (a.node.role == Role::kWorker) {
          JoinGroup(&cfg.worker_groups, a.node.group, cfg.num_workers);
        }
        break;
      case Kind::kRing:
        SetRing(a.ring);
        break;
      case Kind::kDead:
        if (std::find(dead_.begin(), dead_.end(), a.to) == dead_.end()) dead_.push_back(a.to);
        CountDeadWorkers();
        break;
      case Kind::kSend:
        if (a.to == 0 && a.msg.cmd() == pb::Control::BARRIER_WAIT) {
          // The scheduler's own barrier: kept for its timeout's message.
          barrier_wait_[a.msg.barrier_groups()] = {a.msg.barrier_seq(), a.msg.error()};
        }
        break;
      default:
        break;
    }
  }
  lk->unlock();
  bool forward = false;
  for (auto& a : acts) {
    switch (a.kind) {
      case Kind::kSend:
        for (int to : a.fanout) SendControl(to, a.msg, a.quiet);
        if (a.fanout.empty() && a.to != 0) SendControl(a.to, std::move(a.msg), a.quiet);
        break;
      case Kind::kTable: {
        pb::Control t = TableMessage();
        t.set_your_id(a.to);
        SendControl(a.to, std::move(t), a.quiet);
        break;
      }
      case Kind::kReject: {
        // On a temporary path: the node has no id yet.
        van->Connect(-2, a.host, a.port);
        Message m;
        m.meta.set_magic(kMagic);
        m.meta.set_receiver(-2);
        m.meta.mutable_control()->set_cmd(pb::Control::REJECT);
        m.meta.mutable_control()->set_error(a.text);
        van->Send(m);
        break;
      }
      case Kind::kEvent:
        JobEvent(a.text, a.warning);
        break;
      case Kind::kLog:
        LOG_IF(WARNING, a.warning) << a.text;
        LOG_IF(INFO, !a.warning) << a.text;
        break;
      case Kind::kComplete: {
        std::lock_guard<std::mutex> g(mu_);
        ready_ = true;
        cv_.notify_all();
        break;
      }
      case Kind::kJoined:
        NotifyJoined(a.node);
        break;
      case Kind::kRing:
        NotifyRing(a.ring);
        break;
      case Kind::kDead:
        if (a.warning) {
          // On the host's steady clock, which every process of a host shares: a test compares
          // it with the last request the node served (Fatal).
          LOG(INFO) << "node " << a.to << " declared dead at steady clock " << SteadyUs() << " us";
        }
        if (!a.quiet) NotifyDead(a.to);
        break;
      case Kind::kRelease:
        ReleaseBarrier(a.release.ids, a.release.groups, a.release.seq);
        break;
      case Kind::kAbort:
        AbortJob(a.text, a.code);
        break;
      case Kind::kForward:
        forward = true;
        break;
    }
  }
  return forward;
}

void Node::Impl::Forwarded(int from, const pb::Control& c) {
  if (c.cmd() == pb::Control::ADD_TASKS) {
    TaskAdd add;
    add.n = c.task();
    add.once = c.task_once();
    add.data = c.has_task_data() ? &c.task_data() : nullptr;
    add.pool = c.task_pool();
    const int first = AddToPool(std::max(0, c.group() - 1), add);
    pb::Control reply;
    reply.set_cmd(pb::Control::ADD_TASKS);
    reply.set_task(first);
    reply.set_request(c.request());
    SendControl(from, reply);
  } else if (c.cmd() == pb::Control::CREATE_TABLE) {
    OnCreateTable(from, c);
  } else if (c.cmd() == pb::Control::CONSISTENCY) {
    ApplyConsistency(c);
  } else if (c.cmd() == pb::Control::HEARTBEAT) {
    std::lock_guard<std::mutex> lk(mu_);
    StoreMetrics(from, c);
  }
}

void Node::Impl::ReportRefill(int app, const RefillReport& r) {
  SendControl(0, SchedulerCore::RefillMessage(app, r));
}

void Node::Impl::AddCustomer(int app_id, Customer* c) {
  std::lock_guard<std::mutex> lk(cust_mu_);
  if (customers_.count(app_id))
    throw Error(ErrorCode::kInvalidArgument, "app id " + std::to_string(app_id) + " is in use");
  customers_[app_id] = c;
  retired_metrics_.erase(app_id);  // the new customer's counters replace the old one's
  // The customer read the node's barrier policy and delay when it was built; a CONSISTENCY
  // applied since then went to the customers registered at the time, not to this one, and a
  // server would keep serving under the old policy (BSP runs read partial iterations). What
  // the node holds now is the latest: any later change reaches this customer too.
  // The same for a ring being prepared (a join or leave in progress).
  std::string policy;
  int delay;
  std::map<int, std::string> group_policy;
  std::map<int, int> group_delay;
  std::shared_ptr<const Ring> next;
  {
    std::lock_guard<std::mutex> g(mu_);
    policy = policy_;
    delay = max_delay_;
    group_policy = group_policy_;
    group_delay = group_delay_;
    next = next_ring_;
  }
  c->OnConsistency(-1, policy, true, delay);
  for (const auto& g : group_policy) c->OnConsistency(g.first, g.second, false, 0);
  for (const auto& g : group_delay) c->OnConsistency(g.first, "", true, g.second);
  if (next) c->OnPrepare(next);
  if (parked_.count(app_id)) {
    // The receive thread hands them over, in order (DrainParked).
    draining_.store(true, std::memory_order_release);
    if (van) van->Interrupt();
  }
}

bool Node::Impl::DrainParked(size_t max, int64_t budget_us) {
  const int64_t until = SteadyUs() + budget_us;
  std::lock_guard<std::mutex> lk(cust_mu_);
  for (auto it = parked_.begin(); it != parked_.end() && max > 0;) {
    auto c = customers_.find(it->first);
    if (c == customers_.end()) {
      ++it;
      continue;
    }
    auto& q = it->second;
    while (!q.empty() && max > 0) {
      Message m = std::move(q.front());
      q.pop_front();
      parked_count_--;
      parked_bytes_ -= m.DataBytes();
      max--;
      c->second->Process(m);
      if (SteadyUs() >= until) max = 0;
    }
    it = q.empty() ? parked_.erase(it) : std::next(it);
  }
  for (const auto& p : parked_) {
    if (customers_.count(p.first)) return true;
  }
  draining_.store(false, std::memory_order_release);
  return false;
}

void Node::Impl::RemoveCustomer(int app_id) {
  std::lock_guard<std::mutex> lk(cust_mu_);
  auto it = customers_.find(app_id);
  if (it == customers_.end()) return;
  // Its counters stay in the node's metrics: a KVWorker gone before Finalize still counts in
  // the job's totals, and a counter never goes back.
  MetricSet last;
  it->second->Metrics(&last);
  retired_metrics_[app_id] = std::move(last);
  customers_.erase(it);
}

void Node::Impl::NotifyPrepare(std::shared_ptr<const Ring> next) {
  std::lock_guard<std::mutex> lk(cust_mu_);
  for (auto& c : customers_) c.second->OnPrepare(next);
}

void Node::Impl::AdoptNextRing(uint64_t epoch) {
  std::shared_ptr<const Ring> fresh;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!next_ring_ || next_ring_->epoch() != epoch || !ring_ || ring_->epoch() >= epoch) return;
    SetRing(std::make_shared<Ring>(next_ring_->AsCutOver()));
    next_ring_ = nullptr;
    fresh = ring_;
  }
  VLOG(1) << "adopted ring epoch " << epoch << " from a data message";
  NotifyRing(fresh);
}

void Node::Impl::NotifyJoined(const NodeInfo& n) {
  std::lock_guard<std::mutex> lk(cust_mu_);
  for (auto& c : customers_) c.second->OnNodeJoined(n);
}

void Node::Impl::CheckStarted(const char* call) const {
  std::lock_guard<std::mutex> lk(mu_);
  if (!ready_) throw Error(ErrorCode::kShutDown, std::string(call) + " called before Start");
}

uint64_t Node::Impl::NewRequest(const char* call) {
  CheckStarted(call);
  std::lock_guard<std::mutex> lk(mu_);
  return ++requests_;
}

void Node::Impl::NotifyRing(std::shared_ptr<const Ring> ring) {
  std::lock_guard<std::mutex> lk(cust_mu_);
  for (auto& c : customers_) c.second->OnRingChange(ring);
}

void Node::Impl::AbortJob(const std::string& why, ErrorCode code) {
  pb::Control a;
  a.set_cmd(pb::Control::ABORT);
  a.set_error(why);
  a.set_error_code(static_cast<int>(code));
  if (cfg.role != Role::kScheduler) {
    // The scheduler tells everyone, this node included: wait for that word (bounded), so the
    // request is out before the caller ends its process.
    aborting_.store(true);
    SendControl(0, a);
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::milliseconds(std::max(2000, cfg.heartbeat_timeout_ms)),
                 [&] { return !fatal_.empty(); });
    return;
  }
  std::vector<int> tell;
  {
    std::lock_guard<std::mutex> lk(mu_);
    tell = sched_->Live();
    sched_->Aborted();
  }
  JobEvent("job aborted: " + why);  // Fatal logs why as an error
  for (int to : tell) SendControl(to, a, true);
  Fatal(why, code);
}

void Node::Impl::Fatal(const std::string& why, ErrorCode code) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!fatal_.empty()) return;
    // Past the last barrier the job is over: nothing can fail any more.
    if (finalized_ && barrier_done_[kAllGroups] >= barrier_sent_[kAllGroups]) return;
    fatal_ = why;
    if (stalled_) {
      // What a fenced node did since it came back (the read lease keeps it at 0).
      fatal_ += "; requests served since it stalled: " + std::to_string(served_since_stall_.load());
    }
    if (const int64_t last = last_served_us_.load(); last > 0) {
      fatal_ +=
          "; its lease let its last request in at steady clock " + std::to_string(last) + " us";
    }
    fatal_code_ = code;
    if (sched_) sched_->Aborted();  // an aborted job hands out nothing
    has_fatal_.store(true, std::memory_order_release);
    cv_.notify_all();
  }
  const std::string said = fatal_;  // why, with what the node did since a stall
  LOG(ERROR) << said;
  if (cfg.exit_on_scheduler_loss && cfg.role != Role::kScheduler && !aborting_.load()) {
    std::fprintf(stderr, "ps: %s; exiting\n", said.c_str());
    std::fflush(stderr);
    google::FlushLogFiles(google::GLOG_INFO);
    std::_Exit(1);
  }
  std::lock_guard<std::mutex> cl(cust_mu_);
  for (auto& cu : customers_) cu.second->OnFatal(why, code);
}

void Node::Impl::NotifyDead(int id) {
  std::lock_guard<std::mutex> lk(cust_mu_);
  for (auto& c : customers_) c.second->OnNodeDead(id);
}

std::vector<int> Node::Impl::LiveWorkers() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<int> out;
  for (const auto& n : nodes_) {
    if (n.role == Role::kWorker && std::find(dead_.begin(), dead_.end(), n.id) == dead_.end()) {
      out.push_back(n.id);
    }
  }
  return out;
}

void Node::Impl::Leave() {
  if (cfg.role != Role::kServer) throw Error("Leave: only servers can leave a running job");
  pb::Control c;
  c.set_cmd(pb::Control::LEAVE);
  SendControl(0, c);
  const int me = id();
  std::unique_lock<std::mutex> lk(mu_);
  auto gone = [&] {
    const auto& s = ring_->servers();
    return std::find(s.begin(), s.end(), me) == s.end();
  };
  if (!cv_.wait_for(lk, std::chrono::milliseconds(cfg.barrier_timeout_ms),
                    [&] { return gone() || !leave_error_.empty() || !fatal_.empty(); })) {
    throw Error(ErrorCode::kTimeout, "Leave: the other servers did not take over within " +
                                         std::to_string(cfg.barrier_timeout_ms) +
                                         " ms (PS_BARRIER_TIMEOUT_MS)");
  }
  if (!leave_error_.empty()) throw Error(ErrorCode::kRejected, "Leave: " + leave_error_);
  if (!fatal_.empty()) throw Error(fatal_code_, "Leave: " + fatal_);
  finalized_ = true;  // nothing can fail any more: the job goes on without this node
  lk.unlock();
  LOG(INFO) << "server node " << me << " left the job";
  Stop();
}

void Node::Impl::Stalled(int64_t gap_ms) {
  if (!lease_.Stall(SteadyUs())) return;
  stalled_ = true;
  served_since_stall_ = 0;
  LOG(WARNING) << "node " << id() << " stalled for " << gap_ms
               << " ms: it serves nothing until the scheduler confirms it is in the job";
}

void Node::Impl::BeatRan(int64_t now_ms) {
  const int64_t last = beat_ran_ms_.exchange(now_ms);
  if (last < INT64_MAX / 2 && now_ms - last > StallMs()) Stalled(now_ms - last);
}

bool Node::Impl::LeaseValid(int64_t now) {
  if (lease_.Suspect()) return false;
  // The receive thread may run first after a stall: it checks the heartbeat thread's clock.
  const int64_t ran = beat_ran_ms_.load();
  const int64_t gap = now / 1000 - ran;
  if (ran < INT64_MAX / 2 && gap > StallMs()) {
    Stalled(gap);
    return false;
  }
  if (lease_.Fresh(now)) return true;
  if (!unechoed_.exchange(true)) {
    LOG(WARNING) << "node " << id() << ": no echo of its heartbeats from the scheduler for "
                 << lease_.EchoAgeMs(now) << " ms (the lease is " << lease_.LeaseMs()
                 << " ms: PS_HEARTBEAT_TIMEOUT_MS less a quarter of PS_HEARTBEAT_INTERVAL_MS): "
                    "it serves nothing until the scheduler answers, which may have declared it "
                    "dead";
  }
  return false;
}

void Node::Impl::HeartbeatLoop() {
  std::unique_lock<std::mutex> lk(mu_);
  // The scheduler looks for silent nodes more often than it beats, so a hang is declared
  // within the timeout plus a few ms rather than plus a whole interval.
  const int tick = cfg.role == Role::kScheduler ? std::min(cfg.heartbeat_interval_ms, 20)
                                                : cfg.heartbeat_interval_ms;
  int64_t next_beat = NowMs() + cfg.heartbeat_interval_ms;
  int64_t last_look = NowMs();
  while (running_) {
    cv_.wait_for(lk, std::chrono::milliseconds(tick));
    if (!running_) break;
    if (cfg.role == Role::kScheduler) {
      const int64_t now = NowMs();
      const int64_t gap = now - last_look;
      last_look = now;
      const bool beat = now >= next_beat;
      if (beat) next_beat = now + cfg.heartbeat_interval_ms;
      Apply(sched_->Tick(now, gap, tick, beat, cfg.metrics_port > 0), &lk);
      lk.lock();
    } else {
      lk.unlock();
      BeatRan(NowMs());
      pb::Control c;
      c.set_cmd(pb::Control::HEARTBEAT);
      c.set_beat_us(SteadyUs());
      SendControl(0, c, true);
      const int64_t now = NowMs();
      const int64_t silent_ms = now - heard_scheduler_ms_;
      const int64_t broken = scheduler_broken_ms_;
      lk.lock();
      // Silence alone is judged leniently (10x the timeout): a node whose receive thread is
      // behind a backlog hears late even from a live scheduler. A broken connection is the
      // sure sign of a dead one.
      const bool gone = broken > 0 && now - broken > cfg.heartbeat_timeout_ms;
      const bool mute = silent_ms > 10 * static_cast<int64_t>(cfg.heartbeat_timeout_ms);
      if (ready_ && fatal_.empty() && (gone || mute)) {
        const std::string why =
            "lost the scheduler at " + cfg.scheduler_host + ":" +
            std::to_string(cfg.scheduler_port) + ": " +
            (gone ? "its connection broke " + std::to_string(now - broken) + " ms ago"
                  : "nothing heard for " + std::to_string(silent_ms) + " ms") +
            " (PS_HEARTBEAT_TIMEOUT_MS=" + std::to_string(cfg.heartbeat_timeout_ms) + ")";
        lk.unlock();
        Fatal(why, ErrorCode::kSchedulerLost);
        lk.lock();
      }
    }
  }
}

void Node::Impl::Finalize() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (finalized_) return;
    finalized_ = true;
  }
  // The last counters go ahead of the final barrier on the same path, so the scheduler holds
  // every node's final metrics once the barrier is released.
  SendMetrics(/*force=*/true);
  Barrier(kAllGroups, /*final=*/true);
  if (cfg.role == Role::kScheduler && cfg.metrics_port > 0) {
    std::lock_guard<std::mutex> lk(mu_);
    LOG(INFO) << "job metrics: " << metrics_table_.Json(JobMetrics(), NowMs());
  }
  Stop();
  if (filters->enabled()) {
    uint64_t raw = 0, wire = 0;
    for (const auto& t : filters->sent_by_codec()) {
      raw += t.second.raw;
      wire += t.second.wire;
    }
    LOG(INFO) << "filters (PS_COMPRESS=" << cfg.compress << ", PS_QUANTIZE=" << cfg.quantize_bits
              << "): data frames sent " << raw << " bytes before, " << wire << " after ("
              << (wire ? static_cast<double>(raw) / static_cast<double>(wire) : 0.0) << "x); "
              << filters->StatsJson();
  }
}

}  // namespace ps
