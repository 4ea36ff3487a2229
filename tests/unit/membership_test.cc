#include "control/membership.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace ps {
namespace {

Registration Reg(Role role, int port, int hint = -1) {
  Registration r;
  r.role = role;
  r.host = "127.0.0.1";
  r.port = port;
  r.rank_hint = hint;
  return r;
}

Registration InGroup(int port, const std::string& group, int hint = -1) {
  Registration r = Reg(Role::kWorker, port, hint);
  r.group = group;
  return r;
}

TEST(MembershipTest, WorkerGroupsTakeTheirSizesAndRankTheirMembers) {
  Membership m(1, 3, "127.0.0.1", 9000);
  m.SetWorkerGroups({{"train", 2}, {"eval", 1}});
  std::string why;
  EXPECT_EQ(m.Register(InGroup(1, "nope"), &why), Membership::RegisterResult::kRejected);
  EXPECT_NE(why.find("'nope'"), std::string::npos) << why;
  EXPECT_EQ(m.Register(InGroup(2, "eval", 2), &why), Membership::RegisterResult::kPending);
  EXPECT_EQ(m.Register(InGroup(3, "eval"), &why), Membership::RegisterResult::kRejected);
  EXPECT_NE(why.find("group eval"), std::string::npos) << why;
  EXPECT_EQ(m.Register(InGroup(4, "train", 1), &why), Membership::RegisterResult::kPending);
  EXPECT_EQ(m.Register(Reg(Role::kServer, 5), &why), Membership::RegisterResult::kPending);
  EXPECT_EQ(m.Register(InGroup(6, "train", 0), &why), Membership::RegisterResult::kComplete);
  std::vector<std::tuple<int, std::string, int>> got;  // rank, group, group rank
  for (const auto& n : m.nodes()) {
    if (n.role == Role::kWorker) got.emplace_back(n.rank, n.group, n.group_rank);
  }
  EXPECT_EQ(got, (std::vector<std::tuple<int, std::string, int>>{
                     {0, "train", 0}, {1, "train", 1}, {2, "eval", 0}}));
  // A barrier of one group waits for its members only.
  const int eval = WorkerGroupBarrier(1), train = WorkerGroupBarrier(0);
  EXPECT_EQ(Membership::GroupNames(eval, {{"train", 2}, {"eval", 1}}), "the workers of group eval");
  const int id_eval = m.IdOf("127.0.0.1", 2);
  EXPECT_EQ(m.EnterBarrier(id_eval, eval, 1), (std::vector<int>{id_eval}));
  EXPECT_TRUE(m.EnterBarrier(m.IdOf("127.0.0.1", 6), train, 1).empty());
  EXPECT_TRUE(m.EnterBarrier(id_eval, train, 1).empty());  // not a member: ignored
  EXPECT_EQ(m.Awaited(train, 1), (std::vector<int>{m.IdOf("127.0.0.1", 4)}));
  // A joiner names its group and ranks after its members.
  Registration j = InGroup(7, "eval");
  j.join = true;
  ASSERT_EQ(m.Register(j, &why), Membership::RegisterResult::kJoined);
  EXPECT_EQ(m.nodes().back().group_rank, 1);
  EXPECT_EQ(m.nodes().back().rank, 3);
}

TEST(MembershipTest, AGroupTheJobDidNotHaveJoinsTheRunningJob) {
  std::vector<std::pair<std::string, int>> g;
  JoinGroup(&g, "", 3);  // a plain joiner of a plain job: still no groups
  EXPECT_TRUE(g.empty());
  JoinGroup(&g, "eval", 3);
  JoinGroup(&g, "eval", 3);
  EXPECT_EQ(g, (std::vector<std::pair<std::string, int>>{{"", 3}, {"eval", 2}}));
  Membership m(1, 1, "127.0.0.1", 9000);
  m.SetWorkerGroups({{"train", 1}});
  std::string why;
  m.Register(Reg(Role::kServer, 1), &why);
  // Before the job runs, only the job's groups register.
  EXPECT_EQ(m.Register(InGroup(2, "eval"), &why), Membership::RegisterResult::kRejected);
  ASSERT_EQ(m.Register(InGroup(3, "train"), &why), Membership::RegisterResult::kComplete);
  Registration j = InGroup(4, "eval");
  j.join = true;
  ASSERT_EQ(m.Register(j, &why), Membership::RegisterResult::kJoined);
  EXPECT_EQ(m.nodes().back().group, "eval");
  EXPECT_EQ(m.nodes().back().group_rank, 0);
  // A barrier of the new group (index 1) waits for its member only.
  const int id = m.IdOf("127.0.0.1", 4);
  EXPECT_EQ(m.EnterBarrier(id, WorkerGroupBarrier(1), 1), (std::vector<int>{id}));
  // A joiner of a grouped job must name a group.
  Registration none = InGroup(5, "");
  none.join = true;
  EXPECT_EQ(m.Register(none, &why), Membership::RegisterResult::kRejected);
}

TEST(MembershipTest, AssignsIdsOnceAllExpectedNodesArrive) {
  Membership m(2, 1, "127.0.0.1", 9000);
  std::string why;
  EXPECT_EQ(m.Register(Reg(Role::kWorker, 1), &why), Membership::RegisterResult::kPending);
  EXPECT_EQ(m.Register(Reg(Role::kServer, 2), &why), Membership::RegisterResult::kPending);
  EXPECT_FALSE(m.complete());
  EXPECT_EQ(m.Missing(), "1 of 2 servers and 1 of 1 workers registered");
  EXPECT_EQ(m.Register(Reg(Role::kServer, 3), &why), Membership::RegisterResult::kComplete);
  ASSERT_TRUE(m.complete());
  EXPECT_EQ(m.epoch(), 1u);
  ASSERT_EQ(m.nodes().size(), 4u);
  EXPECT_EQ(m.nodes()[0].role, Role::kScheduler);
  EXPECT_EQ(m.ServerIds(), (std::vector<int>{1, 2}));
  EXPECT_EQ(m.nodes()[3].role, Role::kWorker);
  EXPECT_EQ(m.nodes()[3].id, 3);
}

TEST(MembershipTest, RankHintsWinOverArrivalOrder) {
  Membership m(3, 1, "h", 1);
  std::string why;
  m.Register(Reg(Role::kServer, 10, 2), &why);
  m.Register(Reg(Role::kServer, 11, 0), &why);
  m.Register(Reg(Role::kServer, 12, 1), &why);
  m.Register(Reg(Role::kWorker, 13), &why);
  ASSERT_TRUE(m.complete());
  EXPECT_EQ(m.nodes()[1].port, 11);
  EXPECT_EQ(m.nodes()[2].port, 12);
  EXPECT_EQ(m.nodes()[3].port, 10);
}

TEST(MembershipTest, DuplicatesAreIgnoredAndExtrasRejected) {
  Membership m(1, 1, "h", 1);
  std::string why;
  m.Register(Reg(Role::kServer, 10), &why);
  EXPECT_EQ(m.Register(Reg(Role::kServer, 10), &why), Membership::RegisterResult::kDuplicate);
  EXPECT_EQ(m.Register(Reg(Role::kServer, 11), &why), Membership::RegisterResult::kRejected);
  EXPECT_NE(why.find("PS_NUM_SERVERS"), std::string::npos);
}

TEST(MembershipTest, BarrierReleasesOnlyWhenEveryMemberArrived) {
  Membership m(1, 2, "h", 1);
  std::string why;
  m.Register(Reg(Role::kServer, 10), &why);
  m.Register(Reg(Role::kWorker, 11), &why);
  m.Register(Reg(Role::kWorker, 12), &why);
  EXPECT_TRUE(m.EnterBarrier(2, kWorkerGroup, 1).empty());
  EXPECT_TRUE(m.EnterBarrier(1, kWorkerGroup, 1).empty()) << "a server is not a worker member";
  // The same worker entering the next barrier does not complete this one.
  EXPECT_TRUE(m.EnterBarrier(2, kWorkerGroup, 2).empty());
  // Who each barrier still waits for (Finalize names them while it waits).
  EXPECT_EQ(m.Awaited(kWorkerGroup, 1), (std::vector<int>{3}));
  EXPECT_EQ(m.Awaited(kWorkerGroup, 3), (std::vector<int>{2, 3}));
  EXPECT_EQ(m.Awaited(kAllGroups, 1), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(m.EnterBarrier(3, kWorkerGroup, 1), (std::vector<int>{2, 3}));
  EXPECT_EQ(m.EnterBarrier(3, kWorkerGroup, 2), (std::vector<int>{2, 3}));
}

TEST(MembershipTest, SilentNodesAreReported) {
  Membership m(1, 1, "h", 1);
  std::string why;
  m.Register(Reg(Role::kServer, 10), &why);
  m.Register(Reg(Role::kWorker, 11), &why);
  EXPECT_EQ(m.Heartbeat(1, 1000), 0);  // not heard from before
  EXPECT_EQ(m.Heartbeat(2, 5000), 0);
  EXPECT_EQ(m.Silent(6000, 2000), (std::vector<int>{1}));
  // How long a node had been silent when it spoke again: the scheduler's near-miss warning.
  EXPECT_EQ(m.Heartbeat(1, 6500), 5500);
  EXPECT_EQ(m.Heartbeat(1, 6600), 100);
}

TEST(MembershipTest, TheSchedulersOwnPauseIsNobodysSilence) {
  Membership m(1, 1, "h", 1);
  std::string why;
  m.Register(Reg(Role::kServer, 10), &why);
  m.Register(Reg(Role::kWorker, 11), &why);
  m.Heartbeat(1, 1000);
  m.Heartbeat(2, 1700);
  // The scheduler looked last at 1800 and next at 4000: its beats waited unread meanwhile.
  m.Paused(4000, 2200);
  EXPECT_TRUE(m.Silent(4000, 800).empty());
  // Silence counts again from the end of the pause: node 1 had been silent 800 ms before it.
  EXPECT_EQ(m.Silent(4050, 800), (std::vector<int>{1}));
  EXPECT_EQ(m.Silent(4700, 800), (std::vector<int>{1}));
  EXPECT_EQ(m.Silent(4701, 800), (std::vector<int>{1, 2}));
  // A credit never puts a last word into the future: a node heard at the end of a pause is
  // silent from then on, not from later.
  m.Heartbeat(2, 5000);
  m.Paused(5100, 1000);
  EXPECT_EQ(m.Heartbeat(2, 5900), 800);
}

}  // namespace
}  // namespace ps

