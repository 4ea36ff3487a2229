// Chain replication for one application id on one server (DESIGN §8): the protocol that keeps
// every member of a key range's chain holding the master's updates in the master's order.
//
// Master side: every update the server applies as master is cut by chain (or, with a window,
// added to a batch per chain first) and sent down the chain as a copy that carries the update's
// place in the order of each range it touches (SeqMap). The worker's reply waits in an entry
// until the tail acknowledges every copy; copies are resent with back-off until then, on NACK
// from a replica that waits for an older one, and re-routed along the new chains when a server
// leaves the ring.
//
// Replica side: a copy is applied only when its sequence entries follow this server's points;
// an early one waits (bounded), a gap nobody fills or a copy of another history makes the
// server fetch the range afresh (the owner's refill). Then the copy goes on to the next member,
// or the tail acknowledges it to the master.
//
// Hand-over at a ring change: a server that stops mastering a range tells the new master where
// it stopped; the new master serves requests for the range only once it holds that point (or
// jumps past it when the old master died or stays silent), so updates never interleave from
// two masters.
//
// The replicator does no I/O and has no lock of its own: its owner (ServerCore) calls it under
// its lock, gives it a send function and a clock, and applies the copies it hands back through
// Host. The simulator drives it on virtual time through the same owner.
#ifndef PS_REPLICATION_CHAIN_REPLICATOR_H_
#define PS_REPLICATION_CHAIN_REPLICATOR_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "message/message.h"
#include "replication/aggregator.h"
#include "replication/chain.h"
#include "replication/refill.h"
#include "replication/seq_map.h"
#include "ring/ring.h"
#include "util/rtt_estimate.h"

namespace ps {

class ChainReplicator {
 public:
  /// What the replicator needs of the server it runs in (called under the owner's lock).
  class Host {
   public:
    virtual ~Host() = default;
    /// Applies what of a copy of a worker's update this server lacks, exactly once; false:
    /// rejected (never acknowledged, so its master keeps it). `ordered`: the copy is the next
    /// update of its ranges' history here (its prev equals this server's points), so this
    /// server lacks it whatever the worker's low-water mark says: a request below the mark is
    /// complete at the chain it was acknowledged by, which this server may have joined since.
    virtual bool ApplyCopy(const Message& copy, bool ordered) = 0;
    /// Applies a batch of copies whole, or not at all when it was applied before (`ordered` as
    /// for ApplyCopy).
    virtual bool ApplyAggregate(const Message& aggregate, bool ordered) = 0;
    /// True when `part` (some keys of worker's update) holds something not applied here.
    virtual bool Lacks(int worker, const Message& part) const = 0;
    /// The ranges this server holds completely.
    virtual const RangeSet& Held() const = 0;
    /// The ranges being fetched now (empty: no refill under way).
    virtual RangeSet Fetching() const = 0;
    /// A mark for the fetches asked for so far: those asked for later get larger ones.
    virtual uint64_t FetchMark() const = 0;
    /// The ranges of the fetches under way that were asked for before `mark`.
    virtual RangeSet AskedBefore(uint64_t mark) const = 0;
    /// Drop these held ranges and fetch them afresh from their master.
    virtual void Refetch(const RangeSet& rs) = 0;
    /// The ranges taken over are complete: requests that waited for them can be served.
    virtual void HandedOver() = 0;
    /// The ring being prepared (a join or a leave), or null.
    virtual std::shared_ptr<const Ring> Prepared() const = 0;
    /// The epoch of the ring this server follows (0: none, as in the simulator).
    virtual uint64_t Epoch() const = 0;
    /// Workers in the step table: a batch holding a push of each leaves at once.
    virtual size_t NumWorkers() const = 0;
  };

  using SendFn = std::function<void(Message&)>;
  using NowFn = std::function<int64_t()>;
  using RingFn = std::function<std::shared_ptr<const Ring>()>;

  ChainReplicator(int app, DataType dtype, bool additive, int self, Host* host, SendFn send,
                  NowFn now_us, RingFn ring);

  // ---- master side (chain_replicator.cc)

