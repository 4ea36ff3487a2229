#include "transport/zmq_van.h"

#include <glog/logging.h>
#include <zmq.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace ps {
namespace {

constexpr size_t kMaxDataFrames = 8;
constexpr size_t kCopyBelow = 512;
constexpr char kInterruptId[] = "\x01ps-interrupt";

// Keeps the SArray alive until ZeroMQ has sent the bytes.
void FreeSArray(void* /*data*/, void* hint) { delete static_cast<SArray<char>*>(hint); }

void CloseMsg(zmq_msg_t* m) {
  zmq_msg_close(m);
  delete m;
}

template <size_t N>
struct Bytes {
  alignas(16) char data[N];
};

template <size_t N>
SArray<char> BufferOf(size_t n) {
  auto b = std::make_shared<Bytes<N>>();
  char* data = b->data;
  return SArray<char>(data, n, std::move(b));
}

// n bytes whose reference count lives in the same allocation (make_shared), in a few size
// classes; larger buffers are rare here and take the general path.
SArray<char> SmallBuffer(size_t n) {
  if (n == 0) return {};
  if (n <= 64) return BufferOf<64>(n);
  if (n <= 512) return BufferOf<512>(n);
  if (n <= 4096) return BufferOf<4096>(n);
  return SArray<char>::Uninitialized(n);
}

// Small frames are copied (cheaper than keeping their messages alive), and so are frames that
// sit unaligned inside ZeroMQ's shared receive buffer: typed access needs alignment. All the
// copies of one message share one buffer, each at an 8-byte aligned offset, so that a small
// request costs one allocation for its data rather than one per frame. Large aligned frames are
// kept without a copy; their zmq messages are moved out of `parts`.
void TakeFrames(zmq_msg_t* parts, size_t n, std::vector<SArray<char>>* out) {
  auto copied = [](zmq_msg_t* m) {
    return zmq_msg_size(m) <= kCopyBelow || reinterpret_cast<uintptr_t>(zmq_msg_data(m)) % 8 != 0;
  };
  auto padded = [](size_t size) { return (size + 7) & ~size_t{7}; };
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (copied(&parts[i])) total += padded(zmq_msg_size(&parts[i]));
  }
  SArray<char> block = SmallBuffer(total);
  size_t offset = 0;
  out->reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t size = zmq_msg_size(&parts[i]);
    char* data = static_cast<char*>(zmq_msg_data(&parts[i]));
    if (copied(&parts[i])) {
      if (size) std::memcpy(block.data() + offset, data, size);
      out->push_back(block.Segment(offset, offset + size));
      offset += padded(size);
    } else {
      auto* m = new zmq_msg_t;
      zmq_msg_init(m);
      zmq_msg_move(m, &parts[i]);
      out->emplace_back(data, size, std::shared_ptr<void>(m, CloseMsg));
    }
  }
}

}  // namespace

ZmqVan::ZmqVan(int64_t max_message, int send_queue)
    : max_message_(max_message), send_queue_(send_queue) {
  context_ = zmq_ctx_new();
  zmq_ctx_set(context_, ZMQ_MAX_SOCKETS, 65536);
}

ZmqVan::~ZmqVan() {
  Stop(0);
  if (context_) zmq_ctx_term(context_);
}

int ZmqVan::Bind(const std::string& host, int port) {
  receiver_ = zmq_socket(context_, ZMQ_ROUTER);
  int zero = 0;
  // Per peer: beyond it ZeroMQ stops reading that peer's connection (TCP back-pressure), so a
  // node that falls behind holds a bounded queue, not everything its peers send.
  zmq_setsockopt(receiver_, ZMQ_RCVHWM, &send_queue_, sizeof(send_queue_));
  // A frame header claiming more than this disconnects the peer before anything is allocated.
  zmq_setsockopt(receiver_, ZMQ_MAXMSGSIZE, &max_message_, sizeof(max_message_));
  zmq_setsockopt(receiver_, ZMQ_LINGER, &zero, sizeof(zero));
  std::string addr = "tcp://" + host + ":" + (port ? std::to_string(port) : std::string("*"));
  if (zmq_bind(receiver_, addr.c_str()) != 0) {
    throw Error(ErrorCode::kBadConfig, "cannot bind " + addr + ": " + zmq_strerror(zmq_errno()) +
                                           " (set PS_NODE_HOST/PS_PORT)");
  }
  char endpoint[256];
  size_t len = sizeof(endpoint);
  zmq_getsockopt(receiver_, ZMQ_LAST_ENDPOINT, endpoint, &len);
  std::string self = "inproc://ps-interrupt-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  zmq_bind(receiver_, self.c_str());
  interrupter_ = zmq_socket(context_, ZMQ_DEALER);
  zmq_setsockopt(interrupter_, ZMQ_ROUTING_ID, kInterruptId, sizeof(kInterruptId) - 1);
  zmq_setsockopt(interrupter_, ZMQ_LINGER, &zero, sizeof(zero));
  zmq_connect(interrupter_, self.c_str());
  const char* colon = std::strrchr(endpoint, ':');
  return colon ? std::atoi(colon + 1) : port;
}

