#include "replication/chain.h"

#include <algorithm>
#include <map>

#include "replication/seq_map.h"

namespace ps {

bool ValueOffsets(const Message& m, size_t n, size_t esize, std::vector<uint64_t>* off) {
  if (n == 0 || m.data.size() < 2 || m.data[1].size() % esize) return false;
  const size_t nvals = m.data[1].size() / esize;
  off->assign(n + 1, 0);
  if (m.meta.has_lens() && m.data.size() == 3) {
    if (m.data[2].size() != n * sizeof(int)) return false;
    const int* l = reinterpret_cast<const int*>(m.data[2].data());
    for (size_t i = 0; i < n; ++i) {
      (*off)[i + 1] = (*off)[i] + static_cast<uint64_t>(std::max(0, l[i]));
    }
  } else {
    if (nvals % n) return false;
    for (size_t i = 0; i <= n; ++i) (*off)[i] = i * (nvals / n);
  }
  return (*off)[n] == nvals;
}

Message KeySubset(const Message& m, const std::vector<bool>& keep, size_t esize) {
  Message out;
  if (m.data.empty() || m.data[0].size() % sizeof(Key)) return out;
  const SArray<Key> keys(m.data[0]);
  std::vector<uint64_t> off;
  if (keep.size() != keys.size() || !ValueOffsets(m, keys.size(), esize, &off)) return out;
  const bool lens = m.meta.has_lens() && m.data.size() == 3;
  SArray<Key> k2;
  SArray<char> v2;
  SArray<int> l2;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!keep[i]) continue;
    k2.push_back(keys[i]);
    v2.append(m.data[1].Segment(off[i] * esize, off[i + 1] * esize));
    if (lens) l2.push_back(static_cast<int>(off[i + 1] - off[i]));
  }
  if (k2.empty()) return out;
  out.meta = m.meta;
  out.meta.set_pull(false);
  out.data = {SArray<char>(k2), v2};
  if (lens) out.data.push_back(SArray<char>(l2));
  return out;
}

std::vector<ChainPiece> SplitByChain(const Message& m, const Ring& ring, size_t esize) {
  if (ring.replicas() <= 0) return {};
  return SplitByPath(m, ring, esize, [&ring](size_t segment) {
    auto chain = ring.Chain(segment);
    return std::vector<int>(chain.begin() + (chain.empty() ? 0 : 1), chain.end());
  });
}

