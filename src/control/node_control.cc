// Node::Impl, second half: what the scheduler decides about the job's membership and what
// every node does with it — the node table, joins, dead nodes and rings, the task pool, the
// consistency relay, Finalize, and giving up (Fatal). The runtime half is node.cc, the entry
// into the job node_start.cc, barriers node_barrier.cc.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "control/node_impl.h"

namespace ps {

void Node::Impl::FillEntry(const NodeInfo& n, pb::NodeEntry* e) {
  e->set_id(n.id);
  e->set_role(static_cast<int>(n.role));
  e->set_rank(n.rank);
  e->set_host(n.host);
  e->set_port(n.port);
  e->set_group(n.group);
  e->set_group_rank(n.group_rank);
}

NodeInfo Node::Impl::EntryInfo(const pb::NodeEntry& e) {
  NodeInfo n;
  n.id = e.id();
  n.role = static_cast<Role>(e.role());
  n.rank = e.rank();
  n.host = e.host();
  n.port = e.port();
  n.group = e.group();
  n.group_rank = e.group_rank();
  return n;
}

pb::Control Node::Impl::TableMessage() const {
  pb::Control c;
  c.set_cmd(pb::Control::NODE_TABLE);
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& n : nodes_) FillEntry(n, c.add_nodes());
  RingCore::FillRing(*ring_, c.mutable_ring());
  for (int id : membership_->dead()) c.add_dead(id);
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
  for (const auto& g : membership_->released()) {
    c.add_released_groups(g.first);
    c.add_released_seqs(g.second);
  }
  return c;
}

void Node::Impl::BroadcastTable() {
  pb::Control c = TableMessage();
  for (const auto& e : c.nodes()) {
    if (e.id() == 0) continue;
    c.set_your_id(e.id());
    SendControl(e.id(), c);
  }
}

void Node::Impl::Joined(const NodeInfo& n) {
  JobEvent(std::string(RoleName(n.role)) + " " + std::to_string(n.rank) + " (node " +
               std::to_string(n.id) + ", " + n.host + ":" + std::to_string(n.port) +
               ") joined the running job",
           /*warning=*/false);
  pb::Control t = TableMessage();
  t.set_your_id(n.id);
  SendControl(n.id, t);
  pb::Control j;
  j.set_cmd(pb::Control::NODE_JOINED);
  FillEntry(n, j.add_nodes());
  std::vector<int> tell;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& m : nodes_) {
      if (m.id != 0 && m.id != n.id && !membership_->IsDead(m.id)) tell.push_back(m.id);
    }
  }
  for (int to : tell) SendControl(to, j);
  NotifyJoined(n);
  if (n.role == Role::kServer) {
    RingMessages out;
    {
      std::lock_guard<std::mutex> lk(mu_);
      ActOnRing(ring_core_->ServerJoined(n.id, NowMs()), &out);
    }
    SendRingMessages(&out);
  }
}

void Node::Impl::ActOnRing(const RingCore::Decision& d, RingMessages* out, int dead) {
  std::vector<int> live, servers;
  for (const auto& n : nodes_) {
    if (n.id == 0 || membership_->IsDead(n.id)) continue;
    live.push_back(n.id);
    if (n.role == Role::kServer) servers.push_back(n.id);
  }
  for (const auto& e : d.events) out->events.push_back(e);
  if (!d.abort.empty()) {
    out->abort = d.abort;
    return;
  }
  if (d.failover) {
    SetRing(d.failover);
    out->fresh = ring_;
  }
  for (auto& f : RingCore::Messages(d, dead, live, servers)) {
    for (int to : f.to) out->sends.emplace_back(to, f.msg);
  }
  if (d.cut) {
    SetRing(d.cut);
    out->fresh = ring_;
    // The servers that left got the ring too (it tells them they are out); now they are
    // marked gone: barriers stop waiting for them.
    for (int s : d.left) {
      for (auto& r : membership_->MarkDead(s)) out->releases.push_back(r);
      dead_.push_back(s);
    }
  }
}

void Node::Impl::SendRingMessages(RingMessages* out) {
  for (const auto& e : out->events) JobEvent(e);
  if (!out->abort.empty()) {
    AbortJob(out->abort, ErrorCode::kDataLost);
    return;
  }
  for (auto& m : out->sends) SendControl(m.first, m.second, true);
  if (out->fresh) NotifyRing(out->fresh);
  for (const auto& r : out->releases) ReleaseBarrier(r.ids, r.groups, r.seq);
}