  /// True when updates under `ring` need copies (replicas, or servers joining).
  bool Active(const Ring& ring) const { return ring.replicas() > 0 || host_->Prepared(); }
  /// An update this server applied as master: numbered and sent down its chains (or batched).
  /// may_add: it may join a batch (never a part of a push applied before). reply: the worker's
  /// reply, final (a push without a pull): when the update goes as one copy down one chain, its
  /// tail sends it (Meta.relay) and the master holds only a spare for the tail's failures.
  void Replicate(int worker, const Message& applied, const Ring& ring, bool may_add = true,
                 const Message* reply = nullptr);
  /// A worker sent again a push this server applied before: the copies of it still on their
  /// way are sent again. Returns the part of it that no such copy covers (empty message: none).
  Message Resend(int worker, const Message& push);
  /// That part: the chain is asked whether it holds it (Meta.probe). Sending it again as a copy
  /// would apply it out of its place in the order at a replica that lacks it.
  void Probe(int worker, const Message& applied, const Ring& ring);
  /// True when the reply to worker's request ts waits for copies (it is sent once they are all
  /// acknowledged); false: send it now.
  bool HoldReply(int worker, int64_t ts, Message* reply);
  /// A replica's acknowledgement (or NACK, or key-cache miss: sent again in full) of a copy.
  void OnAck(const Message& ack);
  /// Batches: pushes applied within window_us are added up per chain and sent once (additive
  /// rules only; 0 = every push is copied at once).
  void SetAggregation(int64_t window_us);
  /// Sends the batches older than the window.
  void Poll();
  /// Sends every batch now (before anything that must follow them on the links).
  void FlushBatches();

  // ---- replica side and hand-over (chain_order.cc)

  /// A copy from a master or a predecessor in the chain.
  void OnCopy(Message& copy);
  /// HANDOVER: an old master's report of where it stopped, or a new master asking for it.
  void OnHandover(Message& msg);
  /// True when req touches a range this server took over and still waits for.
  bool Awaiting(const Message& req) const;
  /// True when rs meets a range this server took over and still waits for.
  bool Awaiting(const RangeSet& rs) const;

  // ---- both

  /// The ring changed: hand over and take over ranges, forget copies only a departed server
  /// could complete, and send copies that went to a server gone along the new chains.
  /// prepared: the ring is the one prepared (a cut-over, not a failure). Call AfterRing once the
  /// owner has planned its refill for the ring.
  void RingChanged(const std::shared_ptr<const Ring>& ring, bool prepared);
  void AfterRing();
  /// The prepared ring changed or was dropped, or a server died: copies on their way to a
  /// server in neither the current nor the prepared ring (a joiner that died, a preparation
  /// cancelled) go along the current chains instead, so no acknowledgement waits for them.
  void DropGone();
  /// This server keeps its own copy of rs as the master's (the server it fetched them afresh
  /// from is gone): its next updates there jump past every point of the old histories, so
  /// replicas that followed another history fetch the ranges from it.
  void Adopt(const RangeSet& rs, uint64_t epoch) {
    for (const Range& r : rs) seq_.Jump(r, SeqMap::Base(epoch));
    // Copies applied while it fetched them may have moved its points past updates it lacks:
    // equal points tell nothing here, so every member fetches the ranges from it.
    Announce(rs, nullptr, /*refetch=*/true);
  }
  /// The first ring this server sees (the one hand-overs start from).
  void FirstRing(const std::shared_ptr<const Ring>& ring) {
    if (!last_ring_) last_ring_ = ring;
  }
  /// Periodic: resends unacknowledged copies, fetches ranges with a gap nobody filled, asks
  /// old masters again for their points (or jumps past them after a while).
  void Tick();
  /// Ranges just imported by a refill: the copies that arrived meanwhile are applied again
  /// over them in the master's order.
  void Replay(const RangeSet& imported);
  /// The fetches changed: copies no fetch under way can lack are dropped.
  void PruneBuffered();
  /// Copies kept for refills beyond this many bytes: the fetches under way are asked again
  /// instead (tests make it small).
  void SetBufferLimit(uint64_t bytes) { buffer_limit_ = bytes; }

  /// This server's sequence points (a refill snapshot carries them).
  const SeqMap& points() const { return seq_; }
  void SetPoints(SeqMap points) { seq_ = std::move(points); }

