#include <glog/logging.h>

#include <chrono>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "kv/worker_impl.h"
#include "util/sorted_keys.h"

namespace ps {
namespace {

// Values of one message are bounded so that large values stream in pieces: the receiver
// never needs one huge allocation and sender and receiver overlap.
constexpr uint64_t kMaxPartBytes = 1 << 20;

SArray<char> Gather(const SArray<char>& src, const std::vector<std::pair<size_t, size_t>>& runs,
                    size_t unit, const std::vector<uint64_t>* prefix) {
  auto begin = [&](size_t i) { return prefix ? (*prefix)[i] * unit : i * unit; };
  if (runs.size() == 1) return src.Segment(begin(runs[0].first), begin(runs[0].second));
  size_t total = 0;
  for (auto r : runs) total += begin(r.second) - begin(r.first);
  auto out = SArray<char>::Uninitialized(total);
  size_t at = 0;
  for (auto r : runs) {
    size_t b = begin(r.first), e = begin(r.second);
    std::memcpy(out.data() + at, src.data() + b, e - b);
    at += e - b;
  }
  return out;
}

}  // namespace

int KVWorkerBase::OpenTable(Node* node, const std::string& table, DataType dtype) {
  const TableSpec t = node->Table(table);
  if (t.dtype != dtype) {
    static const char* const kNames[] = {"float", "double", "int32", "int64"};
    throw Error("table " + table + " holds " + kNames[static_cast<int>(t.dtype) & 3] +
                " values; this KVWorker's are " + kNames[static_cast<int>(dtype) & 3]);
  }
  return t.app_id;
}

KVWorkerBase::KVWorkerBase(Node* node, int app_id, DataType dtype)
    : impl_(node->role() == Role::kWorker ? new Impl(node, app_id, dtype) : nullptr) {
  if (!impl_) throw Error("KVWorker needs a worker node");
  node->impl()->AddCustomer(app_id, impl_.get());
  impl_->resender = std::thread([d = impl_.get()] { d->ResendLoop(); });
}

KVWorkerBase::~KVWorkerBase() {
  {
    // Pushes and clocks still open go out and are answered first (a clock is held until its
    // step's pushes are acknowledged): dropped here, the other workers' reads under a barrier
    // policy would wait for this worker's step until its node is declared dead. Pulls are not
    // waited for: whoever issued them no longer wants them.
    auto* d = impl_.get();
    std::unique_lock<std::mutex> lk(d->mu);
    auto writes_open = [d] {
      for (const auto& p : d->pending) {
        const auto op = p.second->req.op;
        if (p.second->req.push || op == detail::KVRequest::kClock ||
            op == detail::KVRequest::kTaskClose) {
          return true;
        }
      }
      return false;
    };
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(d->rt->cfg.request_timeout_ms);
    while (writes_open()) {
      if (d->cv.wait_until(lk, deadline) == std::cv_status::timeout && writes_open()) {
        LOG(WARNING) << "app " << d->app << ": a worker goes with pushes or clocks unanswered "
                     << "after " << d->rt->cfg.request_timeout_ms << " ms (PS_REQUEST_TIMEOUT_MS)";
        break;
      }
    }
  }
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stopping = true;
    impl_->resend_cv.notify_all();
  }
  impl_->resender.join();
  impl_->rt->RemoveCustomer(impl_->app);
}

uint64_t KVWorkerBase::Resends() const { return impl_->resends; }

int64_t KVWorkerBase::Submit(detail::KVRequest req) { return impl_->Submit(std::move(req)); }

