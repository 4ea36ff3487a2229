#ifndef PS_UTIL_RTT_ESTIMATE_H_
#define PS_UTIL_RTT_ESTIMATE_H_

#include <algorithm>
#include <cmath>

namespace ps {

/// Round-trip estimate to one peer (Jacobson/Karels, as TCP's RTO): something unanswered is
/// sent again after max(base, srtt + 4 rttvar) times 2^backoff. A resend raises the peer's
/// backoff, and only a clean sample (Karn's rule: of something sent once) lowers it again, so
/// a peer that is slow, not losing messages, is not sent copies it would only have to queue
/// and discard.
struct RttEstimate {
  double srtt_us = 0, rttvar_us = 0;
  bool any = false;
  int backoff = 0;
  void Sample(double us) {
    backoff = 0;
    if (!any) {
      srtt_us = us;
      rttvar_us = us / 2;
      any = true;
      return;
    }
    rttvar_us = 0.75 * rttvar_us + 0.25 * std::abs(srtt_us - us);
    srtt_us = 0.875 * srtt_us + 0.125 * us;
  }
  double Timeout(double base_us) const {
    return any ? std::max(base_us, srtt_us + 4 * rttvar_us) : base_us;
  }
};

}  // namespace ps

#endif  // PS_UTIL_RTT_ESTIMATE_H_
