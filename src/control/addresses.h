// Which address a node binds and which it advertises, when a launch gives names or nothing:
// ps-lite's and Kubernetes operators' way (DMLC_PS_ROOT_URI is the scheduler's service name,
// processes are started by hand, DMLC_INTERFACE names a network interface).
#ifndef PS_CONTROL_ADDRESSES_H_
#define PS_CONTROL_ADDRESSES_H_

#include <string>

#include "ps/config.h"

namespace ps {

// True for a dotted IPv4 address ("10.0.0.1"), false for a name.
bool IsNumericAddress(const std::string& host);
// The first IPv4 address of a name (or the address itself); "" when it does not resolve.
std::string ResolveIPv4(const std::string& host);
// True when addr is an address of one of this host's interfaces (127.0.0.0/8 counts).
bool IsLocalAddress(const std::string& addr);
// The IPv4 address of a network interface ("eth0"); "" when it has none or does not exist.
std::string InterfaceAddress(const std::string& name);
// This host's source address on its route to addr (a UDP connect: nothing is sent); "" when
// there is no route.
std::string RouteSource(const std::string& addr, int port);

struct NodeAddresses {
  std::string bind;       // what the node's van binds
  std::string advertise;  // what it tells the scheduler (the others connect there); "" on
                          // the scheduler, which the others know by PS_SCHEDULER_HOST
  std::string scheduler;  // the scheduler's address, resolved
};
// From the configuration: the scheduler binds its host when that is a local address, every
// interface (0.0.0.0) when it is a name of another address or under Kubernetes
// (Config::kubernetes); another node advertises Config::host when set, else the address of
// Config::interface, else its address on the route to the scheduler, and binds what it
// advertises (every interface under Kubernetes). Throws ps::Error (kBadConfig) naming the
// variable when a name does not resolve or an interface has no address.
NodeAddresses ChooseAddresses(const Config& cfg);

}  // namespace ps

#endif  // PS_CONTROL_ADDRESSES_H_
