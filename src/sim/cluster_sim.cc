// ClusterSim: the servers (ServerCore) with their views of the ring and their read leases, the
// network, and the run with its end checks. The scheduler (SchedulerCore) is in
// cluster_scheduler.cc, the adversary (crashes, pauses, joins, leaves, partitions, cuts) in
// cluster_adversary.cc, the workers in cluster_workers.cc.
#include "sim/cluster_sim.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "consistency/barrier_policy.h"
#include "ps/base.h"
#include "sim/cluster_state.h"

namespace ps {
const char* ClusterSim::State::KindName(int k) {
  static const char* names[] = {
      "data",        "control",     "tick",        "push",         "resend",
      "sched-tick",  "crash",       "pause",       "resume",       "beat",
      "join",        "leave",       "faults-end",  "step",         "compute",
      "kill-worker", "partition",   "heal",        "sched-cut",    "sched-heal",
      "worker-cut",  "worker-heal", "sched-pause", "sched-resume", "broken"};
  return names[k];
}

int64_t ClusterSim::State::ValueOf(StoreBase* store, Key k) {
  SArray<char> vals;
  SArray<int> lens;
  store->Pull(&k, 1, 1, &vals, &lens);
  return reinterpret_cast<const int64_t*>(vals.data())[0];
}

std::string ClusterSim::State::Str(const std::shared_ptr<const Ring>& r) {
  if (!r) return "none";
  std::string s = "epoch " + std::to_string(r->epoch()) + " {";
  for (size_t i = 0; i < r->servers().size(); ++i) {
    s += (i ? " " : "") + std::to_string(r->servers()[i]);
  }
  return s + "}";
}

void ClusterSim::State::At(int64_t t, int kind, int node, int arg, std::shared_ptr<Message> m,
                           std::shared_ptr<Ctl> c) {
  q.push(Event{t, seq++, kind, node, arg, std::move(m), std::move(c)});
}

void ClusterSim::State::Note(int kind, int node, int arg, const std::string& what) {
  if (trace_out && o.trace) {
    *trace_out << now << " " << KindName(kind) << " node " << node << " " << what << "\n";
  }
  trace.push_back(TraceLine{now, kind, node, arg, what});
  if (trace.size() > kTraceKeep) trace.pop_front();
}

void ClusterSim::State::Fail(const std::string& invariant, const std::string& what) {
  if (!res.ok) return;
  res.ok = false;
  std::ostringstream s;
  s << "invariant violated: " << invariant << ": " << what << " (seed " << o.seed << ", at " << now
    << " us)\nlast events:\n";
  for (const auto& l : trace) {
    s << "  " << l.t << " " << KindName(l.kind) << " node " << l.node << " " << l.what << "\n";
  }
  res.failure = s.str();
  done = true;
}

int64_t ClusterSim::State::Delay() {
  return o.latency_us + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(o.jitter_us) + 1));
}

int64_t ClusterSim::State::Exp(int64_t mean) {
  return std::max<int64_t>(1, static_cast<int64_t>(rng.Exponential(static_cast<double>(mean))));
}

void ClusterSim::State::SendData(Message& m) {
  res.messages++;
  if (m.meta.op() == pb::Meta::REFILL) {
    res.refill_messages++;
  } else if (m.meta.op() == pb::Meta::HANDOVER) {
    res.handover_messages++;
  } else if (m.meta.replica()) {
    res.copy_messages++;
  } else if (!m.meta.request() && m.meta.master() > 0) {
    res.relayed_replies++;
  }
  if (Cut(m.meta.sender(), m.meta.receiver())) {
    res.partition_drops++;
    return;
  }
  if (faults && o.loss > 0 && rng.Uniform() < o.loss) {
    res.dropped++;
    return;
  }
  auto msg = std::make_shared<Message>(m);
  const int to = m.meta.receiver();
  At(now + Delay(), kData, to, 0, msg);
  if (faults && o.dup > 0 && rng.Uniform() < o.dup) {
    res.duplicated++;
    At(now + Delay(), kData, to, 0, std::make_shared<Message>(m));
  }
}