void ZmqVan::Connect(int id, const std::string& host, int port) {
  // After Stop (a server's timer thread outlives its node's Stop) nothing is opened: a socket
  // made now would never be closed, and zmq_ctx_term waits for every socket (a leaving server
  // printed LEFT and never exited; ZmqVanTest.AConnectAfterStopOpensNothingAndTheVanIsDestroyed).
  if (stopped_.load()) return;
  auto peer = std::make_shared<Peer>();
  peer->socket = zmq_socket(context_, ZMQ_DEALER);
  // Bounded: sends never block (a stalled peer must not stall this node); beyond the bound a
  // message is dropped and counted, and the protocol's resends cover it.
  zmq_setsockopt(peer->socket, ZMQ_SNDHWM, &send_queue_, sizeof(send_queue_));
  int linger = 0;  // Stop() decides how long queued messages may linger
  zmq_setsockopt(peer->socket, ZMQ_LINGER, &linger, sizeof(linger));
  std::string addr = "tcp://" + host + ":" + std::to_string(port);
  if (zmq_connect(peer->socket, addr.c_str()) != 0) {
    std::string err = zmq_strerror(zmq_errno());
    zmq_close(peer->socket);
    throw Error(ErrorCode::kBadConfig, "cannot connect to " + addr + ": " + err);
  }
  if (lost_) Monitor(id, peer->socket);
  std::shared_ptr<Peer> old;
  {
    std::lock_guard<std::mutex> lk(peers_mu_);
    // Stop sets stopped_ before it takes the peers under this lock: a peer added here is
    // either closed by Stop or refused.
    if (stopped_.load()) {
      zmq_close(peer->socket);
      return;
    }
    old = peers_[id];
    peers_[id] = peer;
  }
  if (old) {
    std::lock_guard<std::mutex> lk(old->mu);
    zmq_close(old->socket);
    old->socket = nullptr;
  }
}

bool ZmqVan::Connected(int id) const { return GetPeer(id) != nullptr; }

std::shared_ptr<ZmqVan::Peer> ZmqVan::GetPeer(int id) const {
  std::lock_guard<std::mutex> lk(peers_mu_);
  auto it = peers_.find(id);
  return it == peers_.end() ? nullptr : it->second;
}

bool ZmqVan::Send(const Message& msg) {
  auto peer = GetPeer(msg.meta.receiver());
  if (!peer) return false;
  // Serialised straight into the frame: no intermediate string, and a meta of at most 33 bytes
  // lives inside the zmq message itself (no allocation at all).
  const size_t meta_size = msg.meta.ByteSizeLong();
  if (meta_size == 0 || meta_size > (1u << 24)) return false;
  std::lock_guard<std::mutex> lk(peer->mu);
  if (!peer->socket) return false;
  size_t n = msg.data.size();
  zmq_msg_t m;
  zmq_msg_init_size(&m, meta_size);
  msg.meta.SerializeWithCachedSizesToArray(static_cast<uint8_t*>(zmq_msg_data(&m)));
  if (zmq_msg_send(&m, peer->socket, ZMQ_DONTWAIT | (n ? ZMQ_SNDMORE : 0)) < 0) {
    if (zmq_errno() == EAGAIN) counters_.send_queue_full++;
    zmq_msg_close(&m);
    return false;
  }
  size_t bytes = meta_size;
  for (size_t i = 0; i < n; ++i) {
    const SArray<char>& d = msg.data[i];
    if (d.size() <= kCopyBelow) {
      // Small frames are copied: ZeroMQ keeps up to 33 bytes inside the message itself, and a
      // copy of a few hundred bytes is cheaper than the bookkeeping of a zero-copy message.
      zmq_msg_init_size(&m, d.size());
      if (!d.empty()) std::memcpy(zmq_msg_data(&m), d.data(), d.size());
    } else {
      auto* hold = new SArray<char>(d);
      zmq_msg_init_data(&m, d.data(), d.size(), FreeSArray, hold);
    }
    // ZeroMQ owns the message after a successful send; on failure it is ours to close.
    if (zmq_msg_send(&m, peer->socket, i + 1 < n ? ZMQ_SNDMORE : 0) < 0) {
      zmq_msg_close(&m);
      return false;
    }
    bytes += d.size();
  }
  counters_.messages_sent++;
  counters_.bytes_sent += bytes;
  return true;
}

