#include "control/copy_tracker.h"

#include <cstdio>
#include <iterator>

#include "replication/refill.h"

namespace ps {

void CopyTracker::Reset(const Ring& ring) {
  // Built in one pass in key order (segments cover the key space from 0), neighbours with the
  // same holders merged as Add would: adding every chain member range by range re-split the
  // map at every segment (200 ms at 1000 servers).
  at_.clear();
  const auto& segs = ring.segments();
  for (size_t i = 0; i < segs.size(); ++i) {
    const auto chain = ring.Chain(i);
    std::set<int> holders(chain.begin(), chain.end());
    if (!at_.empty() && holders == std::prev(at_.end())->second) continue;
    at_.emplace_hint(at_.end(), segs[i].range.begin, std::move(holders));
  }
  if (at_.empty()) at_[0] = {};  // no servers: nothing is held
}

void CopyTracker::Holds(int server, const Ring& ring) {
  for (const Range& r : HeldRanges(ring, server)) Add(r, server);
}

void CopyTracker::Add(Range r, int server) {
  if (r.begin >= r.end) return;
  // Split at both ends, so that [r.begin, r.end) is a run of whole pieces.
  auto split = [this](Key k) {
    if (k >= kMaxKey || at_.count(k)) return;
    auto before = std::prev(at_.upper_bound(k));
    at_[k] = before->second;
  };
  split(r.begin);
  split(r.end);
  for (auto it = at_.find(r.begin); it != at_.end() && it->first < r.end; ++it) {
    it->second.insert(server);
  }
  // Neighbours with the same holders merge again, which keeps the map as small as the ring;
  // only the pieces from just before r to just after it can have changed.
  auto it = at_.find(r.begin);
  if (it != at_.begin()) --it;
  while (it != at_.end()) {
    auto next = std::next(it);
    if (next == at_.end() || it->first > r.end) break;
    if (next->second == it->second) {
      at_.erase(next);
    } else {
      it = next;
    }
  }
}

std::vector<Range> CopyTracker::Lost(int server) {
  for (auto& p : at_) p.second.erase(server);
  return Orphans();
}

std::vector<Range> CopyTracker::Orphans() const {
  std::vector<Range> out;
  for (auto it = at_.begin(); it != at_.end(); ++it) {
    if (!it->second.empty()) continue;
    auto next = std::next(it);
    const Key end = next == at_.end() ? kMaxKey : next->first;
    if (!out.empty() && out.back().end == it->first) {
      out.back().end = end;
    } else {
      out.emplace_back(it->first, end);
    }
  }
  return out;
}

size_t CopyTracker::Holders(Key k) const { return std::prev(at_.upper_bound(k))->second.size(); }

std::string CopyTracker::Describe(const std::vector<Range>& ranges, size_t max) {
  std::string out;
  long double share = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    share += static_cast<long double>(ranges[i].size()) / static_cast<long double>(kMaxKey);
    if (i >= max) continue;
    char buf[64];
    std::snprintf(buf, sizeof(buf), "[%016llx, %016llx)",
                  static_cast<unsigned long long>(ranges[i].begin),
                  static_cast<unsigned long long>(ranges[i].end));
    out += (i ? ", " : "") + std::string(buf);
  }
  if (ranges.size() > max) out += " and " + std::to_string(ranges.size() - max) + " more";
  char pct[48];
  std::snprintf(pct, sizeof(pct), " (%.3Lg%% of the key space)", 100 * share);
  return out + pct;
}

}  // namespace ps
