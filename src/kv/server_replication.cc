// ServerCore's side of chain replication (src/replication/chain_replicator.h does the
// protocol): applying the copies it hands over, exactly once, and what it asks of this server
// (held and fetched ranges, a refetch, the requests that waited for a hand-over).
#include <glog/logging.h>

#include <algorithm>
#include <cstring>

#include "kv/server_core.h"

namespace ps {

void ServerCore::SetAggregation(int64_t window_us) {
  std::lock_guard<std::mutex> lk(mu);
  chain_.SetAggregation(window_us);
}

void ServerCore::Poll() {
  std::lock_guard<std::mutex> lk(mu);
  chain_.Poll();
}

std::string ServerCore::CheckEntries() const {
  std::lock_guard<std::mutex> lk(mu);
  return chain_.CheckEntries();
}

ServerCore::CopyStats ServerCore::copy_stats() const {
  std::lock_guard<std::mutex> lk(mu);
  CopyStats s = chain_.copy_stats();
  s.conflicts = conflicts_;
  return s;
}

ServerCore::OrderStats ServerCore::order_stats() const {
  std::lock_guard<std::mutex> lk(mu);
  return chain_.order_stats();
}

std::string ServerCore::DebugHeld() const {
  std::lock_guard<std::mutex> lk(mu);
  return chain_.DebugHeld();
}

bool ServerCore::ApplyCopy(const Message& msg, bool ordered) {
  const int origin = msg.meta.origin();
  log.Advance(origin, msg.meta.lwm());
  std::vector<Message> pieces;
  const bool fresh_all = FreshPart(origin, msg, &pieces, !ordered);
  std::vector<const Message*> apply;
  if (fresh_all) {
    apply.push_back(&msg);
  } else {
    for (const auto& p : pieces) apply.push_back(&p);
  }
  for (const Message* piece : apply) {
    Message scratch;
    std::string err = Handle(*piece, &scratch, true, false);
    if (!err.empty()) {
      LOG(ERROR) << "update copy from node " << msg.meta.sender() << " rejected: " << err;
      return false;
    }
    Record(origin, *piece);
  }
  return true;
}

bool ServerCore::Lacks(int worker, const Message& part) const {
  std::vector<Message> pieces;
  return FreshPart(worker, part, &pieces) || !pieces.empty();
}

RangeSet ServerCore::Fetching() const { return AskedBefore(next_fetch_); }

RangeSet ServerCore::AskedBefore(uint64_t mark) const {
  RangeSet rs;
  for (const auto& f : fetches_) {
    if (f.first >= mark) break;  // by id, which grows with each fetch asked for
    rs.insert(rs.end(), f.second.ranges.begin(), f.second.ranges.end());
  }
  return Normalize(std::move(rs));
}

void ServerCore::Refetch(const RangeSet& rs) {
  stale_ = Union(stale_, Intersect(held_, rs));
  held_ = Subtract(held_, rs);
  Plan();
}

bool ServerCore::ApplyAggregate(const Message& msg, bool ordered) {
  std::vector<Aggregator::Push> pushes;
  if (!Aggregator::Pushes(msg, &pushes)) {
    LOG(ERROR) << "malformed aggregate from node " << msg.meta.sender();
    return false;
  }
  // Decided key by key: a key whose state came with a range copy (a refill) holds every push
  // of the aggregate already, one still to be copied holds none. A key holding some of its
  // pushes but not all cannot take the sum; that would be a protocol error (a conflict).
  const SArray<Key> keys(msg.data[0]);
  const size_t n = keys.size();
  if (n == 0 || msg.data[1].size() % (n * esize)) {
    LOG(ERROR) << "malformed aggregate from node " << msg.meta.sender() << ": values frame";
    return false;
  }
  std::vector<uint32_t> total(n, 0), applied(n, 0);
  std::vector<bool> seen;
  for (const auto& p : pushes) {
    const bool below = !ordered && log.Below(p.worker, p.ts);
    if (!below) log.CheckKeys(p.worker, p.ts, p.keys.data(), p.keys.size(), &seen);
    if (p.keys.size() == n) {  // a push of every key of the aggregate (its keys are a subset)
      for (size_t i = 0; i < n; ++i) {
        total[i]++;
        if (below || seen[i]) applied[i]++;
      }
      continue;
    }
    size_t j = 0;
    for (size_t i = 0; i < p.keys.size(); ++i) {
      while (j < n && keys[j] < p.keys[i]) ++j;
      if (j == n || keys[j] != p.keys[i]) {
        LOG(ERROR) << "malformed aggregate from node " << msg.meta.sender() << ": a push key "
                   << "is not one of its keys";
        return false;
      }
      total[j]++;
      if (below || seen[i]) applied[j]++;
    }
  }
  const size_t row = msg.data[1].size() / n;
  size_t mixed = 0, fresh_keys = 0;
  for (size_t i = 0; i < n; ++i) {
    if (applied[i] == 0) {
      fresh_keys++;
    } else if (applied[i] < total[i]) {
      mixed++;
    }
  }
  // Usually no key holds any of the pushes: the aggregate's frames are applied as they came.
  SArray<Key> k2 = keys;
  SArray<char> v2 = msg.data[1];
  if (fresh_keys < n) {
    k2 = SArray<Key>(fresh_keys);
    v2 = SArray<char>::Uninitialized(fresh_keys * row);
    for (size_t i = 0, o = 0; i < n; ++i) {
      if (applied[i] != 0) continue;
      k2[o] = keys[i];
      std::memcpy(v2.data() + o * row, msg.data[1].data() + i * row, row);
      ++o;
    }
  }
  if (mixed > 0) {
    conflicts_++;
    LOG(ERROR) << "server " << self_ << ": aggregate from node " << msg.meta.sender() << " has "
               << mixed << " key(s) holding some of its pushes but not all; not applied";
    return false;
  }
  if (!k2.empty()) {
    Message plain;
    plain.meta = msg.meta;
    plain.meta.set_aggregate(false);
    plain.data = {SArray<char>(k2), v2};
    Message scratch;
    std::string err = Handle(plain, &scratch, true, false);
    if (!err.empty()) {
      LOG(ERROR) << "aggregate from node " << msg.meta.sender() << " rejected: " << err;
      return false;
    }
  }
  for (auto& p : pushes) {  // what is new of each push, now applied
    if (log.Below(p.worker, p.ts)) continue;
    const size_t hits = log.CheckKeys(p.worker, p.ts, p.keys.data(), p.keys.size(), &seen);
    if (hits == 0) {
      log.RecordKeys(p.worker, p.ts, p.keys);
    } else if (hits < p.keys.size()) {
      SArray<Key> fresh;
      for (size_t i = 0; i < p.keys.size(); ++i) {
        if (!seen[i]) fresh.push_back(p.keys[i]);
      }
      log.RecordKeys(p.worker, p.ts, fresh);
    }
  }
  return true;
}

}  // namespace ps
