// ZeroMQ van: a ROUTER socket receives, one DEALER per peer sends; data frames are never copied.
#ifndef PS_TRANSPORT_ZMQ_VAN_H_
#define PS_TRANSPORT_ZMQ_VAN_H_

#include <memory>
#include <mutex>
#include <unordered_map>

#include "transport/van.h"

namespace ps {

class ZmqVan : public Van {
 public:
  ZmqVan();
  ~ZmqVan() override;
  int Bind(const std::string& host, int port) override;
  void Connect(int id, const std::string& host, int port) override;
  bool Connected(int id) const override;
  bool Send(const Message& msg) override;
  bool Recv(Message* msg, int timeout_ms) override;
  void Interrupt() override;
  void Stop(int linger_ms) override;

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
  mutable std::mutex peers_mu_;
  std::unordered_map<int, std::shared_ptr<Peer>> peers_;
  bool stopped_ = false;
};

}  // namespace ps

#endif  // PS_TRANSPORT_ZMQ_VAN_H_
