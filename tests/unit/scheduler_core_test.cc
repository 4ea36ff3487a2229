// The scheduler as a pure state machine (issue 21, item 1): registrations, heartbeats and
// their absence, broken connections, leaves and refills, task requests and barrier arrivals
// in; actions out. The node runtime carries out exactly these actions, so what is checked
// here is what real processes do. The last test walks seeded random events.
#include "control/scheduler_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "util/rng.h"

namespace ps {
namespace {

using Kind = SchedulerCore::Action::Kind;
using Actions = SchedulerCore::Actions;

SchedulerCore::Options Opts(int servers, int workers) {
  SchedulerCore::Options o;
  o.num_servers = servers;
  o.num_workers = workers;
  o.host = "127.0.0.1";
  o.port = 9000;
  o.vnodes = 8;
  o.replicas = 1;
  o.heartbeat_timeout_ms = 1000;
  o.heartbeat_interval_ms = 100;
  o.task_timeout_ms = 60000;
  o.task_keep_ms = 200;
  o.barrier_report_ms = 1000;
  return o;
}

pb::Control Reg(Role role, int port, bool join = false) {
  pb::Control c;
  c.set_cmd(pb::Control::REGISTER);
  auto* e = c.add_nodes();
  e->set_role(static_cast<int>(role));
  e->set_host("127.0.0.1");
  e->set_port(port);
  e->set_rank_hint(-1);
  e->set_join(join);
  return c;
}

pb::Control Cmd(pb::Control::Command cmd) {
  pb::Control c;
  c.set_cmd(cmd);
  return c;
}

pb::Control Beat() {
  pb::Control c = Cmd(pb::Control::HEARTBEAT);
  c.set_beat_us(7);
  return c;
}

// The recipients of the sends of command `cmd`, in order.
std::vector<int> To(const Actions& acts, pb::Control::Command cmd) {
  std::vector<int> out;
  for (const auto& a : acts) {
    if (a.kind != Kind::kSend || a.msg.cmd() != cmd) continue;
    for (int to : SchedulerCore::Recipients(a)) out.push_back(to);
  }
  return out;
}

const SchedulerCore::Action* Find(const Actions& acts, Kind kind) {
  for (const auto& a : acts) {
    if (a.kind == kind) return &a;
  }
  return nullptr;
}

std::vector<int> Sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// A job of `servers` servers and `workers` workers, registered at time 0.
struct Job {
  Job(int servers, int workers) : core(Opts(servers, workers)) {
    for (int i = 0; i < servers + workers; ++i) {
      last = core.OnControl(-2, Reg(i < servers ? Role::kServer : Role::kWorker, 10000 + i), 0);
    }
    for (const auto& n : core.membership().nodes()) {
      if (n.role == Role::kServer) this->servers.push_back(n.id);
      if (n.role == Role::kWorker) this->workers.push_back(n.id);
    }
  }
  std::vector<int> All() const {
    std::vector<int> v = servers;
    v.insert(v.end(), workers.begin(), workers.end());
    return Sorted(v);
  }
  SchedulerCore core;
  Actions last;  // the last registration's actions
  std::vector<int> servers, workers;
};

TEST(SchedulerCoreTest, TheLastRegistrationCompletesTheTableAndEveryNodeGetsIt) {
  SchedulerCore core(Opts(1, 2));
  EXPECT_TRUE(core.OnControl(-2, Reg(Role::kServer, 1), 0).empty());
  EXPECT_TRUE(core.OnControl(-2, Reg(Role::kWorker, 2), 0).empty());
  EXPECT_EQ(core.ring_core(), nullptr) << "no ring before the table is complete";
  const Actions done = core.OnControl(-2, Reg(Role::kWorker, 3), 0);
  ASSERT_FALSE(done.empty());
  // The tables first: the scheduler's program goes on once it is complete, and what it says
  // next must not reach a node ahead of its table.
  ASSERT_EQ(done.back().kind, Kind::kComplete);
  ASSERT_TRUE(done.back().ring);
  std::vector<int> tables;
  for (const auto& a : done) {
    if (a.kind == Kind::kTable) tables.push_back(a.to);
  }
  std::vector<int> ids;
  for (const auto& n : core.membership().nodes()) {
    if (n.id != 0) ids.push_back(n.id);
  }
  EXPECT_EQ(Sorted(tables), Sorted(ids));
  // A repeat (the table was lost on the way) gets the table again, quietly.
  const Actions again = core.OnControl(-2, Reg(Role::kWorker, 3), 5);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].kind, Kind::kTable);
  EXPECT_EQ(again[0].to, core.membership().IdOf("127.0.0.1", 3));
  // One more node than the job has, not joining: refused on its own address.
  const Actions extra = core.OnControl(-2, Reg(Role::kWorker, 4), 5);
  const auto* r = Find(extra, Kind::kReject);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->port, 4);
  EXPECT_FALSE(r->text.empty());
}

