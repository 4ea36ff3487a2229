// ChainReplicator, replica side: the order along a chain (DESIGN §8, invariant 3).
//
// The master numbers each update of a key range it applies (SeqMap::Bump) and every copy
// carries (range, prev, next) entries. A replica applies a copy only when its own points equal
// prev, so every chain member applies the updates of a range in the master's order, whatever
// the network did to the copies (lost, resent, duplicated, re-routed after a failure):
//  - a copy that comes early waits (held_copies_) until the ones before it arrive; the master
//    resends what is not acknowledged;
//  - a gap that nothing fills within the refill timeout, or a copy from another history (a
//    point strictly between prev and next: this replica applied something the master did not),
//    makes the replica fetch the range afresh (a snapshot carries the points);
//  - a server that becomes master of a range after a failure jumps its points to a base no
//    server has reached (SeqMap::Jump), so a replica with another history cannot take the new
//    master's updates as its own continuation;
//  - at a prepared cut-over (a join or a leave) the new master of a range waits until it holds
//    every update the old master applied (the old master reports where it stopped: HANDOVER),
//    and only then takes requests for it; if that report does not come within the refill
//    timeout, it jumps instead.
#include <glog/logging.h>

#include <algorithm>

#include "replication/chain_replicator.h"

namespace ps {
namespace {

const uint64_t* Entries(const Message& m) { return m.meta.seq().data(); }
size_t Words(const Message& m) { return static_cast<size_t>(m.meta.seq_size()); }

RangeSet ProbeRanges(const Message& msg) {
  RangeSet rs;
  for (int i = 0; i + 4 <= msg.meta.seq_size(); i += 4) {
    rs.emplace_back(msg.meta.seq(i), msg.meta.seq(i + 1));
  }
  return Normalize(std::move(rs));
}

}  // namespace

ChainReplicator::OrderStats ChainReplicator::order_stats() const {
  OrderStats s = order_;
  s.waiting = held_copies_.size();
  s.buffered = buffered_.size();
  s.buffered_bytes = buffered_bytes_;
  s.handing_over = !awaiting_.empty();
  return s;
}

std::string ChainReplicator::DebugHeld() const {
  std::string d;
  for (const auto& h : held_copies_) {
    const Message& m = h.msg;
    d += "copy from " + std::to_string(m.meta.sender()) + " master " +
         std::to_string(m.meta.master()) + (m.meta.probe() ? " probe" : "") +
         (m.meta.aggregate() ? " aggregate" : "") + (h.replay ? " replay" : "") + ":";
    for (int i = 0; i + 4 <= m.meta.seq_size(); i += 4) {
      const Range r(m.meta.seq(i), m.meta.seq(i + 1));
      d += " [" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ") " +
           std::to_string(m.meta.seq(i + 2)) + "->" +
           std::to_string(SeqMap::Next(m.meta.seq(i + 3))) + " at " + std::to_string(seq_.Min(r)) +
           (Subtract({r}, host_->Held()).empty() ? "" : " (not held)");
    }
    d += "\n";
  }
  for (const auto& e : entries_) {
    d += "entry " + std::to_string(e.first) + ": worker " + std::to_string(e.second.worker) +
         " ts " + std::to_string(e.second.ts) + " open " + std::to_string(e.second.open) +
         (e.second.abandoned ? " abandoned" : "") + "\n";
  }
  for (const auto& h : hops_) {
    d += "hop " + std::to_string(h.first) + " to " + std::to_string(h.second.msg.meta.receiver()) +
         (h.second.queued ? " queued" : "") + (h.second.msg.meta.probe() ? " probe" : "") +
         " tries " + std::to_string(h.second.tries) + " entries";
    for (uint64_t e : h.second.entries) d += " " + std::to_string(e);
    d += "\n";
  }
  return d;
}

ChainReplicator::Delivery ChainReplicator::Deliver(Message& msg, bool replay) {
  // The ranges this copy is checked in, and those it moves the points of: the ranges this
  // server holds. A copy of a range being fetched is applied (and kept to apply again over the
  // fetched copy) but moves no points there: they would claim updates that only the fetch
  // brings, and when the fetch is given up (its source left) the range keeps its own copy with
  // points past what it holds, which the other members cannot tell from the truth (ps_sim
  // --cluster seeds 1114 and 10135 of the runs that cut, pause and partition everything: a
  // tail that missed an update released the new master's mark as a duplicate while it fetched
  // the range afresh, then became the master with that copy).
  RangeSet held = host_->Held(), advance = held;
  auto ring = CurrentRing();
  if (ring && host_->Epoch() > 0) {
    // A range this server masters (and waits for no old master's last updates in) takes no
    // new update from another server: it would land after updates this server already ordered
    // and copied on. A copy of an update it lacks there is refused: its worker resends it
    // here. One it holds (the points say so, or its log does: points alone cannot tell once
    // they jumped past the old master's at a take-over) is done in those ranges; the rest of
    // the copy goes on as usual, and this master's own points stay as they are (ps_sim
    // --cluster seed 1596: an old master's copies of updates the new master held, refused for
    // their points, kept the old master's requests unacknowledged for ever).
    RangeSet mine = MasteredRanges(*ring, self_);
    for (const auto& a : awaiting_) mine = Subtract(mine, a.second);
    if (!mine.empty() && Touches(msg, mine)) {
      if (LacksIn(msg, mine)) {
        VLOG(1) << "server " << self_ << " refuses a copy from node " << msg.meta.sender()
                << " for ranges it masters";
        // Told, so that the master stops sending it: resent for ever when its worker died
        // (ps_sim --cluster --rule assign seeds 2092 and 2203).
        if (!replay) Refuse(msg, mine);
        return Delivery::kRejected;
      }
      if (seq_.Check(Entries(msg), Words(msg), mine) != SeqMap::Verdict::kDuplicate) {
        held = Subtract(held, mine);
        advance = Subtract(advance, mine);
        if (!StripRanges(&msg, mine)) {
          if (!replay) Ack(msg);
          return Delivery::kApplied;
        }
      }
    }
  }
  const auto verdict = seq_.Check(Entries(msg), Words(msg), held);
  if (msg.meta.refetch() && IsMark(msg)) {
    // Its master kept a copy whose points may have passed updates it lacks: whatever history
    // this server holds, equal points prove nothing. Unless it holds the mark already (a
    // resend, or a snapshot taken after it), it fetches the ranges from the master.
    if (verdict != SeqMap::Verdict::kDuplicate) Refetch(Intersect(ProbeRanges(msg), held));
    if (!replay) {
      seq_.Advance(Entries(msg), Words(msg), advance);
      ForwardOrAck(msg);
    }
    return Delivery::kApplied;
  }
  if (msg.meta.probe() && verdict != SeqMap::Verdict::kGap) {
    // Caught up with the master's points: pass it on if the update is here, else this copy's
    // history lacks it; fetch the ranges afresh (the master's snapshot holds it) and wait.
    // Ranges this server does not hold (it left their chain) are not its to answer for.
    RangeSet probed = Intersect(ProbeRanges(msg), held);
    if (!Intersect(ProbeRanges(msg), host_->Fetching()).empty()) return Hold(msg, replay);
    if (!LacksIn(msg, probed)) {
      if (!replay) ForwardOrAck(msg);
      return Delivery::kApplied;
    }
    // Only its master's snapshot can hold what a probe asks about. In ranges another server
    // masters now, it is refused: its sender gives the update up there and its worker sends
    // it again to that master (fetching from the new master, which lacked it too, went on for
    // ever: ps_sim --cluster --seed 3107 --partition-every-s 0.5 --partition-max-s 3
    // --kill-worker-every-s 3).
    if (ring && host_->Epoch() > 0) {
      const RangeSet others =
          Subtract(probed, MasteredRanges(*ring, static_cast<int>(msg.meta.master())));
      if (!others.empty() && LacksIn(msg, others)) {
        if (!replay) Refuse(msg, others);
        probed = Subtract(probed, others);
        if (probed.empty() || !LacksIn(msg, probed)) return Delivery::kRejected;
      }
    }
    Refetch(probed);
    return Hold(msg, replay);
  }
  if (verdict == SeqMap::Verdict::kGap) {
    for (const auto& h : held_copies_) {
      if (h.replay == replay && h.msg.meta.master() == msg.meta.master() &&
          h.msg.meta.fwd_id() == msg.meta.fwd_id()) {
        // A copy of one that waits already (its worker resent the request): the older copy it
        // waits for may have been lost again; ask again.
        Nack(msg);
        return Delivery::kHeld;
      }
    }
    if (held_copies_.size() >= kMaxHeldCopies) return Delivery::kHeld;  // dropped: resent later
    held_copies_.push_back(HeldCopy{msg, now_us_(), replay});
    order_.held++;
    Nack(msg);
    return Delivery::kHeld;
  }
  if (verdict == SeqMap::Verdict::kMismatch) {
    Refetch(seq_.Behind(Entries(msg), Words(msg), held));
  } else if (verdict == SeqMap::Verdict::kDuplicate && LacksIn(msg, held)) {
    // The points say this server holds the update, its log says it does not: its history of
    // these ranges is another one than the master's (two masters numbered from one base, say).
    // Fetched afresh, the ranges hold the update; the copy waits for that, then passes.
    order_.refetched++;
    Refetch(Intersect(ProbeRanges(msg), held));
    return Hold(msg, replay);
  }
  // The next update everywhere it is checked (no part of it past its next here: those parts
  // may hold keys applied by another path, which only the log and the mark can tell): this
  // server lacks it whatever the worker's mark says. Never acknowledged when rejected: the
  // master keeps it.
  const bool next_here =
      verdict == SeqMap::Verdict::kApply && seq_.AtPrev(Entries(msg), Words(msg), held);
  if (!Apply(msg, next_here)) return Delivery::kRejected;
  seq_.Advance(Entries(msg), Words(msg), advance);
  if (!replay) {
    // A copy of a range still being fetched: kept to apply again over it once it is imported
    // (copies of other ranges are complete already, and would only grow the buffer).
    if (Touches(msg, host_->Fetching())) Buffer(msg);
    ForwardOrAck(msg);
  }
  return Delivery::kApplied;
}

bool ChainReplicator::StripRanges(Message* msg, const RangeSet& rs) const {
  // Only explicit keys can be cut; a dense range or a part of one key's value goes on whole
  // (its entries in rs are duplicates or below the points there: the members after this one
  // follow this server's copies in rs, which move their points past them).
  if (!CanCut(*msg)) return true;
  const SArray<Key> keys(msg->data[0]);
  std::vector<bool> keep(keys.size());
  size_t r = 0;  // keys and ranges are sorted: one walk
  for (size_t i = 0; i < keys.size(); ++i) {
    while (r < rs.size() && rs[r].end <= keys[i]) ++r;
    keep[i] = !(r < rs.size() && rs[r].Contains(keys[i]));
  }
  Message rest = KeySubset(*msg, keep, esize_);
  if (rest.data.empty()) return false;
  RestrictSeq(*msg, &rest);
  // No longer the whole request: its master answers the worker once the request is complete.
  rest.meta.clear_relay();
  *msg = std::move(rest);
  return true;
}

ChainReplicator::Delivery ChainReplicator::Hold(const Message& msg, bool replay) {
  for (const auto& h : held_copies_) {
    // Waits already. A replayed copy is never acknowledged, so it does not stand for a live
    // one (whose acknowledgement the master waits for).
    if (h.replay == replay && h.msg.meta.master() == msg.meta.master() &&
        h.msg.meta.fwd_id() == msg.meta.fwd_id()) {
      return Delivery::kHeld;
    }
  }
  if (held_copies_.size() < kMaxHeldCopies)
    held_copies_.push_back(HeldCopy{msg, now_us_(), replay});
  return Delivery::kHeld;
}

bool ChainReplicator::LacksIn(const Message& msg, const RangeSet& rs) const {
  if (rs.empty() || msg.meta.aggregate() || msg.data.empty()) return false;
  // Most copies are of ranges this server does not master: their entries tell at once.
  if (msg.meta.seq_size() > 0 && Intersect(ProbeRanges(msg), rs).empty()) return false;
  auto touches = [&rs](Range x) {
    for (const Range& r : rs) {
      if (std::max(r.begin, x.begin) < std::min(r.end, x.end)) return true;
    }
    return false;
  };
  Message part = msg;
  if (msg.meta.op() == pb::Meta::DENSE_PUSH) {
    // The whole range decides (a conservative answer when it reaches beyond rs).
    if (!touches(Range(msg.meta.range_begin(), msg.meta.range_end()))) return false;
  } else if (msg.data[0].size() % sizeof(Key) != 0 || msg.data[0].empty()) {
    return false;                         // malformed: rejected when applied
  } else if (msg.meta.val_total() > 0) {  // a part of one key's value
    const Key k = SArray<Key>(msg.data[0])[0];
    if (!touches(Range(k, k + 1))) return false;
  } else {
    const SArray<Key> keys(msg.data[0]);
    std::vector<bool> keep(keys.size(), false);
    size_t r = 0;  // keys and ranges are sorted: one walk
    for (size_t i = 0; i < keys.size(); ++i) {
      while (r < rs.size() && rs[r].end <= keys[i]) ++r;
      keep[i] = r < rs.size() && rs[r].Contains(keys[i]);
    }
    part = KeySubset(msg, keep, esize_);
  }
  return !part.data.empty() && host_->Lacks(msg.meta.origin(), part);
}

void ChainReplicator::Nack(const Message& held) {
  if (held.meta.master() == self_ || held.meta.probe()) return;
  int64_t& last = last_nack_us_[held.meta.master()];
  const int64_t now = now_us_();
  if (now - last < kHopResendUs / 10) return;  // one per master and interval is enough
  last = now;
  Message nack = ToMaster(held);
  nack.meta.set_nack(true);
  send_(nack);
}

void ChainReplicator::Refuse(const Message& copy, const RangeSet& mine) {
  if (copy.meta.master() == self_) return;
  Message no = ToMaster(copy);
  no.meta.set_refused(true);
  no.data = {EncodeRanges(mine)};
  send_(no);
}

void ChainReplicator::ReleaseHeld() {
  for (bool progress = true; progress;) {
    progress = false;
    // Each copy is tried at most once per pass: one that is held again (Deliver decides on more
    // than the points: the ranges this server masters, fetches under way) goes to the back and
    // is no progress (ps_sim --cluster seed 4354: such a copy was released and held again for
    // ever, inside one event).
    size_t i = 0, tries = held_copies_.size();
    while (i < held_copies_.size() && tries-- > 0) {
      const Message& m = held_copies_[i].msg;
      if (seq_.Check(Entries(m), Words(m), host_->Held()) == SeqMap::Verdict::kGap ||
          (m.meta.probe() && !Intersect(ProbeRanges(m), host_->Fetching()).empty())) {
        ++i;  // a probe only once no fetch of its ranges is under way
        continue;
      }
      HeldCopy c = std::move(held_copies_[i]);
      held_copies_.erase(held_copies_.begin() + static_cast<std::ptrdiff_t>(i));
      if (Deliver(c.msg, c.replay) == Delivery::kHeld) {
        if (c.msg.meta.probe()) return;
        continue;
      }
      progress = true;
      break;
    }
  }
}

void ChainReplicator::Refetch(RangeSet rs) {
  auto ring = CurrentRing();
  if (!ring) return;
  // Never a range this server masters: there is no one to fetch it from.
  rs = Intersect(Subtract(Normalize(std::move(rs)), MasteredRanges(*ring, self_)), host_->Held());
  if (rs.empty()) return;
  order_.refetched += rs.size();
  LOG(WARNING) << "server " << self_ << " fetches " << rs.size() << " range(s) afresh: its "
               << "copy is not a prefix of the master's history there";
  host_->Refetch(rs);
}

bool ChainReplicator::Awaiting(const RangeSet& rs) const {
  for (const auto& a : awaiting_) {
    if (!Intersect(rs, a.second).empty()) return true;
  }
  return false;
}

bool ChainReplicator::Awaiting(const Message& req) const {
  if (awaiting_.empty() || req.meta.op() == pb::Meta::CLOCK) return false;
  std::vector<Range> span;
  if (req.meta.op() == pb::Meta::DENSE_PUSH) {
    span.emplace_back(req.meta.range_begin(), req.meta.range_end());
  } else if (req.meta.op() == pb::Meta::RANGE_PULL) {
    if (req.data.empty() || req.data[0].size() % (2 * sizeof(Key))) return false;
    SArray<Key> rs(req.data[0]);
    for (size_t i = 0; i + 1 < rs.size(); i += 2) span.emplace_back(rs[i], rs[i + 1]);
  } else {
    if (req.data.empty() || req.data[0].size() % sizeof(Key)) return false;
    SArray<Key> keys(req.data[0]);
    for (Key k : keys) span.emplace_back(k, k + 1);
  }
  for (const auto& a : awaiting_) {
    for (const Range& r : span) {
      for (const Range& w : a.second) {
        if (std::max(r.begin, w.begin) < std::min(r.end, w.end)) return true;
      }
    }
  }
  return false;
}

void ChainReplicator::TakeOver(const Ring& before, const Ring& after, bool prepared) {
  if (!awaiting_.empty()) {
    // A newer ring before the hand-over finished (a participant died). An old master gone from
    // it never answers: go on from here in its ranges. One still in it holds the updates it
    // acknowledged, maybe alone (ps_sim --cluster --worker-cut-every-s 0.5, seed 27: the old
    // master paused with the copy of an update still on its way to the new master, a third
    // server died, the new master jumped past the old one's history, and its mark made the old
    // master fetch the range from it: the acknowledged update was gone): in the ranges this
    // server still masters, wait for it under the new ring.
    const RangeSet still = MasteredRanges(after, self_);
    std::map<int, RangeSet> keep;
    for (auto& a : awaiting_) {
      RangeSet wait = after.HasServer(a.first) ? Intersect(a.second, still) : RangeSet{};
      for (const Range& r : Subtract(a.second, wait)) {
        seq_.Jump(r, SeqMap::Base(after.epoch()));
        jumped_.push_back(r);
      }
      if (!wait.empty()) keep[a.first] = std::move(wait);
    }
    awaiting_.swap(keep);
    handover_points_.clear();
    reported_.clear();  // the old masters that stay report again, under the new ring
  }
  const RangeSet fresh = Subtract(MasteredRanges(after, self_), MasteredRanges(before, self_));
  for (const Range& r : fresh) {
    std::vector<RingSegment> segs;
    before.SliceRange(r, &segs);
    for (const auto& s : segs) {
      if (prepared && before.HasServer(s.server) && s.server != self_ && s.server >= 0) {
        awaiting_[s.server].push_back(s.range);
      } else {
        // The old master failed: its last updates reach no one (their workers resend them).
        seq_.Jump(s.range, SeqMap::Base(after.epoch()));
        jumped_.push_back(s.range);
      }
    }
  }
  for (auto& a : awaiting_) a.second = Normalize(std::move(a.second));
  handover_epoch_ = after.epoch();
  std::vector<Message> early;
  early.swap(early_handovers_);
  if (awaiting_.empty()) return;
  handover_since_us_ = now_us_();
  for (auto& m : early) OnHandover(m);  // reports that came before this ring
  if (!awaiting_.empty()) AskHandover();
}

void ChainReplicator::ExportReport(const Range& r, uint64_t epoch,
                                   std::vector<uint64_t>* out) const {
  // Where this server still waits for its own old master's last updates, its points stand for
  // no complete history: reported as the new epoch's base, which no update has reached, so
  // the next master jumps past them instead of numbering its updates from them (ps_sim
  // --cluster --partition-every-s 0.5 --partition-max-s 3 --kill-worker-every-s 3, seed 216: a
  // master that took a range over without its old master's report handed it on, the next
  // master numbered from its points, and a replica holding the first old master's updates under
  // the same numbers took the new ones as their continuation).
  RangeSet unsure;
  for (const auto& a : awaiting_) unsure = Union(unsure, Intersect(a.second, {r}));
  std::vector<uint64_t> t;
  seq_.Export(r, &t);
  for (size_t i = 0; i + 3 <= t.size(); i += 3) {
    const RangeSet part = {Range(t[i], t[i + 1])};
    for (const Range& x : Subtract(part, unsure)) {
      out->insert(out->end(), {x.begin, x.end, t[i + 2]});
    }
    for (const Range& x : Intersect(part, unsure)) {
      out->insert(out->end(), {x.begin, x.end, SeqMap::Base(epoch)});
    }
  }
}

void ChainReplicator::HandOver(const Ring& before, const Ring& after) {
  const RangeSet gone = Subtract(MasteredRanges(before, self_), MasteredRanges(after, self_));
  std::map<int, std::vector<uint64_t>> to;
  for (const Range& r : gone) {
    std::vector<RingSegment> segs;
    after.SliceRange(r, &segs);
    for (const auto& s : segs) {
      if (s.server != self_) ExportReport(s.range, after.epoch(), &to[s.server]);
    }
  }
  for (auto& t : to) {
    Message m = HandoverMessage(t.first, false, after.epoch());
    m.data = {SArray<char>(SArray<uint64_t>(t.second))};
    send_(m);
  }
}

RangeSet ChainReplicator::SeqRanges(const Message& msg, const Ring& ring) const {
  // Units: a segment of ring, cut by the segments of the ring being prepared; only those that
  // hold a key of the update (a range between two keys may hold none).
  const auto next = host_->Prepared();
  const bool cut = next && next->epoch() > ring.epoch();
  RangeSet out;
  auto add = [&out](const Range& x) {
    if (x.begin < x.end && (out.empty() || out.back() != x)) out.push_back(x);
  };
  auto unit = [&](Key k) {
    Range u = ring.segments()[ring.SegmentOf(k)].range;
    if (cut) {
      const Range n = next->segments()[next->SegmentOf(k)].range;
      u = Range(std::max(u.begin, n.begin), std::min(u.end, n.end));
    }
    // Ranges still handed over are numbered by their old master: an update elsewhere in the
    // segment must not move their points.
    for (const auto& a : awaiting_) {
      for (const Range& w : a.second) {
        if (w.Contains(k)) {
          u = Range(std::max(u.begin, w.begin), std::min(u.end, w.end));
        } else if (w.end <= k) {
          u.begin = std::max(u.begin, w.end);
        } else if (w.begin > k) {
          u.end = std::min(u.end, w.begin);
        }
      }
    }
    return u;
  };
  if (msg.meta.op() == pb::Meta::DENSE_PUSH) {
    // Every key of the range: each unit it overlaps.
    const Range r(msg.meta.range_begin(), msg.meta.range_end());
    for (Key k = r.begin; k < r.end;) {
      const Range u = unit(k);
      add(u);
      if (u.end <= k) break;
      k = u.end;
    }
  } else if (!msg.data.empty() && msg.data[0].size() % sizeof(Key) == 0) {
    const SArray<Key> keys(msg.data[0]);
    // Keys are sorted: one lookup per unit, and a binary search past the unit's keys.
    for (const Key* k = keys.begin(); k != keys.end();) {
      const Range u = unit(*k);
      add(u);
      if (u.end <= *k) {  // never for a ring's segment; a guard against a malformed one
        ++k;
        continue;
      }
      k = std::lower_bound(k + 1, keys.end(), u.end);
    }
  }
  return out;
}

Message ChainReplicator::HandoverMessage(int to, bool request, uint64_t epoch) const {
  Message m;
  m.meta.set_receiver(to);
  m.meta.set_app_id(app_);
  m.meta.set_request(request);
  m.meta.set_op(pb::Meta::HANDOVER);
  m.meta.set_dtype(static_cast<int>(dtype_));
  m.meta.set_epoch(epoch);
  return m;
}

void ChainReplicator::AskHandover() {
  for (const auto& a : awaiting_) {
    Message m = HandoverMessage(a.first, true, handover_epoch_);
    m.data = {EncodeRanges(a.second)};
    send_(m);
  }
}

void ChainReplicator::OnHandover(Message& msg) {
  if (msg.meta.request()) {
    // The old master: answered once it follows the ring that took the ranges from it (it
    // applies nothing to them from then on), after the batches that hold updates of them.
    if (host_->Epoch() < msg.meta.epoch()) {
      for (const auto& w : handover_asks_) {
        if (w.meta.sender() == msg.meta.sender() && w.meta.epoch() == msg.meta.epoch()) return;
      }
      if (handover_asks_.size() < kMaxEarly) handover_asks_.push_back(msg);
      return;
    }
    RangeSet asked;
    if (msg.data.size() != 1 || !ParseRanges(msg.data[0], &asked)) return;
    FlushBatches();
    std::vector<uint64_t> points;
    for (const Range& r : asked) ExportReport(r, msg.meta.epoch(), &points);
    Message reply = HandoverMessage(msg.meta.sender(), false, msg.meta.epoch());
    reply.data = {SArray<char>(SArray<uint64_t>(points))};
    send_(reply);
    return;
  }
  // The new master: where the old one stopped.
  if (msg.meta.epoch() > handover_epoch_ && msg.meta.epoch() > host_->Epoch()) {
    if (early_handovers_.size() < kMaxEarly) early_handovers_.push_back(msg);
    return;
  }
  auto it = awaiting_.find(msg.meta.sender());
  if (it == awaiting_.end() || msg.meta.epoch() != handover_epoch_ || msg.data.size() != 1 ||
      msg.data[0].size() % (3 * sizeof(uint64_t))) {
    return;
  }
  SArray<uint64_t> t(msg.data[0]);
  RangeSet unsure;  // the old master's history there was not complete (ExportReport)
  for (size_t i = 0; i + 3 <= t.size(); i += 3) {
    if (t[i + 2] >= SeqMap::Base(handover_epoch_)) {
      unsure.emplace_back(t[i], t[i + 1]);
      continue;
    }
    handover_points_.insert(handover_points_.end(), {t[i], t[i + 1], t[i + 2]});
  }
  if (!unsure.empty()) {
    unsure = Normalize(std::move(unsure));
    for (const Range& r : unsure) seq_.Jump(r, SeqMap::Base(handover_epoch_));
    if (auto ring = CurrentRing()) ApplyOrphans(*ring, unsure);
  }
  reported_.insert(msg.meta.sender());
  CheckHandover();
}

bool ChainReplicator::CheckHandover() {
  if (awaiting_.empty()) return true;
  for (const auto& a : awaiting_) {
    if (!reported_.count(a.first)) return false;
  }
  for (size_t i = 0; i + 3 <= handover_points_.size(); i += 3) {
    const Range r(handover_points_[i], handover_points_[i + 1]);
    if (r.begin < r.end && seq_.Min(r) < handover_points_[i + 2]) return false;
  }
  RangeSet took;
  for (const auto& a : awaiting_) took.insert(took.end(), a.second.begin(), a.second.end());
  awaiting_.clear();
  handover_points_.clear();
  reported_.clear();
  VLOG(1) << "server " << self_ << " holds every update of the ranges it took over";
  host_->HandedOver();
  // The old master's last copies reached this server but maybe not the members after it: it
  // left, and its resends with it, so they may lack updates this server holds for as long as
  // no new update of the range comes (ps_sim --cluster seed 10304 under --rule assign: a
  // replica differed from its new master at the end). A mark down the new chains makes a
  // member that lacks one fetch the range afresh (a gap no copy fills).
  Announce(Normalize(std::move(took)));
  return true;
}

void ChainReplicator::OnCopy(Message& msg) {
  if (host_->Epoch() > 0) {
    // Fencing: a copy from a server that is no longer in the ring (it died; its unacknowledged
    // pushes come again from their workers) is not applied; unless it is the old master whose
    // last updates this server waits for (it left at the cut-over).
    const int from = msg.meta.sender();
    const auto next = host_->Prepared();
    const bool member =
        CurrentRing()->HasServer(from) || awaiting_.count(from) || (next && next->HasServer(from));
    if (!member) {
      VLOG(1) << "server " << self_ << " ignores a copy from node " << msg.meta.sender()
              << ", which is not in its ring";
      return;
    }
  }
  // A rejected copy is never acknowledged: the master keeps the worker waiting, and it resends.
  if (Deliver(msg, false) != Delivery::kApplied) return;
  ReleaseHeld();
  CheckHandover();
}

void ChainReplicator::ForwardOrAck(const Message& msg) {
  if (msg.meta.chain_size() > 0) {  // pass it on along the chain
    Message next = msg;
    next.meta.set_receiver(msg.meta.chain(0));
    next.meta.clear_chain();
    for (int i = 1; i < msg.meta.chain_size(); ++i) next.meta.add_chain(msg.meta.chain(i));
    send_(next);
    return;
  }
  // The tail holds it: tell the master, and answer the worker when the copy carries its reply
  // (every member before it holds the update: each applied it before passing it on).
  Message ack = ToMaster(msg);
  if (msg.meta.has_relay()) {
    Message reply;
    reply.meta = msg.meta.relay();
    reply.meta.set_master(msg.meta.master());
    send_(reply);
    ack.meta.set_relayed(true);
  }
  send_(ack);
}

Message ChainReplicator::ToMaster(const Message& copy) const {
  Message m;
  m.meta.set_receiver(copy.meta.master());
  m.meta.set_app_id(app_);
  m.meta.set_replica(true);
  m.meta.set_request(false);
  m.meta.set_fwd_id(copy.meta.fwd_id());
  return m;
}

void ChainReplicator::Ack(const Message& msg) {
  Message ack = ToMaster(msg);
  send_(ack);
}

void ChainReplicator::Buffer(const Message& msg) {
  const uint64_t bytes = msg.DataBytes();
  if (buffered_bytes_ + bytes > buffer_limit_) {
    // The workers' pushes would fill this server while a piece is on its way. Asked again now,
    // the fetches get snapshots that hold every copy that reached this server (this one too),
    // so none is needed: the pieces on their way are ignored when they arrive.
    order_.overflows++;
    LOG(WARNING) << "server " << self_ << ": copies for the refill under way passed "
                 << (buffer_limit_ >> 20) << " MB; its pieces are asked for again";
    buffered_.clear();
    buffered_bytes_ = 0;
    host_->Refetch(host_->Fetching());  // re-plans: the new fetches prune what is left
    return;
  }
  buffered_.push_back(BufferedCopy{msg, host_->FetchMark()});
  buffered_bytes_ += bytes;
}

void ChainReplicator::PruneBuffered() {
  std::vector<BufferedCopy> keep;
  uint64_t bytes = 0;
  for (auto& b : buffered_) {
    if (Touches(b.msg, host_->AskedBefore(b.mark))) {
      bytes += b.msg.DataBytes();
      keep.push_back(std::move(b));
    }
  }
  buffered_.swap(keep);
  buffered_bytes_ = bytes;
}

void ChainReplicator::Replay(const RangeSet& imported) {
  // Copies taken while the ranges were missing, again over them in the master's order: the
  // points say which the snapshot holds, which come next, and which must wait for another.
  std::vector<BufferedCopy> again;
  again.swap(buffered_);
  buffered_bytes_ = 0;
  for (auto& b : again) {
    if (!Touches(b.msg, imported)) continue;
    // Aggregates: only the imported ranges (elsewhere applied on arrival, and an aggregate is
    // applied whole or not at all).
    Message part = b.msg.meta.aggregate() ? Aggregator::Within(b.msg, imported, esize_) : b.msg;
    if (!part.data.empty() || IsMark(b.msg)) Deliver(part, /*replay=*/true);
  }
  // The next piece was asked for after every one of them arrived: only the other fetches
  // under way may still lack them.
  for (auto& b : again) buffered_.push_back(std::move(b));
  PruneBuffered();
  ReleaseHeld();
}

bool ChainReplicator::Touches(const Message& msg, const RangeSet& rs) {
  if (rs.empty()) return false;
  if (msg.meta.seq_size() == 0) return true;  // no entries to tell by: assume it does
  return !Intersect(ProbeRanges(msg), rs).empty();
}

}  // namespace ps
