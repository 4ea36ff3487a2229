#include "store/block.h"

#include <algorithm>
#include <cstring>

namespace ps {
namespace {

std::string LenError(Key k, int have, uint64_t want) {
  return "key " + std::to_string(k) + " holds " + std::to_string(have) +
         " values, the request has " + std::to_string(want);
}

// What a side-table entry costs besides its values (map node, vector header).
constexpr size_t kSideOverhead = 80;

}  // namespace

template <typename V>
void Block<V>::Seek(Key k, size_t* cursor) const {
  const size_t n = keys_.size(), base = *cursor;
  // Fast path: a key list pushed again walks the main arrays in step.
  if (base >= n || keys_[base] >= k) return;
  // Scattered keys a few slots apart (counts that move: LDA's word-topic cells) are found by
  // counting the next eight keys below k, one vector compare and no branch per key.
  // Exponential search forward from the cursor (past the eight keys just found below k, when
  // they were), then binary search in the last doubling.
  size_t bound = 2;
  if (base + 8 <= n) {
    size_t below = 0;
    for (size_t j = 0; j < 8; ++j) below += keys_[base + j] < k;
    if (below < 8) {
      *cursor = base + below;
      return;
    }
    bound = 16;
  }
  while (base + bound <= n && keys_[base + bound - 1] < k) bound *= 2;
  const size_t lo = base + bound / 2, hi = std::min(n, base + bound);
  *cursor = std::lower_bound(keys_.begin() + lo, keys_.begin() + hi, k) - keys_.begin();
}

template <typename V>
typename Block<V>::Found Block<V>::Find(Key k, size_t* cursor) {
  Seek(k, cursor);
  const size_t i = *cursor;
  Found f;
  if (i < keys_.size() && keys_[i] == k) {
    f.slot = data_.data() + Off(i);
    f.len = SlotLen(Off(i + 1) - Off(i));
    *cursor = i + 1;
    return f;
  }
  return FindSide(k);
}

template <typename V>
typename Block<V>::Found Block<V>::FindSide(Key k) {
  Found f;
  if (side_.empty()) return f;
  auto it = side_.find(k);
  if (it != side_.end()) {
    ++side_hits_;
    f.slot = it->second.data();
    f.len = SlotLen(it->second.size());
  }
  return f;
}

template <typename V>
std::string Block<V>::Check(const Key* keys, size_t n, const int* lens, int w,
                            std::vector<Span>* spans) {
  spans->clear();
  // A fixed-width push into a block whose slots all have that width cannot mismatch.
  const bool lengths = lens || (uniform_ != 0 && uniform_ != w);
  // Apply can take stretches of adjacent slots in one call (then lengths is false).
  const bool stretch = contiguous() && !lens && uniform_ == w;
  if (!lengths && !stretch) return SortedUnique(keys, n) ? "" : kUnsortedKeys;
  size_t cur = 0;
  const size_t size = keys_.size();
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && keys[i] <= keys[i - 1]) return kUnsortedKeys;
    if (stretch) {
      // Find the key, then take the stretch of main-array keys that the next keys of the
      // request equal one for one: a repeated list is one stretch, a scattered subset (each
      // worker's share of the features) stretches of a few keys. Every stored key lands in a
      // span, so Apply looks for the others in the side table only.
      Step(keys[i], &cur);
      if (cur < size && keys_[cur] == keys[i]) {
        // Equal to main-array keys one for one, so sorted and unique like them.
        const size_t m = 1 + RunLength(keys + i + 1, n - i - 1, cur + 1);
        spans->push_back(Span{i, cur, m});
        cur += m;
        i += m - 1;
      }
    } else {
      Found f = Find(keys[i], &cur);
      const int want = lens ? lens[i] : w;
      if (f.slot && f.len != want) return LenError(keys[i], f.len, want);
    }
  }
  return "";
}

