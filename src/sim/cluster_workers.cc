// ClusterSim's workers, modelled on KVWorker: they push, read under the barrier policy, end
// their steps with Clock() (held until the step's pushes are acknowledged, then sent to every
// server), resend what is not acknowledged, and plan again under each newer ring. A read's
// values are checked against the SSP read guarantee as they arrive.
#include <algorithm>

#include "ps/base.h"
#include "sim/cluster_state.h"

namespace ps {

void ClusterSim::State::WorkerControl(Worker& w, const Ctl& c) {
  if (c.msg.cmd() == pb::Control::ABORT) {  // it spoke after it was declared dead
    FenceWorker(w, "the scheduler declared it dead: " + c.msg.error());
    return;
  }
  std::shared_ptr<const Ring> r;
  if ((c.msg.cmd() == pb::Control::NODE_DEAD || c.msg.cmd() == pb::Control::RING) && c.ring &&
      c.ring->epoch() > w.view->epoch()) {
    r = c.ring;
  }
  if (!r) return;
  const std::vector<int> before = w.view->servers();
  w.view = r;
  // As KVWorker::OnRing: a request with a part not answered at a server that left, or one a
  // server redirected, is planned again at once (a new attempt); the rest stay as they are.
  const std::vector<int> live = r->servers();
  for (auto& q : w.inflight) {
    Request& x = q.second;
    std::vector<int> part_server;
    std::vector<bool> answered;
    for (const auto& p : x.parts) {
      part_server.push_back(p.second.msg.meta.receiver());
      answered.push_back(!x.open.count(p.first));
    }
    if (Stranded(part_server, answered, live) || x.redirected) Send(w, &x);
  }
  // Servers new to this worker's ring (joiners) never saw its clocks: it reports its progress
  // to every server as a clock does (KVWorker::OnRing), or a read held at a joiner waits for
  // a worker that has nothing more to send it (found by seed 7374).
  if (!Gained(before, live) || w.steps.ReportStep() < 0 || o.step_every_us == 0) return;
  Request report;
  report.op = Request::kClockOp;
  report.ts = w.next_ts++;
  report.step = w.steps.ReportStep();
  report.held = w.steps.HoldClock(report.ts, report.step);
  Request& in = w.inflight[report.ts] = std::move(report);
  Send(w, &in);
}

void ClusterSim::State::WorkerReply(Worker& w, const Message& m) {
  auto it = w.inflight.find(m.meta.timestamp());
  if (it == w.inflight.end() || m.meta.attempt() != it->second.attempt) return;
  Request& r = it->second;
  if (m.meta.redirect()) {
    // Routed under an older ring than the server's: planned again under the newer one, now if
    // the worker has it, else when it arrives (KVWorker::Process).
    res.redirects++;
    r.redirected = true;
    if (w.view->epoch() > r.epoch) Send(w, &r);
    return;
  }
  if (!m.meta.held_why().empty()) return;  // a notice that a read is still held, and why
  if (!m.meta.error().empty()) {
    if (m.meta.error_code() == static_cast<int>(ErrorCode::kFenced) && w.declared) {
      // Declared dead while cut from the scheduler: the servers refuse it, and it stops.
      FenceWorker(w, "server " + std::to_string(m.meta.sender()) + " refused it: fenced");
      return;
    }
    Fail("a request is never refused", "server " + std::to_string(m.meta.sender()) +
                                           " refused worker " + std::to_string(w.id) + ": " +
                                           m.meta.error());
    return;
  }
  if (!r.open.count(m.meta.part())) return;  // a duplicated reply
  if (w.timer) {
    // As KVWorker: a chain's tail relays its master's answer; time a barrier held a read is
    // not the server's slowness.
    const Request::Part& p = r.parts[m.meta.part()];
    w.timer->Answered(m.meta.master() > 0 ? m.meta.master() : m.meta.sender(), p.tries == 0,
                      static_cast<double>(now - p.sent_at) - static_cast<double>(m.meta.held_us()));
  }
  if (r.op == Request::kPullOp) {
    const auto& keys = r.part_keys[m.meta.part()];
    if (m.data.empty() || m.data[0].size() != keys.size() * sizeof(int64_t)) {
      Fail("a read returns every key it asked for",
           "server " + std::to_string(m.meta.sender()) + " answered worker " +
               std::to_string(w.id) + "'s read with " +
               std::to_string(m.data.empty() ? 0 : m.data[0].size()) + " bytes for " +
               std::to_string(keys.size()) + " keys (frames " + std::to_string(m.data.size()) +
               ", code " + std::to_string(m.meta.error_code()) + ", pull " +
               std::to_string(m.meta.pull()) + ", push " + std::to_string(m.meta.push()) + ", op " +
               std::to_string(m.meta.op()) + ")");
      return;
    }
    const SArray<int64_t> vals(m.data[0]);
    for (size_t i = 0; i < keys.size(); ++i) r.got[keys[i]] = vals[i];
  }
  r.open.erase(m.meta.part());
  if (!r.open.empty()) return;
  const Request finished = std::move(r);
  w.inflight.erase(it);
  if (finished.op == Request::kPullOp) {
    CheckRead(w, finished);
    if (!done) At(now + Exp(o.step_every_us), kCompute, w.id);
  } else if (finished.op == Request::kPushOp) {
    w.steps.PushDone(finished.step);
    ReleaseClocks(w);
  }
}

void ClusterSim::State::ReleaseClocks(Worker& w) {
  const auto gone = [&w](int64_t ts) { return !w.inflight.count(ts); };
  for (int64_t ts : w.steps.ReleaseClocks(gone)) {
    // It goes as it was planned, reporting the steps safe now (KVWorker::ReleaseClocks).
    Request& c = w.inflight.at(ts);
    c.held = false;
    const int64_t safe = w.steps.SafeStep();
    for (auto& p : c.parts) {
      p.second.msg.meta.set_done_step(safe);
      Mark(w, &p.second.msg);
      p.second.sent_at = now;
      SendData(p.second.msg);
    }
  }
}

void ClusterSim::State::CheckRead(const Worker& w, const Request& r) {
  res.reads++;
  // The counters count under the sum rule only (under assign a worker's later push may land
  // before its earlier one: nothing orders a worker's requests to one master).
  if (staleness < 0 || o.rule != "sum") return;
  // Every worker's clocks of steps before r.step - S were sent only once their pushes were
  // acknowledged, and the servers pass a read at step t only when every worker has completed
  // t - S steps: the read holds each counter at t - S or more.
  const int64_t need = r.step - staleness;
  for (size_t i = 0; i < counters.size(); ++i) {
    // A dead worker is out of every guarantee (the servers drop it from their step tables),
    // and so is one declared dead while it runs on, cut from the scheduler.
    const Worker& v = workers.at(worker_ids[i]);
    if (v.dead || v.declared) continue;
    auto g = r.got.find(counters[i]);
    const int64_t got = g == r.got.end() ? -1 : g->second;
    if (got < need) {
      Fail("the SSP read guarantee",
           "worker " + std::to_string(w.id) + " read worker " + std::to_string(worker_ids[i]) +
               "'s step counter as " + std::to_string(got) + " at step " + std::to_string(r.step) +
               " under " + o.policy + " (at least " + std::to_string(need) + " expected)");
      return;
    }
  }
}

void ClusterSim::State::KillWorker() {
  At(now + Exp(o.kill_worker_every_us), kKillWorker, 0);
  if (static_cast<int>(res.worker_kills) >= o.max_worker_kills) return;
  std::vector<int> live;
  for (const auto& w : workers) {
    if (!w.second.dead) live.push_back(w.first);
  }
  if (live.size() < 2) return;
  Worker& w = workers[live[rng.Below(live.size())]];
  w.dead = true;
  res.worker_kills++;
  Abandon(w);
  Note(kKillWorker, w.id, 0,
       BreakConnections(w.id) ? "dies (its connections break)" : "dies (silent)");
}

void ClusterSim::State::Abandon(Worker& w) {
  // Its pushes not yet acknowledged, part by part, may have been applied or not.
  for (auto& q : w.inflight) {
    Request& r = q.second;
    if (r.op != Request::kPushOp) continue;
    for (int part : r.open) {
      const Message& m = r.parts[part].msg;
      const SArray<Key> keys(m.data[0]);
      const SArray<int64_t> vals(m.data[1]);
      for (size_t i = 0; i < keys.size(); ++i) {
        ref[keys[i]] -= vals[i];
        maybe[keys[i]].push_back(vals[i]);
      }
    }
  }
  w.inflight.clear();
  w.steps = StepGate();
}

void ClusterSim::State::FenceWorker(Worker& w, const std::string& why) {
  if (w.dead) return;
  w.dead = true;
  res.fenced_workers++;
  Abandon(w);
  Note(kControl, w.id, 0, "stops: " + why);
}

void ClusterSim::State::WorkerCut() {
  At(now + Exp(o.worker_cut_every_us), kWorkerCut, 0);
  std::vector<int> live;
  for (const auto& w : workers) {
    if (w.second.sched_cut_until > 0) return;  // one at a time
    if (!w.second.dead && !w.second.declared) live.push_back(w.first);
  }
  if (live.size() < 2) return;
  const int64_t len =
      1 + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(o.worker_cut_max_us)));
  // A cut that may outlast the timeout is a death: within the budget of worker deaths.
  if (len > o.timeout_us / 2 &&
      static_cast<int>(res.worker_kills + res.worker_cut_deaths) >= o.max_worker_kills) {
    return;
  }
  Worker& w = workers[live[rng.Below(live.size())]];
  w.sched_cut_until = now + len;
  res.worker_cuts++;
  Note(kWorkerCut, w.id, 0, "cut from the scheduler for " + std::to_string(len) + " us");
  At(now + len, kWorkerHeal, w.id);
}

