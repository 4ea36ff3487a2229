// KVWorker: push and pull key-value pairs to and from the servers.
#ifndef PS_KV_WORKER_H_
#define PS_KV_WORKER_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ps/base.h"
#include "ps/node.h"
#include "ps/sarray.h"
#include "ps/update_rule.h"

namespace ps {

/// Data tasks are numbered below this (KVWorker::PushForTask, KVWorkerBase::CloseTask).
constexpr int kMaxTasks = 1 << 30;

namespace detail {
/// One request as the typed KVWorker hands it to the untyped core (internal).
struct KVRequest {
  enum Op { kData = 0, kRangePull = 1, kDensePush = 2, kClock = 3, kTaskClose = 4 };
  Op op = kData;
  bool push = false;
  bool pull = false;
  SArray<Key> keys;
  SArray<char> vals;  // pushed values, as bytes
  SArray<int> lens;   // values per key; empty = fixed width
  Range range;
  std::vector<Range> ranges;  // a range pull of several ranges (ascending, disjoint)
  int reducer = 0;            // a range pull that runs this reducer (KVWorker::Reduce)
  int pull_width = 0;         // values per key of a pull when known, 0 = ask the servers
  bool want_lens = false;
  SArray<char> out_view;  // the caller's output array, as bytes (may be empty)
  std::function<void(const SArray<char>&)> set_vals;
  SArray<int>* out_lens = nullptr;
  SArray<Key>* out_keys = nullptr;
  std::function<void()> callback;
  int task = -1;         // a push for a data task (PushForTask), or the task CloseTask closes
  int64_t task_seq = 0;  // its number among the task's pushes
};
}  // namespace detail

/// Filters a worker chooses for its requests (docs/filters.md), over the node's defaults
/// (PS_COMPRESS, PS_QUANTIZE). Servers answer a request with the same choice.
struct RequestFilters {
  /// "" = the node's PS_COMPRESS; else off, auto, delta, zero or snappy.
  std::string compress;
  /// -1 = the node's PS_QUANTIZE; 0 = off; 8 or 16 bits for pushed float/double values.
  int quantize_bits = -1;
  /// Significantly-modified filter on pull replies (< 0: off). A server sends a value only
  /// when it moved by more than this since it last sent it to this worker; the worker takes
  /// the others from its copy, so every pulled value is within the threshold of the server's
  /// (0: lossless, only changed values travel). For fixed-width float/double pulls whose
  /// output array is pre-sized (the width known); others are sent whole.
  double significant = -1;
};

/// The untyped core of KVWorker<V>: slicing by the ring, the table of requests in flight,
/// merging of replies. Use KVWorker<V>.
class KVWorkerBase {
 public:
  using Callback = std::function<void()>;
  /// Every request returns a timestamp: this worker's requests are numbered 0, 1, 2, ... (from
  /// Config::first_timestamp) as 64-bit integers that never wrap, and (worker, timestamp)
  /// identifies a request on every server for exactly-once application. Keep them in int64_t:
  /// an int would truncate after 2^31 requests.
  /// Blocks until request ts has been answered by every server it went to (and its callback
  /// ran). Throws ps::Error when a server rejected it, after Config::request_timeout_ms, or
  /// when ts was never returned by this worker.
  void Wait(int64_t ts);
  /// True once request ts has completed (successfully or not).
  bool IsDone(int64_t ts) const;
  /// Request parts sent again because no reply came within Config::resend_timeout_ms (a lost
  /// message); servers apply each push once however many copies arrive.
  uint64_t Resends() const;

  /// Ends the current step: tells every server that this worker has completed step() + 1
  /// steps, then blocks until the bounded delay lets the next step start (every request
  /// issued during steps before step() - tau has completed). Returns the timestamp of the
  /// clock message (Wait on it is optional). Pushes and pulls carry the step they were
  /// issued in; under a barrier policy a pull of step t is answered when the policy passes
  /// (docs/consistency.md). Throws ps::Error after Config::request_timeout_ms.
  int64_t Clock();
  /// Completed steps of this worker (0 before the first Clock()). A worker that joined a
  /// running job (Config::join) continues from the servers' smallest step, adopted from the
  /// reply to its first pull.
  int64_t step() const;
  /// Sets this worker's bounded delay tau (-1 = unbounded). Node::SetConsistency sets it on
  /// every worker of the job.
  void SetMaxDelay(int tau);
  int max_delay() const;