  struct CopyStats {
    uint64_t copies = 0;      // copies sent to replicas (re-sends included)
    uint64_t bytes = 0;       // their data bytes
    uint64_t aggregated = 0;  // pushes that travelled inside an aggregate
    uint64_t conflicts = 0;   // aggregates that arrived partly applied (must stay 0)
  };
  const CopyStats& copy_stats() const { return copy_stats_; }
  struct OrderStats {
    uint64_t held = 0;       // copies that arrived before their turn and waited
    uint64_t refetched = 0;  // ranges fetched afresh: a gap nothing filled, or another history
    size_t waiting = 0;      // copies waiting now
    size_t buffered = 0;     // copies kept for refills under way, and their bytes
    uint64_t buffered_bytes = 0;
    uint64_t overflows = 0;     // times they passed the limit and the fetches were asked again
    bool handing_over = false;  // requests wait for an old master's last updates
  };
  OrderStats order_stats() const;
  /// Copies sent and not acknowledged yet (each waits for its resend timer if lost).
  size_t copies_in_flight() const { return hops_.size(); }
  /// "" or how the count of copies a request waits for differs from the copies in flight and
  /// in batches (a protocol invariant; tests check it after every step).
  std::string CheckEntries() const;
  /// The copies waiting for their turn (tests print it on failure).
  std::string DebugHeld() const;

  /// A copy not acknowledged within this (doubling per resend, up to 16 times) is sent again.
  static constexpr int64_t kHopResendUs = 500000;
  /// However slow the replica's acknowledgements were, a copy waits at most this long.
  static constexpr int64_t kHopMaxUs = 16 * kHopResendUs;
  static constexpr size_t kMaxHeldCopies = 4096;
  static constexpr size_t kMaxEarly = 4096;
  /// Copies unacknowledged per replica: beyond either bound the next copy waits at its master
  /// (which keeps it anyway until it is acknowledged). A replica that falls behind then holds
  /// at most a window of copies in its queues, never a transport queue's worth, so nothing
  /// is dropped there and no gap forces a range to be fetched afresh.
  static constexpr size_t kWindowHops = 1024;
  static constexpr uint64_t kWindowBytes = 16 << 20;

 private:
  // The worker's replies to one request, waiting until every copy of it is acknowledged.
  struct Entry {
    int worker = -1;
    int64_t ts = -1;
    size_t open = 0;
    std::vector<uint64_t> hops;  // the copies sent for it (some may be acknowledged since)
    std::vector<Message> replies;
    // A copy of it was re-routed after a ring change that left some of its keys to another
    // master: this server cannot tell that master has them, so its replies are never sent
    // (the worker resends to that master, whose log decides).
    bool abandoned = false;
    // The tail sent replies[0] (the request's first answer) itself: Flush sends the others only.
    bool relayed = false;
  };
  struct Hop {
    std::vector<uint64_t> entries;  // the requests waiting for it (several: an aggregate)
    Message msg;                    // the copy as sent (receiver = first replica, chain = rest)
    int64_t sent_us = 0;            // last sent
    int tries = 0;                  // resends by timer, for the back-off
    int sends = 0;                  // every send: only an answer to the first is a clean sample
    bool queued = false;            // waits for room in its receiver's window (never sent)
  };
  // The copies on their way to one replica (sent, not yet acknowledged) and those waiting for
  // room, in the order they must leave.
  struct Flight {
    size_t hops = 0;
    uint64_t bytes = 0;
    std::deque<uint64_t> queued;
    // A replica that acknowledges late (it is slow, or this master reads its answers late)
    // is given longer before a copy goes again.
    RttEstimate rtt;
  };
  struct HeldCopy {
    Message msg;
    int64_t since = 0;
    bool replay = false;
  };
  enum class Delivery { kApplied, kHeld, kRejected };

