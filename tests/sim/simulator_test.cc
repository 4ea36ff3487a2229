// The deterministic simulator: known results of the theory, reproducibility, scale.
#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "ps/base.h"

namespace ps {
namespace {

SimResult RunSim(const SimOptions& o, std::string* text = nullptr) {
  std::ostringstream out;
  SimResult r = Simulator(o).Run(out);
  if (text) *text = out.str();
  return r;
}

// Under BSP a round lasts as long as the slowest of P workers: E[max of P Exp(1)] = H_P, so
// BSP completes 1/H_P steps per unit time (0.193 for P = 100).
TEST(SimulatorTest, BspThroughputIsOneOverTheHarmonicNumber) {
  SimOptions o;
  o.workers = 100;
  o.servers = 1;
  o.policy = "bsp";
  o.step_time = "exp:1";
  o.steps = 1000;
  o.seed = 5;
  SimResult r = RunSim(o);
  double h = 0;
  for (int k = 1; k <= 100; ++k) h += 1.0 / k;
  const double rate = o.steps / r.end_time;
  EXPECT_NEAR(rate, 1 / h, 0.03 / h) << "seed " << o.seed << ": " << rate << " steps per unit";
  for (int64_t s : r.steps) EXPECT_EQ(s, o.steps);
  // Lockstep: no read was ever answered ahead of the slowest worker.
  EXPECT_EQ(r.read_lag.size(), 1u);
  EXPECT_EQ(r.read_lag.begin()->first, 0);
}

TEST(SimulatorTest, SameSeedGivesByteIdenticalTracesAndAnotherSeedDoesNot) {
  SimOptions o;
  o.workers = 50;
  o.servers = 3;
  o.policy = "psp:5:1";
  o.step_time = "pareto:2.5:1";
  o.latency = 0.01;
  o.steps = 40;
  o.trace = true;
  o.snapshots = {5, 10};
  o.loss_every = 2;
  o.seed = 9;
  std::string a, b, c;
  RunSim(o, &a);
  RunSim(o, &b);
  EXPECT_GT(a.size(), 10000u);
  EXPECT_EQ(a, b);
  o.seed = 10;
  RunSim(o, &c);
  EXPECT_NE(a, c);
}

TEST(SimulatorTest, SspNeverAnswersAReadMoreThanSStepsAheadOfTheSlowest) {
  SimOptions o;
  o.workers = 60;
  o.servers = 2;
  o.policy = "ssp:3";
  o.step_time = "stragglers:3:4";
  o.steps = 60;
  o.seed = 3;
  SimResult r = RunSim(o);
  ASSERT_FALSE(r.read_lag.empty());
  EXPECT_EQ(r.read_lag.rbegin()->first, 3) << "seed " << o.seed;
  EXPECT_LE(r.staleness.rbegin()->first, 3) << "seed " << o.seed;
  o.policy = "asp";
  SimResult a = RunSim(o);
  EXPECT_GT(a.read_lag.rbegin()->first, 10) << "ASP should let fast workers run far ahead";
  EXPECT_LT(a.end_time, r.end_time);
}

// With beta covering every other worker, PSP takes the same decisions as its base policy and
// draws no random numbers, so the whole run is identical to BSP's.
TEST(SimulatorTest, PspWithFullSampleRunsExactlyLikeBsp) {
  SimOptions o;
  o.workers = 30;
  o.servers = 2;
  o.step_time = "exp:1";
  o.steps = 30;
  o.trace = true;
  o.seed = 4;
  std::string bsp, psp;
  o.policy = "bsp";
  RunSim(o, &bsp);
  o.policy = "psp:30:0";
  RunSim(o, &psp);
  // The summary lines name the policy; everything before them must match.
  auto body = [](const std::string& s) { return s.substr(0, s.find("{\"type\":\"worker\"")); };
  EXPECT_EQ(body(bsp), body(psp));
}

TEST(SimulatorTest, FourHundredWorkersOnOneCore) {
  SimOptions o;
  o.workers = 400;
  o.servers = 4;
  o.policy = "psp:40:0";
  o.steps = 30;
  o.seed = 2;
  SimResult r = RunSim(o);
  ASSERT_EQ(r.steps.size(), 400u);
  for (int64_t s : r.steps) EXPECT_EQ(s, 30);
  EXPECT_GT(r.first_pass, 0u);
  EXPECT_LT(r.first_pass, r.checks) << "pBSP with 10% samples never held a read";
}

// PSP's sampling primitive, in place: each read's first check passes with the hypergeometric
// probability of drawing beta workers without replacement, all among those that would pass,
// given the step table the check saw. Summed over thousands of checks, the count of reads that
// passed must match the sum of those probabilities (binomial spread, 4 standard deviations).
TEST(SimulatorTest, PspFirstChecksPassAsOftenAsSamplingWithoutReplacementPredicts) {
  for (int beta : {1, 5, 20}) {
    SimOptions o;
    o.workers = 100;
    o.servers = 4;
    o.policy = "psp:" + std::to_string(beta) + ":0";
    o.latency = 0.01;
    o.until = 20;
    o.seed = 1;
    SimResult r = RunSim(o);
    ASSERT_GT(r.checks, 500u);
    const double sd = std::sqrt(r.expected_first_pass);  // binomial sd <= sqrt(mean)
    EXPECT_NEAR(static_cast<double>(r.first_pass), r.expected_first_pass, 4 * sd + 1)
        << "beta " << beta << " seed " << o.seed;
    EXPECT_LE(r.expected_first_pass, r.f_beta_sum + 1e-9);  // without replacement <= F^beta
  }
}

TEST(SimulatorTest, BadOptionsNameTheOption) {
  SimOptions o;
  o.policy = "nope";
  EXPECT_THROW(Simulator{o}, Error);
  o.policy = "bsp";
  o.step_time = "exp";
  try {
    Simulator s(o);
    std::ostringstream out;
    s.Run(out);
    ADD_FAILURE() << "accepted step time 'exp'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exp"), std::string::npos);
  }
}

}  // namespace
}  // namespace ps