// In order per link, like the scheduler's TCP connections; a message held up `late` goes
// outside the link's order (what the scheduler sends meanwhile may arrive first), in order only
// among the late ones, which one thread sends.
void ClusterSim::State::SendCtl(int from, int to, std::shared_ptr<Ctl> c, int64_t late) {
  for (int id : {from, to}) {
    if (id > 0 && CutFromScheduler(id)) {
      held_ctl[id].push_back(HeldCtl{from, to, std::move(c)});
      return;
    }
  }
  int64_t& last = late > 0 ? ctl_late_last[to] : ctl_last[{from, to}];
  last = std::max(now + Delay() + late, last + 1);
  At(last, kControl, to, from, nullptr, std::move(c));
}

void ClusterSim::State::AddServer(int id, std::shared_ptr<const Ring> view) {
  Server& s = servers[id];
  s.id = id;
  s.view = std::move(view);
  std::shared_ptr<UpdateRule<int64_t>> rule;
  if (o.rule == "assign") {
    rule = std::make_shared<AssignRule<int64_t>>();
  } else {
    rule = std::make_shared<SumRule<int64_t>>();
  }
  s.store = std::make_shared<Store<int64_t>>(rule);
  s.lease = std::make_unique<ReadLease>(o.timeout_us / 1000, o.heartbeat_us / 1000);
  s.lease->Start(now);
  std::vector<int> wids;
  for (const auto& w : workers) {
    if (!w.second.declared) wids.push_back(w.first);
  }
  s.core = std::make_unique<ServerCore>(
      0, DataType::kInt64, s.store, ParsePolicy(o.policy, "--policy"),
      o.seed * 1000 + static_cast<uint64_t>(id), wids,
      [this, id](Message& m) {
        m.meta.set_sender(id);
        SendData(m);
      },
      [this] { return now; }, id, [this, id] { return servers[id].view; });
  for (int d : declared) s.core->Tombstone(d, false);
  for (const auto& w : workers) {
    if (w.second.declared) s.core->Tombstone(w.first, true);
  }
  s.core->SetReport([this, id](const RefillReport& r) {
    SendCtl(id, 0, CtlOf(SchedulerCore::RefillMessage(0, r)));
  });
  At(now + o.tick_us, kTick, id);
  FirstBeat(id);
}

void ClusterSim::State::ServerView(Server& s, std::shared_ptr<const Ring> r) {
  if (r->epoch() < s.view->epoch()) {
    Fail("epochs only grow",
         "server " + std::to_string(s.id) + " went from " + Str(s.view) + " to " + Str(r));
    return;
  }
  s.view = std::move(r);
  if (s.prepared && s.prepared->epoch() <= s.view->epoch()) s.prepared = nullptr;
  ScopeTimer t(&res.ring_change_s);
  s.core->RingChanged(s.view);
}

void ClusterSim::State::Retire(Server& s) {
  s.core.reset();
  s.store.reset();
  s.view.reset();
  s.prepared.reset();
  s.lease.reset();
  s.inbox.clear();
  s.dead_workers.clear();
}

void ClusterSim::State::ServerControl(Server& s, const Ctl& c) {
  // As the node runtime's HandleControl for a server (node.cc), then its customers.
  switch (c.msg.cmd()) {
    case pb::Control::HEARTBEAT:
      if (c.msg.beat_us() > 0) s.lease->Echoed(c.msg.beat_us());
      break;
    case pb::Control::ABORT:  // declared dead while it stalled or was cut off: fenced
      s.fenced = true;
      Note(kControl, s.id, 0, "fenced: " + c.msg.error());
      Retire(s);
      break;
    case pb::Control::NODE_DEAD: {
      const int dead = c.msg.dead_id();
      if (dead == s.id) {
        s.fenced = true;  // told it was replaced: it serves nothing more
        Note(kControl, s.id, 0, "fenced");
        Retire(s);
        return;
      }
      s.core->WorkerDead(dead, IsWorker(dead));
      if (IsWorker(dead)) s.dead_workers.insert(dead);
      if (c.ring && c.ring->epoch() > s.view->epoch()) ServerView(s, c.ring);
      break;
    }
    case pb::Control::RING_PREPARE:
      if (!c.ring || !RingCore::TakePrepare(c.msg, s.view->epoch(), &s.prepare_seen)) break;
      if (auto cut = MissedCut(s.prepared, *c.ring, s.view->epoch())) ServerView(s, cut);
      s.prepared = c.ring->epoch() > s.view->epoch() ? c.ring : nullptr;
      {
        ScopeTimer t(&res.ring_change_s);
        s.core->Prepare(c.ring);
      }
      break;
    case pb::Control::RING:
      if (!c.msg.error().empty()) {  // its leave was refused
        s.leaving = false;
        break;
      }
      if (!c.ring) break;
      if (c.ring->epoch() > s.view->epoch()) ServerView(s, c.ring);
      if (s.leaving && !c.ring->HasServer(s.id)) {
        s.gone = true;  // its Leave() returned: the program ends
        Note(kControl, s.id, 0, "left the job");
        Retire(s);
      }
      break;
    default:
      break;
  }
}

