// The request handling of a server for one application id, without any I/O of its own:
// requests go in, replies go out through a callback. KVServer runs it on a node's receive
// thread; the simulator (src/sim) runs the very same code on virtual time.
#ifndef PS_KV_SERVER_CORE_H_
#define PS_KV_SERVER_CORE_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "consistency/pull_gate.h"
#include "filter/significant.h"
#include "kv/applied_log.h"
#include "message/message.h"
#include "ps/kv_server.h"
#include "replication/aggregator.h"
#include "replication/chain.h"
#include "replication/refill.h"
#include "replication/seq_map.h"
#include "ring/ring.h"
#include "store/store.h"

namespace ps {

class ServerCore {
 public:
  using SendFn = std::function<void(Message&)>;
  /// Microseconds on any monotonic clock (wall or virtual).
  using NowFn = std::function<int64_t()>;

  using RingFn = std::function<std::shared_ptr<const Ring>()>;
  /// Tells the scheduler how many ranges this server still has to fetch under the ring of
  /// `epoch` (0: it holds every range its chains give it).
  using ReportFn = std::function<void(uint64_t epoch, uint64_t pending)>;

  /// self: this server's node id; ring: the current ring (its replicas say how many copies a
  /// push needs before it is acknowledged; null or 0 replicas = none).
  ServerCore(int app, DataType dtype, std::shared_ptr<StoreBase> store,
             std::shared_ptr<const BarrierPolicy> policy, uint64_t seed,
             const std::vector<int>& workers, SendFn send, NowFn now_us, int self = -1,
             RingFn ring = nullptr);

  /// Handles one request: validates it, applies its push half, answers its pull half now or
  /// when the barrier policy lets it (DESIGN §7), and sends the replies.
  void Process(Message& msg);
  /// A worker was declared dead: it leaves the step table; reads it held back are answered.
  void WorkerDead(int id);
  /// The ring changed (a server left): copies on their way to a server that left go to the
  /// new chain instead.
  void RingChanged(std::shared_ptr<const Ring> ring);
  /// A node was declared dead before this core existed (a server that joins late): its
  /// requests are refused like those of a worker that dies now.
  void Tombstone(int id);
  /// Requests refused because their worker was declared dead.
  uint64_t fenced() const { return fenced_; }
  /// A worker joined the running job: it enters the step table at the current minimum step.
  void WorkerJoined(int id);
  /// A server is joining: `next` becomes the ring at the cut-over. This server fetches what it
  /// will hold under it and copies updates to the servers that join (DESIGN §8).
  void Prepare(std::shared_ptr<const Ring> next);
  /// Periodic: asks again for ranges whose copy did not arrive (a lost message, a slow source).
  void Tick();
  /// Where progress of the refill goes (the scheduler); reports the current state at once.
  void SetReport(ReportFn report);
  /// Keys stored in the ranges this server masters under the current ring.
  size_t NumMastered() const;
  /// KVServerBase::ChainDigests.
  std::vector<std::pair<Range, uint64_t>> ChainDigests() const;
  /// Ranges this server still has to fetch.
  size_t PendingRanges() const;
  /// Replication after aggregation: pushes applied within window_us are added up per chain
  /// and sent once (additive rules only; 0 = every push is copied at once).
  void SetAggregation(int64_t window_us);
  /// Sends the batches older than the window (call it every window or so).
  void Poll();
  struct CopyStats {
    uint64_t copies = 0;      // copies sent to replicas (re-sends included)
    uint64_t bytes = 0;       // their data bytes
    uint64_t aggregated = 0;  // pushes that travelled inside an aggregate
    uint64_t conflicts = 0;   // aggregates that arrived partly applied (must stay 0)
  };
  CopyStats copy_stats() const;
  /// "" or how the count of copies a request waits for differs from the copies in flight and
  /// in batches (a protocol invariant; tests check it after every step).
  std::string CheckEntries() const;
  void SetPolicy(std::shared_ptr<const BarrierPolicy> policy);
  KVServerBase::BarrierStats Stats() const;
  size_t NumKeys() const {
    std::lock_guard<std::mutex> lk(mu);
    return store->size();
  }
  uint64_t rejected() const { return rejected_; }
  /// Pushes recognised as copies of ones already applied (resends, duplicated messages).
  uint64_t duplicates() const { return duplicates_; }
  /// What the significantly-modified filter did on this server's replies.
  SignificantFilter::Stats significant_stats() const;
  /// The step table (callers must not race with Process; the simulator is single-threaded).
  const StepTable& table() const { return gate.table(); }
  struct OrderStats {
    uint64_t held = 0;          // copies that arrived before their turn and waited
    uint64_t refetched = 0;     // ranges fetched afresh: a gap nothing filled, or another history
    size_t waiting = 0;         // copies waiting now
    bool handing_over = false;  // requests wait for an old master's last updates
  };
  OrderStats order_stats() const;
  /// The copies waiting for their turn (tests print it on failure).
  std::string DebugHeld() const;
  /// The sequence point of key k's range (tests: chain members that agree on it must hold the
  /// same slots).
  uint64_t SeqPoint(Key k) const {
    std::lock_guard<std::mutex> lk(mu);
    return seq_.Min(Range(k, k + 1));
  }