  // How long a copy is given before it is sent again: the receiver's round-trip timeout (at
  // least kHopResendUs), doubling per timer resend, 16x at most, and never past kHopMaxUs.
  int64_t HopInterval(const Hop& h) const;
  std::shared_ptr<const Ring> CurrentRing() const { return ring_ ? ring_() : nullptr; }
  // Takes copy id out of flight and sends `pieces` in its place for the same requests (none:
  // it is dropped); abandon: those requests are never acknowledged here (some of their keys
  // are another master's now, whose log decides).
  void ReplaceHop(uint64_t id, bool abandon, std::vector<ChainPiece> pieces);
  // Re-routes along ring's chains every copy on its way to a server for which alive is false.
  void Reroute(const Ring& ring, const std::function<bool(int)>& alive);
  uint64_t EntryOf(int worker, int64_t ts);
  // relay: the worker's reply, for the tail to send (Meta.relay); every other hop carries none
  // (a re-routed or cut copy no longer stands for the whole request).
  void SendHop(const std::vector<uint64_t>& entries, ChainPiece piece,
               const Message* relay = nullptr);
  void Flush(uint64_t entry);
  void Send(Hop* hop);
  // Sends hop id now if its receiver's window has room (and nothing waits before it), else
  // queues it.
  void Launch(uint64_t id);
  // Sends hop into window f if it has room; false (nothing sent) otherwise.
  bool Fly(Flight* f, Hop* hop);
  // The hop leaves the window (acknowledged, or re-routed): the copies waiting for room go.
  void Land(uint64_t id, const Hop& hop);
  void Pump(int receiver);
  // After a jump over rs (a take-over without the old master's last points): one empty
  // update (a mark: a copy without data) of each range this server masters there, numbered
  // and sent down its chains at once. A member whose history of the range differs from this
  // server's fetches the range afresh: at once when it applied an update this server never got
  // (a mismatch), after the gap timeout when it lacks one this server has (a gap no copy
  // fills). Waiting for the range's next update instead left it differing for as long as none
  // came (ps_sim --cluster seeds 749 and 508 with worker deaths, 776 under --rule assign: the
  // update in question was a dead worker's, never resent). refetch: every member fetches the
  // ranges whatever its points (Adopt; seed 232 under --rule assign).
  void Announce(const RangeSet& rs, std::shared_ptr<const Ring> ring = nullptr,
                bool refetch = false);
  // The paths a mark takes under ring: the chain of every segment its range meets, and each
  // server that joins the range's chain at the prepared ring.
  std::vector<ChainPiece> MarkPieces(const Message& mark, const Ring& ring) const;
  static bool IsMark(const Message& m) {
    return m.data.empty() && !m.meta.probe() && !m.meta.aggregate();
  }
  // Applies a copy, an aggregate or a mark (nothing to apply); false: rejected. `ordered`: as
  // for Host::ApplyCopy.
  bool Apply(const Message& m, bool ordered);
  // Copies of an applied update for the servers that join at the prepared ring.
  std::vector<ChainPiece> JoinerPieces(const Message& applied, const Ring& ring) const;
  // The ranges an update of msg moves the points of: the segments of the current ring it
  // touches, cut by those of the ring being prepared and by ranges still handed over.
  RangeSet SeqRanges(const Message& msg, const Ring& ring) const;

  // A copy is applied when its sequence entries match this server's points; one that comes
  // early waits in held_copies_. replay: a copy taken before a range import and applied again
  // over it (acknowledged then).
  Delivery Deliver(Message& msg, bool replay);
  void Nack(const Message& held);
  // Tells a copy's master that this server masters ranges `mine` of it and lacks the update
  // there (Meta.refused).
  void Refuse(const Message& copy, const RangeSet& mine);
  // The master's side: the copy's keys in those ranges are cut from it; its requests are never
  // acknowledged here (their workers resend to the new master, whose log decides).
  void OnRefused(const Message& no);
  // True when a copy's sequence entries (the units its keys lie in) meet rs.
  static bool Touches(const Message& msg, const RangeSet& rs);
  // Keeps a copy until its turn (once: a copy of one that waits is not kept again; beyond
  // kMaxHeldCopies it is dropped like a lost message).
  Delivery Hold(const Message& msg, bool replay);
  // True when the copy holds, in ranges rs, an update this server has not applied (aggregates:
  // never; their rule is additive, so their order does not matter).
  bool LacksIn(const Message& msg, const RangeSet& rs) const;
  void ReleaseHeld();
  // Held copies whose master is gone from the ring and awaited in no hand-over: acknowledged
  // (replayed) ones applied, the others dropped. Acknowledged ones in ranges this server has
  // just jumped (it masters them now, past its old master's history) are applied too, whoever
  // their master.
  void ApplyOrphans(const Ring& ring, const RangeSet& jumped);
  // The points of r for a hand-over report at `epoch`: those of ranges this server still awaits
  // its own old master's report in are the epoch's base (no complete history there).
  void ExportReport(const Range& r, uint64_t epoch, std::vector<uint64_t>* out) const;
  void Refetch(RangeSet rs);
  void ForwardOrAck(const Message& msg);
  // Tells the copy's master that its chain holds it.
  void Ack(const Message& msg);
  // An answer to a copy's master about it (an acknowledgement; with a flag, a NACK or a
  // refusal).
  Message ToMaster(const Message& copy) const;
  // True when a copy holds explicit keys (StripRanges can cut it).
  static bool CanCut(const Message& m) {
    return m.meta.op() != pb::Meta::DENSE_PUSH && m.meta.val_total() == 0 && !m.data.empty() &&
           m.data[0].size() % sizeof(Key) == 0;
  }
  // Cuts the keys in rs (and their sequence entries) out of a copy; false when nothing is left.
  bool StripRanges(Message* msg, const RangeSet& rs) const;
  void HandOver(const Ring& before, const Ring& after);
  void TakeOver(const Ring& before, const Ring& after, bool prepared);
  void AskHandover();
  Message HandoverMessage(int to, bool request, uint64_t epoch) const;
  // True (and the owner told) when every awaited range is caught up.
  bool CheckHandover();

