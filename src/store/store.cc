#include "store/store.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace ps {
namespace {

std::string LenError(Key k, int have, uint64_t want) {
  return "key " + std::to_string(k) + " holds " + std::to_string(have) +
         " values, the request has " + std::to_string(want);
}

}  // namespace

template <typename V>
Store<V>::Store(std::shared_ptr<const UpdateRule<V>> rule, size_t block_bytes, Reducers<V> reducers)
    : rule_(std::move(rule)),
      sw_(rule_->StateWidth()),
      block_bytes_(std::max<size_t>(block_bytes, 1)),
      reducers_(std::move(reducers)) {
  blocks_.emplace(0, Block<V>(rule_.get(), sw_));
}

template <typename V>
typename Store<V>::Blocks::iterator Store<V>::BlockOf(Key k) {
  return std::prev(blocks_.upper_bound(k));
}

template <typename V>
bool Store<V>::Runs(const Key* keys, size_t n, std::vector<Run>* runs) {
  for (size_t i = 0; i < n;) {
    if (i > 0 && keys[i] <= keys[i - 1]) return false;
    auto it = BlockOf(keys[i]);
    auto next = std::next(it);
    size_t j = n;
    if (next != blocks_.end()) {
      j = std::lower_bound(keys + i, keys + n, next->first) - keys;
      j = std::max(j, i + 1);  // unsorted keys (refused by the blocks) never loop here
    }
    runs->push_back(Run{&it->second, i, j, {}});
    i = j;
  }
  return true;
}

template <typename V>
void Store<V>::Reshape(Key from, Key to) {
  for (auto it = BlockOf(from); it != blocks_.end() && it->first <= to;) {
    Block<V>& b = it->second;
    if (b.size() == 0 && it != blocks_.begin()) {
      it = blocks_.erase(it);  // its interval goes to the block before, which holds none of it
      continue;
    }
    if (b.bytes() > block_bytes_ && b.size() >= 2) {
      Block<V> upper(rule_.get(), sw_);
      const Key k = b.Split(&upper);
      blocks_.emplace_hint(std::next(it), k, std::move(upper));
      continue;  // this block again: it may still be too large
    }
    ++it;
  }
}

template <typename V>
std::string Store<V>::Push(const Key* keys, size_t n, const char* raw, size_t val_count,
                           const int* lens) {
  const V* vals = reinterpret_cast<const V*>(raw);
  const int w = lens || n == 0 ? 0 : static_cast<int>(val_count / n);
  std::vector<Run> runs;
  if (!Runs(keys, n, &runs)) return kUnsortedKeys;
  // Checked first over every block, so a bad request changes nothing. The check also locates
  // the stretches of known keys, so Apply does not read them again.
  for (Run& r : runs) {
    std::string err = r.block->Check(keys + r.begin, r.end - r.begin,
                                     lens ? lens + r.begin : nullptr, w, &r.spans);
    if (!err.empty()) return err;
  }
  size_t pos = 0;
  for (const Run& r : runs) {
    r.block->Apply(keys + r.begin, r.end - r.begin, vals + pos, lens ? lens + r.begin : nullptr, w,
                   r.spans);
    if (lens) {
      for (size_t i = r.begin; i < r.end; ++i) pos += lens[i];
    } else {
      pos += (r.end - r.begin) * w;
    }
  }
  if (n > 0) Reshape(keys[0], keys[n - 1]);
  return "";
}

template <typename V>
std::string Store<V>::PushPart(Key key, uint64_t offset, uint64_t total, const char* raw,
                               size_t count) {
  const V* vals = reinterpret_cast<const V*>(raw);
  if (offset + count > total || total > (1ull << 31)) return "bad value part";
  Block<V>& b = BlockOf(key)->second;
  size_t cur = 0;
  auto f = b.Find(key, &cur);
  if (f.slot) {
    if (static_cast<uint64_t>(f.len) != total) return LenError(key, f.len, total);
    rule_->Apply(key, vals, f.slot + offset, f.slot + total + offset * sw_,
                 static_cast<int>(count));
    return "";
  }
  b.InsertPart(key, offset, total, vals, count);
  Reshape(key, key);
  return "";
}