template <typename V>
void Block<V>::Apply(const Key* keys, size_t n, const V* vals, const int* lens, int w,
                     const std::vector<Span>& spans) {
  Fresh fresh;
  size_t cur = 0, pos = 0, s = 0;
  // Check located every key of the main arrays in spans (see Check): the others are not there.
  const bool located = contiguous() && !lens && uniform_ == w;
  for (size_t i = 0; i < n;) {
    if (s < spans.size() && spans[s].i == i) {
      // Consecutive keys that are consecutive in the main arrays have adjacent slots: one
      // Apply covers the whole stretch, and its keys are not read again.
      const Span& sp = spans[s++];
      V* slots = data_.data() + Off(sp.cur);
      rule_->Apply(keys[i], vals + pos, slots, nullptr, static_cast<int>(sp.m * w));
      for (size_t j = 0; drops_ && j < sp.m; ++j) {
        zeros_ += Dropped(slots + j * w, static_cast<size_t>(w));
      }
      cur = sp.cur + sp.m;
      pos += sp.m * w;
      i += sp.m;
      continue;
    }
    const int len = lens ? lens[i] : w;
    Found f = located ? FindSide(keys[i]) : Find(keys[i], &cur);
    if (f.slot) {
      rule_->Apply(keys[i], vals + pos, f.slot, f.slot + len, len);
      zeros_ += Dropped(f.slot, static_cast<size_t>(len) * (1 + sw_));
    } else {
      const size_t size = static_cast<size_t>(len) * (1 + sw_);
      V* slot = fresh.Add(keys[i], size);
      rule_->Init(keys[i], slot, slot + len, len);
      rule_->Apply(keys[i], vals + pos, slot, slot + len, len);
      if (Dropped(slot, size)) fresh.PopBack();
    }
    pos += len;
    ++i;
  }
  if (!fresh.keys.empty()) {
    Insert(&fresh);
  } else if (TooManyZeros() || SideWorn()) {
    MergeSide(&fresh);
  }
}

template <typename V>
void Block<V>::InsertPart(Key key, uint64_t offset, uint64_t total, const V* vals, size_t count) {
  Fresh fresh;
  V* slot = fresh.Add(key, total * (1 + sw_));
  rule_->Init(key, slot, slot + total, static_cast<int>(total));
  rule_->Apply(key, vals, slot + offset, slot + total + offset * sw_, static_cast<int>(count));
  Insert(&fresh);
}

template <typename V>
void Block<V>::Insert(Fresh* fresh) {
  const size_t n = fresh->keys.size();
  for (size_t j = 0; j < n; ++j) NoteWidth(SlotLen(fresh->off[j + 1] - fresh->off[j]));
  const size_t limit = std::max<size_t>(1024, keys_.size() / 8);
  if (n + side_.size() > limit || n * 32 > keys_.size()) {
    MergeSide(fresh);
    return;
  }
  for (size_t j = 0; j < n; ++j) {
    const auto b = fresh->data.begin() + static_cast<std::ptrdiff_t>(fresh->off[j]);
    const auto e = fresh->data.begin() + static_cast<std::ptrdiff_t>(fresh->off[j + 1]);
    bytes_ += static_cast<size_t>(e - b) * sizeof(V) + sizeof(Key) + kSideOverhead;
    side_.emplace(fresh->keys[j], std::vector<V>(b, e));
  }
}

