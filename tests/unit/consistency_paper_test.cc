// Claims of the papers behind ps's consistency models, one test each, on the pure state
// machines (PullGate, policies, BoundedDelay). Random schedules are seeded; failures print the
// seed.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "consistency/barrier_policy.h"
#include "consistency/pull_gate.h"
#include "util/rng.h"

namespace ps {
namespace {

// Workers run step loops against one gate: read at step c (held until released), push the
// step's update, Clock() to c + 1. Events are picked at random among workers that can move.
// `check` runs whenever a read is answered, with the read's worker, step and the table.
template <typename Check>
void RunSchedule(std::shared_ptr<const BarrierPolicy> policy, int workers, int steps, uint64_t seed,
                 Check check) {
  PullGate gate(policy, seed);
  std::vector<int> ids;
  for (int w = 0; w < workers; ++w) ids.push_back(w);
  gate.SetWorkers(ids);
  // Per worker: current step, whether its read is answered, whether held.
  std::vector<int64_t> step(workers, 0);
  std::vector<bool> read_done(workers, false), held(workers, false);
  // applied[w] = number of w's step updates the server has applied.
  std::vector<int64_t> applied(workers, 0);
  Rng rng(seed ^ 0x5eed);
  auto answer = [&](int w) {
    held[w] = false;
    read_done[w] = true;
    check(w, step[w], gate.table(), applied);
  };
  std::vector<uint64_t> rel;
  auto drain = [&] {
    for (uint64_t h : rel) answer(static_cast<int>(h));
    rel.clear();
  };
  for (int guard = 0; guard < workers * steps * 10; ++guard) {
    std::vector<int> movable;
    for (int w = 0; w < workers; ++w) {
      if (step[w] < steps && !held[w]) movable.push_back(w);
    }
    if (movable.empty()) break;
    int w = movable[rng.Below(movable.size())];
    if (!read_done[w]) {
      if (gate.Read(w, step[w], w, &rel)) {
        answer(w);
      } else {
        held[w] = true;
      }
      drain();
    } else {
      applied[w]++;  // the push of step[w] (applied before the clock: same ordered channel)
      step[w]++;
      read_done[w] = false;
      gate.Report(w, step[w], &rel);
      drain();
    }
  }
  for (int w = 0; w < workers; ++w) ASSERT_EQ(step[w], steps) << "seed " << seed << " stuck";
}

// Petuum (Ho et al., NIPS'13): "a worker at clock c is guaranteed to see all updates from
// clocks <= c - s - 1", and the fastest worker is never more than s clocks ahead of the slowest.
TEST(ConsistencyPaperTest, SspReadSeesEveryUpdateOlderThanTheStalenessBound) {
  for (int64_t s : {0, 1, 3}) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      int64_t max_gap = 0;
      RunSchedule(MakeSsp(s), 6, 30, seed,
                  [&](int w, int64_t c, const StepTable& t, const std::vector<int64_t>& applied) {
                    for (size_t v = 0; v < applied.size(); ++v) {
                      ASSERT_GE(applied[v], c - s)
                          << "seed " << seed << " s " << s << ": worker " << w << " at " << c
                          << " misses updates of worker " << v;
                    }
                    max_gap = std::max(max_gap, c - t.Min());
                  });
      EXPECT_LE(max_gap, s) << "seed " << seed;
      if (s > 0) {
        EXPECT_GT(max_gap, 0) << "seed " << seed << ": the schedule never ran ahead";
      }
    }
  }
}

// SSP with s = 0 is BSP: a read of step c waits for every worker to finish step c - 1, so all
// workers run in lockstep (the slowest is at c or has finished it).
TEST(ConsistencyPaperTest, BspIsLockstep) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    RunSchedule(ParsePolicy("bsp"), 5, 25, seed,
                [&](int, int64_t c, const StepTable& t, const std::vector<int64_t>& applied) {
                  EXPECT_EQ(t.Min(), c) << "seed " << seed;
                  for (int64_t a : applied) {
                    EXPECT_GE(a, c) << "seed " << seed;
                    EXPECT_LE(a, c + 1) << "seed " << seed;
                  }
                });
  }
}

// ASP never waits: no read is ever held.
TEST(ConsistencyPaperTest, AspNeverBlocks) {
  PullGate gate(MakeAsp(), 1);
  gate.SetWorkers({0, 1, 2});
  std::vector<uint64_t> rel;
  for (int64_t c = 0; c < 100; ++c) EXPECT_TRUE(gate.Read(0, c, c, &rel));
  EXPECT_EQ(gate.deferred(), 0u);
}

