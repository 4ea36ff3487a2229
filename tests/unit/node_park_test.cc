// Messages for an app id whose customer (KVServer, KVWorker) does not exist yet are parked,
// and the receive thread hands them over once it exists, a few between two receives. Before,
// AddCustomer handed the whole backlog over at once, holding the lock that every incoming
// message needs: a server slowed to a tenth of its speed that had parked the workers' first
// pushes heard nothing from the scheduler for 8 s and left the job ("lost the scheduler").
#include <gtest/gtest.h>

#include <vector>

#include "control/node_impl.h"

namespace ps {
namespace {

struct Recorder : Customer {
  std::vector<int64_t> seen;
  void Process(Message& m) override { seen.push_back(m.meta.timestamp()); }
};

Message For(int app, int64_t ts, SArray<char> data = SArray<char>(16)) {
  Message m;
  m.meta.set_app_id(app);
  m.meta.set_timestamp(ts);
  m.meta.set_request(false);
  m.data = {data};
  return m;
}

std::vector<int64_t> Upto(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

TEST(NodeParkTest, MessagesThatCameBeforeTheirCustomerReachItInOrderAFewAtATime) {
  Node::Impl node{Config{}};
  for (int64_t ts = 0; ts < 10; ++ts) {
    Message m = For(5, ts);
    node.Dispatch(m);
  }
  Recorder r;
  node.AddCustomer(5, &r);
  EXPECT_TRUE(r.seen.empty()) << "the backlog was handed over by AddCustomer, under the lock";
  EXPECT_TRUE(node.DrainParked(4));
  EXPECT_EQ(r.seen, Upto(4));
  // However slow the customer, the receive thread gets back to receiving once the time it
  // may spend is up (here none: one message per turn).
  EXPECT_TRUE(node.DrainParked(100, 0));
  EXPECT_EQ(r.seen, Upto(5));
  // A newer message waits behind the parked ones.
  Message late = For(5, 10);
  node.Dispatch(late);
  EXPECT_EQ(r.seen.size(), 5u);
  while (node.DrainParked(4)) {
  }
  EXPECT_EQ(r.seen, Upto(11));
  // Nothing parked any more: straight to the customer.
  Message now = For(5, 11);
  node.Dispatch(now);
  EXPECT_EQ(r.seen, Upto(12));
}

TEST(NodeParkTest, ParkedMessagesAreBoundedInBytes) {
  Node::Impl node{Config{}};
  // One 64 MB buffer shared by every message: what is counted is what each would hold.
  SArray<char> big(64 << 20);
  for (int64_t ts = 0; ts < 6; ++ts) {
    Message m = For(7, ts, big);
    node.Dispatch(m);
  }
  Recorder r;
  node.AddCustomer(7, &r);
  while (node.DrainParked(100)) {
  }
  // 256 MB: four were kept, the others dropped (their senders resend them).
  EXPECT_EQ(r.seen, Upto(4));
}

}  // namespace
}  // namespace ps
