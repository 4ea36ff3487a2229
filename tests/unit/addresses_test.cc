// Which addresses a node binds and advertises (src/control/addresses.h), on this host's
// loopback: names, empty hosts, interfaces and Kubernetes.
#include "control/addresses.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

Config Node(Role role, const std::string& scheduler) {
  Config c;
  c.role = role;
  c.scheduler_host = scheduler;
  c.scheduler_port = 9000;
  return c;
}

TEST(AddressesTest, ASchedulerNamedByAHostNameBindsTheAddressTheNameHas) {
  // ps-lite's start with DMLC_PS_ROOT_URI=localhost failed: "cannot bind tcp://localhost".
  NodeAddresses a = ChooseAddresses(Node(Role::kScheduler, "localhost"));
  EXPECT_EQ(a.bind, "127.0.0.1");
  EXPECT_EQ(a.scheduler, "127.0.0.1");
  Config k = Node(Role::kScheduler, "localhost");
  k.kubernetes = true;
  EXPECT_EQ(ChooseAddresses(k).bind, "0.0.0.0") << "under Kubernetes: every interface";
}

TEST(AddressesTest, ANodeAdvertisesItsAddressOnTheRouteToTheScheduler) {
  NodeAddresses a = ChooseAddresses(Node(Role::kWorker, "localhost"));
  EXPECT_EQ(a.advertise, "127.0.0.1");
  EXPECT_EQ(a.bind, "127.0.0.1");
  EXPECT_EQ(RouteSource("127.0.0.5", 1), "127.0.0.1");
  Config lo = Node(Role::kServer, "127.0.0.1");
  lo.interface = "lo";
  EXPECT_EQ(ChooseAddresses(lo).advertise, "127.0.0.1");
  Config set = Node(Role::kServer, "127.0.0.1");
  set.host = "127.0.0.2";
  set.interface = "lo";
  EXPECT_EQ(ChooseAddresses(set).advertise, "127.0.0.2") << "PS_NODE_HOST wins";
}

TEST(AddressesTest, AMissingInterfaceNamesTheVariable) {
  // (An unresolvable name is not tried here: resolving it would ask a DNS server, and the
  // tests send nothing beyond loopback.)
  Config nic = Node(Role::kWorker, "127.0.0.1");
  nic.interface = "nosuch0";
  try {
    ChooseAddresses(nic);
    ADD_FAILURE() << "a missing interface was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PS_INTERFACE (or DMLC_INTERFACE)='nosuch0'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(IsNumericAddress("10.1.2.3"));
  EXPECT_FALSE(IsNumericAddress("localhost"));
  EXPECT_TRUE(IsLocalAddress("127.0.0.1"));
}

}  // namespace
}  // namespace ps
