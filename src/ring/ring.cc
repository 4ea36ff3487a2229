#include "ring/ring.h"

#include <algorithm>
#include <utility>

#include "util/sorted_keys.h"

namespace ps {

Key Ring::Position(int server, int v) {
  Key p =
      HashKey((static_cast<uint64_t>(server) << 32) ^ static_cast<uint32_t>(v) ^ 0x7073726e67ULL);
  return p == kMaxKey ? kMaxKey - 1 : p;
}

Ring::Ring(std::vector<int> server_ids, int vnodes, int replicas, uint64_t epoch,
           uint64_t cut_epoch, uint64_t base_epoch)
    : servers_(std::move(server_ids)),
      vnodes_(vnodes),
      replicas_(replicas),
      epoch_(epoch),
      cut_epoch_(cut_epoch),
      base_epoch_(base_epoch) {
  std::vector<std::pair<Key, int>> pos;
  pos.reserve(servers_.size() * vnodes);
  for (int s : servers_) {
    for (int v = 0; v < vnodes; ++v) pos.emplace_back(Position(s, v), s);
  }
  // Ties (astronomically rare) are broken by server id so every node builds the same ring.
  std::sort(pos.begin(), pos.end());
  pos.erase(std::unique(pos.begin(), pos.end(),
                        [](const auto& a, const auto& b) { return a.first == b.first; }),
            pos.end());
  if (pos.empty()) return;
  auto add = [this](Key b, Key e, int s) {
    if (b >= e) return;
    if (!segments_.empty() && segments_.back().server == s) {
      segments_.back().range.end = e;
    } else {
      segments_.push_back(RingSegment{Range(b, e), s});
    }
  };
  add(0, pos[0].first, pos.back().second);  // wrap-around part of the last position
  for (size_t i = 0; i < pos.size(); ++i) {
    Key end = i + 1 < pos.size() ? pos[i + 1].first : kMaxKey;
    add(pos[i].first, end, pos[i].second);
  }
  for (size_t i = 0; i < segments_.size(); ++i) segments_of_[segments_[i].server].push_back(i);
}

size_t Ring::SegmentOf(Key k) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), k,
                             [](Key key, const RingSegment& s) { return key < s.range.begin; });
  return static_cast<size_t>(it - segments_.begin()) - 1;
}

std::vector<int> Ring::Chain(size_t segment) const {
  std::vector<int> chain;
  if (segments_.empty()) return chain;
  const size_t want = std::min<size_t>(replicas_ + 1, servers_.size());
  // A key belongs to the closest position at or before it, so when a server leaves, its
  // segments go to the owners of the segments before them: the chain walks backwards, and
  // its first replica is exactly the server that inherits the range.
  const size_t n = segments_.size();
  for (size_t i = 0; i < n && chain.size() < want; ++i) {
    int s = segments_[(segment + n - i) % n].server;
    if (std::find(chain.begin(), chain.end(), s) == chain.end()) chain.push_back(s);
  }
  return chain;
}

std::vector<size_t> Ring::SegmentsHeldBy(int server) const {
  std::vector<size_t> out;
  const size_t n = segments_.size();
  if (n == 0) return out;
  const size_t want = std::min<size_t>(replicas_ + 1, servers_.size());
  std::vector<int> seen;  // distinct owners of the segments after the server's own
  auto own = segments_of_.find(server);
  if (own == segments_of_.end()) return out;
  for (size_t j : own->second) {
    out.push_back(j);
    // Chain(i) walks back from i: the server is in it while the segments after j up to i have
    // fewer than `want` distinct owners (none of them the server: its next segment starts a
    // walk of its own).
    seen.clear();
    for (size_t d = 1; d < n; ++d) {
      const size_t i = (j + d) % n;
      const int s = segments_[i].server;
      if (s == server) break;
      if (std::find(seen.begin(), seen.end(), s) == seen.end()) seen.push_back(s);
      if (seen.size() >= want) break;
      out.push_back(i);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Range> Ring::RangesOf(int server) const {
  std::vector<Range> out;
  auto own = segments_of_.find(server);
  if (own == segments_of_.end()) return out;
  out.reserve(own->second.size());
  for (size_t i : own->second) out.push_back(segments_[i].range);
  return out;
}

void Ring::SliceKeys(const Key* keys, size_t n, std::vector<KeySlice>* out, size_t* steps) const {
  out->clear();
  size_t dummy = 0;
  size_t* st = steps ? steps : &dummy;
  *st = 0;
  if (n == 0 || segments_.empty()) return;
  size_t seg = SegmentOf(keys[0]);
  size_t i = 0;
  const size_t nseg = segments_.size();
  while (i < n) {
    Key end = segments_[seg].range.end;
    size_t j = Gallop(
        i, n, end, [keys](size_t x) { return keys[x]; }, st);
    out->push_back(KeySlice{segments_[seg].server, seg, i, j});
    i = j;
    if (i == n) break;
    // The segment holding keys[i] is the last one whose begin is <= keys[i].
    Key k = keys[i];
    size_t next = Gallop(
        seg + 1, nseg, k == kMaxKey ? k : k + 1,
        [this](size_t x) { return segments_[x].range.begin; }, st);
    seg = next - 1;
  }
}

void Ring::SliceRange(Range r, std::vector<RingSegment>* out) const {
  out->clear();
  if (r.size() == 0 || segments_.empty()) return;
  for (size_t seg = SegmentOf(r.begin); seg < segments_.size(); ++seg) {
    const Range& s = segments_[seg].range;
    if (s.begin >= r.end) break;
    out->push_back(RingSegment{Range(std::max(s.begin, r.begin), std::min(s.end, r.end)),
                               segments_[seg].server});
  }
}

}  // namespace ps
