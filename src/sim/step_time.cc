#include "sim/step_time.h"

#include <cmath>
#include <cstdlib>
#include <vector>

#include "ps/base.h"

namespace ps {

StepTime::StepTime(const std::string& spec) : spec_(spec) {
  std::vector<double> n;
  std::string name = spec.substr(0, spec.find(':'));
  size_t at = spec.find(':');
  while (at != std::string::npos) {
    size_t next = spec.find(':', at + 1);
    std::string f = spec.substr(at + 1, next == std::string::npos ? next : next - at - 1);
    char* end = nullptr;
    double v = std::strtod(f.c_str(), &end);
    if (f.empty() || *end != '\0' || !(v >= 0) || !std::isfinite(v)) {
      throw Error(ErrorCode::kBadConfig, "step time '" + spec + "': bad number '" + f + "'");
    }
    n.push_back(v);
    at = next;
  }
  auto want = [&](size_t k) {
    if (n.size() != k) {
      throw Error(ErrorCode::kBadConfig,
                  "step time '" + spec +
                      "': expected exp:M, pareto:A:XM, bimodal:P:A:B, stragglers:K:N or const:C");
    }
  };
  if (name == "exp") {
    want(1);
    kind_ = kExp;
    a_ = n[0];
  } else if (name == "pareto") {
    want(2);
    kind_ = kPareto;
    a_ = n[0];
    b_ = n[1];
    if (a_ <= 0) throw Error(ErrorCode::kBadConfig, "step time '" + spec + "': shape must be > 0");
  } else if (name == "bimodal") {
    want(3);
    kind_ = kBimodal;
    a_ = n[0];
    b_ = n[1];
    c_ = n[2];
    if (a_ > 1)
      throw Error(ErrorCode::kBadConfig, "step time '" + spec + "': probability must be <= 1");
  } else if (name == "stragglers") {
    want(2);
    kind_ = kStragglers;
    a_ = n[0];
    b_ = n[1];
  } else if (name == "const") {
    want(1);
    kind_ = kConst;
    a_ = n[0];
  } else {
    want(~size_t{0});  // throws with the list of forms
  }
}

double StepTime::Draw(int worker, Rng* rng) const {
  switch (kind_) {
    case kExp:
      return rng->Exponential(a_);
    case kPareto:
      return b_ / std::pow(rng->UniformOpen(), 1.0 / a_);
    case kBimodal:
      return rng->Uniform() < a_ ? rng->Exponential(b_) : rng->Exponential(c_);
    case kStragglers:
      return rng->Exponential(worker < a_ ? b_ : 1.0);
    case kConst:
      return a_;
  }
  return a_;
}

}  // namespace ps