TEST(SchedulerCoreTest, ANodeDeclaredDeadIsFencedWhateverItSays) {
  Job job(2, 2);
  const int w = job.workers[0];
  ASSERT_FALSE(job.core.NodeDead(w, "test", 10).empty());
  for (const pb::Control& c : {Beat(), Cmd(pb::Control::TASK_TAKE), Cmd(pb::Control::LEAVE)}) {
    const Actions acts = job.core.OnControl(w, c, 20);
    ASSERT_EQ(acts.size(), 1u) << "only the fencing answer, for command " << c.cmd();
    EXPECT_EQ(acts[0].kind, Kind::kSend);
    EXPECT_EQ(acts[0].to, w);
    EXPECT_EQ(acts[0].msg.cmd(), pb::Control::ABORT);
    EXPECT_EQ(acts[0].msg.error_code(), static_cast<int>(ErrorCode::kFenced));
  }
  pb::Control b = Cmd(pb::Control::BARRIER);
  b.set_barrier_groups(kWorkerGroup);
  b.set_barrier_seq(1);
  const Actions barrier = job.core.OnControl(w, b, 30);
  EXPECT_EQ(barrier.size(), 1u) << "a fenced node enters no barrier";
  EXPECT_EQ(To(barrier, pb::Control::ABORT), std::vector<int>{w});
}

TEST(SchedulerCoreTest, AHeartbeatIsEchoedForTheNodesReadLease) {
  Job job(1, 1);
  const Actions acts = job.core.OnControl(job.servers[0], Beat(), 50);
  ASSERT_EQ(To(acts, pb::Control::HEARTBEAT), std::vector<int>{job.servers[0]});
  EXPECT_EQ(acts.back().msg.beat_us(), 7) << "the echo names the beat it answers";
}

TEST(SchedulerCoreTest, ASilentNodeIsDeclaredDeadAndEveryLiveNodeHearsOfItWithTheNewRing) {
  Job job(3, 2);
  const uint64_t epoch = job.core.ring_core()->ring()->epoch();
  const int silent = job.servers[1];
  int64_t now = 0;
  for (; now <= 1500; now += 100) {
    for (int id : job.All()) {
      if (id != silent || now < 300) job.core.OnControl(id, Beat(), now);
    }
    const Actions acts = job.core.Tick(now, 100, 100, true, false);
    if (now < 1300) {
      EXPECT_EQ(Find(acts, Kind::kDead), nullptr) << "declared too early, at " << now;
      continue;
    }
    const auto* d = Find(acts, Kind::kDead);
    ASSERT_NE(d, nullptr) << "silent from 300 ms with a 1000 ms timeout, at " << now;
    EXPECT_EQ(d->to, silent);
    std::vector<int> live;
    for (int id : job.All()) {
      if (id != silent) live.push_back(id);
    }
    EXPECT_EQ(Sorted(To(acts, pb::Control::NODE_DEAD)), live);
    const auto* r = Find(acts, Kind::kRing);
    ASSERT_NE(r, nullptr);
    EXPECT_GT(r->ring->epoch(), epoch);
    EXPECT_EQ(To(acts, pb::Control::HEARTBEAT), live) << "the scheduler beats to the living";
    break;
  }
  EXPECT_LE(now, 1400);
}

