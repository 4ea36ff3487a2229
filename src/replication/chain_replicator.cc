// ChainReplicator, master side: copies down the chains, the entries that hold the workers'
// replies, batches, resends and re-routing at ring changes. The replica side and the order
// along a chain are in chain_order.cc.
#include "replication/chain_replicator.h"

#include <glog/logging.h>

#include <algorithm>

namespace ps {

ChainReplicator::ChainReplicator(int app, DataType dtype, bool additive, int self, Host* host,
                                 SendFn send, NowFn now_us, RingFn ring)
    : app_(app),
      dtype_(dtype),
      esize_(DataTypeSize(dtype)),
      additive_(additive),
      self_(self),
      host_(host),
      send_(std::move(send)),
      now_us_(std::move(now_us)),
      ring_(std::move(ring)) {}

void ChainReplicator::Replicate(int worker, const Message& applied, const Ring& ring, bool may_add,
                                const Message* reply) {
  auto pieces = SplitByChain(applied, ring, esize_);
  for (auto& p : JoinerPieces(applied, ring)) pieces.push_back(std::move(p));
  if (pieces.empty()) return;
  // The update's place in the order of each range it touches; every copy carries the entries
  // of its own keys (DESIGN §8, invariant 3).
  std::vector<uint64_t> seq;
  for (const Range& r : SeqRanges(applied, ring)) seq_.Bump(r, &seq);
  for (auto& p : pieces) RestrictSeq(seq, &p.msg);
  const uint64_t e = EntryOf(worker, applied.meta.timestamp());
  // The tail may answer the worker when this copy alone holds the request's reply back: one
  // piece (one chain's, or a joiner's when no chain needs one), and an entry with nothing else
  // on its way or held.
  const Entry& fresh = entries_[e];
  const bool relay = reply != nullptr && pieces.size() == 1 && fresh.open == 0 &&
                     fresh.hops.empty() && fresh.replies.empty();
  // A copy of a push applied before never joins an aggregate: a replica holding part of an
  // aggregate could apply it neither whole nor in part.
  const bool aggregate = may_add && agg_ && applied.meta.op() == pb::Meta::DATA &&
                         !applied.meta.has_lens() && applied.meta.val_total() == 0 && additive_;
  bool in_aggregate = false;
  for (auto& p : pieces) {
    if (aggregate && p.msg.data.size() >= 2) {
      const SArray<Key> keys(p.msg.data[0]);
      const size_t n = keys.size();
      const int width = n ? static_cast<int>(p.msg.data[1].size() / esize_ / n) : 0;
      if (agg_->empty()) batch_since_us_ = now_us_();
      const std::vector<uint64_t> ps(p.msg.meta.seq().begin(), p.msg.meta.seq().end());
      const int added = agg_->Add(p.path, e, worker, applied.meta.timestamp(), keys.data(), n,
                                  p.msg.data[1].data(), width, ps);
      if (added >= 0) {
        if (added == 1) entries_[e].open++;  // released by that aggregate's acknowledgement
        in_aggregate = true;
        continue;
      }
    }
    // Batches hold earlier updates of the same ranges: they leave first.
    FlushBatches();
    p.msg.meta.set_origin(worker);
    SendHop({e}, std::move(p), relay ? reply : nullptr);
  }
  if (in_aggregate) copy_stats_.aggregated++;
  // Every live worker has a push in the batches (one step of all of them, typically): no
  // point in waiting for the window to end.
  if (aggregate && !agg_->empty() && agg_->workers() >= host_->NumWorkers()) FlushBatches();
}

Message ChainReplicator::Resend(int worker, const Message& m) {
  const int64_t ts = m.meta.timestamp();
  // Its aggregate leaves first, so replicas see it before any copy sent below.
  if (agg_ && agg_->Holds(worker, ts)) FlushBatches();
  // A copy of a push still waiting for its replicas: a copy on the way may have been lost.
  std::vector<SArray<Key>> covering;
  auto e = entry_of_.find({worker, ts});
  if (e != entry_of_.end()) {
    const int64_t now = now_us_();
    // Its own copies, not a walk over every copy on its way (a storm of resends after a
    // failure made that walk the servers' largest cost in the cluster simulation).
    auto& own = entries_[e->second].hops;
    size_t kept = 0;
    for (uint64_t id : own) {
      auto h = hops_.find(id);
      if (h == hops_.end()) continue;  // acknowledged or re-routed: forgotten here too
      own[kept++] = id;
      // A copy sent within its resend interval is still on its way (or queued at a slow
      // replica): sending it again would only queue a duplicate there. The timer resends it.
      if (!h->second.queued && now - h->second.sent_us >= HopInterval(h->second)) {
        Send(&h->second);
      }
      if (!h->second.msg.data.empty()) covering.emplace_back(h->second.msg.data[0]);
    }
    own.resize(kept);
  }
  // What this server applied of it but has no copy on its way for may never have reached
  // today's chain: applied as a replica of a master that left (a leaver's last copies are
  // ignored once the ring without it is in force), or acknowledged long ago.
  Message out;
  if (m.meta.op() != pb::Meta::DATA || m.meta.val_total() > 0 || m.data.size() < 2 ||
      m.data[0].size() % sizeof(Key) || m.data[1].size() % esize_) {
    // Dense ranges and value parts: all of it, unless a copy is on its way.
    if (covering.empty()) out = m;
    return out;
  }
  const SArray<Key> keys(m.data[0]);
  const size_t n = keys.size();
  if (n == 0) return out;
  std::vector<bool> keep(n, true);
  for (const auto& c : covering) {
    size_t i = 0, j = 0;
    while (i < n && j < c.size()) {
      if (keys[i] < c[j]) {
        ++i;
      } else if (c[j] < keys[i]) {
        ++j;
      } else {
        keep[i++] = false;
        ++j;
      }
    }
  }
  return KeySubset(m, keep, esize_);
}

void ChainReplicator::Probe(int worker, const Message& applied, const Ring& ring) {
  auto pieces = SplitByChain(applied, ring, esize_);
  if (pieces.empty()) return;
  // Where this server stands in each range the update touches (no new number: nothing new
  // is applied).
  std::vector<uint64_t> at;
  for (const Range& r : SeqRanges(applied, ring)) {
    std::vector<uint64_t> t;
    seq_.Export(r, &t);
    for (size_t i = 0; i + 3 <= t.size(); i += 3) {
      const uint64_t linked = i + 3 < t.size() ? SeqMap::kLinked : 0;
      at.insert(at.end(), {t[i], t[i + 1], t[i + 2], t[i + 2] | linked});
    }
  }
  const uint64_t id = EntryOf(worker, applied.meta.timestamp());
  FlushBatches();
  for (auto& p : pieces) {
    RestrictSeq(at, &p.msg);
    p.msg.meta.set_probe(true);
    p.msg.meta.set_origin(worker);
    SendHop({id}, std::move(p));
  }
}

bool ChainReplicator::HoldReply(int worker, int64_t ts, Message* reply) {
  auto it = entry_of_.find({worker, ts});
  if (it == entry_of_.end()) return false;
  entries_[it->second].replies.push_back(std::move(*reply));
  return true;
}

uint64_t ChainReplicator::EntryOf(int worker, int64_t ts) {
  auto at = entry_of_.find({worker, ts});
  if (at != entry_of_.end()) return at->second;
  const uint64_t e = next_fwd_++;
  entries_[e].worker = worker;
  entries_[e].ts = ts;
  entry_of_[{worker, ts}] = e;
  return e;
}

int64_t ChainReplicator::HopInterval(const Hop& h) const {
  auto f = flights_.find(h.msg.meta.receiver());
  const int shift = std::min(std::max(h.tries, f == flights_.end() ? 0 : f->second.rtt.backoff), 4);
  const double base = f == flights_.end() ? kHopResendUs : f->second.rtt.Timeout(kHopResendUs);
  // Never longer than kHopMaxUs: an acknowledgement that came late because the replica held the
  // copy behind a gap, or a partition healed, inflates the estimate without bound, and a copy
  // lost after that was not sent again for minutes (ps_sim --cluster --partition-every-s 1,
  // seed 588: a probe lost in a partition held its push unacknowledged past the settle bound).
  return std::min(static_cast<int64_t>(base) << shift, kHopMaxUs);
}

void ChainReplicator::Send(Hop* hop) {
  hop->sent_us = now_us_();
  hop->sends++;
  copy_stats_.copies++;
  copy_stats_.bytes += hop->msg.DataBytes();
  send_(hop->msg);
}

void ChainReplicator::SendHop(const std::vector<uint64_t>& entries, ChainPiece piece,
                              const Message* relay) {
  const uint64_t id = next_fwd_++;
  Message m = std::move(piece.msg);
  m.meta.clear_relay();
  if (relay) {
    *m.meta.mutable_relay() = relay->meta;
    entries_[entries[0]].relayed = true;
  }
  m.meta.set_replica(true);
  m.meta.set_request(true);
  m.meta.set_pull(false);
  m.meta.set_push(true);
  m.meta.set_app_id(app_);
  m.meta.set_fwd_id(id);
  m.meta.set_master(self_);
  m.meta.set_receiver(piece.path[0]);
  m.meta.clear_chain();
  for (size_t i = 1; i < piece.path.size(); ++i) m.meta.add_chain(piece.path[i]);
  for (uint64_t e : entries) {
    Entry& entry = entries_[e];
    entry.open++;
    entry.hops.push_back(id);
  }
  hops_[id] = Hop{entries, std::move(m), 0, 0, false};
  Launch(id);
}

bool ChainReplicator::Fly(Flight* f, Hop* hop) {
  const uint64_t bytes = hop->msg.DataBytes();
  // An empty window always takes one copy, however large.
  if (f->hops > 0 && (f->hops >= kWindowHops || f->bytes + bytes > kWindowBytes)) return false;
  hop->queued = false;
  f->hops++;
  f->bytes += bytes;
  Send(hop);
  return true;
}

void ChainReplicator::Launch(uint64_t id) {
  Hop& hop = hops_[id];
  Flight& f = flights_[hop.msg.meta.receiver()];
  // Behind copies that wait already, or no room: it waits too.
  if (!f.queued.empty() || !Fly(&f, &hop)) {
    hop.queued = true;
    f.queued.push_back(id);
  }
}

void ChainReplicator::Land(uint64_t id, const Hop& hop) {
  auto it = flights_.find(hop.msg.meta.receiver());
  if (it == flights_.end()) return;
  Flight& f = it->second;
  if (hop.queued) {
    f.queued.erase(std::find(f.queued.begin(), f.queued.end(), id));
  } else {
    f.hops--;
    f.bytes -= hop.msg.DataBytes();
  }
}

void ChainReplicator::Pump(int receiver) {
  auto it = flights_.find(receiver);
  if (it == flights_.end()) return;
  Flight& f = it->second;
  // In order: the first that finds no room holds back those after it.
  while (!f.queued.empty() && Fly(&f, &hops_.at(f.queued.front()))) f.queued.pop_front();
}

void ChainReplicator::OnAck(const Message& msg) {
  if (msg.meta.refused()) {
    OnRefused(msg);
    return;
  }
  if (msg.meta.nack()) {
    // A replica holds this copy because an older one did not arrive: send it the older ones
    // again (not those sent a moment ago: they may be on their way). The replica may be
    // further down the chain than the hop's first receiver, which then passes the copy on
    // (a lost forward is filled as fast as a lost first hop, not at the hop's timer).
    const int64_t now = now_us_();
    const int from = msg.meta.sender();
    for (auto& h : hops_) {
      if (h.first >= msg.meta.fwd_id() || h.second.queued ||
          now - h.second.sent_us < kHopResendUs / 10) {
        continue;
      }
      const auto& m = h.second.msg.meta;
      if (m.receiver() != from &&
          std::find(m.chain().begin(), m.chain().end(), from) == m.chain().end()) {
        continue;
      }
      Send(&h.second);
    }
    return;
  }
  auto h = hops_.find(msg.meta.fwd_id());
  if (h == hops_.end()) return;  // a duplicate, or a hop re-routed after a failure
  if (msg.meta.key_miss()) {
    // The replica no longer holds the key list the copy referred to (evicted, or a new node):
    // the node's filter chain has forgotten the list, so the keys go in full this time.
    if (!h->second.queued && msg.meta.sender() == h->second.msg.meta.receiver()) {
      Send(&h->second);
    }
    return;
  }
  const std::vector<uint64_t> waiting = std::move(h->second.entries);
  // Only the tail of a copy that carried the reply relays it; from any other acknowledgement
  // (a re-routed copy's, say) the master answers the worker itself.
  if (!msg.meta.relayed()) {
    for (uint64_t e : waiting) {
      auto it = entries_.find(e);
      if (it != entries_.end()) it->second.relayed = false;
    }
  }
  const int receiver = h->second.msg.meta.receiver();
  if (h->second.sends == 1) {
    flights_[receiver].rtt.Sample(static_cast<double>(now_us_() - h->second.sent_us));
  }
  Land(h->first, h->second);
  hops_.erase(h);
  Pump(receiver);
  for (uint64_t e : waiting) {
    auto it = entries_.find(e);
    if (it != entries_.end() && --it->second.open == 0) Flush(e);
  }
}

void ChainReplicator::OnRefused(const Message& no) {
  auto h = hops_.find(no.meta.fwd_id());
  RangeSet refused;
  if (h == hops_.end() || no.data.empty() || !ParseRanges(no.data[0], &refused)) return;
  // The rest of the copy still goes down its path (members there may follow this server in
  // those keys); a copy that cannot be cut by key is dropped whole.
  Message rest = h->second.msg;
  const int receiver = rest.meta.receiver();
  std::vector<ChainPiece> pieces;
  if (CanCut(rest) && StripRanges(&rest, refused)) {
    std::vector<int> path = {receiver};
    path.insert(path.end(), rest.meta.chain().begin(), rest.meta.chain().end());
    pieces.push_back(ChainPiece{std::move(path), std::move(rest)});
  }
  ReplaceHop(h->first, /*abandon=*/true, std::move(pieces));
  Pump(receiver);
}

void ChainReplicator::Flush(uint64_t e) {
  auto it = entries_.find(e);
  if (it == entries_.end()) return;
  Entry entry = std::move(it->second);
  entries_.erase(it);
  entry_of_.erase({entry.worker, entry.ts});
  if (entry.abandoned) return;
  // The tail answered the request as first received; resends of it (another attempt, say)
  // are answered here.
  for (size_t i = entry.relayed ? 1 : 0; i < entry.replies.size(); ++i) send_(entry.replies[i]);
}

void ChainReplicator::SetAggregation(int64_t window_us) {
  window_us_ = window_us;
  if (window_us > 0 && !agg_) agg_ = std::make_unique<Aggregator>(dtype_);
  if (window_us <= 0 && agg_) {
    FlushBatches();
    agg_.reset();
  }
}

void ChainReplicator::Poll() {
  if (agg_ && !agg_->empty() && now_us_() - batch_since_us_ >= window_us_) FlushBatches();
}

void ChainReplicator::FlushBatches() {
  if (!agg_ || agg_->empty()) return;
  for (auto& c : agg_->Take()) {
    // The entries' counts already include this copy (one per batch they are in): SendHop
    // counts it again, so take that back.
    for (uint64_t e : c.entries) entries_[e].open--;
    SendHop(c.entries, ChainPiece{c.path, std::move(c.msg)});
  }
}

std::string ChainReplicator::CheckEntries() const {
  std::unordered_map<uint64_t, size_t> refs;
  if (agg_) agg_->CountEntries(&refs);
  for (const auto& h : hops_) {
    for (uint64_t x : h.second.entries) refs[x]++;
  }
  for (const auto& e : entries_) {
    if (refs[e.first] != e.second.open) {
      return "server " + std::to_string(self_) + ": request (worker " +
             std::to_string(e.second.worker) + ", ts " + std::to_string(e.second.ts) +
             ") waits for " + std::to_string(e.second.open) + " copies but " +
             std::to_string(refs[e.first]) + " are on their way";
    }
  }
  return "";
}

void ChainReplicator::RingChanged(const std::shared_ptr<const Ring>& ring, bool prepared) {
  FlushBatches();  // built for the old chains: send them, then re-route what went to the dead
  if (last_ring_ && last_ring_->epoch() < ring->epoch()) {
    HandOver(*last_ring_, *ring);
    TakeOver(*last_ring_, *ring, prepared);
  }
  last_ring_ = ring;
  // The servers of a preparation still ahead are alive too: a failover ring that reaches this
  // server after the preparation (separate fan-outs) must not take the copies on their way to
  // its joiners and send them along the failover ring's chains, which acknowledged pushes the
  // joiner never got; it masters their keys after the cut-over (ps_sim --cluster --seed 1557
  // --ctl-stall-every-s 0.3 --join-every-s 1 --crash-every-s 1.5 --leave-every-s 2).
  const auto next = host_->Prepared();
  const bool ahead = next && next->epoch() > ring->epoch();
  auto alive = [&ring, &next, ahead](int id) {
    return ring->HasServer(id) || (ahead && next->HasServer(id));
  };
  ApplyOrphans(*ring, jumped_);
  Reroute(*ring, alive);
  RangeSet jumped;
  jumped.swap(jumped_);
  Announce(jumped, ring);
}

bool ChainReplicator::Apply(const Message& m, bool ordered) {
  if (IsMark(m)) return true;
  return m.meta.aggregate() ? host_->ApplyAggregate(m, ordered) : host_->ApplyCopy(m, ordered);
}

void ChainReplicator::Announce(const RangeSet& rs, std::shared_ptr<const Ring> ring, bool refetch) {
  if (!ring) ring = CurrentRing();
  if (!ring || rs.empty() || !Active(*ring)) return;
  const RangeSet mastered = Intersect(Normalize(RangeSet(rs)), MasteredRanges(*ring, self_));
  RangeSet mine = mastered;
  for (const auto& a : awaiting_) mine = Subtract(mine, a.second);
  if (refetch) refetch_pending_ = Union(refetch_pending_, Subtract(mastered, mine));
  if (mine.empty()) return;
  FlushBatches();  // earlier updates of these ranges leave first
  // The ranges whose refetch waited for a hand-over: their mark now makes every member fetch.
  const RangeSet again = refetch ? RangeSet{} : Intersect(mine, refetch_pending_);
  if (!again.empty()) refetch_pending_ = Subtract(refetch_pending_, again);
  for (const Range& r : mine) {
    // The units an update of the whole range would move (a unit may reach beyond r: moving
    // the points of a part that did not jump is only one more step its members follow).
    Message span;
    span.meta.set_op(pb::Meta::DENSE_PUSH);
    span.meta.set_range_begin(r.begin);
    span.meta.set_range_end(r.end);
    for (const Range& u : SeqRanges(span, *ring)) {
      Message mark;
      mark.meta.set_op(pb::Meta::DATA);
      const int64_t ts = next_mark_++;
      mark.meta.set_timestamp(ts);
      mark.meta.set_origin(-1);
      mark.meta.set_refetch(refetch || !Intersect({u}, again).empty());
      std::vector<uint64_t> seq;
      seq_.Bump(u, &seq);
      for (uint64_t w : seq) mark.meta.add_seq(w);
      const uint64_t e = EntryOf(-1, ts);
      for (auto& p : MarkPieces(mark, *ring)) SendHop({e}, std::move(p));
      if (entries_[e].open == 0) Flush(e);
    }
  }
}

std::vector<ChainPiece> ChainReplicator::MarkPieces(const Message& mark, const Ring& ring) const {
  std::vector<ChainPiece> out;
  const int n = mark.meta.seq_size();
  if (n < static_cast<int>(SeqMap::kEntry)) return out;
  const Range span(mark.meta.seq(0), mark.meta.seq(n - 3));
  auto add = [&out, &mark](std::vector<int> path) {
    if (path.empty()) return;
    for (const auto& p : out) {
      if (p.path == path) return;
    }
    out.push_back(ChainPiece{std::move(path), mark});
  };
  std::vector<RingSegment> segs;
  ring.SliceRange(span, &segs);
  for (const auto& s : segs) {
    if (s.server != self_) continue;  // not this server's to number (it moved on)
    auto chain = ring.Chain(ring.SegmentOf(s.range.begin));
    chain.erase(std::remove(chain.begin(), chain.end(), self_), chain.end());
    add(chain);
  }
  // Servers that join the range's chain at the prepared ring (their fetched copy carries the
  // points it was taken at; the mark moves them on, as every copy they are sent does).
  const auto next = host_->Prepared();
  if (next && next->epoch() > ring.epoch()) {
    std::vector<RingSegment> later;
    next->SliceRange(span, &later);
    for (const auto& s : later) {
      const auto now = ring.Chain(ring.SegmentOf(s.range.begin));
      for (int to : next->Chain(next->SegmentOf(s.range.begin))) {
        if (to != self_ && std::find(now.begin(), now.end(), to) == now.end()) add({to});
      }
    }
  }
  return out;
}

void ChainReplicator::ApplyOrphans(const Ring& ring, const RangeSet& jumped) {
  // Copies waiting for a gap that only a server now gone could fill never will. Those that
  // came live were not acknowledged, so their workers resend them. A replayed one was: it was
  // applied and acknowledged on arrival while its range was being fetched, and the snapshot
  // imported since lacks an update before it that never reached this server, so was never
  // acknowledged (its worker resends it to the new master). The acknowledged copy is applied
  // now, past the gap, in its master's order (ps_sim --cluster seeds 4732, the master died,
  // and 1338, it left and the hand-over timed out: the copy was dropped or waited for ever,
  // and an acknowledged update was lost).
  // A range this server has just jumped (it masters it now, without the rest of the old
  // history: the old master failed or left, or the hand-over timed out) takes no copy of it
  // from now on: a held acknowledged copy there is applied now too, whoever its master and
  // whatever hand-over of it is still awaited (ps_sim --cluster --worker-cut-every-s 0.5, seed
  // 3649: a joiner that had become master held the old master's acknowledged copies behind one
  // lost on the way, the old master left at the next cut-over, and the copies, refused as
  // copies of a range the joiner masters, were lost; --policy bsp --join-every-s 1, seed 671:
  // the same with the joiner taking over by failover and the old master still in the ring).
  const RangeSet took = Normalize(RangeSet(jumped));
  auto settled = [&](const HeldCopy& h) {
    const Message& m = h.msg;
    if (h.replay && Touches(m, took)) return true;
    return !ring.HasServer(m.meta.master()) && !awaiting_.count(m.meta.master());
  };
  std::vector<HeldCopy> acknowledged;
  held_copies_.erase(std::remove_if(held_copies_.begin(), held_copies_.end(),
                                    [&](HeldCopy& h) {
                                      if (!settled(h)) return false;
                                      if (h.replay) acknowledged.push_back(std::move(h));
                                      return true;
                                    }),
                     held_copies_.end());
  std::sort(acknowledged.begin(), acknowledged.end(), [](const HeldCopy& a, const HeldCopy& b) {
    return std::make_pair(a.msg.meta.master(), a.msg.meta.fwd_id()) <
           std::make_pair(b.msg.meta.master(), b.msg.meta.fwd_id());
  });
  for (auto& h : acknowledged) {
    const Message& m = h.msg;
    // Past their gap, out of order: the log (and the worker's mark) decides what is new. But
    // where the points show that no part of the update is here, the mark says nothing: it
    // passed the update once it was acknowledged, and this server applied it then, while it
    // fetched the range, and lost it to the older snapshot it imported since (ps_sim --fuzz
    // seed 1811: a joiner's replayed copy waited for a lost one, the old master died, and the
    // copy was taken for applied by its worker's mark).
    const bool lacks =
        seq_.Lacks(m.meta.seq().data(), static_cast<size_t>(m.meta.seq_size()), host_->Held());
    if (Apply(m, lacks)) {
      seq_.Advance(m.meta.seq().data(), static_cast<size_t>(m.meta.seq_size()));
    }
  }
}

void ChainReplicator::DropGone() {
  auto ring = CurrentRing();
  if (!ring) return;
  const auto next = host_->Prepared();
  Reroute(*ring, [&](int id) { return ring->HasServer(id) || (next && next->HasServer(id)); });
}

void ChainReplicator::Reroute(const Ring& ring, const std::function<bool(int)>& alive) {
  std::vector<uint64_t> lost;
  for (const auto& h : hops_) {
    bool ok = alive(h.second.msg.meta.receiver());
    for (int c : h.second.msg.meta.chain()) ok &= alive(c);
    if (!ok) lost.push_back(h.first);
  }
  std::sort(lost.begin(), lost.end());
  // The copies go along the new chains from their second member on: right for the ranges this
  // server masters under the new ring (it inherited them), wrong for the others (it left, or
  // they moved to another master), whose new master would never get them, so their requests
  // are not acknowledged here (found by ps_sim --cluster, seed 548: a server that left at a
  // cut-over acknowledged pushes the new master lacked).
  const RangeSet others =
      lost.empty() ? RangeSet{} : Subtract({Range::All()}, MasteredRanges(ring, self_));
  for (uint64_t id : lost) {
    const Message& msg = hops_[id].msg;
    // Send the copy along the chains of the new ring (the heirs of the server that left).
    const bool mark = IsMark(msg);
    auto pieces = mark                   ? MarkPieces(msg, ring)
                  : msg.meta.aggregate() ? Aggregator::Split(msg, ring, esize_)
                                         : SplitByChain(msg, ring, esize_);
    if (!mark) {
      // The copy's points were numbered by segments of the ring it was made under; a piece of
      // it moves its receivers' points only in the new ring's segments whose keys it carries.
      // Else a piece that left out the keys of a range its receiver masters now (they go to
      // the new chain's other members, and the new master gets them from the worker's resend)
      // marked them as applied there, and when the worker was dead no resend came: the new
      // master differed from its replicas for good (ps_sim --cluster --seed 492
      // --partition-every-s 0.5 --partition-max-s 3 --kill-worker-every-s 3 --resend timer).
      for (auto& p : pieces) {
        RestrictSeq(msg, &p.msg);
        CutSeq(SegmentsOf(p.msg, ring), &p.msg);
      }
    }
    ReplaceHop(id, Touches(msg, others), std::move(pieces));
  }
  // Windows that re-routed copies left: what waited behind them goes.
  std::vector<int> receivers;
  for (const auto& f : flights_) receivers.push_back(f.first);
  for (int r : receivers) Pump(r);
}

void ChainReplicator::ReplaceHop(uint64_t id, bool abandon, std::vector<ChainPiece> pieces) {
  Hop hop = std::move(hops_.at(id));
  Land(id, hop);
  hops_.erase(id);
  for (uint64_t e : hop.entries) {
    entries_[e].open--;
    if (abandon) entries_[e].abandoned = true;
  }
  for (auto& p : pieces) SendHop(hop.entries, std::move(p));
  for (uint64_t e : hop.entries) {
    if (entries_.count(e) && entries_[e].open == 0) Flush(e);
  }
}

void ChainReplicator::AfterRing() {
  std::vector<Message> asks;
  asks.swap(handover_asks_);
  for (auto& a : asks) OnHandover(a);
}

void ChainReplicator::Tick() {
  const int64_t now = now_us_();
  // Copies whose acknowledgement did not come (lost on the way, or held behind a lost one).
  for (auto& h : hops_) {
    if (h.second.queued || now - h.second.sent_us < HopInterval(h.second)) continue;
    h.second.tries++;
    int& backoff = flights_[h.second.msg.meta.receiver()].rtt.backoff;
    backoff = std::max(backoff, std::min(h.second.tries, 4));
    Send(&h.second);
  }
  // A gap that no resend filled: fetch the range afresh (the copies that wait then apply).
  RangeSet stale;
  for (const auto& h : held_copies_) {
    if (now - h.since < gap_timeout_us_) continue;
    for (const Range& r :
         seq_.Behind(h.msg.meta.seq().data(), h.msg.meta.seq_size(), host_->Held())) {
      stale.push_back(r);
    }
  }
  for (const auto& a : awaiting_) stale = Subtract(Normalize(std::move(stale)), a.second);
  if (!stale.empty()) Refetch(stale);
  ReleaseHeld();
  if (awaiting_.empty()) return;
  if (now - handover_since_us_ < handover_timeout_us_) {
    AskHandover();
    return;
  }
  // The old master does not answer (it left, or died before the scheduler noticed): go on
  // without its last updates, which its workers resend here; jump past its history.
  LOG(WARNING) << "server " << self_ << " takes over without the old master's last points";
  RangeSet jumped;
  for (const auto& a : awaiting_) {
    for (const Range& r : a.second) seq_.Jump(r, SeqMap::Base(handover_epoch_));
    jumped.insert(jumped.end(), a.second.begin(), a.second.end());
  }
  // Nothing of this hand-over stays: a master counted as reported here would count as having
  // reported at the next hand-over too, which then ended with the first report of any other
  // master, without this one's points (ps_sim --cluster --kill-worker-every-s 3, seed 949: a
  // server paused past the timeout took a range over from the same old master at the next
  // cut-over and numbered its updates from its own points, below the old master's, so a
  // replica that had fetched from the old master took them as duplicates).
  reported_.clear();
  handover_points_.clear();
  awaiting_.clear();
  // Before the requests that waited for the hand-over: the old master's acknowledged updates
  // come first.
  if (auto ring = CurrentRing()) ApplyOrphans(*ring, jumped);
  Announce(jumped);
  CheckHandover();
}

std::vector<ChainPiece> ChainReplicator::JoinerPieces(const Message& applied,
                                                      const Ring& ring) const {
  // While a ring is prepared, the servers that will hold a key there but do not hold it now
  // (a joiner; the heirs of a server that leaves) get a copy of every update, so that their
  // fetched copy plus these is complete at the cut-over.
  std::vector<ChainPiece> out;
  const auto next = host_->Prepared();
  if (!next || next->epoch() <= ring.epoch()) return out;
  auto next_chain = [&next](size_t segment) { return next->Chain(segment); };
  for (auto& p : SplitByPath(applied, *next, esize_, next_chain)) {
    auto newcomers = [&](size_t segment) {
      auto now = ring.Chain(segment);
      std::vector<int> to;
      for (int s : p.path) {
        if (s != self_ && std::find(now.begin(), now.end(), s) == now.end()) to.push_back(s);
      }
      return to;
    };
    for (auto& q : SplitByPath(p.msg, ring, esize_, newcomers)) {
      for (int to : q.path) out.push_back(ChainPiece{{to}, q.msg});  // each ends no chain yet
    }
  }
  return out;
}

}  // namespace ps
