// One block of a Store: the slots of the keys in one key interval, as sorted arrays plus a
// small sorted side table. Pushes arrive with sorted keys, so lookups gallop forward through
// the main arrays (a repeated key list costs O(keys)); new keys go to the side table, which is
// merged into the main arrays when it grows past 1/8 of them, so a stream of inserts costs
// O(1) amortised copies per key, or when its keys have been looked up often enough to pay for
// the merge. When every main slot has one size (a fixed-width table, the
// common case), slot i starts at i times that size and no offsets are kept: 8 bytes less per key
// (a 64-bit counter took 24 bytes with its key and offset, now 16). Every rebuild (merge, import,
// split) copies this block only: the Store keeps blocks small, so no operation needs memory in
// proportion to the whole store.
#ifndef PS_STORE_BLOCK_H_
#define PS_STORE_BLOCK_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ps/base.h"
#include "ps/sarray.h"
#include "ps/update_rule.h"
#include "util/sorted_keys.h"

namespace ps {

/// What a request with keys out of order gets (the store checks the order as it walks).
inline constexpr char kUnsortedKeys[] = "keys not sorted and unique";

template <typename V>
class Block {
 public:
  struct Found {
    V* slot = nullptr;
    int len = 0;
  };

  /// Keys [i, i + m) of a request equal main-array keys [cur, cur + m) one for one.
  struct Span {
    size_t i, cur, m;
  };

  Block(const UpdateRule<V>* rule, int state_width)
      : rule_(rule), sw_(state_width), drops_(rule->DropsZeros()) {}

  /// Looks up k, galloping in the main arrays from *cursor (advanced past k).
  Found Find(Key k, size_t* cursor);
  /// "" or why n keys with lens (or width w each) cannot be applied: they are not sorted and
  /// unique, or do not fit the slots they hit. Appends to *spans (cleared first) the stretches
  /// that equal main-array keys one for one, so that Apply takes them without reading their
  /// keys again: one walk over a repeated key list both checks and locates it.
  std::string Check(const Key* keys, size_t n, const int* lens, int w, std::vector<Span>* spans);
  /// Applies checked values (lens or width w per key) with the spans Check found, before
  /// anything else changed this block; new keys get fresh slots.
  void Apply(const Key* keys, size_t n, const V* vals, const int* lens, int w,
             const std::vector<Span>& spans);
  /// Creates the slot of key (Init) and applies vals to [offset, offset + count) of it.
  void InsertPart(Key key, uint64_t offset, uint64_t total, const V* vals, size_t count);
  /// Reads n sorted keys, width values each (checked by the caller's rule widths); zeros for
  /// missing keys. "" or a width error, or kUnsortedKeys (out is then partly written).
  std::string Read(const Key* keys, size_t n, int width, V* out, int64_t step);
  /// Calls f(key, slot, slot size) for each key in r in order until f returns false; returns
  /// false when f did.
  bool ForEach(Range r, const std::function<bool(Key, const V*, size_t)>& f) const;
  size_t CountRange(Range r) const;
  /// Appends the keys of r in order, their value counts and their stored values as they are
  /// (a rule that ReadsRaw, no state): ForEach and Read without a call per key.
  void AppendRaw(Range r, SArray<Key>* keys, SArray<int>* lens, SArray<V>* vals) const;
  /// Adds what f makes of every kept key of r, reading the stored values as they are.
  void ReduceRaw(Range r, const RangeReducer<V>& f, double* acc) const;
  size_t size() const { return keys_.size() + side_.size(); }
  /// Keys held in the side table (not yet merged into the main arrays).
  size_t side_size() const { return side_.size(); }
  /// Memory held by the slots and keys (not the containers' spare capacity).
  size_t bytes() const { return bytes_; }
  /// Replaces every key in the sorted, disjoint ranges rs by n checked imported keys (which lie
  /// in them) with their raw slots.
  void Replace(const std::vector<Range>& rs, const Key* keys, size_t n, const V* slots,
               const uint64_t* sizes);
  /// Moves the upper half of the keys to a new block; returns its first key.
  Key Split(Block* upper);
  int SlotLen(uint64_t size) const { return static_cast<int>(sw_ == 0 ? size : size / (1 + sw_)); }

