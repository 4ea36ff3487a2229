// The request handling of a server for one application id, without any I/O of its own:
// requests go in, replies go out through a callback. KVServer runs it on a node's receive
// thread; the simulator (src/sim) runs the very same code on virtual time.
#ifndef PS_KV_SERVER_CORE_H_
#define PS_KV_SERVER_CORE_H_

#include <algorithm>
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
#include "ps/kv_worker.h"
#include "replication/chain_replicator.h"
#include "replication/refill.h"
#include "replication/seq_map.h"
#include "ring/ring.h"
#include "store/store.h"

namespace ps {

class ServerCore : private ChainReplicator::Host {
 public:
  using SendFn = std::function<void(Message&)>;
  /// Microseconds on any monotonic clock (wall or virtual).
  using NowFn = std::function<int64_t()>;

  using RingFn = std::function<std::shared_ptr<const Ring>()>;
  using RefillReport = ps::RefillReport;
  using ReportFn = std::function<void(const RefillReport&)>;

  /// self: this server's node id; ring: the current ring (its replicas say how many copies a
  /// push needs before it is acknowledged; null or 0 replicas = none).
  ServerCore(int app, DataType dtype, std::shared_ptr<StoreBase> store,
             std::shared_ptr<const BarrierPolicy> policy, uint64_t seed,
             const std::vector<int>& workers, SendFn send, NowFn now_us, int self = -1,
             RingFn ring = nullptr);