 private:
  // Runs the push half and/or the pull half of a request against the store; returns "" or why
  // it was rejected.
  std::string Handle(const Message& req, Message* reply, bool do_push, bool do_pull);
  std::string Run(const Message& req, Message* reply, bool do_push, bool do_pull);
  Message ReplyTo(const Message& req) const;
  // The last step of every send: a reply to a pull that chose the significantly-modified
  // filter is coded for its worker here, in the order the replies leave.
  void SendFiltered(Message& m, const SendFn& raw);
  // Sends a reply, with an error when err is not empty.
  void Answer(const Message& req, Message* reply, const std::string& err);
  // Answers reads the gate released (mu held).
  void AnswerReleased(const std::vector<uint64_t>& released);

  int app;
  DataType dtype;
  size_t esize;
  std::shared_ptr<StoreBase> store;
  SendFn send;
  NowFn now_us;
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> duplicates_{0};
  std::atomic<uint64_t> fenced_{0};
  // Workers declared dead (ids are never reused): a stalled worker that resumes must not have
  // its resends applied again (the applied log of a dead worker is kept, not forgotten, so
  // copies of its pushes that masters still send are recognised).
  std::unordered_set<int> tombstones_;

  // Exactly-once pushes: what of each worker's requests was applied (above its low-water mark).
  AppliedLog log;
  // Reads held by the barrier, per worker (a copy of one is not held twice).
  using ReadId = std::tuple<int64_t, int, int>;  // timestamp, part, attempt
  std::unordered_map<int, std::set<ReadId>> held_ids;
  // True when all of push m is new. Otherwise *pieces gets the parts of it not applied yet
  // (none for a pure copy).
  bool FreshPart(int worker, const Message& m, std::vector<Message>* pieces) const;
  mutable std::vector<bool> seen_scratch_;  // FreshPart's, kept to reuse its storage (under mu)
  void Record(int worker, const Message& m);
  // The part of push m whose keys no message in `covering` (key frames of copies on their
  // way) holds; an empty message when there is none.
  Message Uncovered(const Message& m, const std::vector<SArray<Key>>& covering) const;

