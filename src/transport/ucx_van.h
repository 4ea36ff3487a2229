// UCX van: UCP active messages carry a message's meta and frames, over the transport UCX
// picks (shared memory between processes on one host, TCP between hosts). A message is one
// active message: its header holds the frame sizes and the serialised meta, its data the frames
// (8-byte aligned), sent from the SArrays without a copy and, when UCX uses rendezvous for a
// large message, received into one buffer without a copy.
//
// Threads: one progress thread owns the waiting (it sleeps on the worker's event fd when idle)
// and runs the receive callbacks; the worker is created thread-safe (UCS_THREAD_MODE_MULTI), so
// Send may be called from any thread and only wakes the progress thread. Received messages
// wait in a bounded queue for Recv (one thread).
#ifndef PS_TRANSPORT_UCX_VAN_H_
#define PS_TRANSPORT_UCX_VAN_H_

#include <ucp/api/ucp.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transport/van.h"

namespace ps {

class UcxVan : public Van {
 public:
  /// max_message: the largest message accepted (larger ones are dropped and counted);
  /// recv_queue: messages held for Recv before more are dropped and counted.
  explicit UcxVan(int64_t max_message = int64_t{4} << 30, int recv_queue = 10000);
  ~UcxVan() override;
  int Bind(const std::string& host, int port) override;
  void Connect(int id, const std::string& host, int port) override;
  bool Connected(int id) const override;
  bool Send(const Message& msg) override;
  bool Recv(Message* msg, int timeout_ms) override;
  void Interrupt() override;
  void Stop(int linger_ms) override;
  void WatchPeers(std::function<void(int)> lost) override;

  // Entry points of UCX's callbacks (not for callers).
  ucs_status_t OnMessage(const void* header, size_t header_length, void* data, size_t length,
                         const ucp_am_recv_param_t* param);
  void OnConnRequest(ucp_conn_request_h req);
  void OnPeerError(int id, ucp_ep_h ep);
  void Deliver(const SArray<char>& header, SArray<char> data);
  // A message of one sender's stream, delivered only after every earlier one: UCX does not
  // keep an endpoint's messages in order (a rendezvous completes after smaller messages sent
  // behind it; lanes differ by size), and ps needs each sender's messages in order, as ZeroMQ
  // keeps them. Each endpoint a sender creates is a stream with its own sequence numbers.
  struct Slot {
    SArray<char> header, data;
    bool ready = false, failed = false;
  };
  void Flush(uint64_t stream);

 private:
  struct PeerErr {
    UcxVan* van;
    int id;
  };
  struct Peer {
    ucp_ep_h ep = nullptr;
    uint64_t stream = 0;  // random: names this endpoint's sequence to the receiver
    uint64_t next_seq = 0;
    std::mutex mu;  // a message's sequence number and its send are taken together
  };
  struct Stream {
    uint64_t next = 0;
    std::map<uint64_t, std::shared_ptr<Slot>> held;
  };
  void Start();  // context, worker and progress thread, once
  void ProgressLoop();
  std::shared_ptr<Peer> GetPeer(int id) const;

  int64_t max_message_;
  size_t recv_queue_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  int efd_ = -1;
  std::thread progress_;
  std::atomic<bool> stop_{false};

  mutable std::mutex peers_mu_;
  std::unordered_map<int, std::shared_ptr<Peer>> peers_;
  std::vector<std::unique_ptr<PeerErr>> peer_errs_;
  std::vector<ucp_ep_h> accepted_;  // endpoints of peers that connected to us
  std::vector<ucp_ep_h> retired_;   // replaced or failed, closed at Stop
  std::function<void(int)> lost_;

  // Per sender's stream: the next sequence number and the messages that wait for it. Progress
  // thread only.
  std::unordered_map<uint64_t, Stream> streams_;
  uint64_t seed_;  // of the stream names

  std::mutex q_mu_;
  std::condition_variable q_cv_;
  std::deque<Message> queue_;
  bool interrupted_ = false;
  bool stopped_ = false;
};

}  // namespace ps

#endif  // PS_TRANSPORT_UCX_VAN_H_
