// Node::Impl, second half: what the scheduler decides about the job's membership and what
// every node does with it — the node table, joins, dead nodes and rings, the task pool, the
// consistency relay, and giving up (Fatal). The runtime half is node.cc.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "consistency/barrier_policy.h"
#include "control/node_impl.h"

namespace ps {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

pb::Control Node::Impl::TableMessage() const {
  pb::Control c;
  c.set_cmd(pb::Control::NODE_TABLE);
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& n : nodes_) {
    auto* e = c.add_nodes();
    e->set_id(n.id);
    e->set_role(static_cast<int>(n.role));
    e->set_rank(n.rank);
    e->set_host(n.host);
    e->set_port(n.port);
  }
  auto* r = c.mutable_ring();
  r->set_epoch(ring_->epoch());
  r->set_vnodes(ring_->vnodes());
  r->set_replicas(ring_->replicas());
  for (int s : ring_->servers()) r->add_servers(s);
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
  LOG(INFO) << "worker " << n.rank << " (node " << n.id << ", " << n.host << ":" << n.port
            << ") joined the running job";
  pb::Control t = TableMessage();
  t.set_your_id(n.id);
  SendControl(n.id, t);
  pb::Control j;
  j.set_cmd(pb::Control::NODE_JOINED);
  auto* e = j.add_nodes();
  e->set_id(n.id);
  e->set_role(static_cast<int>(n.role));
  e->set_rank(n.rank);
  e->set_host(n.host);
  e->set_port(n.port);
  std::vector<int> tell;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& m : nodes_) {
      if (m.id != 0 && m.id != n.id && !membership_->IsDead(m.id)) tell.push_back(m.id);
    }
  }
  for (int to : tell) SendControl(to, j);
  NotifyJoined(n);
}

void Node::Impl::NotifyJoined(const NodeInfo& n) {
  std::lock_guard<std::mutex> lk(cust_mu_);
  for (auto& c : customers_) c.second->OnNodeJoined(n);
}

void Node::Impl::DeclareDead(const std::vector<int>& ids, const std::string& how) {
  for (int id : ids) {
    std::vector<std::pair<int, int>> task_answers;
    std::vector<Membership::Release> releases;
    std::vector<int> tell;
    std::shared_ptr<const Ring> fresh;
    std::string abort;
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
      task_waiters_.erase(std::remove(task_waiters_.begin(), task_waiters_.end(), id),
                          task_waiters_.end());
      ServeTaskWaiters(&task_answers);
      dead_.push_back(id);
      for (const auto& n : nodes_) {
        if (n.id != 0 && !membership_->IsDead(n.id)) tell.push_back(n.id);
      }
      const auto& servers = ring_->servers();
      if (std::find(servers.begin(), servers.end(), id) != servers.end()) {
        // A server left: its segments go to the first replica of each chain, which holds
        // every acknowledged update of them. Without refill, more than k losses in all may
        // have taken every copy of some range: stop rather than serve zeros.
        dead_servers_++;
        std::vector<int> left;
        for (int s : servers) {
          if (s != id) left.push_back(s);
        }
        if (left.empty() || dead_servers_ > ring_->replicas()) {
          abort = "server node " + std::to_string(id) + " died and " +
                  std::to_string(dead_servers_) + " of " + std::to_string(cfg.num_servers) +
                  " servers are lost, more than the " + std::to_string(ring_->replicas()) +
                  " replicas per range (PS_REPLICAS) can cover: some key ranges have no copy "
                  "left";
        } else {
          SetRing(
              std::make_shared<Ring>(left, ring_->vnodes(), ring_->replicas(), ring_->epoch() + 1));
          fresh = ring_;
        }
      }
    }
    LOG(WARNING) << "node " << id << " declared dead: " << how;
    if (!abort.empty()) {
      LOG(ERROR) << abort;
      pb::Control a;
      a.set_cmd(pb::Control::ABORT);
      a.set_error(abort);
      for (int to : tell) SendControl(to, a, true);
      Fatal(abort);
      return;
    }
    pb::Control c;
    c.set_cmd(pb::Control::NODE_DEAD);
    c.set_dead_id(id);
    if (fresh) {
      LOG(WARNING) << "ring epoch " << fresh->epoch() << ": " << fresh->servers().size()
                   << " servers";
      auto* r = c.mutable_ring();
      r->set_epoch(fresh->epoch());
      r->set_vnodes(fresh->vnodes());
      r->set_replicas(fresh->replicas());
      for (int s : fresh->servers()) r->add_servers(s);
    }
    for (int to : tell) SendControl(to, c, true);
    NotifyDead(id);
    if (fresh) NotifyRing(fresh);
    SendTaskAnswers(task_answers);
    for (const auto& r : releases) ReleaseBarrier(r.ids, r.groups, r.seq);
  }
}

void Node::Impl::ServeTaskWaiters(std::vector<std::pair<int, int>>* answers) {
  while (!task_waiters_.empty() && tasks_added_) {
    int task = -1;
    auto a = tasks_.Take(task_waiters_.front(), NowMs(), &task);
    if (a == TaskPool::Answer::kWait) break;
    answers->emplace_back(task_waiters_.front(), a == TaskPool::Answer::kTask ? task : -1);
    task_waiters_.erase(task_waiters_.begin());
  }
}

