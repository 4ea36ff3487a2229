// Node::Impl, barriers and consistency settings: a node's Barrier (and Finalize's), the
// scheduler's release of one, and its reports of barriers held for long (who they wait for);
// the barrier policy and bounded delay of the job and of each worker group. node_control.cc
// holds the rest of the scheduler's decisions.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "consistency/barrier_policy.h"
#include "control/node_impl.h"

namespace ps {

int64_t Node::Impl::BarrierReportMs() const {
  return std::clamp<int64_t>(cfg.barrier_timeout_ms / 4, 100, 5000);
}

void Node::Impl::Barrier(int groups, bool final) {
  if (!InGroups(cfg.role, groups)) {
    throw Error("Barrier: this node's role is not in the barrier groups");
  }
  if (BarrierWorkerGroup(groups) >= 0 && BarrierWorkerGroup(groups) != WorkerGroupOf(my_id_)) {
    throw Error("Barrier: this worker is not in group " +
                Membership::GroupNames(groups, cfg.worker_groups));
  }
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!ready_) throw Error(ErrorCode::kShutDown, "Barrier called before Start");
    seq = ++barrier_sent_[groups];
  }
  if (cfg.role == Role::kScheduler) {
    std::unique_lock<std::mutex> lk(mu_);
    Apply(sched_->EnterBarrier(0, groups, seq), &lk);
  } else {
    pb::Control c;
    c.set_cmd(pb::Control::BARRIER);
    c.set_barrier_groups(groups);
    c.set_barrier_seq(seq);
    SendControl(0, c);
  }
  std::unique_lock<std::mutex> lk(mu_);
  const auto limit = std::chrono::milliseconds(cfg.barrier_timeout_ms);
  auto done = [&] { return barrier_done_[groups] >= seq || !fatal_.empty(); };
  bool released = cv_.wait_for(lk, limit, done);
  // The end of the job waits for the slowest worker, however long it trains: no time limit
  // there. It cannot hang on a dead job: the scheduler declares silent nodes dead (which
  // releases the barrier or aborts the job), and a node that loses the scheduler stops (fatal).
  for (int64_t waited = cfg.barrier_timeout_ms; final && !released;
       waited += cfg.barrier_timeout_ms) {
    std::string who = "the other nodes to finish";
    auto said = barrier_wait_.find(groups);
    if (said != barrier_wait_.end() && said->second.first == seq) who = said->second.second;
    if (cfg.role == Role::kScheduler) {
      who.clear();
      for (int id : sched_->membership().Awaited(groups, seq)) {
        for (const auto& n : nodes_) {
          if (n.id != id) continue;
          who += std::string(who.empty() ? "" : ", ") + RoleName(n.role) + " " +
                 std::to_string(n.rank) + " (node " + std::to_string(id) + ")";
        }
      }
    }
    LOG(INFO) << "Finalize: waiting for " << who << " (" << waited / 1000 << " s so far)";
    released = cv_.wait_for(lk, limit, done);
  }
  if (!fatal_.empty()) throw Error(fatal_code_, "barrier " + std::to_string(seq) + ": " + fatal_);
  if (!released) {
    // Who it waits for: the scheduler knows; the others have its last report, if any came.
    std::string who;
    if (cfg.role == Role::kScheduler) {
      for (int id : sched_->membership().Awaited(groups, seq)) {
        who += (who.empty() ? "" : ", ") + sched_->membership().Describe(id);
      }
      if (!who.empty()) who = "; waiting for " + who;
    } else {
      auto said = barrier_wait_.find(groups);
      if (said != barrier_wait_.end() && said->second.first == seq) {
        who = "; the scheduler said: " + said->second.second;
      }
    }
    throw Error(ErrorCode::kTimeout,
                "barrier " + std::to_string(seq) + " of " +
                    Membership::GroupNames(groups, cfg.worker_groups) + " not released within " +
                    std::to_string(cfg.barrier_timeout_ms) + " ms (PS_BARRIER_TIMEOUT_MS)" + who);
  }
}

void Node::Impl::ReleaseBarrier(const std::vector<int>& ids, int groups, uint64_t seq) {
  if (groups == kAllGroups && !ids.empty()) {
    std::lock_guard<std::mutex> lk(mu_);
    // The scheduler inside Finalize: this is the last barrier, and everyone leaves after it.
    if (finalized_ && sched_) sched_->Finished();
  }
  for (int id : ids) {
    if (id == 0) {
      std::lock_guard<std::mutex> lk(mu_);
      uint64_t& done = barrier_done_[groups];
      done = std::max(done, seq);
      cv_.notify_all();
      continue;
    }
    pb::Control c;
    c.set_cmd(pb::Control::BARRIER_DONE);
    c.set_barrier_groups(groups);
    c.set_barrier_seq(seq);
    SendControl(id, c);
  }
}

int Node::Impl::GroupIndexOf(const std::string& group, const char* call) const {
  if (group.empty()) return -1;
  std::unique_lock<std::mutex> lk(mu_);  // a worker joining with a new group adds one
  const int g = cfg.GroupIndex(group);
  lk.unlock();
  if (g < 0) {
    std::string names;
    for (const auto& w : cfg.worker_groups) names += (names.empty() ? "" : ", ") + w.first;
    throw Error(std::string(call) + ": '" + group + "' is not a worker group of this job (" +
                (names.empty() ? std::string("it has none") : "PS_WORKER_GROUPS: " + names) + ")");
  }
  return g;
}

void Node::Impl::SetConsistency(const std::string& policy, bool set_delay, int max_delay,
                                int group) {
  if (!policy.empty()) ParsePolicy(policy, "SetConsistency policy");  // throws when malformed
  if (set_delay && max_delay < -1) throw Error("SetConsistency: max_delay must be >= -1");
  pb::Control c;
  c.set_cmd(pb::Control::CONSISTENCY);
  c.set_policy(policy);
  c.set_set_delay(set_delay);
  c.set_max_delay(max_delay);
  c.set_group(group + 1);
  if (cfg.role == Role::kScheduler) {
    ApplyConsistency(c);
  } else {
    SendControl(0, c);
  }
}

void Node::Impl::ApplyConsistency(const pb::Control& c) {
  const int group = c.group() - 1;
  std::vector<int> tell;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (group < 0) {
      // The job's setting: every group follows it, also those that had one of their own.
      if (!c.policy().empty()) {
        policy_ = c.policy();
        group_policy_.clear();
      }
      if (c.set_delay()) {
        max_delay_ = c.max_delay();
        group_delay_.clear();
      }
    } else {
      if (!c.policy().empty()) group_policy_[group] = c.policy();
      if (c.set_delay()) group_delay_[group] = c.max_delay();
    }
    if (cfg.role == Role::kScheduler) {
      for (const auto& n : nodes_) {
        if (n.id != 0 && !sched_->membership().IsDead(n.id)) tell.push_back(n.id);
      }
    }
  }
  for (int to : tell) SendControl(to, c);
  std::lock_guard<std::mutex> lk(cust_mu_);
  for (auto& cu : customers_) {
    cu.second->OnConsistency(group, c.policy(), c.set_delay(), c.max_delay());
  }
}

std::string Node::Impl::policy(int group) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = group_policy_.find(group);
  return it == group_policy_.end() ? policy_ : it->second;
}

int Node::Impl::max_delay(int group) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = group_delay_.find(group);
  return it == group_delay_.end() ? max_delay_ : it->second;
}

}  // namespace ps
