// Chain replication helpers. Pure logic: which replicas an applied update must reach.
#ifndef PS_REPLICATION_CHAIN_H_
#define PS_REPLICATION_CHAIN_H_

#include <functional>
#include <utility>
#include <vector>

#include "message/message.h"
#include "ring/ring.h"

namespace ps {

/// One piece of an update and the replicas it must reach, in chain order.
struct ChainPiece {
  std::vector<int> path;
  Message msg;
};

/// Cuts an applied push (explicit keys with fixed or variable widths, a value part of one key,
/// or a dense range) by the replica chains of its keys under `ring`: each piece holds the keys
/// (and their values) whose chain has the same replicas after the master. Keys whose chain is
/// only the master need no copy and are left out. `esize` is the size of one value.
std::vector<ChainPiece> SplitByChain(const Message& push, const Ring& ring, size_t esize);
/// Where each key's values start in frame 1 of a push of n explicit keys (fixed width, or a
/// lens frame): off[i]..off[i+1] in values. False when frames and counts do not agree.
bool ValueOffsets(const Message& push, size_t n, size_t esize, std::vector<uint64_t>* off);
/// The push restricted to the keys with keep[i] (values and lengths with them), as a push-only
/// message; empty data when no key is kept or the frames do not agree.
Message KeySubset(const Message& push, const std::vector<bool>& keep, size_t esize);

/// Gives a piece cut from `whole` the sequence entries (meta.seq) of the ranges its keys lie in.
void RestrictSeq(const Message& whole, Message* piece);
/// The same from the whole update's entries.
void RestrictSeq(const std::vector<uint64_t>& entries, Message* piece);

/// Cuts a piece's sequence entries to the sorted, disjoint ranges `within` (an entry outside
/// them is dropped; a group stays a group: kLinked on all of its entries but the last). A copy
/// numbered under an older ring, whose ranges span segments of a newer ring that it is cut by,
/// must move each receiver's points only where its keys go to that receiver.
void CutSeq(const std::vector<Range>& within, Message* piece);
/// The ranges of the segments of `ring` that hold a key of the update (its explicit keys, or
/// its dense range), sorted and disjoint.
std::vector<Range> SegmentsOf(const Message& update, const Ring& ring);

/// The same cut with any path per ring segment (empty: that segment's keys need no copy).
std::vector<ChainPiece> SplitByPath(const Message& push, const Ring& ring, size_t esize,
                                    const std::function<std::vector<int>(size_t)>& path_of);

}  // namespace ps

#endif  // PS_REPLICATION_CHAIN_H_