std::vector<Message> KVWorkerBase::Impl::Plan(Pending* p, const detail::KVRequest& req,
                                              const Ring* ring, int64_t step_now,
                                              int64_t read_now) {
  const size_t n = req.keys.size();
  std::vector<Message> msgs;
  const uint32_t dead_workers = rt->dead_workers();
  auto base_meta = [&](int server, size_t part) {
    Message m;
    m.meta.set_receiver(server);
    m.meta.set_app_id(app);
    m.meta.set_request(true);
    m.meta.set_push(req.push);
    m.meta.set_pull(req.pull);
    m.meta.set_dtype(static_cast<int>(dtype));
    m.meta.set_epoch(ring->epoch());
    m.meta.set_part(static_cast<int>(part));
    m.meta.set_dead_workers(dead_workers);
    if (Tasked(req)) {
      m.meta.set_task(req.task);
      m.meta.set_task_ts(req.task_seq);
    }
    return m;
  };

  if (req.op == detail::KVRequest::kClock || req.op == detail::KVRequest::kTaskClose) {
    for (int server : ring->servers()) {
      Message m = base_meta(server, msgs.size());
      if (req.op == detail::KVRequest::kClock) {
        m.meta.set_op(pb::Meta::CLOCK);
      } else {
        m.meta.set_op(pb::Meta::TASK_CLOSE);
        m.meta.set_task(req.task);
      }
      msgs.push_back(std::move(m));
    }
  } else if (req.op == detail::KVRequest::kData) {
    // Strictly increasing keys are below kMaxKey if the last is.
    if (!SortedUnique(req.keys.data(), n) || (n > 0 && req.keys[n - 1] == kMaxKey)) {
      for (size_t i = 0; i < n; ++i) {
        if (req.keys[i] == kMaxKey || (i && req.keys[i] <= req.keys[i - 1])) {
          throw Error("keys must be sorted, unique and below kMaxKey (key index " +
                      std::to_string(i) + ")");
        }
      }
    }
    const size_t nvals = req.vals.size() / esize;
    int width = 0;
    if (!req.lens.empty()) {
      if (req.lens.size() != n) throw Error("lens.size() must equal keys.size()");
      p->prefix.resize(n + 1, 0);
      for (size_t i = 0; i < n; ++i) {
        if (req.lens[i] < 0) throw Error("lens must not be negative");
        p->prefix[i + 1] = p->prefix[i] + req.lens[i];
      }
      if (req.push && p->prefix[n] != nvals) {
        throw Error("the sum of lens must equal vals.size()");
      }
    } else if (req.push) {
      if (n == 0 ? nvals != 0 : nvals % n != 0) {
        throw Error("vals.size() must be a multiple of keys.size()");
      }
      width = n ? static_cast<int>(nvals / n) : 0;
    } else {
      width = req.pull_width;
    }
    const bool known = !p->prefix.empty() || width > 0;
    // Bounded parts need every key's value count up front. A variable-length pull learns the
    // counts from the replies, so such a request (PushPull with lens) goes whole.
    const bool bounded = known && !(req.pull && !p->prefix.empty());
    const uint64_t max_vals = bounded ? kMaxPartBytes / esize : 0;
    if (!p->prefix.empty()) {
      const auto& pre = p->prefix;
      PlanParts(
          *ring, req.keys.data(), n, [&pre](size_t i) { return pre[i]; }, max_vals, &p->parts);
    } else {
      const uint64_t w = width;
      PlanParts(
          *ring, req.keys.data(), n, [w](size_t i) { return i * w; }, max_vals, &p->parts);
    }
    SArray<char> key_bytes(req.keys);
    const std::vector<uint64_t>* pre = p->prefix.empty() ? nullptr : &p->prefix;
    for (size_t k = 0; k < p->parts.size(); ++k) {
      const RequestPart& part = p->parts[k];
      Message m = base_meta(part.server, k);
      m.data.reserve(req.push ? (pre ? 3 : 2) : 1);
      m.meta.set_op(pb::Meta::DATA);
      m.meta.set_width(pre ? 0 : width);
      m.data.push_back(Gather(key_bytes, part.runs, sizeof(Key), nullptr));
      if (part.value_part) {
        m.meta.set_val_offset(part.val_offset);
        m.meta.set_val_total(part.val_total);
        m.meta.set_val_count(part.val_count);
      }
      if (req.push) {
        if (part.value_part) {
          size_t b =
              ((pre ? (*pre)[part.runs[0].first] : part.runs[0].first * width) + part.val_offset) *
              esize;
          m.data.push_back(req.vals.Segment(b, b + part.val_count * esize));
        } else {
          m.data.push_back(Gather(req.vals, part.runs, pre ? esize : width * esize, pre));
        }
        if (pre && !part.value_part) {
          m.meta.set_has_lens(true);
          m.data.push_back(Gather(SArray<char>(req.lens), part.runs, sizeof(int), nullptr));
        }
      } else if (pre && !part.value_part) {
        // A pull with lens (PushPull only reaches here with push set): ask for lengths.
        m.meta.set_width(0);
      }
      msgs.push_back(std::move(m));
    }
  } else {
    if (req.range.size() == 0) throw Error("empty key range");
    if (req.range.end == kMaxKey && req.range.begin == kMaxKey) throw Error("bad key range");
    if (req.ranges.empty()) {
      ring->SliceRange(req.range, &p->segs);
    } else {
      // Several ranges: their segments one after another, still in key order.
      p->segs.clear();
      std::vector<RingSegment> part;
      for (const Range& r : req.ranges) {
        ring->SliceRange(r, &part);
        p->segs.insert(p->segs.end(), part.begin(), part.end());
      }
    }
    uint64_t w = 0;
    if (req.op == detail::KVRequest::kDensePush) {
      uint64_t nvals = req.vals.size() / esize;
      if (nvals % req.range.size() != 0) {
        throw Error("vals.size() must be a multiple of the range size");
      }
      w = nvals / req.range.size();
    }
    if (req.op == detail::KVRequest::kRangePull) {
      // One message per server listing all its ranges (a range crossing the whole ring with
      // 8 servers x 128 virtual nodes touches about 1000 segments).
      std::vector<int> servers;
      std::vector<std::vector<size_t>> of;
      for (size_t k = 0; k < p->segs.size(); ++k) {
        size_t g = std::find(servers.begin(), servers.end(), p->segs[k].server) - servers.begin();
        if (g == servers.size()) {
          servers.push_back(p->segs[k].server);
          of.emplace_back();
        }
        of[g].push_back(k);
        p->seg_part.push_back(g);
      }
      for (size_t g = 0; g < servers.size(); ++g) {
        Message m = base_meta(servers[g], g);
        m.meta.set_op(pb::Meta::RANGE_PULL);
        if (req.reducer) m.meta.set_reducer(req.reducer);
        SArray<Key> ranges(2 * of[g].size());
        for (size_t j = 0; j < of[g].size(); ++j) {
          ranges[2 * j] = p->segs[of[g][j]].range.begin;
          ranges[2 * j + 1] = p->segs[of[g][j]].range.end;
        }
        m.data.push_back(SArray<char>(ranges));
        msgs.push_back(std::move(m));
      }
    } else {
      // Per segment, in pieces of at most kMaxPartBytes of values (at least one key).
      const uint64_t step = std::max<uint64_t>(1, kMaxPartBytes / (w * esize));
      for (const RingSegment& s : p->segs) {
        for (Key b = s.range.begin; b < s.range.end; b += std::min(step, s.range.end - b)) {
          const Key e = b + std::min(step, s.range.end - b);
          Message m = base_meta(s.server, msgs.size());
          m.meta.set_op(pb::Meta::DENSE_PUSH);
          m.meta.set_range_begin(b);
          m.meta.set_range_end(e);
          size_t at = (b - req.range.begin) * w * esize;
          m.data.push_back(req.vals.Segment(at, at + (e - b) * w * esize));
          m.meta.set_width(static_cast<int>(w));
          msgs.push_back(std::move(m));
        }
      }
    }
  }

  p->step = step_now;
  for (auto& m : msgs) {
    p->part_server.push_back(m.meta.receiver());
    // A clock message reports the step being completed; the others, the step in progress.
    m.meta.set_step(req.op == detail::KVRequest::kClock ? step_now + 1 : step_now);
    if (req.push && read_now >= 0) m.meta.set_read_clock(read_now);
    MarkFilters(&m);
  }
  return msgs;
}

