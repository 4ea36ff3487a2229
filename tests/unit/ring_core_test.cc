// The scheduler's ring decisions as a pure state machine (issue 21, item 1): joins, leaves,
// failures and refills in, rings to prepare, publish and cut over to out. Each test names the
// DESIGN §8 property it checks; the last walks seeded random events and checks them all.
#include "control/ring_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "replication/refill.h"
#include "util/rng.h"

namespace ps {
namespace {

constexpr int kVnodes = 16;

// Every server of `ring` reports for app 0 that it holds its ranges of the ring's epoch.
RingCore::Decision ReportAll(RingCore* core, const Ring& ring, int64_t now = 0) {
  RingCore::Decision last;
  for (int s : ring.servers()) last = core->Refill(s, 0, ring.epoch(), 0, now);
  return last;
}

TEST(RingCoreTest, AJoinCutsOverOnlyWhenEveryServerOfTheNewRingHoldsItsRanges) {
  RingCore core({1, 2, 3}, kVnodes, 1, 1);
  ReportAll(&core, *core.ring());
  const RingCore::Decision d = core.ServerJoined(4, 100);
  ASSERT_TRUE(d.prepare);
  EXPECT_EQ(d.prepare->servers(), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(d.prepare->epoch(), 2u);
  EXPECT_EQ(core.ring()->epoch(), 1u) << "the old ring serves until the cut-over";
  for (int s : {1, 2, 3}) EXPECT_FALSE(core.Refill(s, 0, 2, 0, 150).cut);
  EXPECT_FALSE(core.Refill(4, 0, 2, 3, 160).cut) << "the joiner still copies 3 ranges";
  EXPECT_NE(core.PendingRefills().find("server node 4 app 0 (3 range(s) at epoch 2)"),
            std::string::npos)
      << core.PendingRefills();
  const RingCore::Decision cut = core.Refill(4, 0, 2, 0, 400);
  ASSERT_TRUE(cut.cut);
  EXPECT_EQ(cut.cut->epoch(), 2u);
  EXPECT_EQ(core.ring(), cut.cut);
  EXPECT_FALSE(core.next_ring());
  ASSERT_FALSE(cut.events.empty());
  EXPECT_NE(cut.events[0].find("the pre-copy took 300 ms"), std::string::npos) << cut.events[0];
}

// The joiner-death stall (found in real jobs): a joiner that dies during its pre-copy never
// reports, so a preparation that kept it would never cut over, and every later join waited
// behind it.
TEST(RingCoreTest, AJoinerThatDiesDuringThePreCopyCancelsThePreparation) {
  RingCore core({1, 2}, kVnodes, 1, 1);
  const uint64_t prepared = core.ServerJoined(3, 0).prepare->epoch();
  for (int s : {1, 2}) core.Refill(s, 0, prepared, 0, 10);
  const RingCore::Decision d = core.NodeDead(3, 20);
  EXPECT_FALSE(d.failover) << "the joiner was not in the ring";
  ASSERT_TRUE(d.prepare) << "the servers must hear that the preparation is off";
  EXPECT_EQ(d.prepare, core.ring()) << "the current ring again cancels it";
  EXPECT_FALSE(core.next_ring());
  // A later join is prepared and cuts over on its own reports.
  const RingCore::Decision j = core.ServerJoined(4, 30);
  ASSERT_TRUE(j.prepare);
  EXPECT_EQ(j.prepare->servers(), (std::vector<int>{1, 2, 4}));
  EXPECT_GT(j.prepare->epoch(), prepared) << "a cancelled epoch is never issued again";
  EXPECT_TRUE(ReportAll(&core, *j.prepare, 40).cut);
}

// DESIGN §8, invariant 1: epochs only grow and are never issued twice, also when a member dies
// while a join is prepared (the failover ring and the new preparation each take a fresh one).
TEST(RingCoreTest, AMemberDyingDuringAJoinTakesFreshEpochsForTheFailoverAndThePreparation) {
  RingCore core({1, 2, 3}, kVnodes, 1, 5);
  const uint64_t first = core.ServerJoined(4, 0).prepare->epoch();
  EXPECT_EQ(first, 6u);
  const RingCore::Decision d = core.NodeDead(2, 10);
  ASSERT_TRUE(d.failover);
  ASSERT_TRUE(d.prepare);
  EXPECT_EQ(d.failover->servers(), (std::vector<int>{1, 3}));
  EXPECT_EQ(d.prepare->servers(), (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(d.failover->epoch(), 7u);
  EXPECT_EQ(d.prepare->epoch(), 8u);
  EXPECT_EQ(core.epochs_issued(), 8u);
  EXPECT_TRUE(core.NodeDead(2, 20).events.empty()) << "a second report of a death is no news";
}

// DESIGN §8, invariant 6 (no silent loss): with k = 1 two failures before the refill ends lose
// the ranges the two servers shared, and the abort names them; after the refill the same second
// failure loses nothing.
TEST(RingCoreTest, TwoFailuresBeforeTheRefillAbortNamingTheRangesWithNoCopy) {
  RingCore lossy({1, 2, 3}, kVnodes, 1, 1);
  EXPECT_TRUE(lossy.NodeDead(1, 0).abort.empty());
  const RingCore::Decision d = lossy.NodeDead(2, 10);
  EXPECT_NE(d.abort.find("server node 2 died (2 server failure(s)"), std::string::npos) << d.abort;
  EXPECT_NE(d.abort.find("key range(s) have no copy left: ["), std::string::npos) << d.abort;
  EXPECT_EQ(lossy.ring()->servers(), (std::vector<int>{2, 3})) << "no ring after an abort";

  RingCore safe({1, 2, 3}, kVnodes, 1, 1);
  const auto after = safe.NodeDead(1, 0).failover;
  const RingCore::Decision refilled = ReportAll(&safe, *after, 50);
  ASSERT_EQ(refilled.events.size(), 1u);
  EXPECT_NE(refilled.events[0].find("refill done"), std::string::npos) << refilled.events[0];
  const RingCore::Decision d2 = safe.NodeDead(2, 60);
  EXPECT_TRUE(d2.abort.empty()) << d2.abort;
  ASSERT_TRUE(d2.failover);
  EXPECT_EQ(d2.failover->servers(), (std::vector<int>{3}));
}

TEST(RingCoreTest, ALeaverIsOutAfterTheCutOverAndTheLastServerCannotLeave) {
  RingCore core({1, 2}, kVnodes, 1, 1);
  EXPECT_NE(core.Leave(9, 0).refused.find("not in the ring"), std::string::npos);
  const RingCore::Decision d = core.Leave(1, 0);
  EXPECT_TRUE(d.refused.empty());
  ASSERT_TRUE(d.prepare);
  EXPECT_EQ(d.prepare->servers(), (std::vector<int>{2}));
  EXPECT_FALSE(core.Leave(2, 0).refused.empty()) << "the last server of the ring";
  EXPECT_FALSE(core.HasLeft(1)) << "it serves until the cut-over";
  const RingCore::Decision cut = ReportAll(&core, *d.prepare, 5);
  ASSERT_TRUE(cut.cut);
  EXPECT_EQ(cut.left, (std::vector<int>{1}));
  EXPECT_TRUE(core.HasLeft(1));
  // A server that left is not a joiner of the next preparation.
  EXPECT_EQ(core.ServerJoined(3, 10).prepare->servers(), (std::vector<int>{2, 3}));
}

// Who hears what (RingCore::Messages, the fan-out the node runtime and the simulator share):
// a death's news with its failover ring to every live node, the preparation to the live
// servers, a refusal to its leaver alone, the cut-over to every live node (the leaver too: it
// tells it it is out), and nothing at all when the decision aborts.
TEST(RingCoreTest, EachDecisionTellsTheNodesThatMustHearIt) {
  RingCore core({1, 2, 3}, kVnodes, 1, 1);
  ReportAll(&core, *core.ring());
  const std::vector<int> live = {1, 2, 4, 5}, servers = {1, 2};  // 3 died; 4, 5 are workers
  const RingCore::Decision dead = core.NodeDead(3, 10);
  ASSERT_TRUE(dead.failover);
  auto m = RingCore::Messages(dead, 3, live, servers);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].msg.cmd(), pb::Control::NODE_DEAD);
  EXPECT_EQ(m[0].msg.dead_id(), 3);
  EXPECT_EQ(m[0].to, live);
  EXPECT_EQ(RingCore::RingOf(m[0].msg.ring())->servers(), dead.failover->servers());
  EXPECT_EQ(m[0].msg.ring().epoch(), dead.failover->epoch());

  ReportAll(&core, *core.ring(), 20);
  const RingCore::Decision leave = core.Leave(2, 30);
  ASSERT_TRUE(leave.prepare);
  m = RingCore::Messages(leave, -1, live, servers);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].msg.cmd(), pb::Control::RING_PREPARE);
  EXPECT_EQ(m[0].to, servers);
  EXPECT_EQ(m[0].msg.ring().epoch(), leave.prepare->epoch());

