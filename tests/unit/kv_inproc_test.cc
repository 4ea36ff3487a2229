// Whole jobs inside one process: scheduler, servers and workers as Node objects. Proves that
// nothing is global, and drives the same KV code that runs in real processes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "ps/ps.h"
#include "transport/zmq_van.h"
#include "unit/inproc_job.h"

namespace ps {
namespace {

class KVInprocTest : public ::testing::TestWithParam<bool> {};

TEST_P(KVInprocTest, PushesSumExactlyAcrossServers) {
  const uint64_t seed = 1234;
  const int W = 3;
  std::mt19937_64 gen(seed);
  std::vector<Key> universe(3000);
  for (auto& k : universe) k = gen() % kMaxKey;
  std::sort(universe.begin(), universe.end());
  universe.erase(std::unique(universe.begin(), universe.end()), universe.end());
  std::map<Key, int64_t> ref;
  std::vector<std::pair<std::vector<Key>, std::vector<int64_t>>> pushes(W);
  for (int w = 0; w < W; ++w) {
    for (Key k : universe) {
      if (gen() % 2) {
        int64_t v = static_cast<int64_t>(gen() % 1000) - 300;
        pushes[w].first.push_back(k);
        pushes[w].second.push_back(v);
        ref[k] += v;
      }
    }
  }
  std::atomic<int> checked{0};
  Job::Run(GetParam(), 2, W, [&](Node* node, int rank) {
    KVWorker<int64_t> kv(node);
    kv.Wait(kv.Push(pushes[rank].first, pushes[rank].second));
    node->Barrier(kWorkerGroup);
    SArray<int64_t> vals;
    kv.Wait(kv.Pull(universe, &vals));
    ASSERT_EQ(vals.size(), universe.size());
    for (size_t i = 0; i < universe.size(); ++i) {
      auto it = ref.find(universe[i]);
      ASSERT_EQ(vals[i], it == ref.end() ? 0 : it->second) << "seed " << seed;
    }
    // Range pull returns exactly the stored keys in the range.
    Range r(universe[100], universe[2000]);
    SArray<Key> rk;
    SArray<int64_t> rv;
    SArray<int> rl;
    kv.Wait(kv.PullRange(r, &rk, &rv, &rl));
    auto lo = ref.lower_bound(r.begin), hi = ref.lower_bound(r.end);
    ASSERT_EQ(rk.size(), static_cast<size_t>(std::distance(lo, hi)));
    size_t i = 0;
    for (auto it = lo; it != hi; ++it, ++i) {
      ASSERT_EQ(rk[i], it->first);
      ASSERT_EQ(rv[i], it->second);
      ASSERT_EQ(rl[i], 1);
    }
    checked++;
  });
  EXPECT_EQ(checked.load(), W);
}

TEST_P(KVInprocTest, VariableLengthLargeValuesAndCallbacks) {
  Job::Run(GetParam(), 2, 1, [&](Node* node, int rank) {
    KVWorker<int64_t> kv(node);
    SArray<Key> keys{HashKey(1), HashKey(2), HashKey(3)};
    std::sort(keys.begin(), keys.end());
    SArray<int> lens{2, 0, 3};
    SArray<int64_t> vals{1, 2, 3, 4, 5};
    std::atomic<bool> called{false};
    kv.Wait(kv.Push(keys, vals, lens, [&] { called = true; }));
    EXPECT_TRUE(called.load());
    SArray<int64_t> out;
    SArray<int> out_lens;
    kv.Wait(kv.Pull(keys, &out, &out_lens));
    EXPECT_EQ(out_lens.ToVector(), lens.ToVector());
    EXPECT_EQ(out.ToVector(), vals.ToVector());
    // A key with 3M values travels in 4 MB parts and comes back whole.
    SArray<Key> big{HashKey(77)};
    SArray<int64_t> bv(3 << 20);
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<int64_t>(i);
    kv.Wait(kv.Push(big, bv));
    SArray<int64_t> bo(bv.size());
    kv.Wait(kv.PushPull(big, bv, &bo));
    ASSERT_EQ(bo.size(), bv.size());
    for (size_t i = 0; i < bv.size(); i += 4099) ASSERT_EQ(bo[i], 2 * bv[i]) << i;
    // Variable-length push-pull with one key larger than a part.
    SArray<Key> vk{HashKey(501), HashKey(502)};
    std::sort(vk.begin(), vk.end());
    SArray<int> vl{1, 700000};
    SArray<int64_t> vv(700001);
    for (size_t i = 0; i < vv.size(); ++i) vv[i] = static_cast<int64_t>(i % 1000);
    SArray<int64_t> vo;
    kv.Wait(kv.PushPull(vk, vv, &vo, vl));
    ASSERT_EQ(vo.size(), vv.size());
    for (size_t i = 0; i < vv.size(); i += 997) ASSERT_EQ(vo[i], vv[i]) << i;
    EXPECT_THROW(kv.Wait(12345), Error) << "a timestamp this worker never issued";
    // A mismatching push is rejected with an error, not applied.
    SArray<int64_t> wrong{1};
    EXPECT_THROW(kv.Wait(kv.Push(big, wrong)), Error);
  });
}

// The KKT hook: keys the app's predicate drops never leave the worker; the rest arrive.
TEST_P(KVInprocTest, PushFilterDropsKeysOnTheWorker) {
  Job::Run(GetParam(), 2, 1, [&](Node* node, int rank) {
    KVWorker<int64_t> kv(node);
    SArray<Key> keys;
    for (int i = 0; i < 400; ++i) keys.push_back(HashKey(i));
    std::sort(keys.begin(), keys.end());
    SArray<int64_t> vals(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) vals[i] = static_cast<int64_t>(i % 7) - 3;
    // Drop entries inside the band |v| <= 1, like a zero weight with a small gradient under L1.
    kv.SetPushFilter(
        [](Key, const int64_t* v, int n) { return n == 1 && (v[0] > 1 || v[0] < -1); });
    kv.Wait(kv.Push(keys, vals));
    size_t dropped = 0;
    for (size_t i = 0; i < keys.size(); ++i) dropped += vals[i] >= -1 && vals[i] <= 1;
    EXPECT_EQ(kv.FilteredKeys(), dropped);
    kv.SetPushFilter(nullptr);
    SArray<int64_t> out;
    kv.Wait(kv.Pull(keys, &out));
    for (size_t i = 0; i < keys.size(); ++i) {
      const int64_t want = vals[i] >= -1 && vals[i] <= 1 ? 0 : vals[i];
      ASSERT_EQ(out[i], want) << "key " << i;
    }
    // Everything dropped: the push still completes.
    kv.SetPushFilter([](Key, const int64_t*, int) { return false; });
    kv.Wait(kv.Push(keys, vals));
  });
}

TEST_P(KVInprocTest, DenseRangePush) {
  Job::Run(GetParam(), 3, 1, [&](Node* node, int rank) {
    KVWorker<int64_t> kv(node);
    Range r(kMaxKey / 3, kMaxKey / 3 + 1000);
    SArray<int64_t> vals(2000);
    for (size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<int64_t>(i);
    kv.Wait(kv.PushRange(r, vals));
    SArray<Key> rk;
    SArray<int64_t> rv;
    SArray<int> rl;
    kv.Wait(kv.PullRange(r, &rk, &rv, &rl));
    ASSERT_EQ(rk.size(), 1000u);
    EXPECT_EQ(rk[999], r.begin + 999);
    EXPECT_EQ(rv.ToVector(), vals.ToVector());
    // A dense range of 600000 keys (4.8 MB) travels in several parts.
    Range big(kMaxKey / 2, kMaxKey / 2 + 600000);
    SArray<int64_t> bv(600000);
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<int64_t>(i) - 5;
    kv.Wait(kv.PushRange(big, bv));
    kv.Wait(kv.PullRange(big, &rk, &rv, &rl));
    ASSERT_EQ(rk.size(), bv.size());
    EXPECT_EQ(rk[12345], big.begin + 12345);
    EXPECT_EQ(rv.ToVector(), bv.ToVector());
  });
}

// n seeded keys, sorted and unique.
SArray<Key> SeededKeys(std::mt19937_64* rng, int n) {
  SArray<Key> keys;
  for (int i = 0; i < n; ++i) keys.push_back((*rng)());
  std::sort(keys.begin(), keys.end());
  keys.resize(std::unique(keys.begin(), keys.end()) - keys.begin());
  return keys;
}
// About n / 2 disjoint seeded ranges at random places, some wide, some holding nothing.
std::vector<Range> SeededRanges(std::mt19937_64* rng, int n) {
  std::vector<Key> cuts;
  for (int i = 0; i < n; ++i) cuts.push_back((*rng)());
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<Range> rs;
  for (size_t i = 0; i + 1 < cuts.size(); i += 2) rs.emplace_back(cuts[i], cuts[i + 1]);
  return rs;
}

// Many ranges in one pull (a sparse table's rows): every stored key of each, in key order,
// from every server whose segments they cross.
TEST_P(KVInprocTest, PullRangesReturnsTheKeysOfEveryRangeInOrder) {
  const uint64_t seed = 2026;
  Job::Run(GetParam(), 3, 1, [&](Node* node, int rank) {
    KVWorker<int64_t> kv(node);
    std::mt19937_64 rng(seed);
    const SArray<Key> keys = SeededKeys(&rng, 3000);
    SArray<int64_t> vals(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) vals[i] = static_cast<int64_t>(keys[i] % 1000);
    kv.Wait(kv.Push(keys, vals));
    const std::vector<Range> rs = SeededRanges(&rng, 400);
    std::vector<Key> want_keys;
    std::vector<int64_t> want_vals;
    for (size_t i = 0; i < keys.size(); ++i) {
      for (const Range& r : rs) {
        if (keys[i] >= r.begin && keys[i] < r.end) {
          want_keys.push_back(keys[i]);
          want_vals.push_back(vals[i]);
        }
      }
    }
    ASSERT_GT(want_keys.size(), 100u) << "seed " << seed;
    ASSERT_LT(want_keys.size(), keys.size()) << "seed " << seed;
    SArray<Key> rk;
    SArray<int64_t> rv;
    SArray<int> rl;
    kv.Wait(kv.PullRanges(rs, &rk, &rv, &rl));
    EXPECT_EQ(rk.ToVector(), want_keys) << "seed " << seed;
    EXPECT_EQ(rv.ToVector(), want_vals) << "seed " << seed;
    // Ranges out of order are refused, naming the one at fault.
    std::vector<Range> bad = {Range(100, 200), Range(150, 300)};
    try {
      kv.PullRanges(bad, &rk, &rv, &rl);
      ADD_FAILURE() << "overlapping ranges were accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("range 1"), std::string::npos) << e.what();
    }
  });
}

// What Reduce runs in the test below: keys, their values and a function of the key.
class CountSumReducer : public RangeReducer<int64_t> {
 public:
  int Width() const override { return 3; }
  void Add(Key key, const int64_t* vals, int n, double* acc) const override {
    acc[0] += 1;
    for (int i = 0; i < n; ++i) acc[1] += static_cast<double>(vals[i]);
    acc[2] += static_cast<double>(key % 7);
  }
};

// A reduction over many ranges equals the same function computed from the keys themselves,
// with the filters off and on; a reducer id the servers do not have is refused, naming it.
void CheckReduce(bool inproc, bool filters) {
  const uint64_t seed = 2027;
  Reducers<int64_t> reducers = {{1, std::make_shared<CountSumReducer>()}};
  auto tweak = [filters](Config* c) {
    if (!filters) return;
    c->compress = "auto";
    c->key_cache_mb = 4;
  };
  Job::Run(
      inproc, 3, 1,
      [&](Node* node, int rank) {
        KVWorker<int64_t> kv(node);
        std::mt19937_64 rng(seed);
        const SArray<Key> keys = SeededKeys(&rng, 3000);
        SArray<int64_t> vals(keys.size());
        for (size_t i = 0; i < keys.size(); ++i) vals[i] = static_cast<int64_t>(rng() % 1000) - 300;
        kv.Wait(kv.Push(keys, vals));
        const std::vector<Range> rs = SeededRanges(&rng, 400);
        std::vector<double> want(3, 0.0);
        for (size_t i = 0; i < keys.size(); ++i) {
          for (const Range& r : rs) {
            if (keys[i] >= r.begin && keys[i] < r.end) {
              want[0] += 1;
              want[1] += static_cast<double>(vals[i]);
              want[2] += static_cast<double>(keys[i] % 7);
            }
          }
        }
        ASSERT_GT(want[0], 100) << "seed " << seed;
        ASSERT_LT(want[0], keys.size()) << "seed " << seed;
        std::vector<double> got;
        kv.Wait(kv.Reduce(1, rs, &got));
        EXPECT_EQ(got, want) << "seed " << seed;
        // The whole key space: every key once.
        kv.Wait(kv.Reduce(1, {Range::All()}, &got));
        ASSERT_EQ(got.size(), 3u);
        EXPECT_EQ(got[0], static_cast<double>(keys.size())) << "seed " << seed;
        const int64_t ts = kv.Reduce(2, {Range::All()}, &got);
        try {
          kv.Wait(ts);
          ADD_FAILURE() << "a reducer the servers do not have was run";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("no reducer 2"), std::string::npos) << e.what();
        }
      },
      static_cast<int64_t*>(nullptr), tweak, nullptr, reducers);
}

TEST_P(KVInprocTest, ReduceAddsUpWhatEveryServerComputesOverItsKeys) {
  CheckReduce(GetParam(), false);
  CheckReduce(GetParam(), true);
}

// Per worker-server link, requests apply in the order issued: a pull issued right after a
// push (no Wait in between) sees the push.
TEST_P(KVInprocTest, PullIssuedAfterPushSeesIt) {
  Job::Run(GetParam(), 3, 1, [&](Node* node, int rank) {
    KVWorker<int64_t> kv(node);
    SArray<Key> keys;
    for (int i = 0; i < 500; ++i) keys.push_back(HashKey(i));
    std::sort(keys.begin(), keys.end());
    SArray<int64_t> ones(keys.size(), 1);
    for (int round = 1; round <= 20; ++round) {
      kv.Push(keys, ones);
      SArray<int64_t> out;
      kv.Wait(kv.Pull(keys, &out));
      for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(out[i], round) << "round " << round;
    }
  });
}

// A pre-sized output is filled in place, whether the reply comes in one part or many.
TEST_P(KVInprocTest, PullIntoPresizedOutput) {
  Job::Run(GetParam(), 1, 1, [&](Node* node, int rank) {
    KVWorker<int64_t> kv(node);
    for (size_t n : {1u, 1000u, 600000u}) {  // 600000 values need several 1 MB parts
      SArray<Key> keys(n);
      for (size_t i = 0; i < n; ++i) keys[i] = HashKey(n * 7 + i);
      std::sort(keys.begin(), keys.end());
      SArray<int64_t> vals(n);
      for (size_t i = 0; i < n; ++i) vals[i] = static_cast<int64_t>(i) * 3 - 7;
      kv.Wait(kv.Push(keys, vals));
      SArray<int64_t> out(n, -1);
      int64_t* before = out.data();
      kv.Wait(kv.Pull(keys, &out));
      ASSERT_EQ(out.size(), n);
      EXPECT_EQ(out.data(), before) << "filled in place";
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], vals[i]) << "n=" << n << " i=" << i;
    }
  });
}