  /// Tasks whose pushes servers apply exactly once whichever worker sends them: the task's
  /// pushes are one request stream of their own (task, seq) instead of this worker's, so a
  /// task that a dead worker left half pushed can be redone from the start by another worker:
  /// servers apply only the part of each push that did not land before. For that, push seq of
  /// a task must carry the same keys and values whoever sends it (a deterministic function of
  /// the task's data), seqs count 0, 1, 2, ... per task, and a worker redoing a task pushes
  /// them all again in order. Tasks are numbered from 0 below 2^30 (Node::NextTask's ids).
  /// Tells every server that every push of `task` is complete (Wait on all of them first):
  /// they keep one word for it instead of its pushes' keys, and take any later copy of such a
  /// push (from a worker that died, say) as applied. Returns the request's timestamp.
  int64_t CloseTask(int task);

  /// Sets the filters of the requests issued from now on (per worker, and per request by
  /// setting it between calls). Throws ps::Error naming the bad field.
  void SetFilters(const RequestFilters& filters);
  /// What the significantly-modified filter did on this worker's pulls.
  struct SignificantStats {
    uint64_t refused = 0;  // coded replies refused (out of order, lost): asked again
    uint64_t epochs = 0;   // copies started afresh
  };
  SignificantStats significant_stats() const;

  /// Where this worker's time went (docs/consistency.md).
  struct BarrierStats {
    int64_t step = 0;
    double barrier_wait_s = 0;  // time servers held this worker's pulls (the longest part)
    double delay_wait_s = 0;    // time Clock() blocked on the bounded delay
    double elapsed_s = 0;       // since this KVWorker was created
    /// The server clock the last completed pull read (the smallest step every live worker had
    /// reached on the servers that answered it; -1: no pull yet). Every worker's pushes of
    /// the steps before it are in that pull, so step - read_clock is how stale it was: 0 under
    /// BSP, at most s under SSP(s).
    int64_t read_clock = -1;
  };
  BarrierStats barrier_stats() const;

 protected:
  KVWorkerBase(Node* node, int app_id, DataType dtype);
  /// The application id of the named table; throws ps::Error when the node knows no such table
  /// or it holds another value type than dtype.
  static int OpenTable(Node* node, const std::string& table, DataType dtype);
  /// Waits (up to Config::request_timeout_ms, then logs a warning) until this worker's pushes
  /// and clocks are answered, so a step it ended still counts at the servers; pulls in flight
  /// are abandoned.
  ~KVWorkerBase();
  int64_t Submit(detail::KVRequest req);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Sorts keys ascending and moves each key's values along (and its count in lens, for
/// variable-length values), so that arrays built in any key order can be pushed: without lens
/// every key has vals->size() / keys->size() values. Equal keys keep their order and are not
/// combined (Push refuses them: add their values first). Throws ps::Error
/// (kInvalidArgument) when the sizes do not fit together.
template <typename V>
void SortByKey(SArray<Key>* keys, SArray<V>* vals, SArray<int>* lens = nullptr);

/// A worker's handle for one application id and value type V (float, double, int32_t,
/// int64_t). Keys of a request must be sorted, unique and below kMaxKey (SortByKey sorts keys
/// built in another order, with their values). Values are fixed width (vals.size() /
/// keys.size() per key) unless `lens` gives each key's count. Every call returns at once with
/// a timestamp; Wait(ts) blocks until it completes. The callback, if any, runs when the
/// request completes, before Wait returns, on whichever thread takes its last reply: the
/// node's receive thread, or a thread blocked in Wait on this worker (which takes replies
/// itself to save a thread switch). It must not call Wait; it may issue new requests. Arrays
/// handed in must not change, and output arrays must stay alive, until then. Requests to
/// different servers are in flight at once; between this worker and one server, requests are
/// applied in the order issued, so a pull issued after a push sees it.
///
/// A KVWorker may be used from several threads at once: its calls take its lock, and each
/// request gets its timestamp when its call takes it. The order of application above then
/// holds for the requests of each thread (and for those the threads order among themselves);
/// Clock() ends the step for every thread of the worker.
template <typename V>
class KVWorker : public KVWorkerBase {
 public:
  /// Registers the worker for app_id on the node (one KVWorker per app id and node).
  explicit KVWorker(Node* node, int app_id = 0)
      : KVWorkerBase(node, app_id, DataTypeOf<V>::value) {}
  /// Opens the named table (Node::CreateTable; Node::Table must know it): its application id,
  /// its filters, and its width, which every push must then have. Throws ps::Error when the
  /// node knows no such table or it holds another value type than V.
  KVWorker(Node* node, const std::string& table)
      : KVWorker(node, OpenTable(node, table, DataTypeOf<V>::value)) {
    const TableSpec t = node->Table(table);
    width_ = static_cast<size_t>(t.width);
    RequestFilters f;
    f.compress = t.compress;
    f.quantize_bits = t.quantize_bits;
    f.significant = t.significant;
    SetFilters(f);
  }