template <typename V>
std::string Store<V>::Pull(const Key* keys, size_t n, int width, SArray<char>* out_vals,
                           SArray<int>* out_lens, int64_t step) {
  std::vector<Run> runs;
  if (!Runs(keys, n, &runs)) return kUnsortedKeys;
  if (width > 0) {
    auto vals = SArray<V>::Uninitialized(n * static_cast<size_t>(width));
    for (const Run& r : runs) {
      std::string err = r.block->Read(keys + r.begin, r.end - r.begin, width,
                                      vals.data() + r.begin * width, step);
      if (!err.empty()) return err;
    }
    *out_vals = SArray<char>(vals);
    return "";
  }
  // Lengths first, then values.
  std::vector<typename Block<V>::Found> found(n);
  size_t total = 0;
  for (const Run& r : runs) {
    size_t cur = 0;
    for (size_t i = r.begin; i < r.end; ++i) {
      if (i > r.begin && keys[i] <= keys[i - 1]) return kUnsortedKeys;
      found[i] = r.block->Find(keys[i], &cur);
      total += found[i].slot ? rule_->ReadWidth(found[i].len) : 0;
    }
  }
  auto vals = SArray<V>::Uninitialized(total);
  V* out = vals.data();
  out_lens->resize(n);
  for (size_t i = 0; i < n; ++i) {
    const auto& f = found[i];
    const int len = f.slot ? rule_->ReadWidth(f.len) : 0;
    if (f.slot) rule_->ReadAt(keys[i], f.slot, f.slot + f.len, out, f.len, step);
    (*out_lens)[i] = len;
    out += len;
  }
  *out_vals = SArray<char>(vals);
  return "";
}

template <typename V>
std::string Store<V>::PullPart(Key key, uint64_t offset, uint64_t count, uint64_t total,
                               SArray<char>* out_vals, int64_t step) {
  if (offset + count > total) return "bad value part";
  auto vals = SArray<V>::Uninitialized(count);
  size_t cur = 0;
  auto f = BlockOf(key)->second.Find(key, &cur);
  if (!f.slot) {
    std::fill(vals.begin(), vals.end(), V(0));
  } else if (static_cast<uint64_t>(f.len) != total) {
    return LenError(key, f.len, total);
  } else if (rule_->ReadWidth(f.len) != f.len) {
    return "key " + std::to_string(key) + ": its update rule returns fewer values than it " +
           "stores, so it cannot be pulled in parts";
  } else {
    rule_->ReadAt(key, f.slot + offset, f.slot + f.len + offset * sw_, vals.data(),
                  static_cast<int>(count), step);
  }
  *out_vals = SArray<char>(vals);
  return "";
}

template <typename V>
void Store<V>::ForEach(Range r, const std::function<bool(Key, const V*, size_t)>& f) const {
  auto it = std::prev(blocks_.upper_bound(r.begin));
  for (; it != blocks_.end() && it->first < r.end; ++it) {
    if (!it->second.ForEach(r, f)) return;
  }
}

template <typename V>
void Store<V>::PullRanges(const Range* rs, size_t nr, SArray<Key>* out_keys, SArray<char>* out_vals,
                          SArray<int>* out_lens, uint64_t* counts, int64_t step) {
  SArray<Key> keys;
  SArray<int> lens;
  SArray<V> vals;
  // Room for every key up front (an upper bound: dropped slots are counted): growing by
  // doubling copied a large range's arrays several times over, into freshly faulted pages.
  size_t most = 0;
  for (size_t i = 0; i < nr; ++i) most += CountRange(rs[i]);
  keys.reserve(most);
  lens.reserve(most);
  vals.reserve(most);
  const int sw = sw_;
  const bool raw = sw == 0 && rule_->ReadsRaw();
  for (size_t i = 0; i < nr; ++i) {
    const size_t before = keys.size();
    if (raw) {
      // The values as stored, block by block, without a call per key.
      auto it = std::prev(blocks_.upper_bound(rs[i].begin));
      for (; it != blocks_.end() && it->first < rs[i].end; ++it) {
        it->second.AppendRaw(rs[i], &keys, &lens, &vals);
      }
      counts[i] = keys.size() - before;
      continue;
    }
    ForEach(rs[i], [&](Key k, const V* slot, size_t size) {
      const int len = static_cast<int>(sw == 0 ? size : size / (1 + sw));
      const int w = rule_->ReadWidth(len);
      keys.push_back(k);
      lens.push_back(w);
      size_t at = vals.size();
      vals.resize(at + w);
      rule_->ReadAt(k, slot, slot + len, vals.data() + at, len, step);
      return true;
    });
    counts[i] = keys.size() - before;
  }
  *out_keys = keys;
  *out_lens = lens;
  *out_vals = SArray<char>(vals);
}