void ClusterSim::State::WorkerHeal(Worker& w) {
  if (w.sched_cut_until == 0) return;
  w.sched_cut_until = 0;
  std::vector<HeldCtl> held;
  held.swap(held_ctl[w.id]);
  held_ctl.erase(w.id);
  if (w.dead) return;
  // Its beats that waited reach the scheduler now: one declared dead meanwhile gets ABORT.
  Note(kWorkerHeal, w.id, 0, "its link to the scheduler is back");
  for (auto& h : held) SendCtl(h.from, h.to, std::move(h.ctl));
}

bool ClusterSim::State::Explained(int64_t extra, Key k) const {
  auto m = maybe.find(k);
  if (m == maybe.end()) return extra == 0;
  const auto& v = m->second;
  if (v.size() > 20) return true;  // too many to enumerate: not checked (never at 2 kills)
  for (uint64_t subset = 0; subset < (uint64_t{1} << v.size()); ++subset) {
    int64_t sum = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (subset >> i & 1) sum += v[i];
    }
    if (sum == extra) return true;
  }
  return false;
}

bool ClusterSim::State::ReadWaitsOn(const Worker& w) const {
  if (sampled_staleness < 0) return false;  // only a sampled read waits on a worker S+ behind
  for (const auto& x : workers) {
    if (x.first == w.id || x.second.dead) continue;
    for (const auto& r : x.second.inflight) {
      if (r.second.op == Request::kPullOp && w.steps.step() < r.second.step - sampled_staleness) {
        return true;
      }
    }
  }
  return false;
}