TEST(SchedulerCoreTest, TheSchedulersOwnPauseIsNobodysSilence) {
  Job job(2, 1);
  for (int id : job.All()) job.core.OnControl(id, Beat(), 0);
  // The scheduler did not run for 5 s: the first look after it must not count the gap.
  const Actions acts = job.core.Tick(5000, 5000, 100, true, false);
  EXPECT_EQ(Find(acts, Kind::kDead), nullptr);
  const auto* log = Find(acts, Kind::kLog);
  ASSERT_NE(log, nullptr);
  EXPECT_NE(log->text.find("did not run for"), std::string::npos) << log->text;
  // Silence after the pause counts again.
  EXPECT_NE(Find(job.core.Tick(6200, 100, 100, false, false), Kind::kDead), nullptr);
}

TEST(SchedulerCoreTest, ABarrierIsReleasedWhenItsLastLiveMemberArrivesOrTheOthersDie) {
  Job job(1, 3);
  pb::Control b = Cmd(pb::Control::BARRIER);
  b.set_barrier_groups(kWorkerGroup);
  b.set_barrier_seq(1);
  EXPECT_EQ(Find(job.core.OnControl(job.workers[0], b, 10), Kind::kRelease), nullptr);
  EXPECT_EQ(Find(job.core.OnControl(job.workers[1], b, 10), Kind::kRelease), nullptr);
  const Actions dead = job.core.NodeDead(job.workers[2], "test", 20);
  const auto* r = Find(dead, Kind::kRelease);
  ASSERT_NE(r, nullptr) << "the barrier waited only for the node that died";
  EXPECT_EQ(Sorted(r->release.ids), Sorted({job.workers[0], job.workers[1]}));
  EXPECT_EQ(r->release.seq, 1u);
  // The next one releases on the last live arrival.
  b.set_barrier_seq(2);
  EXPECT_EQ(Find(job.core.OnControl(job.workers[0], b, 30), Kind::kRelease), nullptr);
  EXPECT_NE(Find(job.core.OnControl(job.workers[1], b, 30), Kind::kRelease), nullptr);
}

TEST(SchedulerCoreTest, ADeadWorkersTaskGoesToAWorkerWaitingForOne) {
  Job job(1, 2);
  int first = -7;
  EXPECT_TRUE(job.core.AddTasks(0, 1, false, nullptr, 0, 0, &first).empty());
  EXPECT_EQ(first, 0);
  const int w1 = job.workers[0], w2 = job.workers[1];
  Actions a = job.core.OnControl(w1, Cmd(pb::Control::TASK_TAKE), 10);
  ASSERT_EQ(To(a, pb::Control::TASK_GIVE), std::vector<int>{w1});
  EXPECT_EQ(a.back().msg.task(), 0);
  EXPECT_TRUE(
      To(job.core.OnControl(w2, Cmd(pb::Control::TASK_TAKE), 20), pb::Control::TASK_GIVE).empty())
      << "the only task is out: the request waits";
  a = job.core.NodeDead(w1, "test", 30);
  ASSERT_EQ(To(a, pb::Control::TASK_GIVE), std::vector<int>{w2}) << "its task came back";
  for (const auto& x : a) {
    if (x.kind == Kind::kSend && x.msg.cmd() == pb::Control::TASK_GIVE) {
      EXPECT_EQ(x.msg.task(), 0);
    }
  }
  // Done, the group's next request hears that everything is done (-1).
  pb::Control done = Cmd(pb::Control::TASK_DONE);
  done.set_task(0);
  job.core.OnControl(w2, done, 40);
  a = job.core.OnControl(w2, Cmd(pb::Control::TASK_TAKE), 50);
  ASSERT_EQ(To(a, pb::Control::TASK_GIVE), std::vector<int>{w2});
  EXPECT_EQ(a.back().msg.task(), -1);
}

