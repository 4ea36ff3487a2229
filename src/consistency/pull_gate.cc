#include "consistency/pull_gate.h"

#include <algorithm>

namespace ps {

PullGate::PullGate(std::shared_ptr<const BarrierPolicy> policy, uint64_t seed)
    : policy_(std::move(policy)), rng_(seed) {}

int PullGate::GroupOf(int worker) const {
  auto it = group_of_.find(worker);
  return it == group_of_.end() ? 0 : it->second;
}

PullGate::Group& PullGate::GroupState(int group) { return groups_[group]; }

const BarrierPolicy& PullGate::policy(int group) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? *policy_ : PolicyOf(it->second);
}

void PullGate::SetWorkers(const std::vector<int>& workers) {
  for (int w : workers) {
    table_.AddAt(w, 0);
    GroupState(GroupOf(w)).table.AddAt(w, 0);
  }
}

void PullGate::SetGroup(int worker, int group) {
  const int was = GroupOf(worker);
  if (was == group) return;
  group_of_[worker] = group;
  Group& from = GroupState(was);
  if (!from.table.Has(worker)) return;
  const int64_t step = from.table.Step(worker);
  from.table.Remove(worker);
  GroupState(group).table.AddAt(worker, step);
}

void PullGate::AddWorker(int worker) {
  if (table_.Has(worker)) return;
  const int64_t at = GroupState(GroupOf(worker)).table.Add(worker);
  table_.AddAt(worker, at);
}

void PullGate::RemoveWorker(int worker, std::vector<uint64_t>* released) {
  table_.Remove(worker);
  const int g = GroupOf(worker);
  GroupState(g).table.Remove(worker);
  held_.erase(std::remove_if(held_.begin(), held_.end(),
                             [worker](const Held& h) { return h.worker == worker; }),
              held_.end());
  Recheck(released, g);
}

void PullGate::Report(int worker, int64_t step, std::vector<uint64_t>* released) {
  const int g = GroupOf(worker);
  StepTable& t = GroupState(g).table;
  const int64_t before = t.Step(worker);
  if (!t.Advance(worker, step) || t.Step(worker) == before) return;
  table_.Advance(worker, step);
  Recheck(released, g);
}

bool PullGate::Read(int worker, int64_t step, int64_t done, uint64_t handle,
                    std::vector<uint64_t>* released) {
  reads_++;
  Report(worker, done, released);
  // A worker outside the table (declared dead, or never known) is not held: nothing would
  // ever release it.
  if (!table_.Has(worker)) return true;
  checks_++;
  const Group& g = GroupState(GroupOf(worker));
  if (PolicyOf(g).Pass(g.table, worker, step, &rng_)) return true;
  deferred_++;
  held_.push_back({handle, worker, step});
  return false;
}

void PullGate::SetPolicy(std::shared_ptr<const BarrierPolicy> policy,
                         std::vector<uint64_t>* released, int group) {
  if (group < 0) {
    policy_ = std::move(policy);
    for (auto& g : groups_) g.second.policy = nullptr;
  } else {
    GroupState(group).policy = std::move(policy);
  }
  Recheck(released, group);
}

int64_t PullGate::Clock() const { return table_.size() ? table_.Min() : 0; }

int64_t PullGate::Clock(int worker) const {
  auto it = groups_.find(GroupOf(worker));
  if (it == groups_.end() || it->second.table.size() == 0) return 0;
  return it->second.table.Min();
}

void PullGate::Recheck(std::vector<uint64_t>* released, int group) {
  size_t kept = 0;
  for (size_t i = 0; i < held_.size(); ++i) {
    const Held& h = held_[i];
    const int hg = GroupOf(h.worker);
    if (group >= 0 && hg != group) {
      held_[kept++] = h;
      continue;
    }
    checks_++;
    const Group& g = GroupState(hg);
    if (PolicyOf(g).Pass(g.table, h.worker, h.step, &rng_)) {
      released->push_back(h.handle);
    } else {
      held_[kept++] = h;
    }
  }
  held_.resize(kept);
}

void BoundedDelay::Issued(int64_t ts, int64_t step) {
  if (open_.emplace(ts, step).second) per_step_[step]++;
}

void BoundedDelay::Completed(int64_t ts) {
  auto it = open_.find(ts);
  if (it == open_.end()) return;
  auto s = per_step_.find(it->second);
  if (--s->second == 0) per_step_.erase(s);
  open_.erase(it);
}

bool BoundedDelay::MayStart(int64_t t, int tau) const {
  return tau < 0 || per_step_.empty() || per_step_.begin()->first >= t - tau;
}

}  // namespace ps
