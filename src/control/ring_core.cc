#include "control/ring_core.h"

#include <algorithm>

namespace ps {

void RingCore::FillRing(const Ring& ring, pb::RingInfo* r) {
  r->set_epoch(ring.epoch());
  r->set_vnodes(ring.vnodes());
  r->set_replicas(ring.replicas());
  for (int s : ring.servers()) r->add_servers(s);
  if (ring.cut_epoch() != ring.epoch()) r->set_cut_epoch(ring.cut_epoch());
  if (ring.base_epoch() != ring.epoch()) r->set_base_epoch(ring.base_epoch());
}

bool RingCore::TakePrepare(const pb::Control& c, uint64_t ring_epoch, uint64_t* prepare_seen) {
  const uint64_t issued = c.prepare_epoch() ? c.prepare_epoch() : c.ring().epoch();
  if (issued <= std::max(ring_epoch, *prepare_seen)) return false;
  *prepare_seen = issued;
  return true;
}

std::shared_ptr<const Ring> RingCore::RingOf(const pb::RingInfo& r) {
  std::vector<int> servers(r.servers().begin(), r.servers().end());
  return std::make_shared<Ring>(servers, r.vnodes(), r.replicas(), r.epoch(), r.cut_epoch(),
                                r.base_epoch());
}

std::vector<RingCore::Fanout> RingCore::Messages(const Decision& d, int dead,
                                                 const std::vector<int>& live,
                                                 const std::vector<int>& servers) {
  std::vector<Fanout> out;
  if (!HasMessages(d, dead)) return out;
  if (dead >= 0) {
    Fanout f{live, {}};
    f.msg.set_cmd(pb::Control::NODE_DEAD);
    f.msg.set_dead_id(dead);
    // A new ring after a member's death travels with the news (a cut-over it caused too).
    const auto& fresh = d.cut ? d.cut : d.failover;
    if (fresh) FillRing(*fresh, f.msg.mutable_ring());
    out.push_back(std::move(f));
  }
  for (int s : d.refused_leaves) {
    Fanout f{{s}, {}};
    f.msg.set_cmd(pb::Control::RING);
    f.msg.set_error("server node " + std::to_string(s) + " " + d.refused);
    out.push_back(std::move(f));
  }
  if (d.prepare) {
    Fanout f{servers, {}};
    f.msg.set_cmd(pb::Control::RING_PREPARE);
    FillRing(*d.prepare, f.msg.mutable_ring());
    f.msg.set_prepare_epoch(d.prepare_epoch);
    out.push_back(std::move(f));
  }
  if (d.cut) {
    Fanout f{live, {}};
    f.msg.set_cmd(pb::Control::RING);
    FillRing(*d.cut, f.msg.mutable_ring());
    out.push_back(std::move(f));
  }
  return out;
}

RingCore::RingCore(const std::vector<int>& servers, int vnodes, int replicas, uint64_t epoch)
    : ring_(std::make_shared<Ring>(servers, vnodes, replicas, epoch)),
      epochs_issued_(epoch),
      live_servers_(servers.begin(), servers.end()) {
  ResetCopies();
}

uint64_t RingCore::NextEpoch() {
  // Never an epoch issued before (DESIGN §8, invariant 1), also not one of a preparation that
  // was cancelled: nodes that saw it prepared must not take a different ring for it.
  epochs_issued_ =
      std::max({epochs_issued_, ring_->epoch(), next_ring_ ? next_ring_->epoch() : 0}) + 1;
  return epochs_issued_;
}

void RingCore::Prepare(int64_t now_ms, Decision* d) {
  // Every live server not in the ring joins at the cut-over, and every server that asked to
  // leave is left out.
  std::vector<int> servers;
  for (int s : ring_->servers()) {
    if (!leaving_.count(s)) servers.push_back(s);
  }
  for (int s : live_servers_) {
    if (!left_.count(s) && !ring_->HasServer(s)) servers.push_back(s);
  }
  if (servers.empty()) {
    // Every server meant to take over died: the leavers keep their ranges (a ring of no server
    // holds nothing), and their Leave() calls fail with the reason.
    d->refused_leaves.assign(leaving_.begin(), leaving_.end());
    d->refused = "cannot leave: no other server is left to take over its ranges";
    leaving_.clear();
    servers = ring_->servers();
  }
  const uint64_t epoch = NextEpoch();
  // Nothing changes (a joiner died, a leaver is gone): the current ring again, which cancels
  // the preparation.
  next_ring_ = servers == ring_->servers()
                   ? nullptr
                   : std::make_shared<Ring>(servers, ring_->vnodes(), ring_->replicas(), epoch,
                                            ring_->cut_epoch(), ring_->epoch());
  d->prepare = next_ring_ ? next_ring_ : ring_;
  d->prepare_epoch = epoch;
  if (next_ring_) {
    d->events.push_back("preparing ring epoch " + std::to_string(epoch) + " with " +
                        std::to_string(servers.size()) +
                        " servers: the servers copy the ranges they will hold before the cut-over");
  }
  prepare_started_ms_ = now_ms;
  prepare_warned_ms_ = 0;
}

RingCore::Decision RingCore::ServerJoined(int id, int64_t now_ms) {
  Decision d;
  if (dead_.count(id) || !live_servers_.insert(id).second) return d;
  Prepare(now_ms, &d);
  return d;
}

RingCore::Decision RingCore::NodeDead(int id, int64_t now_ms) {
  Decision d;
  if (dead_.count(id)) return d;
  dead_.insert(id);
  const bool server = live_servers_.erase(id) > 0;
  leaving_.erase(id);  // died while leaving: a failure like any other
  if (!server) return d;
  const bool member = ring_->HasServer(id);
  if (member) {
    // A server left: its segments go to the first replica of each chain, which holds every
    // acknowledged update of them, and the chains are refilled in the background. More than k
    // losses before the refill ends may have taken every copy of some range: stop rather than
    // serve zeros (DESIGN §8, no silent loss).
    if (failures_since_full_++ == 0) degraded_since_ms_ = now_ms;
    std::vector<int> left;
    for (int s : ring_->servers()) {
      if (s != id) left.push_back(s);
    }
    // Only a range none of whose copies is left is lost (failures in other chains are not):
    // the tracker knows who holds what since the last refill (DESIGN §8, 6).
    const std::vector<Range> orphans = copies_.Lost(id);
    copies_full_ = 0;
    if (left.empty() || !orphans.empty()) {
      d.abort =
          "server node " + std::to_string(id) + " died (" + std::to_string(failures_since_full_) +
          " server failure(s) since every key range last had all its copies, "
          "PS_REPLICAS=" +
          std::to_string(ring_->replicas()) + "): " +
          (left.empty() ? std::string("no server is left")
                        : std::to_string(orphans.size()) +
                              " key range(s) have no copy left: " + CopyTracker::Describe(orphans));
      return d;
    }
    const uint64_t epoch = NextEpoch();
    ring_ =
        std::make_shared<Ring>(left, ring_->vnodes(), ring_->replicas(), epoch, ring_->cut_epoch());
    d.failover = ring_;
    d.events.push_back("ring epoch " + std::to_string(epoch) + ": " + std::to_string(left.size()) +
                       " servers");
  }
  // A join or leave was being prepared: prepare it again over the servers that are left (a
  // joiner that died must not hold up the cut-over for ever).
  if (next_ring_ && (member || next_ring_->HasServer(id))) Prepare(now_ms, &d);
  return d;
}

RingCore::Decision RingCore::Leave(int id, int64_t now_ms) {
  Decision d;
  if (dead_.count(id) || !ring_->HasServer(id) || ring_->servers().size() - leaving_.size() <= 1) {
    d.refused_leaves = {id};
    d.refused = "cannot leave: it is not in the ring, or it is the last server";
    return d;
  }
  leaving_.insert(id);
  d.events.push_back("server node " + std::to_string(id) + " leaves the job");
  Prepare(now_ms, &d);
  return d;
}

bool RingCore::CaughtUp(int server, uint64_t epoch) const {
  for (int app : apps_) {
    auto it = refill_.find({server, app});
    if (it == refill_.end() || it->second.first < epoch || it->second.second > 0) return false;
  }
  return true;
}

RingCore::Decision RingCore::Refill(int server, int app, uint64_t epoch, uint64_t pending,
                                    int64_t now_ms, const std::vector<Range>& orphans) {
  Decision d;
  if (dead_.count(server)) return d;
  if (!orphans.empty()) {
    // DESIGN §8, no silent loss: the server found ranges it must hold that no server holds
    // completely, which the copy count here did not show (a server reports only how many
    // ranges it fetches, not which).
    d.abort = "server node " + std::to_string(server) + " should hold " +
              std::to_string(orphans.size()) +
              " key range(s) of which no server holds a complete copy (" +
              std::to_string(failures_since_full_) +
              " server failure(s) since every key range last had all its copies, PS_REPLICAS=" +
              std::to_string(ring_->replicas()) + "): " + CopyTracker::Describe(orphans);
    return d;
  }
  refill_[{server, app}] = {epoch, pending};
  apps_.insert(app);
  // A server that holds every range of its chains under the current ring (for every app) is a
  // copy again, before the refill of the others ends. (Not while a ring is prepared: a report
  // may then be for that ring's ranges.)
  if (!next_ring_ && epoch == ring_->epoch() && CaughtUp(server, epoch)) {
    copies_.Holds(server, *ring_);
  }
  CheckRefill(now_ms, &d);
  return d;
}

void RingCore::CheckRefill(int64_t now_ms, Decision* d) {
  const auto& target = next_ring_ ? next_ring_ : ring_;
  for (int s : target->servers()) {
    if (!CaughtUp(s, target->epoch())) return;
  }
  if (next_ring_) {
    d->events.push_back("cut-over to ring epoch " + std::to_string(next_ring_->epoch()) + " with " +
                        std::to_string(next_ring_->servers().size()) +
                        " servers: the pre-copy took " +
                        std::to_string(now_ms - prepare_started_ms_) + " ms");
    ring_ = std::make_shared<Ring>(next_ring_->AsCutOver());
    next_ring_ = nullptr;
    ResetCopies();
    d->cut = ring_;
    // Servers that left are gone from the ring now: barriers stop waiting for them, and their
    // last messages are ignored (not fenced: they did nothing wrong).
    for (int s : leaving_) {
      if (ring_->HasServer(s)) continue;
      left_.insert(s);
      live_servers_.erase(s);
      d->left.push_back(s);
      d->events.push_back("server node " + std::to_string(s) + " left the job");
    }
    for (int s : left_) leaving_.erase(s);
    return;
  }
  ResetCopies();
  if (failures_since_full_ > 0) {
    d->events.push_back("refill done: every key range has its copies again under ring epoch " +
                        std::to_string(ring_->epoch()) + " (" +
                        std::to_string(now_ms - degraded_since_ms_) + " ms after the first of " +
                        std::to_string(failures_since_full_) + " failure(s))");
    failures_since_full_ = 0;
  }
}

std::string RingCore::PendingRefills() const {
  const auto& target = next_ring_ ? next_ring_ : ring_;
  std::string out;
  for (int s : target->servers()) {
    for (int app : apps_) {
      auto it = refill_.find({s, app});
      if (it != refill_.end() && it->second.first >= target->epoch() && it->second.second == 0) {
        continue;
      }
      out +=
          (out.empty() ? "" : ", ") + std::string("server node ") + std::to_string(s) + " app " +
          std::to_string(app) +
          (it == refill_.end() ? " (no report yet)"
                               : " (" + std::to_string(it->second.second) + " range(s) at epoch " +
                                     std::to_string(it->second.first) + ")");
    }
  }
  return out.empty() ? "nothing" : out;
}

std::string RingCore::SlowPreparation(int64_t now_ms) {
  if (!next_ring_ || now_ms - prepare_started_ms_ <= prepare_warned_ms_ + 10000) return "";
  prepare_warned_ms_ = now_ms - prepare_started_ms_;
  return "ring epoch " + std::to_string(next_ring_->epoch()) + " has been prepared for " +
         std::to_string(prepare_warned_ms_ / 1000) + " s; still copying: " + PendingRefills();
}

}  // namespace ps
