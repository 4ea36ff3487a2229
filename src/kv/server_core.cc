#include "kv/server_core.h"

#include <glog/logging.h>

#include <algorithm>
#include <climits>

#include "store/block.h"

namespace ps {

ServerCore::ServerCore(int a, DataType t, std::shared_ptr<StoreBase> s,
                       std::shared_ptr<const BarrierPolicy> policy, uint64_t seed,
                       const std::vector<int>& workers, SendFn snd, NowFn now, int self,
                       RingFn ring)
    : app(a),
      dtype(t),
      esize(DataTypeSize(t)),
      store(std::move(s)),
      send([this, raw = std::move(snd)](Message& m) { SendFiltered(m, raw); }),
      now_us(std::move(now)),
      self_(self),
      ring_(std::move(ring)),
      gate(std::move(policy), seed),
      chain_(a, t, store->Additive(), self, this, send, now_us, ring_) {
  gate.SetWorkers(workers);
}

void ServerCore::SendFiltered(Message& m, const SendFn& raw) {
  if (!m.meta.has_significant() || m.reply_keys.empty()) return raw(m);
  const size_t n = m.reply_keys.size() / sizeof(Key);
  const double threshold = m.meta.significant();
  m.meta.clear_significant();
  if (!m.meta.error().empty() || m.data.size() != 1 || n == 0 ||
      m.data[0].size() % (n * esize) != 0 || m.data[0].empty()) {
    return raw(m);
  }
  // Coded and sent under one lock: frames leave in the order of their sequence numbers.
  std::lock_guard<std::mutex> lk(sig_mu_);
  m.data[0] = sig_.Encode(m.meta.receiver(), reinterpret_cast<const Key*>(m.reply_keys.data()), n,
                          m.data[0].data(), m.data[0].size() / (n * esize), dtype, threshold);
  m.meta.set_significant_coded(true);
  m.reply_keys = SArray<char>();
  raw(m);
}

SignificantFilter::Stats ServerCore::significant_stats() const {
  std::lock_guard<std::mutex> lk(sig_mu_);
  return sig_.stats();
}

KVServerBase::BarrierStats ServerCore::Stats() const {
  std::lock_guard<std::mutex> lk(mu);
  KVServerBase::BarrierStats b;
  b.policy = gate.policy().Spec();
  b.clock = gate.Clock();
  b.reads = gate.reads();
  b.deferred = gate.deferred();
  b.held = gate.held();
  b.checks = gate.checks();
  for (size_t i = 0; i < gate.table().size(); ++i) {
    b.steps.emplace_back(gate.table().workers()[i], gate.table().steps()[i]);
  }
  b.staleness = staleness;
  b.read_lag = read_lag;
  return b;
}

Message ServerCore::ReplyTo(const Message& msg) const {
  Message reply = AnswerTo(msg);
  reply.meta.set_app_id(app);
  reply.meta.set_op(msg.meta.op());
  reply.meta.set_dtype(msg.meta.dtype());
  reply.meta.set_compress(msg.meta.compress());
  return reply;
}

void ServerCore::Process(Message& msg) {
  if (msg.meta.op() == pb::Meta::REFILL) {
    std::lock_guard<std::mutex> lk(mu);
    if (msg.meta.request()) {
      OnRefillRequest(msg);
    } else {
      OnRefillReply(msg);
    }
    return;
  }
  if (msg.meta.op() == pb::Meta::HANDOVER) {
    std::lock_guard<std::mutex> lk(mu);
    chain_.OnHandover(msg);
    return;
  }
  if (msg.meta.replica()) {
    std::lock_guard<std::mutex> lk(mu);
    if (msg.meta.request()) {
      chain_.OnCopy(msg);
    } else {
      chain_.OnAck(msg);
    }
    return;
  }
  if (!msg.meta.request()) return;
  if (msg.meta.significant_reset() > 0) {
    // The worker refused a coded reply: both copies start afresh (before this request's reply
    // is coded, so that reply opens the new epoch).
    std::lock_guard<std::mutex> lk(sig_mu_);
    sig_.Reset(msg.meta.sender(), msg.meta.significant_reset());
  }
  std::lock_guard<std::mutex> lk(mu);
  ProcessLocked(msg);
}

void ServerCore::ProcessLocked(Message& msg) {
  const int worker = msg.meta.sender();
  const int64_t step = msg.meta.step();
  // What the step table may take: steps whose pushes the worker knows are all applied.
  const int64_t done = msg.meta.has_done_step() ? msg.meta.done_step() : step;
  std::vector<uint64_t> released;
  Message reply = ReplyTo(msg);
  if (tombstones_.count(worker)) {
    // Fenced (DESIGN §8): the worker was declared dead and its work given to others; what it
    // still sends (a stall that ended, resends) is refused, and it learns why.
    fenced_++;
    reply.meta.set_error_code(static_cast<int>(ErrorCode::kFenced));
    Answer(msg, &reply,
           "worker node " + std::to_string(worker) +
               " was declared dead by the scheduler; its requests are refused (a dead node "
               "cannot come back)");
    return;
  }
  if (msg.meta.dead_workers() > dead_workers_) {
    // The sender knew of a worker's death that this server has not heard of yet: served now,
    // the request could be followed by that worker's last pushes (say, a recount that must see
    // all a dead worker will ever have applied). The scheduler's notice is on its way.
    if (after_death_.size() < kMaxEarly) after_death_.push_back(std::move(msg));
    return;
  }
  if (chain_.Awaiting(msg)) {
    // This server masters the keys since the cut-over, but the old master's last updates to
    // them have not all arrived: served once they have (bounded like early_ below).
    if (early_.size() < kMaxEarly) early_.push_back(std::move(msg));
    return;
  }
  if (msg.meta.epoch() > cur_epoch_ && cur_epoch_ > 0 && !Owns(msg, *ring_())) {
    // The worker has a newer ring than this server: the keys may be this server's under it,
    // but it must learn that ring (and stop taking copies from the server that left) before
    // it acts as their master. The node delivers the ring within the heartbeat timeout.
    // Bounded: beyond kMaxEarly the request is dropped like a lost message; the worker resends
    // it.
    if (early_.size() >= kMaxEarly) return;
    early_.push_back(std::move(msg));
    return;
  }
  if (RedirectIfMoved(msg, &reply)) return;
  if (msg.meta.op() == pb::Meta::CLOCK) {
    gate.Report(worker, done, &released);
    Answer(msg, &reply, "");
    AnswerReleased(released);
    return;
  }
  if (msg.meta.op() == pb::Meta::TASK_CLOSE) {
    if (!ValidTask(msg.meta)) {
      Answer(msg, &reply, "task close without a task in [0, 2^30)");
      return;
    }
    // Every push of the task is applied: one word remains of it, and a late copy (from a worker
    // that died, say) falls below it and is taken as applied.
    log.Advance(kTaskIds + msg.meta.task(), INT64_MAX);
    Answer(msg, &reply, "");
    return;
  }
  const bool push = msg.meta.push(), pull = msg.meta.pull();
  if (!push && !pull) {
    Answer(msg, &reply, "neither push nor pull");
    return;
  }
  // Who the push belongs to for exactly-once: the worker, or the data task it was pushed for
  // (PushForTask: one request stream whoever sends it). From here the message carries the
  // task's numbering; the reply was made with the worker's.
  const int owner = Owner(msg.meta);
  if (msg.meta.has_task()) {
    if (pull || !ValidTask(msg.meta) || msg.meta.task_ts() < 0) {
      Answer(msg, &reply, "a push for a task needs a task in [0, 2^30) and no pull");
      return;
    }
    msg.meta.set_timestamp(msg.meta.task_ts());
    msg.meta.set_lwm(msg.meta.task_lwm());
  }
  const ReadId id{msg.meta.timestamp(), msg.meta.part(), msg.meta.attempt()};
  log.Advance(owner, msg.meta.lwm());
  if (pull && held_ids[worker].count(id)) return;  // a copy of a held read: one answer will do
  // Which of the push is new: a copy (resend, duplicated message, re-sliced resend) is
  // answered again but applied only where it was not applied before.
  std::vector<Message> pieces;
  const bool fresh_all = push ? FreshPart(owner, msg, &pieces) : false;
  const bool apply = push && (fresh_all || !pieces.empty());
  // Keys of a copy that no copy of this master's still on its way covers (see below).
  Message uncovered;
  if (push && !fresh_all) {
    duplicates_++;
    // Replicas apply only what they lack of what no copy on its way covers.
    uncovered = chain_.Resend(owner, msg);
  }
  // The read's step reaches the table first; reads it releases are answered at the end, after
  // this request's push half is applied.
  const uint64_t h = next_handle;
  const bool pass = !pull || gate.Read(worker, step, done, h, &released);
  const int64_t clock = gate.Clock(worker);
  std::string err;
  if (fresh_all) {
    err = Handle(msg, &reply, true, pull && pass);
  } else {
    for (auto& piece : pieces) {
      Message scratch;
      err = Handle(piece, &scratch, true, false);
      if (!err.empty()) break;
    }
    // A read the barrier holds is still validated now (pass false: nothing is read), so a
    // malformed one is refused at once rather than when it is released.
    if (err.empty() && pull) err = Handle(msg, &reply, false, pass);
  }
  if (push && err.empty()) {
    auto ring = ring_ ? ring_() : nullptr;
    const bool copies = ring && chain_.Active(*ring);
    if (fresh_all) {
      Record(owner, msg);
      // A push alone has its reply final here: the chain's tail may send it.
      if (copies) chain_.Replicate(owner, msg, *ring, true, pull ? nullptr : &reply);
    } else {
      // The new parts are replicated as usual; of the rest, what no copy on its way covers.
      for (const auto& piece : pieces) {
        Record(owner, piece);
        if (copies) chain_.Replicate(owner, piece, *ring, /*may_add=*/false);
      }
      if (copies && !uncovered.data.empty()) chain_.Probe(owner, uncovered, *ring);
    }
    if (apply && msg.meta.has_read_clock()) staleness[clock - msg.meta.read_clock()]++;
  }
  if (push && err.empty()) gate.Report(worker, done, &released);
  if (pull && !pass) {
    next_handle++;
    if (err.empty()) {
      // The push half is applied already, so a later Clock() of this worker never overtakes
      // its own update.
      held_ids[worker].insert(id);
      held.emplace(h, HeldRead{std::move(msg), now_us()});
      AnswerReleased(released);
      return;
    }
    // A rejected request is answered at once; the gate's entry for it is released later to
    // no one.
  }
  if (pull) {
    reply.meta.set_server_clock(clock);
    if (err.empty()) read_lag[std::max<int64_t>(0, step - clock)]++;
  }
  Answer(msg, &reply, err);
  AnswerReleased(released);
}

bool ServerCore::FreshPart(int worker, const Message& m, std::vector<Message>* pieces,
                           bool use_mark) const {
  const int64_t ts = m.meta.timestamp();
  if (use_mark && log.Below(worker, ts)) return false;
  if (m.meta.op() == pb::Meta::DENSE_PUSH) {
    const Range r(m.meta.range_begin(), m.meta.range_end());
    if (r.begin >= r.end || m.data.size() != 1) return true;  // malformed: Handle rejects it
    auto fresh = log.FreshRanges(worker, ts, r);
    if (fresh.size() == 1 && fresh[0].begin == r.begin && fresh[0].end == r.end) return true;
    const size_t row = m.data[0].size() / r.size();
    for (const Range& f : fresh) {
      Message piece;
      piece.meta = m.meta;
      piece.meta.set_pull(false);
      piece.meta.set_range_begin(f.begin);
      piece.meta.set_range_end(f.end);
      piece.data = {m.data[0].Segment((f.begin - r.begin) * row, (f.end - r.begin) * row)};
      pieces->push_back(std::move(piece));
    }
    return false;
  }
  if (m.meta.op() != pb::Meta::DATA || m.data.empty() || m.data[0].size() % sizeof(Key)) {
    return true;  // Handle validates (and rejects) it
  }
  const SArray<Key> keys(m.data[0]);
  if (m.meta.val_total() > 0) {
    return keys.size() != 1 || !log.HasValuePart(worker, ts, keys[0], m.meta.val_offset());
  }
  std::vector<bool>& seen = seen_scratch_;
  const size_t hits = log.CheckKeys(worker, ts, keys.data(), keys.size(), &seen);
  if (hits == 0) return true;
  if (hits == keys.size()) return false;
  // Some keys were applied before (a resend re-sliced under a new ring): apply the others.
  std::vector<bool> fresh(seen.size());
  for (size_t i = 0; i < seen.size(); ++i) fresh[i] = !seen[i];
  Message piece = KeySubset(m, fresh, esize);
  if (piece.data.empty()) return true;  // frames do not agree: Handle rejects it
  pieces->push_back(std::move(piece));
  return false;
}

void ServerCore::Record(int worker, const Message& m) {
  const int64_t ts = m.meta.timestamp();
  if (m.meta.op() == pb::Meta::DENSE_PUSH) {
    log.RecordRange(worker, ts, Range(m.meta.range_begin(), m.meta.range_end()));
    return;
  }
  SArray<Key> keys(m.data[0]);
  if (m.meta.val_total() > 0) {
    log.RecordValuePart(worker, ts, keys[0], m.meta.val_offset());
  } else {
    log.RecordKeys(worker, ts, keys);
  }
}

bool ServerCore::RedirectIfMoved(const Message& msg, Message* reply) {
  // Routed under an older ring: served only if the keys are still mastered here (fencing,
  // DESIGN §8). Otherwise the worker re-plans under the ring it is about to receive.
  if (msg.meta.epoch() >= cur_epoch_) return false;
  auto ring = ring_();
  if (Owns(msg, *ring)) return false;
  reply->meta.set_redirect(true);
  reply->meta.set_epoch(ring->epoch());
  reply->meta.set_error("redirect: server " + std::to_string(self_) +
                        " does not master these keys under ring epoch " +
                        std::to_string(ring->epoch()));
  send(*reply);
  return true;
}

void ServerCore::AnswerReleased(const std::vector<uint64_t>& released) {
  for (uint64_t h : released) {
    auto it = held.find(h);
    if (it == held.end()) continue;
    HeldRead r = std::move(it->second);
    held.erase(it);
    held_ids[r.req.meta.sender()].erase(
        {r.req.meta.timestamp(), r.req.meta.part(), r.req.meta.attempt()});
    Message reply = ReplyTo(r.req);
    // The ring may have changed while the read waited at the barrier. Keys this server no
    // longer masters are not read here (it dropped them, or holds a copy that stopped
    // growing): the worker re-plans on the redirect, as for a read arriving now (seed 134 of
    // `ps_sim --cluster --timeout-s 5 --heartbeat-s 0.5 --pause-max-s 4.5 --worker-cut-every-s
    // 0.5 --join-every-s 1`: a read held since epoch 6 was answered with zeros after epoch
    // 21 moved its key away). Keys mastered again since, whose old master's last updates are
    // still on their way, wait for them as a new read would.
    if (RedirectIfMoved(r.req, &reply)) continue;
    if (chain_.Awaiting(r.req)) {
      if (early_.size() < kMaxEarly) early_.push_back(std::move(r.req));
      continue;
    }
    std::string err = Handle(r.req, &reply, false, true);
    const int64_t clock = gate.Clock(r.req.meta.sender());
    reply.meta.set_server_clock(clock);
    if (err.empty()) read_lag[std::max<int64_t>(0, r.req.meta.step() - clock)]++;
    reply.meta.set_held_us(static_cast<uint64_t>(std::max<int64_t>(0, now_us() - r.since)));
    Answer(r.req, &reply, err);
  }
}

bool ServerCore::Bury(int id, bool worker) {
  if (!tombstones_.insert(id).second) return false;
  if (!worker) return true;
  dead_workers_++;
  std::vector<Message> waiting;
  waiting.swap(after_death_);
  for (auto& m : waiting) ProcessLocked(m);
  return true;
}

void ServerCore::WorkerDead(int id, bool worker) {
  std::vector<uint64_t> released;
  std::lock_guard<std::mutex> lk(mu);
  for (auto it = held.begin(); it != held.end();) {
    it = it->second.req.meta.sender() == id ? held.erase(it) : std::next(it);
  }
  gate.RemoveWorker(id, &released);
  held_ids.erase(id);
  Bury(id, worker);
  if (!worker) {
    chain_.DropGone();  // a joiner of the prepared ring, say
    // Its refill requests that wait here: nobody is left to take the answer (kept until the
    // end of the job, and logged every 5 s as holding a cut-over back: ps_sim --cluster
    // --seed 3107 --partition-every-s 0.5 --partition-max-s 3 --kill-worker-every-s 3).
    waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(),
                                  [id](const Message& m) { return m.meta.sender() == id; }),
                   waiting_.end());
    if (waiting_.empty()) waiting_since_us_ = 0;
  }
  AnswerReleased(released);
}