  /// How many keys the servers store in the ranges rs (every key whose slot exists; a rule
  /// that drops zeros counts only the rest): a Reduce that every table has.
  int64_t CountKeys(std::vector<Range> rs, std::vector<double>* out, const Callback& cb = nullptr) {
    return Reduce(kCountKeysReducer, std::move(rs), out, cb);
  }

  /// Pushes vals for keys (lens: values per key, for variable-length values). With a push
  /// filter set, only the keys it keeps are sent.
  int64_t Push(const SArray<Key>& keys, const SArray<V>& vals, const SArray<int>& lens = {},
               const Callback& cb = nullptr) {
    return Submit(PushRequest(keys, vals, lens, cb));
  }

  /// Push number seq of data task `task` (see KVWorkerBase::CloseTask): applied exactly once
  /// by the servers as that push of the task, whoever sends it. Push only (no pull).
  int64_t PushForTask(int task, int64_t seq, const SArray<Key>& keys, const SArray<V>& vals,
                      const SArray<int>& lens = {}, const Callback& cb = nullptr) {
    if (task < 0 || task >= kMaxTasks) throw Error("PushForTask: task must be in [0, 2^30)");
    if (seq < 0) throw Error("PushForTask: seq must not be negative");
    detail::KVRequest r = PushRequest(keys, vals, lens, cb);
    r.task = task;
    r.task_seq = seq;
    return Submit(std::move(r));
  }
  /// The KKT filter hook (and any other app-side sparsification): keep(key, values, n) says
  /// whether Push sends a key; dropped keys never leave the worker. The sparse LR app drops a
  /// coordinate whose weight is zero and whose gradient lies inside the L1 band. nullptr (the
  /// default) sends everything. Not applied to PushPull, which answers for every key.
  using KeepFn = std::function<bool(Key key, const V* vals, int n)>;
  void SetPushFilter(KeepFn keep) { keep_ = std::move(keep); }
  /// Keys the push filter dropped so far.
  uint64_t FilteredKeys() const { return filtered_; }

  /// Pulls the values of keys into *vals. Missing keys read as zeros. With lens == nullptr the
  /// values are fixed width: vals->size() / keys.size() if *vals is pre-sized to a multiple of
  /// keys.size(), else the width the servers hold (1 if no key exists). With lens, each key's
  /// own count is returned in *lens (0 for a missing key).
  int64_t Pull(const SArray<Key>& keys, SArray<V>* vals, SArray<int>* lens = nullptr,
               const Callback& cb = nullptr) {
    detail::KVRequest r;
    r.pull = true;
    r.keys = keys;
    SetOutput(&r, keys.size(), vals, lens);
    r.callback = cb;
    return Submit(std::move(r));
  }

  /// Push then pull of the same keys in one round trip: *outs receives the values after the
  /// push was applied, laid out like vals.
  int64_t PushPull(const SArray<Key>& keys, const SArray<V>& vals, SArray<V>* outs,
                   const SArray<int>& lens = {}, const Callback& cb = nullptr) {
    detail::KVRequest r;
    r.push = r.pull = true;
    r.keys = keys;
    r.vals = SArray<char>(vals);
    r.lens = lens;
    r.pull_width = lens.empty() && !keys.empty() ? static_cast<int>(vals.size() / keys.size()) : 0;
    r.want_lens = !lens.empty();
    r.set_vals = [outs](const SArray<char>& b) { *outs = SArray<V>(b); };
    r.callback = cb;
    return Submit(std::move(r));
  }

