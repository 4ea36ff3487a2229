// A worker's steps and the clocks that end them (DESIGN §7), as a pure state machine: what a
// request reports as done, and when a clock may leave. KVWorker runs it under its lock; the
// cluster simulation (src/sim/) runs the same code for its workers.
#ifndef PS_KV_STEP_GATE_H_
#define PS_KV_STEP_GATE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <utility>
#include <vector>

namespace ps {

// The servers count a step as done when its clock arrives, so a clock that ends step s leaves
// only once no push of step s or before is open (every push of it is applied at every member
// of its chains), and clocks leave in the order they were issued. Every request carries the
// steps that are safe to count: those whose pushes are all acknowledged.
class StepGate {
 public:
  // Steps begun: Clock() ends one and the next begins.
  int64_t step() const { return step_; }
  void NextStep() { step_++; }
  // The step a report of progress ends (to servers that joined, which have seen none of this
  // worker's clocks): it is the last clock again. A clock of the step in progress would count
  // that step as done before its pushes were issued (ps_sim --cluster --policy bsp
  // --join-every-s 1, seed 61: a read at step 13 saw another worker's counter at 12).
  int64_t ReportStep() const { return step_ - 1; }
  // A worker that joined a running job continues from the servers' minimum step.
  void Adopt(int64_t s) { step_ = s > step_ ? s : step_; }

  // A push issued in step s is open until every part of it is acknowledged.
  void PushIssued(int64_t s) { open_pushes_[s]++; }
  void PushDone(int64_t s);
  // The oldest step with a push still open (INT64_MAX: none).
  int64_t OldestOpenPush();
  // Steps whose pushes are all acknowledged: what servers may count as done.
  int64_t SafeStep() { return std::min(step_, OldestOpenPush()); }
  // What a request issued in step s reports as done: a clock ending step s has done s + 1
  // steps once no push of s or before is open; any other request the safe steps.
  int64_t DoneStep(bool clock, int64_t s);

  // The clock of request ts, which ends step s, is issued: true when it must wait (behind a
  // push of its steps still open, or a clock before it); it is then held until ReleaseClocks
  // lets it go.
  bool HoldClock(int64_t ts, int64_t s);
  // The held clocks that may leave now, oldest first. gone(ts): its request ended otherwise
  // (failed); it is dropped.
  std::vector<int64_t> ReleaseClocks(const std::function<bool(int64_t)>& gone);
  bool has_held() const { return !held_.empty(); }

 private:
  int64_t step_ = 0;
  // Open pushes by the step they were issued in. Entries that drop to 0 stay until their step
  // is past: a push/wait loop in one step would otherwise allocate and free a node per request.
  std::map<int64_t, size_t> open_pushes_;
  std::deque<std::pair<int64_t, int64_t>> held_;  // (ts, step it ends), in order
};

}  // namespace ps

#endif  // PS_KV_STEP_GATE_H_
