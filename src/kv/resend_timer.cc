#include "kv/resend_timer.h"

#include <algorithm>

namespace ps {

ResendTimer::ResendTimer(double base_us, double request_timeout_us)
    // Never longer than an eighth of the request timeout between two sends of a part: a
    // round-trip estimate inflated by a burst (replies a replica held back until a lost copy
    // came again) times the back-off must not outlast the request itself.
    : base_us_(base_us), cap_us_(std::max(base_us, request_timeout_us / 8)) {}

int64_t ResendTimer::tick_us() const {
  return std::max<int64_t>(1000, static_cast<int64_t>(base_us_ / 4));
}

ResendTimer::Server& ResendTimer::At(int server) {
  Server& s = servers_[server];
  if (s.tick != tick_) {
    // Answers counted since the tick before this one give this tick's budget; a server not
    // heard from over a whole tick gets the least.
    s.budget =
        s.tick + 1 == tick_ ? std::max<int64_t>(kMinBudget, s.answered - s.before) : kMinBudget;
    s.before = s.answered;
    s.tick = tick_;
  }
  return s;
}

void ResendTimer::Answered(int server, bool sent_once, double rtt_us) {
  Server& s = At(server);
  s.answered++;
  if (sent_once) s.rtt.Sample(std::max(0.0, rtt_us));
}

void ResendTimer::Tick() { ++tick_; }

bool ResendTimer::Due(int server, int64_t waited_us, uint8_t* tries) {
  Server& s = At(server);
  if (s.budget <= 0) return false;
  // Capped exponential back-off: a slow or stalled server is not flooded with copies.
  const int shift = std::min<int>(std::max<int>(*tries, s.rtt.backoff), kMaxBackoffShift);
  const double wait = std::min(cap_us_, s.rtt.Timeout(base_us_) * static_cast<double>(1 << shift));
  if (static_cast<double>(waited_us) < wait) return false;
  s.budget--;
  if (*tries < 255) ++*tries;
  s.rtt.backoff = std::max<int>(s.rtt.backoff, std::min<int>(*tries, kMaxBackoffShift));
  return true;
}

}  // namespace ps
