// ps_countmin: a CountMin sketch on the parameter server (docs/apps/countmin.md).
//
// The w × d cells live on the servers as int64 counters under the Sum rule (or, with
// --counter_bits 32, as 32-bit counters that saturate at 2^32 - 1), one key per cell:
// cell i (row-major) has key i · stride with stride = floor((2^64 - 1) / (w · d)), so the cells
// spread evenly over the key space and hence over the servers' ranges of the ring, and a
// sorted list of cells is a sorted list of keys. Workers take parts of the stream from the
// scheduler's task pool, count a batch of items into a local array of cell deltas (so every
// duplicate within a batch, and every item sharing a cell, is combined before sending), and
// push the changed cells: one message per server per batch, a bounded number in flight.
#ifndef PS_APPS_COUNTMIN_COUNTMIN_H_
#define PS_APPS_COUNTMIN_COUNTMIN_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "countmin/sketch.h"
#include "countmin/stream.h"
#include "ps/kv_server.h"
#include "ps/ps.h"
#include "team.h"

namespace countmin {

/// A run's two tables on the servers, named "<--tables>.cells" (int64, sum; or int32 holding
/// unsigned counts, rule countmin.sat32: SaturatingU32Rule) and "<--tables>.candidates"
/// (heavy-hitter candidates: id, name; int64, assign). Their application ids, this worker's
/// team and the team's first task, set once its node has started (OpenJob).
struct Job {
  apps::Team team;
  int cells = -1, candidates = -1;
  int first_task = 0;
};

struct Options {
  std::string input;
  Format format = Format::kTokens;
  Shape shape;
  uint64_t seed = 1;
  uint64_t batch = 1 << 20;  // items counted locally before a push
  int max_inflight = 4;      // pushes in flight per worker
  uint64_t part_bytes = 8 << 20;
  double part_s = 1.0;     // stdin in a job: a part ends after this long waiting for more input
  int stream_parts = 8;    // stdin in a job: parts the scheduler holds that are not done yet
  std::string query;       // items to estimate at the end, one per line
  std::string sketch_out;  // the final cells (WriteSketch)
  int top_k = 100;
  size_t hh_capacity = 4096;  // SpaceSaving entries per worker
  uint32_t hh_sample = 4;     // every this many items feed the SpaceSaving summary
  double progress_s = 1.0;    // seconds between progress lines (0: none)
  double rate = 0;            // items per second per worker (0: as fast as it goes)
  double top_every = 0;       // worker 0 prints the heavy hitters this often (0: at the end)
  bool log_acks = false;      // print when each push was found acknowledged (benchmarks)
  int counter_bits = 64;      // 64 or 32 (a cell's value in half the bytes; saturates)
  bool quiet = false;
  std::string tables = "countmin";  // prefix of the table names
  Job job;                          // set by OpenJob
};

/// What a worker does before the job's start barrier: creates the run's tables (or finds
/// them), and adds the stream's `parts` parts to its team's task pool once.
Job OpenJob(ps::Node* node, const Options& o, int parts);
/// Rules of the tables for the servers' ps::TableServer ("countmin.sat32").
ps::TableRules TableRules();

/// Key of cell i of a sketch with `cells` cells.
inline ps::Key CellKey(uint64_t i, uint64_t cells) { return i * (ps::kMaxKey / cells); }

/// 32-bit cells on the servers: each int32 value holds the bits of an unsigned count, and a
/// sum past 2^32 - 1 stays at 2^32 - 1 (kCap32). Pushes are the non-negative deltas of a batch
/// (at most --batch per cell, below 2^32), so the cell is min(total, kCap32) in any order.
class SaturatingU32Rule : public ps::UpdateRule<int32_t> {
 public:
  void Apply(ps::Key, const int32_t* pushed, int32_t* val, int32_t*, int n) const override {
    for (int i = 0; i < n; ++i) {
      const uint64_t sum =
          static_cast<uint64_t>(static_cast<uint32_t>(val[i])) + static_cast<uint32_t>(pushed[i]);
      val[i] = static_cast<int32_t>(static_cast<uint32_t>(std::min<uint64_t>(sum, kCap32)));
    }
  }
  bool Elementwise() const override { return true; }
};

/// The cells table as a worker sees it, whatever the servers' cell width: counts travel as
/// 64-bit values or as the bits of 32-bit ones, and arrive here as int64.
class CellsTable {
 public:
  CellsTable(ps::Node* node, int app_id, int bits);
  /// Push number seq of task (KVWorker::PushForTask) of the deltas of keys.
  int64_t PushForTask(int task, int64_t seq, const ps::SArray<ps::Key>& keys,
                      const ps::SArray<int64_t>& deltas, ps::KVWorkerBase::Callback cb);
  /// The counts of keys into *out, which holds keys.size() values (blocks until they arrive).
  void Pull(const ps::SArray<ps::Key>& keys, std::vector<int64_t>* out);
  ps::KVWorkerBase* base() {
    return w64_ ? static_cast<ps::KVWorkerBase*>(w64_.get()) : w32_.get();
  }