void KVWorkerBase::Impl::Pending::Recycle() {
  Pending fresh;
  // Containers come along emptied, keeping their storage; everything else starts over.
  auto keep = [](auto& from, auto& to) {
    from.clear();
    to.swap(from);
  };
  keep(parts, fresh.parts);
  keep(segs, fresh.segs);
  keep(seg_part, fresh.seg_part);
  keep(part_server, fresh.part_server);
  keep(prefix, fresh.prefix);
  keep(replies, fresh.replies);
  keep(got, fresh.got);
  keep(sent_at, fresh.sent_at);
  keep(tries, fresh.tries);
  // The sent messages stay (their frame lists keep their storage for the next copy) but let go
  // of the caller's arrays at once.
  for (auto& m : sent) {
    m.data.clear();
    m.reply_keys.clear();
  }
  fresh.sent.swap(sent);
  *this = std::move(fresh);
}

int64_t KVWorkerBase::Impl::Submit(detail::KVRequest req, bool report) {
  std::unique_ptr<Pending> p;
  auto ring = rt->ring();
  if (!ring || ring->segments().empty()) {
    throw Error(ErrorCode::kShutDown, "KVWorker used before Node::Start");
  }
  int64_t step_now, read_now;
  {
    const std::string node_fatal = rt->fatal();
    if (!node_fatal.empty()) throw Error(rt->fatal_code(), node_fatal);
    std::lock_guard<std::mutex> lk(mu);
    if (!fatal.empty()) throw Error(fatal_code, fatal);
    step_now = report ? steps.ReportStep() : steps.step();
    read_now = read_clock;
    if (ring_servers.empty()) ring_servers = ring->servers();  // the first ring this worker used
    if (!spare.empty()) {
      p = std::move(spare.back());
      spare.pop_back();
    }
  }
  if (!p) p = std::make_unique<Pending>();
  p->issued = std::chrono::steady_clock::now();
  std::vector<Message> msgs = Plan(p.get(), req, ring.get(), step_now, read_now);
  const size_t nparts = msgs.size();
  p->replies.resize(nparts);
  p->got.assign(nparts, false);
  p->req = std::move(req);
  int64_t ts;
  {
    std::unique_lock<std::mutex> lk(mu);
    // Back-pressure: at most max_inflight requests in flight. Not on the thread that handles
    // replies (a callback issuing a request there would wait for itself).
    if (pending.size() >= static_cast<size_t>(rt->cfg.max_inflight) && !rt->InDispatch() &&
        !report) {
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(rt->cfg.request_timeout_ms);
      while (pending.size() >= static_cast<size_t>(rt->cfg.max_inflight) && fatal.empty()) {
        if (cv.wait_until(lk, deadline) == std::cv_status::timeout &&
            pending.size() >= static_cast<size_t>(rt->cfg.max_inflight)) {
          if (spare.size() < kMaxSpare) spare.push_back(std::move(p));
          throw Error(ErrorCode::kTimeout, "no request of the " + std::to_string(pending.size()) +
                                               " in flight (PS_MAX_INFLIGHT) completed within " +
                                               std::to_string(rt->cfg.request_timeout_ms) +
                                               " ms (PS_REQUEST_TIMEOUT_MS)");
        }
      }
      if (!fatal.empty()) throw Error(fatal_code, fatal);
    }
    ts = next_ts++;
    p->ts = ts;
    delay.Issued(ts, step_now);
    if (p->req.push) steps.PushIssued(p->step);
    if (nparts == 0) {
      Pending* raw = p.get();
      pending[ts] = std::move(p);
      open_ts.insert(ts);
      // Nothing to send (no keys): complete at once.
      Finish(raw);
      msgs = TakeDue();
      lk.unlock();
      for (auto& m : msgs) rt->Send(m);
      return ts;
    }
    open_ts.insert(ts);
    if (Tasked(p->req)) task_open[p->req.task].insert(p->req.task_seq);
    const int64_t lwm = *open_ts.begin();
    const int64_t safe = DoneStep(*p);
    for (auto& m : msgs) {
      m.meta.set_timestamp(ts);
      m.meta.set_lwm(lwm);
      m.meta.set_done_step(safe);
      if (Tasked(p->req)) m.meta.set_task_lwm(TaskLwm(p->req));
    }
    // A clock that ends a step with pushes still open waits for them (and for every clock
    // before it): the servers must not count the step as done before they hold its pushes.
    if (p->req.op == detail::KVRequest::kClock) p->held = steps.HoldClock(ts, p->step);
    // Kept for resending until each part is answered.
    p->sent = msgs;
    p->sent_at.assign(nparts, p->held ? std::chrono::steady_clock::time_point::max()
                                      : std::chrono::steady_clock::now());
    p->tries.assign(nparts, 0);
    p->epoch = ring->epoch();
    Pending* raw = p.get();
    pending[ts] = std::move(p);
    if (raw->held) msgs.clear();
    // The ring may have changed since it was read above: then OnRing did not see this
    // request, so plan it under the new ring here.
    if (rt->ring_epoch() != raw->epoch) {
      msgs.clear();
      Replan(raw, *rt->ring(), &msgs);
    }
  }
  for (size_t k = 0; k < msgs.size(); ++k) {
    int server = msgs[k].meta.receiver();
    // A send that fails (the server just died, its connection is gone) is a lost message: the
    // resend timer tries again, a new ring re-plans it, and the request timeout names the
    // server if neither helps.
    if (!rt->Send(msgs[k])) VLOG(1) << "cannot send to server node " << server << " (yet)";
  }
  return ts;
}

