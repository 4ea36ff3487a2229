// The barrier policies and bounded delay through the real node runtime: scheduler, servers and
// workers as Node objects in one process over the in-process van.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "ps/ps.h"
#include "util/rng.h"

namespace ps {
namespace {

struct Cluster {
  std::shared_ptr<InprocNetwork> net = std::make_shared<InprocNetwork>();
  Config base;
  std::deque<std::thread> threads;  // a deque: workers may be added while Run joins
  std::mutex mu;
  std::exception_ptr failure;
  std::vector<KVServer<int64_t>::BarrierStats> server_stats;
  // Runs on each server after its KVServer exists; returning false stops the node without
  // Finalize (a dead server).
  std::function<bool(Node*, KVServer<int64_t>*)> server_body;
  std::shared_ptr<const UpdateRule<int64_t>> rule = std::make_shared<SumRule<int64_t>>();
  // Runs on worker w after its KVWorker is gone (before Finalize).
  std::function<void(Node*, int)> after_worker;

  Cluster(int S, int W, const std::string& policy) {
    static int port = 9100;
    base.inproc = net;
    base.scheduler_port = port++;
    base.num_servers = S;
    base.num_workers = W;
    base.vnodes = 8;
    base.consistency = policy;
    base.register_timeout_ms = 20000;
    base.request_timeout_ms = 20000;
    base.barrier_timeout_ms = 20000;
    base.heartbeat_interval_ms = 50;
    base.heartbeat_timeout_ms = 1000;
    base.exit_on_scheduler_loss = false;  // many nodes share this process
  }
  template <typename F>
  void Spawn(F fn) {
    std::lock_guard<std::mutex> lk(mu);
    threads.emplace_back([this, fn] {
      try {
        fn();
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu);
        failure = std::current_exception();
      }
    });
  }
  // Starts scheduler and servers; body(node, kv, rank) runs on each worker, which finalizes
  // unless body returns false (then it just stops, like a process that died).
  template <typename Body>
  void Run(Body body) {
    Spawn([this] {
      Config c = base;
      c.role = Role::kScheduler;
      Node n(c);
      n.Start();
      n.Finalize();
    });
    for (int s = 0; s < base.num_servers; ++s) {
      Spawn([this] {
        Config c = base;
        c.role = Role::kServer;
        Node n(c);
        n.Start();
        KVServer<int64_t> server(&n, 0, rule);
        if (server_body && !server_body(&n, &server)) return;
        n.Finalize();
        std::lock_guard<std::mutex> lk(mu);
        server_stats.push_back(server.barrier_stats());
      });
    }
    for (int w = 0; w < base.num_workers; ++w) {
      Spawn([this, w, body] {
        Config c = base;
        c.role = Role::kWorker;
        c.rank_hint = w;
        Node n(c);
        n.Start();
        bool finalize;
        {
          KVWorker<int64_t> kv(&n);
          finalize = body(&n, &kv, n.rank());
        }
        if (after_worker) after_worker(&n, n.rank());
        if (finalize) n.Finalize();
      });
    }
    for (size_t i = 0;; ++i) {
      std::thread* t;
      {
        std::lock_guard<std::mutex> lk(mu);
        if (i == threads.size()) break;
        t = &threads[i];
      }
      t->join();
    }
    if (failure) std::rethrow_exception(failure);
  }
  // Starts one more worker that joins the running job (Config::join).
  template <typename Body>
  void Join(Body body) {
    Spawn([this, body] {
      Config c = base;
      c.role = Role::kWorker;
      c.join = true;
      Node n(c);
      n.Start();
      {
        KVWorker<int64_t> kv(&n);
        body(&n, &kv, n.rank());
      }
      n.Finalize();
    });
  }
};

// Worker w owns key w * 2^60 (spread over servers) and adds 1 to it once per step.
SArray<Key> AllKeys(int W) {
  SArray<Key> keys(W);
  for (int w = 0; w < W; ++w) keys[w] = static_cast<Key>(w) << 60;
  return keys;
}

TEST(ConsistencyRuntimeTest, SspPullSeesEveryUpdateOlderThanSAndStragglerHoldsOthersBack) {
  const int W = 4, steps = 12;
  const int64_t s = 2;
  const uint64_t seed = 77;
  Cluster c(2, W, "ssp:2");
  std::atomic<int64_t> max_ahead{0};
  c.Run([&](Node*, KVWorker<int64_t>* kv, int rank) {
    Rng rng(seed + rank);
    SArray<Key> keys = AllKeys(W);
    for (int64_t t = 0; t < steps; ++t) {
      SArray<int64_t> vals;
      kv->Wait(kv->Pull(keys, &vals));
      // What the pull says it read: a clock no worker was behind, at most s steps stale.
      const int64_t read = kv->barrier_stats().read_clock;
      EXPECT_LE(read, t) << "seed " << seed;
      EXPECT_GE(read, t - s) << "seed " << seed << ": worker " << rank << " at step " << t;
      int64_t slowest = INT64_MAX;
      for (int v = 0; v < W; ++v) {
        EXPECT_GE(vals[v], t - s) << "seed " << seed << ": worker " << rank << " at step " << t
                                  << " misses updates of worker " << v;
        EXPECT_GE(vals[v], read) << "seed " << seed << ": the pull read clock " << read
                                 << " but misses steps of worker " << v;
        slowest = std::min(slowest, vals[v]);
      }
      int64_t ahead = t - slowest;
      int64_t prev = max_ahead.load();
      while (ahead > prev && !max_ahead.compare_exchange_weak(prev, ahead)) {
      }
      // Worker 3 straggles.
      std::this_thread::sleep_for(std::chrono::microseconds(rank == 3 ? 3000 : rng.Below(300)));
      SArray<Key> mine(1, keys[rank]);
      kv->Push(mine, SArray<int64_t>(1, 1));
      kv->Clock();
    }
    return true;
  });
  EXPECT_LE(max_ahead.load(), s);
  EXPECT_EQ(max_ahead.load(), s) << "the straggler never held anyone back: the test is vacuous";
  uint64_t deferred = 0;
  for (const auto& st : c.server_stats) {
    EXPECT_EQ(st.policy, "ssp:2");
    deferred += st.deferred;
    for (const auto& e : st.staleness) EXPECT_LE(e.first, s) << "staleness beyond s";
  }
  EXPECT_GT(deferred, 0u);
}

TEST(ConsistencyRuntimeTest, PolicyAndDelayChangeAtRunTimeEverywhere) {
  const int W = 2;
  Cluster c(2, W, "bsp");
  c.Run([&](Node* node, KVWorker<int64_t>* kv, int rank) {
    SArray<Key> keys = AllKeys(W);
    SArray<int64_t> vals;
    if (rank == 0) {
      // Under BSP, a pull of step 3 cannot pass while worker 1 sits at step 0.
      for (int i = 0; i < 3; ++i) kv->Clock();
      int64_t ts = kv->Pull(keys, &vals);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      EXPECT_FALSE(kv->IsDone(ts));
      node->SetConsistency("asp", 5);
      kv->Wait(ts);  // released by the policy change
      for (int i = 0; i < 100 && kv->max_delay() != 5; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      EXPECT_EQ(kv->max_delay(), 5);
      EXPECT_EQ(node->consistency_policy(), "asp");
    } else {
      for (int i = 0; i < 200 && kv->max_delay() != 5; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      EXPECT_EQ(kv->max_delay(), 5);
    }
    return true;
  });
  for (const auto& st : c.server_stats) EXPECT_EQ(st.policy, "asp");
}

TEST(ConsistencyRuntimeTest, DeadWorkerUnderBspDoesNotHangTheOthers) {
  const int W = 3, steps = 6;
  Cluster c(2, W, "bsp");
  std::atomic<int> finished{0};
  c.Run([&](Node* node, KVWorker<int64_t>* kv, int rank) {
    SArray<Key> keys = AllKeys(W);
    for (int t = 0; t < steps; ++t) {
      if (rank == 2 && t == 2) return false;  // dies: no more heartbeats, no Finalize
      SArray<int64_t> vals;
      kv->Wait(kv->Pull(keys, &vals));
      kv->Wait(kv->Push(SArray<Key>(1, keys[rank]), SArray<int64_t>(1, 1)));
      kv->Clock();
    }
    // The survivors got past step 2, which needed the dead worker to be removed.
    EXPECT_EQ(node->dead_nodes().size(), 1u);
    finished++;
    return true;
  });
  EXPECT_EQ(finished.load(), 2);
  for (const auto& st : c.server_stats) EXPECT_EQ(st.steps.size(), 2u);
}

TEST(ConsistencyRuntimeTest, JoiningWorkerEntersAtTheMinimumStepAndIsWaitedFor) {
  const int W = 2, steps = 12, join_at = 4;
  Cluster c(2, W, "bsp");
  std::atomic<int64_t> joiner_first_step{-1};
  std::atomic<int> joiner_rank{-1};
  auto loop = [&](Node*, KVWorker<int64_t>* kv, int rank, int64_t until) {
    SArray<Key> keys = AllKeys(W + 1);
    while (kv->step() < until) {
      SArray<int64_t> vals;
      kv->Wait(kv->Pull(keys, &vals));
      const int64_t t = kv->step();
      if (rank == W && joiner_first_step < 0) joiner_first_step = t;
      // Lockstep among the original workers, and the joiner holds them back once it is in.
      for (int v = 0; v < W; ++v) EXPECT_GE(vals[v], t) << "worker " << rank << " step " << t;
      kv->Wait(kv->Push(SArray<Key>(1, keys[rank]), SArray<int64_t>(1, 1)));
      kv->Clock();
    }
  };
  c.Run([&](Node* node, KVWorker<int64_t>* kv, int rank) {
    loop(node, kv, rank, join_at);
    if (rank == 0) {
      c.Join([&](Node* jn, KVWorker<int64_t>* jkv, int jrank) {
        joiner_rank = jrank;
        loop(jn, jkv, jrank, steps);
      });
    }
    loop(node, kv, rank, steps);
    return true;
  });
  EXPECT_EQ(joiner_rank.load(), W);  // the next rank
  EXPECT_GE(joiner_first_step.load(), join_at - 1);
  EXPECT_LE(joiner_first_step.load(), join_at + 1);
  for (const auto& st : c.server_stats) EXPECT_EQ(st.steps.size(), 3u);
}

TEST(ConsistencyRuntimeTest, BoundedDelayZeroMakesClockWaitForTheStep) {
  Cluster c(1, 1, "asp");
  c.base.max_delay = 0;
  c.Run([&](Node*, KVWorker<int64_t>* kv, int) {
    SArray<Key> keys = AllKeys(1);
    for (int t = 0; t < 5; ++t) {
      int64_t ts = kv->Push(keys, SArray<int64_t>(1, 1));
      kv->Clock();
      EXPECT_TRUE(kv->IsDone(ts)) << "tau = 0 is sequential";
    }
    EXPECT_EQ(kv->step(), 5);
    return true;
  });
}

// A worker whose last request is a Clock with no push open (it pushed nothing in that step,
// or everything was acknowledged) must count that step as done on the servers: another
// worker's read of the next step waits for exactly that. The clock used to report the step it
// started (the step it ended only when it had waited for pushes), so the other read hung.
TEST(ConsistencyRuntimeTest, AClockWithoutOpenPushesCountsTheStepItEnds) {
  Cluster c(1, 2, "bsp");
  c.Run([&](Node* node, KVWorker<int64_t>* kv, int rank) {
    SArray<Key> keys = AllKeys(1);
    if (rank == 0) {
      kv->Wait(kv->Clock());  // step 0 done, nothing else sent
      node->Barrier(kWorkerGroup);
    } else {
      kv->Wait(kv->Push(keys, SArray<int64_t>(1, 1)));
      kv->Clock();
      SArray<int64_t> v;
      kv->Wait(kv->Pull(keys, &v));  // step 1: passes once worker 0 has done step 0
      EXPECT_EQ(v[0], 1);
      node->Barrier(kWorkerGroup);
    }
    return true;
  });
}

// A sum whose pushes take 200 ms to apply: their acknowledgements come late.
class SlowSumRule : public SumRule<int64_t> {
 public:
  bool Elementwise() const override { return false; }  // no fast path around Apply
  bool Additive() const override { return false; }
  void Apply(Key key, const int64_t* pushed, int64_t* val, int64_t* state, int n) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    SumRule<int64_t>::Apply(key, pushed, val, state, n);
  }
};

// A worker ends a step and lets its KVWorker go at once, the step's push not acknowledged yet:
// the clock, held until that push is acknowledged, still reaches the servers, so worker 0's
// read of the next step under BSP passes while worker 1 lives on. (Dropped with the KVWorker,
// it left that read waiting until the request timeout.)
TEST(ConsistencyRuntimeTest, AClockHeldWhenItsWorkerGoesStillReachesTheServers) {
  Cluster c(1, 2, "bsp");
  c.base.barrier_timeout_ms = 5000;
  c.base.request_timeout_ms = 5000;
  c.rule = std::make_shared<SlowSumRule>();
  std::mutex mu;
  std::condition_variable cv;
  bool read = false;
  c.after_worker = [&](Node*, int rank) {
    if (rank != 1) return;
    std::unique_lock<std::mutex> lk(mu);
    cv.wait_for(lk, std::chrono::seconds(8), [&] { return read; });
  };
  c.Run([&](Node*, KVWorker<int64_t>* kv, int rank) {
    SArray<Key> keys = AllKeys(1);
    kv->Push(keys, SArray<int64_t>(1, 1));
    kv->Clock();
    if (rank == 1) return true;  // its KVWorker goes now, the clock still held
    SArray<int64_t> v;
    kv->Wait(kv->Pull(keys, &v));  // step 1: needs worker 1's step 0
    EXPECT_EQ(v[0], 2);
    std::lock_guard<std::mutex> lk(mu);
    read = true;
    cv.notify_all();
    return true;
  });
}

// Issue 19: a pull held by the barrier until its Wait times out names the workers it waits
// for: the server tells the puller why every 5 s (before, the error named only the server).
TEST(ConsistencyRuntimeTest, AHeldPullThatTimesOutNamesTheWorkersBehindIt) {
  Cluster c(1, 2, "bsp");
  c.base.barrier_timeout_ms = 6500;  // past the server's first word at 5 s
  c.base.request_timeout_ms = 6500;
  std::mutex mu;
  std::condition_variable cv;
  bool timed_out = false;
  std::string error;
  int lagging = -1;
  c.Run([&](Node* node, KVWorker<int64_t>* kv, int rank) {
    SArray<Key> keys = AllKeys(1);
    if (rank == 1) {
      // Stays at step 0 until worker 0 has given up.
      {
        std::lock_guard<std::mutex> lk(mu);
        lagging = node->id();
      }
      std::unique_lock<std::mutex> lk(mu);
      cv.wait_for(lk, std::chrono::seconds(20), [&] { return timed_out; });
      return true;
    }
    kv->Wait(kv->Push(keys, SArray<int64_t>(1, 1)));
    kv->Clock();
    SArray<int64_t> v;
    try {
      kv->Wait(kv->Pull(keys, &v));  // step 1 under BSP: waits for worker 1's step 0
    } catch (const Error& e) {
      error = e.what();
    }
    std::lock_guard<std::mutex> lk(mu);
    timed_out = true;
    cv.notify_all();
    return true;
  });
  EXPECT_NE(error.find("not answered within 6500 ms"), std::string::npos) << error;
  EXPECT_NE(error.find("the pull was held by the barrier: server node "), std::string::npos)
      << error;
  EXPECT_NE(
      error.find("under bsp; behind it: worker node " + std::to_string(lagging) + " at step 0"),
      std::string::npos)
      << error;
}

}  // namespace
}  // namespace ps