template <typename V>
void Block<V>::MergeSide(Fresh* fresh) {
  // Three sorted, disjoint sources: main arrays, side table, fresh slots (in key order: Apply
  // takes sorted, unique keys, which the server checks before the store sees them); zero
  // slots of a rule that drops them are left out.
  // The side table joins the fresh slots (both small next to the arrays), then they are
  // merged into the arrays in place, from the back: no second copy of the block and no freshly
  // faulted pages for it (a push of many new keys merges every time).
  // Zero slots stay until they pass a quarter of the keys: counts that return to zero often
  // come back (LDA's word-topic counts do), and a kept slot takes them without a merge.
  const bool drop = TooManyZeros();
  Fresh add;
  if (side_.empty()) {
    add = std::move(*fresh);
  } else {
    size_t j = 0;
    auto side = side_.begin();
    const size_t nf = fresh->keys.size();
    while (j < nf || side != side_.end()) {
      if (j < nf && (side == side_.end() || fresh->keys[j] < side->first)) {
        const size_t size = fresh->off[j + 1] - fresh->off[j];
        std::copy_n(fresh->data.data() + fresh->off[j], size, add.Add(fresh->keys[j], size));
        ++j;
      } else {
        std::copy(side->second.begin(), side->second.end(),
                  add.Add(side->first, side->second.size()));
        ++side;
      }
    }
    side_.clear();
    side_hits_ = 0;
  }
  zeros_ = 0;  // counted again below: the zero slots kept
  // Slots of the block's one size keep the offsets implicit through the merge (a slot's
  // position is then its index times the size, before and after); others need them written.
  bool strided = stride_ > 0;
  for (size_t j = 0; strided && j < add.keys.size(); ++j) {
    strided = add.off[j + 1] - add.off[j] == stride_;
  }
  if (!strided) Expand();
  const size_t nm = keys_.size(), na = add.keys.size(), n = nm + na;
  const uint64_t d = data_.size() + add.data.size();
  keys_.resize(n);
  data_.resize(d);
  if (!strided) {
    off_.resize(n + 1);
    off_[n] = d;  // where the last kept slot ends
  }
  // Everything not yet written fits below the write position, so it never passes a slot not
  // yet read: wd >= the end of main slot i.
  size_t i = nm, j = na, wk = n;
  uint64_t wd = d;
  while (i > 0 || j > 0) {
    if (j == 0 || (i > 0 && keys_[i - 1] > add.keys[j - 1])) {
      // A run of kept main slots above the next fresh key moves as one block.
      const Key above = j > 0 ? add.keys[j - 1] : 0;
      size_t m = 0;
      if (!drop) {
        // Nothing is dropped: the run ends at the fresh key, found by galloping down (runs
        // between scattered fresh keys are short), and its zero slots are counted in one loop.
        m = j == 0 ? i : RunAbove(above, i);
        if (drops_) zeros_ += ZeroSlots(i - m, i);
      } else {
        while (m < i && (j == 0 || keys_[i - 1 - m] > above)) {
          if (Dropped(data_.data() + Off(i - 1 - m), Off(i - m) - Off(i - 1 - m))) break;
          ++m;
        }
      }
      if (m == 0) {  // a dropped slot
        --i;
        continue;
      }
      const uint64_t from = Off(i - m), size = Off(i) - from, to = wd - size;
      std::memmove(data_.data() + to, data_.data() + from, size * sizeof(V));
      // From the top down: the targets lie at or above the sources.
      std::copy_backward(keys_.begin() + static_cast<std::ptrdiff_t>(i - m),
                         keys_.begin() + static_cast<std::ptrdiff_t>(i),
                         keys_.begin() + static_cast<std::ptrdiff_t>(wk));
      for (size_t x = 0; !strided && x < m; ++x) off_[wk - 1 - x] = off_[i - 1 - x] - from + to;
      i -= m;
      wk -= m;
      wd = to;
      continue;
    }
    --j;
    const V* src = add.data.data() + add.off[j];
    const size_t size = add.off[j + 1] - add.off[j];
    if (Dropped(src, size)) continue;
    wd -= size;
    std::memmove(data_.data() + wd, src, size * sizeof(V));
    --wk;
    keys_[wk] = add.keys[j];
    if (!strided) off_[wk] = wd;
  }
  if (wk > 0) {  // dropped slots left room at the front
    std::move(keys_.begin() + static_cast<std::ptrdiff_t>(wk), keys_.end(), keys_.begin());
    if (!strided) {
      for (size_t x = wk; x <= n; ++x) off_[x - wk] = off_[x] - wd;
      off_.resize(n - wk + 1);
    }
    std::memmove(data_.data(), data_.data() + wd, (d - wd) * sizeof(V));
    keys_.resize(n - wk);
    data_.resize(d - wd);
  }
  Compact();
  CountBytes();
}