void KVWorkerBase::Impl::Replan(Pending* p, const Ring& ring, std::vector<Message>* out) {
  const int64_t lwm = open_ts.empty() ? next_ts : *open_ts.begin();
  p->attempt++;
  p->redirected = false;
  p->parts.clear();
  p->segs.clear();
  p->seg_part.clear();
  p->part_server.clear();
  p->prefix.clear();
  p->out = SArray<char>();
  p->copy_error.clear();
  p->min_clock = INT64_MAX;
  p->max_held_us = 0;
  std::vector<Message> msgs = Plan(p, p->req, &ring, p->step, read_clock);
  p->replies.assign(msgs.size(), Message());
  p->got.assign(msgs.size(), false);
  p->received = 0;
  const int64_t safe = DoneStep(*p);
  for (auto& m : msgs) {
    m.meta.set_timestamp(p->ts);
    m.meta.set_lwm(lwm);
    m.meta.set_attempt(p->attempt);
    m.meta.set_done_step(safe);
    if (Tasked(p->req)) m.meta.set_task_lwm(TaskLwm(p->req));
  }
  p->sent = msgs;
  p->sent_at.assign(msgs.size(), p->held ? std::chrono::steady_clock::time_point::max()
                                         : std::chrono::steady_clock::now());
  p->tries.assign(msgs.size(), 0);
  p->epoch = ring.epoch();
  VLOG(1) << "request " << p->ts << " planned again under ring epoch " << ring.epoch();
  if (p->held) return;  // sent when its steps' pushes are acknowledged (ReleaseClocks)
  for (auto& m : msgs) out->push_back(m);
}

