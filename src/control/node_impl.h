// The runtime behind ps::Node: transport, receive loop, membership view, barriers, customers.
#ifndef PS_CONTROL_NODE_IMPL_H_
#define PS_CONTROL_NODE_IMPL_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "control/membership.h"
#include "ps/node.h"
#include "ring/ring.h"
#include "transport/van.h"

namespace ps {

/// Receives the data messages of one application id (a KVWorker or KVServer). Process runs on
/// the node's receive thread, one message at a time.
class Customer {
 public:
  virtual ~Customer() = default;
  virtual void Process(Message& msg) = 0;
};

struct Node::Impl {
  explicit Impl(Config c) : cfg(std::move(c)) {}
  ~Impl() { Stop(); }

  void Start();
  void Barrier(int groups);
  void Finalize();
  void Stop();

  /// Sends msg to msg.meta.receiver (sender and magic are filled in), connecting on first use.
  bool Send(Message& msg);
  /// The current ring (never null after Start()).
  std::shared_ptr<const Ring> ring() const;
  /// Registers the customer for app_id and hands it the messages that arrived before it.
  void AddCustomer(int app_id, Customer* c);
  void RemoveCustomer(int app_id);
  int id() const;
  Role role() const { return cfg.role; }

  Config cfg;
  std::unique_ptr<Van> van;

 private:
  void RecvLoop();
  void HeartbeatLoop();
  void HandleControl(const Message& msg);
  void Dispatch(Message& msg);
  // Scheduler: sends the node table to every node once registration completes.
  void BroadcastTable();
  void ReleaseBarrier(const std::vector<int>& ids, int groups, uint64_t seq);
  void SendControl(int to, pb::Control control, bool quiet = false);

  std::atomic<bool> running_{false};
  std::atomic<bool> stopped_{false};
  std::thread recv_thread_, heartbeat_thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  std::string reject_;
  int my_id_ = -1;
  int my_rank_ = -1;
  std::vector<NodeInfo> nodes_;
  std::shared_ptr<const Ring> ring_;
  std::map<int, uint64_t> barrier_sent_, barrier_done_;
  std::unique_ptr<Membership> membership_;  // scheduler only
  std::vector<int> reported_silent_;
  bool finalized_ = false;

  std::mutex connect_mu_;
  std::mutex cust_mu_;
  std::unordered_map<int, Customer*> customers_;
  std::unordered_map<int, std::deque<Message>> parked_;
  size_t parked_count_ = 0;

  friend class Node;
};

}  // namespace ps

#endif  // PS_CONTROL_NODE_IMPL_H_
