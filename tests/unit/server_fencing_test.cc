// A worker declared dead stays dead (DESIGN §8, issue 15 item 4): a server refuses what it
// still sends — a resend of a push it applied before, or a new push after a stall ended — so
// nothing of it is applied again after its work went to others, and the worker hears why.
#include <gtest/gtest.h>

#include <vector>

#include "consistency/barrier_policy.h"
#include "kv/server_core.h"
#include "store/store.h"

namespace ps {
namespace {

constexpr int kServer = 1, kWorker = 7, kOther = 8;

// A request of one int64 key from `worker`, its only one in flight.
Message Request(int worker, int64_t ts, Key key) {
  Message m;
  m.meta.set_sender(worker);
  m.meta.set_receiver(kServer);
  m.meta.set_request(true);
  m.meta.set_dtype(static_cast<int>(DataType::kInt64));
  m.meta.set_width(1);
  m.meta.set_timestamp(ts);
  m.meta.set_lwm(ts);
  m.data.push_back(SArray<char>(SArray<Key>{key}));
  return m;
}

Message Push(int worker, int64_t ts, Key key, int64_t val) {
  Message m = Request(worker, ts, key);
  m.meta.set_push(true);
  m.data.push_back(SArray<char>(SArray<int64_t>{val}));
  return m;
}

struct Server {
  std::shared_ptr<Store<int64_t>> store =
      std::make_shared<Store<int64_t>>(std::make_shared<SumRule<int64_t>>());
  std::vector<Message> replies;
  ServerCore core{0,
                  DataType::kInt64,
                  store,
                  ParsePolicy("asp"),
                  1,
                  {kWorker, kOther},
                  [this](Message& m) { replies.push_back(m); },
                  [] { return int64_t{0}; },
                  kServer};
  int64_t Value(Key k) {
    Message pull = Request(kOther, 1000 + static_cast<int64_t>(replies.size()), k);
    pull.meta.set_pull(true);
    core.Process(pull);
    const Message& r = replies.back();
    EXPECT_EQ(r.meta.error(), "");
    if (r.data.empty() || r.data[0].size() != sizeof(int64_t)) return -1;
    return SArray<int64_t>(r.data[0])[0];
  }
};

TEST(ServerFencingTest, AResendFromADeadWorkerIsRefusedNotAppliedAgain) {
  Server s;
  Message p = Push(kWorker, 0, 42, 5);
  s.core.Process(p);
  ASSERT_EQ(s.replies.back().meta.error(), "");
  ASSERT_EQ(s.Value(42), 5);
  s.core.WorkerDead(kWorker);
  // The reply was lost; the worker, stalled past the heartbeat timeout, resumes and resends.
  Message again = Push(kWorker, 0, 42, 5);
  s.core.Process(again);
  EXPECT_NE(s.replies.back().meta.error().find("declared dead"), std::string::npos)
      << s.replies.back().meta.error();
  // The worker's Wait throws ps::Error with ErrorCode::kFenced from this.
  EXPECT_EQ(s.replies.back().meta.error_code(), static_cast<int>(ErrorCode::kFenced));
  // And anything new it sends is refused too.
  Message fresh = Push(kWorker, 1, 42, 100);
  s.core.Process(fresh);
  EXPECT_NE(s.replies.back().meta.error().find("declared dead"), std::string::npos);
  EXPECT_EQ(s.Value(42), 5);
  EXPECT_EQ(s.core.fenced(), 2u);
  // Other workers go on.
  Message other = Push(kOther, 5000, 42, 1);
  s.core.Process(other);
  EXPECT_EQ(s.replies.back().meta.error(), "");
  EXPECT_EQ(s.Value(42), 6);
}

TEST(ServerFencingTest, AServerThatStartsLateKnowsTheDeadFromTheTable) {
  Server s;
  s.core.Tombstone(kWorker);  // what a joining server learns from the node table
  Message p = Push(kWorker, 0, 42, 5);
  s.core.Process(p);
  EXPECT_NE(s.replies.back().meta.error().find("declared dead"), std::string::npos);
  Message other = Push(kOther, 5000, 42, 1);
  s.core.Process(other);
  EXPECT_EQ(s.Value(42), 1);
}

// Fencing is causal: a request from a worker that knew of a death waits until the server knows
// of it, so the dead worker's last push, if it arrives meanwhile, is either in what that
// request reads or refused; never applied after it (the LDA app's recount relies on this).
TEST(ServerFencingTest, ARequestThatKnowsOfADeathWaitsUntilTheServerKnowsOfIt) {
  Server s;
  Message recount = Request(kOther, 7000, 42);
  recount.meta.set_pull(true);
  recount.meta.set_dead_workers(1);
  s.core.Process(recount);
  EXPECT_TRUE(s.replies.empty()) << "served before the server learned of the death";
  // The dead worker's last push was still on its way: it arrives before the scheduler's
  // notice, is applied, and so must be in what the held pull reads.
  Message late = Push(kWorker, 0, 42, 5);
  s.core.Process(late);
  ASSERT_EQ(s.replies.size(), 1u);
  EXPECT_EQ(s.replies.back().meta.timestamp(), 0);
  // A server's death does not count: the pull waits for a worker's.
  s.core.WorkerDead(3, /*worker=*/false);
  ASSERT_EQ(s.replies.size(), 1u);
  s.core.WorkerDead(kWorker);
  ASSERT_EQ(s.replies.size(), 2u);
  const Message& r = s.replies.back();
  EXPECT_EQ(r.meta.timestamp(), 7000);
  EXPECT_EQ(r.meta.error(), "");
  ASSERT_FALSE(r.data.empty());
  ASSERT_EQ(r.data[0].size(), sizeof(int64_t));
  EXPECT_EQ(SArray<int64_t>(r.data[0])[0], 5);
  // Anything the dead worker sends now is refused, and requests that know no more than the
  // server are served at once.
  Message after = Push(kWorker, 1, 42, 100);
  s.core.Process(after);
  EXPECT_NE(s.replies.back().meta.error().find("declared dead"), std::string::npos);
  EXPECT_EQ(s.Value(42), 5);
}

}  // namespace
}  // namespace ps