  const RingCore::Decision refused = core.Leave(1, 40);  // the last server once 2 is gone
  ASSERT_EQ(refused.refused_leaves, (std::vector<int>{1}));
  m = RingCore::Messages(refused, -1, live, servers);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].msg.cmd(), pb::Control::RING);
  EXPECT_EQ(m[0].to, (std::vector<int>{1}));
  EXPECT_NE(m[0].msg.error().find(refused.refused), std::string::npos);
  EXPECT_FALSE(m[0].msg.has_ring());

  const RingCore::Decision cut = ReportAll(&core, *leave.prepare, 50);
  ASSERT_TRUE(cut.cut);
  m = RingCore::Messages(cut, -1, live, servers);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].msg.cmd(), pb::Control::RING);
  EXPECT_TRUE(m[0].msg.error().empty());
  EXPECT_EQ(m[0].to, live) << "the leaver (2) hears the ring without it";
  EXPECT_EQ(m[0].msg.ring().epoch(), cut.cut->epoch());

  RingCore::Decision abort = cut;
  abort.abort = "range lost";
  EXPECT_TRUE(RingCore::Messages(abort, 3, live, servers).empty());
}

// A server applying RING_PREPAREs as the node runtime does (node.cc): the ring it prepares
// toward, or null. Messages the node does not take change nothing.
struct PreparingServer {
  explicit PreparingServer(uint64_t epoch) : ring_epoch(epoch) {}
  uint64_t ring_epoch;
  uint64_t seen = 0;
  std::shared_ptr<const Ring> next;
  void Hear(const pb::Control& c) {
    if (c.cmd() == pb::Control::NODE_DEAD && c.has_ring() && c.ring().epoch() > ring_epoch) {
      ring_epoch = c.ring().epoch();
      if (next && next->epoch() <= ring_epoch) next = nullptr;
    }
    if (c.cmd() != pb::Control::RING_PREPARE || !RingCore::TakePrepare(c, ring_epoch, &seen)) {
      return;
    }
    auto r = RingCore::RingOf(c.ring());
    next = r->epoch() > ring_epoch ? r : nullptr;
  }
};