void ClusterSim::State::ServerData(Server& s, Message& m) {
  // The read lease (node_control.cc, LeaseValid): no request is served after a stall until
  // the scheduler echoes a later beat, nor while the last echo is stale (cut from the
  // scheduler, or the scheduler stopped).
  if (m.meta.request() && !s.lease->Holds(now)) {
    res.lease_drops++;
    return;
  }
  // A fenced node serves nothing (DESIGN §8): once declared dead (others took its ranges
  // over) a server must not apply or answer a request; its lease stops it until it learns.
  if (m.meta.request() && declared.count(s.id)) {
    Fail("a fenced node serves nothing",
         "server " + std::to_string(s.id) + " served a request of node " +
             std::to_string(m.meta.sender()) + " after it was declared dead");
    return;
  }
  // A worker's request routed under the prepared ring: the cut-over reached the worker first.
  if (m.meta.request() && !m.meta.replica() && m.meta.op() != pb::Meta::REFILL &&
      m.meta.op() != pb::Meta::HANDOVER && s.prepared && m.meta.epoch() == s.prepared->epoch() &&
      s.view->epoch() < m.meta.epoch()) {
    ServerView(s, std::make_shared<Ring>(s.prepared->AsCutOver()));  // as AdoptNextRing
  }
  // Fencing a worker (DESIGN §8: its shards went to others): a server that heard of its
  // death applies nothing it sends, however late it was cut off from the scheduler.
  std::vector<std::pair<Key, int64_t>> before;
  const int from = m.meta.sender();
  if (m.meta.request() && m.meta.push() && !m.meta.replica() && s.dead_workers.count(from) &&
      !m.data.empty()) {
    const SArray<Key> keys(m.data[0]);
    for (Key k : keys) before.emplace_back(k, ValueOf(s.store.get(), k));
  }
  s.core->Process(m);
  for (const auto& kv : before) {
    if (ValueOf(s.store.get(), kv.first) != kv.second) {
      Fail("a fenced worker's updates are refused",
           "server " + std::to_string(s.id) + " applied a push of worker " + std::to_string(from) +
               " after it heard that the worker was declared dead");
      return;
    }
  }
  // The replicator's books (every waiting request counted by the copies it waits for) walk
  // all of its state: every 16th message, which keeps large clusters fast.
  if (res.ok && ++s.processed % 16 == 0) {
    const std::string bad = s.core->CheckEntries();
    if (!bad.empty()) Fail("the applied log is consistent", bad);
  }
}

// Servers that may still serve: not crashed, fenced, gone or declared dead.
bool ClusterSim::State::Settled() const {
  if (rc().next_ring()) return false;
  for (const auto& w : workers) {
    if (!w.second.inflight.empty()) return false;
  }
  for (const auto& s : servers) {
    const Server& v = s.second;
    if (!v.up() || declared.count(v.id)) continue;
    // A copy still on its way (its resend timer grows to 8 s after long outages) leaves a
    // replica behind its master: a dead worker's last push, acknowledged to nobody, say (seed
    // 1073 of the scheduler-pause hunt settled with it in flight).
    // And a new master that waits for its old master's hand-over may lack the old master's
    // last updates, which its replicas hold (seed 1253 of the run that cuts, pauses and
    // partitions everything was judged 8 ms after a leave): settled once it has them or gave
    // up on them at the hand-over's timeout.
    if (v.paused || v.view->epoch() != rc().ring()->epoch() || v.core->PendingRanges() > 0 ||
        v.core->CopiesInFlight() > 0 || v.core->AwaitingHandover()) {
      return false;
    }
  }
  return true;
}

