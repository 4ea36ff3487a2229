// Sequence points of key ranges: the order along a chain (DESIGN §8, invariant 3). Pure logic.
//
// A master numbers the updates it applies per key range: each update moves the point of
// every range it touches from `prev` to `next` and its copies carry those (range, prev, next)
// entries. A replica applies a copy only when its own points over the entry's range equal
// `prev`, so it applies updates in exactly the master's order; a copy that arrives early
// (the one before it was lost, or is resent) waits until the gap is filled. Points live in an
// interval map over the key space, so they follow the ring's segments as they split and
// merge, and a range snapshot carries them (a refilled replica continues at the master's
// point).
//
// A server that takes over a range without a clean hand-over (its master died) jumps: its next
// update moves the point from where it stands to a base no server has reached yet (the ring
// epoch in the high 24 bits, as raft's term). A replica at the same point follows; one whose
// history differs (it holds more than the new master, or less) sees a mismatch or a gap and
// fetches the range afresh instead of silently applying on top of another history.
#ifndef PS_REPLICATION_SEQ_MAP_H_
#define PS_REPLICATION_SEQ_MAP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ps/base.h"

namespace ps {

class SeqMap {
 public:
  /// Every key starts at point 0.
  SeqMap();

  /// Words per entry on the wire: begin, end, prev, next. One update of a range whose parts
  /// stand at different points (ranges merged after a failure) gives one entry per part, all
  /// moving to the same next; every entry of such a group but the last has kLinked set in its
  /// next word, so a copy cut by chain keeps the group whole (a replica must move all of it).
  static constexpr size_t kEntry = 4;
  static constexpr uint64_t kLinked = uint64_t{1} << 63;
  static uint64_t Next(uint64_t word) { return word & ~kLinked; }
  /// The base a takeover at ring `epoch` jumps to (above every point of earlier epochs unless a
  /// range saw 2^40 updates within one epoch).
  static uint64_t Base(uint64_t epoch) { return epoch << 40; }

  /// Master: numbers one update of the keys in r: all of r moves to one next point, above every
  /// point in r and every pending jump; one entry per part of r with its own prev (a group).
  void Bump(Range r, std::vector<uint64_t>* out);
  /// The next Bump of any key in r moves it to at least base + 1 (a takeover).
  void Jump(Range r, uint64_t base);

  /// How a replica's points over the entries' ranges (restricted to `held`, the ranges it holds
  /// completely) compare with a copy's.
  enum class Verdict {
    kApply,      // every point equals prev (or is past next: parts already applied)
    kDuplicate,  // every point is at or past next
    kGap,        // some point is below prev: an earlier update has not arrived yet
    kMismatch,   // some point lies strictly between prev and next: another history
  };
  Verdict Check(const uint64_t* entries, size_t words, const std::vector<Range>& held) const;
  /// True when every point over the entries' ranges (restricted to held) equals the entry's
  /// prev: the copy is the next update everywhere it is checked, no part of it applied here.
  bool AtPrev(const uint64_t* entries, size_t words, const std::vector<Range>& held) const;
  /// True when the entries' ranges all lie in held and every point over them is below the
  /// entry's next: no part of the update is applied here (a copy the points say nothing of,
  /// outside held, or partly applied, is not such a copy).
  bool Lacks(const uint64_t* entries, size_t words, const std::vector<Range>& held) const;
  /// Ranges of the entries where Check found a gap or a mismatch (restricted to held).
  std::vector<Range> Behind(const uint64_t* entries, size_t words,
                            const std::vector<Range>& held) const;
  /// Replica: point = max(point, next) over each entry's range within `within`.
  void Advance(const uint64_t* entries, size_t words,
               const std::vector<Range>& within = {Range::All()});

  /// Smallest point over r.
  uint64_t Min(Range r) const;
  /// (begin, end, point) triples covering r (pending jumps are not exported).
  void Export(Range r, std::vector<uint64_t>* out) const;
  /// Replaces the points over r by exported triples; "" or why they are malformed (then nothing
  /// changes).
  std::string Import(Range r, const uint64_t* triples, size_t words);
  /// Number of intervals (tests, memory accounting).
  size_t intervals() const { return map_.size(); }

  /// The groups of `entries` whose range holds one of the sorted keys (a piece of an update cut
  /// by chain), or intersects r when keys is null.
  static std::vector<uint64_t> Touching(const std::vector<uint64_t>& entries, const Key* keys,
                                        size_t n, Range r = Range());
  /// The entries cut to the sorted, disjoint ranges `within` (parts outside them dropped); a
  /// group stays a group (kLinked on all of its entries but the last).
  static std::vector<uint64_t> Cut(const std::vector<uint64_t>& entries,
                                   const std::vector<Range>& within);

 private:
  struct Point {
    uint64_t point = 0;
    uint64_t floor = 0;  // a pending jump: the next bump goes above it
  };
  // Calls f(point, part, prev, next) for each interval part inside an entry's range and a held
  // range, until f returns false.
  template <typename F>
  void Walk(const uint64_t* entries, size_t words, const std::vector<Range>& held, F f) const;
  // Makes `at` the start of an interval (no-op at the key space's end).
  void Split(Key at);
  // Merges neighbours with the same point and no jump in [b, e] (keeps the map small).
  void Coalesce(Key b, Key e);
  std::map<Key, Point> map_;  // interval start -> its point; the last runs to kMaxKey
};

}  // namespace ps

#endif  // PS_REPLICATION_SEQ_MAP_H_
