// When a worker sends a request part again: the decision of KVWorker's resend timer, pure (time
// comes in as microseconds waited; nothing is sent here), so that the node runtime and the
// whole-cluster simulator can drive the same code, one on the steady clock and the other on
// virtual time.
#ifndef PS_KV_RESEND_TIMER_H_
#define PS_KV_RESEND_TIMER_H_

#include <cstdint>
#include <unordered_map>

#include "util/rtt_estimate.h"

namespace ps {

class ResendTimer {
 public:
  /// A resend of a part waits its server's round-trip timeout (at least base_us) times
  /// 2^tries, at most 2^kMaxBackoffShift times, and never more than an eighth of
  /// request_timeout_us (or base_us, if that is longer).
  static constexpr int kMaxBackoffShift = 5;
  /// Resends per server and tick, whatever the server answered in the tick before.
  static constexpr int64_t kMinBudget = 32;

  ResendTimer(double base_us, double request_timeout_us);

  /// How often to call Tick and walk the open parts: a quarter of the base, at least 1 ms.
  int64_t tick_us() const;
  /// A server answered a part. A part sent once (Karn's rule: a resent one's reply may answer
  /// either copy) gives a round-trip sample, rtt_us, less any time a barrier held it.
  void Answered(int server, bool sent_once, double rtt_us);
  /// Starts a tick: each server may take as many resends in it as it answered parts since the
  /// last tick (at least kMinBudget). A server that answers slowly, not one that loses
  /// messages, would only queue copies behind the originals, each a copy in its memory.
  void Tick();
  /// Whether a part to `server` that has waited waited_us since it was last sent and was resent
  /// *tries times goes again now. When it does, it counts against the server's budget, *tries
  /// grows (to at most 255) and so does the server's back-off, and the caller sends it and
  /// restarts its wait. Walk the parts oldest first: the budget goes to them.
  bool Due(int server, int64_t waited_us, uint8_t* tries);

 private:
  struct Server {
    RttEstimate rtt;
    int64_t answered = 0, before = 0;  // parts answered: in all, and at its last tick
    int64_t budget = kMinBudget;
    uint64_t tick = 0;  // the tick its budget was last set in
  };
  // Sets the budget of the current tick, as if Tick walked every server: a worker of a
  // 10 000-worker job talks to a thousand servers, and walking them all every millisecond was
  // most of what the whole-cluster simulation spent at that scale.
  Server& At(int server);

  double base_us_, cap_us_;
  uint64_t tick_ = 0;
  std::unordered_map<int, Server> servers_;
};

}  // namespace ps

#endif  // PS_KV_RESEND_TIMER_H_