template <typename V>
size_t Block<V>::RunAbove(Key k, size_t i) const {
  // The main keys in [0, i) above k, counted down from i: gallop, then binary search.
  size_t step = 1;
  while (step <= i && keys_[i - step] > k) step *= 2;
  const size_t lo = step > i ? 0 : i - step, hi = i - step / 2;
  const size_t first = std::upper_bound(keys_.begin() + static_cast<std::ptrdiff_t>(lo),
                                        keys_.begin() + static_cast<std::ptrdiff_t>(hi), k) -
                       keys_.begin();
  return i - first;
}

template <typename V>
size_t Block<V>::ZeroSlots(size_t lo, size_t hi) const {
  if (stride_ == 1) {
    const V* d = data_.data();
    size_t n = 0;
    for (size_t x = lo; x < hi; ++x) n += d[x] == V(0);
    return n;
  }
  size_t n = 0;
  for (size_t x = lo; x < hi; ++x) n += Dropped(data_.data() + Off(x), Off(x + 1) - Off(x));
  return n;
}

template <typename V>
void Block<V>::Expand() {
  if (stride_ == 0) return;
  off_.resize(keys_.size() + 1);
  for (size_t i = 0; i < off_.size(); ++i) off_[i] = i * stride_;
  stride_ = 0;
}

template <typename V>
void Block<V>::Compact() {
  if (stride_ > 0 || keys_.empty()) return;
  const uint64_t size = off_[1] - off_[0];
  if (size == 0) return;
  for (size_t k = 1; k < keys_.size(); ++k) {
    if (off_[k + 1] - off_[k] != size) return;
  }
  stride_ = size;
  std::vector<uint64_t>().swap(off_);  // its memory goes back now
}

template <typename V>
void Block<V>::CountBytes() {
  bytes_ = data_.size() * sizeof(V) + keys_.size() * sizeof(Key) + off_.size() * sizeof(uint64_t);
  for (const auto& s : side_) bytes_ += s.second.size() * sizeof(V) + sizeof(Key) + kSideOverhead;
}

template <typename V>
std::string Block<V>::Read(const Key* keys, size_t n, int width, V* out, int64_t step) {
  const std::string err = contiguous() && uniform_ == width && rule_->ReadsRaw()
                              ? ReadRaw(keys, n, width, out)
                              : ReadRule(keys, n, width, out, step);
  if (err.empty() && SideWorn()) {
    // After the reads: nothing points into the slots any more.
    Fresh none;
    MergeSide(&none);
  }
  return err;
}

template <typename V>
std::string Block<V>::ReadRaw(const Key* keys, size_t n, int width, V* out) {
  // A pull returns the stored values as they are: each stretch of stored keys is copied, with
  // no call of the rule (for a scattered subset, a call for every few keys).
  size_t cur = 0;
  const size_t size = keys_.size(), wd = static_cast<size_t>(width);
  for (size_t i = 0; i < n; ++i, out += wd) {
    if (i > 0 && keys[i] <= keys[i - 1]) return kUnsortedKeys;
    Step(keys[i], &cur);
    if (cur < size && keys_[cur] == keys[i]) {
      const size_t m = 1 + RunLength(keys + i + 1, n - i - 1, cur + 1);
      const V* slot = data_.data() + Off(cur);
      const size_t count = m * wd;
      if (count <= 8) {
        for (size_t c = 0; c < count; ++c) out[c] = slot[c];
      } else {
        std::memcpy(out, slot, count * sizeof(V));
      }
      cur += m;
      i += m - 1;
      out += (m - 1) * wd;
      continue;
    }
    const Found f = FindSide(keys[i]);
    if (!f.slot) {
      std::fill(out, out + wd, V(0));
    } else if (f.len != width) {
      return LenError(keys[i], f.len, width);
    } else {
      std::copy(f.slot, f.slot + wd, out);
    }
  }
  return "";
}

