// The significantly-modified filter (src/filter/significant.h): lossless at threshold 0, every
// value within the threshold otherwise, and no stale value after a lost, reordered, duplicated
// or corrupted frame.
#include "filter/significant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "util/rng.h"

namespace ps {
namespace {

constexpr int kServer = 8, kWorker = 9;

// One link: the server's values (a random walk) and both ends of the filter.
struct Link {
  explicit Link(uint64_t seed, size_t n = 500, size_t width = 2, size_t bound = size_t{1} << 30)
      : rng(seed), server(bound), worker(bound), width(width) {
    Key k = 1;
    for (size_t i = 0; i < n; ++i) {
      k += 1 + rng.Below(100);
      keys.push_back(k);
    }
    truth.assign(n * width, 0.0);
  }
  // Moves a random tenth of the values (some by tiny amounts).
  void Step() {
    for (size_t i = 0; i < truth.size(); ++i) {
      if (rng.Below(10) == 0) truth[i] += (rng.Uniform() - 0.5) * (rng.Below(2) ? 1.0 : 1e-3);
    }
  }
  // Codes the values of keys [b, e) for the worker.
  SArray<char> Send(size_t b, size_t e, double threshold) {
    return server.Encode(kWorker, keys.data() + b, e - b,
                         reinterpret_cast<const char*>(truth.data() + b * width), width,
                         DataType::kDouble, threshold);
  }
  std::string Receive(size_t b, size_t e, const SArray<char>& frame, std::vector<double>* out,
                      bool* stale = nullptr) {
    SArray<char> o;
    bool s = false;
    std::string err = worker.Decode(kServer, keys.data() + b, e - b, frame, &o, &s);
    if (stale) *stale = s;
    if (err.empty()) {
      out->resize(o.size() / sizeof(double));
      std::memcpy(out->data(), o.data(), o.size());
    }
    return err;
  }

  Rng rng;
  SignificantFilter server, worker;
  size_t width;
  std::vector<Key> keys;
  std::vector<double> truth;
};

TEST(SignificantTest, ThresholdZeroIsLosslessAndSendsOnlyChangedValues) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    Link l(seed);
    uint64_t changed_keys = 0;
    std::vector<double> before = l.truth;
    for (int round = 0; round < 20; ++round) {
      l.Step();
      for (size_t i = 0; i < l.keys.size(); ++i) {
        bool moved = round == 0;  // the first frame carries every key
        for (size_t j = 0; j < l.width; ++j)
          moved |= before[i * l.width + j] != l.truth[i * l.width + j];
        changed_keys += moved;
      }
      before = l.truth;
      std::vector<double> got;
      ASSERT_EQ(l.Receive(0, l.keys.size(), l.Send(0, l.keys.size(), 0), &got), "")
          << "seed " << seed;
      ASSERT_EQ(got, l.truth) << "seed " << seed << " round " << round;
    }
    EXPECT_EQ(l.server.stats().sent, changed_keys) << "seed " << seed;
    EXPECT_GT(l.server.stats().suppressed, 0u) << "seed " << seed;
  }
}

TEST(SignificantTest, EveryValueIsWithinTheThresholdAndOverlappingPullsAgree) {
  const double threshold = 0.05;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    Link l(seed * 31);
    for (int round = 0; round < 40; ++round) {
      l.Step();
      // Pulls of different, overlapping key ranges share the copy.
      const size_t b = l.rng.Below(l.keys.size() / 2), e = b + 1 + l.rng.Below(l.keys.size() - b);
      std::vector<double> got;
      ASSERT_EQ(l.Receive(b, e, l.Send(b, e, threshold), &got), "") << "seed " << seed;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::fabs(got[i] - l.truth[b * l.width + i]), threshold)
            << "seed " << seed << " round " << round << " value " << i;
      }
    }
    EXPECT_GT(l.server.stats().suppressed, l.server.stats().sent) << "seed " << seed;
  }
}

TEST(SignificantTest, ALostFrameIsRefusedAndANewEpochIsExactAgain) {
  Link l(7);
  std::vector<double> got;
  ASSERT_EQ(l.Receive(0, 100, l.Send(0, 100, 0), &got), "");
  l.Step();
  (void)l.Send(0, 100, 0);  // lost on the way: the server's copy moved, the worker's did not
  l.Step();
  bool stale = true;
  EXPECT_NE(l.Receive(0, 100, l.Send(0, 100, 0), &got, &stale), "");
  EXPECT_FALSE(stale);
  const uint64_t reset = l.worker.PendingReset(kServer);
  ASSERT_GT(reset, 0u);
  l.server.Reset(kWorker, reset);  // the reset travels with the next request
  ASSERT_EQ(l.Receive(0, 100, l.Send(0, 100, 0), &got), "");
  EXPECT_EQ(got, std::vector<double>(l.truth.begin(), l.truth.begin() + 200));
  EXPECT_EQ(l.worker.PendingReset(kServer), 0u);
  EXPECT_EQ(l.worker.stats().refused, 1u);
}