template <typename V>
void RoundTrip(bool inproc) {
  Job::Run(
      inproc, 2, 2,
      [&](Node* node, int rank) {
        KVWorker<V> kv(node);
        SArray<Key> keys;
        for (int i = 0; i < 1000; ++i) keys.push_back(HashKey(i));
        std::sort(keys.begin(), keys.end());
        SArray<V> vals(2 * keys.size());
        for (size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<V>(i % 100) / 4;
        kv.Wait(kv.Push(keys, vals));
        node->Barrier(kWorkerGroup);
        SArray<V> out;
        kv.Wait(kv.Pull(keys, &out));
        ASSERT_EQ(out.size(), vals.size());
        for (size_t i = 0; i < vals.size(); ++i) ASSERT_EQ(out[i], vals[i] * 2) << i;
      },
      static_cast<V*>(nullptr));
}

TEST_P(KVInprocTest, EveryValueTypeRoundTrips) {
  RoundTrip<float>(GetParam());
  RoundTrip<double>(GetParam());
  RoundTrip<int32_t>(GetParam());
  RoundTrip<int64_t>(GetParam());
}

// Messages that pass the magic check but are otherwise random: every field and frame drawn
// at random. The server must refuse them without crashing or changing the store.
TEST(KVRobustnessTest, RandomWellFramedRequestsAreRefused) {
  const uint64_t seed = 77;
  Job::Run(false, 2, 1, [&](Node* node, int rank) {
    KVWorker<int64_t> kv(node);
    SArray<Key> keys;
    for (int i = 0; i < 300; ++i) keys.push_back(HashKey(i));
    std::sort(keys.begin(), keys.end());
    SArray<int64_t> ones(keys.size(), 1);
    kv.Wait(kv.Push(keys, ones));
    std::mt19937_64 rng(seed);
    const uint64_t before = node->stats().messages_received;
    int requests = 0;
    ZmqVan attacker;
    for (const auto& n : node->nodes()) {
      if (n.role == Role::kServer) attacker.Connect(n.id, n.host, n.port);
    }
    for (int i = 0; i < 3000; ++i) {
      Message m;
      m.meta.set_magic(kMagic);
      m.meta.set_sender(node->id());
      m.meta.set_receiver(1 + static_cast<int>(rng() % 2));
      m.meta.set_app_id(static_cast<int>(rng() % 2));
      m.meta.set_timestamp(1000000 + i);
      m.meta.set_request(rng() % 4 != 0);
      m.meta.set_push(rng() % 2);
      m.meta.set_pull(rng() % 2);
      m.meta.set_op(static_cast<pb::Meta::Op>(rng() % 3));
      m.meta.set_dtype(static_cast<int>(rng() % 4));
      m.meta.set_width(static_cast<int>(rng() % 3 == 0 ? rng() % (1u << 31) : rng() % 4));
      m.meta.set_has_lens(rng() % 2);
      m.meta.set_range_begin(rng());
      m.meta.set_range_end(rng() % 3 == 0 ? m.meta.range_begin() + rng() % 100 : rng());
      if (rng() % 4 == 0) {
        m.meta.set_val_total(rng() % 3 == 0 ? rng() : rng() % 100);
        m.meta.set_val_offset(rng() % 100);
        m.meta.set_val_count(rng() % 100);
      }
      int frames = static_cast<int>(rng() % 4);
      for (int f = 0; f < frames; ++f) {
        SArray<char> d(rng() % 3 == 0 ? rng() % 4000 : 8 * (rng() % 20));
        for (auto& c : d) c = static_cast<char>(rng());
        m.data.push_back(d);
      }
      // Requests for an app id no server serves are parked, not answered.
      requests += m.meta.request() && m.meta.app_id() == 0;
      attacker.Send(m);
    }
    // Every request gets an answer (an error), sent to the worker it claims to come from:
    // count them to know the servers handled all of them.
    for (int i = 0; i < 200 && node->stats().messages_received < before + requests; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(node->stats().messages_received, before + requests) << "seed " << seed;
    // The servers still answer, and the store holds exactly what the real pushes made
    // (random pushes may land on other keys; these keys are checked).
    SArray<int64_t> out;
    kv.Wait(kv.Pull(keys, &out));
    ASSERT_EQ(out.size(), keys.size()) << "seed " << seed;
    kv.Wait(kv.Push(keys, ones));
    kv.Wait(kv.Pull(keys, &out));
    for (size_t i = 0; i < keys.size(); ++i) {
      // Only a random push that hit one of these exact keys could change them; with random
      // 64-bit keys that does not happen.
      ASSERT_EQ(out[i], 2) << "seed " << seed;
    }
  });
}

// Back-pressure (issue 15, item 8): a worker that issues requests faster than the servers
// answer holds at most Config::max_inflight of them; the next call waits for one to complete.
// Half the messages are held back 30 ms here: without the bound all 40 are in flight.
TEST(KVBackPressureTest, AWorkerKeepsAtMostMaxInflightRequests) {
  std::atomic<size_t> widest{0};
  Job::Run(
      true, 2, 1,
      [&](Node* node, int) {
        KVWorker<int64_t> kv(node);
        std::vector<int64_t> issued;
        for (int i = 0; i < 40; ++i) {
          issued.push_back(kv.Push(SArray<Key>{HashKey(i)}, SArray<int64_t>{1}));
          size_t open = 0;
          for (int64_t ts : issued) open += !kv.IsDone(ts);
          widest = std::max<size_t>(widest, open);
        }
        for (int64_t ts : issued) kv.Wait(ts);
        SArray<int64_t> vals;
        SArray<Key> keys;
        for (int i = 0; i < 40; ++i) keys.push_back(HashKey(i));
        std::sort(keys.begin(), keys.end());
        kv.Wait(kv.Pull(keys, &vals));
        for (int64_t v : vals) ASSERT_EQ(v, 1);
      },
      static_cast<int64_t*>(nullptr),
      [](Config* c) {
        c->max_inflight = 3;
        c->fault_delay = 0.5;
        c->fault_delay_ms = 30;
      });
  EXPECT_LE(widest.load(), 3u);
  EXPECT_GE(widest.load(), 2u);  // the delay really kept requests in flight
}

INSTANTIATE_TEST_SUITE_P(Vans, KVInprocTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Inproc" : "ZeroMQ"; });

Config WithRole(Config c, Role role) {
  c.role = role;
  return c;
}

// A scheduler, one server and one worker, started (in process); `sc` changes the scheduler's
// configuration only.
struct Trio {
  std::unique_ptr<Node> scheduler, server, worker;
  explicit Trio(const Config& c, const std::function<void(Config*)>& sc = nullptr)
      : scheduler(std::make_unique<Node>([&] {
          Config s = WithRole(c, Role::kScheduler);
          if (sc) sc(&s);
          return s;
        }())),
        server(std::make_unique<Node>(WithRole(c, Role::kServer))),
        worker(std::make_unique<Node>(WithRole(c, Role::kWorker))) {
    std::thread ts([&] { scheduler->Start(); });
    std::thread tv([&] { server->Start(); });
    worker->Start();
    ts.join();
    tv.join();
  }
};

TEST(NodeTest, ANodeBeyondTheExpectedNumbersIsRejectedWithTheReason) {
  Config c;
  c.inproc = std::make_shared<InprocNetwork>();
  c.scheduler_port = 6;
  c.num_servers = 1;
  c.num_workers = 1;
  c.register_timeout_ms = 10000;
  Trio trio(c);
  auto extra = std::make_unique<Node>(WithRole(c, Role::kServer));
  try {
    extra->Start();
    FAIL() << "a second server must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PS_NUM_SERVERS"), std::string::npos) << e.what();
  }
}

TEST(NodeTest, LosingTheSchedulerFailsEveryWaitWithTheReason) {
  Config c;
  c.inproc = std::make_shared<InprocNetwork>();
  c.scheduler_port = 7;
  c.heartbeat_interval_ms = 50;
  c.heartbeat_timeout_ms = 300;
  c.exit_on_scheduler_loss = false;
  Trio trio(c);
  auto& scheduler = trio.scheduler;
  auto& server = trio.server;
  auto& worker = trio.worker;
  KVServer<int64_t> kvs(server.get());
  KVWorker<int64_t> kv(worker.get());
  kv.Wait(kv.Push(SArray<Key>(1, 5), SArray<int64_t>(1, 1)));
  // The server sits in Finalize, the worker in a barrier, when the scheduler vanishes.
  std::string server_error;
  std::thread fin([&] {
    try {
      server->Finalize();
    } catch (const Error& e) {
      server_error = e.what();
      EXPECT_EQ(e.code(), ErrorCode::kSchedulerLost) << e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  scheduler.reset();  // stops without a goodbye, like a killed process
  try {
    worker->Barrier(kWorkerGroup | kServerGroup);
    FAIL() << "the barrier cannot complete without the scheduler";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lost the scheduler"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("PS_HEARTBEAT_TIMEOUT_MS"), std::string::npos);
    EXPECT_EQ(e.code(), ErrorCode::kSchedulerLost) << ErrorCodeName(e.code());
  }
  fin.join();
  EXPECT_NE(server_error.find("lost the scheduler"), std::string::npos) << server_error;
  try {
    kv.Push(SArray<Key>(1, 5), SArray<int64_t>(1, 1));
    FAIL() << "a push after the scheduler is gone must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kSchedulerLost) << e.what();
  }
}

// A node takes the job's barrier policy and bounded delay from the scheduler's table, whatever
// its own environment said (a node that joins later must not run a policy of its own).
TEST(NodeTest, TheJobsConsistencyComesFromTheScheduler) {
  Config c;
  c.inproc = std::make_shared<InprocNetwork>();
  c.scheduler_port = 9;
  c.heartbeat_interval_ms = 30000;
  c.heartbeat_timeout_ms = 60000;
  Trio trio(c, [](Config* sc) {
    sc->consistency = "ssp:3";
    sc->max_delay = 2;
  });
  EXPECT_EQ(trio.worker->consistency_policy(), "ssp:3");
  EXPECT_EQ(trio.server->consistency_policy(), "ssp:3");
  EXPECT_EQ(trio.worker->max_delay(), 2);
  std::thread fs([&] { trio.scheduler->Finalize(); });
  std::thread fv([&] { trio.server->Finalize(); });
  trio.worker->Finalize();
  fs.join();
  fv.join();
}

// The end of the job waits for the slowest worker however long it trains: Finalize is not
// bounded by the barrier timeout (a job longer than PS_BARRIER_TIMEOUT_MS lost its scheduler
// and servers at their Finalize), while an ordinary barrier still is.
TEST(NodeTest, FinalizeWaitsForTheSlowestWorkerBeyondTheBarrierTimeout) {
  Config c;
  c.inproc = std::make_shared<InprocNetwork>();
  c.scheduler_port = 11;
  c.heartbeat_interval_ms = 50;
  c.heartbeat_timeout_ms = 2000;
  c.barrier_timeout_ms = 300;
  c.exit_on_scheduler_loss = false;
  Trio trio(c);
  KVServer<int64_t> kvs(trio.server.get());
  KVWorker<int64_t> kv(trio.worker.get());
  std::string scheduler_error, server_error;
  std::thread fs([&] {
    try {
      trio.scheduler->Finalize();
    } catch (const Error& e) {
      scheduler_error = e.what();
    }
  });
  std::thread fv([&] {
    try {
      trio.server->Finalize();
    } catch (const Error& e) {
      server_error = e.what();
    }
  });
  // Trains for several barrier timeouts while the others sit in Finalize.
  for (int i = 0; i < 12; ++i) {
    kv.Wait(kv.Push(SArray<Key>(1, 5), SArray<int64_t>(1, 1)));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  SArray<int64_t> vals;
  kv.Wait(kv.Pull(SArray<Key>(1, 5), &vals));
  ASSERT_EQ(vals.size(), 1u);
  EXPECT_EQ(vals[0], 12);
  // A barrier the server does not enter still times out, naming the timeout.
  try {
    trio.worker->Barrier(kWorkerGroup | kServerGroup);
    FAIL() << "the server never enters this barrier";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("PS_BARRIER_TIMEOUT_MS"), std::string::npos);
  }
  trio.worker->Finalize();
  fs.join();
  fv.join();
  EXPECT_EQ(scheduler_error, "");
  EXPECT_EQ(server_error, "");
}

TEST(NodeTest, RegistrationTimeoutNamesWhatIsMissing) {
  Config c;
  c.role = Role::kScheduler;
  c.num_servers = 2;
  c.inproc = std::make_shared<InprocNetwork>();
  c.scheduler_port = 5;
  c.register_timeout_ms = 200;
  Node node(c);
  try {
    node.Start();
    FAIL() << "Start should time out";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("0 of 2 servers"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("PS_REGISTER_TIMEOUT_MS"), std::string::npos);
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
  }
}

// Issue 19: a barrier held for long is never silent. The scheduler reports, every quarter of
// PS_BARRIER_TIMEOUT_MS (at most 5 s), who it waits for to the nodes in it, and the timeout's
// error names them (it said only "barrier 1 (groups 4) not released within ...").
TEST(BarrierDiagnosticsTest, AHeldBarrierNamesTheWorkersItWaitsFor) {
  std::atomic<bool> thrown{false};
  std::string message;
  Job::Run(
      true, 1, 2,
      [&](Node* node, int rank) {
        if (rank == 0) {
          try {
            node->Barrier(kWorkerGroup);
            ADD_FAILURE() << "the barrier was released without worker 1";
          } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::kTimeout);
            message = e.what();
          }
          thrown = true;
        } else {
          // Worker 1 stays out of the barrier until worker 0 gave up (or 30 s).
          for (int i = 0; i < 3000 && !thrown; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        }
      },
      static_cast<int64_t*>(nullptr), [](Config* c) { c->barrier_timeout_ms = 2000; });
  EXPECT_TRUE(thrown.load());
  EXPECT_NE(message.find("barrier 1 of the workers not released within 2000 ms"), std::string::npos)
      << message;
  EXPECT_NE(message.find("waiting for worker 1 (node "), std::string::npos) << message;
  EXPECT_NE(message.find("(1 of 2 arrived)"), std::string::npos) << message;
}

}  // namespace
}  // namespace ps
