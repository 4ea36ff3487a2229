// The scheduler's decisions about the ring (DESIGN §5, §8): which servers hold the key ranges
// under which epoch when a server fails, joins or leaves, when a prepared ring may take over,
// and when a failure has taken every copy of some range. Pure, in the style of etcd raft's
// Step: events in (the time is an input), a Decision out; no sockets, threads or clocks. The
// node runtime (node_control.cc) feeds it and sends what the decision says; the tests and the
// simulator drive the same class.
#ifndef PS_CONTROL_RING_CORE_H_
#define PS_CONTROL_RING_CORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "control/copy_tracker.h"
#include "meta.pb.h"
#include "ring/ring.h"

namespace ps {

class RingCore {
 public:
  /// What the runtime does after an event: every field may be set at once.
  struct Decision {
    /// Non-empty: the job must stop, with this message (a key range has no copy left, or no
    /// server is left; DESIGN §8, no silent loss).
    std::string abort;
    /// A ring to publish now (NODE_DEAD carries it): a member of the ring failed.
    std::shared_ptr<const Ring> failover;
    /// RING_PREPARE for every live server: the ring to pre-copy toward, or the current ring
    /// again, which cancels a preparation.
    std::shared_ptr<const Ring> prepare;
    /// The epoch issued for `prepare` (its own, or the one a cancellation used up).
    uint64_t prepare_epoch = 0;
    /// RING for every live node: the prepared ring takes over.
    std::shared_ptr<const Ring> cut;
    /// Servers out of the job since this cut-over (they left; no barrier waits for them).
    std::vector<int> left;
    /// Servers whose leave is refused (the one that asked, or every leaver when no other
    /// server is left to take over), and why.
    std::vector<int> refused_leaves;
    std::string refused;
    /// Lines for the job's event log, in order.
    std::vector<std::string> events;
  };

  /// A control message and the nodes it goes to.
  struct Fanout {
    std::vector<int> to;
    pb::Control msg;
  };
  /// Who hears what after decision d (pure: the node runtime sends these, the simulator
  /// delivers the same): NODE_DEAD of `dead` (-1: nobody died) to `live`, with the ring that
  /// changed; each leave refused, to its leaver (RING with the reason); RING_PREPARE to
  /// `servers`; RING to `live` (the servers that just left among them: it tells them they are
  /// out). `live`: every node not declared dead but the scheduler; `servers`: the live servers.
  /// Nothing when d aborts the job.
  static std::vector<Fanout> Messages(const Decision& d, int dead, const std::vector<int>& live,
                                      const std::vector<int>& servers);
  /// Whether Messages(d, dead, ...) sends anything (most refill reports decide nothing: the
  /// runtime then need not list the live nodes).
  static bool HasMessages(const Decision& d, int dead) {
    return d.abort.empty() && (dead >= 0 || !d.refused_leaves.empty() || d.prepare || d.cut);
  }
  /// Whether a node whose ring is at `ring_epoch`, and which last took the preparation issued
  /// at *prepare_seen, takes the RING_PREPARE `c` (then *prepare_seen moves to it): one issued
  /// before either is stale. The runtime sends a decision's messages after letting go of its
  /// lock, so a fanout held up on a slow peer can arrive after the next decision's (a server
  /// that took a stale preparation's cancellation of ring 2 after ring 4 was prepared forgot
  /// ring 4, and the job stalled: fault.leave_survives_kill.ucx).
  static bool TakePrepare(const pb::Control& c, uint64_t ring_epoch, uint64_t* prepare_seen);
  /// A ring on the wire, and back.
  static void FillRing(const Ring& ring, pb::RingInfo* r);
  static std::shared_ptr<const Ring> RingOf(const pb::RingInfo& r);

  /// The ring of the job's start: `servers` (registered before it started) under `epoch`;
  /// every chain holds its ranges.
  RingCore(const std::vector<int>& servers, int vnodes, int replicas, uint64_t epoch);

  /// A server registered after the start: a ring with it is prepared.
  Decision ServerJoined(int id, int64_t now_ms);
  /// Node `id` was declared dead (a node that is not a server changes nothing here; a second
  /// report of one death neither).
  Decision NodeDead(int id, int64_t now_ms);
  /// Server `id` asks to leave: a ring without it is prepared, or the request is refused.
  Decision Leave(int id, int64_t now_ms);
  /// Server `server` reports for `app` that `pending` ranges of the ring of `epoch` are still
  /// to be copied to it (0: it holds all of them); `orphans`: ranges it must hold of which no
  /// server holds a complete copy (the job stops, naming them).
  Decision Refill(int server, int app, uint64_t epoch, uint64_t pending, int64_t now_ms,
                  const std::vector<Range>& orphans = {});
  /// Every 10 s of a preparation that has not finished: a warning naming who still copies.
  std::string SlowPreparation(int64_t now_ms);

  /// The ring in force.
  const std::shared_ptr<const Ring>& ring() const { return ring_; }
  /// The ring being prepared (null when none is).
  const std::shared_ptr<const Ring>& next_ring() const { return next_ring_; }
  /// The server left the job at a cut-over (its last messages mean nothing).
  bool HasLeft(int id) const { return left_.count(id) > 0; }
  /// The largest epoch issued (published or prepared); the next one is larger.
  uint64_t epochs_issued() const { return epochs_issued_; }
  /// The servers of the target ring that have not reported their ranges held, for the log.
  std::string PendingRefills() const;
  /// Server failures since every range last had all its copies.
  int failures_since_full() const { return failures_since_full_; }
  /// Who holds a complete copy of each range, as far as this core knows.
  const CopyTracker& copies() const { return copies_; }

 private:
  // Prepares the ring of the live servers without the leaving ones (or cancels the
  // preparation when that is the current ring).
  void Prepare(int64_t now_ms, Decision* d);
  // The prepared ring (or the current one after failures) has every copy: cut over, or note
  // the refill done.
  void CheckRefill(int64_t now_ms, Decision* d);
  bool CaughtUp(int server, uint64_t epoch) const;
  uint64_t NextEpoch();

  std::shared_ptr<const Ring> ring_, next_ring_;
  uint64_t epochs_issued_ = 0;
  std::set<int> live_servers_, dead_, leaving_, left_;
  std::set<int> apps_;
  // (server, app) -> the last refill report: (epoch, pending ranges).
  std::map<std::pair<int, int>, std::pair<uint64_t, uint64_t>> refill_;
  CopyTracker copies_;
  // The epoch whose ring copies_ was last reset to in full (0: changed since): a report after
  // the refill ended changes nothing, and resetting the tracker for each of them (S reports
  // per change) was most of the scheduler's time at 1000 servers.
  uint64_t copies_full_ = 0;
  void ResetCopies() {
    if (copies_full_ == ring_->epoch()) return;
    copies_.Reset(*ring_);
    copies_full_ = ring_->epoch();
  }
  int failures_since_full_ = 0;
  int64_t degraded_since_ms_ = 0;
  int64_t prepare_started_ms_ = 0;
  int64_t prepare_warned_ms_ = 0;
};

}  // namespace ps

#endif  // PS_CONTROL_RING_CORE_H_
