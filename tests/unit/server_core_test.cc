// How a ServerCore validates the key frame of a request. The order of the keys is checked by
// the store in the same walk that finds their slots (one read of the frame, not two); these
// tests hold the server to the promises that made: a refused request applies nothing and is
// not recorded as applied, and a request that reaches no store call is still checked.
#include "kv/server_core.h"

#include <gtest/gtest.h>

#include <vector>

#include "consistency/barrier_policy.h"
#include "store/store.h"

namespace ps {
namespace {

constexpr int kServer = 1, kWorker = 7, kOther = 8;

Message Request(int worker, int64_t ts, const std::vector<Key>& keys, int64_t step = 0) {
  Message m;
  m.meta.set_sender(worker);
  m.meta.set_receiver(kServer);
  m.meta.set_request(true);
  m.meta.set_dtype(static_cast<int>(DataType::kInt64));
  m.meta.set_width(1);
  m.meta.set_timestamp(ts);
  m.meta.set_lwm(ts);
  m.meta.set_step(step);
  m.data.push_back(SArray<char>(SArray<Key>(keys)));
  return m;
}

Message Push(int worker, int64_t ts, const std::vector<Key>& keys, int64_t val) {
  Message m = Request(worker, ts, keys);
  m.meta.set_push(true);
  m.data.push_back(SArray<char>(SArray<int64_t>(std::vector<int64_t>(keys.size(), val))));
  return m;
}

struct Server {
  explicit Server(const char* policy)
      : core(
            0, DataType::kInt64, store, ParsePolicy(policy), 1, {kWorker, kOther},
            [this](Message& m) { replies.push_back(m); }, [this] { return now; }, kServer) {}
  int64_t now = 0;  // the core's clock (µs)
  std::shared_ptr<Store<int64_t>> store =
      std::make_shared<Store<int64_t>>(std::make_shared<SumRule<int64_t>>());
  std::vector<Message> replies;
  ServerCore core;