TEST(SignificantTest, ReorderedAndDuplicatedFramesNeverGiveStaleValues) {
  Link l(11);
  std::vector<double> got;
  ASSERT_EQ(l.Receive(0, 200, l.Send(0, 200, 0), &got), "");
  l.Step();
  SArray<char> first = l.Send(0, 200, 0);
  l.Step();
  SArray<char> second = l.Send(0, 200, 0);
  // The second arrives first: refused (it leaves values to a copy the worker does not have).
  EXPECT_NE(l.Receive(0, 200, second, &got), "");
  // The first, now from an epoch the worker left: refused as stale, no further epoch.
  const uint64_t reset = l.worker.PendingReset(kServer);
  bool stale = false;
  EXPECT_NE(l.Receive(0, 200, first, &got, &stale), "");
  EXPECT_TRUE(stale);
  EXPECT_EQ(l.worker.PendingReset(kServer), reset);
  l.server.Reset(kWorker, reset);
  SArray<char> third = l.Send(0, 200, 0);
  ASSERT_EQ(l.Receive(0, 200, third, &got), "");
  EXPECT_EQ(got, std::vector<double>(l.truth.begin(), l.truth.begin() + 400));
  // A duplicate of a frame already applied is refused too.
  EXPECT_NE(l.Receive(0, 200, third, &got), "");
}

TEST(SignificantTest, CorruptedOrTruncatedFramesAreRefusedWithoutACrash) {
  Rng rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    Link l(100 + trial, 130);
    std::vector<double> got;
    ASSERT_EQ(l.Receive(0, 130, l.Send(0, 130, 0), &got), "");
    l.Step();
    SArray<char> f = l.Send(0, 130, 0);
    SArray<char> bad;
    bad.CopyFrom(f.data(), f.size());
    if (trial % 2) {
      bad.resize(rng.Below(bad.size()));
    } else {
      bad[rng.Below(64)] ^= static_cast<char>(1 + rng.Below(255));  // header or bitmap
    }
    // Values themselves are as exposed as in an uncoded frame; everything that says which
    // value belongs to which key is checked.
    EXPECT_NE(l.Receive(0, 130, bad, &got), "") << "trial " << trial;
  }
}

TEST(SignificantTest, TheMemoryBoundAndAWidthChangeStartEpochsTheReceiverAdopts) {
  Link l(13, 1000, 1, /*bound=*/4000);  // a few hundred keys fit
  std::vector<double> got;
  for (int round = 0; round < 6; ++round) {
    l.Step();
    const size_t b = (round * 300) % 700;
    ASSERT_EQ(l.Receive(b, b + 300, l.Send(b, b + 300, 0), &got), "") << "round " << round;
    ASSERT_EQ(got, std::vector<double>(l.truth.begin() + b, l.truth.begin() + b + 300));
  }
  EXPECT_GT(l.server.stats().epochs, 0u);
  EXPECT_EQ(l.worker.stats().refused, 0u);
  // Two values per key now: a new epoch, still exact.
  std::vector<double> wide(600);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<double>(i);
  SArray<char> f =
      l.server.Encode(kWorker, l.keys.data(), 300, reinterpret_cast<const char*>(wide.data()), 2,
                      DataType::kDouble, 0);
  ASSERT_EQ(l.Receive(0, 300, f, &got), "");
  EXPECT_EQ(got, wide);
}

TEST(SignificantTest, FloatValuesAndNaNTravel) {
  SignificantFilter s, r;
  std::vector<Key> keys = {3, 5, 9};
  std::vector<float> v = {1.0f, -0.0f, 2.5f};
  SArray<char> out;
  bool stale;
  auto round = [&] {
    SArray<char> f = s.Encode(kWorker, keys.data(), 3, reinterpret_cast<const char*>(v.data()), 1,
                              DataType::kFloat, 0.1);
    EXPECT_EQ(r.Decode(kServer, keys.data(), 3, f, &out, &stale), "");
    return SArray<float>(out);
  };
  round();
  v[0] = 1.05f;  // within the threshold: not sent
  v[1] = std::nanf("");
  SArray<float> got = round();
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], 2.5f);
}

}  // namespace
}  // namespace ps