void KVWorkerBase::Impl::OnRing(std::shared_ptr<const Ring> ring) {
  std::vector<Message> out;
  bool report = false;
  {
    std::lock_guard<std::mutex> lk(mu);
    const auto& live = ring->servers();
    // A server that joined starts its step table at 0 and learns a worker's steps only from
    // what the worker sends it: a worker that has nothing more to send it (its last clock went
    // to the servers before) would hold every read there for ever (found by ps_sim --cluster,
    // seed 7374). Its steps go to every server as a clock does; servers keep the largest.
    report = !ring_servers.empty() && Gained(ring_servers, live) && steps.ReportStep() >= 0;
    ring_servers = live;
    for (auto& e : pending) {
      Pending* p = e.second.get();
      if (Stranded(p->part_server, p->got, live) || p->redirected) Replan(p, *ring, &out);
    }
  }
  for (auto& m : out) rt->Send(m);
  if (!report) return;
  detail::KVRequest r;
  r.op = detail::KVRequest::kClock;  // the last clock again, held like it
  try {
    Submit(std::move(r), /*report=*/true);
  } catch (const Error& e) {
    LOG(WARNING) << "cannot report this worker's steps to the servers that joined: " << e.what();
  }
}

void KVWorkerBase::Impl::Process(Message& msg) {
  if (msg.meta.request()) return;  // workers serve nothing
  std::unique_lock<std::mutex> lk(mu);
  if (msg.meta.significant_coded()) {
    std::vector<Message> resend;
    if (!DecodeSignificant(&msg, &resend)) {
      lk.unlock();
      for (auto& m : resend) rt->Send(m);
      return;
    }
  }
  auto it = pending.find(msg.meta.timestamp());
  if (it == pending.end()) return;
  Pending* p = it->second.get();
  size_t part = static_cast<size_t>(msg.meta.part());
  if (msg.meta.attempt() != p->attempt) return;  // a reply to an older plan
  if (part >= p->replies.size() || p->got[part]) return;
  if (!msg.meta.held_why().empty()) {
    p->held_why = msg.meta.held_why();
    LOG(WARNING) << "pull " << p->ts << " of app " << app << " at step " << p->step << ": "
                 << p->held_why;
    return;
  }
  if (msg.meta.key_miss()) {
    // The server does not hold the key list this part referred to: send the part again (the
    // node's filter chain forgot the list, so the keys travel in full).
    Message again = p->sent[part];
    p->sent_at[part] = std::chrono::steady_clock::now();
    lk.unlock();
    rt->Send(again);
    return;
  }
  if (msg.meta.redirect()) {
    // Routed under an older ring than the server's: plan again under the newer one, now if
    // this node has it, else when it arrives (OnRing).
    p->redirected = true;
    if (rt->ring_epoch() > p->epoch) {
      std::vector<Message> out;
      Replan(p, *rt->ring(), &out);
      lk.unlock();
      for (auto& m : out) rt->Send(m);
    }
    return;
  }
  p->got[part] = true;
  // A push's reply relayed by its chain's tail counts as its master's answer.
  const int server = msg.meta.master() > 0 ? msg.meta.master() : msg.meta.sender();
  // Time a barrier held the read is not the server's slowness.
  resend.Answered(
      server, p->tries[part] == 0,
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - p->sent_at[part])
              .count() -
          static_cast<double>(msg.meta.held_us()));
  if (!msg.meta.error().empty() && p->error.empty()) {
    p->error = "server node " + std::to_string(msg.meta.sender()) + ": " + msg.meta.error();
    p->error_code = ErrorCodeFromWire(msg.meta.error_code(), ErrorCode::kRejected);
  }
  if (msg.meta.pull() && msg.meta.error().empty()) {
    p->min_clock = std::min<int64_t>(p->min_clock, msg.meta.server_clock());
    p->max_held_us = std::max<uint64_t>(p->max_held_us, msg.meta.held_us());
  }
  if (p->streams() && p->error.empty()) {
    CopyPart(p, part, msg);  // copy now, so the receive buffer is freed (and reused) at once
  } else {
    p->replies[part] = std::move(msg);
  }
  if (++p->received == p->replies.size()) Finish(p);
  std::vector<Message> out = TakeDue();
  lk.unlock();
  for (auto& m : out) rt->Send(m);
}