std::string ClusterSim::State::Pending() const {
  std::ostringstream s;
  s << "scheduler ring " << Str(rc().ring()) << ", prepared " << Str(rc().next_ring())
    << ", refills pending: " << rc().PendingRefills();
  for (const auto& w : workers) {
    if (!w.second.inflight.empty()) {
      s << "; worker " << w.first << ": " << w.second.inflight.size() << " unacknowledged (ts "
        << w.second.inflight.begin()->first << ", attempt "
        << w.second.inflight.begin()->second.attempt << ")";
    }
  }
  for (const auto& v : servers) {
    if (!v.second.up() || declared.count(v.first)) continue;
    s << "; server " << v.first << " view " << Str(v.second.view) << " pending "
      << v.second.core->PendingRanges() << " copies in flight " << v.second.core->CopiesInFlight();
    if (o.trace) s << "\n" << v.second.core->DebugHeld();
  }
  return s.str();
}

// Every member of every key's chain under the final ring holds the exact sum of every push
// (all were acknowledged: none lost, none applied twice) in the same slot, byte for byte, as
// the key's master. (Sequence points are not compared: a server that took over without the
// old master's last points stands below a replica that saw them until its next update.)
void ClusterSim::State::CheckFinal() {
  const Ring& ring = *rc().ring();
  for (const auto& m : maybe) ref.emplace(m.first, 0);  // keys only dead workers pushed
  for (int id : ring.servers()) {
    if (!servers[id].store) {
      Fail("the final ring holds only servers that run",
           "server " + std::to_string(id) + " left or was declared dead but is in " +
               Str(rc().ring()));
      return;
    }
  }
  for (const auto& kv : ref) {
    const Key k = kv.first;
    const auto chain = ring.Chain(ring.SegmentOf(k));
    SArray<Key> mk;
    SArray<char> master;
    SArray<uint64_t> msz;
    servers[chain[0]].store->ExportRange(Range(k, k + 1), &mk, &master, &msz);
    for (size_t i = 0; i < chain.size(); ++i) {
      Server& s = servers[chain[i]];
      const int64_t got = ValueOf(s.store.get(), k);
      if (o.rule == "sum" && !Explained(got - kv.second, k)) {
        Fail("no acknowledged update lost or applied twice",
             "server " + std::to_string(s.id) + " (member " + std::to_string(i) +
                 " of its chain) holds " + std::to_string(got) + " for key " + std::to_string(k) +
                 ", the acknowledged pushes sum to " + std::to_string(kv.second) +
                 (maybe.count(k) ? " (dead workers' unacknowledged pushes may add some of " +
                                       std::to_string(maybe[k].size()) + " values)"
                                 : ""));
        return;
      }
      SArray<Key> rk;
      SArray<char> slot;
      SArray<uint64_t> rsz;
      s.store->ExportRange(Range(k, k + 1), &rk, &slot, &rsz);
      if (rk.size() != mk.size() || slot.size() != master.size() ||
          !std::equal(slot.begin(), slot.end(), master.begin())) {
        Fail("every replica holds its master's slots",
             "key " + std::to_string(k) + ": server " + std::to_string(s.id) +
                 " differs from its master " + std::to_string(chain[0]));
        return;
      }
    }
  }
}