// PSP (Wang et al. 2017) composes sampling with a base barrier: with beta equal to the number
// of workers it is the base barrier, and with beta = 0 it is ASP. Decisions are compared on
// random step tables.
TEST(ConsistencyPaperTest, PspWithFullSampleIsItsBaseAndWithEmptySampleIsAsp) {
  Rng rng(42);
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = 1 + static_cast<int>(rng.Below(12));
    const int64_t s = static_cast<int64_t>(rng.Below(3));
    StepTable t;
    for (int w = 0; w < n; ++w) t.AddAt(w * 3, static_cast<int64_t>(rng.Below(8)));
    const int caller = static_cast<int>(rng.Below(n)) * 3;
    const int64_t c = t.Step(caller);
    Rng a(trial), b(trial);
    EXPECT_EQ(MakePsp(n, s)->Pass(t, caller, c, &a), MakeSsp(s)->Pass(t, caller, c, &b))
        << "trial " << trial;
    EXPECT_EQ(MakePsp(n - 1, s)->Pass(t, caller, c, &a), MakeSsp(s)->Pass(t, caller, c, &b))
        << "trial " << trial;
    EXPECT_TRUE(MakePsp(0, s)->Pass(t, caller, c, &a)) << "trial " << trial;
    EXPECT_EQ(MakeSsp(0)->Pass(t, caller, c, &a), ParsePolicy("bsp")->Pass(t, caller, c, &b));
  }
}

// PSP's sampling primitive draws beta workers uniformly without replacement. Then a check over
// n candidates of which m would pass succeeds with the hypergeometric probability
// C(m, beta) / C(n, beta); in particular with one lagging worker, 1 - beta / n wherever it is.
TEST(ConsistencyPaperTest, PspSamplesUniformlyWithoutReplacement) {
  const int n = 10;  // candidates (the caller, id 0, is never sampled)
  for (int beta : {1, 3, 5}) {
    for (int lagging : {1, 5, 10}) {
      StepTable t;
      for (int w = 0; w <= n; ++w) t.AddAt(w, w == lagging ? 0 : 5);
      Rng rng(1000 + beta * 10 + lagging);
      auto p = MakePsp(beta, 0);
      const int trials = 20000;
      int pass = 0;
      for (int i = 0; i < trials; ++i) pass += p->Pass(t, 0, 5, &rng);
      const double want = 1.0 - static_cast<double>(beta) / n;
      const double se = std::sqrt(want * (1 - want) / trials);
      EXPECT_NEAR(pass / static_cast<double>(trials), want, 4 * se)
          << "beta " << beta << " lagging " << lagging;
    }
  }
  // Two lagging among ten, beta = 3: C(8,3)/C(10,3) = 56/120.
  StepTable t;
  for (int w = 0; w <= n; ++w) t.AddAt(w, (w == 2 || w == 7) ? 0 : 5);
  Rng rng(7);
  auto p = MakePsp(3, 0);
  int pass = 0;
  const int trials = 40000;
  for (int i = 0; i < trials; ++i) pass += p->Pass(t, 0, 5, &rng);
  const double want = 56.0 / 120.0;
  EXPECT_NEAR(pass / static_cast<double>(trials), want, 4 * std::sqrt(want * (1 - want) / trials));
}

// The Parameter Server paper's bounded delay: "tau = 0 is sequential consistency, tau = infinity
// eventual consistency"; in between, a step starts with at most tau earlier steps unfinished.
TEST(ConsistencyPaperTest, BoundedDelayKeepsAtMostTauStepsInFlight) {
  for (int tau : {0, 1, 3, -1}) {
    int64_t widest = 0;
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      Rng rng(seed);
      BoundedDelay d;
      std::vector<std::pair<int, int64_t>> open;
      int ts = 0;
      int64_t step = 0, max_span = 0;
      while (step < 50) {
        if (!open.empty() && rng.Below(2) == 0) {  // a reply arrives (any order)
          size_t i = rng.Below(open.size());
          d.Completed(open[i].first);
          open.erase(open.begin() + i);
          continue;
        }
        if (rng.Below(3) == 0 && d.MayStart(step + 1, tau)) {
          step++;
          for (auto& o : open) max_span = std::max(max_span, step - o.second);
          continue;
        }
        d.Issued(ts, step);
        open.emplace_back(ts++, step);
      }
      if (tau >= 0) {
        EXPECT_LE(max_span, tau) << "tau " << tau << " seed " << seed;
      }
      widest = std::max(widest, max_span);
    }
    // Without a bound the schedule does run steps ahead (else the test above proves nothing).
    EXPECT_GT(widest, tau < 0 ? 3 : tau - 1) << "tau " << tau;
  }
}

}  // namespace
}  // namespace ps
