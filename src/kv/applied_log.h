// What a server has applied of each worker's pushes, so that a copy (a resend after a lost
// reply, a duplicated message, a resend re-sliced under a new ring after a fail-over) is
// acknowledged without being applied twice. Pure logic.
//
// A push is identified by (worker, timestamp) and its keys: re-slicing may regroup the keys of
// one request into other messages, so the log remembers which keys of each request were
// applied, not which message. Every message carries the worker's low-water mark (all its
// requests below it are complete); records below the mark are dropped, which bounds the log
// by the requests a worker has in flight.
#ifndef PS_KV_APPLIED_LOG_H_
#define PS_KV_APPLIED_LOG_H_

#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "clock/range_clock.h"
#include "ps/base.h"
#include "ps/sarray.h"

namespace ps {

class AppliedLog {
 public:
  /// Raises the worker's low-water mark and drops what lies below it.
  void Advance(int worker, int64_t lwm);
  /// True when every request of the worker with timestamp ts is complete (below the mark).
  bool Below(int worker, int64_t ts) const;
  /// For a push of sorted keys: sets (*applied)[i] for keys already applied under (worker,
  /// ts) and returns how many there are.
  size_t CheckKeys(int worker, int64_t ts, const Key* keys, size_t n,
                   std::vector<bool>* applied) const;
  /// For a dense push over r: the parts of r not applied yet, in order.
  std::vector<Range> FreshRanges(int worker, int64_t ts, Range r) const;
  /// For a part [offset, ...) of one key's large value.
  bool HasValuePart(int worker, int64_t ts, Key key, uint64_t offset) const;
  void RecordKeys(int worker, int64_t ts, SArray<Key> keys);
  void RecordRange(int worker, int64_t ts, Range r);
  void RecordValuePart(int worker, int64_t ts, Key key, uint64_t offset);
  /// Forgets a worker (declared dead).
  void Forget(int worker) { workers_.erase(worker); }
  /// Requests remembered, over all workers.
  size_t size() const;

  /// What was applied in key range r (a range handed to another server): each worker's
  /// low-water mark as a range vector clock over r, and the records above it restricted to r.
  void Export(Range r, SArray<uint64_t>* clock, SArray<uint64_t>* records) const;
  /// Replaces what is recorded in r by an export of r (the receiver's own marks only grow).
  /// Returns "" or why the encoding is malformed; then nothing changes.
  std::string Import(Range r, const SArray<uint64_t>& clock, const SArray<uint64_t>& records);
  /// An export of r, parsed and checked, to import later: a reply of many ranges is checked
  /// whole before any is imported (no copy of the log) and parsed once.
  struct Parsed;
  /// Parses an export of r into *out: "" or why it is malformed. Changes nothing.
  static std::string Parse(Range r, const SArray<uint64_t>& clock, const SArray<uint64_t>& records,
                           Parsed* out);
  /// Replaces what is recorded in r by a parsed export of r.
  void Import(Range r, Parsed parsed);

 private:
  struct Record {
    std::vector<SArray<Key>> keys;  // sorted frames, shared with the messages (no copy)
    std::vector<Range> ranges;
    std::vector<std::pair<Key, uint64_t>> value_parts;
  };
  struct In {  // one record of an export
    int worker;
    int64_t ts;
    Record rec;
  };
  struct Worker {
    int64_t lwm = 0;
    std::map<int64_t, Record> records;  // by timestamp
  };
  std::unordered_map<int, Worker> workers_;
};

struct AppliedLog::Parsed {
  std::vector<std::pair<int, int64_t>> marks;  // each worker's low-water mark over the range
  std::vector<In> in;
};

}  // namespace ps

#endif  // PS_KV_APPLIED_LOG_H_
