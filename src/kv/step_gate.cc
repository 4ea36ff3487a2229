#include "kv/step_gate.h"

#include <algorithm>
#include <climits>

namespace ps {

void StepGate::PushDone(int64_t s) {
  auto it = open_pushes_.find(s);
  if (it != open_pushes_.end() && it->second > 0) it->second--;
}

int64_t StepGate::OldestOpenPush() {
  for (auto it = open_pushes_.begin(); it != open_pushes_.end();) {
    if (it->second > 0) return it->first;
    it = it->first < step_ ? open_pushes_.erase(it) : std::next(it);
  }
  return INT64_MAX;
}

int64_t StepGate::DoneStep(bool clock, int64_t s) {
  return clock ? std::min(s + 1, OldestOpenPush()) : SafeStep();
}

bool StepGate::HoldClock(int64_t ts, int64_t s) {
  if (held_.empty() && OldestOpenPush() > s) return false;
  held_.emplace_back(ts, s);
  return true;
}

std::vector<int64_t> StepGate::ReleaseClocks(const std::function<bool(int64_t)>& gone) {
  std::vector<int64_t> out;
  while (!held_.empty()) {
    const auto c = held_.front();
    if (gone(c.first)) {
      held_.pop_front();
      continue;
    }
    if (OldestOpenPush() <= c.second) break;  // clocks leave in order
    held_.pop_front();
    out.push_back(c.first);
  }
  return out;
}

}  // namespace ps