std::vector<ChainPiece> SplitByPath(const Message& m, const Ring& ring, size_t esize,
                                    const std::function<std::vector<int>(size_t)>& replicas) {
  std::vector<ChainPiece> out;
  if (m.meta.op() == pb::Meta::DENSE_PUSH) {
    const Range r(m.meta.range_begin(), m.meta.range_end());
    if (r.begin >= r.end || m.data.size() != 1) return out;
    const size_t row = m.data[0].size() / r.size();
    std::vector<RingSegment> segs;
    ring.SliceRange(r, &segs);
    for (const auto& s : segs) {
      auto path = replicas(ring.SegmentOf(s.range.begin));
      if (path.empty()) continue;
      ChainPiece p;
      p.path = std::move(path);
      p.msg.meta = m.meta;
      p.msg.meta.set_range_begin(s.range.begin);
      p.msg.meta.set_range_end(s.range.end);
      p.msg.data = {
          m.data[0].Segment((s.range.begin - r.begin) * row, (s.range.end - r.begin) * row)};
      out.push_back(std::move(p));
    }
    return out;
  }
  if (m.data.size() < 2 || m.data[0].size() % sizeof(Key) || m.data[1].size() % esize) return out;
  const SArray<Key> keys(m.data[0]);
  const size_t n = keys.size();
  if (n == 0) return out;
  if (m.meta.val_total() > 0) {  // a part of one key's large value
    auto path = replicas(ring.SegmentOf(keys[0]));
    if (!path.empty()) out.push_back({std::move(path), m});
    return out;
  }
  const bool lens = m.meta.has_lens() && m.data.size() == 3;
  // Fixed-width values (no lens) need no table of offsets: 8 bytes a key written and read for
  // nothing on every copy.
  std::vector<uint64_t> off;
  const size_t width = lens ? 0 : m.data[1].size() / esize / n;
  if (lens ? !ValueOffsets(m, n, esize, &off) : width * n * esize != m.data[1].size()) return out;
  auto at = [&](size_t i) { return (lens ? off[i] : i * width) * esize; };
  std::vector<KeySlice> slices;
  ring.SliceKeys(keys.data(), n, &slices);
  std::map<std::vector<int>, std::vector<std::pair<size_t, size_t>>> groups;
  for (const auto& s : slices) {
    auto path = replicas(s.segment);
    if (path.empty()) continue;
    auto& runs = groups[path];
    if (!runs.empty() && runs.back().second == s.begin) {
      runs.back().second = s.end;  // neighbouring segments with the same replicas: one run
    } else {
      runs.emplace_back(s.begin, s.end);
    }
  }
  for (auto& g : groups) {
    ChainPiece p;
    p.path = g.first;
    p.msg.meta = m.meta;
    SArray<Key> k;
    SArray<char> v;
    SArray<int> l;
    if (g.second.size() == 1) {
      // One run (the whole message when every segment has the same replicas, as with two
      // servers): views of the frames, no copy.
      const auto run = g.second[0];
      k = keys.Segment(run.first, run.second);
      v = m.data[1].Segment(at(run.first), at(run.second));
      if (lens) l = SArray<int>(m.data[2]).Segment(run.first, run.second);
    } else {
      size_t total = 0, bytes = 0;
      for (auto run : g.second) {
        total += run.second - run.first;
        bytes += at(run.second) - at(run.first);
      }
      k.reserve(total);
      v.reserve(bytes);
      for (auto run : g.second) {
        k.append(keys.Segment(run.first, run.second));
        v.append(m.data[1].Segment(at(run.first), at(run.second)));
        if (lens) l.append(SArray<int>(m.data[2]).Segment(run.first, run.second));
      }
    }
    p.msg.data = {SArray<char>(k), v};
    if (lens) p.msg.data.push_back(SArray<char>(l));
    out.push_back(std::move(p));
  }
  return out;
}

void RestrictSeq(const Message& whole, Message* piece) {
  RestrictSeq(std::vector<uint64_t>(whole.meta.seq().begin(), whole.meta.seq().end()), piece);
}

void RestrictSeq(const std::vector<uint64_t>& all, Message* piece) {
  piece->meta.clear_seq();
  if (all.empty()) return;
  std::vector<uint64_t> kept;
  if (piece->meta.op() == pb::Meta::DENSE_PUSH) {
    kept = SeqMap::Touching(all, nullptr, 0,
                            Range(piece->meta.range_begin(), piece->meta.range_end()));
  } else if (!piece->data.empty() && piece->data[0].size() % sizeof(Key) == 0) {
    const SArray<Key> keys(piece->data[0]);
    kept = SeqMap::Touching(all, keys.data(), keys.size());
  }
  for (uint64_t w : kept) piece->meta.add_seq(w);
}

std::vector<Range> SegmentsOf(const Message& update, const Ring& ring) {
  std::vector<Range> out;
  auto add = [&out](const Range& r) {
    if (!out.empty() && out.back().end == r.begin) {
      out.back().end = r.end;
    } else if (out.empty() || out.back() != r) {
      out.push_back(r);
    }
  };
  if (update.meta.op() == pb::Meta::DENSE_PUSH) {
    std::vector<RingSegment> segs;
    ring.SliceRange(Range(update.meta.range_begin(), update.meta.range_end()), &segs);
    for (const auto& s : segs) add(ring.segments()[ring.SegmentOf(s.range.begin)].range);
    return out;
  }
  if (update.data.empty() || update.data[0].size() % sizeof(Key)) return out;
  const SArray<Key> keys(update.data[0]);
  std::vector<KeySlice> slices;
  ring.SliceKeys(keys.data(), keys.size(), &slices);
  for (const auto& s : slices) add(ring.segments()[s.segment].range);
  return out;
}

void CutSeq(const std::vector<Range>& within, Message* piece) {
  const std::vector<uint64_t> all(piece->meta.seq().begin(), piece->meta.seq().end());
  piece->meta.clear_seq();
  for (uint64_t w : SeqMap::Cut(all, within)) piece->meta.add_seq(w);
}

}  // namespace ps