  // Chain replication (master side): every applied piece travels to its replicas; the replies
  // to the worker wait in the request's entry until every copy is acknowledged.
  struct Entry {
    int worker = -1;
    int64_t ts = -1;
    size_t open = 0;
    std::vector<Message> replies;
  };
  struct Hop {
    std::vector<uint64_t> entries;  // the requests waiting for it (several: an aggregate)
    Message msg;                    // the copy as sent (receiver = first replica, chain = rest)
    int64_t sent_us = 0;            // last sent
    int tries = 0;                  // resends by timer (Tick), for the back-off
  };
  // A copy not acknowledged within this (doubling per resend, up to 16 times) is sent again:
  // a replica holds the copies after a lost one until it arrives.
  static constexpr int64_t kHopResendUs = 500000;
  void Replicate(int worker, const Message& applied, const Ring& ring, bool may_add = true);
  // An update applied here long ago that a worker sends again and no copy on its way covers:
  // the chain is asked whether it holds it (Meta.probe) instead of being sent it again, which
  // would apply it out of its place in the order at a replica that lacks it.
  void Probe(int worker, const Message& applied, const Ring& ring);
  void SendHop(const std::vector<uint64_t>& entries, ChainPiece piece);
  // The entry that holds the worker's replies to request ts until its copies are acknowledged
  // (created on first use).
  uint64_t EntryOf(int worker, int64_t ts);
  // Sends every aggregation batch now (before anything that must follow them on the links).
  void FlushBatches();
  // Applies an aggregate whole, or not at all when it was applied before; false: partly
  // applied (counted as a conflict, not applied).
  bool ApplyAggregate(const Message& msg);
  // The request path with mu held; requests routed under a ring this server has not seen yet
  // and for keys it does not master wait in early_ until the ring arrives.
  void ProcessLocked(Message& msg);
  std::vector<Message> early_;
  static constexpr size_t kMaxEarly = 4096;
  std::unique_ptr<Aggregator> agg_;
  int64_t window_us_ = 0, batch_since_us_ = 0;
  CopyStats copy_stats_;
  void OnReplica(Message& msg);
  // Order along a chain (DESIGN §8, invariant 3; src/replication/seq_map.h). A copy is applied
  // when its sequence entries match this server's points; one that comes early waits in
  // held_copies_ (bounded: beyond it, dropped like a lost message; the master resends it).
  // replay: a copy taken before a range import and applied again over it (acknowledged then).
  enum class Delivery { kApplied, kHeld, kRejected };
  Delivery Deliver(Message& msg, bool replay);
  // Asks the master of a held copy for the older ones it still waits for (Meta.nack).
  void Nack(const Message& held);
  std::map<int, int64_t> last_nack_us_;  // per master
  // Delivers the held copies whose turn came (until none is).
  void ReleaseHeld();
  // The ranges a copy's sequence entries cover; the ranges being fetched now.
  static RangeSet ProbeRanges(const Message& msg);
  RangeSet Fetching() const;
  // Fetches ranges afresh from their master: their history differs from it, or a gap stayed.
  void Refetch(RangeSet rs);
  struct HeldCopy {
    Message msg;
    int64_t since = 0;
    bool replay = false;
  };
  std::vector<HeldCopy> held_copies_;
  static constexpr size_t kMaxHeldCopies = 4096;
  SeqMap seq_;
  OrderStats order_;
  // Hand-over at a prepared cut-over: ranges this server masters from now on, by their old
  // master, which may still apply updates to them until it adopts the ring. Requests for them
  // wait in early_ until this server holds the old master's last point (or a newer ring comes).
  std::map<int, RangeSet> awaiting_;
  std::vector<uint64_t> handover_points_;  // (begin, end, point) the old masters reported
  uint64_t handover_epoch_ = 0;
  int64_t handover_since_us_ = 0;
  std::set<int> reported_;                 // old masters whose points arrived
  std::vector<Message> handover_asks_;     // asks for a ring this server has not adopted yet
  std::vector<Message> early_handovers_;   // reports for a ring this server has not adopted yet
  std::shared_ptr<const Ring> last_ring_;  // the ring before the one in force
  // The old master: tells the new masters of the ranges it gave up where it stopped.
  void HandOver(const Ring& before, const Ring& after);
  // The ranges an update of msg moves the points of: the segments of the current ring it
  // touches, cut by those of the ring being prepared (a joiner gets the keys of its own part).
  RangeSet SeqRanges(const Message& msg, const Ring& ring) const;
  void TakeOver(const Ring& before, const Ring& after, bool prepared);
  void AskHandover();
  Message HandoverMessage(int to, bool request, uint64_t epoch) const;
  void OnHandover(Message& msg);
  // True (and the waiting requests served) when every awaited range is caught up.
  bool CheckHandover();
  bool Awaiting(const Message& request) const;
  // Passes a copy on along its chain, or (the tail) acknowledges it to its master.
  void ForwardOrAck(const Message& msg);
  void OnReplicaAck(const Message& msg);
  void Flush(uint64_t entry);
  int self_;
  RingFn ring_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::unordered_map<uint64_t, Hop> hops_;
  std::map<std::pair<int, int64_t>, uint64_t> entry_of_;  // (worker, timestamp) -> entry
  uint64_t next_fwd_ = 1;

  // Refill and hand-off (server_refill.cc; mu held). held_: the ranges this server holds
  // completely; fetches_: copies asked for, by id; buffered_: copies of updates that arrived
  // while something was missing, applied again (deduplicated) after each imported range.
  void Plan();
  void SendFetch(uint64_t id);
  void OnRefillRequest(Message& msg);
  void OnRefillReply(const Message& msg);
  void ServeWaiting();
  // Applies what of a copy is new (exactly once); false when it is rejected.
  bool ApplyCopy(const Message& msg);
  void Report();
  // True when every key of a worker request is mastered here under ring.
  bool Owns(const Message& msg, const Ring& ring) const;
  // Copies of an applied update for the servers that join at the prepared ring.
  std::vector<ChainPiece> JoinerPieces(const Message& applied, const Ring& ring) const;
  struct Fetch {
    RangeSet ranges;
    int from = -1;
    int64_t sent_us = 0;
  };
  std::shared_ptr<const Ring> next_;  // the ring being prepared (a join), or null
  uint64_t planned_epoch_ = 0;
  uint64_t cur_epoch_ = 0;  // of the current ring (0: no ring, as in the simulator)
  bool have_held_ = false;
  RangeSet held_;
  RangeSet unwanted_;  // neither held nor being fetched
  std::map<uint64_t, Fetch> fetches_;
  std::vector<Message> buffered_;
  std::vector<Message> waiting_;  // refill requests this server cannot serve yet
  ReportFn report_;
  uint64_t next_fetch_ = 1;
  int64_t fetch_timeout_us_ = 1000000;
  // A gap in a replica's copies that no resend filled within this: the range is fetched afresh.
  int64_t gap_timeout_us_ = 5000000;

  struct HeldRead {
    Message req;
    int64_t since;
  };
  mutable std::mutex mu;  // the gate, held reads and the histograms
  PullGate gate;
  std::unordered_map<uint64_t, HeldRead> held;
  uint64_t next_handle = 0;
  std::map<int64_t, uint64_t> staleness, read_lag;

  mutable std::mutex sig_mu_;  // the filter's copies; held while a coded reply is sent
  SignificantFilter sig_;
};

}  // namespace ps

#endif  // PS_KV_SERVER_CORE_H_