// The stall of fault.leave_survives_kill.ucx: a leave is prepared (epoch 2), a member dies,
// the failover ring (3) and the leave prepared again (4) go out; the runtime sends after
// letting go of its lock, and the first preparation, held up on the way to the stopped server,
// reached the others last. Taking it made them forget ring 4 (2 <= 3: no ring to prepare), so
// they never answered a refill asked under epoch 4 and the cut-over never came.
TEST(RingCoreTest, APreparationThatArrivesAfterANewerOneIsIgnored) {
  RingCore core({1, 2, 3, 4, 5}, kVnodes, 2, 1);
  ReportAll(&core, *core.ring());
  const std::vector<int> servers = {1, 2, 3, 4, 5};
  const RingCore::Decision leave = core.Leave(3, 10);
  ASSERT_TRUE(leave.prepare);
  const auto first = RingCore::Messages(leave, -1, servers, servers);
  const RingCore::Decision dead = core.NodeDead(2, 20);
  ASSERT_TRUE(dead.failover);
  ASSERT_TRUE(dead.prepare);
  const std::vector<int> live = {1, 3, 4, 5};
  const auto second = RingCore::Messages(dead, 2, live, live);
  ASSERT_EQ(second.size(), 2u);
  PreparingServer s{core.ring()->epoch() - 1};  // still at epoch 1
  for (const auto& f : second) s.Hear(f.msg);
  ASSERT_TRUE(s.next);
  EXPECT_EQ(s.next->epoch(), dead.prepare->epoch());
  s.Hear(first[0].msg);  // the stale preparation arrives last
  ASSERT_TRUE(s.next) << "a preparation issued before the one taken made the server forget it";
  EXPECT_EQ(s.next->epoch(), dead.prepare->epoch());

  // In order, the first preparation is taken and then replaced.
  PreparingServer t{1};
  t.Hear(first[0].msg);
  ASSERT_TRUE(t.next);
  EXPECT_EQ(t.next->epoch(), leave.prepare->epoch());
  for (const auto& f : second) t.Hear(f.msg);
  ASSERT_TRUE(t.next);
  EXPECT_EQ(t.next->epoch(), dead.prepare->epoch());
}

