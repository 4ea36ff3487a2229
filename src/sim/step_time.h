// Distributions of a logical worker's compute time per step, for the simulator.
#ifndef PS_SIM_STEP_TIME_H_
#define PS_SIM_STEP_TIME_H_

#include <string>

#include "util/rng.h"

namespace ps {

/// Parsed from a spec:
///   exp:M            exponential with mean M
///   pareto:A:XM      Pareto with shape A and scale XM (heavy tail; mean A*XM/(A-1))
///   bimodal:P:A:B    with probability P exponential with mean A, else mean B
///   stragglers:K:N   exponential with mean 1, and workers 0..K-1 are N times slower always
///   const:C          always C
class StepTime {
 public:
  /// Throws ps::Error naming the spec when it is malformed.
  explicit StepTime(const std::string& spec);
  /// One step duration of `worker`, drawn from rng.
  double Draw(int worker, Rng* rng) const;
  const std::string& spec() const { return spec_; }

 private:
  enum Kind { kExp, kPareto, kBimodal, kStragglers, kConst } kind_;
  std::string spec_;
  double a_ = 1, b_ = 1, c_ = 1;
};

}  // namespace ps

#endif  // PS_SIM_STEP_TIME_H_