  /// Pulls every stored key of the ranges rs (ascending, not overlapping; ps::Error
  /// otherwise): keys, values and values per key, in key order. One message per server
  /// however many ranges (the rows of a sparse table, say, each a range of cells).
  int64_t PullRanges(std::vector<Range> rs, SArray<Key>* keys, SArray<V>* vals, SArray<int>* lens,
                     const Callback& cb = nullptr) {
    CheckRanges(rs, "PullRanges");
    const Range hull(rs.front().begin, rs.back().end);
    return RangePull(hull, std::move(rs), keys, vals, lens, cb);
  }

  /// Runs reducer `id` (RangeReducer, given to the table's KVServer) on the servers over every
  /// stored key of the ranges rs (ascending, not overlapping; ps::Error otherwise): *out
  /// receives the element-wise sum of what each server added up, so no key travels. One
  /// message per server; held by the barrier policy like a pull of the same step. A server
  /// without that reducer rejects it (Wait throws, naming it).
  int64_t Reduce(int id, std::vector<Range> rs, std::vector<double>* out,
                 const Callback& cb = nullptr) {
    if (id <= 0) throw Error("Reduce: reducer ids start at 1 (got " + std::to_string(id) + ")");
    CheckRanges(rs, "Reduce");
    detail::KVRequest q;
    q.op = detail::KVRequest::kRangePull;
    q.pull = true;
    q.range = Range(rs.front().begin, rs.back().end);
    q.ranges = std::move(rs);
    q.reducer = id;
    q.set_vals = [out](const SArray<char>& b) {
      const SArray<double> d(b);
      out->assign(d.begin(), d.end());
    };
    q.callback = cb;
    return Submit(std::move(q));
  }

  /// Pulls every stored key in range r: its keys, values and values per key, in key order.
  int64_t PullRange(Range r, SArray<Key>* keys, SArray<V>* vals, SArray<int>* lens,
                    const Callback& cb = nullptr) {
    return RangePull(r, {}, keys, vals, lens, cb);
  }

  /// Dense push over a key range: key r.begin + i receives values [i*w, (i+1)*w) where
  /// w = vals.size() / r.size(). No keys travel on the wire.
  int64_t PushRange(Range r, const SArray<V>& vals, const Callback& cb = nullptr) {
    detail::KVRequest q;
    q.op = detail::KVRequest::kDensePush;
    q.push = true;
    q.range = r;
    q.vals = SArray<char>(vals);
    q.callback = cb;
    return Submit(std::move(q));
  }

