#include "control/task_pool.h"

namespace ps {

int TaskPool::Add(int n) {
  const int first = next_;
  for (int i = 0; i < n; ++i) pending_.push_back(next_++);
  return first;
}

TaskPool::Answer TaskPool::Take(int worker, int64_t now_ms, int* task) {
  if (!pending_.empty()) {
    *task = pending_.front();
    pending_.pop_front();
    out_[*task] = Out{worker, now_ms};
    handouts_[*task]++;
    return Answer::kTask;
  }
  return out_.empty() ? Answer::kNone : Answer::kWait;
}

bool TaskPool::Done(int worker, int task) {
  auto it = out_.find(task);
  if (it == out_.end() || it->second.worker != worker) return false;
  out_.erase(it);
  done_.insert(task);
  return true;
}

std::vector<int> TaskPool::WorkerDead(int worker) {
  std::vector<int> back;
  for (auto it = out_.begin(); it != out_.end();) {
    if (it->second.worker == worker) {
      back.push_back(it->first);
      it = out_.erase(it);
    } else {
      ++it;
    }
  }
  // Redo them first: they are the oldest work.
  for (auto r = back.rbegin(); r != back.rend(); ++r) pending_.push_front(*r);
  return back;
}

std::vector<int> TaskPool::Expire(int64_t now_ms, int64_t timeout_ms) {
  std::vector<int> back;
  if (timeout_ms <= 0) return back;
  for (auto it = out_.begin(); it != out_.end();) {
    if (now_ms - it->second.since_ms > timeout_ms) {
      back.push_back(it->first);
      it = out_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto r = back.rbegin(); r != back.rend(); ++r) pending_.push_front(*r);
  return back;
}

}  // namespace ps