  const int app_;
  const DataType dtype_;
  const size_t esize_;
  const bool additive_;
  const int self_;
  Host* const host_;
  SendFn send_;
  NowFn now_us_;
  RingFn ring_;

  // Master side.
  std::unordered_map<uint64_t, Entry> entries_;
  std::unordered_map<uint64_t, Hop> hops_;
  std::map<int, Flight> flights_;                         // by first replica
  std::map<std::pair<int, int64_t>, uint64_t> entry_of_;  // (worker, timestamp) -> entry
  uint64_t next_fwd_ = 1;
  int64_t next_mark_ = 1;  // the timestamps of marks' entries (worker -1)
  RangeSet jumped_;        // jumped at a ring change: announced once it is in force
  // Kept while fetching afresh (Adopt) while an old master's hand-over of them was awaited: the
  // mark that makes every member fetch them waits for the hand-over too, and goes out with
  // the next mark of those ranges (ps_sim --cluster --seed 44 --kill-worker-every-s 3: the
  // refetch was dropped, and members that had fetched the old master's copy followed this
  // server's own).
  RangeSet refetch_pending_;
  std::unique_ptr<Aggregator> agg_;
  int64_t window_us_ = 0, batch_since_us_ = 0;
  CopyStats copy_stats_;

  // Order along the chain.
  SeqMap seq_;
  OrderStats order_;
  std::vector<HeldCopy> held_copies_;
  std::map<int, int64_t> last_nack_us_;  // per master
  // Copies of ranges being fetched, applied on arrival and again over the piece of those
  // ranges that a fetch under way brings. Only the fetches asked for before a copy arrived can
  // lack it: its master applied it before sending it, so a snapshot taken after holds it.
  // mark: the FetchMark at its arrival.
  struct BufferedCopy {
    Message msg;
    uint64_t mark;
  };
  void Buffer(const Message& msg);
  std::vector<BufferedCopy> buffered_;
  uint64_t buffered_bytes_ = 0;
  uint64_t buffer_limit_ = 64 << 20;
  // A gap in a replica's copies that no resend filled within this: the range is fetched afresh.
  int64_t gap_timeout_us_ = 5000000;

  // Hand-over at a prepared cut-over: ranges this server masters from now on, by their old
  // master, which may still apply updates to them until it adopts the ring.
  std::map<int, RangeSet> awaiting_;
  std::vector<uint64_t> handover_points_;  // (begin, end, point) the old masters reported
  uint64_t handover_epoch_ = 0;
  int64_t handover_since_us_ = 0;
  int64_t handover_timeout_us_ = 3000000;  // then the new master jumps past the old one
  std::set<int> reported_;                 // old masters whose points arrived
  std::vector<Message> handover_asks_;     // asks for a ring this server has not adopted yet
  std::vector<Message> early_handovers_;   // reports for a ring this server has not adopted yet
  std::shared_ptr<const Ring> last_ring_;  // the ring before the one in force
};

}  // namespace ps

#endif  // PS_REPLICATION_CHAIN_REPLICATOR_H_
