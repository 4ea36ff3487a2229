#include "control/task_pool.h"

#include <algorithm>

namespace ps {

int TaskPool::AddData(std::string data, int group) {
  const int task = Add(1, group);
  if (!data.empty()) data_[task] = std::move(data);
  return task;
}

const std::string* TaskPool::Data(int task) const {
  auto it = data_.find(task);
  return it == data_.end() ? nullptr : &it->second;
}

void TaskPool::Open(int group) { pools_[group].open = true; }

void TaskPool::Close(int group) { pools_[group].open = false; }

int TaskPool::AddOnce(int n, int group) {
  auto it = pools_.find(group);
  return it != pools_.end() ? it->second.first : Add(n, group);
}

int TaskPool::Add(int n, int group) {
  const int first = next_;
  Pool& p = pools_[group];
  if (p.first < 0) p.first = first;
  for (int i = 0; i < n; ++i) {
    group_of_[next_] = group;
    p.pending.push_back(next_++);
  }
  return first;
}

size_t TaskPool::pending() const {
  size_t n = 0;
  for (const auto& p : pools_) n += p.second.pending.size();
  return n;
}

TaskPool::Answer TaskPool::Take(int worker, int group, int64_t now_ms, int* task) {
  auto it = pools_.find(group);
  if (it == pools_.end()) return Answer::kWait;  // nothing added for this group yet
  Pool& p = it->second;
  if (!p.pending.empty()) {
    *task = p.pending.front();
    p.pending.pop_front();
    out_[*task] = Out{worker, now_ms};
    p.out++;
    handouts_[*task]++;
    return Answer::kTask;
  }
  return p.out == 0 && !p.open ? Answer::kNone : Answer::kWait;
}

bool TaskPool::Request(int worker, int group, bool wait, int64_t now_ms, Reply* reply) {
  int task = -1;
  const Answer a = Take(worker, group, now_ms, &task);
  if (a != Answer::kWait || !wait) {
    *reply = Reply{worker, a == Answer::kTask ? task : -1};
    return true;
  }
  for (const Held& h : held_) {
    if (h.worker == worker) return false;  // already held: one answer will come
  }
  held_.push_back(Held{worker, group, now_ms});
  return false;
}

std::vector<TaskPool::Reply> TaskPool::Serve(int64_t now_ms) {
  std::vector<Reply> out;
  // In the order they asked; a worker whose group has nothing for it yet keeps waiting
  // without holding up the others.
  for (auto it = held_.begin(); it != held_.end();) {
    int task = -1;
    const Answer a = Take(it->worker, it->group, now_ms, &task);
    if (a == Answer::kWait) {
      ++it;
      continue;
    }
    out.push_back(Reply{it->worker, a == Answer::kTask ? task : -1});
    it = held_.erase(it);
  }
  return out;
}

std::vector<TaskPool::Reply> TaskPool::AskAgain(int64_t now_ms, int64_t keep_ms) {
  std::vector<Reply> out;
  for (auto it = held_.begin(); it != held_.end();) {
    if (now_ms - it->since_ms < keep_ms) {
      ++it;
      continue;
    }
    out.push_back(Reply{it->worker, kAskAgain});
    it = held_.erase(it);
  }
  return out;
}

bool TaskPool::Done(int worker, int task) {
  auto it = out_.find(task);
  if (it == out_.end() || it->second.worker != worker) return false;
  out_.erase(it);
  pools_[group_of_[task]].out--;
  done_.insert(task);
  data_.erase(task);
  return true;
}

void TaskPool::Return(const std::vector<int>& back) {
  // Redo them first: they are the oldest work.
  for (auto r = back.rbegin(); r != back.rend(); ++r) {
    Pool& p = pools_[group_of_[*r]];
    p.out--;
    p.pending.push_front(*r);
  }
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
  Return(back);
  held_.erase(std::remove_if(held_.begin(), held_.end(),
                             [worker](const Held& h) { return h.worker == worker; }),
              held_.end());
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
  Return(back);
  return back;
}

}  // namespace ps