  /// Handles one request: validates it, applies its push half, answers its pull half now or
  /// when the barrier policy lets it (DESIGN §7), and sends the replies.
  void Process(Message& msg);
  /// A node was declared dead: a worker leaves the step table, and reads it held back are
  /// answered; its requests are refused from now on. `worker` says whether it was a worker
  /// (requests that wait for this server to learn of a worker's death are served then).
  void WorkerDead(int id, bool worker = true);
  /// The ring changed (a server left): copies on their way to a server that left go to the
  /// new chain instead.
  void RingChanged(std::shared_ptr<const Ring> ring);
  /// A node was declared dead before this core existed (a server that joins late): its
  /// requests are refused like those of a worker that dies now.
  void Tombstone(int id, bool worker = true);
  /// Requests refused because their worker was declared dead.
  uint64_t fenced() const { return fenced_; }
  /// A worker joined the running job: it enters the step table at the current minimum step.
  void WorkerJoined(int id);
  /// A server is joining: `next` becomes the ring at the cut-over. This server fetches what it
  /// will hold under it and copies updates to the servers that join (DESIGN §8).
  void Prepare(std::shared_ptr<const Ring> next);
  /// Periodic: asks again for ranges whose copy did not arrive (a lost message, a slow source),
  /// and every kHeldReportUs logs HeldReport(kHeldReportUs) when it is not empty.
  void Tick();
  /// "" or, when a read has been held by the barrier policy for at least held_us, one line
  /// naming the oldest such read and the workers behind it with their steps ("pull of worker
  /// node 7 at step 5 held 6.0 s under bsp; behind it: worker node 8 at step 3").
  std::string HeldReport(int64_t held_us) const;
  static constexpr int64_t kHeldReportUs = 5000000;
  /// Where progress of the refill goes (the scheduler); reports the current state at once.
  void SetReport(ReportFn report);
  /// Keys stored in the ranges this server masters under the current ring.
  size_t NumMastered() const;
  /// KVServerBase::ChainDigests.
  std::vector<std::pair<Range, uint64_t>> ChainDigests() const;
  /// Ranges this server still has to fetch.
  size_t PendingRanges() const;
  /// Refill requests of other servers this one holds back (it cannot answer them yet).
  size_t WaitingRefills() const {
    std::lock_guard<std::mutex> lk(mu);
    return waiting_.size();
  }
  /// Copies this server sent down its chains that no replica has acknowledged yet.
  size_t CopiesInFlight() const;
  /// True while this server waits for an old master's hand-over (its last points) of a range
  /// it took over.
  bool AwaitingHandover() const;
  /// Range copies (refill, join, leave) travel in pieces of about this many bytes of slots
  /// (one slot more at most), so neither end holds more than a piece of a range at once.
  void SetPieceBytes(uint64_t bytes) {
    std::lock_guard<std::mutex> lk(mu);
    piece_bytes_ = std::max<uint64_t>(bytes, 1);
  }
  /// Copies of ranges being fetched are kept (to apply again over the piece on its way) up to
  /// this many bytes; past it the pieces are asked for again (default 64 MB).
  void SetRefillBufferLimit(uint64_t bytes) {
    std::lock_guard<std::mutex> lk(mu);
    chain_.SetBufferLimit(bytes);
  }
  /// Replication after aggregation: pushes applied within window_us are added up per chain
  /// and sent once (additive rules only; 0 = every push is copied at once).
  void SetAggregation(int64_t window_us);
  /// Sends the batches older than the window (call it every window or so).
  void Poll();
  using CopyStats = ChainReplicator::CopyStats;
  CopyStats copy_stats() const;
  /// "" or how the count of copies a request waits for differs from the copies in flight and
  /// in batches (a protocol invariant; tests check it after every step).
  std::string CheckEntries() const;
  void SetPolicy(std::shared_ptr<const BarrierPolicy> policy, int group = -1);
  /// Puts a worker in a worker group (index into Config::worker_groups; 0 unless set): its
  /// reads are decided over its group's steps under its group's policy (-1 in SetPolicy: every
  /// group's).
  void SetWorkerGroup(int worker, int group);
  KVServerBase::BarrierStats Stats() const;
  size_t NumKeys() const {
    std::lock_guard<std::mutex> lk(mu);
    return store->size();
  }
  size_t StoreBytes() const {
    std::lock_guard<std::mutex> lk(mu);
    return store->bytes();
  }
  uint64_t rejected() const { return rejected_; }
  /// Pushes recognised as copies of ones already applied (resends, duplicated messages).
  uint64_t duplicates() const { return duplicates_; }
  /// What the significantly-modified filter did on this server's replies.
  SignificantFilter::Stats significant_stats() const;
  /// The step table (callers must not race with Process; the simulator is single-threaded).
  const StepTable& table() const { return gate.table(); }
  using OrderStats = ChainReplicator::OrderStats;
  OrderStats order_stats() const;
  /// The copies waiting for their turn (tests print it on failure).
  std::string DebugHeld() const;
  /// The sequence point of key k's range (tests: chain members that agree on it must hold the
  /// same slots).
  uint64_t SeqPoint(Key k) const {
    std::lock_guard<std::mutex> lk(mu);
    return chain_.points().Min(Range(k, k + 1));
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
  // Workers among the tombstones, and requests whose sender knew of more (Meta.dead_workers):
  // they wait until this server learns of those deaths (bounded like early_).
  uint32_t dead_workers_ = 0;
  std::vector<Message> after_death_;
  // Records a death (mu held); true if it was news.
  bool Bury(int id, bool worker);

  // Exactly-once pushes: what of each worker's requests was applied (above its low-water mark).
  AppliedLog log;
  // Reads held by the barrier, per worker (a copy of one is not held twice).
  using ReadId = std::tuple<int64_t, int, int>;  // timestamp, part, attempt
  std::unordered_map<int, std::set<ReadId>> held_ids;
  // True when all of push m is new. Otherwise *pieces gets the parts of it not applied yet
  // (none for a pure copy).
  // `use_mark`: a request below the worker's low-water mark counts as applied (false for a copy
  // that is the next update of its ranges here: ApplyCopy).
  bool FreshPart(int worker, const Message& m, std::vector<Message>* pieces,
                 bool use_mark = true) const;
  mutable std::vector<bool> seen_scratch_;  // FreshPart's, kept to reuse its storage (under mu)
  void Record(int worker, const Message& m);
  // The request path with mu held; requests routed under a ring this server has not seen yet
  // and for keys it does not master wait in early_ until the ring arrives.
  void ProcessLocked(Message& msg);
  std::vector<Message> early_;
  static constexpr size_t kMaxEarly = ChainReplicator::kMaxEarly;
  // The applied log keeps a data task's pushes (PushForTask) under id kTaskIds + task, above
  // every node id.
  static constexpr int kTaskIds = 1 << 30;
  static bool ValidTask(const pb::Meta& m) {
    return m.has_task() && m.task() >= 0 && m.task() < kMaxTasks;
  }
  // Whose request stream a request is for exactly-once: its data task's (a push for a task),
  // else its sender's.
  static int Owner(const pb::Meta& m) {
    return m.has_task() && m.op() == pb::Meta::DATA ? kTaskIds + m.task() : m.sender();
  }
  int self_;
  RingFn ring_;

  // ChainReplicator::Host (mu held).
  bool ApplyCopy(const Message& copy, bool ordered) override;
  // Decided key by key; a key holding some of the aggregate's pushes but not all is a
  // protocol error (counted as a conflict, not applied).
  bool ApplyAggregate(const Message& aggregate, bool ordered) override;
  bool Lacks(int worker, const Message& part) const override;
  const RangeSet& Held() const override { return held_; }
  RangeSet Fetching() const override;
  uint64_t FetchMark() const override { return next_fetch_; }
  RangeSet AskedBefore(uint64_t mark) const override;
  void Refetch(const RangeSet& rs) override;
  void HandedOver() override;
  std::shared_ptr<const Ring> Prepared() const override { return next_; }
  uint64_t Epoch() const override { return cur_epoch_; }
  size_t NumWorkers() const override { return gate.table().size(); }
  uint64_t conflicts_ = 0;

  // Refill and hand-off (server_refill.cc; mu held). held_: the ranges this server holds
  // completely; fetches_: copies asked for, by id.
  void Plan();
  void SendFetch(uint64_t id);
  void OnRefillRequest(Message& msg);
  // "" when `asker`'s refill request for rs planned under `epoch` can be answered now, else
  // why not.
  std::string RefillBlocked(const RangeSet& rs, uint64_t epoch, int asker) const;
  void OnRefillReply(const Message& msg);
  void ServeWaiting();
  void Report();
  // True when every key of a worker request is mastered here under ring.
  bool Owns(const Message& msg, const Ring& ring) const;
  // A request routed under an older ring whose keys this server no longer masters is answered
  // with a redirect (true): the worker plans it again under the newer ring. Applied when a
  // request arrives and again when the barrier releases a held read (mu held).
  bool RedirectIfMoved(const Message& msg, Message* reply);
  struct Fetch {
    RangeSet ranges;
    int from = -1;
    int64_t sent_us = 0;
    int64_t timeout_us = 0;  // asked again after this (doubling per attempt)
    int attempts = 0;
  };
  std::shared_ptr<const Ring> next_;          // the ring being prepared (a join), or null
  std::shared_ptr<const Ring> planned_ring_;  // the ring in force at the last Plan
  // Gives up the ranges held only for next_ (PrecopiesSurvive said they may lack updates):
  // the next Plan fetches them again if a ring still gives them to this server.
  void ForgetPrecopies();
  uint64_t planned_epoch_ = 0;
  uint64_t cur_epoch_ = 0;    // of the current ring (0: no ring, as in the simulator)
  bool taking_ring_ = false;  // inside RingChanged: a completed hand-over serves nothing yet
  bool have_held_ = false;
  RangeSet held_;
  RangeSet unwanted_;  // neither held nor being fetched
  // Ranges this server held completely and fetches afresh (its copy was not its master's
  // history): its copy stays in the store meanwhile, and holds every update acknowledged
  // there (a chain member acknowledges only what it applied).
  RangeSet stale_;
  std::map<uint64_t, Fetch> fetches_;
  std::vector<Message> waiting_;  // refill requests this server cannot serve yet
  // Since when some refill request has been waiting (0: none), and when that was last logged:
  // a refill that never ends stalls the ring's cut-over, and the log must say who holds it.
  int64_t waiting_since_us_ = 0, waiting_logged_us_ = 0;
  ReportFn report_;
  RangeSet orphans_;  // of the last plan, for the report
  uint64_t next_fetch_ = 1;
  int64_t fetch_timeout_us_ = 1000000;
  uint64_t piece_bytes_ = 16 << 20;  // of a range copy (SetPieceBytes)

  struct HeldRead {
    Message req;
    int64_t since;
    int64_t noticed = 0;  // when its worker was last told why it waits
  };
  std::string HeldReportLocked(int64_t held_us) const;  // mu held
  // "held 6.0 s under bsp; behind it: worker node 9 at step 3" (mu held).
  std::string HeldWhyLocked(const HeldRead& h, int64_t now,
                            const std::string& after_policy = "") const;
  int64_t held_reported_us_ = 0;
  mutable std::mutex mu;  // the gate, held reads and the histograms
  PullGate gate;
  std::unordered_map<uint64_t, HeldRead> held;
  uint64_t next_handle = 0;
  std::map<int64_t, uint64_t> staleness, read_lag;

  mutable std::mutex sig_mu_;  // the filter's copies; held while a coded reply is sent
  SignificantFilter sig_;

  // Chain replication, order along the chains and hand-over (src/replication/; mu held).
  ChainReplicator chain_;
};

}  // namespace ps

#endif  // PS_KV_SERVER_CORE_H_
