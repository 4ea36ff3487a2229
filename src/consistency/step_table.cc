#include "consistency/step_table.h"

#include <algorithm>
#include <limits>

namespace ps {

size_t StepTable::Index(int worker) const {
  auto it = std::lower_bound(ids_.begin(), ids_.end(), worker);
  if (it == ids_.end() || *it != worker) return ids_.size();
  return it - ids_.begin();
}

void StepTable::Count(int64_t step, int delta) {
  int& c = hist_[step];
  c += delta;
  if (c == 0) hist_.erase(step);
}

int64_t StepTable::Add(int worker) {
  size_t i = Index(worker);
  if (i < ids_.size()) return steps_[i];
  const int64_t at = ids_.empty() ? 0 : Min();
  AddAt(worker, at);
  return at;
}

void StepTable::AddAt(int worker, int64_t step) {
  if (Index(worker) < ids_.size()) return;
  auto it = std::lower_bound(ids_.begin(), ids_.end(), worker);
  size_t i = it - ids_.begin();
  ids_.insert(it, worker);
  steps_.insert(steps_.begin() + i, step);
  Count(step, 1);
}

void StepTable::Remove(int worker) {
  size_t i = Index(worker);
  if (i == ids_.size()) return;
  Count(steps_[i], -1);
  ids_.erase(ids_.begin() + i);
  steps_.erase(steps_.begin() + i);
}

bool StepTable::Has(int worker) const { return Index(worker) < ids_.size(); }

bool StepTable::Advance(int worker, int64_t step) {
  size_t i = Index(worker);
  if (i == ids_.size()) return false;
  if (step > steps_[i]) {
    Count(steps_[i], -1);
    steps_[i] = step;
    Count(step, 1);
  }
  return true;
}

int64_t StepTable::Step(int worker) const {
  size_t i = Index(worker);
  return i == ids_.size() ? -1 : steps_[i];
}

int64_t StepTable::Min() const {
  return hist_.empty() ? std::numeric_limits<int64_t>::max() : hist_.begin()->first;
}

int64_t StepTable::Max() const { return hist_.empty() ? -1 : hist_.rbegin()->first; }

size_t StepTable::CountBelow(int64_t step) const {
  size_t n = 0;
  for (auto it = hist_.begin(); it != hist_.end() && it->first < step; ++it) n += it->second;
  return n;
}

}  // namespace ps
