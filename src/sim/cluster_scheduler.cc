// ClusterSim's scheduler: the production SchedulerCore, fed what the node runtime feeds it
// (registrations, heartbeats, broken connections, leave requests and refill reports, its own
// periodic look with the gap a pause makes) and carried out as the runtime's Apply does, over
// the simulated control links. Failure detection is the core's: a node is declared dead when
// its beats stop reaching the scheduler for the timeout, or at once when a killed process's
// connection breaks; a node declared dead that speaks again gets the core's ABORT.
#include <algorithm>

#include "sim/cluster_sim.h"
#include "sim/cluster_state.h"

namespace ps {

using Act = SchedulerCore::Action;

int ClusterSim::State::Register(Role role, bool join, SchedulerCore::Actions* acts) {
  pb::Control c;
  c.set_cmd(pb::Control::REGISTER);
  auto* e = c.add_nodes();
  e->set_role(static_cast<int>(role));
  e->set_host("sim");
  const int port = ++next_port;
  e->set_port(port);
  e->set_join(join);
  {
    ScopeTimer t(&res.scheduler_s);
    *acts = core->OnControl(-2, c, now / 1000);
  }
  return port;
}

std::shared_ptr<const Ring> ClusterSim::State::RingOf(const pb::Control& c) {
  const pb::RingInfo& r = c.ring();
  auto it = rings.find(r.epoch());
  if (it != rings.end()) {
    const std::vector<int>& have = it->second.first;
    if (have.size() != static_cast<size_t>(r.servers_size()) ||
        !std::equal(have.begin(), have.end(), r.servers().begin())) {
      Fail("epochs only grow and are never issued twice", "epoch " + std::to_string(r.epoch()) +
                                                              " names two rings (command " +
                                                              std::to_string(c.cmd()) + ")");
    }
    // A prepared ring and the ring its cut-over puts in force share an epoch, not a history.
    auto ring = it->second.second.lock();
    if (ring && ring->cut_epoch() == (r.cut_epoch() ? r.cut_epoch() : r.epoch()) &&
        ring->base_epoch() == (r.base_epoch() ? r.base_epoch() : r.epoch())) {
      return ring;
    }
  }
  // Past rings are remembered by their servers alone: a node holds the Ring while it is in
  // use, and one is built again only when every node has let it go.
  auto ring = RingCore::RingOf(r);
  rings[r.epoch()] = {ring->servers(), ring};
  return ring;
}

std::shared_ptr<ClusterSim::State::Ctl> ClusterSim::State::CtlOf(pb::Control c) {
  auto out = std::make_shared<Ctl>();
  if (c.has_ring()) out->ring = RingOf(c);
  out->msg = std::move(c);
  return out;
}

void ClusterSim::State::Apply(SchedulerCore::Actions acts) {
  int64_t late = 0;  // this decision's sending held up (ctl_stall)
  for (auto& a : acts) {
    if (done) return;
    switch (a.kind) {
      case Act::kSend: {
        if (a.fanout.empty() && a.to <= 0) break;  // the scheduler's own barrier wait
        const pb::Control::Command cmd = a.msg.cmd();
        if (cmd == pb::Control::RING && !a.msg.error().empty()) res.refused_leaves++;
        const std::vector<int> to = SchedulerCore::Recipients(a);
        if (cmd != pb::Control::HEARTBEAT && cmd != pb::Control::NODE_JOINED) {
          Note(kControl, 0, to[0],
               "to " +
                   (to.size() == 1 ? "node " + std::to_string(to[0])
                                   : std::to_string(to.size()) + " nodes") +
                   ": " + pb::Control::Command_Name(cmd) +
                   (cmd == pb::Control::NODE_DEAD ? " " + std::to_string(a.msg.dead_id()) : "") +
                   (a.msg.has_ring() ? " epoch " + std::to_string(a.msg.ring().epoch()) : "") +
                   (a.msg.error().empty() ? "" : ": " + a.msg.error()));
        }
        // One message for all (a node only reads it), as the runtime sends one per node.
        const auto c = CtlOf(std::move(a.msg));
        // The recipients from here on hear it late; once the sending thread is held up, so
        // does everyone this decision tells after them (the same thread sends those).
        size_t from = late > 0 ? 0 : to.size();
        if (late == 0 && o.ctl_stall_every_us > 0 && faults && to.size() > 1 &&
            now >= next_ctl_stall) {
          next_ctl_stall = now + Exp(o.ctl_stall_every_us);
          from = rng.Below(to.size());
          late = 1 + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(o.ctl_stall_max_us)));
          res.ctl_stalls++;
          Note(kControl, 0, to[from],
               "the scheduler's sending stalls: nodes from " + std::to_string(to[from]) +
                   " on hear it " + std::to_string(late) + " us late");
        }
        for (size_t i = 0; i < to.size(); ++i) SendCtl(0, to[i], c, i < from ? 0 : late);
        break;
      }
      case Act::kRing:
      case Act::kComplete:
        // The scheduler's own ring: published epochs only grow (DESIGN §8, invariant 1).
        if (a.ring->epoch() <= ring_epoch && a.kind == Act::kRing) {
          Fail("epochs only grow and are never issued twice",
               "the scheduler published epoch " + std::to_string(a.ring->epoch()) +
                   " after epoch " + std::to_string(ring_epoch));
        }
        ring_epoch = a.ring->epoch();
        break;
      case Act::kDead:
        if (IsWorker(a.to)) {
          Worker& w = workers[a.to];
          if (w.declared) break;
          w.declared = true;
          res.declared_workers++;
          if (!w.dead && w.sched_cut_until > 0) res.worker_cut_deaths++;
          Note(kControl, 0, a.to, "declared worker " + std::to_string(a.to) + " dead");
        } else if (a.warning && declared.insert(a.to).second) {  // not a server that left
          res.declared_servers++;
          auto it = servers.find(a.to);
          if (it != servers.end() && !it->second.crashed && !it->second.paused &&
              it->second.sched_cut_until > 0) {
            res.sched_cut_deaths++;
          }
          if (it != servers.end() && it->second.crashed) Retire(it->second);
        }
        break;
      case Act::kAbort: {
        res.aborted = true;
        res.abort = a.text;
        Note(kControl, 0, 0, "abort: " + a.text);
        const int failed = rc().failures_since_full();
        if (failed <= o.replicas && failed <= FailureBudget()) {
          // The adversary never let more than k servers fail before the copies were complete.
          Fail("k failures lose nothing", a.text);
        }
        done = true;
        return;
      }
      case Act::kEvent:
        Note(kControl, 0, a.to, a.text);
        if (o.watch_key && o.trace && a.text.find("epoch") != std::string::npos) {
          // The watched key's chain under the scheduler's rings (a replica that differs at the
          // end was in or out of it at some change).
          for (const auto& r : {rc().ring(), rc().next_ring()}) {
            if (!r || r->servers().empty()) continue;
            std::string chain;
            for (int s : r->Chain(r->SegmentOf(o.watch_key))) chain += " " + std::to_string(s);
            Note(kControl, 0, 0,
                 "watched key's chain under epoch " + std::to_string(r->epoch()) + ":" + chain);
          }
        }
        break;
      case Act::kLog:
        if (a.warning) Note(kControl, 0, 0, a.text);
        break;
      default:  // tables, joins, releases, metrics: nothing the simulation models
        break;
    }
  }
  if (core->ring_core()) res.epochs = rc().epochs_issued();
}