void ClusterSim::State::BeginStep(Worker& w) {
  // The settle phase begins no new step. Under SSP (and BSP) every read then still waiting is
  // answered once each worker ends the step it is in: a reader is at most S steps ahead of
  // the slowest. Under PSP a read may sample a worker further behind, which steps on, as it
  // would in a job, until no read waits for it (fuzz seed 20 hung there).
  if (!faults && !ReadWaitsOn(w)) return;
  Request r;
  r.op = Request::kPullOp;
  r.ts = w.next_ts++;
  r.step = w.steps.step();
  r.keys = counters;
  std::sort(r.keys.begin(), r.keys.end());
  Request& in = w.inflight[r.ts] = std::move(r);
  Send(w, &in);
}

void ClusterSim::State::Compute(Worker& w) {
  Request p;
  p.ts = w.next_ts++;
  p.step = w.steps.step();
  p.keys = {counters[w.index]};
  p.vals = {1};
  ref[counters[w.index]] += 1;
  res.pushes++;
  w.steps.PushIssued(p.step);
  Request& in = w.inflight[p.ts] = std::move(p);
  Send(w, &in);
  // Clock(): a request like any other, but sent only once the pushes of its step and before
  // are acknowledged (the servers count a step done when its clock arrives).
  Request c;
  c.op = Request::kClockOp;
  c.ts = w.next_ts++;
  c.step = w.steps.step();
  c.held = w.steps.HoldClock(c.ts, c.step);
  Request& clock = w.inflight[c.ts] = std::move(c);
  Send(w, &clock);
  w.steps.NextStep();
  res.steps++;
  At(now, kStep, w.id);
}