 private:
  std::unique_ptr<ps::KVWorker<int64_t>> w64_;
  std::unique_ptr<ps::KVWorker<int32_t>> w32_;
};

/// Queries against the sketch on the servers, from any worker, during or after the stream,
/// through the worker's KVWorkers of the two tables (a node has one KVWorker per app id).
class Client {
 public:
  Client(CellsTable* cells, ps::KVWorker<int64_t>* candidates, Shape shape, uint64_t seed)
      : cells_(*cells), candidates_(*candidates), shape_(shape), seed_(seed) {}
  /// Pulls every cell (a consistent copy is not promised while inserts go on: each cell is as
  /// of its server's answer).
  LocalSketch PullSketch();
  /// Point estimates of items (text) or ids (u64 streams: the decimal id) against a sketch.
  static std::vector<int64_t> Estimate(const LocalSketch& s, const std::vector<std::string>& items,
                                       Format format);
  /// The k candidates with the largest estimates in s, largest first (name, estimate).
  std::vector<std::pair<std::string, int64_t>> HeavyHitters(const LocalSketch& s, size_t k);

 private:
  CellsTable& cells_;
  ps::KVWorker<int64_t>& candidates_;
  Shape shape_;
  uint64_t seed_;
};

/// The id the hash family sees for an item of the stream.
inline uint64_t IdOf(std::string_view item, Format format) {
  if (format != Format::kU64) return ItemId(item);
  uint64_t x = 0;
  for (char c : item) x = x * 10 + static_cast<uint64_t>(c - '0');
  return x;
}

/// Calls f(id, name) for each item of a part, in order (name: the text; empty for u64 ids).
template <typename F>
void ForEachItem(const PartItems& part, Format format, F&& f) {
  if (format == Format::kU64) {
    for (uint64_t id : part.ids) f(id, std::string_view());
  } else {
    ForEachText(part.text, format, [&f](std::string_view item) { f(ItemId(item), item); });
  }
}

/// The roles. Each returns the process's exit code.
void RunServer(ps::Node* node, const Options& o);
int RunWorker(ps::Node* node, const Options& o);
/// The scheduler of a job that counts stdin (--input -): cuts the stream into parts as it
/// comes (--part_mb, or what came within --part_s) and adds each as a task that carries its
/// bytes (Node::AddTask), so a part a dead worker left is counted again from the scheduler's
/// copy; holds at most --stream_parts parts that are not done (the pipe waits meanwhile);
/// closes the pool at the end of the stream. Call between OpenTasks and Finalize.
void FeedStdin(ps::Node* node, const Options& o);
/// The same stream counted in this process alone: the reference sketch and the speed limit.
int RunLocal(const Options& o, bool conservative);

}  // namespace countmin

#endif  // PS_APPS_COUNTMIN_COUNTMIN_H_