void Node::Impl::SendTaskAnswers(const std::vector<std::pair<int, int>>& answers) {
  for (const auto& a : answers) {
    pb::Control c;
    c.set_cmd(pb::Control::TASK_GIVE);
    c.set_task(a.second);
    SendControl(a.first, c);
  }
}

int Node::Impl::AddTasks(int n) {
  if (cfg.role != Role::kScheduler) throw Error("AddTasks: only the scheduler keeps the pool");
  if (n < 0) throw Error("AddTasks: n must be >= 0");
  std::vector<std::pair<int, int>> answers;
  int first;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!ready_) throw Error("AddTasks called before Start");
    first = tasks_.Add(n);
    tasks_added_ = true;
    ServeTaskWaiters(&answers);
  }
  SendTaskAnswers(answers);
  return first;
}

int Node::Impl::NextTask() {
  if (cfg.role != Role::kWorker) throw Error("NextTask: only workers take tasks");
  uint64_t seen;
  {
    std::lock_guard<std::mutex> lk(mu_);
    seen = task_answers_;
  }
  pb::Control c;
  c.set_cmd(pb::Control::TASK_TAKE);
  SendControl(0, c);
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_for(lk, std::chrono::milliseconds(cfg.barrier_timeout_ms),
                    [&] { return task_answers_ > seen || !fatal_.empty(); })) {
    throw Error("NextTask: no answer from the scheduler within " +
                std::to_string(cfg.barrier_timeout_ms) + " ms (PS_BARRIER_TIMEOUT_MS)");
  }
  if (!fatal_.empty()) throw Error("NextTask: " + fatal_);
  return task_answer_;
}

void Node::Impl::TaskDone(int task) {
  if (cfg.role != Role::kWorker) throw Error("TaskDone: only workers do tasks");
  pb::Control c;
  c.set_cmd(pb::Control::TASK_DONE);
  c.set_task(task);
  SendControl(0, c);
}

Node::TaskStats Node::Impl::GetTaskStats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Node::TaskStats t;
  t.done = static_cast<int>(tasks_.done());
  t.added = static_cast<int>(tasks_.done() + tasks_.outstanding() + tasks_.pending());
  for (const auto& h : tasks_.handouts()) t.redone += h.second > 1;
  return t;
}

void Node::Impl::NotifyRing(std::shared_ptr<const Ring> ring) {
  std::lock_guard<std::mutex> lk(cust_mu_);
  for (auto& c : customers_) c.second->OnRingChange(ring);
}

void Node::Impl::Fatal(const std::string& why) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!fatal_.empty()) return;
    // Past the last barrier the job is over: nothing can fail any more.
    if (finalized_ && barrier_done_[kAllGroups] >= barrier_sent_[kAllGroups]) return;
    fatal_ = why;
    has_fatal_.store(true, std::memory_order_release);
    cv_.notify_all();
  }
  LOG(ERROR) << why;
  if (cfg.exit_on_scheduler_loss && cfg.role != Role::kScheduler) {
    std::fprintf(stderr, "ps: %s; exiting\n", why.c_str());
    std::fflush(stderr);
    google::FlushLogFiles(google::GLOG_INFO);
    std::_Exit(1);
  }
  std::lock_guard<std::mutex> cl(cust_mu_);
  for (auto& cu : customers_) cu.second->OnFatal(why);
}

void Node::Impl::NotifyDead(int id) {
  std::lock_guard<std::mutex> lk(cust_mu_);
  for (auto& c : customers_) c.second->OnNodeDead(id);
}

void Node::Impl::SetConsistency(const std::string& policy, bool set_delay, int max_delay) {
  if (!policy.empty()) ParsePolicy(policy, "SetConsistency policy");  // throws when malformed
  if (set_delay && max_delay < -1) throw Error("SetConsistency: max_delay must be >= -1");
  pb::Control c;
  c.set_cmd(pb::Control::CONSISTENCY);
  c.set_policy(policy);
  c.set_set_delay(set_delay);
  c.set_max_delay(max_delay);
  if (cfg.role == Role::kScheduler) {
    ApplyConsistency(c);
  } else {
    SendControl(0, c);
  }
}

void Node::Impl::ApplyConsistency(const pb::Control& c) {
  std::vector<int> tell;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!c.policy().empty()) policy_ = c.policy();
    if (c.set_delay()) max_delay_ = c.max_delay();
    if (cfg.role == Role::kScheduler) {
      for (const auto& n : nodes_) {
        if (n.id != 0 && !membership_->IsDead(n.id)) tell.push_back(n.id);
      }
    }
  }
  for (int to : tell) SendControl(to, c);
  std::lock_guard<std::mutex> lk(cust_mu_);
  for (auto& cu : customers_) cu.second->OnConsistency(c.policy(), c.set_delay(), c.max_delay());
}

std::string Node::Impl::policy() const {
  std::lock_guard<std::mutex> lk(mu_);
  return policy_;
}

int Node::Impl::max_delay() const {
  std::lock_guard<std::mutex> lk(mu_);
  return max_delay_;
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

}  // namespace ps