void ServerCore::Tombstone(int id, bool worker) {
  std::lock_guard<std::mutex> lk(mu);
  Bury(id, worker);
}

void ServerCore::WorkerJoined(int id) {
  std::lock_guard<std::mutex> lk(mu);
  gate.AddWorker(id);
}

void ServerCore::SetPolicy(std::shared_ptr<const BarrierPolicy> policy, int group) {
  std::vector<uint64_t> released;
  std::lock_guard<std::mutex> lk(mu);
  gate.SetPolicy(std::move(policy), &released, group);
  AnswerReleased(released);
}

void ServerCore::SetWorkerGroup(int worker, int group) {
  std::lock_guard<std::mutex> lk(mu);
  gate.SetGroup(worker, group);
}

void ServerCore::Answer(const Message& msg, Message* reply, const std::string& handled) {
  std::string err = handled;
  if (!err.empty()) {
    rejected_++;
    reply->data.clear();
    reply->meta.set_error(err);
    VLOG(1) << "rejected " << msg.DebugString() << ": " << err;
  } else {
    // A push is acknowledged only once every replica holds it (a copy of it, too).
    if (chain_.HoldReply(Owner(msg.meta), msg.meta.timestamp(), reply)) return;
  }
  send(*reply);
}

void ServerCore::RingChanged(std::shared_ptr<const Ring> ring) {
  std::lock_guard<std::mutex> lk(mu);
  // A hand-over that completes while the chain replicator takes the ring in (a report that came
  // before it) must not serve the requests it held yet: this core still has the old ring's
  // epoch and ranges, so a request routed under the old ring would pass as current and be
  // applied by a server that no longer masters its keys (ps_sim --cluster --policy bsp
  // --join-every-s 1, seed 135). They are served below, under the new ring.
  taking_ring_ = true;
  chain_.RingChanged(ring, /*prepared=*/next_ && next_->epoch() == ring->epoch());
  Plan();
  chain_.AfterRing();
  taking_ring_ = false;
  // Requests that arrived before this ring: serve them now.
  HandedOver();
}