void ClusterSim::State::Send(Worker& w, Request* r) {
  r->attempt++;
  r->open.clear();
  r->parts.clear();
  r->part_keys.clear();
  r->epoch = w.view->epoch();
  r->redirected = false;
  const int64_t safe = w.steps.DoneStep(r->op == Request::kClockOp, r->step);
  auto base = [&](int server, int part) {
    Message m;
    m.meta.set_sender(w.id);
    m.meta.set_receiver(server);
    m.meta.set_app_id(0);
    m.meta.set_timestamp(r->ts);
    m.meta.set_part(part);
    m.meta.set_attempt(r->attempt);
    m.meta.set_request(true);
    m.meta.set_dtype(static_cast<int>(DataType::kInt64));
    m.meta.set_epoch(w.view->epoch());
    m.meta.set_width(1);
    // A clock reports the steps it completes; other requests the step in progress.
    m.meta.set_step(r->op == Request::kClockOp ? r->step + 1 : r->step);
    m.meta.set_done_step(safe);
    Mark(w, &m);
    return m;
  };
  if (r->op == Request::kClockOp) {
    int part = 0;
    for (int server : w.view->servers()) {
      Message m = base(server, part);
      m.meta.set_op(pb::Meta::CLOCK);
      r->open.insert(part);
      r->parts[part++] = Request::Part{m, now, 0};
      if (!r->held) SendData(m);
    }
    return;
  }
  std::map<int, std::pair<SArray<Key>, SArray<int64_t>>> by_server;
  for (size_t i = 0; i < r->keys.size(); ++i) {
    auto& p = by_server[w.view->Owner(r->keys[i])];
    p.first.push_back(r->keys[i]);
    if (r->op == Request::kPushOp) p.second.push_back(r->vals[i]);
  }
  int part = 0;
  for (auto& b : by_server) {
    Message m = base(b.first, part);
    if (r->op == Request::kPushOp) {
      m.meta.set_push(true);
      m.data = {SArray<char>(b.second.first), SArray<char>(b.second.second)};
    } else {
      m.meta.set_pull(true);
      m.data = {SArray<char>(b.second.first)};
      r->part_keys[part].assign(b.second.first.begin(), b.second.first.end());
    }
    r->open.insert(part);
    r->parts[part++] = Request::Part{m, now, 0};
    if (!r->held) SendData(m);
  }
}

void ClusterSim::State::Push(Worker& w) {
  if (!faults) return;  // the settle phase issues nothing new
  At(now + Exp(o.push_every_us), kPush, w.id);
  int pushes = 0;
  for (const auto& q : w.inflight) pushes += q.second.op == Request::kPushOp;
  if (pushes >= o.inflight) return;
  Request r;
  r.ts = w.next_ts++;
  r.step = w.steps.step();
  w.steps.PushIssued(r.step);
  std::set<Key> ks;
  while (static_cast<int>(ks.size()) < o.keys_per_push) {
    ks.insert(universe[rng.Below(universe.size())]);
  }
  for (Key k : ks) {
    r.keys.push_back(k);
    r.vals.push_back(static_cast<int64_t>(rng.Below(1000)) - 400);
    ref[k] += r.vals.back();
  }
  res.pushes++;
  Request& in = w.inflight[r.ts] = std::move(r);
  Send(w, &in);
}

int64_t ClusterSim::State::ResendTick(const Worker& w) const {
  return w.timer ? w.timer->tick_us() : o.resend_us / 2;
}

void ClusterSim::State::Resend(Worker& w) {
  if (w.timer) w.timer->Tick();
  for (auto& q : w.inflight) {  // by timestamp: oldest first
    Request& r = q.second;
    if (r.held) continue;
    for (int part : r.open) {
      Request::Part& p = r.parts[part];
      if (w.timer) {
        uint8_t tries = static_cast<uint8_t>(std::min(p.tries, 255));
        if (!w.timer->Due(p.msg.meta.receiver(), now - p.sent_at, &tries)) continue;
        p.tries = tries;
      } else {
        if (now - p.sent_at < (o.resend_us << std::min(p.tries, 3))) continue;
        p.tries++;
      }
      res.resends++;
      p.sent_at = now;
      p.msg.meta.set_done_step(w.steps.SafeStep());
      Mark(w, &p.msg);
      SendData(p.msg);
    }
  }
  At(now + ResendTick(w), kResend, w.id);
}

}  // namespace ps
