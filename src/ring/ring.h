// Consistent-hash ring with virtual nodes. Pure logic: no I/O, no threads.
#ifndef PS_RING_RING_H_
#define PS_RING_RING_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ps/base.h"

namespace ps {

/// One contiguous key range and the server that masters it.
struct RingSegment {
  Range range;
  int server = -1;
};

/// A run of sorted keys [begin, end) that falls in one ring segment.
struct KeySlice {
  int server = -1;
  size_t segment = 0;
  size_t begin = 0;
  size_t end = 0;
};

/// The ring of one epoch. Each server sits at `vnodes` pseudo-random positions on the key
/// circle; a key belongs to the closest position at or before it (keys below the first
/// position wrap to the last one). Keys are not rehashed, so a key range maps to a few
/// contiguous segments. Immutable once built; a membership change builds a new Ring.
class Ring {
 public:
  Ring() = default;
  /// server_ids must be distinct; replicas is k, the number of successors in a chain.
  /// cut_epoch, base_epoch: the ring's place in the scheduler's history (below; 0: epoch).
  Ring(std::vector<int> server_ids, int vnodes, int replicas, uint64_t epoch,
       uint64_t cut_epoch = 0, uint64_t base_epoch = 0);

  uint64_t epoch() const { return epoch_; }
  /// Where this ring stands in the scheduler's history when it was sent: the epoch of the last
  /// cut-over (or of the job's start) by then, its own for the ring a cut-over puts in force;
  /// and for a prepared ring the epoch of the ring in force when it was prepared (its own
  /// otherwise). A server that missed messages decides by them whether what it copied for an
  /// earlier preparation is whole (refill.h, PrecopiesSurvive). Both default to epoch().
  uint64_t cut_epoch() const { return cut_epoch_ ? cut_epoch_ : epoch_; }
  uint64_t base_epoch() const { return base_epoch_ ? base_epoch_ : epoch_; }
  /// The ring that the cut-over to this prepared ring puts in force: the same ring, whose
  /// own epoch is now the last cut-over.
  Ring AsCutOver() const {
    Ring r = *this;
    r.cut_epoch_ = epoch_;
    r.base_epoch_ = 0;
    return r;
  }
  int vnodes() const { return vnodes_; }
  int replicas() const { return replicas_; }
  const std::vector<int>& servers() const { return servers_; }
  /// True when server `id` holds a place on this ring.
  bool HasServer(int id) const {
    return std::find(servers_.begin(), servers_.end(), id) != servers_.end();
  }
  /// Segments sorted by key, covering [0, kMaxKey); neighbours have different owners.
  const std::vector<RingSegment>& segments() const { return segments_; }

  /// Index of the segment that holds key k (O(log segments)).
  size_t SegmentOf(Key k) const;
  /// The master of key k.
  int Owner(Key k) const { return segments_[SegmentOf(k)].server; }
  /// Master of the segment followed by up to k distinct replicas: the owners of the segments
  /// before it, which inherit the segment, in order, when the servers before them leave.
  std::vector<int> Chain(size_t segment) const;
  /// The key ranges a server masters, in key order.
  std::vector<Range> RangesOf(int server) const;
  /// The segments whose chains hold `server` (as master or replica), in key order. O(segments)
  /// to find the server's own and O(vnodes * k) beyond: every server's refill plan and the
  /// scheduler's copy tracking ask this, so it must not cost a chain per segment of the ring
  /// (at 1000 servers that took 6 ms per server, 6 s of the scheduler's time per change).
  std::vector<size_t> SegmentsHeldBy(int server) const;

  /// Splits sorted keys into runs by segment, in key order. Galloping over both keys and
  /// segments makes it O(keys + segments) in the worst case and O(log) for a single key.
  /// When steps is not null it receives the number of comparisons (for complexity tests).
  void SliceKeys(const Key* keys, size_t n, std::vector<KeySlice>* out,
                 size_t* steps = nullptr) const;
  /// Splits a key range into the parts owned by each segment, in key order.
  void SliceRange(Range r, std::vector<RingSegment>* out) const;

  /// Position of virtual node v of server s (documented so tools can reproduce the ring).
  static Key Position(int server, int v);

 private:
  std::vector<int> servers_;
  int vnodes_ = 0;
  int replicas_ = 0;
  uint64_t epoch_ = 0;
  uint64_t cut_epoch_ = 0, base_epoch_ = 0;  // 0: epoch_
  std::vector<RingSegment> segments_;
  // Each server's segments (indices, in ring order): a server's ranges without a walk over
  // every segment (at 1000 servers a copy's delivery asked for them on every message).
  std::unordered_map<int, std::vector<size_t>> segments_of_;
};

}  // namespace ps

#endif  // PS_RING_RING_H_
