// Moving key ranges between servers while the ring changes (ServerCore's refill and hand-off,
// src/kv/server_refill.cc): what a source answers under which ring, what a server copied for a
// preparation that was dropped, and requests held for a hand-over. ServerCores over links the
// tests deliver by hand (server_pair.h).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kv/server_core.h"
#include "server_pair.h"

namespace ps {
namespace {

using test::FirstKey;
using test::HoldsKey;
using test::kWorker;
using test::Pair;
using test::ValueAt;

// A join prepared (epoch 2: server 4 joins servers 1-3), dropped when server 3 dies (the
// failover ring, 3), and prepared again (4), as the scheduler sends them (RingCore: the last
// cut-over, and the ring each preparation was made on). k: a key that server 1 masters under
// the rings in force and whose chain holds the joiner under both preparations.
struct RedoneJoin {
  static constexpr int kSource = 1, kDying = 3, kJoiner = 4;
  std::shared_ptr<const Ring> first = std::make_shared<Ring>(std::vector<int>{1, 2, 3}, 8, 1, 1);
  std::shared_ptr<const Ring> prepared =
      std::make_shared<Ring>(std::vector<int>{1, 2, 3, 4}, 8, 1, 2, 1, 1);
  std::shared_ptr<const Ring> failover =
      std::make_shared<Ring>(std::vector<int>{1, 2}, 8, 1, 3, 1, 0);
  std::shared_ptr<const Ring> again =
      std::make_shared<Ring>(std::vector<int>{1, 2, 4}, 8, 1, 4, 1, 3);
  Key k = FirstKey([this](Key c) {
    return first->Owner(c) == kSource && failover->Owner(c) == kSource &&
           HoldsKey(*prepared, kJoiner, c) && HoldsKey(*again, kJoiner, c);
  });

