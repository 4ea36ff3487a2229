#include "control/read_lease.h"

#include <algorithm>

namespace ps {

ReadLease::ReadLease(int64_t heartbeat_timeout_ms, int64_t heartbeat_interval_ms)
    : stall_ms_(std::max<int64_t>(heartbeat_timeout_ms / 2, 2 * heartbeat_interval_ms)),
      lease_ms_(heartbeat_timeout_ms - heartbeat_interval_ms / 4) {}

void ReadLease::Confirmed(int64_t at_us) {
  // Echoes may arrive out of order (a resent beat): the lease runs from the newest one.
  int64_t have = echoed_us_.load();
  while (have < at_us && !echoed_us_.compare_exchange_weak(have, at_us)) {
  }
}

bool ReadLease::Echoed(int64_t beat_us) {
  Confirmed(beat_us);
  int64_t since = suspect_since_us_.load();
  return since > 0 && beat_us >= since && suspect_since_us_.compare_exchange_strong(since, 0);
}

bool ReadLease::Stall(int64_t now_us) {
  int64_t none = 0;
  return suspect_since_us_.compare_exchange_strong(none, std::max<int64_t>(1, now_us));
}

bool ReadLease::Fresh(int64_t now_us) const {
  const int64_t echoed = echoed_us_.load();
  return echoed == kNotStarted || now_us - echoed <= lease_ms_ * 1000;
}

int64_t ReadLease::EchoAgeMs(int64_t now_us) const {
  const int64_t echoed = echoed_us_.load();
  return echoed == kNotStarted ? 0 : (now_us - echoed) / 1000;
}

}  // namespace ps
