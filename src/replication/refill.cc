#include "replication/refill.h"

#include <algorithm>

namespace ps {

RangeSet Normalize(RangeSet s) {
  s.erase(std::remove_if(s.begin(), s.end(), [](const Range& r) { return r.begin >= r.end; }),
          s.end());
  std::sort(s.begin(), s.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  RangeSet out;
  for (const Range& r : s) {
    if (!out.empty() && r.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, r.end);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

RangeSet Union(const RangeSet& a, const RangeSet& b) {
  RangeSet all = a;
  all.insert(all.end(), b.begin(), b.end());
  return Normalize(std::move(all));
}

RangeSet Intersect(const RangeSet& a, const RangeSet& b) {
  RangeSet out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    Key lo = std::max(a[i].begin, b[j].begin), hi = std::min(a[i].end, b[j].end);
    if (lo < hi) out.emplace_back(lo, hi);
    (a[i].end < b[j].end) ? ++i : ++j;
  }
  return out;
}

RangeSet Subtract(const RangeSet& a, const RangeSet& b) {
  RangeSet out;
  size_t j = 0;
  for (Range r : a) {
    while (j < b.size() && b[j].end <= r.begin) ++j;
    Key at = r.begin;
    for (size_t k = j; k < b.size() && b[k].begin < r.end; ++k) {
      if (b[k].begin > at) out.emplace_back(at, b[k].begin);
      at = std::max(at, b[k].end);
    }
    if (at < r.end) out.emplace_back(at, r.end);
  }
  return out;
}

uint64_t Size(const RangeSet& s) {
  uint64_t n = 0;
  for (const Range& r : s) n = n + r.size() < n ? UINT64_MAX : n + r.size();
  return n;
}

RangeSet HeldRanges(const Ring& ring, int server) {
  RangeSet out;
  for (size_t i : ring.SegmentsHeldBy(server)) out.push_back(ring.segments()[i].range);
  return Normalize(std::move(out));
}

RangeSet MasteredRanges(const Ring& ring, int server) { return Normalize(ring.RangesOf(server)); }

RefillPlan PlanRefill(const Ring& current, const Ring* next, int self, const RangeSet& held) {
  RefillPlan p;
  RangeSet want = HeldRanges(current, self);
  if (next) want = Union(want, HeldRanges(*next, self));
  p.missing = Subtract(want, held);
  p.drop = Subtract(held, want);
  for (const Range& m : p.missing) {
    std::vector<RingSegment> parts;
    current.SliceRange(m, &parts);
    for (const auto& s : parts) {
      if (s.server == self) {
        p.orphans.push_back(s.range);
      } else if (!p.fetch.empty() && p.fetch.back().second == s.server &&
                 p.fetch.back().first.end == s.range.begin) {
        p.fetch.back().first.end = s.range.end;
      } else {
        p.fetch.emplace_back(s.range, s.server);
      }
    }
  }
  p.orphans = Normalize(std::move(p.orphans));
  return p;
}

bool PrecopiesSurvive(const Ring& prepared, const Ring& after) {
  const uint64_t p = prepared.epoch();
  return after.epoch() == p || after.cut_epoch() == p || after.base_epoch() < p;
}

std::shared_ptr<const Ring> MissedCut(const std::shared_ptr<const Ring>& prepared,
                                      const Ring& after, uint64_t ring_epoch) {
  if (!prepared || prepared->epoch() <= ring_epoch || after.epoch() <= prepared->epoch() ||
      after.cut_epoch() != prepared->epoch()) {
    return nullptr;
  }
  return std::make_shared<Ring>(prepared->AsCutOver());
}

SArray<char> EncodeRanges(const RangeSet& rs) {
  SArray<Key> pairs;
  for (const Range& r : rs) {
    pairs.push_back(r.begin);
    pairs.push_back(r.end);
  }
  return SArray<char>(pairs);
}

bool ParseRanges(const SArray<char>& frame, RangeSet* out) {
  if (frame.empty() || frame.size() % (2 * sizeof(Key))) return false;
  SArray<Key> pairs(frame);
  for (size_t i = 0; i < pairs.size(); i += 2) {
    if (pairs[i] >= pairs[i + 1] || (i > 0 && pairs[i] < pairs[i - 1])) return false;
    out->emplace_back(pairs[i], pairs[i + 1]);
  }
  return true;
}

}  // namespace ps