 private:
  static void CheckRanges(const std::vector<Range>& rs, const char* what) {
    for (size_t i = 0; i < rs.size(); ++i) {
      if (rs[i].size() == 0) {
        throw Error(std::string(what) + ": range " + std::to_string(i) + " is empty");
      }
      if (i > 0 && rs[i].begin < rs[i - 1].end) {
        throw Error(std::string(what) + ": range " + std::to_string(i) +
                    " starts before the previous one ends (ranges must ascend, not overlap)");
      }
    }
    if (rs.empty()) throw Error(std::string(what) + ": no range");
  }
  // A range pull of hull, or of the ranges rs within it when rs is not empty.
  int64_t RangePull(Range hull, std::vector<Range> rs, SArray<Key>* keys, SArray<V>* vals,
                    SArray<int>* lens, const Callback& cb) {
    detail::KVRequest q;
    q.op = detail::KVRequest::kRangePull;
    q.pull = true;
    q.range = hull;
    q.ranges = std::move(rs);
    q.want_lens = true;
    q.out_keys = keys;
    q.out_lens = lens;
    q.set_vals = [vals](const SArray<char>& b) { *vals = SArray<V>(b); };
    q.callback = cb;
    return Submit(std::move(q));
  }
  // A push of keys (through the push filter, if one is set).
  detail::KVRequest PushRequest(const SArray<Key>& keys, const SArray<V>& vals,
                                const SArray<int>& lens, const Callback& cb) {
    if (width_ > 0 && (!lens.empty() || vals.size() != keys.size() * width_)) {
      throw Error("Push: the table holds " + std::to_string(width_) + " values per key; got " +
                  std::to_string(vals.size()) + " values for " + std::to_string(keys.size()) +
                  " keys" + (lens.empty() ? "" : " with lengths"));
    }
    detail::KVRequest r;
    r.push = true;
    r.callback = cb;
    if (keep_ && !keys.empty()) {
      Filter(keys, vals, lens, &r);
    } else {
      r.keys = keys;
      r.vals = SArray<char>(vals);
      r.lens = lens;
    }
    return r;
  }
  void Filter(const SArray<Key>& keys, const SArray<V>& vals, const SArray<int>& lens,
              detail::KVRequest* r) {
    const size_t n = keys.size();
    const bool var = !lens.empty();
    const size_t w = var ? 0 : vals.size() / n;
    SArray<Key> k;
    SArray<V> v;
    SArray<int> l;
    size_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      const int len = var ? lens[i] : static_cast<int>(w);
      if (keep_(keys[i], vals.data() + at, len)) {
        k.push_back(keys[i]);
        for (int x = 0; x < len; ++x) v.push_back(vals[at + x]);
        if (var) l.push_back(len);
      } else {
        filtered_++;
      }
      at += static_cast<size_t>(len);
    }
    r->keys = k;
    r->vals = SArray<char>(v);
    r->lens = l;
  }
  KeepFn keep_;
  uint64_t filtered_ = 0;

  size_t width_ = 0;  // a named table's values per key (0: any)
  static void SetOutput(detail::KVRequest* r, size_t nkeys, SArray<V>* vals, SArray<int>* lens) {
    r->out_lens = lens;
    r->want_lens = lens != nullptr;
    if (!lens && nkeys && !vals->empty() && vals->size() % nkeys == 0) {
      r->pull_width = static_cast<int>(vals->size() / nkeys);
      r->out_view = SArray<char>(*vals);
    }
    r->set_vals = [vals](const SArray<char>& b) { *vals = SArray<V>(b); };
  }
};

template <typename V>
void SortByKey(SArray<Key>* keys, SArray<V>* vals, SArray<int>* lens) {
  const size_t n = keys->size();
  std::vector<size_t> start(n + 1, 0);  // where each key's values begin in vals
  if (lens && !lens->empty()) {
    if (lens->size() != n) {
      throw Error("SortByKey: " + std::to_string(lens->size()) + " lengths for " +
                  std::to_string(n) + " keys");
    }
    for (size_t i = 0; i < n; ++i) {
      if ((*lens)[i] < 0) throw Error("SortByKey: negative length at " + std::to_string(i));
      start[i + 1] = start[i] + static_cast<size_t>((*lens)[i]);
    }
  } else {
    const size_t width = n == 0 ? 0 : vals->size() / n;
    for (size_t i = 0; i < n; ++i) start[i + 1] = start[i] + width;
  }
  if (start[n] != vals->size()) {
    throw Error("SortByKey: " + std::to_string(vals->size()) + " values for " + std::to_string(n) +
                " keys" + (lens && !lens->empty() ? " and their lengths" : ""));
  }
  if (std::is_sorted(keys->begin(), keys->end())) return;
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [keys](size_t a, size_t b) { return (*keys)[a] < (*keys)[b]; });
  SArray<Key> k = SArray<Key>::Uninitialized(n);
  SArray<V> v = SArray<V>::Uninitialized(vals->size());
  SArray<int> l = lens && !lens->empty() ? SArray<int>::Uninitialized(n) : SArray<int>();
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t j = order[i];
    k[i] = (*keys)[j];
    if (!l.empty()) l[i] = (*lens)[j];
    std::copy(vals->begin() + start[j], vals->begin() + start[j + 1], v.begin() + at);
    at += start[j + 1] - start[j];
  }
  *keys = k;
  *vals = v;
  if (!l.empty()) *lens = l;
}

}  // namespace ps

#endif  // PS_KV_WORKER_H_