void ZmqVan::DrainParts() {
  int more = 1;
  size_t len = sizeof(more);
  while (zmq_getsockopt(receiver_, ZMQ_RCVMORE, &more, &len) == 0 && more) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, receiver_, 0) < 0) {
      zmq_msg_close(&m);
      break;
    }
    counters_.bytes_received += zmq_msg_size(&m);
    zmq_msg_close(&m);
  }
}

bool ZmqVan::Recv(Message* msg, int timeout_ms) {
  if (!receiver_ || stopped_) return false;
  if (timeout_ms != recv_timeout_ms_) {
    zmq_setsockopt(receiver_, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
    recv_timeout_ms_ = timeout_ms;
  }
  for (;;) {
    // Frame 0 is the routing id that ROUTER prepends; we do not use it.
    zmq_msg_t id;
    zmq_msg_init(&id);
    if (zmq_msg_recv(&id, receiver_, 0) < 0) {
      zmq_msg_close(&id);
      return false;
    }
    const bool interrupt = zmq_msg_size(&id) == sizeof(kInterruptId) - 1 &&
                           std::memcmp(zmq_msg_data(&id), kInterruptId, zmq_msg_size(&id)) == 0;
    zmq_msg_close(&id);
    zmq_msg_t head;
    zmq_msg_init(&head);
    if (zmq_msg_recv(&head, receiver_, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&head);
      counters_.malformed_dropped++;
      continue;
    }
    if (interrupt && zmq_msg_size(&head) == 0 && !zmq_msg_more(&head)) {
      zmq_msg_close(&head);
      return false;
    }
    std::string why;
    msg->data.clear();
    bool ok = DecodeMeta(zmq_msg_data(&head), zmq_msg_size(&head), &msg->meta, &why);
    size_t bytes = zmq_msg_size(&head);
    bool has_more = zmq_msg_more(&head);
    zmq_msg_close(&head);
    zmq_msg_t parts[kMaxDataFrames];
    size_t nparts = 0;
    while (ok && has_more) {
      if (nparts == kMaxDataFrames) {
        ok = false;
        why = "too many frames";
        break;
      }
      zmq_msg_t* part = &parts[nparts];
      zmq_msg_init(part);
      if (zmq_msg_recv(part, receiver_, 0) < 0) {
        zmq_msg_close(part);
        ok = false;
        why = "truncated multipart";
        break;
      }
      has_more = zmq_msg_more(part);
      bytes += zmq_msg_size(part);
      ++nparts;
    }
    if (ok) TakeFrames(parts, nparts, &msg->data);
    for (size_t i = 0; i < nparts; ++i) zmq_msg_close(&parts[i]);
    if (!ok) {
      if (has_more) DrainParts();
      counters_.malformed_dropped++;
      counters_.bytes_received += bytes;
      VLOG(1) << "dropped malformed message: " << why;
      continue;
    }
    counters_.messages_received++;
    counters_.bytes_received += bytes;
    return true;
  }
}

void ZmqVan::Interrupt() {
  std::lock_guard<std::mutex> lk(interrupt_mu_);
  if (interrupter_) zmq_send(interrupter_, "", 0, ZMQ_DONTWAIT);
}

void ZmqVan::WatchPeers(std::function<void(int)> lost) {
  lost_ = std::move(lost);
  std::vector<std::pair<int, std::shared_ptr<Peer>>> existing;
  {
    std::lock_guard<std::mutex> lk(peers_mu_);
    for (auto& p : peers_) existing.emplace_back(p.first, p.second);
  }
  for (auto& e : existing) {
    std::lock_guard<std::mutex> lk(e.second->mu);  // sockets are not thread-safe
    if (e.second->socket) Monitor(e.first, e.second->socket);
  }
  monitor_ = std::thread([this] { MonitorLoop(); });
}

void ZmqVan::Monitor(int id, void* dealer) {
  std::lock_guard<std::mutex> lk(mon_mu_);
  // The monitor thread closes what it was handed under this lock as it ends: nothing may be
  // handed to it after.
  if (mon_stop_.load()) return;
  const std::string ep = "inproc://ps-monitor-" +
                         std::to_string(reinterpret_cast<uintptr_t>(this)) + "-" +
                         std::to_string(mon_seq_++);
  if (zmq_socket_monitor(dealer, ep.c_str(), ZMQ_EVENT_DISCONNECTED) != 0) return;
  void* pair = zmq_socket(context_, ZMQ_PAIR);
  int zero = 0;
  zmq_setsockopt(pair, ZMQ_LINGER, &zero, sizeof(zero));
  if (zmq_connect(pair, ep.c_str()) != 0) {
    zmq_close(pair);
    return;
  }
  mon_new_.emplace_back(id, pair);
}

void ZmqVan::MonitorLoop() {
  std::vector<std::pair<int, void*>> socks;
  while (!mon_stop_) {
    {
      std::lock_guard<std::mutex> lk(mon_mu_);
      for (auto& n : mon_new_) {
        socks.push_back(n);
        mon_current_[n.first] = n.second;  // a reconnect replaces the peer's monitor
      }
      mon_new_.clear();
    }
    std::vector<zmq_pollitem_t> items(socks.size());
    for (size_t i = 0; i < socks.size(); ++i) items[i] = {socks[i].second, 0, ZMQ_POLLIN, 0};
    if (items.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (zmq_poll(items.data(), static_cast<int>(items.size()), 50) <= 0) continue;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      // An event is two frames: 6 bytes (uint16 event, uint32 value), then the endpoint.
      zmq_msg_t ev;
      zmq_msg_init(&ev);
      uint16_t event = 0;
      if (zmq_msg_recv(&ev, socks[i].second, ZMQ_DONTWAIT) >= 6) {
        std::memcpy(&event, zmq_msg_data(&ev), sizeof(event));
      }
      const bool more = zmq_msg_more(&ev);
      zmq_msg_close(&ev);
      if (more) {
        zmq_msg_t ep;
        zmq_msg_init(&ep);
        zmq_msg_recv(&ep, socks[i].second, ZMQ_DONTWAIT);
        zmq_msg_close(&ep);
      }
      bool current;
      {
        std::lock_guard<std::mutex> lk(mon_mu_);
        current = mon_current_[socks[i].first] == socks[i].second;
      }
      if (event == ZMQ_EVENT_DISCONNECTED && current && !mon_stop_) lost_(socks[i].first);
    }
  }
  for (auto& s : socks) zmq_close(s.second);
  std::lock_guard<std::mutex> lk(mon_mu_);
  for (auto& n : mon_new_) zmq_close(n.second);
  mon_new_.clear();
}

void ZmqVan::Stop(int linger_ms) {
  if (stopped_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lk(mon_mu_);
    mon_stop_ = true;
  }
  if (monitor_.joinable()) monitor_.join();
  {
    std::lock_guard<std::mutex> lk(interrupt_mu_);
    if (interrupter_) zmq_close(interrupter_);
    interrupter_ = nullptr;
  }
  std::unordered_map<int, std::shared_ptr<Peer>> peers;
  {
    std::lock_guard<std::mutex> lk(peers_mu_);
    peers.swap(peers_);
  }
  for (auto& p : peers) {
    std::lock_guard<std::mutex> lk(p.second->mu);
    if (p.second->socket) {
      zmq_setsockopt(p.second->socket, ZMQ_LINGER, &linger_ms, sizeof(linger_ms));
      zmq_close(p.second->socket);
    }
    p.second->socket = nullptr;
  }
  if (receiver_) zmq_close(receiver_);
  receiver_ = nullptr;
}

}  // namespace ps