  std::vector<int64_t> Values(const std::vector<Key>& keys) {
    SArray<char> vals;
    SArray<int> lens;
    EXPECT_EQ(store->Pull(keys.data(), keys.size(), 1, &vals, &lens), "");
    return SArray<int64_t>(vals).ToVector();
  }
};

TEST(ServerCoreTest, APushWithKeysOutOfOrderIsRefusedAndItsCorrectedResendApplied) {
  Server s("asp");
  Message first = Push(kWorker, 0, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 3);
  s.core.Process(first);
  ASSERT_EQ(s.replies.back().meta.error(), "");
  // The same keys again, two of them swapped in the middle of the stored stretch.
  Message bad = Push(kWorker, 1, {1, 2, 3, 4, 6, 5, 7, 8, 9, 10}, 100);
  s.core.Process(bad);
  EXPECT_EQ(s.replies.back().meta.error(), kUnsortedKeys);
  EXPECT_EQ(s.Values({1, 5, 6, 10}), (std::vector<int64_t>{3, 3, 3, 3}));
  // The refused push was not recorded as applied: the corrected one of the same identity is
  // applied, not taken for a copy.
  Message good = Push(kWorker, 1, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 100);
  s.core.Process(good);
  EXPECT_EQ(s.replies.back().meta.error(), "");
  EXPECT_EQ(s.core.duplicates(), 0u);
  EXPECT_EQ(s.Values({1, 5, 6, 10}), (std::vector<int64_t>{103, 103, 103, 103}));
  // A repeated key among new ones, and a pull out of order.
  Message dup = Push(kWorker, 2, {20, 21, 21, 22}, 1);
  s.core.Process(dup);
  EXPECT_EQ(s.replies.back().meta.error(), kUnsortedKeys);
  EXPECT_EQ(s.store->size(), 10u);
  Message pull = Request(kWorker, 3, {3, 2});
  pull.meta.set_pull(true);
  s.core.Process(pull);
  EXPECT_EQ(s.replies.back().meta.error(), kUnsortedKeys);
}

// A pull that the barrier holds reaches no store call until it is released; its keys are
// checked when it arrives, so it is refused at once instead of being held and refused later.
TEST(ServerCoreTest, APullTheBarrierWouldHoldIsRefusedAtOnceWhenItsKeysAreOutOfOrder) {
  Server s("bsp");
  Message ahead = Request(kWorker, 0, {5, 3}, /*step=*/1);
  ahead.meta.set_pull(true);
  s.core.Process(ahead);
  ASSERT_EQ(s.replies.size(), 1u) << "held instead of refused";
  EXPECT_EQ(s.replies.back().meta.error(), kUnsortedKeys);
  // The same pull with its keys in order is held until the other worker reaches step 1.
  Message held = Request(kWorker, 1, {3, 5}, /*step=*/1);
  held.meta.set_pull(true);
  s.core.Process(held);
  EXPECT_EQ(s.replies.size(), 1u);
}

// Issue 19: a pull the barrier holds for long is never silent. The server names the read and
// the workers behind it with their steps (it said nothing until the worker's timeout).
TEST(ServerCoreTest, AReadHeldForLongNamesTheWorkersBehindIt) {
  Server s("bsp");
  Message push = Push(kWorker, 0, {3}, 1);
  s.core.Process(push);
  Message pull = Request(kWorker, 2, {3}, /*step=*/1);
  pull.meta.set_pull(true);
  s.core.Process(pull);  // kOther is still at step 0: held under BSP
  EXPECT_EQ(s.core.HeldReport(ServerCore::kHeldReportUs), "") << "not held long yet";
  s.now += ServerCore::kHeldReportUs + 1500000;
  EXPECT_EQ(s.core.HeldReport(ServerCore::kHeldReportUs),
            "pull of worker node 7 at step 1 held 6.5 s under bsp (1 held); behind it: worker "
            "node 8 at step 0");
  // The pulling worker hears it too, on the server's tick, once per kHeldReportUs: a message
  // of the pull's identity with no data, so its Wait can name the workers if it times out.
  s.replies.clear();
  s.core.Tick();
  ASSERT_EQ(s.replies.size(), 1u);
  const Message& n = s.replies.back();
  EXPECT_EQ(n.meta.receiver(), kWorker);
  EXPECT_EQ(n.meta.timestamp(), 2);
  EXPECT_FALSE(n.meta.request());
  EXPECT_TRUE(n.data.empty());
  EXPECT_EQ(n.meta.held_why(),
            "server node 1: held 6.5 s under bsp; behind it: worker node 8 at step 0");
  s.core.Tick();
  EXPECT_EQ(s.replies.size(), 1u) << "told again before kHeldReportUs passed";
  s.now += ServerCore::kHeldReportUs;
  s.core.Tick();
  EXPECT_EQ(s.replies.size(), 2u);
}

Message TaskPush(int worker, int64_t ts, int task, int64_t seq, int64_t task_lwm,
                 const std::vector<Key>& keys) {
  Message m = Push(worker, ts, keys, 1);
  m.meta.set_task(task);
  m.meta.set_task_ts(seq);
  m.meta.set_task_lwm(task_lwm);
  return m;
}

// PushForTask: a task's pushes are one request stream whoever sends them, so a task a dead
// worker left half pushed is redone by another worker without counting anything twice — also
// when the redo slices a push differently (a new ring) — and a closed task takes nothing more.
TEST(ServerCoreTest, APushForATaskIsAppliedOnceWhicheverWorkerSendsIt) {
  Server s("asp");
  Message a0 = TaskPush(kWorker, 0, 3, 0, 0, {1, 2, 3});
  s.core.Process(a0);
  Message a1 = TaskPush(kWorker, 1, 3, 1, 0, {4, 5});
  s.core.Process(a1);
  ASSERT_EQ(s.replies.back().meta.error(), "");
  EXPECT_EQ(s.replies.back().meta.timestamp(), 1) << "replies carry the worker's numbering";
  s.core.WorkerDead(kWorker);
  // The other worker redoes task 3 from its start with its own timestamps: seq 1 now also
  // holds key 9 (it went to another server before), and seq 2 is new.
  for (auto m : {TaskPush(kOther, 40, 3, 0, 0, {1, 2, 3}), TaskPush(kOther, 41, 3, 1, 0, {4, 5, 9}),
                 TaskPush(kOther, 42, 3, 2, 0, {6})}) {
    s.core.Process(m);
    ASSERT_EQ(s.replies.back().meta.error(), "");
  }
  EXPECT_EQ(s.Values({1, 2, 3, 4, 5, 6, 9}), (std::vector<int64_t>(7, 1)));
  EXPECT_EQ(s.core.duplicates(), 2u);
  // Another task with the same seqs is a stream of its own.
  Message other = TaskPush(kOther, 43, 4, 0, 0, {1});
  s.core.Process(other);
  EXPECT_EQ(s.Values({1}), (std::vector<int64_t>{2}));
  // Closed, task 3 takes nothing more: a late copy is acknowledged, not applied.
  Message close = Request(kOther, 44, {});
  close.data.clear();
  close.meta.set_op(pb::Meta::TASK_CLOSE);
  close.meta.set_task(3);
  s.core.Process(close);
  ASSERT_EQ(s.replies.back().meta.error(), "");
  Message late = TaskPush(kOther, 45, 3, 2, 0, {6});
  s.core.Process(late);
  EXPECT_EQ(s.replies.back().meta.error(), "");
  EXPECT_EQ(s.Values({6}), (std::vector<int64_t>{1}));
  // A push for a task cannot pull.
  Message pull = TaskPush(kOther, 46, 5, 0, 0, {1});
  pull.meta.set_pull(true);
  s.core.Process(pull);
  EXPECT_NE(s.replies.back().meta.error(), "");
}

}  // namespace
}  // namespace ps
