// Replication after aggregation: the pushes a master applies within a short window are added
// up per replica chain and sent along it once. Pure logic: pushes go in, one copy per chain
// comes out. Only for additive update rules (UpdateRule::Additive) and pushes of explicit keys
// with a fixed number of values per key; the server replicates everything else at once.
#ifndef PS_REPLICATION_AGGREGATOR_H_
#define PS_REPLICATION_AGGREGATOR_H_

#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "message/message.h"
#include "replication/chain.h"

namespace ps {

class Aggregator {
 public:
  explicit Aggregator(DataType dtype);

  /// Adds one applied push (keys sorted, `width` values per key) bound for the replicas
  /// `path`; `entry` is the master's handle of the request waiting for it. Returns -1 (and
  /// adds nothing) when the push does not fit (another width than the batch, or malformed),
  /// 1 when the batch for `path` now waits for `entry` for the first time, else 0. seq: the
  /// push's sequence entries (SeqMap); a batch carries, per range, the first prev and the last
  /// next of its pushes, so a push that does not continue them does not fit either.
  int Add(const std::vector<int>& path, uint64_t entry, int worker, int64_t ts, const Key* keys,
          size_t n, const char* vals, int width, const std::vector<uint64_t>& seq = {});
  bool empty() const { return batches_.empty(); }
  /// True if a batch holds a push of (worker, ts).
  bool Holds(int worker, int64_t ts) const;
  /// Adds to (*count)[entry] the number of batches waiting for it (consistency checks).
  void CountEntries(std::unordered_map<uint64_t, size_t>* count) const {
    for (const auto& b : batches_) {
      for (uint64_t e : b.second.entries) (*count)[e]++;
    }
  }
  /// Distinct workers with a push in some batch.
  size_t workers() const { return workers_.size(); }

  struct Copy {
    std::vector<int> path;
    std::vector<uint64_t> entries;  // distinct
    Message msg;                    // data: sorted keys, summed values, the pushes (see Encode)
    size_t pushes = 0;
  };
  /// Every batch as one copy, and starts afresh.
  std::vector<Copy> Take();

  /// Reads the pushes an aggregate carries (frame 2). False when malformed.
  struct Push {
    int worker;
    int64_t ts;
    SArray<Key> keys;
  };
  static bool Pushes(const Message& aggregate, std::vector<Push>* out);
  /// Frame 2 of an aggregate over the sorted keys: for each push its worker, its timestamp and
  /// a bitmap of which keys it holds (one bit per key, 64 per word), so the list of pushes
  /// costs the replicas (for exactly-once) an eighth of a byte per key and push, not 8 bytes.
  static SArray<uint64_t> Encode(const std::vector<Push>& pushes, const SArray<Key>& keys);
  /// Cuts an aggregate by the replica chains of its keys under ring (a re-route after a
  /// failure): each piece keeps its keys' sums and the pushes restricted to its keys.
  static std::vector<ChainPiece> Split(const Message& aggregate, const Ring& ring, size_t esize);
  /// The part of an aggregate whose keys lie in the sorted, disjoint ranges rs (sums and
  /// pushes restricted to them); no keys: an empty message.
  static Message Within(const Message& aggregate, const std::vector<Range>& rs, size_t esize);

 private:
  // A batch keeps each push's sorted keys (its Push entry) and values as a run; Take merges
  // the runs, adding the values of equal keys. Merging sorted runs reads them in order: a hash
  // table per key cost about 400 ns a key in cache misses, rehashing and freeing (1M-key
  // pushes ran at 12 MB/s with a window), a merge a few ns.
  struct Batch {
    int width = 0;
    std::vector<SArray<char>> vals;  // run i's values: pushes[i].keys with `width` each
    std::vector<uint64_t> entries;
    std::vector<Push> pushes;
    std::vector<uint64_t> seq;  // SeqMap entries: the batch's first prev, last next per range
  };
  // The sum of the runs [lo, hi) of b: sorted distinct keys and their values.
  void Merge(const Batch& b, size_t lo, size_t hi, SArray<Key>* keys, SArray<char>* vals) const;
  void AddValues(char* to, const char* from, size_t n) const;

  DataType dtype_;
  size_t esize_;
  std::map<std::vector<int>, Batch> batches_;
  std::set<int> workers_;
};

}  // namespace ps

#endif  // PS_REPLICATION_AGGREGATOR_H_
