#include "consistency/pull_gate.h"

#include <algorithm>

namespace ps {

PullGate::PullGate(std::shared_ptr<const BarrierPolicy> policy, uint64_t seed)
    : policy_(std::move(policy)), rng_(seed) {}

void PullGate::SetWorkers(const std::vector<int>& workers) {
  for (int w : workers) table_.AddAt(w, 0);
}

void PullGate::AddWorker(int worker) { table_.Add(worker); }

void PullGate::RemoveWorker(int worker, std::vector<uint64_t>* released) {
  table_.Remove(worker);
  held_.erase(std::remove_if(held_.begin(), held_.end(),
                             [worker](const Held& h) { return h.worker == worker; }),
              held_.end());
  Recheck(released);
}

void PullGate::Report(int worker, int64_t step, std::vector<uint64_t>* released) {
  const int64_t before = table_.Step(worker);
  if (!table_.Advance(worker, step) || table_.Step(worker) == before) return;
  Recheck(released);
}

bool PullGate::Read(int worker, int64_t step, int64_t done, uint64_t handle,
                    std::vector<uint64_t>* released) {
  reads_++;
  Report(worker, done, released);
  // A worker outside the table (declared dead, or never known) is not held: nothing would
  // ever release it.
  if (!table_.Has(worker)) return true;
  checks_++;
  if (policy_->Pass(table_, worker, step, &rng_)) return true;
  deferred_++;
  held_.push_back({handle, worker, step});
  return false;
}

void PullGate::SetPolicy(std::shared_ptr<const BarrierPolicy> policy,
                         std::vector<uint64_t>* released) {
  policy_ = std::move(policy);
  Recheck(released);
}

int64_t PullGate::Clock() const { return table_.size() ? table_.Min() : 0; }

void PullGate::Recheck(std::vector<uint64_t>* released) {
  size_t kept = 0;
  for (size_t i = 0; i < held_.size(); ++i) {
    const Held& h = held_[i];
    checks_++;
    if (policy_->Pass(table_, h.worker, h.step, &rng_)) {
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
