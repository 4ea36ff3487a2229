#include "replication/aggregator.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "replication/seq_map.h"
#include "util/sorted_keys.h"

namespace ps {
namespace {

template <typename V>
void AddAll(char* to, const char* from, size_t n) {
  V* t = reinterpret_cast<V*>(to);
  const V* f = reinterpret_cast<const V*>(from);
  for (size_t i = 0; i < n; ++i) t[i] += f[i];
}

}  // namespace

Aggregator::Aggregator(DataType dtype) : dtype_(dtype), esize_(DataTypeSize(dtype)) {}

void Aggregator::AddValues(char* to, const char* from, size_t n) const {
  switch (dtype_) {
    case DataType::kFloat:
      AddAll<float>(to, from, n);
      break;
    case DataType::kDouble:
      AddAll<double>(to, from, n);
      break;
    case DataType::kInt32:
      AddAll<int32_t>(to, from, n);
      break;
    case DataType::kInt64:
      AddAll<int64_t>(to, from, n);
      break;
  }
}

int Aggregator::Add(const std::vector<int>& path, uint64_t entry, int worker, int64_t ts,
                    const Key* keys, size_t n, const char* vals, int width,
                    const std::vector<uint64_t>& seq) {
  if (width <= 0 || n == 0) return -1;
  // Runs are merged at Take: a push whose keys are not strictly increasing (the server applies
  // such pushes too) is replicated alone.
  if (!SortedUnique(keys, n)) return -1;
  auto found = batches_.find(path);
  if (found != batches_.end() && found->second.width != width) return -1;
  // Each range's updates in a batch must be consecutive: this push continues a range the batch
  // holds (same bounds, its prev is the batch's next) or opens one it does not touch.
  std::vector<size_t> extend(seq.size() / 4, SIZE_MAX);
  for (size_t i = 0; i + 4 <= seq.size(); i += 4) {
    if (seq[i + 3] & SeqMap::kLinked) return -1;  // a group of parts (rare): sent alone
  }
  if (found != batches_.end()) {
    const auto& have = found->second.seq;
    for (size_t i = 0; i + 4 <= seq.size(); i += 4) {
      for (size_t j = 0; j + 4 <= have.size(); j += 4) {
        if (std::max(seq[i], have[j]) >= std::min(seq[i + 1], have[j + 1])) continue;
        if (seq[i] != have[j] || seq[i + 1] != have[j + 1] || seq[i + 2] != have[j + 3]) {
          return -1;
        }
        extend[i / 4] = j;
      }
    }
  }
  Batch& b = batches_[path];
  for (size_t i = 0; i + 4 <= seq.size(); i += 4) {
    if (extend[i / 4] != SIZE_MAX) {
      b.seq[extend[i / 4] + 3] = seq[i + 3];
    } else {
      b.seq.insert(b.seq.end(), seq.begin() + i, seq.begin() + i + 4);
    }
  }
  b.width = width;
  const size_t row = static_cast<size_t>(width) * esize_;
  const bool first = std::find(b.entries.begin(), b.entries.end(), entry) == b.entries.end();
  if (first) b.entries.push_back(entry);
  Push p;
  p.worker = worker;
  p.ts = ts;
  p.keys.CopyFrom(keys, n);
  b.pushes.push_back(std::move(p));
  SArray<char> v;
  v.CopyFrom(vals, n * row);
  b.vals.push_back(std::move(v));
  workers_.insert(worker);
  return first ? 1 : 0;
}

bool Aggregator::Holds(int worker, int64_t ts) const {
  for (const auto& b : batches_) {
    for (const auto& p : b.second.pushes) {
      if (p.worker == worker && p.ts == ts) return true;
    }
  }
  return false;
}

void Aggregator::Merge(const Batch& b, size_t lo, size_t hi, SArray<Key>* keys,
                       SArray<char>* vals) const {
  const size_t row = static_cast<size_t>(b.width) * esize_;
  if (hi - lo == 1) {
    *keys = b.pushes[lo].keys;
    *vals = b.vals[lo];
    return;
  }
  // Halves merged, then the two results: each key is read log2(runs) times, in order.
  SArray<Key> k1, k2;
  SArray<char> v1, v2;
  const size_t mid = lo + (hi - lo) / 2;
  Merge(b, lo, mid, &k1, &v1);
  Merge(b, mid, hi, &k2, &v2);
  if (k1.size() == k2.size() &&
      (k1.data() == k2.data() || std::equal(k1.begin(), k1.end(), k2.begin()))) {
    // The same keys (every worker pushing one list, as in a step over the same data): the
    // sums in one pass that the compiler can vectorise, and the keys shared.
    auto v = SArray<char>::Uninitialized(v1.size());
    std::memcpy(v.data(), v1.data(), v1.size());
    AddValues(v.data(), v2.data(), k1.size() * static_cast<size_t>(b.width));
    *keys = k1;
    *vals = v;
    return;
  }
  SArray<Key> k(k1.size() + k2.size());
  auto v = SArray<char>::Uninitialized(k.size() * row);
  size_t i = 0, j = 0, o = 0;
  while (i < k1.size() || j < k2.size()) {
    if (j == k2.size() || (i < k1.size() && k1[i] < k2[j])) {
      k[o] = k1[i];
      std::memcpy(v.data() + o * row, v1.data() + i * row, row);
      ++i;
    } else if (i == k1.size() || k2[j] < k1[i]) {
      k[o] = k2[j];
      std::memcpy(v.data() + o * row, v2.data() + j * row, row);
      ++j;
    } else {
      k[o] = k1[i];
      std::memcpy(v.data() + o * row, v1.data() + i * row, row);
      AddValues(v.data() + o * row, v2.data() + j * row, b.width);
      ++i;
      ++j;
    }
    ++o;
  }
  k.resize(o);
  v.resize(o * row);
  *keys = k;
  *vals = v;
}

std::vector<Aggregator::Copy> Aggregator::Take() {
  std::vector<Copy> out;
  for (auto& kv : batches_) {
    Batch& b = kv.second;
    SArray<Key> keys;
    SArray<char> vals;
    Merge(b, 0, b.pushes.size(), &keys, &vals);
    Copy c;
    c.path = kv.first;
    c.entries = b.entries;
    c.pushes = b.pushes.size();
    c.msg.meta.set_op(pb::Meta::DATA);
    c.msg.meta.set_push(true);
    c.msg.meta.set_dtype(static_cast<int>(dtype_));
    c.msg.meta.set_width(b.width);
    c.msg.meta.set_aggregate(true);
    for (uint64_t w : b.seq) c.msg.meta.add_seq(w);
    c.msg.data = {SArray<char>(keys), vals, SArray<char>(Encode(b.pushes, keys))};
    out.push_back(std::move(c));
  }
  batches_.clear();
  workers_.clear();
  return out;
}

SArray<uint64_t> Aggregator::Encode(const std::vector<Push>& pushes, const SArray<Key>& keys) {
  const size_t words = (keys.size() + 63) / 64;
  SArray<uint64_t> w(pushes.size() * (2 + words), 0);
  size_t at = 0;
  for (const auto& p : pushes) {
    w[at] = static_cast<uint32_t>(p.worker);
    w[at + 1] = static_cast<uint64_t>(p.ts);
    uint64_t* bits = w.data() + at + 2;
    if (p.keys.size() == keys.size()) {  // a subset as large as the set: every key
      for (size_t i = 0; i < keys.size() / 64; ++i) bits[i] = ~uint64_t{0};
      if (keys.size() % 64) bits[words - 1] = (uint64_t{1} << (keys.size() % 64)) - 1;
      at += 2 + words;
      continue;
    }
    size_t j = 0;  // both sorted: one walk
    for (Key k : p.keys) {
      while (j < keys.size() && keys[j] < k) ++j;
      if (j < keys.size() && keys[j] == k) bits[j / 64] |= uint64_t{1} << (j % 64);
    }
    at += 2 + words;
  }
  return w;
}

bool Aggregator::Pushes(const Message& m, std::vector<Push>* out) {
  if (m.data.size() != 3 || m.data[0].size() % sizeof(Key) || m.data[2].size() % sizeof(uint64_t)) {
    return false;
  }
  const SArray<Key> keys(m.data[0]);
  const SArray<uint64_t> w(m.data[2]);
  const size_t words = (keys.size() + 63) / 64;
  if (w.size() % (2 + words)) return false;
  for (size_t at = 0; at < w.size(); at += 2 + words) {
    Push p;
    p.worker = static_cast<int>(static_cast<uint32_t>(w[at]));
    p.ts = static_cast<int64_t>(w[at + 1]);
    const uint64_t* bits = w.data() + at + 2;
    if (keys.size() % 64 && bits[words - 1] >> (keys.size() % 64)) return false;  // past the end
    size_t count = 0;
    for (size_t i = 0; i < words; ++i) count += __builtin_popcountll(bits[i]);
    if (count == keys.size()) {  // the usual case: the push holds every key
      p.keys = keys;
    } else {
      p.keys = SArray<Key>(count);
      size_t o = 0;
      for (size_t i = 0; i < words; ++i) {
        for (uint64_t b = bits[i]; b; b &= b - 1) {
          p.keys[o++] = keys[i * 64 + __builtin_ctzll(b)];
        }
      }
    }
    out->push_back(std::move(p));
  }
  return true;
}

namespace {

// The pushes restricted to sorted keys, encoded over them.
SArray<uint64_t> Restrict(const std::vector<Aggregator::Push>& pushes, const SArray<Key>& keys) {
  std::vector<Aggregator::Push> cut;
  for (const auto& x : pushes) {
    Aggregator::Push p{x.worker, x.ts, {}};
    std::set_intersection(x.keys.begin(), x.keys.end(), keys.begin(), keys.end(),
                          std::back_inserter(p.keys));
    if (!p.keys.empty()) cut.push_back(std::move(p));
  }
  return Aggregator::Encode(cut, keys);
}

}  // namespace

Message Aggregator::Within(const Message& agg, const std::vector<Range>& rs, size_t esize) {
  Message out;
  std::vector<Push> pushes;
  if (!Pushes(agg, &pushes) || agg.data[0].size() % sizeof(Key)) return out;
  const SArray<Key> keys(agg.data[0]);
  if (keys.empty() || agg.data[1].size() % keys.size()) return out;
  const size_t row = agg.data[1].size() / keys.size();
  SArray<Key> k;
  SArray<char> v;
  size_t r = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    while (r < rs.size() && rs[r].end <= keys[i]) ++r;
    if (r == rs.size()) break;
    if (!rs[r].Contains(keys[i])) continue;
    k.push_back(keys[i]);
    v.append(agg.data[1].Segment(i * row, (i + 1) * row));
  }
  (void)esize;
  if (k.empty()) return out;
  out.meta = agg.meta;
  out.data = {SArray<char>(k), v, SArray<char>(Restrict(pushes, k))};
  RestrictSeq(agg, &out);
  return out;
}

std::vector<ChainPiece> Aggregator::Split(const Message& agg, const Ring& ring, size_t esize) {
  std::vector<Push> pushes;
  if (!Pushes(agg, &pushes)) return {};
  Message plain = agg;
  plain.data.resize(2);
  auto pieces = SplitByChain(plain, ring, esize);
  for (auto& p : pieces) {
    p.msg.data.push_back(SArray<char>(Restrict(pushes, SArray<Key>(p.msg.data[0]))));
    RestrictSeq(agg, &p.msg);
  }
  return pieces;
}

}  // namespace ps