void ClusterSim::State::Run() {
  for (int i = 0; i < o.keys; ++i) universe.push_back(HashKey(static_cast<uint64_t>(i)));
  const std::string p = o.policy;
  if (p == "bsp") staleness = 0;
  if (p.rfind("ssp:", 0) == 0) staleness = std::stoll(p.substr(4));
  // The policy's own spelling (pbsp and pssp are psp; "psp:B" names its S).
  const std::string spec = ParsePolicy(p, "--policy")->Spec();
  if (spec.rfind("psp:", 0) == 0) sampled_staleness = std::stoll(spec.substr(spec.rfind(':') + 1));
  // Every node registers with the scheduler, which numbers them (servers first) and builds the
  // first ring once all have come, as in a real job's start.
  SchedulerCore::Options co;
  co.num_servers = o.servers;
  co.num_workers = o.workers;
  co.host = "sim";
  co.port = ++next_port;
  co.vnodes = o.vnodes;
  co.replicas = o.replicas;
  co.heartbeat_timeout_ms = o.timeout_us / 1000;
  co.heartbeat_interval_ms = o.heartbeat_us / 1000;
  core = std::make_unique<SchedulerCore>(co);
  std::vector<int> server_ports, worker_ports;
  SchedulerCore::Actions acts;
  for (int i = 0; i < o.servers; ++i) {
    server_ports.push_back(Register(Role::kServer, false, &acts));
    Apply(std::move(acts));
  }
  for (int i = 0; i < o.workers; ++i) {
    worker_ports.push_back(Register(Role::kWorker, false, &acts));
    Apply(std::move(acts));
  }
  // The resend rule of the run, drawn from the seed alone (not from the run's generator): the
  // draw moves no other choice of the run.
  const bool timer = o.resend == "timer" || (o.resend == "mixed" && (HashKey(o.seed) & 1) != 0);
  for (int i = 0; i < o.workers; ++i) {
    const int id = core->membership().IdOf("sim", worker_ports[i]);
    workers[id].id = id;
    workers[id].index = i;
    if (timer) {
      workers[id].timer = std::make_shared<ResendTimer>(static_cast<double>(o.resend_us),
                                                        static_cast<double>(o.request_timeout_us));
    }
    worker_ids.push_back(id);
    counters.push_back(HashKey(static_cast<uint64_t>(o.keys + i)));  // outside the universe
  }
  res.scheduler_start_s = res.scheduler_s;
  for (int port : server_ports) AddServer(core->membership().IdOf("sim", port), rc().ring());
  for (auto& w : workers) {
    w.second.view = rc().ring();
    At(Exp(o.push_every_us), kPush, w.first);
    At(ResendTick(w.second), kResend, w.first);
    if (o.step_every_us > 0) At(Exp(o.step_every_us), kStep, w.first);
    FirstBeat(w.first);
  }
  At(1000, kSchedTick, 0);
  if (o.crash_every_us > 0) At(Exp(o.crash_every_us), kCrash, 0);
  if (o.pause_every_us > 0) At(Exp(o.pause_every_us), kPause, 0);
  if (o.join_every_us > 0) At(Exp(o.join_every_us), kJoin, 0);
  if (o.leave_every_us > 0) At(Exp(o.leave_every_us), kLeave, 0);
  if (o.kill_worker_every_us > 0) At(Exp(o.kill_worker_every_us), kKillWorker, 0);
  if (o.partition_every_us > 0) At(Exp(o.partition_every_us), kPartition, 0);
  if (o.sched_cut_every_us > 0) At(Exp(o.sched_cut_every_us), kSchedCut, 0);
  if (o.worker_cut_every_us > 0) At(Exp(o.worker_cut_every_us), kWorkerCut, 0);
  if (o.sched_pause_every_us > 0) At(Exp(o.sched_pause_every_us), kSchedPause, 0);
  if (o.ctl_stall_every_us > 0) next_ctl_stall = Exp(o.ctl_stall_every_us);
  At(o.fault_us, kFaultsEnd, 0);
  int64_t window_end = 0;  // the events of the current virtual second (a storm's measure)
  uint64_t window_events = 0;
  while (!done && !q.empty()) {
    Event e = q.top();
    q.pop();
    now = e.t;
    res.events++;
    if (progress) progress->store(res.events, std::memory_order_relaxed);
    if (virtual_us) virtual_us->store(now, std::memory_order_relaxed);
    Step(e);
    // Settled() walks every node: in a large cluster it is asked once per virtual millisecond
    // (the settle time is then known to a millisecond), in a small one after every event.
    const bool check = !faults && !done && now >= next_settle_check;
    if (check && servers.size() + workers.size() > 64) next_settle_check = now + 1000;
    // Events per second of virtual time; the heartbeats and their echoes come on top, as the
    // cluster grows.
    if (now >= window_end) {
      window_end = (now / 1000000 + 1) * 1000000;
      window_events = 0;
    }
    ++window_events;
    const uint64_t nodes = servers.size() + workers.size();
    const uint64_t beats = nodes * 2 * static_cast<uint64_t>(1000000 / o.heartbeat_us + 1);
    if (window_events > o.max_events * std::max<uint64_t>(1, nodes / 16) + beats && !done) {
      Fail("liveness: once faults stop, every request completes in bounded time",
           std::to_string(window_events) + " events in the virtual second before " +
               std::to_string(now) + " us (messages that beget messages): " + Pending());
    } else if (check && Settled()) {
      res.settle_us = now - o.fault_us;
      CheckFinal();
      done = true;
    } else if (!faults && now > o.fault_us + o.settle_us && !done) {
      Fail("liveness: once faults stop, every request completes in bounded time",
           "not settled " + std::to_string(o.settle_us) + " us after the faults: " + Pending());
    }
  }
  if (!done) Fail("liveness", "no event left before the run settled: " + Pending());
  res.end_us = now;
  for (const auto& s : servers) {
    if (s.second.up() && !declared.count(s.first)) res.final_servers++;
  }
}