template <typename V>
std::string Block<V>::ReadRule(const Key* keys, size_t n, int width, V* out, int64_t step) {
  size_t cur = 0;
  const bool spans = contiguous() && uniform_ == width && rule_->ReadWidth(width) == width;
  for (size_t i = 0; i < n; ++i, out += width) {
    if (i > 0 && keys[i] <= keys[i - 1]) return kUnsortedKeys;
    if (spans) {
      // A stretch equal to main-array keys is sorted and unique like them.
      size_t m = RunLength(keys + i, n - i, cur);
      if (m > 1) {
        rule_->ReadAt(keys[i], data_.data() + Off(cur), nullptr, out, static_cast<int>(m * width),
                      step);
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
  return "";
}

template <typename V>
bool Block<V>::ForEach(Range r, const std::function<bool(Key, const V*, size_t)>& f) const {
  size_t i = std::lower_bound(keys_.begin(), keys_.end(), r.begin) - keys_.begin();
  auto it = side_.lower_bound(r.begin);
  for (;;) {
    const bool main_ok = i < keys_.size() && keys_[i] < r.end;
    const bool side_ok = it != side_.end() && it->first < r.end;
    if (!main_ok && !side_ok) return true;
    // Zero slots a rule drops are as good as gone (range pulls, hand-offs and digests agree
    // whether or not a block has merged them away yet).
    if (main_ok && (!side_ok || keys_[i] < it->first)) {
      const size_t size = Off(i + 1) - Off(i);
      if (!Dropped(data_.data() + Off(i), size) && !f(keys_[i], data_.data() + Off(i), size)) {
        return false;
      }
      ++i;
    } else {
      if (!Dropped(it->second.data(), it->second.size()) &&
          !f(it->first, it->second.data(), it->second.size())) {
        return false;
      }
      ++it;
    }
  }
}

template <typename V>
void Block<V>::AppendRaw(Range r, SArray<Key>* keys, SArray<int>* lens, SArray<V>* vals) const {
  size_t i = std::lower_bound(keys_.begin(), keys_.end(), r.begin) - keys_.begin();
  const size_t end = std::lower_bound(keys_.begin() + i, keys_.end(), r.end) - keys_.begin();
  const auto side_begin = side_.lower_bound(r.begin);
  // Room for all of it first (dropped slots make it less), then plain stores: a range of
  // one-value counts costs a few instructions per key.
  size_t n = end - i, m = Off(end) - Off(i);
  for (auto it = side_begin; it != side_.end() && it->first < r.end; ++it) {
    n++;
    m += it->second.size();
  }
  const size_t k0 = keys->size(), v0 = vals->size();
  keys->resize(k0 + n);
  lens->resize(k0 + n);
  vals->resize(v0 + m);
  Key* ko = keys->data() + k0;
  int* lo = lens->data() + k0;
  V* vo = vals->data() + v0;
  auto add = [&](Key k, const V* slot, size_t size) {
    if (Dropped(slot, size)) return;
    *ko++ = k;
    *lo++ = static_cast<int>(size);
    for (size_t j = 0; j < size; ++j) *vo++ = slot[j];
  };
  auto it = side_begin;
  while (i < end || (it != side_.end() && it->first < r.end)) {
    const bool side_next =
        it != side_.end() && it->first < r.end && (i == end || it->first < keys_[i]);
    if (side_next) {
      add(it->first, it->second.data(), it->second.size());
      ++it;
    } else {
      add(keys_[i], data_.data() + Off(i), Off(i + 1) - Off(i));
      ++i;
    }
  }
  keys->resize(ko - keys->data());
  lens->resize(lo - lens->data());
  vals->resize(vo - vals->data());
}

template <typename V>
void Block<V>::ReduceRaw(Range r, const RangeReducer<V>& f, double* acc) const {
  const size_t begin = std::lower_bound(keys_.begin(), keys_.end(), r.begin) - keys_.begin();
  const size_t end = std::lower_bound(keys_.begin() + begin, keys_.end(), r.end) - keys_.begin();
  // A sum over keys needs no order: the main arrays, then the side table.
  for (size_t i = begin; i < end; ++i) {
    const V* slot = data_.data() + Off(i);
    const size_t size = Off(i + 1) - Off(i);
    if (!Dropped(slot, size)) f.Add(keys_[i], slot, static_cast<int>(size), acc);
  }
  for (auto it = side_.lower_bound(r.begin); it != side_.end() && it->first < r.end; ++it) {
    if (!Dropped(it->second.data(), it->second.size())) {
      f.Add(it->first, it->second.data(), static_cast<int>(it->second.size()), acc);
    }
  }
}

template <typename V>
size_t Block<V>::CountRange(Range r) const {
  size_t n = std::lower_bound(keys_.begin(), keys_.end(), r.end) -
             std::lower_bound(keys_.begin(), keys_.end(), r.begin);
  for (auto it = side_.lower_bound(r.begin); it != side_.end() && it->first < r.end; ++it) ++n;
  return n;
}

template <typename V>
void Block<V>::Replace(const std::vector<Range>& rs, const Key* keys, size_t n, const V* vals,
                       const uint64_t* sizes) {
  Fresh none;
  MergeSide(&none);
  uint64_t total = 0;
  for (size_t j = 0; j < n; ++j) total += sizes[j];
  // One pass: old keys outside the ranges and imported keys, merged in key order.
  std::vector<Key> nk;
  std::vector<uint64_t> off{0};
  std::vector<V> data;
  nk.reserve(keys_.size() + n);
  data.reserve(data_.size() + total);
  size_t i = 0, j = 0, r = 0;
  while (i < keys_.size() || j < n) {
    if (i < keys_.size()) {
      while (r < rs.size() && rs[r].end <= keys_[i]) ++r;
      if (r < rs.size() && rs[r].Contains(keys_[i])) {  // replaced by the import
        ++i;
        continue;
      }
    }
    if (j == n || (i < keys_.size() && keys_[i] < keys[j])) {
      nk.push_back(keys_[i]);
      data.insert(data.end(), data_.begin() + Off(i), data_.begin() + Off(i + 1));
      ++i;
    } else {
      nk.push_back(keys[j]);
      data.insert(data.end(), vals, vals + sizes[j]);
      vals += sizes[j];
      ++j;
    }
    off.push_back(data.size());
  }
  // Swapped in, so the old arrays' memory goes back now, not at the next growth.
  keys_.swap(nk);
  off_.swap(off);
  stride_ = 0;
  data_.swap(data);
  Rebuild();
}

template <typename V>
Key Block<V>::Split(Block* upper) {
  Fresh none;
  MergeSide(&none);
  Expand();
  const size_t half = keys_.size() / 2;
  const uint64_t at = off_[half];
  upper->keys_.assign(keys_.begin() + half, keys_.end());
  upper->data_.assign(data_.begin() + at, data_.end());
  upper->off_.clear();
  for (size_t i = half; i < off_.size(); ++i) upper->off_.push_back(off_[i] - at);
  upper->Rebuild();
  std::vector<Key>(keys_.begin(), keys_.begin() + half).swap(keys_);
  std::vector<V>(data_.begin(), data_.begin() + at).swap(data_);
  std::vector<uint64_t>(off_.begin(), off_.begin() + half + 1).swap(off_);
  Rebuild();
  return upper->keys_.front();
}

template <typename V>
void Block<V>::Rebuild() {
  uniform_ = 0;
  for (size_t k = 0; k < keys_.size(); ++k) NoteWidth(SlotLen(Off(k + 1) - Off(k)));
  for (const auto& s : side_) NoteWidth(SlotLen(s.second.size()));
  Compact();
  CountBytes();
}

template class Block<float>;
template class Block<double>;
template class Block<int32_t>;
template class Block<int64_t>;

}  // namespace ps
