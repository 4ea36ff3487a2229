// Splits a request into per-server parts by the ring, and large parts into bounded pieces.
// Pure logic.
#ifndef PS_KV_SLICER_H_
#define PS_KV_SLICER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "ring/ring.h"

namespace ps {

/// One message of a request: the keys it carries (as runs of request key indices, in key
/// order) and, for a single key whose values are too large for one message, which of its
/// values.
struct RequestPart {
  int server = -1;
  std::vector<std::pair<size_t, size_t>> runs;
  size_t num_keys = 0;
  bool value_part = false;
  uint64_t val_offset = 0, val_count = 0, val_total = 0;
};

/// True when a request planned as parts must be planned again under a ring of servers `live`:
/// a part not answered yet went to a server that is not in it (the servers that stay keep
/// what they were sent; one that no longer masters a part answers with a redirect).
inline bool Stranded(const std::vector<int>& part_server, const std::vector<bool>& answered,
                     const std::vector<int>& live) {
  for (size_t k = 0; k < part_server.size(); ++k) {
    if (!answered[k] && std::find(live.begin(), live.end(), part_server[k]) == live.end()) {
      return true;
    }
  }
  return false;
}

/// True when servers `now` hold one that `before` does not (a server joined): it has seen none
/// of a worker's clocks, so the worker reports its steps to every server.
inline bool Gained(const std::vector<int>& before, const std::vector<int>& now) {
  for (int id : now) {
    if (std::find(before.begin(), before.end(), id) == before.end()) return true;
  }
  return false;
}

/// Plans the parts of a request over sorted keys. val_begin(i) is the offset of key i's first
/// value (val_begin(n) the total); max_part_values bounds the values of one part (0 = no
/// bound). Parts of one server come out in key order; a key too large for a part is split into
/// value parts.
template <typename ValBegin>
void PlanParts(const Ring& ring, const Key* keys, size_t n, ValBegin val_begin,
               uint64_t max_part_values, std::vector<RequestPart>* out) {
  out->clear();
  thread_local std::vector<KeySlice> slices;  // reused: this runs once per request
  ring.SliceKeys(keys, n, &slices);
  if (slices.size() == 1 && (!max_part_values || val_begin(n) - val_begin(0) <= max_part_values)) {
    // The common small request: one server, one part.
    RequestPart p;
    p.server = slices[0].server;
    p.runs.emplace_back(0, n);
    p.num_keys = n;
    out->push_back(std::move(p));
    return;
  }
  // Group the slices by server, keeping key order inside each server.
  std::vector<int> order;
  std::vector<std::vector<std::pair<size_t, size_t>>> runs_of;
  for (const auto& s : slices) {
    size_t g = 0;
    while (g < order.size() && order[g] != s.server) ++g;
    if (g == order.size()) {
      order.push_back(s.server);
      runs_of.emplace_back();
    }
    runs_of[g].emplace_back(s.begin, s.end);
  }
  for (size_t g = 0; g < order.size(); ++g) {
    RequestPart cur;
    cur.server = order[g];
    uint64_t cur_vals = 0;
    auto flush = [&] {
      if (cur.num_keys) out->push_back(cur);
      cur = RequestPart();
      cur.server = order[g];
      cur_vals = 0;
    };
    for (auto run : runs_of[g]) {
      size_t i = run.first;
      while (i < run.second) {
        uint64_t kv = val_begin(i + 1) - val_begin(i);
        if (max_part_values && kv > max_part_values) {
          flush();
          for (uint64_t off = 0; off < kv; off += max_part_values) {
            RequestPart p;
            p.server = order[g];
            p.runs.emplace_back(i, i + 1);
            p.num_keys = 1;
            p.value_part = true;
            p.val_offset = off;
            p.val_count = std::min<uint64_t>(max_part_values, kv - off);
            p.val_total = kv;
            out->push_back(p);
          }
          ++i;
          continue;
        }
        if (max_part_values && cur_vals + kv > max_part_values) flush();
        // Take as many whole keys as fit (binary search on the value offsets).
        size_t j = run.second;
        if (max_part_values) {
          const uint64_t room = max_part_values - cur_vals;
          size_t lo = i + 1, hi = run.second;
          while (lo < hi) {
            size_t mid = lo + (hi - lo + 1) / 2;
            if (val_begin(mid) - val_begin(i) <= room) {
              lo = mid;
            } else {
              hi = mid - 1;
            }
          }
          j = lo;
        }
        if (!cur.runs.empty() && cur.runs.back().second == i) {
          cur.runs.back().second = j;
        } else {
          cur.runs.emplace_back(i, j);
        }
        cur.num_keys += j - i;
        cur_vals += val_begin(j) - val_begin(i);
        i = j;
      }
    }
    flush();
  }
}

}  // namespace ps

#endif  // PS_KV_SLICER_H_
