// Servers (ServerCore) over per-link FIFO queues that a test delivers by hand, for the tests
// of chain replication and of moving ranges between servers (chain_window_test.cc,
// server_refill_test.cc).
#ifndef PS_TESTS_UNIT_SERVER_PAIR_H_
#define PS_TESTS_UNIT_SERVER_PAIR_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "consistency/barrier_policy.h"
#include "kv/server_core.h"
#include "store/store.h"
#include "util/rng.h"

namespace ps {
namespace test {

constexpr int kMaster = 1, kReplica = 2, kWorker = 100;

// Servers 1..n (kMaster, kReplica, ...) with n - 1 replicas: every key's chain holds all.
class Pair {
 public:
  explicit Pair(int n = 2) : Pair(n, std::make_shared<Ring>(Ids(n), 8, n - 1, 1)) {}
  // Servers 1..n under `ring`, which may leave some out (servers that join later).
  Pair(int n, std::shared_ptr<const Ring> ring) : ring_(std::move(ring)) {
    // Each server follows ring_, the ring in force (Fail changes it).
    for (int id : Ids(n)) {
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

  // A push of one key with value ts + 1.
  void PushKey(int64_t ts, Key k) {
    Message m;
    m.meta.set_sender(kWorker);
    m.meta.set_receiver(ring_->Owner(k));
    m.meta.set_timestamp(ts);
    m.meta.set_request(true);
    m.meta.set_push(true);
    m.meta.set_dtype(static_cast<int>(DataType::kInt64));
    m.meta.set_epoch(ring_->epoch());
    m.meta.set_width(1);
    m.data = {SArray<char>(SArray<Key>{k}), SArray<char>(SArray<int64_t>{ts + 1})};
    servers_[m.meta.receiver()]->Process(m);
  }

  // A new ring in force at the live servers (the scheduler's failover after `dead` died):
  // what waits on the dead server's links is lost with it.
  void Fail(int dead, std::shared_ptr<const Ring> ring) {
    Kill(dead);
    Cut(std::move(ring));
  }
  // The scheduler's RING (a cut-over, or a failover) at every live server.
  void Cut(std::shared_ptr<const Ring> ring) {
    ring_ = std::move(ring);
    for (auto& s : servers_) {
      if (!dead_.count(s.first)) s.second->RingChanged(ring_);
    }
  }
  // The scheduler's RING at one server only (the others still follow the ring before).
  void CutAt(int id, std::shared_ptr<const Ring> ring) {
    ring_ = std::move(ring);
    servers_[id]->RingChanged(ring_);
  }
  // A server (or a node that never ran) is gone: nothing reaches it any more.
  void Kill(int id) {
    dead_.insert(id);
    for (auto& l : links_) {
      if (l.first.first == id || l.first.second == id) l.second.clear();
    }
  }
  // The scheduler's RING_PREPARE (null: the preparation is dropped) at every live server.
  void Prepare(std::shared_ptr<const Ring> next) {
    for (auto& s : servers_) {
      if (!dead_.count(s.first)) s.second->Prepare(next);
    }
  }
  // Time passes in steps of `step` us; every live server's timer runs at each.
  void Run(int64_t us, int64_t step) {
    for (int64_t t = 0; t < us; t += step) {
      now_us_ += step;
      for (auto& s : servers_) {
        if (!dead_.count(s.first)) s.second->Tick();
      }
      Drain();
    }
  }

  std::deque<Message>& link(int from, int to) { return links_[{from, to}]; }
  // Delivers what waits on one link (not what that sends on).
  void Deliver(int from, int to) {
    std::deque<Message> q;
    q.swap(links_[{from, to}]);
    for (auto& m : q) servers_[to]->Process(m);
  }
  void Advance(int64_t us) { now_us_ += us; }
  const Ring& ring() const { return *ring_; }

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
          if (dead_.count(l.first.second)) continue;
          if (l.first.second == kWorker) {
            EXPECT_EQ(m.meta.error(), "");
            replied_.insert(m.meta.timestamp());
            repliers_[m.meta.timestamp()].push_back(l.first.first);
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
  // The servers that answered the worker's request ts, one entry per reply.
  std::vector<int> repliers(int64_t ts) const {
    auto it = repliers_.find(ts);
    return it == repliers_.end() ? std::vector<int>{} : it->second;
  }

 private:
  std::shared_ptr<const Ring> ring_;
  std::map<int, std::shared_ptr<StoreBase>> stores_;
  std::map<int, std::unique_ptr<ServerCore>> servers_;
  std::map<std::pair<int, int>, std::deque<Message>> links_;
  std::set<int64_t> replied_;
  std::map<int64_t, std::vector<int>> repliers_;
  std::set<int> dead_;
  int64_t now_us_ = 1;

  static std::vector<int> Ids(int n) {
    std::vector<int> ids;
    for (int i = 1; i <= n; ++i) ids.push_back(i);
    return ids;
  }
};

inline int64_t ValueAt(Pair* p, int server, Key k) {
  SArray<char> v;
  SArray<int> len;
  p->store(server).Pull(&k, 1, 1, &v, &len);
  return SArray<int64_t>(v)[0];
}

// The first key (of HashKey(1), HashKey(2), ...) for which ok holds; 0 if none of 200000 does.
inline Key FirstKey(const std::function<bool(Key)>& ok) {
  for (Key i = 1; i < 200000; ++i) {
    if (ok(HashKey(i))) return HashKey(i);
  }
  return 0;
}

// Whether `id` is in the chain of k under `r`.
inline bool HoldsKey(const Ring& r, int id, Key k) {
  const auto c = r.Chain(r.SegmentOf(k));
  return std::find(c.begin(), c.end(), id) != c.end();
}

}  // namespace test
}  // namespace ps

#endif  // PS_TESTS_UNIT_SERVER_PAIR_H_