// A cancellation carries the current ring, whose epoch is older than the preparation it
// cancels: it names the epoch it used up, so it is taken after that preparation and a stale
// copy of that preparation is not taken after it.
TEST(RingCoreTest, ACancellationIsTakenAfterThePreparationItCancelsAndNotBeforeIt) {
  RingCore core({1, 2}, kVnodes, 1, 1);
  const RingCore::Decision join = core.ServerJoined(3, 0);
  const auto prepare = RingCore::Messages(join, -1, {1, 2, 3}, {1, 2, 3});
  const RingCore::Decision dead = core.NodeDead(3, 10);
  const auto cancel = RingCore::Messages(dead, 3, {1, 2}, {1, 2});
  ASSERT_EQ(cancel.size(), 2u);
  ASSERT_EQ(cancel[1].msg.cmd(), pb::Control::RING_PREPARE);
  EXPECT_EQ(cancel[1].msg.ring().epoch(), 1u) << "the current ring";
  EXPECT_GT(cancel[1].msg.prepare_epoch(), join.prepare->epoch());
  PreparingServer s{1};
  s.Hear(prepare[0].msg);
  ASSERT_TRUE(s.next);
  for (const auto& f : cancel) s.Hear(f.msg);
  EXPECT_FALSE(s.next) << "the cancellation was not taken";
  s.Hear(prepare[0].msg);  // a late copy of the cancelled preparation
  EXPECT_FALSE(s.next) << "the cancelled preparation was taken again";
}

// The ring of `cmd` that decision d sends, as a node reads it off the wire.
std::shared_ptr<const Ring> Heard(const RingCore::Decision& d, int dead, pb::Control::Command cmd,
                                  const std::vector<int>& live) {
  for (const auto& f : RingCore::Messages(d, dead, live, live)) {
    if (f.msg.cmd() == cmd && f.msg.has_ring()) return RingCore::RingOf(f.msg.ring());
  }
  return nullptr;
}

// A server that missed some of the scheduler's messages (they overtake each other) tells from
// the next one it hears whether what it copied for a preparation is whole: the rings say the
// last cut-over and, for a prepared ring, the ring it was prepared on (ps_sim --cluster
// --ctl-stall-every-s 0.3, seeds 11 and 897).
TEST(RingCoreTest, RingsOnTheWireSayWhetherAnEarlierPreparationWasCutOverOrDropped) {
  RingCore core({1, 2, 3}, kVnodes, 1, 1);
  ReportAll(&core, *core.ring());
  auto p = Heard(core.ServerJoined(4, 0), -1, pb::Control::RING_PREPARE, {1, 2, 3, 4});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->epoch(), 2u);
  EXPECT_EQ(p->cut_epoch(), 1u);
  EXPECT_EQ(p->base_epoch(), 1u);
  const RingCore::Decision dead = core.NodeDead(3, 10);
  auto failover = Heard(dead, 3, pb::Control::NODE_DEAD, {1, 2, 4});
  auto again = Heard(dead, 3, pb::Control::RING_PREPARE, {1, 2, 4});
  ASSERT_TRUE(failover && again);
  EXPECT_EQ(failover->cut_epoch(), 1u);
  EXPECT_EQ(again->base_epoch(), failover->epoch());
  EXPECT_FALSE(PrecopiesSurvive(*p, *failover)) << "a failover dropped the preparation";
  EXPECT_FALSE(PrecopiesSurvive(*p, *again)) << "prepared again after a failover dropped it";
  EXPECT_FALSE(MissedCut(p, *again, 1)) << "ring 2 was never put in force";

  auto cut = Heard(ReportAll(&core, *again, 20), -1, pb::Control::RING, {1, 2, 4});
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->epoch(), again->epoch());
  EXPECT_EQ(cut->cut_epoch(), cut->epoch());
  EXPECT_TRUE(PrecopiesSurvive(*again, *cut));

  // A server still at ring 1 that missed this RING hears the next preparation.
  auto next = Heard(core.ServerJoined(5, 30), -1, pb::Control::RING_PREPARE, {1, 2, 4, 5});
  ASSERT_TRUE(next);
  EXPECT_TRUE(PrecopiesSurvive(*again, *next)) << "the preparation was cut over";
  auto missed = MissedCut(again, *next, 1);
  ASSERT_TRUE(missed) << "the server must take the ring of the cut-over it missed";
  EXPECT_EQ(missed->epoch(), cut->epoch());
  EXPECT_EQ(missed->servers(), cut->servers());
  EXPECT_EQ(missed->cut_epoch(), cut->epoch());
  EXPECT_FALSE(MissedCut(again, *next, cut->epoch())) << "a server that has it takes nothing";

  // Replaced by a leave on the same ring: nothing was put in force in between.
  auto leave = Heard(core.Leave(1, 40), -1, pb::Control::RING_PREPARE, {1, 2, 4, 5});
  ASSERT_TRUE(leave);
  EXPECT_TRUE(PrecopiesSurvive(*next, *leave));
  // Dropped by a failover: the copies may lack updates.
  auto second = Heard(core.NodeDead(2, 50), 2, pb::Control::NODE_DEAD, {1, 4, 5});
  ASSERT_TRUE(second);
  EXPECT_EQ(second->cut_epoch(), cut->epoch());
  EXPECT_FALSE(PrecopiesSurvive(*leave, *second));
}

