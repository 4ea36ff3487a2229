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
#include <string>
#include <vector>

namespace ps {

class TaskPool {
 public:
  /// Adds tasks first .. first + n - 1 to the pool of worker group `group` (each group has a
  /// pool of its own; 0 without groups); returns first. Ids are never reused, across groups.
  int Add(int n, int group = 0);
  /// Adds n tasks for `group` unless it ever had some or its pool was opened; returns the first
  /// id of its first ones (-1 while an open pool has none yet). The workers of a group may
  /// each call it with the same n: the first call adds.
  int AddOnce(int n, int group = 0);
  /// Adds one task for `group` that carries data (its worker gets them with it, so a task can
  /// hold its own input: a part of a stream that has no file); returns its id. The data are
  /// kept until the task is done.
  int AddData(std::string data, int group = 0);
  /// The data of a task, or null for a task without.
  const std::string* Data(int task) const;
  /// While a group's pool is open its workers asking for a task wait even when none is
  /// pending or out (more will be added: a stream); Close ends that. Open counts as an add.
  void Open(int group);
  void Close(int group);
  /// Whether tasks were ever added for `group` (until then its workers wait).
  bool Added(int group) const { return pools_.count(group) > 0; }

  /// What a worker asking for work gets.
  enum class Answer { kTask, kWait, kNone };
  /// Worker of `group` asks for a task at now_ms: kTask (and *task), kWait (its group's pool is
  /// empty but tasks of the group are out with other workers and may come back), or kNone
  /// (every task of the group is done).
  Answer Take(int worker, int group, int64_t now_ms, int* task);
  /// A worker's request for a task, answered now or held: what is sent back, task being an id,
  /// -1 (every task of the group is done, or none waiting for a request that does not wait),
  /// or kAskAgain.
  struct Reply {
    int worker, task;
  };
  /// "None yet, ask again": the answer to a request held for keep_ms (AskAgain), so that a
  /// worker's wait for a task is a series of bounded waits while the scheduler answers.
  static constexpr int kAskAgain = -2;
  /// Worker of `group` asks at now_ms. Returns true with *reply when it is answered now (Take
  /// gave kTask or kNone, or kWait to a request that does not wait); false when the request
  /// is held until Serve or AskAgain answers it (one held request per worker).
  bool Request(int worker, int group, bool wait, int64_t now_ms, Reply* reply);
  /// Answers the held requests that can be answered now, in the order they came (after adds,
  /// a close, a death, an expiry); the others stay held.
  std::vector<Reply> Serve(int64_t now_ms);
  /// Answers kAskAgain to the requests held since before now_ms - keep_ms.
  std::vector<Reply> AskAgain(int64_t now_ms, int64_t keep_ms);
  size_t held() const { return held_.size(); }

  /// Worker finished task. Returns false if the task was not out with this worker (it timed
  /// out and went to someone else, or was never handed out): the report is ignored.
  bool Done(int worker, int task);
  /// The worker died: its unfinished tasks go back to the front of their group's pool, and its
  /// held request is dropped. Returns the tasks.
  std::vector<int> WorkerDead(int worker);
  /// Tasks out for longer than timeout_ms at now_ms go back to the pool. Returns them.
  std::vector<int> Expire(int64_t now_ms, int64_t timeout_ms);

  size_t pending() const;
  size_t outstanding() const { return out_.size(); }
  size_t done() const { return done_.size(); }
  /// How many times each task was handed out (a redone task counts more than once).
  const std::map<int, int>& handouts() const { return handouts_; }

 private:
  struct Out {
    int worker;
    int64_t since_ms;
  };
  struct Pool {
    std::deque<int> pending;
    size_t out = 0;  // tasks of the group out with workers
    int first = -1;  // the group's first task
    bool open = false;
  };
  // Puts tasks back at the front of their pools, in order.
  void Return(const std::vector<int>& back);
  int next_ = 0;
  std::map<int, Pool> pools_;    // by group
  std::map<int, int> group_of_;  // task -> group
  std::map<int, Out> out_;
  std::set<int> done_;
  std::map<int, std::string> data_;  // tasks that carry data, until done
  struct Held {
    int worker, group;
    int64_t since_ms;
  };
  std::vector<Held> held_;  // requests not answered yet, in order
  std::map<int, int> handouts_;
};

}  // namespace ps

#endif  // PS_CONTROL_TASK_POOL_H_