void ServerCore::HandedOver() {
  if (taking_ring_) return;  // RingChanged serves them once this core follows the ring
  std::vector<Message> early;
  early.swap(early_);
  for (auto& m : early) ProcessLocked(m);
  ServeWaiting();
}

std::string ServerCore::Handle(const Message& req, Message* reply, bool do_push, bool do_pull) {
  try {
    return Run(req, reply, do_push, do_pull);
  } catch (const std::exception& e) {
    // A request can still ask for more than this process can give (memory); refuse it, never
    // die of it.
    return std::string("request failed: ") + e.what();
  }
}

std::string ServerCore::Run(const Message& req, Message* reply, bool do_push, bool do_pull) {
  const auto& m = req.meta;
  if (m.dtype() != static_cast<int>(dtype)) return "value type differs from the server's";
  if (!m.push() && !m.pull()) return "neither push nor pull";
  if (m.op() == pb::Meta::RANGE_PULL) {
    // Frame 0: (begin, end) pairs. Reply: keys, values, lengths of all ranges in order, and
    // the number of keys of each range.
    if (req.data.size() != 1 || req.data[0].empty() || req.data[0].size() % (2 * sizeof(Key))) {
      return "malformed range pull";
    }
    if (!do_pull) return "";
    SArray<Key> ranges(req.data[0]);
    const size_t nr = ranges.size() / 2;
    std::vector<Range> rs(nr);
    for (size_t i = 0; i < nr; ++i) {
      if (ranges[2 * i + 1] <= ranges[2 * i]) return "empty range";
      rs[i] = Range(ranges[2 * i], ranges[2 * i + 1]);
      if (i > 0 && rs[i].begin < rs[i - 1].end) return "ranges out of order";
    }
    if (m.reducer() != 0) {
      // A reduction (KVWorker::Reduce): one frame, the reducer's doubles over all ranges.
      std::vector<double> acc;
      for (const Range& r : rs) {
        std::string err = store->Reduce(m.reducer(), r, m.step(), &acc);
        if (!err.empty()) return err;
      }
      reply->data = {SArray<char>(SArray<double>(acc))};
      return "";
    }
    SArray<Key> keys;
    SArray<char> vals;
    SArray<int> lens;
    SArray<uint64_t> counts(nr);
    store->PullRanges(rs.data(), nr, &keys, &vals, &lens, counts.data(), m.step());
    reply->data = {SArray<char>(keys), vals, SArray<char>(lens), SArray<char>(counts)};
    return "";
  }
  if (m.op() == pb::Meta::DENSE_PUSH) {
    uint64_t n = m.range_end() > m.range_begin() ? m.range_end() - m.range_begin() : 0;
    if (n == 0 || req.data.size() != 1 || m.width() <= 0) return "malformed dense push";
    if (req.data[0].size() != n * m.width() * esize) return "dense push size mismatch";
    if (n > (1u << 28)) return "dense range too large";
    if (!do_push) return "";
    SArray<Key> keys(n);
    for (uint64_t i = 0; i < n; ++i) keys[i] = m.range_begin() + i;
    return store->Push(keys.data(), n, req.data[0].data(), n * m.width(), nullptr);
  }
  // Explicit keys: frames are keys, then (push) values, then (push with lens) lens.
  const size_t want_frames = m.push() ? (m.has_lens() ? 3 : 2) : 1;
  if (req.data.size() != want_frames) return "wrong number of frames";
  const SArray<char>& kf = req.data[0];
  if (kf.size() % sizeof(Key)) return "keys frame size";
  const size_t n = kf.size() / sizeof(Key);
  const Key* keys = reinterpret_cast<const Key*>(kf.data());
  const bool part = m.val_total() > 0;
  // The store checks the order of the keys in the walk that finds their slots (one read of
  // the key frame, not two); a request that reaches no store call is checked here.
  const bool stored = (m.push() && do_push) || (m.pull() && do_pull && !part);
  if (!stored && !SortedUnique(keys, n)) return kUnsortedKeys;
  if (m.width() > 0 && n * static_cast<uint64_t>(m.width()) > (1ull << 30)) {
    return "request too large";
  }
  if (part && n != 1) return "a value part carries one key";
  if (m.push() && do_push) {
    const SArray<char>& vf = req.data[1];
    if (vf.size() % esize) return "values frame size";
    const size_t nvals = vf.size() / esize;
    std::string err;
    if (part) {
      if (nvals != m.val_count()) return "value part size";
      err = store->PushPart(keys[0], m.val_offset(), m.val_total(), vf.data(), nvals);
    } else if (m.has_lens()) {
      const SArray<char>& lf = req.data[2];
      if (lf.size() != n * sizeof(int)) return "lens frame size";
      const int* lens = reinterpret_cast<const int*>(lf.data());
      uint64_t sum = 0;
      for (size_t i = 0; i < n; ++i) {
        if (lens[i] < 0) return "negative length";
        sum += lens[i];
      }
      if (sum != nvals) return "lens do not add up to the values";
      err = store->Push(keys, n, vf.data(), nvals, lens);
    } else {
      if (n == 0 ? nvals != 0 : nvals % n != 0) return "values not a multiple of keys";
      err = store->Push(keys, n, vf.data(), nvals, nullptr);
    }
    if (!err.empty()) return err;
  }
  if (m.pull() && do_pull) {
    SArray<char> vals;
    SArray<int> lens;
    std::string err;
    if (part) {
      if (m.val_count() > (64u << 20)) return "value part too large";
      err = store->PullPart(keys[0], m.val_offset(), m.val_count(), m.val_total(), &vals, m.step());
      reply->data = {vals};
    } else {
      err = store->Pull(keys, n, m.width(), &vals, &lens, m.step());
      reply->data = {vals};
      if (m.width() == 0) reply->data.push_back(SArray<char>(lens));
      if (m.has_significant() && m.width() > 0 &&
          (dtype == DataType::kFloat || dtype == DataType::kDouble)) {
        reply->meta.set_significant(m.significant());
        reply->reply_keys = kf;
      }
    }
    return err;
  }
  return "";
}

}  // namespace ps
