// Filters chosen by a worker (KVWorker::SetFilters) on whole jobs in one process: per-request
// compression over the node default, and the significantly-modified filter on pulls, exact at
// threshold 0 and within the threshold otherwise, also when messages are lost.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "ps/ps.h"
#include "unit/inproc_job.h"
#include "util/rng.h"

namespace ps {
namespace {

class KVFiltersTest : public ::testing::TestWithParam<bool> {};

SArray<Key> SomeKeys(size_t n, int rank = 0) {
  SArray<Key> keys;
  for (size_t i = 0; i < n; ++i) keys.push_back(HashKey(i + 1000000 * static_cast<size_t>(rank)));
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Each round the worker pushes changes to a few of its keys (some tiny), then pulls them all
// with the filter on; the pulled values are compared with the sum it pushed.
void PullRounds(Node* node, int rank, double threshold, uint64_t seed, int rounds) {
  KVWorker<float> kv(node);
  RequestFilters f;
  f.significant = threshold;
  kv.SetFilters(f);
  SArray<Key> keys = SomeKeys(3000, rank);
  std::vector<double> truth(keys.size() * 2, 0.0);
  Rng rng(seed);
  for (int r = 0; r < rounds; ++r) {
    SArray<float> delta(truth.size(), 0.0f);
    for (size_t i = 0; i < delta.size(); ++i) {
      if (rng.Below(20) == 0) {
        delta[i] = static_cast<float>(rng.Below(2) ? rng.Below(100) : rng.Below(100) * 1e-4);
        truth[i] += delta[i];
      }
    }
    kv.Wait(kv.Push(keys, delta));
    SArray<float> out(truth.size());
    kv.Wait(kv.Pull(keys, &out));
    for (size_t i = 0; i < out.size(); ++i) {
      // The server sums floats in the same order as truth's doubles within float precision.
      const double tol = threshold + 1e-4 * (1 + std::fabs(truth[i]));
      ASSERT_LE(std::fabs(out[i] - truth[i]), tol)
          << "seed " << seed << " round " << r << " value " << i;
    }
    if (threshold == 0) {
      // Exact: the same as a pull without the filter.
      RequestFilters none;
      kv.SetFilters(none);
      SArray<float> plain(truth.size());
      kv.Wait(kv.Pull(keys, &plain));
      kv.SetFilters(f);
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_EQ(out[i], plain[i]) << "seed " << seed << " round " << r << " value " << i;
      }
    }
  }
}

TEST_P(KVFiltersTest, SignificantFilterIsExactAtZeroAndSendsOnlyChangedValues) {
  std::atomic<uint64_t> sent{0}, suppressed{0};
  Job::Run(
      GetParam(), 2, 1, [&](Node* node, int rank) { PullRounds(node, rank, 0, 3, 10); },
      static_cast<float*>(nullptr), nullptr,
      [&](KVServerBase& s) {
        sent += s.significant_stats().sent;
        suppressed += s.significant_stats().suppressed;
      });
  // About a tenth of the keys change per round (two values, each 1 in 20).
  EXPECT_GT(suppressed.load(), 3 * sent.load());
}

TEST_P(KVFiltersTest, SignificantFilterKeepsEveryValueWithinTheThreshold) {
  Job::Run(
      GetParam(), 3, 2, [&](Node* node, int rank) { PullRounds(node, rank, 0.5, 10 + rank, 10); },
      static_cast<float*>(nullptr));
}

TEST(KVFiltersLossTest, SignificantFilterStaysCorrectWhenMessagesAreLost) {
  // Lost and duplicated replies make the worker refuse frames; both ends start new epochs and
  // every pulled value is still right.
  std::atomic<uint64_t> epochs{0};
  Job::Run(
      // 30 rounds, 2 coded replies each, 15% of them lost or doubled: without a refusal in
      // 60 replies (probability 0.85^60 < 1e-4) the test would not exercise anything.
      true, 2, 1, [&](Node* node, int rank) { PullRounds(node, rank, 0.01, 21, 30); },
      static_cast<float*>(nullptr),
      [](Config* c) {
        c->fault_drop = 0.1;
        c->fault_duplicate = 0.05;
        c->fault_delay = 0.05;
        c->seed = 99;
        c->resend_timeout_ms = 200;
      },
      [&](KVServerBase& s) { epochs += s.significant_stats().epochs; });
  EXPECT_GT(epochs.load(), 0u);
}

TEST_P(KVFiltersTest, PerRequestCompressionOverridesTheNodeDefault) {
  Job::Run(
      GetParam(), 2, 1,
      [&](Node* node, int) {
        KVWorker<float> kv(node);
        SArray<Key> keys = SomeKeys(20000);
        SArray<float> vals(keys.size(), 0.0f);
        for (size_t i = 0; i < vals.size(); i += 10) vals[i] = 1.5f;
        kv.Wait(kv.Push(keys, vals));  // the node default: off
        EXPECT_EQ(node->StatsJson().find("values:zero"), std::string::npos);
        RequestFilters f;
        f.compress = "zero";
        kv.SetFilters(f);
        kv.Wait(kv.Push(keys, vals));
        SArray<float> out(keys.size());
        kv.Wait(kv.Pull(keys, &out));  // the reply is zero-suppressed too
        for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 2 * vals[i]) << i;
        EXPECT_NE(node->StatsJson().find("\"values:zero\""), std::string::npos)
            << node->StatsJson();
        f.compress = "lz4";
        EXPECT_THROW(kv.SetFilters(f), Error);
        f.compress = "";
        f.quantize_bits = 7;
        try {
          kv.SetFilters(f);
          ADD_FAILURE() << "quantize_bits=7 accepted";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("quantize_bits"), std::string::npos) << e.what();
        }
      },
      static_cast<float*>(nullptr));
}

INSTANTIATE_TEST_SUITE_P(Transports, KVFiltersTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Inproc" : "Zmq"; });

}  // namespace
}  // namespace ps
