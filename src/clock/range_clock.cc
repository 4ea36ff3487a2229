#include "clock/range_clock.h"

#include <algorithm>
#include <functional>

namespace ps {

int64_t RangeVectorClock::At(const Points& p, Key k) {
  auto it = p.upper_bound(k);
  return std::prev(it)->second;
}

void RangeVectorClock::Set(int node, Range r, int64_t t) {
  if (r.begin >= r.end || r.end > kMaxKey) throw Error("RangeVectorClock::Set: bad range");
  auto found = nodes_.find(node);
  if (found == nodes_.end()) found = nodes_.emplace(node, Points{{0, 0}}).first;
  Points& p = found->second;
  // Split at both ends (Algorithm 3: [S.begin, a), [a, b), [b, S.end)), then give [a, b) its
  // new time and drop the breakpoints inside it.
  if (r.end < kMaxKey && !p.count(r.end)) p[r.end] = At(p, r.end);
  if (!p.count(r.begin)) p[r.begin] = At(p, r.begin);
  p.erase(p.upper_bound(r.begin), p.lower_bound(r.end));
  p[r.begin] = t;
  // Merge neighbours that now share a time.
  auto end = p.find(r.end);
  if (end != p.end() && end->second == t) p.erase(end);
  auto begin = p.find(r.begin);
  if (begin != p.begin() && std::prev(begin)->second == t) p.erase(begin);
}

int64_t RangeVectorClock::Get(int node, Key k) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? 0 : At(it->second, k);
}

int64_t RangeVectorClock::Min(int node, Range r) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || r.begin >= r.end) return 0;
  const Points& p = it->second;
  int64_t m = At(p, r.begin);
  for (auto i = p.upper_bound(r.begin); i != p.end() && i->first < r.end; ++i) {
    m = std::min(m, i->second);
  }
  return m;
}

int64_t RangeVectorClock::Max(int node, Range r) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || r.begin >= r.end) return 0;
  const Points& p = it->second;
  int64_t m = At(p, r.begin);
  for (auto i = p.upper_bound(r.begin); i != p.end() && i->first < r.end; ++i) {
    m = std::max(m, i->second);
  }
  return m;
}

std::vector<std::pair<Range, int64_t>> RangeVectorClock::Ranges(int node) const {
  std::vector<std::pair<Range, int64_t>> out;
  auto it = nodes_.find(node);
  if (it == nodes_.end()) {
    out.emplace_back(Range(0, kMaxKey), 0);
    return out;
  }
  for (auto i = it->second.begin(); i != it->second.end(); ++i) {
    auto next = std::next(i);
    out.emplace_back(Range(i->first, next == it->second.end() ? kMaxKey : next->first), i->second);
  }
  return out;
}

size_t RangeVectorClock::NumRanges(int node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? 1 : it->second.size();
}

size_t RangeVectorClock::TotalRanges() const {
  size_t n = 0;
  for (const auto& e : nodes_) n += e.second.size();
  return n;
}

void RangeVectorClock::Remove(int node) { nodes_.erase(node); }

