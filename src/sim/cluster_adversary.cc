// ClusterSim's adversary: crashes (half of them break the process's connections, which the
// scheduler sees at once; the rest leave it silent, as a host that lost power), pauses, joins,
// leaves, partitions of the data network and cuts from the scheduler, each at seeded random
// times during the faulty phase, within the failures the replication factor allows.
#include <algorithm>

#include "sim/cluster_sim.h"
#include "sim/cluster_state.h"

namespace ps {

std::vector<int> ClusterSim::State::Candidates(bool in_ring) {
  std::vector<int> out;
  for (const auto& s : servers) {
    const Server& v = s.second;
    if (!v.up() || v.paused || v.sched_cut_until > 0 || declared.count(v.id)) continue;
    if (in_ring && !rc().ring()->HasServer(v.id)) continue;
    out.push_back(v.id);
  }
  return out;
}

// Failures under way: counted by the scheduler, and those it has not noticed yet.
int ClusterSim::State::Degraded() const {
  int n = rc().failures_since_full();
  for (const auto& s : servers) {
    const Server& v = s.second;
    if (!declared.count(v.id) &&
        (v.crashed || (v.paused && v.long_pause) || (v.sched_cut_until > 0 && LongCut(v)))) {
      n++;
    }
  }
  return n;
}

bool ClusterSim::State::BreakConnections(int id) {
  if (rng.Below(2) == 0) return false;
  At(now + Delay(), kBroken, id);
  return true;
}

bool ClusterSim::State::MayFail() {
  // Another member of the ring must stay: one that asked to leave does not (with leaves every
  // second, seed 362 under --rule assign crashed the last member that was not leaving, and the
  // scheduler rightly stopped the job: no server was left).
  size_t staying = 0;
  for (int id : Candidates(true)) staying += !servers[id].leaving;
  return Degraded() < FailureBudget() && staying > 1;
}

void ClusterSim::State::Crash() {
  At(now + Exp(o.crash_every_us), kCrash, 0);
  // Any server: a joiner that dies during its pre-copy too (its ranges have copies elsewhere,
  // so only a member of the ring counts against the failures allowed).
  auto c = Candidates(false);
  if (c.empty()) return;
  Server& s = servers[c[rng.Below(c.size())]];
  if (rc().ring()->HasServer(s.id) && !MayFail()) return;
  s.crashed = true;
  s.silent_since = now;
  res.crashes++;
  Note(kCrash, s.id, 0,
       BreakConnections(s.id) ? "crashes (its connections break)" : "crashes (silent)");
}

void ClusterSim::State::Pause() {
  At(now + Exp(o.pause_every_us), kPause, 0);
  auto c = Candidates(false);
  if (c.empty()) return;
  const int64_t len = 1 + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(o.pause_max_us)));
  Server& s = servers[c[rng.Below(c.size())]];
  const bool long_pause = len > o.timeout_us / 2;
  if (long_pause && rc().ring()->HasServer(s.id) && !MayFail()) return;
  s.paused = true;
  s.silent_since = now;
  s.long_pause = long_pause;
  res.pauses++;
  if (long_pause) res.long_pauses++;
  Note(kPause, s.id, 0, "pauses for " + std::to_string(len) + " us");
  At(now + len, kResume, s.id);
}

void ClusterSim::State::Partition() {
  At(now + Exp(o.partition_every_us), kPartition, 0);
  if (!cut_side.empty()) return;  // one at a time
  std::vector<int> live;
  for (const auto& s : servers) {
    if (s.second.up() && !declared.count(s.first)) live.push_back(s.first);
  }
  for (const auto& w : workers) {
    if (!w.second.dead) live.push_back(w.first);
  }
  std::set<int> side;
  for (int id : live) {
    if (rng.Below(2)) side.insert(id);
  }
  if (side.empty() || side.size() == live.size()) return;
  const int64_t len =
      1 + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(o.partition_max_us)));
  cut_side = side;
  res.partitions++;
  std::string a;
  for (int id : side) a += " " + std::to_string(id);
  Note(kPartition, 0, 0,
       "the data network splits for " + std::to_string(len) + " us:" + a + " | the rest");
  At(now + len, kHeal, 0);
}