  // Server 3 dies; the failover ring reaches servers 1 and 2, not yet the joiner.
  void FailOver(Pair* p) const {
    p->Kill(kDying);
    p->CutAt(2, failover);
    p->CutAt(kSource, failover);
  }
  // The join prepared again and cut over: the joiner must hold the push of k.
  void PrepareAgainAndCutOver(Pair* p) const {
    p->Prepare(again);
    p->Run(1000 * 1000, 100 * 1000);
    p->Cut(again);
    p->Run(1000 * 1000, 100 * 1000);
    EXPECT_EQ(ValueAt(p, kJoiner, k), 1) << "the joiner lacks an acknowledged push";
  }
};

// A new master holds the requests for a range whose old master's last updates have not all
// arrived (the hand-over). When a newer ring moves the range away and, while this server takes
// that ring in, the old master's report for another range completes the hand-over, the held
// requests are served then: before, they were served inside the ring change, before the server
// had taken the new ring's epoch in, so a request routed under the old ring passed as current
// and the server applied it as the master of keys it no longer mastered; the new master never
// had the update (ps_sim --cluster --policy bsp --join-every-s 1, seed 135, once the simulated
// workers re-planned only what KVWorker re-plans). It must be redirected.
TEST(ServerRefillTest, RequestsHeldForAHandOverAreServedUnderTheRingThatEndsIt) {
  const int old_master = 1, joiner = 2, later = 3;
  Pair p(3, std::make_shared<Ring>(std::vector<int>{old_master}, 8, 1, 1));
  auto b = std::make_shared<Ring>(std::vector<int>{old_master, joiner}, 8, 1, 2);
  // At c the old master leaves and another server joins.
  auto c = std::make_shared<Ring>(std::vector<int>{joiner, later}, 8, 1, 3);
  // x: the old master's under the first ring, the joiner's under b, another's under c; and the
  // joiner takes some range of the old master over at c too (the old master's report of it
  // then completes the hand-over).
  const Key x = FirstKey([&](Key k) {
    return p.ring().Owner(k) == old_master && b->Owner(k) == joiner && c->Owner(k) != joiner;
  });
  const Key f = FirstKey([&](Key k) { return b->Owner(k) == old_master && c->Owner(k) == joiner; });
  ASSERT_NE(x, 0u);
  ASSERT_NE(f, 0u);
  p.Prepare(b);
  p.Drain();
  p.Cut(b);
  // The old master's report, and the joiner's asking for it, are late.
  p.link(old_master, joiner).clear();
  p.link(joiner, old_master).clear();
  p.PushKey(0, x);  // routed under b: the joiner holds it until the hand-over
  ASSERT_TRUE(p.link(joiner, kWorker).empty());
  p.Prepare(c);
  p.Drain();
  // The old master takes c in first: its report of the ranges it gives up at c reaches the
  // joiner before the joiner has c.
  p.CutAt(old_master, c);
  p.Deliver(old_master, joiner);
  p.CutAt(joiner, c);
  ASSERT_EQ(p.link(joiner, kWorker).size(), 1u) << "the held push was not answered";
  const Message reply = p.link(joiner, kWorker).front();
  EXPECT_TRUE(reply.meta.redirect()) << "served under c as if routed under it";
  EXPECT_EQ(ValueAt(&p, joiner, x), 0) << "applied by a server that no longer masters it";
}

// A refill asked under a prepared ring reached its source after a failover ring had dropped
// that preparation, and before the preparation made again: the source, under a ring in which
// the asker holds nothing, answered with a snapshot and sent the asker none of the updates it
// applied next, and the asker kept that snapshot once the preparation came again (ps_sim
// --cluster --ctl-stall-every-s 0.3, seed 78: the failover ring reached the source at once,
// the new preparation late; the joiner lost an acknowledged push). The source waits for a ring
// under which the asker holds the ranges.
TEST(ServerRefillTest, ARefillIsAnsweredOnlyUnderARingInWhichTheAskerHoldsTheRanges) {
  const RedoneJoin j;
  const int source = j.kSource, joiner = j.kJoiner;
  ASSERT_NE(j.k, 0u);
  Pair p(4, j.first);
  p.Prepare(j.prepared);
  ASSERT_FALSE(p.link(joiner, source).empty()) << "the joiner asks the source";
  std::deque<Message> ask;
  ask.swap(p.link(joiner, source));
  j.FailOver(&p);
  for (auto& m : ask) p.server(source).Process(m);
  p.PushKey(0, j.k);
  for (auto& m : p.link(source, joiner)) p.server(joiner).Process(m);
  p.link(source, joiner).clear();
  j.PrepareAgainAndCutOver(&p);
}

// The other half of the same race: the source answered under the first preparation, then
// followed the failover ring (in which the joiner holds nothing, so its updates no longer
// went to the joiner), and the joiner heard of the preparation made again before the
// failover. It kept its snapshot and lost the push applied in between (ps_sim --cluster
// --seed 11 --ctl-stall-every-s 0.3: "the SSP read guarantee"). Pre-copied ranges are now
// fetched again whenever the preparation they were copied for is replaced.
TEST(ServerRefillTest, ASnapshotForADroppedPreparationIsFetchedAgainForTheNext) {
  const RedoneJoin j;
  ASSERT_NE(j.k, 0u);
  Pair p(4, j.first);
  p.Prepare(j.prepared);
  p.Drain();  // the joiner holds its snapshot of the first preparation
  ASSERT_EQ(p.server(j.kJoiner).PendingRanges(), 0u);
  j.FailOver(&p);
  p.PushKey(0, j.k);
  p.Drain();
  ASSERT_EQ(p.replied(), 1u);
  j.PrepareAgainAndCutOver(&p);
}

// A source holds back a refill request it cannot answer yet (here: asked under a ring it has
// not heard of). Once the asker is declared dead nobody takes the answer: the request is
// dropped, not kept (and logged as holding a cut-over back) until the end of the job.
TEST(ServerRefillTest, ARefillRequestOfANodeDeclaredDeadIsDropped) {
  const RedoneJoin j;
  const int source = j.kSource, joiner = j.kJoiner;
  Pair p(4, j.first);
  p.server(joiner).Prepare(j.prepared);  // the others have not heard of it yet
  ASSERT_FALSE(p.link(joiner, source).empty()) << "the joiner asks the source";
  p.Deliver(joiner, source);
  ASSERT_EQ(p.server(source).WaitingRefills(), 1u);
  p.Kill(joiner);
  p.server(source).WorkerDead(joiner, /*worker=*/false);
  EXPECT_EQ(p.server(source).WaitingRefills(), 0u) << "a dead asker's request is kept";
}

// A master that took a preparation (server 4 joins) before the failover ring it was made on
// (server 2 died; separate fan-outs) re-routed its copies in flight to the joiner along the
// failover ring's chains, which do not hold the joiner, and acknowledged the push: after the
// cut-over the joiner mastered the key without it (ps_sim --cluster --seed 1557
// --ctl-stall-every-s 0.3 --join-every-s 1 --crash-every-s 1.5 --leave-every-s 2). The
// servers of a preparation still ahead are alive to the chain replicator.
TEST(ServerRefillTest, AFailoverRingHeardAfterAPreparationKeepsTheCopiesToItsJoiner) {
  const int master = 1, dying = 2, joiner = 4;
  auto first = std::make_shared<Ring>(std::vector<int>{1, 2, 3}, 8, 1, 1);
  auto failover = std::make_shared<Ring>(std::vector<int>{1, 3}, 8, 1, 2, 1, 0);
  auto prepared = std::make_shared<Ring>(std::vector<int>{1, 3, 4}, 8, 1, 3, 1, 2);
  const Key k = FirstKey([&](Key c) {
    return first->Owner(c) == master && failover->Owner(c) == master &&
           prepared->Owner(c) == joiner;
  });
  ASSERT_NE(k, 0u);
  Pair p(4, first);
  p.Prepare(prepared);  // every server, before the failover ring
  p.Drain();
  ASSERT_EQ(p.server(joiner).PendingRanges(), 0u);
  p.Kill(dying);
  p.PushKey(0, k);
  std::deque<Message> to_joiner;
  to_joiner.swap(p.link(master, joiner));
  ASSERT_FALSE(to_joiner.empty()) << "the master copies the push to the joiner";
  p.Drain();
  p.CutAt(master, failover);
  p.CutAt(3, failover);
  p.Drain();
  EXPECT_EQ(p.replied(), 0u) << "acknowledged while the joiner lacks it";
  for (auto& m : to_joiner) p.server(joiner).Process(m);
  p.Drain();
  EXPECT_EQ(p.replied(), 1u);
  EXPECT_EQ(ValueAt(&p, joiner, k), 1);
}

}  // namespace
}  // namespace ps
