#include "store/store.h"

#include <algorithm>
#include <cstring>

namespace ps {
namespace {

std::string LenError(Key k, int have, uint64_t want) {
  return "key " + std::to_string(k) + " holds " + std::to_string(have) +
         " values, the request has " + std::to_string(want);
}

}  // namespace

template <typename V>
typename Store<V>::Found Store<V>::Find(Key k, size_t* cursor) {
  const size_t n = keys_.size(), base = *cursor;
  Found f;
  // Fast path: a key list pushed again walks the main arrays in step.
  if (base < n && keys_[base] == k) {
    f.slot = data_.data() + off_[base];
    f.len = SlotLen(off_[base + 1] - off_[base]);
    *cursor = base + 1;
    return f;
  }
  // Exponential search forward from the cursor, then binary search in the last doubling.
  size_t bound = 1;
  while (base + bound <= n && keys_[base + bound - 1] < k) bound *= 2;
  size_t lo = base + bound / 2, hi = std::min(n, base + bound);
  size_t i = std::lower_bound(keys_.begin() + lo, keys_.begin() + hi, k) - keys_.begin();
  *cursor = i;
  if (i < n && keys_[i] == k) {
    f.slot = data_.data() + off_[i];
    f.len = SlotLen(off_[i + 1] - off_[i]);
    *cursor = i + 1;
    return f;
  }
  if (!side_.empty()) {
    auto it = side_.find(k);
    if (it != side_.end()) {
      f.slot = it->second.data();
      f.len = SlotLen(it->second.size());
    }
  }
  return f;
}

template <typename V>
std::string Store<V>::Push(const Key* keys, size_t n, const char* raw, size_t val_count,
                           const int* lens) {
  const V* vals = reinterpret_cast<const V*>(raw);
  const int w = lens || n == 0 ? 0 : static_cast<int>(val_count / n);
  // Validate first so a bad request changes nothing. A fixed-width push into a store whose
  // slots all have that width cannot mismatch, so the common case skips this pass.
  if (lens || (uniform_ != 0 && uniform_ != w)) {
    size_t cur = 0;
    for (size_t i = 0; i < n; ++i) {
      Found f = Find(keys[i], &cur);
      int want = lens ? lens[i] : w;
      if (f.slot && f.len != want) return LenError(keys[i], f.len, want);
    }
  }
  std::vector<std::pair<Key, std::vector<V>>> fresh;
  size_t cur = 0, pos = 0;
  const bool spans = contiguous() && !lens && uniform_ == w;
  for (size_t i = 0; i < n;) {
    if (spans) {
      // Consecutive keys that are consecutive in the main arrays have adjacent slots: one
      // Apply covers the whole run.
      size_t m = RunLength(keys + i, n - i, cur);
      if (m > 1) {
        rule_->Apply(keys[i], vals + pos, data_.data() + off_[cur], nullptr,
                     static_cast<int>(m * w));
        cur += m;
        pos += m * w;
        i += m;
        continue;
      }
    }
    int len = lens ? lens[i] : w;
    Found f = Find(keys[i], &cur);
    if (f.slot) {
      rule_->Apply(keys[i], vals + pos, f.slot, f.slot + len, len);
    } else {
      std::vector<V> slot(static_cast<size_t>(len) * (1 + sw_));
      rule_->Init(keys[i], slot.data(), slot.data() + len, len);
      rule_->Apply(keys[i], vals + pos, slot.data(), slot.data() + len, len);
      fresh.emplace_back(keys[i], std::move(slot));
    }
    pos += len;
    ++i;
  }
  if (!fresh.empty()) Insert(fresh);
  return "";
}

template <typename V>
std::string Store<V>::PushPart(Key key, uint64_t offset, uint64_t total, const char* raw,
                               size_t count) {
  const V* vals = reinterpret_cast<const V*>(raw);
  if (offset + count > total || total > (1ull << 31)) return "bad value part";
  size_t cur = 0;
  Found f = Find(key, &cur);
  if (f.slot) {
    if (static_cast<uint64_t>(f.len) != total) return LenError(key, f.len, total);
    rule_->Apply(key, vals, f.slot + offset, f.slot + total + offset * sw_,
                 static_cast<int>(count));
    return "";
  }
  std::vector<std::pair<Key, std::vector<V>>> fresh(1);
  fresh[0].first = key;
  auto& slot = fresh[0].second;
  slot.resize(total * (1 + sw_));
  rule_->Init(key, slot.data(), slot.data() + total, static_cast<int>(total));
  rule_->Apply(key, vals, slot.data() + offset, slot.data() + total + offset * sw_,
               static_cast<int>(count));
  Insert(fresh);
  return "";
}

template <typename V>
void Store<V>::Insert(const std::vector<std::pair<Key, std::vector<V>>>& fresh) {
  for (const auto& f : fresh) NoteWidth(SlotLen(f.second.size()));
  size_t limit = std::max<size_t>(1024, keys_.size() / 8);
  if (fresh.size() + side_.size() > limit || fresh.size() * 32 > keys_.size()) {
    auto copy = fresh;
    MergeSide(&copy);
    return;
  }
  for (const auto& f : fresh) side_.emplace(f.first, f.second);
}

template <typename V>
void Store<V>::MergeSide(std::vector<std::pair<Key, std::vector<V>>>* fresh) {
  // Three sorted, disjoint sources: main arrays, side table, fresh slots.
  for (auto& s : side_) fresh->emplace_back(s.first, std::move(s.second));
  side_.clear();
  std::sort(fresh->begin(), fresh->end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t extra = 0;
  for (const auto& f : *fresh) extra += f.second.size();
  std::vector<Key> keys;
  std::vector<uint64_t> off;
  std::vector<V> data;
  keys.reserve(keys_.size() + fresh->size());
  off.reserve(keys_.size() + fresh->size() + 1);
  data.reserve(data_.size() + extra);
  off.push_back(0);
  size_t i = 0, j = 0;
  while (i < keys_.size() || j < fresh->size()) {
    if (j == fresh->size() || (i < keys_.size() && keys_[i] < (*fresh)[j].first)) {
      keys.push_back(keys_[i]);
      data.insert(data.end(), data_.begin() + off_[i], data_.begin() + off_[i + 1]);
      ++i;
    } else {
      keys.push_back((*fresh)[j].first);
      data.insert(data.end(), (*fresh)[j].second.begin(), (*fresh)[j].second.end());
      ++j;
    }
    off.push_back(data.size());
  }
  keys_.swap(keys);
  off_.swap(off);
  data_.swap(data);
}

template <typename V>
std::string Store<V>::Pull(const Key* keys, size_t n, int width, SArray<char>* out_vals,
                           SArray<int>* out_lens, int64_t step) {
  size_t cur = 0;
  if (width > 0) {
    auto vals = SArray<V>::Uninitialized(n * static_cast<size_t>(width));
    V* out = vals.data();
    const bool spans = contiguous() && uniform_ == width && rule_->ReadWidth(width) == width;
    for (size_t i = 0; i < n; ++i, out += width) {
      if (spans) {
        size_t m = RunLength(keys + i, n - i, cur);
        if (m > 1) {
          rule_->ReadAt(keys[i], data_.data() + off_[cur], nullptr, out,
                        static_cast<int>(m * width), step);
          cur += m;
          i += m - 1;
          out += (m - 1) * width;
          continue;
        }
      }
      Found f = Find(keys[i], &cur);
      if (!f.slot) {
        std::fill(out, out + width, V(0));
      } else if (rule_->ReadWidth(f.len) != width) {
        return LenError(keys[i], rule_->ReadWidth(f.len), width);
      } else {
        rule_->ReadAt(keys[i], f.slot, f.slot + f.len, out, f.len, step);
      }
    }
    *out_vals = SArray<char>(vals);
    return "";
  }
  // Lengths first, then values.
  std::vector<Found> found(n);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    found[i] = Find(keys[i], &cur);
    total += found[i].slot ? rule_->ReadWidth(found[i].len) : 0;
  }
  auto vals = SArray<V>::Uninitialized(total);
  V* out = vals.data();
  out_lens->resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Found& f = found[i];
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
  Found f = Find(key, &cur);
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
void Store<V>::PullRange(Range r, SArray<Key>* out_keys, SArray<char>* out_vals,
                         SArray<int>* out_lens, int64_t step) {
  SArray<Key> keys;
  SArray<int> lens;
  SArray<V> vals;
  size_t i = std::lower_bound(keys_.begin(), keys_.end(), r.begin) - keys_.begin();
  auto it = side_.lower_bound(r.begin);
  auto emit = [&](Key k, const V* slot, int len) {
    const int w = rule_->ReadWidth(len);
    keys.push_back(k);
    lens.push_back(w);
    size_t at = vals.size();
    vals.resize(at + w);
    rule_->ReadAt(k, slot, slot + len, vals.data() + at, len, step);
  };
  for (;;) {
    bool main_ok = i < keys_.size() && keys_[i] < r.end;
    bool side_ok = it != side_.end() && it->first < r.end;
    if (!main_ok && !side_ok) break;
    if (main_ok && (!side_ok || keys_[i] < it->first)) {
      emit(keys_[i], data_.data() + off_[i], SlotLen(off_[i + 1] - off_[i]));
      ++i;
    } else {
      emit(it->first, it->second.data(), SlotLen(it->second.size()));
      ++it;
    }
  }
  *out_keys = keys;
  *out_lens = lens;
  *out_vals = SArray<char>(vals);
}

template <typename V>
size_t Store<V>::CountRange(Range r) const {
  size_t n = std::lower_bound(keys_.begin(), keys_.end(), r.end) -
             std::lower_bound(keys_.begin(), keys_.end(), r.begin);
  for (auto it = side_.lower_bound(r.begin); it != side_.end() && it->first < r.end; ++it) ++n;
  return n;
}

template <typename V>
void Store<V>::ExportRange(Range r, SArray<Key>* out_keys, SArray<char>* out_slots,
                           SArray<uint64_t>* out_sizes) const {
  SArray<Key> keys;
  SArray<V> slots;
  SArray<uint64_t> sizes;
  size_t i = std::lower_bound(keys_.begin(), keys_.end(), r.begin) - keys_.begin();
  auto it = side_.lower_bound(r.begin);
  auto emit = [&](Key k, const V* slot, size_t n) {
    keys.push_back(k);
    sizes.push_back(n);
    size_t at = slots.size();
    slots.resize(at + n);
    std::copy(slot, slot + n, slots.data() + at);
  };
  for (;;) {
    bool main_ok = i < keys_.size() && keys_[i] < r.end;
    bool side_ok = it != side_.end() && it->first < r.end;
    if (!main_ok && !side_ok) break;
    if (main_ok && (!side_ok || keys_[i] < it->first)) {
      emit(keys_[i], data_.data() + off_[i], off_[i + 1] - off_[i]);
      ++i;
    } else {
      emit(it->first, it->second.data(), it->second.size());
      ++it;
    }
  }
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
  std::vector<std::pair<Key, std::vector<V>>> none;
  MergeSide(&none);
  // One pass: old keys outside the ranges and imported keys, merged in key order.
  const V* vals = reinterpret_cast<const V*>(raw.data());
  std::vector<Key> nk;
  std::vector<uint64_t> off{0};
  std::vector<V> data;
  nk.reserve(keys_.size() + keys.size());
  data.reserve(data_.size() + total);
  size_t i = 0, j = 0, r = 0;
  while (i < keys_.size() || j < keys.size()) {
    if (i < keys_.size()) {
      while (r < rs.size() && rs[r].end <= keys_[i]) ++r;
      if (r < rs.size() && rs[r].Contains(keys_[i])) {  // replaced by the import
        ++i;
        continue;
      }
    }
    if (j == keys.size() || (i < keys_.size() && keys_[i] < keys[j])) {
      nk.push_back(keys_[i]);
      data.insert(data.end(), data_.begin() + off_[i], data_.begin() + off_[i + 1]);
      ++i;
    } else {
      nk.push_back(keys[j]);
      data.insert(data.end(), vals, vals + sizes[j]);
      vals += sizes[j];
      ++j;
    }
    off.push_back(data.size());
  }
  keys_.swap(nk);
  off_.swap(off);
  data_.swap(data);
  uniform_ = 0;
  for (size_t k = 0; k < keys_.size(); ++k) NoteWidth(SlotLen(off_[k + 1] - off_[k]));
  return "";
}

template class Store<float>;
template class Store<double>;
template class Store<int32_t>;
template class Store<int64_t>;

}  // namespace ps