void ClusterSim::State::Watch(const Event& e) {
  for (auto& sv : servers) {
    const std::pair<int64_t, uint64_t> v{
        sv.second.store ? ValueOf(sv.second.store.get(), o.watch_key) : 0,
        sv.second.core ? sv.second.core->SeqPoint(o.watch_key) : 0};
    auto& last = watched_[sv.first];
    if (v == last) continue;
    // Points as epoch:count (a take-over jumps to the epoch's base).
    auto point = [](uint64_t p) {
      return std::to_string(p >> 40) + ":" + std::to_string(p & ((uint64_t{1} << 40) - 1));
    };
    std::string what = "watched key at server " + std::to_string(sv.first) + ": " +
                       std::to_string(last.first) + " @" + point(last.second) + " -> " +
                       std::to_string(v.first) + " @" + point(v.second) + " after a " +
                       KindName(e.kind) + " event at node " + std::to_string(e.node);
    if (e.msg) {
      what += " (" + std::string(e.msg->meta.request() ? "request" : "reply") + " from " +
              std::to_string(e.msg->meta.sender()) + " op " + std::to_string(e.msg->meta.op()) +
              (e.msg->meta.replica() ? " copy" : "") + ")";
    }
    if (e.ctl) {
      what +=
          " (control " + pb::Control::Command_Name(e.ctl->msg.cmd()) + " " + Str(e.ctl->ring) + ")";
    }
    Note(kData, sv.first, 0, what);
    last = v;
  }
}

void ClusterSim::State::Step(Event& e) {
  StepOnce(e);
  if (o.watch_key) Watch(e);
}

void ClusterSim::State::StepOnce(Event& e) {
  // A dead worker does nothing more: what reaches it and its own timers are dropped.
  if (IsWorker(e.node) && workers[e.node].dead) return;
  switch (e.kind) {
    case kData:
    case kControl: {
      if (e.kind == kData) {
        const pb::Meta& m = e.msg->meta;
        Note(kData, e.node, m.sender(),
             std::string(m.request() ? "request" : "reply") + " from " +
                 std::to_string(m.sender()) + (m.push() ? " push" : "") +
                 (m.pull() ? " pull" : "") + (m.op() == pb::Meta::CLOCK ? " clock" : "") +
                 (m.replica() ? " copy" : "") + " ts " + std::to_string(m.timestamp()) + " part " +
                 std::to_string(m.part()) + " attempt " + std::to_string(m.attempt()) + " epoch " +
                 std::to_string(m.epoch()) + (m.error().empty() ? "" : " error " + m.error()) +
                 (m.redirect() ? " redirect" : "") + (m.nack() ? " nack" : "") +
                 (m.refused() ? " refused" : "") +
                 (m.fwd_id() ? " fwd " + std::to_string(m.fwd_id()) : "") +
                 (m.held_why().empty() ? "" : " held: " + m.held_why()));
      }
      if (e.node == 0) {      // a node's message reaches the scheduler
        if (SchedPaused()) {  // read once it runs again, in the order it came
          At(sched_paused_until, e.kind, e.node, e.arg, e.msg, e.ctl);
          return;
        }
        SchedulerControl(e.arg, e.ctl->msg);
        return;
      }
      if (IsWorker(e.node)) {
        Worker& w = workers[e.node];
        if (e.kind == kControl) {
          WorkerControl(w, *e.ctl);
        } else {
          WorkerReply(w, *e.msg);
        }
        return;
      }
      auto it = servers.find(e.node);
      if (it == servers.end() || !it->second.up()) return;
      Server& s = it->second;
      if (s.paused) {
        s.inbox.push_back(e);
        return;
      }
      if (e.kind == kControl) {
        ServerControl(s, *e.ctl);
      } else {
        ServerData(s, *e.msg);
      }
      return;
    }
    case kTick: {
      Server& s = servers[e.node];
      if (!s.up()) return;
      if (!s.paused) s.core->Tick();
      At(now + o.tick_us, kTick, e.node);
      return;
    }
    case kPush:
      Push(workers[e.node]);
      return;
    case kResend:
      Resend(workers[e.node]);
      return;
    case kSchedTick:
      SchedulerTick();
      return;
    case kBeat:
      Beat(e.node);
      return;
    case kBroken:
      ConnectionBroke(e.node);
      return;
    case kSchedPause:
      if (faults) SchedPause();
      return;
    case kSchedResume:
      SchedResume();
      return;
    case kCrash:
      if (faults) Crash();
      return;
    case kPause:
      if (faults) Pause();
      return;
    case kResume:
      Resume(servers[e.node]);
      return;
    case kJoin:  // a join or leave is asked of the scheduler: not while it is stopped
      if (faults && SchedPaused()) {
        At(now + Exp(o.join_every_us), kJoin, 0);
      } else if (faults) {
        Join();
      }
      return;
    case kLeave:
      if (faults && SchedPaused()) {
        At(now + Exp(o.leave_every_us), kLeave, 0);
      } else if (faults) {
        Leave();
      }
      return;
    case kStep:
      BeginStep(workers[e.node]);
      return;
    case kCompute:
      Compute(workers[e.node]);
      return;
    case kKillWorker:
      if (faults) KillWorker();
      return;
    case kPartition:
      if (faults) Partition();
      return;
    case kSchedCut:
      if (faults) SchedCut();
      return;
    case kSchedHeal:
      SchedHeal(servers[e.node]);
      return;
    case kWorkerCut:
      if (faults) WorkerCut();
      return;
    case kWorkerHeal:
      WorkerHeal(workers[e.node]);
      return;
    case kHeal:
      if (!cut_side.empty()) Note(kHeal, 0, 0, "the partition heals");
      cut_side.clear();
      return;
    case kFaultsEnd:
      faults = false;
      if (!cut_side.empty()) Note(kHeal, 0, 0, "the partition heals (faults stop)");
      cut_side.clear();
      Note(kFaultsEnd, 0, 0, "faults stop");
      return;
  }
}

