#include "kv/applied_log.h"

#include <algorithm>

#include "util/sorted_keys.h"

namespace ps {

void AppliedLog::Advance(int worker, int64_t lwm) {
  Worker& w = workers_[worker];
  if (lwm <= w.lwm) return;
  w.lwm = lwm;
  w.records.erase(w.records.begin(), w.records.lower_bound(lwm));
}

bool AppliedLog::Below(int worker, int64_t ts) const {
  auto it = workers_.find(worker);
  return it != workers_.end() && ts < it->second.lwm;
}

size_t AppliedLog::CheckKeys(int worker, int64_t ts, const Key* keys, size_t n,
                             std::vector<bool>* applied) const {
  applied->assign(n, false);
  auto w = workers_.find(worker);
  if (w == workers_.end()) return 0;
  auto r = w->second.records.find(ts);
  if (r == w->second.records.end()) return 0;
  size_t hits = 0;
  for (const auto& frame : r->second.keys) {
    // Both sorted: one merge walk over the part where they overlap. The parts of one request
    // are disjoint slices, so for them this is two binary searches and no walk: a walk from
    // the start would make a request of p parts cost p^2/2 frames.
    if (frame.empty() || n == 0 || frame.back() < keys[0] || keys[n - 1] < frame[0]) continue;
    size_t i = std::lower_bound(keys, keys + n, frame[0]) - keys;
    size_t j = std::lower_bound(frame.begin(), frame.end(), keys[i]) - frame.begin();
    while (i < n && j < frame.size()) {
      // Galloping: the parts of one push that reach a server (its own and the copies of its
      // neighbours') interleave by ring segment, so long runs of one side are skipped in
      // logarithmic time instead of walked key by key.
      if (keys[i] < frame[j]) {
        i = Gallop(i + 1, n, frame[j], [keys](size_t x) { return keys[x]; });
      } else if (frame[j] < keys[i]) {
        j = Gallop(j + 1, frame.size(), keys[i], [&frame](size_t x) { return frame[x]; });
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

std::vector<Range> AppliedLog::FreshRanges(int worker, int64_t ts, Range r) const {
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

bool AppliedLog::HasValuePart(int worker, int64_t ts, Key key, uint64_t offset) const {
  auto w = workers_.find(worker);
  if (w == workers_.end()) return false;
  auto rec = w->second.records.find(ts);
  if (rec == w->second.records.end()) return false;
  const auto& v = rec->second.value_parts;
  return std::find(v.begin(), v.end(), std::make_pair(key, offset)) != v.end();
}

void AppliedLog::RecordKeys(int worker, int64_t ts, SArray<Key> keys) {
  if (!keys.empty()) workers_[worker].records[ts].keys.push_back(std::move(keys));
}

void AppliedLog::RecordRange(int worker, int64_t ts, Range r) {
  workers_[worker].records[ts].ranges.push_back(r);
}

void AppliedLog::RecordValuePart(int worker, int64_t ts, Key key, uint64_t offset) {
  workers_[worker].records[ts].value_parts.emplace_back(key, offset);
}

size_t AppliedLog::size() const {
  size_t n = 0;
  for (const auto& w : workers_) n += w.second.records.size();
  return n;
}

void AppliedLog::Export(Range r, SArray<uint64_t>* clock, SArray<uint64_t>* records) const {
  SArray<uint64_t> c;
  SArray<uint64_t> out;
  // In id order, a deterministic encoding. A job of ten thousand workers exports a clock entry
  // for each in every range handed off: no lookups, storage reserved once.
  std::vector<std::pair<int, const Worker*>> ws;
  ws.reserve(workers_.size());
  for (const auto& w : workers_) ws.emplace_back(w.first, &w.second);
  std::sort(ws.begin(), ws.end());  // ids are unique: by id
  c.reserve(ws.size() * 11);        // a node, a count and at most three ranges of three
  for (const auto& e : ws) {
    const int id = e.first;
    const Worker& w = *e.second;
    if (w.lwm > 0) RangeVectorClock::EncodeOne(id, r, w.lwm, &c);
    for (const auto& rec : w.records) {
      SArray<Key> keys;
      for (const auto& f : rec.second.keys) {  // sorted: only r's part is read
        if (f.empty() || f.back() < r.begin || f[0] >= r.end) continue;
        for (auto k = std::lower_bound(f.begin(), f.end(), r.begin); k != f.end() && *k < r.end;
             ++k) {
          keys.push_back(*k);
        }
      }
      std::sort(keys.begin(), keys.end());
      keys.resize(std::unique(keys.begin(), keys.end()) - keys.begin());
      std::vector<Range> ranges;
      for (const Range& x : rec.second.ranges) {
        Range y(std::max(x.begin, r.begin), std::min(x.end, r.end));
        if (y.begin < y.end) ranges.push_back(y);
      }
      std::vector<std::pair<Key, uint64_t>> parts;
      for (const auto& p : rec.second.value_parts) {
        if (p.first >= r.begin && p.first < r.end) parts.push_back(p);
      }
      if (keys.empty() && ranges.empty() && parts.empty()) continue;
      out.push_back(static_cast<uint64_t>(id));
      out.push_back(static_cast<uint64_t>(rec.first));
      out.push_back(keys.size());
      out.append(keys);
      out.push_back(ranges.size());
      for (const Range& x : ranges) {
        out.push_back(x.begin);
        out.push_back(x.end);
      }
      out.push_back(parts.size());
      for (const auto& p : parts) {
        out.push_back(p.first);
        out.push_back(p.second);
      }
    }
  }
  *clock = c;
  *records = out;
}

std::string AppliedLog::Parse(Range r, const SArray<uint64_t>& clock,
                              const SArray<uint64_t>& records, Parsed* out) {
  Parsed p;
  try {
    p.marks = RangeVectorClock::MinsOver(clock, r);
  } catch (const std::exception& e) {
    return std::string("applied-log import: ") + e.what();
  }
  const size_t n = records.size();
  size_t i = 0;
  auto take = [&](uint64_t* v) {
    if (i >= n) return false;
    *v = records[i++];
    return true;
  };
  while (i < n) {
    uint64_t id, ts, nk, nr, np;
    if (!take(&id) || !take(&ts) || !take(&nk) || nk > n - i)
      return "applied-log import: truncated";
    In x;
    x.worker = static_cast<int>(id);
    x.ts = static_cast<int64_t>(ts);
    // A copy, not a view: the frame is a part of a whole range piece's receive buffer (UCX
    // delivers a message in one buffer), which a view would keep alive as long as the record
    // lives. A refill's records lived until the workers' next pushes, pinning 16 MB per piece
    // (fault.big_handoff.ucx: 600-700 MB on a refilling server, freed at its end).
    SArray<Key> keys = SArray<Key>::Uninitialized(nk);
    std::copy(records.begin() + i, records.begin() + i + nk, keys.begin());
    i += nk;
    for (size_t j = 0; j < keys.size(); ++j) {
      if (keys[j] < r.begin || keys[j] >= r.end || (j > 0 && keys[j] <= keys[j - 1])) {
        return "applied-log import: keys outside the range or not sorted";
      }
    }
    if (!keys.empty()) x.rec.keys.push_back(keys);
    if (!take(&nr) || nr > (n - i) / 2) return "applied-log import: truncated";
    for (uint64_t j = 0; j < nr; ++j, i += 2) {
      Range y(records[i], records[i + 1]);
      if (y.begin >= y.end || y.begin < r.begin || y.end > r.end) {
        return "applied-log import: range outside the range";
      }
      x.rec.ranges.push_back(y);
    }
    if (!take(&np) || np > (n - i) / 2) return "applied-log import: truncated";
    for (uint64_t j = 0; j < np; ++j, i += 2) {
      if (records[i] < r.begin || records[i] >= r.end) {
        return "applied-log import: value part outside the range";
      }
      x.rec.value_parts.emplace_back(records[i], records[i + 1]);
    }
    p.in.push_back(std::move(x));
  }
  *out = std::move(p);
  return "";
}

std::string AppliedLog::Import(Range r, const SArray<uint64_t>& clock,
                               const SArray<uint64_t>& records) {
  Parsed parsed;
  const std::string err = Parse(r, clock, records, &parsed);
  if (err.empty()) Import(r, std::move(parsed));
  return err;
}

void AppliedLog::Import(Range r, Parsed parsed) {
  // Forget what was recorded in r, keep the rest of every record. Only records with a part in
  // r change: a refill imports range after range, and rebuilding (and splitting) every frame
  // of every record at each one made the log's cost grow with the ranges a server took in.
  const auto frame_in_r = [&r](const SArray<Key>& f) {
    const auto k = std::lower_bound(f.begin(), f.end(), r.begin);
    return k != f.end() && *k < r.end;
  };
  const auto range_in_r = [&r](const Range& x) { return x.begin < r.end && r.begin < x.end; };
  for (auto& w : workers_) {
    for (auto& rec : w.second.records) {
      auto& keys = rec.second.keys;
      if (std::any_of(keys.begin(), keys.end(), frame_in_r)) {
        std::vector<SArray<Key>> frames;
        for (const auto& f : keys) {
          const size_t lo = std::lower_bound(f.begin(), f.end(), r.begin) - f.begin();
          const size_t hi = std::lower_bound(f.begin(), f.end(), r.end) - f.begin();
          if (lo == hi) {
            frames.push_back(f);
            continue;
          }
          if (lo > 0) frames.push_back(f.Segment(0, lo));
          if (hi < f.size()) frames.push_back(f.Segment(hi, f.size()));
        }
        keys.swap(frames);
      }
      auto& rgs = rec.second.ranges;
      if (std::any_of(rgs.begin(), rgs.end(), range_in_r)) {
        std::vector<Range> ranges;
        for (const Range& x : rgs) {
          if (!range_in_r(x)) {
            ranges.push_back(x);
            continue;
          }
          if (x.begin < r.begin) ranges.emplace_back(x.begin, r.begin);
          if (x.end > r.end) ranges.emplace_back(r.end, x.end);
        }
        rgs.swap(ranges);
      }
      auto& v = rec.second.value_parts;
      v.erase(std::remove_if(v.begin(), v.end(),
                             [&r](const std::pair<Key, uint64_t>& p) {
                               return p.first >= r.begin && p.first < r.end;
                             }),
              v.end());
    }
  }
  for (const auto& m : parsed.marks) Advance(m.first, m.second);
  for (auto& x : parsed.in) {
    if (Below(x.worker, x.ts)) continue;
    Record& rec = workers_[x.worker].records[x.ts];
    for (auto& f : x.rec.keys) rec.keys.push_back(f);
    for (auto& y : x.rec.ranges) rec.ranges.push_back(y);
    for (auto& p : x.rec.value_parts) rec.value_parts.push_back(p);
  }
}

}  // namespace ps
