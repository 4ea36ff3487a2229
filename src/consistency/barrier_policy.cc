#include "consistency/barrier_policy.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "ps/base.h"

namespace ps {
namespace {

class Ssp : public BarrierPolicy {
 public:
  explicit Ssp(int64_t s) : s_(s) {}
  bool Pass(const StepTable& table, int, int64_t t, Rng*) const override {
    return table.size() == 0 || table.Min() >= t - s_;
  }
  std::string Spec() const override { return s_ == 0 ? "bsp" : "ssp:" + std::to_string(s_); }

 private:
  int64_t s_;
};

class Asp : public BarrierPolicy {
 public:
  bool Pass(const StepTable&, int, int64_t, Rng*) const override { return true; }
  std::string Spec() const override { return "asp"; }
};

class Psp : public BarrierPolicy {
 public:
  Psp(int beta, int64_t s) : beta_(beta), s_(s) {}
  bool Pass(const StepTable& table, int caller, int64_t t, Rng* rng) const override {
    const auto& ids = table.workers();
    const auto& steps = table.steps();
    // Candidates: everyone but the caller (its own step is t, which always passes).
    const size_t n = ids.size();
    auto at = std::lower_bound(ids.begin(), ids.end(), caller);
    const size_t self = (at != ids.end() && *at == caller) ? at - ids.begin() : n;
    const size_t others = self < n ? n - 1 : n;
    const size_t k = std::min<size_t>(beta_, others);
    if (k == others) {
      for (size_t i = 0; i < n; ++i) {
        if (i != self && steps[i] < t - s_) return false;
      }
      return true;
    }
    // Floyd's algorithm: k distinct indices of [0, others) with k draws. Each index is judged
    // as soon as it is drawn: one lagging member fails the whole sample, whatever else it holds.
    if (mark_.size() < others) mark_.assign(others, 0);
    if (++epoch_ == 0) {
      std::fill(mark_.begin(), mark_.end(), 0);
      epoch_ = 1;
    }
    for (size_t j = others - k; j < others; ++j) {
      size_t r = rng->Below(j + 1);
      if (mark_[r] == epoch_) r = j;
      mark_[r] = epoch_;
      size_t i = (self < n && r >= self) ? r + 1 : r;
      if (steps[i] < t - s_) return false;
    }
    return true;
  }
  std::string Spec() const override {
    return "psp:" + std::to_string(beta_) + ":" + std::to_string(s_);
  }

 private:
  int beta_;
  int64_t s_;
  // Scratch: which indices the current sample holds (mark_[i] == epoch_).
  mutable std::vector<uint32_t> mark_;
  mutable uint32_t epoch_ = 0;
};

// The proof that a new policy is a few lines: wait for all but the slowest b.
class Backup : public BarrierPolicy {
 public:
  Backup(int b, int64_t s) : b_(b), s_(s) {}
  bool Pass(const StepTable& table, int, int64_t t, Rng*) const override {
    return table.CountBelow(t - s_) <= static_cast<size_t>(b_);
  }
  std::string Spec() const override {
    return "backup:" + std::to_string(b_) + ":" + std::to_string(s_);
  }

 private:
  int b_;
  int64_t s_;
};

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t c = s.find(':', start);
    out.push_back(s.substr(start, c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return out;
}

int64_t Number(const std::string& text, const std::string& spec, const std::string& option) {
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 0 || v > (1 << 30)) {
    throw Error(ErrorCode::kBadConfig,
                option + ": bad number '" + text + "' in '" + spec +
                    "' (expected bsp, asp, ssp:S, psp:BETA[:S] or backup:B[:S])");
  }
  return v;
}

}  // namespace

std::unique_ptr<BarrierPolicy> MakeSsp(int64_t s) { return std::make_unique<Ssp>(s); }
std::unique_ptr<BarrierPolicy> MakeAsp() { return std::make_unique<Asp>(); }
std::unique_ptr<BarrierPolicy> MakePsp(int beta, int64_t s) {
  return std::make_unique<Psp>(beta, s);
}
std::unique_ptr<BarrierPolicy> MakeBackup(int b, int64_t s) {
  return std::make_unique<Backup>(b, s);
}

std::unique_ptr<BarrierPolicy> ParsePolicy(const std::string& spec, const std::string& option) {
  auto f = Split(spec);
  auto num = [&](size_t i, int64_t dflt) {
    return i < f.size() ? Number(f[i], spec, option) : dflt;
  };
  const std::string& name = f[0];
  if (name == "bsp" && f.size() == 1) return MakeSsp(0);
  if (name == "asp" && f.size() == 1) return MakeAsp();
  if (name == "ssp" && f.size() == 2) return MakeSsp(num(1, 0));
  if ((name == "psp" || name == "pssp") && (f.size() == 2 || f.size() == 3)) {
    return MakePsp(static_cast<int>(num(1, 0)), num(2, 0));
  }
  if (name == "pbsp" && f.size() == 2) return MakePsp(static_cast<int>(num(1, 0)), 0);
  if (name == "backup" && (f.size() == 2 || f.size() == 3)) {
    return MakeBackup(static_cast<int>(num(1, 0)), num(2, 0));
  }
  throw Error(ErrorCode::kBadConfig,
              option + ": unknown barrier policy '" + spec +
                  "' (expected bsp, asp, ssp:S, psp:BETA[:S] or backup:B[:S])");
}

}  // namespace ps
