// ServerCore, second half: moving key ranges between servers when the ring changes — the
// refill of a chain after a failure and the pre-copy for a server that joins (DESIGN §8,
// invariant 5: refill before trust). The request path is server_core.cc.
//
// The protocol, for one range r that server X must hold and does not:
//  1. X asks the current master M of r for a copy (REFILL request, with the epoch X planned
//     with). M answers only once it knows that ring (so every update it applies afterwards
//     reaches X along the chain, or as a copy to a joiner) and holds r completely itself.
//  2. M's answer is a snapshot taken under its lock: the raw slots (update-rule state
//     included) and its applied log over r (each worker's low-water mark as a range vector
//     clock, and the records above it).
//  3. X replaces r by the snapshot, then applies again every update copy it received while
//     something was missing: the imported log drops those the snapshot already holds.
// Chain copies X receives meanwhile are acknowledged as usual (X keeps them), so the ack to a
// worker still means every member of the chain has the update.
#include <glog/logging.h>

#include <algorithm>

#include "kv/server_core.h"

namespace ps {

void ServerCore::SetReport(ReportFn report) {
  std::lock_guard<std::mutex> lk(mu);
  report_ = std::move(report);
  Plan();
}

size_t ServerCore::PendingRanges() const {
  std::lock_guard<std::mutex> lk(mu);
  return fetches_.size();
}

size_t ServerCore::CopiesInFlight() const {
  std::lock_guard<std::mutex> lk(mu);
  return chain_.copies_in_flight();
}

bool ServerCore::AwaitingHandover() const {
  std::lock_guard<std::mutex> lk(mu);
  return chain_.Awaiting(RangeSet{Range::All()});
}

size_t ServerCore::NumMastered() const {
  std::lock_guard<std::mutex> lk(mu);
  auto ring = ring_ ? ring_() : nullptr;
  if (!ring) return store->size();
  size_t n = 0;
  for (const Range& r : MasteredRanges(*ring, self_)) n += store->CountRange(r);
  return n;
}

std::vector<std::pair<Range, uint64_t>> ServerCore::ChainDigests() const {
  std::lock_guard<std::mutex> lk(mu);
  std::vector<std::pair<Range, uint64_t>> out;
  auto ring = ring_ ? ring_() : nullptr;
  if (!ring) return out;
  for (size_t i : ring->SegmentsHeldBy(self_)) {
    const Range r = ring->segments()[i].range;
    if (!Subtract({r}, held_).empty()) continue;  // still being fetched
    SArray<Key> keys;
    SArray<char> slots;
    SArray<uint64_t> sizes;
    store->ExportRange(r, &keys, &slots, &sizes);
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    auto mix = [&h](const char* p, size_t n) {
      for (size_t j = 0; j < n; ++j) h = (h ^ static_cast<unsigned char>(p[j])) * 1099511628211ull;
    };
    mix(reinterpret_cast<const char*>(keys.data()), keys.size() * sizeof(Key));
    mix(slots.data(), slots.size());
    out.emplace_back(r, h);
  }
  return out;
}

void ServerCore::Report() {
  if (!report_) return;
  RefillReport r;
  r.epoch = planned_epoch_;
  r.pending = fetches_.size();
  r.orphans = orphans_;
  report_(r);
}

void ServerCore::Prepare(std::shared_ptr<const Ring> next) {
  std::lock_guard<std::mutex> lk(mu);
  if (next_ && (!next || (next->epoch() != next_->epoch() && !PrecopiesSurvive(*next_, *next)))) {
    ForgetPrecopies();
  }
  next_ = std::move(next);
  Plan();
  // A preparation dropped or made again without some joiner: no update waits for it any more
  // (found by ps_sim --cluster, seed 918: a joiner declared dead during its pre-copy kept every
  // push that had been copied to it unacknowledged for ever).
  chain_.DropGone();
}

void ServerCore::ForgetPrecopies() {
  if (!planned_ring_) return;
  const RangeSet copied = Subtract(held_, HeldRanges(*planned_ring_, self_));
  if (copied.empty()) return;
  LOG(INFO) << "server " << self_ << " fetches again " << copied.size()
            << " range(s) it copied for ring epoch " << next_->epoch()
            << ": that preparation was dropped";
  held_ = Subtract(held_, copied);
  store->ImportRanges(copied, {}, {}, {});
}

void ServerCore::Plan() {
  auto cur = ring_ ? ring_() : nullptr;
  if (!cur || cur->servers().empty()) return;
  if (next_ && next_->epoch() <= cur->epoch()) {
    // The cut-over happened, or a ring in force dropped the preparation.
    if (!PrecopiesSurvive(*next_, *cur)) ForgetPrecopies();
    next_ = nullptr;
  }
  if (!have_held_) {
    // First look at a ring: a server of the starting ring holds its (empty) ranges; one that
    // joins holds nothing yet.
    have_held_ = true;
    const auto& s = cur->servers();
    if (std::find(s.begin(), s.end(), self_) != s.end()) held_ = HeldRanges(*cur, self_);
  }
  cur_epoch_ = cur->epoch();
  planned_ring_ = cur;
  chain_.FirstRing(cur);
  const uint64_t target = next_ ? next_->epoch() : cur->epoch();
  RefillPlan plan = PlanRefill(*cur, next_.get(), self_, held_);
  // A range fetched afresh whose source is gone (it died or left before the copy came) and
  // that no other server holds: this server's own copy is the best one left, and it holds every
  // acknowledged update. It is kept rather than lost (found by the whole-cluster simulation,
  // seeds 18 and 67 of ps_sim --cluster: the data of two replicas that were fetching afresh
  // when their master died or left was given up, and the scheduler was told nothing).
  const RangeSet adopt = Intersect(plan.orphans, stale_);
  if (!adopt.empty()) {
    LOG(WARNING) << "server " << self_ << " keeps its own copy of " << adopt.size()
                 << " range(s) it was fetching afresh: no other server holds them now";
    held_ = Union(held_, adopt);
    chain_.Adopt(adopt, cur->epoch());
    plan = PlanRefill(*cur, next_.get(), self_, held_);
  }
  stale_ = Intersect(stale_, plan.missing);  // fetched since, or no longer this server's
  // One pass over the store for all of them (a range at a time would copy it per range).
  if (!plan.drop.empty()) store->ImportRanges(plan.drop, {}, {}, {});
  held_ = Subtract(held_, plan.drop);
  unwanted_ = Subtract({Range::All()}, Union(held_, plan.missing));
  orphans_ = plan.orphans;
  for (const Range& r : plan.orphans) {
    LOG(ERROR) << "server " << self_ << " should hold [" << r.begin << ", " << r.end
               << ") under ring epoch " << target << " but no server holds a complete copy";
  }
  const bool changed = target != planned_epoch_;
  planned_epoch_ = target;
  fetches_.clear();
  std::map<int, RangeSet> by_source;  // one request per source
  for (const auto& f : plan.fetch) by_source[f.second].push_back(f.first);
  for (auto& b : by_source) {
    const uint64_t id = next_fetch_++;
    fetches_[id] = Fetch{Normalize(std::move(b.second)), b.first, 0, fetch_timeout_us_};
    SendFetch(id);
  }
  chain_.PruneBuffered();
  if (changed || !plan.fetch.empty()) {
    LOG_IF(INFO, !plan.fetch.empty()) << "server " << self_ << " fetches " << plan.fetch.size()
                                      << " range(s) for ring epoch " << target;
  }
  Report();
  ServeWaiting();
}

void ServerCore::SendFetch(uint64_t id) {
  Fetch& f = fetches_[id];
  f.sent_us = now_us();
  Message m;
  m.meta.set_receiver(f.from);
  m.meta.set_app_id(app);
  m.meta.set_request(true);
  m.meta.set_op(pb::Meta::REFILL);
  m.meta.set_dtype(static_cast<int>(dtype));
  m.meta.set_fwd_id(id);
  m.meta.set_epoch(planned_epoch_);
  m.data = {EncodeRanges(f.ranges)};
  send(m);
}

void ServerCore::Tick() {
  std::lock_guard<std::mutex> lk(mu);
  const int64_t now = now_us();
  // Copies routed under an older ring may still write into a range dropped at the cut-over:
  // clear them out.
  RangeSet stray;
  for (const Range& r : unwanted_) {
    if (store->CountRange(r) > 0) stray.push_back(r);
  }
  if (!stray.empty()) store->ImportRanges(stray, {}, {}, {});
  for (auto& f : fetches_) {
    // A piece asked for again is exported and sent again: waiting four times as long as the
    // last piece took, and doubling per attempt, keeps pieces still on their way (16 MB behind
    // a busy link or a busy importer) from piling up at both ends.
    if (now - f.second.sent_us >= f.second.timeout_us << std::min(f.second.attempts, 3)) {
      f.second.attempts++;
      // Past a few attempts the refill holds the ring's cut-over back: say from whom.
      LOG_IF(WARNING, f.second.attempts >= 4)
          << "server " << self_ << " asks node " << f.second.from << " again for "
          << f.second.ranges.size() << " range(s) of ring epoch " << planned_epoch_ << " (from ["
          << f.second.ranges.front().begin << ", " << f.second.ranges.front().end << ")): attempt "
          << f.second.attempts + 1 << ", no copy came";
      SendFetch(f.first);
    }
  }
  chain_.Tick();
  ServeWaiting();
  if (waiting_since_us_ && now - waiting_since_us_ >= kHeldReportUs &&
      now - waiting_logged_us_ >= kHeldReportUs) {
    waiting_logged_us_ = now;
    const Message& w = waiting_.front();
    RangeSet rs;
    ParseRanges(w.data[0], &rs);
    LOG(WARNING) << "server " << self_ << " has held " << waiting_.size()
                 << " refill request(s) back for " << (now - waiting_since_us_) / 1000000
                 << " s; node " << w.meta.sender()
                 << "'s: " << RefillBlocked(rs, w.meta.epoch(), w.meta.sender());
  }
  // The worker of a long-held pull hears why, every kHeldReportUs: it logs it and names it if
  // its Wait times out.
  for (auto& h : held) {
    if (now - h.second.since < kHeldReportUs || now - h.second.noticed < kHeldReportUs) continue;
    h.second.noticed = now;
    Message notice = ReplyTo(h.second.req);
    notice.meta.set_held_why("server node " + std::to_string(self_) + ": " +
                             HeldWhyLocked(h.second, now));
    send(notice);
  }
  if (!held.empty() && now - held_reported_us_ >= kHeldReportUs) {
    const std::string report = HeldReportLocked(kHeldReportUs);
    if (!report.empty()) {
      held_reported_us_ = now;
      LOG(WARNING) << "server " << self_ << ": " << report;
    }
  }
}

std::string ServerCore::HeldReport(int64_t held_us) const {
  std::lock_guard<std::mutex> lk(mu);
  return HeldReportLocked(held_us);
}

std::string ServerCore::HeldReportLocked(int64_t held_us) const {
  const HeldRead* oldest = nullptr;
  for (const auto& h : held) {
    if (!oldest || h.second.since < oldest->since) oldest = &h.second;
  }
  const int64_t now = now_us();
  if (!oldest || now - oldest->since < held_us) return "";
  return "pull of worker node " + std::to_string(oldest->req.meta.sender()) + " at step " +
         std::to_string(oldest->req.meta.step()) + " " +
         HeldWhyLocked(*oldest, now, " (" + std::to_string(held.size()) + " held)");
}

std::string ServerCore::HeldWhyLocked(const HeldRead& h, int64_t now,
                                      const std::string& after_policy) const {
  const int64_t step = h.req.meta.step();
  // The workers behind the read's step, slowest first: under BSP and SSP the read waits for
  // (some of) them; PSP's samples come from them too.
  std::vector<std::pair<int64_t, int>> behind;
  const StepTable& t = gate.table();
  for (size_t i = 0; i < t.workers().size(); ++i) {
    if (t.steps()[i] < step) behind.emplace_back(t.steps()[i], t.workers()[i]);
  }
  std::sort(behind.begin(), behind.end());
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%.1f", (now - h.since) / 1e6);
  std::string out = "held " + std::string(secs) + " s under " + gate.policy().Spec() + after_policy;
  if (behind.empty()) return out + "; no worker is behind it";
  out += "; behind it: ";
  for (size_t i = 0; i < behind.size() && i < 8; ++i) {
    out += (i ? ", " : "") + std::string("worker node ") + std::to_string(behind[i].second) +
           " at step " + std::to_string(behind[i].first);
  }
  if (behind.size() > 8) out += " and " + std::to_string(behind.size() - 8) + " more";
  return out;
}

// Request frame 0: sorted (begin, end) pairs. Reply frames: the pairs, then keys, raw slots
// and slot sizes over all the ranges, then for each range its applied-log clock and records,
// each as a length then the words.
void ServerCore::OnRefillRequest(Message& msg) {
  RangeSet rs;
  if (msg.data.size() != 1 || !ParseRanges(msg.data[0], &rs)) {
    LOG(WARNING) << "server " << self_ << ": malformed range request from node "
                 << msg.meta.sender();
    return;
  }
  if (!RefillBlocked(rs, msg.meta.epoch(), msg.meta.sender()).empty()) {
    // One request per asker: a server asks a source for one piece at a time, and a newer
    // request (a new plan, or the next piece) replaces what an older plan asked.
    for (auto& w : waiting_) {
      if (w.meta.sender() != msg.meta.sender()) continue;
      if (msg.meta.fwd_id() > w.meta.fwd_id()) w = msg;
      return;
    }
    if (waiting_since_us_ == 0) waiting_since_us_ = now_us();
    waiting_.push_back(msg);
    return;
  }
  // Aggregates of pushes applied before the snapshot leave first: whichever way they reach
  // the asker, they hold no push the snapshot lacks.
  chain_.FlushBatches();
  Message reply;
  reply.meta.set_receiver(msg.meta.sender());
  reply.meta.set_app_id(app);
  reply.meta.set_request(false);
  reply.meta.set_op(pb::Meta::REFILL);
  reply.meta.set_dtype(static_cast<int>(dtype));
  reply.meta.set_fwd_id(msg.meta.fwd_id());
  SArray<Key> keys;
  SArray<char> slots;
  SArray<uint64_t> sizes, logs;
  std::vector<uint64_t> points;  // the sequence points over the ranges, in order
  // One piece: the ranges from the first on until piece_bytes_ is reached, the last one maybe
  // in part; the asker imports it and asks for the rest. Each piece is a snapshot of its own
  // ranges (slots, applied log, points), so neither side ever holds more than a piece of it.
  RangeSet covered;
  for (const Range& r : rs) {
    if (keys.size() > 0 && slots.size() >= piece_bytes_) break;
    SArray<Key> k;
    SArray<char> v;
    SArray<uint64_t> z, clock, records;
    Key stop = r.end;
    const uint64_t room = piece_bytes_ > slots.size() ? piece_bytes_ - slots.size() : 1;
    store->ExportRange(r, &k, &v, &z, room, &stop);
    const Range part(r.begin, stop);
    covered.push_back(part);
    chain_.points().Export(part, &points);
    keys.append(k);
    slots.append(v);
    sizes.append(z);
    log.Export(part, &clock, &records);
    logs.push_back(clock.size());
    logs.append(clock);
    logs.push_back(records.size());
    logs.append(records);
    if (stop < r.end) break;
  }
  reply.data = {EncodeRanges(covered), SArray<char>(keys), slots,
                SArray<char>(sizes),   SArray<char>(logs), SArray<char>(SArray<uint64_t>(points))};
  VLOG(1) << "server " << self_ << " copies " << covered.size() << " range(s) (" << keys.size()
          << " keys) to node " << msg.meta.sender();
  send(reply);
}

std::string ServerCore::RefillBlocked(const RangeSet& rs, uint64_t epoch, int asker) const {
  // Not yet: updates applied from now on might not reach the asker, or this copy is
  // incomplete itself: ranges missing, or taken over with the old master's last updates
  // still on their way (ps_sim --cluster seed 574: a joiner's snapshot from such a new
  // master lacked an acknowledged update, which then died with the two servers that held
  // it). Answered when the ring arrives, the ranges are complete or the hand-over is.
  auto cur = ring_ ? ring_() : nullptr;
  const uint64_t known = std::max<uint64_t>(cur ? cur->epoch() : 0, next_ ? next_->epoch() : 0);
  if (known < epoch) {
    return "asked under ring epoch " + std::to_string(epoch) + ", which this server does not " +
           "know yet (it knows " + std::to_string(known) + ")";
  }
  // Under neither ring this server follows does the asker hold the ranges (a failover ring
  // dropped the preparation it asked under, and the preparation made again has not come):
  // what this server applies now would not reach the asker, and a snapshot of now would miss
  // it (ps_sim --cluster --ctl-stall-every-s 0.3, seed 78).
  RangeSet theirs;
  if (cur) theirs = HeldRanges(*cur, asker);
  if (next_) theirs = Union(theirs, HeldRanges(*next_, asker));
  if (!Subtract(rs, theirs).empty()) {
    return "node " + std::to_string(asker) + " holds the ranges under no ring this server " +
           "follows (epoch " + std::to_string(cur ? cur->epoch() : 0) +
           (next_ ? ", prepared " + std::to_string(next_->epoch()) : std::string()) + ")";
  }
  const RangeSet lacking = Subtract(rs, held_);
  if (!lacking.empty()) {
    return std::to_string(lacking.size()) + " of the range(s) are not complete here (" +
           std::to_string(fetches_.size()) + " fetch(es) of its own pending)";
  }
  if (chain_.Awaiting(rs)) return "a hand-over of the ranges has not come yet";
  return "";
}

void ServerCore::ServeWaiting() {
  std::vector<Message> again;
  again.swap(waiting_);
  for (auto& m : again) OnRefillRequest(m);
  if (waiting_.empty()) waiting_since_us_ = 0;
}

void ServerCore::OnRefillReply(const Message& msg) {
  auto it = fetches_.find(msg.meta.fwd_id());
  if (it == fetches_.end()) return;  // an older plan's, or a second answer
  const RangeSet asked = it->second.ranges;
  // A piece: the asked ranges from the first on, the last one maybe in part (OnRefillRequest).
  RangeSet rs;
  bool ok = msg.data.size() == 6 && ParseRanges(msg.data[0], &rs) && !rs.empty() &&
            rs.front().begin == asked.front().begin && Subtract(rs, asked).empty() &&
            (Subtract(asked, rs).empty() || Subtract(asked, rs).front().begin >= rs.back().end) &&
            msg.data[1].size() % sizeof(Key) == 0 && msg.data[3].size() % sizeof(uint64_t) == 0 &&
            msg.data[4].size() % sizeof(uint64_t) == 0 &&
            msg.data[5].size() % (3 * sizeof(uint64_t)) == 0;
  std::string err = ok ? "" : "malformed";
  // Parse every log part first, so a bad frame changes nothing (a copy of the whole log per
  // piece was most of what a refill cost a server with many workers in flight).
  std::vector<AppliedLog::Parsed> parts(rs.size());
  const SArray<uint64_t> logs = ok ? SArray<uint64_t>(msg.data[4]) : SArray<uint64_t>();
  size_t at = 0;
  auto part = [&](SArray<uint64_t>* out) {
    if (at >= logs.size() || logs[at] > logs.size() - at - 1) return false;
    *out = logs.Segment(at + 1, at + 1 + logs[at]);
    at += 1 + logs[at];
    return true;
  };
  for (size_t i = 0; err.empty() && i < rs.size(); ++i) {
    SArray<uint64_t> clock, records;
    if (!part(&clock) || !part(&records)) {
      err = "applied-log frame truncated";
    } else {
      err = AppliedLog::Parse(rs[i], clock, records, &parts[i]);
    }
  }
  if (err.empty() && at != logs.size()) err = "applied-log frame too long";
  // The points, checked on a scratch copy as well: triples cover each range in order.
  SeqMap seq = chain_.points();
  if (err.empty()) {
    const SArray<uint64_t> t(msg.data[5]);
    size_t i = 0;
    for (const Range& r : rs) {
      size_t j = i;
      while (j + 3 <= t.size() && t[j + 1] <= r.end) j += 3;
      err = seq.Import(r, t.data() + i, j - i);
      if (!err.empty()) break;
      i = j;
    }
    if (err.empty() && i != t.size()) err = "sequence points beyond the ranges";
  }
  if (err.empty()) {
    err = store->ImportRanges(rs, SArray<Key>(msg.data[1]), msg.data[2],
                              SArray<uint64_t>(msg.data[3]));
  }
  if (!err.empty()) {
    LOG(ERROR) << "server " << self_ << ": range copy from node " << msg.meta.sender() << ": "
               << err << " (asked again)";
    return;
  }
  for (size_t i = 0; i < rs.size(); ++i) log.Import(rs[i], std::move(parts[i]));
  chain_.SetPoints(std::move(seq));
  held_ = Union(held_, rs);
  const Fetch done = it->second;
  fetches_.erase(it);
  const RangeSet rest = Subtract(asked, rs);
  if (!rest.empty()) {
    // The next piece, under a new id: a late copy of this answer is then ignored.
    const uint64_t id = next_fetch_++;
    const int64_t took = now_us() - done.sent_us;
    fetches_[id] =
        Fetch{rest, done.from, 0, std::clamp(4 * took, fetch_timeout_us_, 8 * fetch_timeout_us_)};
    SendFetch(id);
  }
  chain_.Replay(rs);
  if (fetches_.empty()) {
    LOG(INFO) << "server " << self_ << " holds every range of ring epoch " << planned_epoch_;
  }
  Report();
  ServeWaiting();
}

bool ServerCore::Owns(const Message& msg, const Ring& ring) const {
  const auto& m = msg.meta;
  std::vector<RingSegment> segs;
  if (m.op() == pb::Meta::CLOCK) return true;
  if (m.op() == pb::Meta::DENSE_PUSH) {
    ring.SliceRange(Range(m.range_begin(), m.range_end()), &segs);
  } else if (m.op() == pb::Meta::RANGE_PULL) {
    if (msg.data.empty() || msg.data[0].size() % (2 * sizeof(Key))) return true;
    SArray<Key> rs(msg.data[0]);
    for (size_t i = 0; i + 1 < rs.size(); i += 2) ring.SliceRange(Range(rs[i], rs[i + 1]), &segs);
  } else {
    if (msg.data.empty() || msg.data[0].size() % sizeof(Key)) return true;  // rejected later
    SArray<Key> keys(msg.data[0]);
    std::vector<KeySlice> slices;
    ring.SliceKeys(keys.data(), keys.size(), &slices);
    for (const auto& s : slices) {
      if (s.server != self_) return false;
    }
    return true;
  }
  for (const auto& s : segs) {
    if (s.server != self_) return false;
  }
  return true;
}

}  // namespace ps
