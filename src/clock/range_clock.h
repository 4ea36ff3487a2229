// Range vector clocks (the Parameter Server paper, OSDI'14, Algorithm 3). Pure logic.
//
// For every node, the key space [0, kMaxKey) is cut into disjoint half-open ranges, each with
// a timestamp (0 at first). Setting the time of a range splits the ranges it partly covers, so
// a push over one key range costs at most two more ranges, and neighbours that end up with the
// same time are merged again. A server keeps one per key range it serves and carries it in
// messages (chain replication, hand-off), so that an update it already holds is recognised.
#ifndef PS_CLOCK_RANGE_CLOCK_H_
#define PS_CLOCK_RANGE_CLOCK_H_

#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ps/base.h"
#include "ps/sarray.h"

namespace ps {

class RangeVectorClock {
 public:
  /// Sets node's time on r to t (r non-empty, r.end <= kMaxKey). Throws ps::Error otherwise.
  void Set(int node, Range r, int64_t t);
  /// Node's time at key k (0 if never set).
  int64_t Get(int node, Key k) const;
  /// Smallest and largest time node has anywhere in r.
  int64_t Min(int node, Range r) const;
  int64_t Max(int node, Range r) const;
  /// Node's ranges in key order with their times; together they cover [0, kMaxKey), and no
  /// two neighbours share a time.
  std::vector<std::pair<Range, int64_t>> Ranges(int node) const;
  /// Ranges node holds, and over all nodes (the memory the clock uses).
  size_t NumRanges(int node) const;
  size_t TotalRanges() const;
  /// Forgets a node (it left the job).
  void Remove(int node);
  /// Element-wise maximum with another clock (a replica catching up, a hand-off).
  void Merge(const RangeVectorClock& other);
  /// Node ids with a clock.
  std::vector<int> Nodes() const;

  /// Wire form: for each node, (node, count, then count x (begin, end, time)) as uint64s.
  SArray<uint64_t> Encode() const;
  /// Parses Encode's output; throws ps::Error on a malformed or overlapping encoding.
  static RangeVectorClock Decode(const SArray<uint64_t>& wire);
  /// Appends to *wire the encoding of a node whose time is t on r and 0 elsewhere (t > 0):
  /// what Set(node, r, t) on an empty clock, then Encode, writes for it, built directly.
  static void EncodeOne(int node, Range r, int64_t t, SArray<uint64_t>* wire);
  /// Every node of an encoding with its Min over r, in wire order, as Decode(wire) then Min
  /// would give, and with the same checks (throws ps::Error), without building the clock: a
  /// range hand-off carries one node per worker, and a clock of ten thousand maps per range
  /// was most of what hand-offs cost the whole-cluster simulation at that scale.
  static std::vector<std::pair<int, int64_t>> MinsOver(const SArray<uint64_t>& wire, Range r);

 private:
  // Breakpoints: begin -> time of [begin, next begin or kMaxKey). Always holds key 0.
  using Points = std::map<Key, int64_t>;
  static int64_t At(const Points& p, Key k);
  std::unordered_map<int, Points> nodes_;
};

}  // namespace ps

#endif  // PS_CLOCK_RANGE_CLOCK_H_