void ClusterSim::State::SchedulerControl(int from, const pb::Control& c) {
  if (c.cmd() == pb::Control::REFILL) {
    Note(kControl, 0, from,
         "refill report of server " + std::to_string(from) + ": epoch " +
             std::to_string(c.epoch()) + " pending " + std::to_string(c.pending()) +
             (c.orphans_size() ? " orphans " + std::to_string(c.orphans_size() / 2) : ""));
  } else if (c.cmd() != pb::Control::HEARTBEAT) {
    Note(kControl, 0, from,
         "from node " + std::to_string(from) + ": " + pb::Control::Command_Name(c.cmd()));
  }
  SchedulerCore::Actions acts;
  {
    ScopeTimer t(c.cmd() == pb::Control::HEARTBEAT ? &res.scheduler_beats_s : &res.scheduler_s);
    acts = core->OnControl(from, c, now / 1000);
  }
  Apply(std::move(acts));
}

void ClusterSim::State::SchedulerTick() {
  if (SchedPaused()) {  // it looks again once it runs
    At(sched_paused_until, kSchedTick, 0);
    return;
  }
  // As the runtime's heartbeat loop: the scheduler looks every 20 ms (or every beat interval
  // when that is shorter); a longer gap is its own pause, which the core discounts. Its own
  // beats to the nodes (which tell them it is alive) are left out: its crash is not simulated.
  const int64_t tick = std::max<int64_t>(1, std::min<int64_t>(o.heartbeat_us / 1000, 20));
  const int64_t now_ms = now / 1000;
  const int64_t gap = now_ms - sched_last_look;
  sched_last_look = now_ms;
  SchedulerCore::Actions acts;
  double took = 0;
  {
    ScopeTimer t(&took);
    acts = core->Tick(now_ms, gap, tick, false, false);
  }
  // A look that found nothing is the detector's routine cost, not a decision.
  (acts.empty() ? res.scheduler_beats_s : res.scheduler_s) += took;
  Apply(std::move(acts));
  At(now + tick * 1000, kSchedTick, 0);
}

void ClusterSim::State::ConnectionBroke(int id) {
  if (SchedPaused()) {  // seen once it runs again
    At(sched_paused_until, kBroken, id);
    return;
  }
  Note(kBroken, 0, id, "connection to node " + std::to_string(id) + " broke");
  SchedulerCore::Actions acts;
  {
    ScopeTimer t(&res.scheduler_s);
    acts = core->ConnectionBroke(id, now / 1000);
  }
  Apply(std::move(acts));
}

void ClusterSim::State::SendBeat(int id) {
  pb::Control c;
  c.set_cmd(pb::Control::HEARTBEAT);
  c.set_beat_us(now);  // the echo of it renews a server's read lease
  SendCtl(id, 0, CtlOf(std::move(c)));
}

void ClusterSim::State::Beat(int id) {
  if (IsWorker(id)) {
    if (workers[id].dead) return;
  } else {
    const Server& s = servers[id];
    if (!s.up()) return;
    if (s.paused) {  // its heartbeat thread is stopped too; it beats when it resumes
      At(now + o.heartbeat_us, kBeat, id);
      return;
    }
  }
  SendBeat(id);
  At(now + o.heartbeat_us, kBeat, id);
}

}  // namespace ps
