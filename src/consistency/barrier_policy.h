// Barrier policies: when may a server answer a worker's read for step t? Pure logic: one
// decision over the server's step table (docs/consistency.md states the semantics).
#ifndef PS_CONSISTENCY_BARRIER_POLICY_H_
#define PS_CONSISTENCY_BARRIER_POLICY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "consistency/step_table.h"
#include "util/rng.h"

namespace ps {

class BarrierPolicy {
 public:
  virtual ~BarrierPolicy() = default;
  /// May the read of `caller` (a worker at step t, already recorded in `table`) be answered
  /// now? Sampling policies draw from `rng` on every call, so a re-check redraws.
  virtual bool Pass(const StepTable& table, int caller, int64_t t, Rng* rng) const = 0;
  /// The policy as a spec string that ParsePolicy accepts ("ssp:4").
  virtual std::string Spec() const = 0;
};

/// BSP is SSP(0): every live worker has completed step t - 1.
std::unique_ptr<BarrierPolicy> MakeSsp(int64_t staleness);
/// Never waits.
std::unique_ptr<BarrierPolicy> MakeAsp();
/// PSP(beta, s): beta workers drawn uniformly without replacement from the live workers other
/// than the caller (all of them when fewer) must satisfy the SSP(s) rule. beta = 0 is ASP;
/// beta >= workers - 1 is SSP(s).
std::unique_ptr<BarrierPolicy> MakePsp(int beta, int64_t staleness);
/// Backup workers: all live workers but the `backups` slowest satisfy the SSP(s) rule.
std::unique_ptr<BarrierPolicy> MakeBackup(int backups, int64_t staleness);

/// Parses "bsp", "asp", "ssp:S", "psp:BETA[:S]" (also "pbsp:BETA", "pssp:BETA:S") and
/// "backup:B[:S]". Throws ps::Error naming `option` when the spec is malformed.
std::unique_ptr<BarrierPolicy> ParsePolicy(const std::string& spec,
                                           const std::string& option = "PS_CONSISTENCY");

}  // namespace ps

#endif  // PS_CONSISTENCY_BARRIER_POLICY_H_
