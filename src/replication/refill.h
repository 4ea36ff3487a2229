// Which key ranges a server must fetch, and from whom, when the ring changes: the refill of a
// chain after a failure, and the pre-copy for a server that joins. Pure logic.
//
// Every server keeps the set of ranges it holds completely. Under a target ring (the current
// one, or the one being prepared for a join) it should hold every range whose chain it is in;
// what it lacks it fetches from the master of that range in the current ring, which holds
// every acknowledged update of it (chains only grow at the tail when a server fails, so while
// at most k servers of a chain fail before the refill ends, the master is complete).
#ifndef PS_REPLICATION_REFILL_H_
#define PS_REPLICATION_REFILL_H_

#include <memory>
#include <utility>
#include <vector>

#include "ps/sarray.h"
#include "ring/ring.h"

namespace ps {

/// Sorted, disjoint, non-adjacent ranges.
using RangeSet = std::vector<Range>;

/// What a server tells the scheduler about the ranges its chains give it under the ring of
/// `epoch`: how many it still has to fetch (0: it holds them all), and those that no server
/// holds a complete copy of (lost: the job must stop, DESIGN §8).
struct RefillReport {
  uint64_t epoch = 0;
  uint64_t pending = 0;
  RangeSet orphans;
};

/// Sorts and merges overlapping or touching ranges.
RangeSet Normalize(RangeSet s);
RangeSet Union(const RangeSet& a, const RangeSet& b);
RangeSet Subtract(const RangeSet& a, const RangeSet& b);
RangeSet Intersect(const RangeSet& a, const RangeSet& b);
/// Keys in the set (saturating).
uint64_t Size(const RangeSet& s);

/// Ranges on the wire: (begin, end) pairs of keys.
SArray<char> EncodeRanges(const RangeSet& rs);
/// Reads EncodeRanges' frame; false unless it holds sorted, non-empty ranges.
bool ParseRanges(const SArray<char>& frame, RangeSet* out);

/// Every range whose chain (master and replicas) under `ring` holds `server`.
RangeSet HeldRanges(const Ring& ring, int server);
/// The ranges `server` masters under `ring`.
RangeSet MasteredRanges(const Ring& ring, int server);

struct RefillPlan {
  /// Ranges to fetch and the server to fetch each from (the current master).
  std::vector<std::pair<Range, int>> fetch;
  /// Ranges to fetch whose current master is this server itself: no complete copy is known
  /// (more failures in one chain than replicas before the refill ended).
  RangeSet orphans;
  /// Ranges held but wanted by neither ring: the server drops them.
  RangeSet drop;
  /// Everything wanted and not held yet (fetch + orphans).
  RangeSet missing;
};

/// self holds `held` completely. next: the ring being prepared (a join), or null.
RefillPlan PlanRefill(const Ring& current, const Ring* next, int self, const RangeSet& held);

/// Whether ranges a server copied for the preparation `prepared` (and holds under no ring it
/// followed) are still whole once it learns `after`, a newer ring or preparation: their
/// sources sent updates to it only while they followed `prepared`. True when `after` is the
/// cut-over to it, follows that cut-over, or replaces the preparation with no ring put in
/// force in between; false when a ring in force dropped it (a failover), after which a source
/// may have applied updates it did not send on (ps_sim --cluster --seed 11
/// --ctl-stall-every-s 0.3). The server then fetches them again.
bool PrecopiesSurvive(const Ring& prepared, const Ring& after);
/// The ring in force after the cut-over to `prepared`, when `after` (a newer ring or
/// preparation) says that cut-over happened and a node whose ring is at `ring_epoch` has not
/// heard of it yet (its RING is still on its way: the scheduler's fan-outs can overtake each
/// other); else null. The node takes it before `after`, or it would plan under a ring two
/// changes old (ps_sim --cluster --seed 897 --ctl-stall-every-s 0.3: a joiner dropped the
/// ranges it masters, then found no copy of them).
std::shared_ptr<const Ring> MissedCut(const std::shared_ptr<const Ring>& prepared,
                                      const Ring& after, uint64_t ring_epoch);

}  // namespace ps

#endif  // PS_REPLICATION_REFILL_H_
