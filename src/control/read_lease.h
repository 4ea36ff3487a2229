// A server's read lease (DESIGN §8, invariant 2: a fenced node serves nothing). The scheduler
// declares a node dead when it heard nothing from it for the heartbeat timeout, counted from
// the last beat it got; by then others may have taken the node's ranges over, so the node must
// have stopped serving before, judged by its own clock alone. It may serve while both hold:
//  - no stall: its heartbeat thread ran within StallMs (half the timeout, at least two
//    intervals), or the scheduler has since echoed a beat sent after the stall (SIGSTOP, a
//    hang: the beats stopped, so the scheduler may have counted the timeout meanwhile);
//  - an echo is fresh: the scheduler echoed a beat sent within LeaseMs (the timeout less a
//    quarter interval). A server cut from the scheduler while its data links work (a stalled
//    control connection, a partition between it and the scheduler only) keeps running and
//    beating, but nothing comes back: the scheduler may declare it dead at the timeout after
//    its last beat that got through, so it stops a quarter interval before. A receive backlog
//    longer than that delays the echoes too and stops the server until it catches up; dropping
//    requests is cheaper than serving them, so such a backlog drains.
// Pure: times are inputs (microseconds of one steady clock); thread-safe, because the heartbeat
// thread starts stalls and the receive thread records echoes and asks.
#ifndef PS_CONTROL_READ_LEASE_H_
#define PS_CONTROL_READ_LEASE_H_

#include <atomic>
#include <cstdint>
#include <limits>

namespace ps {

class ReadLease {
 public:
  ReadLease(int64_t heartbeat_timeout_ms, int64_t heartbeat_interval_ms);

  /// The node table arrived at now_us: the scheduler counted this node in when it sent it.
  /// Before Start the lease makes no claim (Holds is true: nothing is served yet).
  void Start(int64_t now_us) { Confirmed(now_us); }
  /// The scheduler echoed a beat this node sent at beat_us. Returns true when that ends a
  /// stall's suspicion (the beat was sent after the stall began).
  bool Echoed(int64_t beat_us);
  /// The node stalled (found at now_us): it serves nothing until an echo of a later beat.
  /// Returns true when this begins the suspicion (false: already suspect).
  bool Stall(int64_t now_us);
  bool Suspect() const { return suspect_since_us_.load() != 0; }
  /// True when the last echo is of a beat sent within LeaseMs of now_us (or before Start).
  bool Fresh(int64_t now_us) const;
  /// Whether a request may be served at now_us: no stall suspected and the echo fresh.
  bool Holds(int64_t now_us) const { return !Suspect() && Fresh(now_us); }
  /// How old the last echoed beat is at now_us (ms; 0 before Start).
  int64_t EchoAgeMs(int64_t now_us) const;

  /// A gap in the heartbeat thread's runs long enough for the scheduler to have declared this
  /// node dead: the scheduler counts the timeout from the last beat it got, which may have
  /// left an interval before the gap began, so half the timeout (and at least two intervals).
  int64_t StallMs() const { return stall_ms_; }
  /// How long after a beat was sent its echo keeps the lease: the timeout less a quarter
  /// interval (the scheduler cannot have declared this node dead before the timeout after a
  /// beat it heard), and above an interval whenever the timeout is above 1.25 intervals.
  int64_t LeaseMs() const { return lease_ms_; }

 private:
  // The scheduler counted this node in at at_us (its clock): the lease runs from the latest.
  void Confirmed(int64_t at_us);

  static constexpr int64_t kNotStarted = std::numeric_limits<int64_t>::min();
  const int64_t stall_ms_, lease_ms_;
  std::atomic<int64_t> suspect_since_us_{0};  // 0: no stall suspected
  std::atomic<int64_t> echoed_us_{kNotStarted};
};

}  // namespace ps

#endif  // PS_CONTROL_READ_LEASE_H_