void ClusterSim::State::SchedCut() {
  At(now + Exp(o.sched_cut_every_us), kSchedCut, 0);
  for (const auto& v : servers) {
    if (v.second.sched_cut_until > 0) return;  // one at a time
  }
  auto c = Candidates(false);
  if (c.empty()) return;
  const int64_t len =
      1 + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(o.sched_cut_max_us)));
  Server& s = servers[c[rng.Below(c.size())]];
  if (len > o.timeout_us / 2 && rc().ring()->HasServer(s.id) && !MayFail()) return;
  s.sched_cut_until = now + len;
  s.silent_since = now;
  res.sched_cuts++;
  Note(kSchedCut, s.id, 0, "cut from the scheduler for " + std::to_string(len) + " us");
  At(now + len, kSchedHeal, s.id);
}

void ClusterSim::State::SchedHeal(Server& s) {
  if (s.sched_cut_until == 0) return;
  s.sched_cut_until = 0;
  // Its lease lapsed unless echoes came back in time: serving again waits for the echo of a
  // beat the link now carries, or the scheduler's ABORT says it was replaced.
  Note(kSchedHeal, s.id, 0, "its link to the scheduler is back");
  std::vector<HeldCtl> held;
  held.swap(held_ctl[s.id]);
  held_ctl.erase(s.id);
  for (auto& h : held) SendCtl(h.from, h.to, std::move(h.ctl));
}

void ClusterSim::State::Resume(Server& s) {
  s.paused = false;
  Note(kResume, s.id, 0, "resumes");
  // Its heartbeat thread finds the gap (node_control.cc, BeatRan): past StallMs it serves no
  // request until the scheduler echoes a beat sent now, or answers with ABORT (replaced).
  if (now - s.silent_since > s.lease->StallMs() * 1000) s.lease->Stall(now);
  SendBeat(s.id);
  std::deque<Event> inbox;
  inbox.swap(s.inbox);
  for (auto& e : inbox) {
    if (!s.up()) break;
    if (e.kind == kControl) {
      ServerControl(s, *e.ctl);
    } else {
      ServerData(s, *e.msg);
    }
    if (done) return;
  }
}

void ClusterSim::State::SchedPause() {
  At(now + Exp(o.sched_pause_every_us), kSchedPause, 0);
  if (SchedPaused()) return;
  const int64_t len =
      1 + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(o.sched_pause_max_us)));
  sched_paused_until = now + len;
  sched_paused_at = now;
  res.sched_pauses++;
  Note(kSchedPause, 0, 0, "the scheduler stops for " + std::to_string(len) + " us");
  At(sched_paused_until, kSchedResume, 0);
}

void ClusterSim::State::SchedResume() {
  if (!SchedPaused() || now < sched_paused_until) return;
  // Its pause is nobody's silence (Membership::Paused, as node_control.cc applies it at the
  // first look after a gap): the silences the detector measures start that much later.
  // What waited (messages, its look for silent nodes) is handled now, in order; the core
  // discounts the pause from every node's silence (SchedulerCore::Tick's gap).
  Note(kSchedResume, 0, 0,
       "the scheduler runs again after " + std::to_string(now - sched_paused_at) + " us");
  sched_paused_until = 0;
}

void ClusterSim::State::Join() {
  At(now + Exp(o.join_every_us), kJoin, 0);
  SchedulerCore::Actions acts;
  const int port = Register(Role::kServer, true, &acts);
  const int id = core->membership().IdOf("sim", port);
  AddServer(id, rc().ring());
  res.joins++;
  Note(kJoin, id, 0, "joins");
  Apply(std::move(acts));
}

void ClusterSim::State::Leave() {
  At(now + Exp(o.leave_every_us), kLeave, 0);
  auto c = Candidates(true);
  if (c.size() < 2) return;
  Server& s = servers[c[rng.Below(c.size())]];
  if (s.leaving) return;
  // Server::Leave: the request goes to the scheduler, which prepares a ring without it or
  // refuses (a RING with the reason).
  s.leaving = true;
  res.leaves++;
  Note(kLeave, s.id, 0, "asks to leave");
  pb::Control m;
  m.set_cmd(pb::Control::LEAVE);
  SendCtl(s.id, 0, CtlOf(std::move(m)));
}

}  // namespace ps
