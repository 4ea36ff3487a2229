#include "kv/applied_log.h"

#include <algorithm>

namespace ps {

void AppliedLog::Advance(int worker, int lwm) {
  Worker& w = workers_[worker];
  if (lwm <= w.lwm) return;
  w.lwm = lwm;
  w.records.erase(w.records.begin(), w.records.lower_bound(lwm));
}

bool AppliedLog::Below(int worker, int ts) const {
  auto it = workers_.find(worker);
  return it != workers_.end() && ts < it->second.lwm;
}

size_t AppliedLog::CheckKeys(int worker, int ts, const Key* keys, size_t n,
                             std::vector<bool>* applied) const {
  applied->assign(n, false);
  auto w = workers_.find(worker);
  if (w == workers_.end()) return 0;
  auto r = w->second.records.find(ts);
  if (r == w->second.records.end()) return 0;
  size_t hits = 0;
  for (const auto& frame : r->second.keys) {
    // Both sorted: one merge walk per recorded frame.
    size_t i = std::lower_bound(keys, keys + n, frame.empty() ? 0 : frame[0]) - keys, j = 0;
    while (i < n && j < frame.size()) {
      if (keys[i] < frame[j]) {
        ++i;
      } else if (frame[j] < keys[i]) {
        ++j;
      } else {
        if (!(*applied)[i]) hits++;
        (*applied)[i] = true;
        ++i;
        ++j;
      }
    }
  }
  return hits;
}

std::vector<Range> AppliedLog::FreshRanges(int worker, int ts, Range r) const {
  std::vector<Range> fresh{r};
  auto w = workers_.find(worker);
  if (w == workers_.end()) return fresh;
  auto rec = w->second.records.find(ts);
  if (rec == w->second.records.end()) return fresh;
  for (const Range& done : rec->second.ranges) {
    std::vector<Range> next;
    for (const Range& f : fresh) {
      if (done.end <= f.begin || f.end <= done.begin) {
        next.push_back(f);
        continue;
      }
      if (f.begin < done.begin) next.emplace_back(f.begin, done.begin);
      if (done.end < f.end) next.emplace_back(done.end, f.end);
    }
    fresh.swap(next);
  }
  return fresh;
}

bool AppliedLog::HasValuePart(int worker, int ts, Key key, uint64_t offset) const {
  auto w = workers_.find(worker);
  if (w == workers_.end()) return false;
  auto rec = w->second.records.find(ts);
  if (rec == w->second.records.end()) return false;
  const auto& v = rec->second.value_parts;
  return std::find(v.begin(), v.end(), std::make_pair(key, offset)) != v.end();
}

void AppliedLog::RecordKeys(int worker, int ts, SArray<Key> keys) {
  if (!keys.empty()) workers_[worker].records[ts].keys.push_back(std::move(keys));
}

void AppliedLog::RecordRange(int worker, int ts, Range r) {
  workers_[worker].records[ts].ranges.push_back(r);
}

void AppliedLog::RecordValuePart(int worker, int ts, Key key, uint64_t offset) {
  workers_[worker].records[ts].value_parts.emplace_back(key, offset);
}

size_t AppliedLog::size() const {
  size_t n = 0;
  for (const auto& w : workers_) n += w.second.records.size();
  return n;
}

}  // namespace ps
