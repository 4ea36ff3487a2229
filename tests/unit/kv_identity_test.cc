// Request identities (worker, timestamp) are 64-bit end to end (issue 15, item 2): a worker
// whose counter crosses 2^31 or 2^32 under message loss, duplication and resends keeps exact
// sums. With 32-bit identities a request past the boundary falls below the low-water mark the
// servers hold and is acknowledged without being applied.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <vector>

#include "kv/applied_log.h"
#include "ps/ps.h"
#include "replication/aggregator.h"
#include "unit/inproc_job.h"

namespace ps {
namespace {

struct Boundary {
  int64_t first;
  uint64_t seed;
};

class KVIdentityTest : public ::testing::TestWithParam<Boundary> {};

TEST_P(KVIdentityTest, CrossingTheBoundaryUnderLossKeepsSumsExact) {
  const Boundary b = GetParam();
  const int W = 2, kRequests = 400, kInFlight = 6;
  // Each worker's pushes, drawn from one seeded generator before the job starts.
  std::mt19937_64 gen(b.seed);
  std::vector<Key> universe(500);
  for (auto& k : universe) k = gen() % kMaxKey;
  std::sort(universe.begin(), universe.end());
  universe.erase(std::unique(universe.begin(), universe.end()), universe.end());
  std::map<Key, int64_t> ref;
  std::vector<std::vector<std::pair<SArray<Key>, SArray<int64_t>>>> pushes(W);
  for (int w = 0; w < W; ++w) {
    for (int r = 0; r < kRequests; ++r) {
      SArray<Key> keys;
      SArray<int64_t> vals;
      for (Key k : universe) {
        if (gen() % 16 == 0) {
          keys.push_back(k);
          vals.push_back(static_cast<int64_t>(gen() % 1000) - 400);
          ref[k] += vals.back();
        }
      }
      pushes[w].emplace_back(keys, vals);
    }
  }
  std::atomic<int> checked{0};
  std::atomic<uint64_t> resends{0};
  Job::Run(
      true, 2, W,
      [&](Node* node, int rank) {
        KVWorker<int64_t> kv(node);
        std::deque<int64_t> open;
        int64_t first = -1, last = -1;
        for (auto& p : pushes[rank]) {
          if (open.size() == kInFlight) {
            kv.Wait(open.front());
            open.pop_front();
          }
          open.push_back(kv.Push(p.first, p.second));
          if (first < 0) first = open.back();
          last = open.back();
        }
        for (int64_t ts : open) kv.Wait(ts);
        // The counter really crossed the boundary.
        ASSERT_EQ(first, b.first) << "seed " << b.seed;
        ASSERT_EQ(last, b.first + kRequests - 1) << "seed " << b.seed;
        resends += kv.Resends();
        node->Barrier(kWorkerGroup);
        SArray<int64_t> vals;
        kv.Wait(kv.Pull(SArray<Key>(universe), &vals));
        ASSERT_EQ(vals.size(), universe.size());
        for (size_t i = 0; i < universe.size(); ++i) {
          auto it = ref.find(universe[i]);
          ASSERT_EQ(vals[i], it == ref.end() ? 0 : it->second)
              << "key index " << i << ", seed " << b.seed << ", first timestamp " << b.first;
        }
        checked++;
      },
      static_cast<int64_t*>(nullptr),
      [&](Config* c) {
        c->first_timestamp = b.first;
        c->fault_drop = 0.05;
        c->fault_duplicate = 0.05;
        c->fault_delay = 0.05;
        c->fault_delay_ms = 5;
        c->resend_timeout_ms = 30;
        c->seed = b.seed;
        // Under this much injected loss a part can wait many seconds for its answer (the runs
        // of 2026-11-26 took 32-52 s, and one request went unanswered for 20 s, the default
        // timeout here, in a full-suite run): the test is about identities across the
        // boundary, so it waits longer; the latency is an open problem (issue note).
        c->request_timeout_ms = 90000;
        c->barrier_timeout_ms = 90000;
      });
  EXPECT_EQ(checked.load(), W);
  // Loss really happened: some request parts went again.
  EXPECT_GT(resends.load(), 0u) << "seed " << b.seed;
}

// The two places a timestamp is packed into a frame of its own: the pushes an aggregate covers
// (replicas dedupe by them) and the applied log a refill snapshot carries.
TEST(KVIdentityWireTest, AggregatesAndSnapshotsKeepTimestampsAbove32Bits) {
  for (int64_t ts : {(int64_t{1} << 31) + 3, (int64_t{1} << 32) + 5, (int64_t{1} << 40) + 7}) {
    Aggregator agg(DataType::kInt64);
    const Key keys[2] = {10, 20};
    const int64_t vals[2] = {1, 2};
    agg.Add({2}, 1, 7, ts, keys, 2, reinterpret_cast<const char*>(vals), 1);
    EXPECT_TRUE(agg.Holds(7, ts));
    auto copies = agg.Take();
    ASSERT_EQ(copies.size(), 1u);
    std::vector<Aggregator::Push> pushes;
    ASSERT_TRUE(Aggregator::Pushes(copies[0].msg, &pushes));
    ASSERT_EQ(pushes.size(), 1u);
    EXPECT_EQ(pushes[0].ts, ts);

    AppliedLog log;
    log.Advance(7, ts - 1);
    log.RecordKeys(7, ts, SArray<Key>{10, 20});
    SArray<uint64_t> clock, records;
    log.Export(Range(0, 100), &clock, &records);
    AppliedLog copy;
    ASSERT_EQ(copy.Import(Range(0, 100), clock, records), "");
    std::vector<bool> seen;
    EXPECT_EQ(copy.CheckKeys(7, ts, keys, 2, &seen), 2u) << "timestamp " << ts;
    EXPECT_TRUE(copy.Below(7, ts - 2));
    EXPECT_FALSE(copy.Below(7, ts));
  }
}

INSTANTIATE_TEST_SUITE_P(Boundaries, KVIdentityTest,
                         ::testing::Values(Boundary{(int64_t{1} << 31) - 200, 31},
                                           Boundary{(int64_t{1} << 32) - 200, 32}),
                         [](const ::testing::TestParamInfo<Boundary>& i) {
                           return i.param.seed == 31 ? std::string("Two31") : std::string("Two32");
                         });

}  // namespace
}  // namespace ps
