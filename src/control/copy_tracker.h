// Which servers hold a complete copy of each key range, as the scheduler knows it (DESIGN §8,
// invariant 6: no silent loss). Pure logic: the scheduler tells it about refills that finished
// and servers that failed, and it answers which ranges have no copy left.
//
// A server holds a range once every member of the chains of a ring holds its ranges (the start
// of the job, a refill that finished everywhere: Reset), or once the server itself reported
// that it holds every range its chains give it under some ring (Holds). A failure removes the
// server everywhere. Only a range with no holder left is lost: failures in different chains
// never are, however many there are before a refill ends.
#ifndef PS_CONTROL_COPY_TRACKER_H_
#define PS_CONTROL_COPY_TRACKER_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ps/base.h"
#include "ring/ring.h"

namespace ps {

class CopyTracker {
 public:
  /// Every member of every chain of ring holds its ranges; what was known before is replaced.
  void Reset(const Ring& ring);
  /// `server` holds every range its chains give it under ring (it reported its refill done).
  void Holds(int server, const Ring& ring);
  /// `server` is gone. Returns the ranges that now have no holder, merged, in key order.
  std::vector<Range> Lost(int server);
  /// Every range with no holder (merged, in key order).
  std::vector<Range> Orphans() const;
  /// How many servers hold key k.
  size_t Holders(Key k) const;

  /// "[begin, end)" for up to `max` ranges, then how many more and the share of the key space.
  static std::string Describe(const std::vector<Range>& ranges, size_t max = 4);

 private:
  void Add(Range r, int server);
  // Breakpoint -> the holders of [breakpoint, next breakpoint or kMaxKey). Always holds key 0.
  std::map<Key, std::set<int>> at_{{0, {}}};
};

}  // namespace ps

#endif  // PS_CONTROL_COPY_TRACKER_H_