TEST(SchedulerCoreTest, AnAbortedJobHandsOutNoTask) {
  Job job(1, 1);
  int first = 0;
  job.core.AddTasks(0, 3, false, nullptr, 0, 0, &first);
  job.core.Aborted();
  EXPECT_TRUE(job.core.OnControl(job.workers[0], Cmd(pb::Control::TASK_TAKE), 10).empty());
}

TEST(SchedulerCoreTest, ANodesAbortStopsTheJobWithItsReasonAndKind) {
  Job job(1, 1);
  pb::Control c = Cmd(pb::Control::ABORT);
  c.set_error("bad input at line 3");
  c.set_error_code(static_cast<int>(ErrorCode::kInvalidArgument));
  const auto* a = Find(job.core.OnControl(job.workers[0], c, 10), Kind::kAbort);
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a->text.find("bad input at line 3"), std::string::npos) << a->text;
  EXPECT_EQ(a->code, ErrorCode::kInvalidArgument);
}

TEST(SchedulerCoreTest, ALeaverIsOutOnlyAfterTheOthersHoldItsRangesAndIsThenIgnored) {
  Job job(3, 1);
  const int leaver = job.servers[0];
  Actions a = job.core.OnControl(leaver, Cmd(pb::Control::LEAVE), 10);
  const std::vector<int> prepared = Sorted(To(a, pb::Control::RING_PREPARE));
  EXPECT_EQ(prepared, job.servers) << "every live server pre-copies toward the next ring";
  ASSERT_TRUE(job.core.ring_core()->next_ring());
  const uint64_t next = job.core.ring_core()->next_ring()->epoch();
  Actions cut;
  for (int s : job.servers) {
    if (s == leaver) continue;
    pb::Control r = Cmd(pb::Control::REFILL);
    r.set_epoch(next);
    r.set_pending(0);
    cut = job.core.OnControl(s, r, 20);
  }
  EXPECT_EQ(Sorted(To(cut, pb::Control::RING)), job.All()) << "the leaver hears it is out too";
  const auto* d = Find(cut, Kind::kDead);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->to, leaver);
  EXPECT_TRUE(d->quiet) << "a leaver did not fail: its customers' peers are not told so";
  EXPECT_FALSE(d->warning);
  EXPECT_TRUE(job.core.OnControl(leaver, Beat(), 30).empty()) << "its last beats mean nothing";
  EXPECT_TRUE(job.core.ConnectionBroke(leaver, 40).empty());
}

TEST(SchedulerCoreTest, PastTheLastBarrierNothingDies) {
  Job job(1, 1);
  job.core.Finished();
  EXPECT_TRUE(job.core.ConnectionBroke(job.workers[0], 10).empty());
  EXPECT_TRUE(job.core.NodeDead(job.servers[0], "test", 10).empty());
}

TEST(SchedulerCoreTest, ABrokenConnectionIsADeathOnceAndUnknownNodesAreNobody) {
  Job job(2, 1);
  const Actions a = job.core.ConnectionBroke(job.workers[0], 10);
  ASSERT_NE(Find(a, Kind::kDead), nullptr);
  EXPECT_TRUE(job.core.ConnectionBroke(job.workers[0], 20).empty()) << "declared once";
  EXPECT_TRUE(job.core.NodeDead(job.workers[0], "silent", 30).empty()) << "declared once";
  EXPECT_TRUE(job.core.ConnectionBroke(999, 20).empty());
  EXPECT_TRUE(job.core.ConnectionBroke(0, 20).empty());
}

