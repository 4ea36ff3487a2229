// ServerCore, third part: replication after aggregation (batches of pushes summed per chain,
// applied whole or per key at replicas) and the consistency check of the copies a request
// waits for. The request path is server_core.cc, range hand-off server_refill.cc.
#include <glog/logging.h>

#include <algorithm>

#include "kv/server_core.h"

namespace ps {

void ServerCore::SetAggregation(int64_t window_us) {
  std::lock_guard<std::mutex> lk(mu);
  window_us_ = window_us;
  if (window_us > 0 && !agg_) agg_ = std::make_unique<Aggregator>(dtype);
  if (window_us <= 0 && agg_) {
    FlushBatches();
    agg_.reset();
  }
}

void ServerCore::Poll() {
  std::lock_guard<std::mutex> lk(mu);
  if (agg_ && !agg_->empty() && now_us() - batch_since_us_ >= window_us_) FlushBatches();
}

void ServerCore::FlushBatches() {
  if (!agg_ || agg_->empty()) return;
  for (auto& c : agg_->Take()) {
    // The entries' counts already include this copy (one per batch they are in): SendHop
    // counts it again, so take that back.
    for (uint64_t e : c.entries) entries_[e].open--;
    SendHop(c.entries, ChainPiece{c.path, std::move(c.msg)});
  }
}

std::string ServerCore::CheckEntries() const {
  std::lock_guard<std::mutex> lk(mu);
  std::unordered_map<uint64_t, size_t> refs;
  if (agg_) agg_->CountEntries(&refs);
  for (const auto& h : hops_) {
    for (uint64_t x : h.second.entries) refs[x]++;
  }
  for (const auto& e : entries_) {
    if (refs[e.first] != e.second.open) {
      return "server " + std::to_string(self_) + ": request (worker " +
             std::to_string(e.second.worker) + ", ts " + std::to_string(e.second.ts) +
             ") waits for " + std::to_string(e.second.open) + " copies but " +
             std::to_string(refs[e.first]) + " are on their way";
    }
  }
  return "";
}

ServerCore::CopyStats ServerCore::copy_stats() const {
  std::lock_guard<std::mutex> lk(mu);
  return copy_stats_;
}

bool ServerCore::ApplyAggregate(const Message& msg) {
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
    const bool below = log.Below(p.worker, p.ts);
    if (!below) log.CheckKeys(p.worker, p.ts, p.keys.data(), p.keys.size(), &seen);
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
  SArray<Key> k2;
  SArray<char> v2;
  size_t mixed = 0;
  for (size_t i = 0; i < n; ++i) {
    if (applied[i] == 0) {
      k2.push_back(keys[i]);
      v2.append(msg.data[1].Segment(i * row, (i + 1) * row));
    } else if (applied[i] < total[i]) {
      mixed++;
    }
  }
  if (mixed > 0) {
    copy_stats_.conflicts++;
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
