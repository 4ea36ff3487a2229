// In-memory van: nodes in one process exchange messages through shared queues.
#ifndef PS_TRANSPORT_INPROC_VAN_H_
#define PS_TRANSPORT_INPROC_VAN_H_

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>

#include "ps/config.h"
#include "transport/van.h"

namespace ps {

/// A receive queue of one in-process node.
struct InprocMailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Message> queue;
  bool stopped = false;
  bool interrupted = false;
};

/// The address book of an InprocNetwork: port -> mailbox.
struct InprocNetwork::Hub {
  std::mutex mu;
  std::map<int, std::shared_ptr<InprocMailbox>> boxes;
  int next_port = 1 << 20;  // above any explicit (TCP-range) port, so they never collide
};

/// Messages are moved between queues by reference: data frames are never copied, exactly as
/// the ZeroMQ van promises.
class InprocVan : public Van {
 public:
  explicit InprocVan(InprocNetwork::Hub* hub) : hub_(hub) {}
  ~InprocVan() override { Stop(0); }
  int Bind(const std::string& host, int port) override;
  void Connect(int id, const std::string& host, int port) override;
  bool Connected(int id) const override;
  bool Send(const Message& msg) override;
  bool Recv(Message* msg, int timeout_ms) override;
  void Interrupt() override;
  void Stop(int linger_ms) override;

 private:
  InprocNetwork::Hub* hub_;
  std::shared_ptr<InprocMailbox> box_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::unordered_map<int, int> peer_port_;
};

}  // namespace ps

#endif  // PS_TRANSPORT_INPROC_VAN_H_
