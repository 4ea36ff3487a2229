// The window on copies (ChainReplicator::kWindowHops, kWindowBytes): a master keeps at most a
// window of unacknowledged copies on their way to a replica, so a replica that falls behind
// (stopped, swapping, a tenth of its speed) holds at most a window in its queues. Before the
// window a master sent every copy at once and a slowed replica's receive queue grew by 170 MB
// (fault.slow_server); the copies the transport dropped then left gaps that forced whole
// ranges to be fetched again. Two ServerCores over per-link FIFO queues that the test
// delivers by hand: the replica's link is held while the workers push.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>

#include "consistency/barrier_policy.h"
#include "kv/server_core.h"
#include "replication/chain_replicator.h"
#include "store/store.h"
#include "util/rng.h"

namespace ps {
namespace {

constexpr int kMaster = 1, kReplica = 2, kWorker = 100;

class Pair {
 public:
  Pair() : ring_(std::make_shared<Ring>(std::vector<int>{kMaster, kReplica}, 8, 1, 1)) {
    for (int id : {kMaster, kReplica}) {
      stores_[id] = std::make_shared<Store<int64_t>>(std::make_shared<SumRule<int64_t>>());
      servers_[id] = std::make_unique<ServerCore>(
          0, DataType::kInt64, stores_[id], ParsePolicy("asp"), 1, std::vector<int>{kWorker},
          [this, id](Message& m) {
            m.meta.set_sender(id);
            links_[{id, m.meta.receiver()}].push_back(m);
          },
          [this] { return now_us_; }, id, [this] { return ring_; });
      servers_[id]->SetReport([](const ServerCore::RefillReport&) {});
    }
  }

  // A push of `n` keys mastered by kMaster, each with value `val` and `width` values.
  void Push(int64_t ts, size_t n, size_t width, Rng* rng) {
    std::set<Key> keys;
    while (keys.size() < n) {
      const Key k = rng->Next();
      if (ring_->Owner(k) == kMaster) keys.insert(k);
    }
    Message m;
    m.meta.set_sender(kWorker);
    m.meta.set_receiver(kMaster);
    m.meta.set_timestamp(ts);
    m.meta.set_request(true);
    m.meta.set_push(true);
    m.meta.set_dtype(static_cast<int>(DataType::kInt64));
    m.meta.set_epoch(ring_->epoch());
    m.meta.set_width(static_cast<int>(width));
    SArray<Key> ks;
    SArray<int64_t> vs;
    for (Key k : keys) {
      ks.push_back(k);
      for (size_t j = 0; j < width; ++j) vs.push_back(ts + 1);
    }
    m.data = {SArray<char>(ks), SArray<char>(vs)};
    servers_[kMaster]->Process(m);
  }

  std::deque<Message>& link(int from, int to) { return links_[{from, to}]; }

  // Delivers everything between the servers until nothing moves; replies to the worker are
  // counted and dropped.
  void Drain() {
    for (bool moved = true; moved;) {
      moved = false;
      for (auto& l : links_) {
        while (!l.second.empty()) {
          Message m = std::move(l.second.front());
          l.second.pop_front();
          moved = true;
          if (l.first.second == kWorker) {
            EXPECT_EQ(m.meta.error(), "");
            replied_.insert(m.meta.timestamp());
          } else {
            servers_[l.first.second]->Process(m);
          }
        }
      }
    }
  }

  // Copies on the master's link to the replica, and their data bytes.
  std::pair<size_t, uint64_t> InFlight() {
    std::pair<size_t, uint64_t> n{0, 0};
    for (const auto& m : link(kMaster, kReplica)) {
      if (m.meta.replica()) {
        n.first++;
        n.second += m.DataBytes();
      }
    }
    return n;
  }

  ServerCore& server(int id) { return *servers_[id]; }
  StoreBase& store(int id) { return *stores_[id]; }
  size_t replied() const { return replied_.size(); }

 private:
  std::shared_ptr<const Ring> ring_;
  std::map<int, std::shared_ptr<StoreBase>> stores_;
  std::map<int, std::unique_ptr<ServerCore>> servers_;
  std::map<std::pair<int, int>, std::deque<Message>> links_;
  std::set<int64_t> replied_;
  int64_t now_us_ = 1;
};

// Both stores hold the same keys with the same values.
void ExpectIdentical(Pair* p) {
  SArray<Key> mk, rk;
  SArray<char> mv, rv;
  SArray<uint64_t> mz, rz;
  Key stop = kMaxKey;
  p->store(kMaster).ExportRange(Range(0, kMaxKey), &mk, &mv, &mz, ~0ull, &stop);
  stop = kMaxKey;
  p->store(kReplica).ExportRange(Range(0, kMaxKey), &rk, &rv, &rz, ~0ull, &stop);
  ASSERT_GT(mk.size(), 0u);
  ASSERT_EQ(mk.size(), rk.size());
  EXPECT_TRUE(std::equal(mk.begin(), mk.end(), rk.begin()));
  ASSERT_EQ(mv.size(), rv.size());
  EXPECT_EQ(0, std::memcmp(mv.data(), rv.data(), mv.size()));
}

void PushWhileTheReplicaSleeps(size_t pushes, size_t keys, size_t width, uint64_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  Pair p;
  size_t most_hops = 0;
  uint64_t most_bytes = 0;
  for (size_t ts = 0; ts < pushes; ++ts) {
    p.Push(static_cast<int64_t>(ts), keys, width, &rng);
    const auto f = p.InFlight();
    most_hops = std::max(most_hops, f.first);
    most_bytes = std::max(most_bytes, f.second);
  }
  const uint64_t copy_bytes = keys * (sizeof(Key) + width * sizeof(int64_t));
  // More was pushed than a window holds, so the bounds below are real ones, and the window
  // was used to the full.
  ASSERT_TRUE(pushes > ChainReplicator::kWindowHops ||
              pushes * copy_bytes > ChainReplicator::kWindowBytes);
  EXPECT_LE(most_hops, ChainReplicator::kWindowHops);
  EXPECT_LE(most_bytes, ChainReplicator::kWindowBytes);
  EXPECT_TRUE(most_hops == ChainReplicator::kWindowHops ||
              most_bytes + copy_bytes > ChainReplicator::kWindowBytes)
      << most_hops << " copies, " << most_bytes << " bytes";
  EXPECT_EQ(p.replied(), 0u) << "a push was acknowledged before its copy was applied";
  // The replica wakes up: every copy reaches it in order, every push is acknowledged.
  p.Drain();
  EXPECT_EQ(p.replied(), pushes);
  EXPECT_EQ(p.server(kMaster).CheckEntries(), "");
  EXPECT_EQ(p.server(kReplica).order_stats().refetched, 0u);
  ExpectIdentical(&p);
}

TEST(ChainWindowTest, ASleepingReplicaIsSentAtMostAWindowOfSmallCopies) {
  PushWhileTheReplicaSleeps(ChainReplicator::kWindowHops * 2 + 100, 4, 1, 11);
}

TEST(ChainWindowTest, ASleepingReplicaIsSentAtMostAWindowOfBytes) {
  // 64 KB copies: the byte bound binds long before the count.
  const size_t width = 64 * 1024 / sizeof(int64_t) / 8;
  const size_t pushes = 2 * ChainReplicator::kWindowBytes / (8 * width * sizeof(int64_t));
  ASSERT_LT(pushes, ChainReplicator::kWindowHops);
  PushWhileTheReplicaSleeps(pushes, 8, width, 12);
}

}  // namespace
}  // namespace ps