template <typename V>
std::string Store<V>::Reduce(int id, Range r, int64_t step, std::vector<double>* acc) const {
  const auto it = reducers_.find(id);
  if (it == reducers_.end() && id == kCountKeysReducer) {
    if (acc->empty()) acc->assign(1, 0.0);
    if (acc->size() != 1) return "reducer width changed";
    ForEach(r, [&](Key, const V*, size_t) {
      (*acc)[0] += 1;
      return true;
    });
    return "";
  }
  if (it == reducers_.end()) return "no reducer " + std::to_string(id) + " on this table";
  const RangeReducer<V>& f = *it->second;
  const size_t width = static_cast<size_t>(f.Width());
  if (acc->empty()) acc->assign(width, 0.0);
  if (acc->size() != width) return "reducer width changed";
  const int sw = sw_;
  if (sw == 0 && rule_->ReadsRaw()) {
    auto b = std::prev(blocks_.upper_bound(r.begin));
    for (; b != blocks_.end() && b->first < r.end; ++b) b->second.ReduceRaw(r, f, acc->data());
    return "";
  }
  std::vector<V> read;
  ForEach(r, [&](Key k, const V* slot, size_t size) {
    const int len = static_cast<int>(sw == 0 ? size : size / (1 + sw));
    read.resize(static_cast<size_t>(rule_->ReadWidth(len)));
    rule_->ReadAt(k, slot, slot + len, read.data(), len, step);
    f.Add(k, read.data(), static_cast<int>(read.size()), acc->data());
    return true;
  });
  return "";
}

template <typename V>
size_t Store<V>::size() const {
  size_t n = 0;
  for (const auto& b : blocks_) n += b.second.size();
  return n;
}

template <typename V>
size_t Store<V>::bytes() const {
  size_t n = 0;
  for (const auto& b : blocks_) n += b.second.bytes();
  return n;
}

template <typename V>
size_t Store<V>::CountRange(Range r) const {
  size_t n = 0;
  auto it = std::prev(blocks_.upper_bound(r.begin));
  for (; it != blocks_.end() && it->first < r.end; ++it) n += it->second.CountRange(r);
  return n;
}

template <typename V>
void Store<V>::ExportRange(Range r, SArray<Key>* out_keys, SArray<char>* out_slots,
                           SArray<uint64_t>* out_sizes, uint64_t max_bytes, Key* stop) const {
  SArray<Key> keys;
  SArray<V> slots;
  SArray<uint64_t> sizes;
  uint64_t bytes = 0;
  Key next = r.end;
  ForEach(r, [&](Key k, const V* slot, size_t n) {
    const uint64_t cost = n * sizeof(V) + sizeof(Key) + sizeof(uint64_t);
    if (!keys.empty() && bytes + cost > max_bytes) {
      next = k;
      return false;
    }
    bytes += cost;
    keys.push_back(k);
    sizes.push_back(n);
    size_t at = slots.size();
    slots.resize(at + n);
    std::copy(slot, slot + n, slots.data() + at);
    return true;
  });
  if (stop) *stop = next;
  *out_keys = keys;
  *out_slots = SArray<char>(slots);
  *out_sizes = sizes;
}

template <typename V>
std::string Store<V>::ImportRanges(const std::vector<Range>& rs, const SArray<Key>& keys,
                                   const SArray<char>& raw, const SArray<uint64_t>& sizes) {
  if (keys.size() != sizes.size()) return "range import: keys and sizes differ in number";
  if (raw.size() % sizeof(V)) return "range import: slots frame size";
  for (size_t i = 0; i < rs.size(); ++i) {
    if (rs[i].begin >= rs[i].end || (i > 0 && rs[i].begin < rs[i - 1].end)) {
      return "range import: ranges not sorted and disjoint";
    }
  }
  uint64_t total = 0;
  size_t at = 0;  // the range holding keys[i]
  for (size_t i = 0; i < keys.size(); ++i) {
    while (at < rs.size() && keys[i] >= rs[at].end) ++at;
    if (at == rs.size() || keys[i] < rs[at].begin) return "range import: key outside the ranges";
    if (i > 0 && keys[i] <= keys[i - 1]) return "range import: keys not sorted and unique";
    if (sizes[i] == 0 || sizes[i] % (1 + sw_)) return "range import: slot size";
    total += sizes[i];
  }
  if (total != raw.size() / sizeof(V)) return "range import: slots do not add up";
  if (rs.empty()) return "";
  // Block by block: the ranges clipped to its interval, and the imported keys that lie there.
  const V* vals = reinterpret_cast<const V*>(raw.data());
  size_t j = 0;
  for (auto it = BlockOf(rs.front().begin); it != blocks_.end() && it->first < rs.back().end;
       ++it) {
    const auto next = std::next(it);
    const Key lo = it->first;
    const Key hi = next == blocks_.end() ? std::numeric_limits<Key>::max() : next->first;
    std::vector<Range> clipped;
    for (const Range& r : rs) {
      const Key b = std::max(r.begin, lo), e = std::min(r.end, hi);
      if (b < e) clipped.emplace_back(b, e);
    }
    if (clipped.empty()) continue;
    size_t k = j;
    uint64_t n = 0;
    while (k < keys.size() && keys[k] < hi) n += sizes[k++];
    it->second.Replace(clipped, keys.data() + j, k - j, vals, sizes.data() + j);
    vals += n;
    j = k;
  }
  Reshape(rs.front().begin, rs.back().end - 1);
  return "";
}

template class Store<float>;
template class Store<double>;
template class Store<int32_t>;
template class Store<int64_t>;

}  // namespace ps