// A leaver that dies is a failure like any other: the preparation without it turns into the
// failover ring, and nothing waits for its reports.
TEST(RingCoreTest, ALeaverThatDiesIsAFailure) {
  RingCore core({1, 2, 3}, kVnodes, 1, 1);
  core.Leave(3, 0);
  const RingCore::Decision d = core.NodeDead(3, 5);
  ASSERT_TRUE(d.failover);
  EXPECT_EQ(d.failover->servers(), (std::vector<int>{1, 2}));
  EXPECT_EQ(d.prepare, core.ring()) << "nothing is left to prepare: cancelled";
  EXPECT_FALSE(core.next_ring());
  EXPECT_FALSE(core.HasLeft(3));
}

// Found by the random walk below: servers 1 and 2 leave, then server 3, the one meant to take
// over, dies. The preparation over "the servers left" was a ring of no server, which the next
// refill report cut over to at once (no server had anything to copy): every range gone, and no
// abort. The leaves are refused instead: the leavers keep the data, and their Leave() calls
// fail with the reason.
TEST(RingCoreTest, LeaversStayWhenEveryServerMeantToTakeOverDies) {
  RingCore core({1, 2, 3}, kVnodes, 2, 1);
  ASSERT_TRUE(core.Leave(1, 0).refused.empty());
  ASSERT_TRUE(core.Leave(2, 0).refused.empty());
  const RingCore::Decision d = core.NodeDead(3, 10);
  ASSERT_TRUE(d.abort.empty()) << d.abort;
  ASSERT_TRUE(d.failover);
  EXPECT_EQ(d.failover->servers(), (std::vector<int>{1, 2}));
  EXPECT_EQ(d.prepare, core.ring()) << "nothing to prepare: cancelled";
  EXPECT_EQ(d.refused_leaves, (std::vector<int>{1, 2}));
  ASSERT_FALSE(d.refused.empty());
  EXPECT_NE(d.refused.find("no other server is left"), std::string::npos) << d.refused;
  // They may ask again once a server joins.
  core.ServerJoined(4, 20);
  EXPECT_TRUE(core.Leave(1, 30).refused.empty());
}

// DESIGN §8, no silent loss: a server that finds ranges it must hold of which no server holds a
// complete copy (which the scheduler's count of copies did not show) stops the job, naming them.
TEST(RingCoreTest, ARefillReportOfRangesNoServerHoldsStopsTheJob) {
  RingCore core({1, 2, 3}, kVnodes, 1, 1);
  const Range lost(100, 200);
  const RingCore::Decision d = core.Refill(2, 0, 1, 0, 10, {lost});
  EXPECT_NE(d.abort.find("server node 2 should hold 1 key range(s) of which no server holds a "
                         "complete copy"),
            std::string::npos)
      << d.abort;
  EXPECT_NE(d.abort.find(CopyTracker::Describe({lost})), std::string::npos) << d.abort;
  EXPECT_TRUE(core.Refill(2, 0, 1, 0, 20).abort.empty()) << "a report without orphans";
}

