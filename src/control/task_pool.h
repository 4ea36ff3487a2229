// The scheduler's pool of data shards (tasks): apps add them, workers take them one at a time
// and report them done; a dead or timed-out worker's unfinished tasks go back to the pool.
// Pure logic: time comes in as arguments.
#ifndef PS_CONTROL_TASK_POOL_H_
#define PS_CONTROL_TASK_POOL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <vector>

namespace ps {

class TaskPool {
 public:
  /// Adds tasks first .. first + n - 1 to the pool; returns first. Ids are never reused.
  int Add(int n);

  /// What a worker asking for work gets.
  enum class Answer { kTask, kWait, kNone };
  /// Worker asks for a task at now_ms: kTask (and *task), kWait (the pool is empty but tasks
  /// are out with other workers and may come back), or kNone (everything is done).
  Answer Take(int worker, int64_t now_ms, int* task);
  /// Worker finished task. Returns false if the task was not out with this worker (it timed
  /// out and went to someone else, or was never handed out): the report is ignored.
  bool Done(int worker, int task);
  /// The worker died: its unfinished tasks go back to the front of the pool. Returns them.
  std::vector<int> WorkerDead(int worker);
  /// Tasks out for longer than timeout_ms at now_ms go back to the pool. Returns them.
  std::vector<int> Expire(int64_t now_ms, int64_t timeout_ms);

  size_t pending() const { return pending_.size(); }
  size_t outstanding() const { return out_.size(); }
  size_t done() const { return done_.size(); }
  /// How many times each task was handed out (a redone task counts more than once).
  const std::map<int, int>& handouts() const { return handouts_; }

 private:
  struct Out {
    int worker;
    int64_t since_ms;
  };
  int next_ = 0;
  std::deque<int> pending_;
  std::map<int, Out> out_;
  std::set<int> done_;
  std::map<int, int> handouts_;
};

}  // namespace ps

#endif  // PS_CONTROL_TASK_POOL_H_
