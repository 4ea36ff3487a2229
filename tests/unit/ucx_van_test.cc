#include "transport/ucx_van.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>

namespace ps {
namespace {

bool RecvSoon(Van* van, Message* m) {
  for (int i = 0; i < 50; ++i) {
    if (van->Recv(m, 100)) return true;
  }
  return false;
}

Message Frames(int to, const std::vector<size_t>& sizes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Message m;
  m.meta.set_magic(kMagic);
  m.meta.set_receiver(to);
  m.meta.set_app_id(3);
  for (size_t s : sizes) {
    SArray<char> d(s);
    for (auto& c : d) c = static_cast<char>(rng());
    m.data.push_back(d);
  }
  return m;
}

// Small messages (eager) and large ones (rendezvous, received without a copy) arrive with
// their frames' bytes, sizes and 8-byte alignment; the sender's arrays are released after.
TEST(UcxVanTest, FramesArriveIntactSmallAndLarge) {
  const uint64_t seed = 5;
  std::mt19937_64 rng(seed);
  UcxVan a, b;
  const int port = b.Bind("127.0.0.1", 0);
  ASSERT_GT(port, 0);
  a.Connect(1, "127.0.0.1", port);
  const size_t sizes[] = {0, 1, 3, 8, 13, 511, 4000, 70000, 1 << 20, 5 << 20};
  for (int round = 0; round < 40; ++round) {
    std::vector<size_t> s;
    const size_t frames = 1 + rng() % 5;
    for (size_t f = 0; f < frames; ++f) s.push_back(sizes[rng() % 10]);
    Message m = Frames(1, s, seed + round);
    std::weak_ptr<char> held;
    for (auto& d : m.data) {
      if (d.size() >= (1 << 20)) held = d.ptr();
    }
    ASSERT_TRUE(a.Send(m)) << "seed " << seed << " round " << round;
    Message got;
    ASSERT_TRUE(RecvSoon(&b, &got)) << "seed " << seed << " round " << round;
    ASSERT_EQ(got.meta.app_id(), 3);
    ASSERT_EQ(got.data.size(), frames) << "seed " << seed << " round " << round;
    for (size_t f = 0; f < frames; ++f) {
      ASSERT_EQ(got.data[f].size(), s[f]) << "seed " << seed << " frame " << f;
      EXPECT_EQ(got.data[f].ToVector(), m.data[f].ToVector()) << "seed " << seed << " frame " << f;
      if (!got.data[f].empty()) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(got.data[f].data()) % 8, 0u) << "frame " << f;
      }
    }
    m.data.clear();
    for (int i = 0; i < 100 && !held.expired(); ++i) usleep(10000);
    EXPECT_TRUE(held.expired()) << "the van kept a sent frame; seed " << seed;
  }
  EXPECT_EQ(b.counters().malformed_dropped.load(), 0u);
}

// A sender's messages arrive in the order sent, whatever their sizes: UCX completes a large
// (rendezvous) message after small ones sent behind it, and ps relies on each sender's order.
TEST(UcxVanTest, MessagesOfMixedSizesArriveInOrder) {
  UcxVan a, b;
  const int port = b.Bind("127.0.0.1", 0);
  a.Connect(1, "127.0.0.1", port);
  const int kMessages = 120;
  for (int i = 0; i < kMessages; ++i) {
    Message m = Frames(1, {i % 3 == 0 ? size_t{3} << 20 : size_t{24}}, static_cast<uint64_t>(i));
    m.meta.set_app_id(i);
    ASSERT_TRUE(a.Send(m));
  }
  for (int i = 0; i < kMessages; ++i) {
    Message got;
    ASSERT_TRUE(RecvSoon(&b, &got)) << "message " << i;
    ASSERT_EQ(got.meta.app_id(), i);
    ASSERT_EQ(got.data[0].size(), i % 3 == 0 ? size_t{3} << 20 : size_t{24});
  }
}

// Random bytes on the listening port do not reach Recv or crash the van; a well-formed
// message behind them still arrives.
TEST(UcxVanTest, GarbageOnTheListeningPortIsHarmless) {
  const uint64_t seed = 99;
  std::mt19937_64 rng(seed);
  UcxVan b;
  const int port = b.Bind("127.0.0.1", 0);
  for (int k = 0; k < 5; ++k) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    std::string junk(1 + rng() % 8192, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    ASSERT_GT(write(fd, junk.data(), junk.size()), 0);
    close(fd);
  }
  UcxVan a;
  a.Connect(1, "127.0.0.1", port);
  Message m = Frames(1, {100, 0}, seed);
  ASSERT_TRUE(a.Send(m));
  Message got;
  ASSERT_TRUE(RecvSoon(&b, &got)) << "seed " << seed;
  EXPECT_EQ(got.data.size(), 2u);
  EXPECT_FALSE(b.Recv(&got, 200)) << "garbage decoded as a message; seed " << seed;
}

// A peer that goes away is reported through WatchPeers; Interrupt wakes a waiting Recv.
TEST(UcxVanTest, ALostPeerIsReportedAndInterruptWakesRecv) {
  UcxVan a;
  auto b = std::make_unique<UcxVan>();
  const int port = b->Bind("127.0.0.1", 0);
  std::atomic<int> lost{-1};
  a.WatchPeers([&](int id) { lost = id; });
  a.Connect(4, "127.0.0.1", port);
  ASSERT_TRUE(a.Send(Frames(4, {16}, 1)));
  Message got;
  ASSERT_TRUE(RecvSoon(b.get(), &got));
  b.reset();  // closes its endpoints and its listener
  for (int i = 0; i < 100 && lost.load() != 4; ++i) {
    a.Send(Frames(4, {16}, 2));
    usleep(50000);
  }
  EXPECT_EQ(lost.load(), 4);
  EXPECT_FALSE(a.Connected(4));
  a.Interrupt();
  EXPECT_FALSE(a.Recv(&got, 5000));
}

}  // namespace
}  // namespace ps