// Seeded random events (beats, ticks, deaths, broken connections, joins, leaves, refills,
// barriers, tasks): the epochs of the rings the scheduler adopts only grow; nothing but a
// fencing ABORT goes to a node declared dead before the step; a node is declared dead at most
// once; and the scheduler never sends to itself.
TEST(SchedulerCoreTest, RandomEventsKeepEpochsGrowingAndTheDeadOutOfEveryMessage) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Rng rng(seed);
    Job job(4, 3);
    uint64_t epoch = job.core.ring_core()->ring()->epoch();
    std::set<int> dead;
    int64_t now = 0;
    int next_port = 20000;
    bool aborted = false;
    for (int step = 0; step < 300 && !aborted; ++step) {
      std::vector<int> live;
      for (const auto& n : job.core.membership().nodes()) {
        if (n.id != 0 && !dead.count(n.id)) live.push_back(n.id);
      }
      std::vector<int> servers;
      for (int id : live) {
        const NodeInfo* n = job.core.membership().Find(id);
        if (n && n->role == Role::kServer) servers.push_back(id);
      }
      Actions acts;
      // Any node that was ever in the job: the dead ones speak too (a hang that ended).
      std::vector<int> all;
      for (const auto& n : job.core.membership().nodes()) {
        if (n.id != 0) all.push_back(n.id);
      }
      const int pick = all.empty() ? 0 : all[rng.Below(all.size())];
      switch (rng.Below(9)) {
        case 0:
        case 1:
          for (int id : live) {
            if (rng.Below(10) < 9) {
              Actions b = job.core.OnControl(id, Beat(), now);
              acts.insert(acts.end(), b.begin(), b.end());
            }
          }
          break;
        case 2:
          now += 50 + static_cast<int64_t>(rng.Below(400));
          acts = job.core.Tick(now, 50, 50, true, false);
          break;
        case 3:
          if (rng.Below(3) == 0 && pick) acts = job.core.NodeDead(pick, "test", now);
          break;
        case 4:
          if (rng.Below(3) == 0 && pick) acts = job.core.ConnectionBroke(pick, now);
          break;
        case 5:
          acts = job.core.OnControl(-2, Reg(Role::kServer, next_port++, true), now);
          break;
        case 6:
          if (!servers.empty()) {
            acts = job.core.OnControl(servers[rng.Below(servers.size())], Cmd(pb::Control::LEAVE),
                                      now);
          }
          break;
        case 7:
          if (const std::shared_ptr<const Ring> next = job.core.ring_core()->next_ring()) {
            for (int s : servers) {
              pb::Control r = Cmd(pb::Control::REFILL);
              r.set_epoch(next->epoch());
              r.set_pending(rng.Below(4) == 0 ? 1 : 0);
              Actions x = job.core.OnControl(s, r, now);
              acts.insert(acts.end(), x.begin(), x.end());
            }
          }
          break;
        case 8: {
          pb::Control b = Cmd(pb::Control::BARRIER);
          b.set_barrier_groups(kWorkerGroup);
          b.set_barrier_seq(1 + step / 50);
          if (pick) acts = job.core.OnControl(pick, b, now);
          break;
        }
      }
      for (const auto& a : acts) {
        if (a.kind == Kind::kSend) {
          for (int to : SchedulerCore::Recipients(a)) {
            ASSERT_NE(to, 0) << "seed " << seed << " step " << step;
            if (dead.count(to)) {
              ASSERT_EQ(a.msg.cmd(), pb::Control::ABORT)
                  << "seed " << seed << " step " << step << ": command " << a.msg.cmd()
                  << " to node " << to << ", declared dead before";
            }
          }
        }
        if (a.kind == Kind::kRing) {
          ASSERT_GT(a.ring->epoch(), epoch) << "seed " << seed << " step " << step;
          epoch = a.ring->epoch();
        }
        if (a.kind == Kind::kAbort) aborted = true;
      }
      for (const auto& a : acts) {
        if (a.kind == Kind::kDead) {
          ASSERT_TRUE(dead.insert(a.to).second)
              << "seed " << seed << " step " << step << ": node " << a.to << " out twice";
        }
      }
    }
  }
}

}  // namespace
}  // namespace ps