// Called with mu held once every part has answered.
void KVWorkerBase::Impl::Finish(Pending* p) {
  if (p->error.empty() && p->req.pull) Assemble(p);
  const int64_t ts = p->ts;
  if (p->error.empty()) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - p->issued)
                        .count();
    (p->req.pull ? pull_latency : push_latency)
        .Add(static_cast<uint64_t>(std::max<int64_t>(0, us)));
  }
  delay.Completed(ts);
  if (p->req.push) {
    steps.PushDone(p->step);
    ReleaseClocks();
  }
  if (p->req.pull && p->min_clock != INT64_MAX) {
    read_clock = p->min_clock;
    barrier_wait_us += p->max_held_us;
    // A worker that joined a running job continues from the servers' current minimum step
    // (where their step tables entered it), learnt from its first pull.
    if (joiner && !adopted_step) {
      steps.Adopt(p->min_clock);
      adopted_step = true;
    }
  }
  auto cb = std::move(p->req.callback);
  if (Tasked(p->req)) {
    auto t = task_open.find(p->req.task);
    if (t != task_open.end()) {
      t->second.erase(p->req.task_seq);
      if (t->second.empty()) task_open.erase(t);
    }
  }
  if (!p->error.empty()) failed[ts] = {p->error, p->error_code};
  auto it = pending.find(ts);
  if (it != pending.end()) {
    if (spare.size() < kMaxSpare) {
      it->second->Recycle();
      spare.push_back(std::move(it->second));
    }
    pending.erase(it);
  }
  open_ts.erase(ts);
  // The callback runs before Wait returns; it must not call Wait itself.
  if (cb) {
    mu.unlock();
    cb();
    mu.lock();
  }
  cv.notify_all();
}

