// The server's parameter store: framework-owned slots updated by an UpdateRule.
#ifndef PS_STORE_STORE_H_
#define PS_STORE_STORE_H_

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ps/base.h"
#include "ps/sarray.h"
#include "ps/update_rule.h"

namespace ps {

/// Type-erased store so the request handling code is written once for every value type.
/// Every method returns "" on success or an error text; a rejected request changes nothing.
class StoreBase {
 public:
  virtual ~StoreBase() = default;
  /// Applies pushed values to n sorted unique keys. lens == nullptr: every key has
  /// val_count / n values; else key i has lens[i] values.
  virtual std::string Push(const Key* keys, size_t n, const char* vals, size_t val_count,
                           const int* lens) = 0;
  /// Applies values [offset, offset + count) of a key whose slot holds `total` values.
  virtual std::string PushPart(Key key, uint64_t offset, uint64_t total, const char* vals,
                               size_t count) = 0;
  /// The step of a read that has none (every push counts).
  static constexpr int64_t kLatest = INT64_MAX;
  /// Reads n sorted keys. width > 0: width values per key, zeros for missing keys. width == 0:
  /// each key's own length goes to *lens (0 for missing keys). step: the worker's step the pull
  /// was issued in (UpdateRule::ReadAt).
  virtual std::string Pull(const Key* keys, size_t n, int width, SArray<char>* vals,
                           SArray<int>* lens, int64_t step = kLatest) = 0;
  /// Reads values [offset, offset + count) of a key whose slot holds `total` values.
  virtual std::string PullPart(Key key, uint64_t offset, uint64_t count, uint64_t total,
                               SArray<char>* vals, int64_t step = kLatest) = 0;
  /// Every stored key in r with its values and lengths, in key order.
  virtual void PullRange(Range r, SArray<Key>* keys, SArray<char>* vals, SArray<int>* lens,
                         int64_t step = kLatest) = 0;
  /// Number of stored keys.
  virtual size_t size() const = 0;
  /// Number of stored keys in r.
  virtual size_t CountRange(Range r) const = 0;
  /// The update rule is additive (UpdateRule::Additive).
  virtual bool Additive() const = 0;

  // Range hand-off (refill of a replica, a server joining): the raw slots, update-rule state
  // included, so the receiver continues exactly where the sender stands.
  /// Every stored key in r, its raw slot (values then rule state) and each slot's size in
  /// elements.
  virtual void ExportRange(Range r, SArray<Key>* keys, SArray<char>* slots,
                           SArray<uint64_t>* sizes) const = 0;
  /// Replaces everything stored in the sorted, disjoint ranges rs by an export of them (keys in
  /// order across the ranges); checked first, nothing changes when it is malformed.
  virtual std::string ImportRanges(const std::vector<Range>& rs, const SArray<Key>& keys,
                                   const SArray<char>& slots, const SArray<uint64_t>& sizes) = 0;
  /// Removes every key in r (a range this server no longer holds).
  virtual void EraseRange(Range r) = 0;
};

/// Sorted arrays plus a small sorted side table. Pushes arrive with sorted keys, so lookups
/// gallop forward through the main arrays (a repeated key list costs O(keys)); new keys go to
/// the side table, which is merged into the main arrays when it grows past 1/8 of them, so a
/// stream of inserts costs O(1) amortised copies per key.
template <typename V>
class Store : public StoreBase {
 public:
  explicit Store(std::shared_ptr<const UpdateRule<V>> rule)
      : rule_(std::move(rule)), sw_(rule_->StateWidth()) {}

  std::string Push(const Key* keys, size_t n, const char* vals, size_t val_count,
                   const int* lens) override;
  std::string PushPart(Key key, uint64_t offset, uint64_t total, const char* vals,
                       size_t count) override;
  std::string Pull(const Key* keys, size_t n, int width, SArray<char>* vals, SArray<int>* lens,
                   int64_t step = kLatest) override;
  std::string PullPart(Key key, uint64_t offset, uint64_t count, uint64_t total, SArray<char>* vals,
                       int64_t step = kLatest) override;
  void PullRange(Range r, SArray<Key>* keys, SArray<char>* vals, SArray<int>* lens,
                 int64_t step = kLatest) override;
  size_t size() const override { return keys_.size() + side_.size(); }
  size_t CountRange(Range r) const override;
  bool Additive() const override { return rule_->Additive(); }
  void ExportRange(Range r, SArray<Key>* keys, SArray<char>* slots,
                   SArray<uint64_t>* sizes) const override;
  std::string ImportRanges(const std::vector<Range>& rs, const SArray<Key>& keys,
                           const SArray<char>& slots, const SArray<uint64_t>& sizes) override;
  void EraseRange(Range r) override { ImportRanges({r}, {}, {}, {}); }

 private:
  struct Found {
    V* slot = nullptr;
    int len = 0;
  };
  // Looks up k, galloping in the main arrays from *cursor (advanced past k).
  Found Find(Key k, size_t* cursor);
  // Creates the slot of a new key (Init, then the caller applies); merges when needed.
  void Insert(const std::vector<std::pair<Key, std::vector<V>>>& fresh);
  void MergeSide(std::vector<std::pair<Key, std::vector<V>>>* fresh);
  // Values in a slot of `size` entries. A 64-bit division costs ~40 cycles, more than the rest
  // of a lookup, so the stateless case (most rules) skips it.
  int SlotLen(uint64_t size) const { return static_cast<int>(sw_ == 0 ? size : size / (1 + sw_)); }
  // Slots of neighbouring keys are adjacent and hold only values (no state, one width), and
  // the rule allows calls that span keys.
  bool contiguous() const { return sw_ == 0 && uniform_ > 0 && rule_->Elementwise(); }
  // How many of keys[0, n) equal keys_[cur, ...) one for one (capped for cache locality).
  size_t RunLength(const Key* keys, size_t n, size_t cur) const {
    size_t m = 0, limit = std::min(n, keys_.size() - std::min(cur, keys_.size()));
    limit = std::min<size_t>(limit, 1 << 16);
    while (m < limit && keys_[cur + m] == keys[m]) ++m;
    return m;
  }
  void NoteWidth(int len) {
    if (uniform_ == 0) {
      uniform_ = len;
    } else if (uniform_ != len) {
      uniform_ = -1;
    }
  }

  std::shared_ptr<const UpdateRule<V>> rule_;
  const int sw_;
  std::vector<Key> keys_;
  std::vector<uint64_t> off_{0};  // slot i is data_[off_[i], off_[i+1])
  std::vector<V> data_;
  std::map<Key, std::vector<V>> side_;
  int uniform_ = 0;  // 0: empty; >0: every slot holds this many values; -1: mixed
};

}  // namespace ps

#endif  // PS_STORE_STORE_H_