std::vector<int> RangeVectorClock::Nodes() const {
  std::vector<int> ids;
  for (const auto& e : nodes_) ids.push_back(e.first);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void RangeVectorClock::Merge(const RangeVectorClock& other) {
  for (const auto& e : other.nodes_) {
    auto mine = nodes_.find(e.first);
    if (mine == nodes_.end()) {
      nodes_[e.first] = e.second;
      continue;
    }
    // Walk the union of both breakpoint sets; each segment takes the larger time.
    Points merged;
    const Points& a = mine->second;
    const Points& b = e.second;
    auto ia = a.begin(), ib = b.begin();
    int64_t ta = 0, tb = 0;
    while (ia != a.end() || ib != b.end()) {
      Key k;
      if (ib == b.end() || (ia != a.end() && ia->first < ib->first)) {
        k = ia->first;
      } else {
        k = ib->first;
      }
      if (ia != a.end() && ia->first == k) ta = (ia++)->second;
      if (ib != b.end() && ib->first == k) tb = (ib++)->second;
      const int64_t t = std::max(ta, tb);
      if (merged.empty() || merged.rbegin()->second != t) merged[k] = t;
    }
    mine->second = std::move(merged);
  }
}

SArray<uint64_t> RangeVectorClock::Encode() const {
  SArray<uint64_t> out;
  for (int node : Nodes()) {
    auto ranges = Ranges(node);
    out.push_back(static_cast<uint64_t>(static_cast<int64_t>(node)));
    out.push_back(ranges.size());
    for (const auto& r : ranges) {
      out.push_back(r.first.begin);
      out.push_back(r.first.end);
      out.push_back(static_cast<uint64_t>(r.second));
    }
  }
  return out;
}

namespace {

// Walks an encoding node by node, each checked to tile [0, kMaxKey) with its ranges: f gets
// the node, its (begin, end, time) triples and their count. Throws ps::Error where malformed.
void WalkWire(const SArray<uint64_t>& w,
              const std::function<void(int, const uint64_t*, uint64_t)>& f) {
  size_t i = 0;
  while (i < w.size()) {
    if (w.size() - i < 2) throw Error("range clock: truncated header");
    const int node = static_cast<int>(static_cast<int64_t>(w[i]));
    const uint64_t n = w[i + 1];
    i += 2;
    if (n == 0 || n > (w.size() - i) / 3) throw Error("range clock: bad range count");
    Key expect = 0;
    for (uint64_t j = 0; j < n; ++j) {
      const uint64_t* x = w.data() + i + 3 * j;
      if (x[0] != expect || x[1] <= x[0] || x[1] > kMaxKey) {
        throw Error("range clock: ranges do not tile the key space");
      }
      expect = x[1];
    }
    if (expect != kMaxKey) throw Error("range clock: ranges do not reach the end");
    f(node, w.data() + i, n);
    i += 3 * n;
  }
}

}  // namespace

RangeVectorClock RangeVectorClock::Decode(const SArray<uint64_t>& w) {
  RangeVectorClock c;
  WalkWire(w, [&c](int node, const uint64_t* x, uint64_t n) {
    if (c.nodes_.count(node)) throw Error("range clock: node listed twice");
    Points& p = c.nodes_[node];
    for (uint64_t j = 0; j < n; ++j, x += 3) {
      const int64_t t = static_cast<int64_t>(x[2]);
      if (p.empty() || p.rbegin()->second != t) p[x[0]] = t;  // keep the canonical form
    }
  });
  return c;
}

void RangeVectorClock::EncodeOne(int node, Range r, int64_t t, SArray<uint64_t>* wire) {
  if (r.begin >= r.end || r.end > kMaxKey || t == 0) throw Error("RangeVectorClock: bad range");
  wire->push_back(static_cast<uint64_t>(static_cast<int64_t>(node)));
  wire->push_back(1 + (r.begin > 0) + (r.end < kMaxKey));
  auto piece = [wire](Key b, Key e, int64_t v) {
    wire->push_back(b);
    wire->push_back(e);
    wire->push_back(static_cast<uint64_t>(v));
  };
  if (r.begin > 0) piece(0, r.begin, 0);
  piece(r.begin, r.end, t);
  if (r.end < kMaxKey) piece(r.end, kMaxKey, 0);
}

std::vector<std::pair<int, int64_t>> RangeVectorClock::MinsOver(const SArray<uint64_t>& w,
                                                                Range r) {
  std::vector<std::pair<int, int64_t>> out;
  WalkWire(w, [&out, r](int node, const uint64_t* x, uint64_t n) {
    bool any = false;
    int64_t m = 0;
    for (uint64_t j = 0; j < n; ++j, x += 3) {
      if (x[0] < r.end && r.begin < x[1]) {
        m = any ? std::min(m, static_cast<int64_t>(x[2])) : static_cast<int64_t>(x[2]);
        any = true;
      }
    }
    out.emplace_back(node, r.begin < r.end ? m : 0);
  });
  // Listed twice: checked once, on a sorted copy, not with a set of every node.
  std::vector<int> ids;
  ids.reserve(out.size());
  for (const auto& e : out) ids.push_back(e.first);
  std::sort(ids.begin(), ids.end());
  if (std::adjacent_find(ids.begin(), ids.end()) != ids.end()) {
    throw Error("range clock: node listed twice");
  }
  return out;
}

}  // namespace ps
