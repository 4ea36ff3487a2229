// ZeroMQ van: a ROUTER socket receives, one DEALER per peer sends; data frames are never copied.
#ifndef PS_TRANSPORT_ZMQ_VAN_H_
#define PS_TRANSPORT_ZMQ_VAN_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "transport/van.h"

namespace ps {

class ZmqVan : public Van {
 public:
  /// max_message: the largest frame a peer may send (larger: the peer is disconnected);
  /// send_queue: messages queued per peer before more are dropped and counted.
  explicit ZmqVan(int64_t max_message = int64_t{4} << 30, int send_queue = 10000);
  ~ZmqVan() override;
  int Bind(const std::string& host, int port) override;
  void Connect(int id, const std::string& host, int port) override;
  bool Connected(int id) const override;
  bool Send(const Message& msg) override;
  bool Recv(Message* msg, int timeout_ms) override;
  void Interrupt() override;
  void Stop(int linger_ms) override;
  void WatchPeers(std::function<void(int)> lost) override;

 private:
  struct Peer {
    std::mutex mu;  // a ZeroMQ socket is not thread-safe
    void* socket = nullptr;
  };
  std::shared_ptr<Peer> GetPeer(int id) const;
  // Drops the rest of a multipart message that failed validation.
  void DrainParts();

  void* context_ = nullptr;
  void* receiver_ = nullptr;
  // A DEALER connected to our own ROUTER over inproc: an empty frame from it interrupts Recv.
  std::mutex interrupt_mu_;
  void* interrupter_ = nullptr;
  int recv_timeout_ms_ = -2;
  int64_t max_message_;
  int send_queue_;
  mutable std::mutex peers_mu_;
  std::unordered_map<int, std::shared_ptr<Peer>> peers_;
  std::atomic<bool> stopped_{false};

  // Connection monitoring (WatchPeers): a PAIR socket per peer DEALER receives its
  // disconnect events; one thread polls them.
  void MonitorLoop();
  void Monitor(int id, void* dealer);
  std::function<void(int)> lost_;
  std::thread monitor_;
  std::mutex mon_mu_;
  std::vector<std::pair<int, void*>> mon_new_;  // handed to the monitor thread
  std::unordered_map<int, void*> mon_current_;  // the live monitor of each peer id
  std::atomic<bool> mon_stop_{false};
  uint64_t mon_seq_ = 0;
};

}  // namespace ps

#endif  // PS_TRANSPORT_ZMQ_VAN_H_