namespace ps {
namespace {

TEST(MembershipJoinTest, WorkerJoinsARunningJobWithTheNextIdAndRank) {
  Membership m(1, 2, "h", 1);
  std::string why;
  Registration early = Reg(Role::kWorker, 50);
  early.join = true;
  // Before the job starts a joiner just waits (its registration is repeated).
  EXPECT_EQ(m.Register(early, &why), Membership::RegisterResult::kDuplicate);
  m.Register(Reg(Role::kServer, 10), &why);
  m.Register(Reg(Role::kWorker, 11), &why);
  ASSERT_EQ(m.Register(Reg(Role::kWorker, 12), &why), Membership::RegisterResult::kComplete);
  // Without the join flag the job is full, and the message says how to join.
  EXPECT_EQ(m.Register(Reg(Role::kWorker, 13), &why), Membership::RegisterResult::kRejected);
  EXPECT_NE(why.find("PS_JOIN"), std::string::npos) << why;
  ASSERT_EQ(m.Register(early, &why), Membership::RegisterResult::kJoined);
  EXPECT_EQ(m.nodes().back().id, 4);
  EXPECT_EQ(m.nodes().back().rank, 2);
  EXPECT_EQ(m.IdOf("127.0.0.1", 50), 4);
  EXPECT_EQ(m.Register(early, &why), Membership::RegisterResult::kDuplicate);
  // A server joins too, with the next id and the next server rank.
  Registration server = Reg(Role::kServer, 60);
  server.join = true;
  ASSERT_EQ(m.Register(server, &why), Membership::RegisterResult::kJoined);
  EXPECT_EQ(m.nodes().back().id, 5);
  EXPECT_EQ(m.nodes().back().role, Role::kServer);
  EXPECT_EQ(m.nodes().back().rank, 1);
}

// What the scheduler reports of a barrier held for long: who is in, who it waits for, by the
// names users know (role and rank), and its groups in words.
TEST(MembershipTest, OpenBarriersNameWhoTheyWaitFor) {
  Membership m(1, 2, "h", 1);
  std::string why;
  m.Register(Reg(Role::kServer, 10), &why);
  m.Register(Reg(Role::kWorker, 11), &why);
  m.Register(Reg(Role::kWorker, 12), &why);
  EXPECT_TRUE(m.OpenBarriers().empty());
  m.EnterBarrier(2, kWorkerGroup, 1);
  m.EnterBarrier(1, kAllGroups, 4);
  auto open = m.OpenBarriers();
  ASSERT_EQ(open.size(), 2u);
  EXPECT_EQ(open[0].groups, kWorkerGroup);
  EXPECT_EQ(open[0].seq, 1u);
  EXPECT_EQ(open[0].arrived, (std::vector<int>{2}));
  EXPECT_EQ(open[0].awaited, (std::vector<int>{3}));
  EXPECT_EQ(open[1].awaited, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(m.Describe(3), "worker 1 (node 3)");
  EXPECT_EQ(m.Describe(1), "server 0 (node 1)");
  EXPECT_EQ(m.Describe(0), "the scheduler");
  EXPECT_EQ(Membership::GroupNames(kWorkerGroup), "the workers");
  EXPECT_EQ(Membership::GroupNames(kServerGroup | kWorkerGroup), "the servers and the workers");
  EXPECT_EQ(Membership::GroupNames(kAllGroups), "every node");
  // A death that leaves only arrived members releases it: no longer open.
  m.MarkDead(3);
  EXPECT_EQ(m.OpenBarriers().size(), 1u);
}

TEST(MembershipJoinTest, JoinerTakesPartInBarriersNotReleasedYet) {
  Membership m(1, 1, "h", 1);
  std::string why;
  m.Register(Reg(Role::kServer, 10), &why);
  m.Register(Reg(Role::kWorker, 11), &why);
  // Barrier 1 over servers and workers completes; barrier 2 is in progress.
  const int g = kServerGroup | kWorkerGroup;
  m.EnterBarrier(1, g, 1);
  EXPECT_EQ(m.EnterBarrier(2, g, 1).size(), 2u);
  EXPECT_EQ(m.released().at(g), 1u);
  EXPECT_TRUE(m.EnterBarrier(1, g, 2).empty());
  Registration j = Reg(Role::kWorker, 12);
  j.join = true;
  ASSERT_EQ(m.Register(j, &why), Membership::RegisterResult::kJoined);
  // The joiner starts counting at 1, so its next barrier is 2: the one in progress waits for it.
  EXPECT_TRUE(m.EnterBarrier(2, g, 2).empty());
  EXPECT_EQ(m.EnterBarrier(3, g, 2).size(), 3u);
  // A dead member no longer holds a barrier back.
  EXPECT_TRUE(m.EnterBarrier(1, g, 3).empty());
  EXPECT_TRUE(m.EnterBarrier(2, g, 3).empty());
  m.Heartbeat(3, 0);
  auto rel = m.MarkDead(3);
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_EQ(rel[0].seq, 3u);
  EXPECT_EQ(rel[0].ids, (std::vector<int>{1, 2}));
  // Dead nodes are not reported again, even when a late message of theirs arrives.
  m.Heartbeat(3, 1);
  auto silent = m.Silent(1000000, 10);
  EXPECT_EQ(std::count(silent.begin(), silent.end(), 3), 0);
  EXPECT_TRUE(m.IsDead(3));
}

}  // namespace
}  // namespace ps
