#include "replication/seq_map.h"

#include <algorithm>

namespace ps {

SeqMap::SeqMap() { map_[0] = Point{}; }

void SeqMap::Split(Key at) {
  if (at == 0 || at >= kMaxKey) return;
  auto it = map_.upper_bound(at);
  --it;  // the interval holding `at`
  if (it->first != at) map_.emplace_hint(std::next(it), at, it->second);
}

void SeqMap::Coalesce(Key b, Key e) {
  auto it = map_.upper_bound(b);
  if (it != map_.begin()) --it;
  if (it != map_.begin()) --it;
  while (it != map_.end() && it->first <= e) {
    auto next = std::next(it);
    if (next == map_.end()) break;
    if (next->second.point == it->second.point && next->second.floor == 0 &&
        it->second.floor == 0) {
      map_.erase(next);
    } else {
      it = next;
    }
  }
}

void SeqMap::Bump(Range r, std::vector<uint64_t>* out) {
  if (r.begin >= r.end) return;
  Split(r.begin);
  Split(r.end);
  uint64_t top = 0;
  for (auto it = map_.find(r.begin); it != map_.end() && it->first < r.end; ++it) {
    top = std::max({top, it->second.point, it->second.floor});
  }
  const size_t first = out->size();
  for (auto it = map_.find(r.begin); it != map_.end() && it->first < r.end; ++it) {
    auto next = std::next(it);
    const Key e = next == map_.end() ? kMaxKey : next->first;
    out->insert(out->end(), {it->first, e, it->second.point, (top + 1) | kLinked});
    it->second = Point{top + 1, 0};
  }
  if (out->size() > first) out->back() = Next(out->back());  // the group's last entry
  Coalesce(r.begin, r.end);
}

void SeqMap::Jump(Range r, uint64_t base) {
  if (r.begin >= r.end) return;
  Split(r.begin);
  Split(r.end);
  for (auto it = map_.find(r.begin); it != map_.end() && it->first < r.end; ++it) {
    it->second.floor = std::max(it->second.floor, base);
  }
}

template <typename F>
void SeqMap::Walk(const uint64_t* entries, size_t words, const std::vector<Range>& held,
                  F f) const {
  for (size_t i = 0; i + kEntry <= words; i += kEntry) {
    const Range r(entries[i], entries[i + 1]);
    const uint64_t prev = entries[i + 2], next = Next(entries[i + 3]);
    for (const Range& h : held) {
      const Range x(std::max(r.begin, h.begin), std::min(r.end, h.end));
      if (x.begin >= x.end) continue;
      auto it = map_.upper_bound(x.begin);
      --it;
      for (; it != map_.end() && it->first < x.end; ++it) {
        auto nx = std::next(it);
        const Key e = nx == map_.end() ? kMaxKey : nx->first;
        if (!f(it->second.point, Range(std::max(it->first, x.begin), std::min(e, x.end)), prev,
               next)) {
          return;
        }
      }
    }
  }
}

SeqMap::Verdict SeqMap::Check(const uint64_t* entries, size_t words,
                              const std::vector<Range>& held) const {
  Verdict v = Verdict::kDuplicate;
  Walk(entries, words, held, [&v](uint64_t p, Range, uint64_t prev, uint64_t next) {
    if (p < prev) {
      v = Verdict::kGap;
    } else if (p < next && p != prev) {
      v = Verdict::kMismatch;
    } else if (p == prev && p < next) {
      v = Verdict::kApply;
    }
    return v != Verdict::kGap && v != Verdict::kMismatch;
  });
  return v;
}

bool SeqMap::AtPrev(const uint64_t* entries, size_t words, const std::vector<Range>& held) const {
  bool at = true;
  Walk(entries, words, held, [&at](uint64_t p, Range, uint64_t prev, uint64_t) {
    at = p == prev;
    return at;
  });
  return at;
}

bool SeqMap::Lacks(const uint64_t* entries, size_t words, const std::vector<Range>& held) const {
  if (words < kEntry) return false;
  for (size_t i = 0; i + kEntry <= words; i += kEntry) {
    Key at = entries[i];  // covered by held (sorted, disjoint) up to here
    for (const Range& h : held) {
      if (h.end <= at) continue;
      if (h.begin > at) break;
      at = h.end;
      if (at >= entries[i + 1]) break;
    }
    if (at < entries[i + 1]) return false;
  }
  bool lacks = true;
  Walk(entries, words, held, [&lacks](uint64_t p, Range, uint64_t, uint64_t next) {
    lacks = p < next;
    return lacks;
  });
  return lacks;
}

std::vector<Range> SeqMap::Behind(const uint64_t* entries, size_t words,
                                  const std::vector<Range>& held) const {
  std::vector<Range> out;
  Walk(entries, words, held, [&out](uint64_t p, Range part, uint64_t prev, uint64_t next) {
    if (p < next && p != prev) out.push_back(part);
    return true;
  });
  return out;
}

void SeqMap::Advance(const uint64_t* entries, size_t words, const std::vector<Range>& within) {
  for (size_t i = 0; i + kEntry <= words; i += kEntry) {
    for (const Range& w : within) {
      const Range r(std::max(entries[i], w.begin), std::min(entries[i + 1], w.end));
      if (r.begin >= r.end) continue;
      Split(r.begin);
      Split(r.end);
      for (auto it = map_.find(r.begin); it != map_.end() && it->first < r.end; ++it) {
        it->second.point = std::max(it->second.point, Next(entries[i + 3]));
      }
      Coalesce(r.begin, r.end);
    }
  }
}

uint64_t SeqMap::Min(Range r) const {
  uint64_t m = UINT64_MAX;
  if (r.begin >= r.end) return 0;
  auto it = map_.upper_bound(r.begin);
  --it;
  for (; it != map_.end() && it->first < r.end; ++it) m = std::min(m, it->second.point);
  return m;
}

void SeqMap::Export(Range r, std::vector<uint64_t>* out) const {
  if (r.begin >= r.end) return;
  auto it = map_.upper_bound(r.begin);
  --it;
  for (; it != map_.end() && it->first < r.end; ++it) {
    auto nx = std::next(it);
    const Key e = nx == map_.end() ? kMaxKey : nx->first;
    out->insert(out->end(), {std::max(it->first, r.begin), std::min(e, r.end), it->second.point});
  }
}

std::string SeqMap::Import(Range r, const uint64_t* t, size_t words) {
  if (words % 3) return "sequence points: not (begin, end, point) triples";
  Key at = r.begin;
  for (size_t i = 0; i < words; i += 3) {
    if (t[i] != at || t[i + 1] <= t[i] || t[i + 1] > r.end) {
      return "sequence points do not cover the range in order";
    }
    at = t[i + 1];
  }
  if (at != r.end) return "sequence points do not cover the range";
  if (r.begin >= r.end) return "";
  Split(r.begin);
  Split(r.end);
  map_.erase(map_.find(r.begin), r.end >= kMaxKey ? map_.end() : map_.find(r.end));
  for (size_t i = 0; i < words; i += 3) map_[t[i]] = Point{t[i + 2], 0};
  Coalesce(r.begin, r.end);
  return "";
}

namespace {

// Calls f(g, end) for each group of entries: words [g, end).
template <typename F>
void ForEachGroup(const std::vector<uint64_t>& entries, F f) {
  constexpr size_t kEntry = SeqMap::kEntry;
  for (size_t g = 0; g + kEntry <= entries.size();) {
    size_t end = g;
    while (end + kEntry <= entries.size() && (entries[end + 3] & SeqMap::kLinked)) end += kEntry;
    end = std::min(end + kEntry, entries.size());
    f(g, end);
    g = end;
  }
}

}  // namespace

std::vector<uint64_t> SeqMap::Touching(const std::vector<uint64_t>& entries, const Key* keys,
                                       size_t n, Range r) {
  std::vector<uint64_t> out;
  ForEachGroup(entries, [&](size_t g, size_t end) {
    const Key b = entries[g], e = entries[end - kEntry + 1];
    bool hit;
    if (keys) {
      const Key* k = std::lower_bound(keys, keys + n, b);
      hit = k != keys + n && *k < e;
    } else {
      hit = std::max(b, r.begin) < std::min(e, r.end);
    }
    if (hit) out.insert(out.end(), entries.begin() + g, entries.begin() + end);
  });
  return out;
}

std::vector<uint64_t> SeqMap::Cut(const std::vector<uint64_t>& entries,
                                  const std::vector<Range>& within) {
  std::vector<uint64_t> out;
  ForEachGroup(entries, [&](size_t g, size_t end) {
    const size_t start = out.size();
    for (size_t e = g; e + kEntry <= end; e += kEntry) {
      for (const Range& w : within) {
        const Key lo = std::max<Key>(entries[e], w.begin);
        const Key hi = std::min<Key>(entries[e + 1], w.end);
        if (lo >= hi) continue;
        if (out.size() > start) out.back() |= kLinked;
        out.insert(out.end(), {lo, hi, entries[e + 2], Next(entries[e + 3])});
      }
    }
  });
  return out;
}

}  // namespace ps
