// Node::Impl, tasks: the scheduler's pools (src/control/task_pool.h, pure) and the requests of
// the workers that take from them; adds from any node (ADD_TASKS to the scheduler).
#include <glog/logging.h>

#include <algorithm>
#include <chrono>

#include "control/node_impl.h"

namespace ps {

int Node::AddTasks(int n) { return impl_->AddTasks(n, 0); }
int Node::AddTasks(int n, const std::string& group) {
  return impl_->AddTasks(n, std::max(0, impl_->GroupIndexOf(group, "AddTasks")));
}
int Node::AddTasksOnce(int n, const std::string& group) {
  return impl_->AddTasks(n, std::max(0, impl_->GroupIndexOf(group, "AddTasksOnce")), true);
}
int Node::NextTask() { return impl_->NextTask(); }
int Node::NextTask(std::string* data) { return impl_->NextTask(true, data); }
int Node::AddTask(const std::string& data, const std::string& group) {
  Impl::TaskAdd add;
  add.data = &data;
  return impl_->AddTasks(std::max(0, impl_->GroupIndexOf(group, "AddTask")), add);
}
void Node::OpenTasks(const std::string& group) {
  Impl::TaskAdd add;
  add.pool = 1;
  impl_->AddTasks(std::max(0, impl_->GroupIndexOf(group, "OpenTasks")), add);
}
void Node::CloseTasks(const std::string& group) {
  Impl::TaskAdd add;
  add.pool = 2;
  impl_->AddTasks(std::max(0, impl_->GroupIndexOf(group, "CloseTasks")), add);
}

int Node::Impl::AddTasks(int group, const TaskAdd& add) {
  if (add.n < 0) throw Error("AddTasks: n must be >= 0");
  if (add.data && add.data->size() > kMaxTaskData) {
    throw Error("AddTask: " + std::to_string(add.data->size()) + " bytes of data; at most " +
                std::to_string(kMaxTaskData) + " per task");
  }
  if (cfg.role == Role::kScheduler) {
    CheckStarted("AddTasks");
    return AddToPool(group, add);
  }
  // The scheduler keeps the pools: ask it (a group that joined a running job adds its own).
  pb::Control c;
  c.set_cmd(pb::Control::ADD_TASKS);
  c.set_task(add.n);
  c.set_task_once(add.once);
  if (add.data) c.set_task_data(*add.data);
  c.set_task_pool(add.pool);
  c.set_group(group + 1);
  const uint64_t request = NewRequest("AddTasks");
  c.set_request(request);
  SendControl(0, c);
  return AwaitAnswer(&tasks_added_, request, "AddTasks");
}

int Node::Impl::AddToPool(int group, const TaskAdd& add) {
  int first = -1;
  std::unique_lock<std::mutex> lk(mu_);
  Apply(sched_->AddTasks(group, add.n, add.once, add.data, add.pool, NowMs(), &first), &lk);
  return first;
}

int Node::Impl::NextTask(bool wait, std::string* data) {
  if (cfg.role != Role::kWorker) throw Error("NextTask: only workers take tasks");
  for (;;) {
    uint64_t seen;
    {
      std::lock_guard<std::mutex> lk(mu_);
      seen = task_answers_;
    }
    pb::Control c;
    c.set_cmd(pb::Control::TASK_TAKE);
    c.set_task_nowait(!wait);
    SendControl(0, c);
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, std::chrono::milliseconds(cfg.barrier_timeout_ms),
                      [&] { return task_answers_ > seen || !fatal_.empty(); })) {
      throw Error(ErrorCode::kTimeout, "NextTask: no answer from the scheduler within " +
                                           std::to_string(cfg.barrier_timeout_ms) +
                                           " ms (PS_BARRIER_TIMEOUT_MS)");
    }
    if (!fatal_.empty()) throw Error(fatal_code_, "NextTask: " + fatal_);
    // The scheduler held the request long and says to ask again: tasks are still out with
    // other workers, or the pool is open for more.
    if (task_answer_ == TaskPool::kAskAgain) continue;
    if (data) data->swap(task_data_);
    task_data_.clear();
    return task_answer_;
  }
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
  if (!sched_) return t;  // the pools are the scheduler's
  const TaskPool& p = sched_->tasks();
  t.done = static_cast<int>(p.done());
  t.added = static_cast<int>(p.done() + p.outstanding() + p.pending());
  for (const auto& h : p.handouts()) t.redone += h.second > 1;
  return t;
}

}  // namespace ps