ClusterSim::ClusterSim(const ClusterSimOptions& options) : s_(std::make_unique<State>(options)) {
  const ClusterSimOptions& o = options;
  if (o.servers < 1) throw Error("--servers must be at least 1");
  if (o.workers < 1) throw Error("--workers must be at least 1");
  if (o.replicas < 0) throw Error("--replicas must be at least 0");
  if (o.keys < o.keys_per_push || o.keys_per_push < 1) {
    throw Error("--keys-per-push must be between 1 and --keys");
  }
  if (o.loss < 0 || o.loss >= 1 || o.dup < 0 || o.dup >= 1) {
    throw Error("--loss and --dup must be in [0, 1)");
  }
  if (o.heartbeat_us < 1000) throw Error("--heartbeat-s must be at least 0.001");
  if (o.timeout_us <= o.heartbeat_us) throw Error("--timeout-s must exceed --heartbeat-s");
  if (o.jitter_us < 0 || o.latency_us < 0) throw Error("--latency-us and --jitter-us must be >= 0");
  if (o.step_every_us < 0) throw Error("--step-every-s must be >= 0");
  if (o.partition_every_us < 0 || o.partition_max_us < 1) {
    throw Error("--partition-every-s must be >= 0 and --partition-max-s > 0");
  }
  if (o.sched_cut_every_us < 0 || o.sched_cut_max_us < 1) {
    throw Error("--sched-cut-every-s must be >= 0 and --sched-cut-max-s > 0");
  }
  if (o.ctl_stall_every_us < 0 || o.ctl_stall_max_us < 1) {
    throw Error("--ctl-stall-every-s must be >= 0 and --ctl-stall-max-s > 0");
  }
  if (o.sched_pause_every_us < 0 || o.sched_pause_max_us < 1) {
    throw Error("--sched-pause-every-s must be >= 0 and --sched-pause-max-s > 0");
  }
  if (o.worker_cut_every_us < 0 || o.worker_cut_max_us < 1) {
    throw Error("--worker-cut-every-s must be >= 0 and --worker-cut-max-s > 0");
  }
  ParsePolicy(o.policy, "--policy");  // throws naming the option
  if (o.rule != "sum" && o.rule != "assign") throw Error("--rule must be sum or assign");
}

ClusterSim::~ClusterSim() = default;

ClusterSimResult ClusterSim::Run(std::ostream* trace, std::atomic<uint64_t>* progress,
                                 std::atomic<int64_t>* virtual_us) {
  s_->trace_out = trace;
  s_->progress = progress;
  s_->virtual_us = virtual_us;
  s_->Run();
  return s_->res;
}

}  // namespace ps