void KVWorkerBase::Wait(int64_t ts) {
  auto* d = impl_.get();
  int timeout_ms = d->rt->cfg.request_timeout_ms;
  const char* timeout_name = "PS_REQUEST_TIMEOUT_MS";
  {
    std::lock_guard<std::mutex> lk(d->mu);
    if (ts < d->rt->cfg.first_timestamp || ts >= d->next_ts) {
      throw Error("Wait(" + std::to_string(ts) + "): no such request on this worker");
    }
    // A pull past step 0 may be held by a barrier: it waits as long as a barrier does.
    auto it = d->pending.find(ts);
    if (it != d->pending.end() && it->second->req.pull && it->second->step > 0 &&
        d->rt->cfg.barrier_timeout_ms > timeout_ms) {
      timeout_ms = d->rt->cfg.barrier_timeout_ms;
      timeout_name = "PS_BARRIER_TIMEOUT_MS";
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  // Receive on this thread while waiting: the reply then wakes us directly. Only when this is
  // the one request in flight: with many in flight, the receive thread handling replies in
  // parallel with this thread's sending is worth more than the saved wake-up.
  auto alone = [d, ts] {
    std::lock_guard<std::mutex> lk(d->mu);
    return d->pending.count(ts) && d->pending.size() == 1;
  };
  if (alone() && d->rt->AcquireReceiver()) {
    while (alone() && std::chrono::steady_clock::now() < deadline) d->rt->PollOnce(100);
    d->rt->ReleaseReceiver();
  }
  std::unique_lock<std::mutex> lk(d->mu);
  while (d->pending.count(ts)) {
    if (d->cv.wait_until(lk, deadline) == std::cv_status::timeout && d->pending.count(ts)) {
      const auto& p = d->pending[ts];
      std::ostringstream os;
      os << "request " << ts << " of app " << d->app << " not answered within " << timeout_ms
         << " ms (" << timeout_name << "); waiting for server";
      for (size_t k = 0; k < p->got.size(); ++k) {
        if (!p->got[k]) {
          // How it was tried: a part resent often and never answered points at the replies
          // (or the server), one not resent at the resend timer.
          const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - p->sent_at[k])
                               .count();
          os << " node " << p->part_server[k] << " (part " << k << " sent "
             << 1 + static_cast<int>(p->tries[k]) << " time(s), the last " << ago << " ms ago)";
          break;
        }
      }
      if (!p->held_why.empty()) os << "; the pull was held by the barrier: " << p->held_why;
      throw Error(ErrorCode::kTimeout, os.str());
    }
  }
  auto f = d->failed.find(ts);
  if (f != d->failed.end()) {
    auto why = f->second;
    d->failed.erase(f);
    throw Error(why.second, "request " + std::to_string(ts) + " failed: " + why.first);
  }
}

bool KVWorkerBase::IsDone(int64_t ts) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return ts < impl_->next_ts && !impl_->pending.count(ts);
}

}  // namespace ps