void Node::Impl::ReportRefill(int app, const RefillReport& r) {
  pb::Control c;
  c.set_cmd(pb::Control::REFILL);
  c.set_app(app);
  c.set_epoch(r.epoch);
  c.set_pending(r.pending);
  for (const Range& x : r.orphans) {
    c.add_orphans(x.begin);
    c.add_orphans(x.end);
  }
  SendControl(0, c);
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
    SetRing(next_ring_);
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

void Node::Impl::DeclareDead(const std::vector<int>& ids, const std::string& how) {
  for (int id : ids) {
    TaskAnswers task_answers;
    std::vector<Membership::Release> releases;
    RingMessages ring;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (final_released_) return;  // the job is over: everyone is leaving
      releases = membership_->MarkDead(id);
      if (std::find(dead_.begin(), dead_.end(), id) != dead_.end()) continue;
      auto back = tasks_.WorkerDead(id);
      if (!back.empty()) {
        LOG(WARNING) << back.size() << " unfinished task(s) of node " << id
                     << " go back to the pool";
      }
      ServeTaskWaiters(&task_answers);
      dead_.push_back(id);
      CountDeadWorkers();
      // NODE_DEAD (with a new ring) to every live node, then the ring's other messages.
      ActOnRing(ring_core_->NodeDead(id, NowMs()), &ring, id);
    }
    JobEvent("node " + std::to_string(id) + " declared dead: " + how);
    // On the host's steady clock, which every process of a host shares: a test compares it
    // with the last request the node served (Fatal).
    LOG(INFO) << "node " << id << " declared dead at steady clock " << SteadyUs() << " us";
    if (!ring.abort.empty()) {
      SendRingMessages(&ring);  // the events, then the abort
      return;
    }
    NotifyDead(id);
    SendRingMessages(&ring);
    SendTaskAnswers(&task_answers);
    for (const auto& r : releases) ReleaseBarrier(r.ids, r.groups, r.seq);
  }
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
    for (const auto& n : nodes_) {
      if (n.id != 0 && !membership_->IsDead(n.id)) tell.push_back(n.id);
    }
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
      // A scheduler that did not run for longer than a beat interval (stopped, swapped out,
      // starved of CPU) did not read the beats meanwhile either: that time is nobody's
      // silence. Without this, the first look after a pause declares every node dead.
      const int64_t gap = now - last_look;
      last_look = now;
      if (gap > cfg.heartbeat_interval_ms) {
        membership_->Paused(now, gap - tick);
        LOG(WARNING) << "the scheduler did not run for " << gap - tick
                     << " ms (stopped or starved of CPU): that time does not count as any "
                        "node's silence";
      }
      auto silent = membership_->Silent(now, cfg.heartbeat_timeout_ms);
      const std::string slow = ring_core_ ? ring_core_->SlowPreparation(now) : "";
      if (!slow.empty()) LOG(WARNING) << slow;
      std::vector<std::pair<int, pb::Control>> barrier_reports = ReportOpenBarriers(now);
      TaskAnswers task_answers;
      if (!tasks_.Expire(now, cfg.task_timeout_ms).empty()) ServeTaskWaiters(&task_answers);
      AnswerTasks(tasks_.AskAgain(now, TaskKeepMs()), &task_answers);
      std::vector<int> live;
      if (now >= next_beat) {
        next_beat = now + cfg.heartbeat_interval_ms;
        for (const auto& n : nodes_) {
          if (n.id != 0 && !membership_->IsDead(n.id)) live.push_back(n.id);
        }
      }
      lk.unlock();
      if (!silent.empty()) {
        DeclareDead(silent, "silent for more than " + std::to_string(cfg.heartbeat_timeout_ms) +
                                " ms (PS_HEARTBEAT_TIMEOUT_MS)");
      }
      // The scheduler beats too, so that every node can tell when it is gone.
      pb::Control c;
      c.set_cmd(pb::Control::HEARTBEAT);
      c.set_want_metrics(cfg.metrics_port > 0);
      for (int id : live) SendControl(id, c, true);
      for (auto& r : barrier_reports) SendControl(r.first, r.second, true);
      SendTaskAnswers(&task_answers);
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