namespace ps {
namespace {

// A server dies (its node stops without a word) after pushes were acknowledged: its replicas
// take over and every sum stays exact; pushes in flight at the moment are resent to them.
TEST(FailoverTest, ReplicasTakeOverTheRangesOfADeadServer) {
  const uint64_t seed = 31;
  Cluster c(3, 1, "asp");
  c.base.replicas = 1;
  std::atomic<bool> kill{false}, killed{false};
  // Servers: rank 1 dies when told to.
  c.base.heartbeat_interval_ms = 50;
  c.base.heartbeat_timeout_ms = 500;
  std::vector<Key> keys;
  Rng rng(seed);
  for (int i = 0; i < 3000; ++i) keys.push_back(HashKey(rng.Next()) % (kMaxKey - 1));
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  const SArray<Key> K(keys);
  c.server_body = [&](Node* n, KVServer<int64_t>*) {
    if (n->rank() != 1) return true;
    while (!kill) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    killed = true;
    return false;  // stop without Finalize, like a killed process
  };
  c.Run([&](Node* node, KVWorker<int64_t>* kv, int) {
    std::vector<int64_t> ref(keys.size(), 0);
    for (int round = 0; round < 30; ++round) {
      SArray<int64_t> v(keys.size());
      for (size_t i = 0; i < keys.size(); ++i) {
        v[i] = static_cast<int64_t>(rng.Below(1000)) - 300;
        ref[i] += v[i];
      }
      if (round == 10) kill = true;
      kv->Wait(kv->Push(K, v));
    }
    for (int i = 0; i < 1000 && node->ring_epoch() < 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(node->ring_epoch(), 2u) << "the dead server was never replaced";
    SArray<int64_t> got;
    kv->Wait(kv->Pull(K, &got));
    size_t wrong = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (got[i] != ref[i] && wrong++ < 5) {
        ADD_FAILURE() << "seed " << seed << " key " << keys[i] << ": " << got[i] << " want "
                      << ref[i];
      }
    }
    EXPECT_EQ(wrong, 0u);
    return true;
  });
  EXPECT_TRUE(killed.load());
}

}  // namespace
}  // namespace ps