 private:
  // Read's two walks: stretches copied as they are (a rule that ReadsRaw, one width), or each
  // key or stretch through the rule.
  std::string ReadRaw(const Key* keys, size_t n, int width, V* out);
  std::string ReadRule(const Key* keys, size_t n, int width, V* out, int64_t step);
  // New slots of one Apply, in key order, flat: no allocation per key.
  struct Fresh {
    std::vector<Key> keys;
    std::vector<uint64_t> off{0};  // slot i is data[off[i], off[i+1])
    std::vector<V> data;
    // Appends a zeroed slot of size values for key and returns it.
    V* Add(Key key, size_t size) {
      keys.push_back(key);
      data.resize(data.size() + size);
      off.push_back(data.size());
      return data.data() + off[off.size() - 2];
    }
    void PopBack() {
      keys.pop_back();
      off.pop_back();
      data.resize(off.back());
    }
  };
  // k in the side table only (Check showed it is not in the main arrays).
  Found FindSide(Key k);
  void Insert(Fresh* fresh);
  void MergeSide(Fresh* fresh);
  // How many main keys of [0, i) lie above k (they all do from some index on: keys ascend).
  size_t RunAbove(Key k, size_t i) const;
  // Main slots in [lo, hi) whose values and state are all zero (a rule that drops them).
  size_t ZeroSlots(size_t lo, size_t hi) const;
  void Rebuild();  // uniform_, the offsets' form and bytes_ from the arrays
  // Where main slot i starts (i == keys_.size(): where the last one ends).
  uint64_t Off(size_t i) const { return stride_ ? i * stride_ : off_[i]; }
  // Offsets as an array (before slots of another size join), and back to a stride when every
  // main slot has one size.
  void Expand();
  void Compact();
  void CountBytes();
  // The rule drops zero slots and every value and state word of this one is zero.
  bool Dropped(const V* slot, size_t size) const {
    if (!drops_) return false;
    for (size_t i = 0; i < size; ++i) {
      if (slot[i] != V(0)) return false;
    }
    return true;
  }
  // Slots of neighbouring keys are adjacent and hold only values (no state, one width), and
  // the rule allows calls that span keys.
  bool contiguous() const { return sw_ == 0 && uniform_ > 0 && rule_->Elementwise(); }
  // How many of keys[0, n) equal keys_[cur, ...) one for one (capped for cache locality).
  // Eight at a time with one branch, which the compiler turns into vector compares.
  [[gnu::always_inline]] size_t RunLength(const Key* keys, size_t n, size_t cur) const {
    size_t m = 0, limit = std::min(n, keys_.size() - std::min(cur, keys_.size()));
    limit = std::min<size_t>(limit, 1 << 16);
    const Key* mine = keys_.data() + cur;
    // The first keys one by one: a scattered subset's stretches are a few keys long, where
    // eight compared at once would mostly be wasted.
    for (; m < 4; ++m) {
      if (m == limit || mine[m] != keys[m]) return m;
    }
    while (m + 8 <= limit) {
      Key diff = 0;
      for (size_t k = 0; k < 8; ++k) diff |= mine[m + k] ^ keys[m + k];
      if (diff != 0) break;
      m += 8;
    }
    while (m < limit && mine[m] == keys[m]) ++m;
    return m;
  }
  // Moves *cursor to where k is or would be in the main arrays (Find without the side table).
  void Seek(Key k, size_t* cursor) const;
  // Seek for the next key of a request, inline: counts the next eight main keys below k with
  // no branch on the count. A scattered subset's next key lies a slot or two on, at random:
  // Seek's test whether k is already at the cursor guessed wrong for every gap.
  void Step(Key k, size_t* cursor) const {
    const size_t c = *cursor;
    if (c + 8 <= keys_.size()) {
      const Key* mine = keys_.data() + c;
      size_t below = 0;
      for (size_t j = 0; j < 8; ++j) below += mine[j] < k;
      if (below < 8) {
        *cursor = c + below;
        return;
      }
    }
    Seek(k, cursor);
  }
  void NoteWidth(int len) {
    if (uniform_ == 0) {
      uniform_ = len;
    } else if (uniform_ != len) {
      uniform_ = -1;
    }
  }

  const UpdateRule<V>* rule_;
  int sw_;
  bool drops_;
  // Zero slots held: counted at each merge, plus the slots an Apply left at zero since (an upper
  // bound). Past a quarter of the keys the block is merged without them.
  size_t zeros_ = 0;
  bool TooManyZeros() const { return zeros_ > 0 && zeros_ * 4 > size() + 64; }
  // Side-table lookups that found their key since the last merge. A tree lookup costs tens of
  // times a slot's move in a merge, so once they add up to a sixteenth of the block the side
  // table is merged: keys that arrived in small batches are read again and again (a feature
  // first seen late is pushed every iteration after), and would else cost a tree walk each
  // time for as long as the side table stays under 1/8 of the block.
  size_t side_hits_ = 0;
  bool SideWorn() const { return !side_.empty() && side_hits_ > size() / 16 + 64; }
  std::vector<Key> keys_;
  // Slot i is data_[Off(i), Off(i + 1)): i * stride_ when stride_ > 0 (off_ then empty), else
  // off_[i].
  std::vector<uint64_t> off_{0};
  uint64_t stride_ = 0;
  std::vector<V> data_;
  std::map<Key, std::vector<V>> side_;
  int uniform_ = 0;  // 0: empty; >0: every slot holds this many values; -1: mixed
  size_t bytes_ = 0;
};

}  // namespace ps

#endif  // PS_STORE_BLOCK_H_
