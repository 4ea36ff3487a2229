// The server's parameter store: framework-owned slots updated by an UpdateRule.
#ifndef PS_STORE_STORE_H_
#define PS_STORE_STORE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ps/base.h"
#include "ps/sarray.h"
#include "ps/update_rule.h"
#include "store/block.h"

namespace ps {

/// Type-erased store so the request handling code is written once for every value type.
/// Every method returns "" on success or an error text; a rejected request changes nothing.
class StoreBase {
 public:
  virtual ~StoreBase() = default;
  /// Applies pushed values to n sorted unique keys. lens == nullptr: every key has
  /// val_count / n values; else key i has lens[i] values. Keys out of order are refused: the
  /// walk that finds their slots checks the order too, so a server need not read them first.
  virtual std::string Push(const Key* keys, size_t n, const char* vals, size_t val_count,
                           const int* lens) = 0;
  /// Applies values [offset, offset + count) of a key whose slot holds `total` values.
  virtual std::string PushPart(Key key, uint64_t offset, uint64_t total, const char* vals,
                               size_t count) = 0;
  /// The step of a read that has none (every push counts).
  static constexpr int64_t kLatest = INT64_MAX;
  /// Reads n sorted keys (refused out of order, like Push). width > 0: width values per key, zeros
  /// for missing keys. width == 0: each key's own length goes to *lens (0 for missing keys). step:
  /// the worker's step the pull was issued in (UpdateRule::ReadAt).
  virtual std::string Pull(const Key* keys, size_t n, int width, SArray<char>* vals,
                           SArray<int>* lens, int64_t step = kLatest) = 0;
  /// Reads values [offset, offset + count) of a key whose slot holds `total` values.
  virtual std::string PullPart(Key key, uint64_t offset, uint64_t count, uint64_t total,
                               SArray<char>* vals, int64_t step = kLatest) = 0;
  /// Every stored key of the nr ranges rs (ascending, disjoint) with its values and lengths, in
  /// key order; counts[i]: the keys of range i.
  virtual void PullRanges(const Range* rs, size_t nr, SArray<Key>* keys, SArray<char>* vals,
                          SArray<int>* lens, uint64_t* counts, int64_t step = kLatest) = 0;
  /// Every stored key in r with its values and lengths, in key order.
  void PullRange(Range r, SArray<Key>* keys, SArray<char>* vals, SArray<int>* lens,
                 int64_t step = kLatest) {
    uint64_t count = 0;
    PullRanges(&r, 1, keys, vals, lens, &count, step);
  }
  /// Adds what reducer `id` (RangeReducer) makes of every stored key in r, as a pull at `step`
  /// reads it, into *acc (sized to the reducer's width when empty; "" or why not).
  virtual std::string Reduce(int id, Range r, int64_t step, std::vector<double>* acc) const = 0;
  /// Number of stored keys.
  virtual size_t size() const = 0;
  /// Memory held by the stored keys, values and rule state (not the containers' spare room).
  virtual size_t bytes() const = 0;
  /// Number of stored keys in r.
  virtual size_t CountRange(Range r) const = 0;
  /// The update rule is additive (UpdateRule::Additive).
  virtual bool Additive() const = 0;

  // Range hand-off (refill of a replica, a server joining): the raw slots, update-rule state
  // included, so the receiver continues exactly where the sender stands.
  /// Every stored key in r, its raw slot (values then rule state) and each slot's size in
  /// elements; in pieces: keys from r.begin until their slots pass max_bytes (at least one
  /// key), and *stop (when not null) is where the next piece starts (r.end: none is left).
  virtual void ExportRange(Range r, SArray<Key>* keys, SArray<char>* slots, SArray<uint64_t>* sizes,
                           uint64_t max_bytes = UINT64_MAX, Key* stop = nullptr) const = 0;
  /// Replaces everything stored in the sorted, disjoint ranges rs by an export of them (keys in
  /// order across the ranges); checked first, nothing changes when it is malformed.
  virtual std::string ImportRanges(const std::vector<Range>& rs, const SArray<Key>& keys,
                                   const SArray<char>& slots, const SArray<uint64_t>& sizes) = 0;
  /// Removes every key in r (a range this server no longer holds).
  virtual void EraseRange(Range r) = 0;
};

/// Blocks of sorted arrays (src/store/block.h), each holding the keys of one key interval and
/// split in two when it passes block_bytes. Every rebuild (a merge of new keys, a range import
/// or removal, a split) copies one block, so memory beyond the slots themselves stays in
/// proportion to a block and a range piece, never to the whole store: a server holding many GB
/// can hand ranges off in bounded pieces.
template <typename V>
class Store : public StoreBase {
 public:
  static constexpr size_t kBlockBytes = 8 << 20;

  explicit Store(std::shared_ptr<const UpdateRule<V>> rule, size_t block_bytes = kBlockBytes,
                 Reducers<V> reducers = {});

  std::string Push(const Key* keys, size_t n, const char* vals, size_t val_count,
                   const int* lens) override;
  std::string PushPart(Key key, uint64_t offset, uint64_t total, const char* vals,
                       size_t count) override;
  std::string Pull(const Key* keys, size_t n, int width, SArray<char>* vals, SArray<int>* lens,
                   int64_t step = kLatest) override;
  std::string PullPart(Key key, uint64_t offset, uint64_t count, uint64_t total, SArray<char>* vals,
                       int64_t step = kLatest) override;
  void PullRanges(const Range* rs, size_t nr, SArray<Key>* keys, SArray<char>* vals,
                  SArray<int>* lens, uint64_t* counts, int64_t step = kLatest) override;
  std::string Reduce(int id, Range r, int64_t step, std::vector<double>* acc) const override;
  size_t size() const override;
  size_t bytes() const override;
  size_t CountRange(Range r) const override;
  bool Additive() const override { return rule_->Additive(); }
  void ExportRange(Range r, SArray<Key>* keys, SArray<char>* slots, SArray<uint64_t>* sizes,
                   uint64_t max_bytes = UINT64_MAX, Key* stop = nullptr) const override;
  std::string ImportRanges(const std::vector<Range>& rs, const SArray<Key>& keys,
                           const SArray<char>& slots, const SArray<uint64_t>& sizes) override;
  void EraseRange(Range r) override { ImportRanges({r}, {}, {}, {}); }
  /// Blocks in use (tests).
  size_t blocks() const { return blocks_.size(); }

 private:
  using Blocks = std::map<Key, Block<V>>;  // by first key of the interval; the first is at 0
  // A sorted key list cut into runs that fall into one block each; spans: what the block's
  // Check found for Apply.
  struct Run {
    Block<V>* block;
    size_t begin, end;
    std::vector<typename Block<V>::Span> spans;
  };
  // Cuts keys into runs; false when two runs meet out of order (each run's own order is
  // checked by its block as it walks it).
  bool Runs(const Key* keys, size_t n, std::vector<Run>* runs);
  typename Blocks::iterator BlockOf(Key k);
  // Visits the keys of r over every block it overlaps; stops when f returns false.
  void ForEach(Range r, const std::function<bool(Key, const V*, size_t)>& f) const;
  // Splits the blocks that grew past the limit; drops empty ones (their interval goes to the
  // block before).
  void Reshape(Key from, Key to);

  std::shared_ptr<const UpdateRule<V>> rule_;
  const int sw_;
  const size_t block_bytes_;
  const Reducers<V> reducers_;
  Blocks blocks_;
};

}  // namespace ps

#endif  // PS_STORE_STORE_H_