// Seeded random joins, leaves, deaths and refill reports. After every event: epochs only grow
// and each one is issued once (a prepared or published ring never reuses one); the ring in
// force never holds a dead server; and once every live server of the target ring reports its
// ranges, no preparation is left pending (liveness: nothing stalls a join or leave); and no
// range is without a copy unless the job was aborted (no silent loss).
TEST(RingCoreTest, RandomEventsKeepEpochsFreshAndNeverStallAPreparation) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng(seed);
    RingCore core({1, 2, 3}, kVnodes, 2, 1);
    std::set<int> live = {1, 2, 3};
    std::set<uint64_t> issued = {1};
    uint64_t ring_epoch = 1;
    int next_id = 4;
    bool aborted = false;
    for (int step = 0; step < 150 && !aborted; ++step) {
      const int64_t now = step * 10;
      RingCore::Decision d;
      const uint64_t op = rng.Below(10);
      std::string what;
      if (op < 2) {
        what = "join " + std::to_string(next_id);
        live.insert(next_id);
        d = core.ServerJoined(next_id++, now);
      } else if (op < 4 && live.size() > 1) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng.Below(live.size())));
        const int id = *it;
        what = "death " + std::to_string(id);
        live.erase(it);
        d = core.NodeDead(id, now);
      } else if (op < 5) {
        const auto& srv = core.ring()->servers();
        const int id = srv[rng.Below(srv.size())];
        what = "leave " + std::to_string(id);
        d = core.Leave(id, now);
      } else {
        // One live server of the target ring reports, caught up or not.
        const auto& target = core.next_ring() ? core.next_ring() : core.ring();
        const int id = target->servers()[rng.Below(target->servers().size())];
        if (!live.count(id)) continue;
        what = "refill " + std::to_string(id);
        d = core.Refill(id, 0, target->epoch(), rng.Below(3) == 0 ? 1 : 0, now);
      }
      const std::string where =
          "seed " + std::to_string(seed) + " step " + std::to_string(step) + " (" + what + ")";
      if (!d.abort.empty()) {
        aborted = true;  // k + 1 failures in one chain: a legitimate end of the run
        break;
      }
      for (const auto& r : {d.failover, d.cut}) {
        if (!r) continue;
        ASSERT_GT(r->epoch(), ring_epoch) << where;
        ring_epoch = r->epoch();
      }
      if (d.failover) {
        ASSERT_TRUE(issued.insert(d.failover->epoch()).second) << where;
      }
      if (d.prepare && d.prepare != core.ring()) {
        ASSERT_TRUE(issued.insert(d.prepare->epoch()).second) << where;
      }
      ASSERT_EQ(core.ring()->epoch(), ring_epoch) << where;
      ASSERT_GE(core.epochs_issued(), *issued.rbegin()) << where;
      // No silent loss: without an abort every range has a copy somewhere.
      ASSERT_TRUE(core.copies().Orphans().empty())
          << where << ": " << CopyTracker::Describe(core.copies().Orphans());
      ASSERT_FALSE(core.ring()->servers().empty()) << where;
      for (int s : d.left) live.erase(s);
      for (int s : core.ring()->servers()) {
        ASSERT_TRUE(live.count(s)) << where << ": server " << s << " is dead or gone";
      }
    }
    if (aborted) continue;
    // Faults stop: every live server of the target ring reports; then nothing is pending.
    for (int round = 0; round < 3 && core.next_ring(); ++round) {
      const auto target = core.next_ring();
      for (int s : target->servers()) {
        ASSERT_TRUE(live.count(s)) << "seed " << seed << ": prepared with dead server " << s;
        core.Refill(s, 0, target->epoch(), 0, 10000);
      }
    }
    ASSERT_FALSE(core.next_ring())
        << "seed " << seed << ": a preparation stalled: " << core.PendingRefills();
  }
}

}  // namespace
}  // namespace ps
