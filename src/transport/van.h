// The transport interface: how a node sends and receives messages.
#ifndef PS_TRANSPORT_VAN_H_
#define PS_TRANSPORT_VAN_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "message/message.h"
#include "ps/config.h"

namespace ps {

/// Counters every van keeps; read by Node::stats().
struct VanCounters {
  std::atomic<uint64_t> messages_sent{0};
  std::atomic<uint64_t> messages_received{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<uint64_t> malformed_dropped{0};
  // Messages not sent because the peer's queue was full (Config::send_queue).
  std::atomic<uint64_t> send_queue_full{0};
  // Messages dropped because the receive queue was full (UcxVan: its peers cannot be paused).
  std::atomic<uint64_t> recv_queue_full{0};
  // Endpoints of ours whose lanes include a shared-memory transport (UcxVan; a gauge).
  std::atomic<uint64_t> shared_memory_peers{0};
  // Messages sent packed with others in one transport message (UcxVan's batches).
  std::atomic<uint64_t> messages_batched{0};
  // Faults injected by FaultVan (tests).
  std::atomic<uint64_t> injected_drops{0};
  std::atomic<uint64_t> injected_duplicates{0};
  std::atomic<uint64_t> injected_delays{0};
};

/// One van per node: one bound endpoint for receiving, one send path per peer. Send may be
/// called from any thread; Recv from one thread only (the node's receive loop).
class Van {
 public:
  virtual ~Van() = default;
  /// Binds the receive endpoint at host:port (0 = any free port) and returns the bound port.
  /// Throws ps::Error when the address cannot be bound.
  virtual int Bind(const std::string& host, int port) = 0;
  /// Creates the send path to node id at host:port (replacing an earlier one).
  virtual void Connect(int id, const std::string& host, int port) = 0;
  /// True if Connect(id, ...) was called.
  virtual bool Connected(int id) const = 0;
  /// Sends msg to msg.meta.receiver without copying its data frames. Returns false when there
  /// is no path to the receiver or the transport failed.
  virtual bool Send(const Message& msg) = 0;
  /// Waits up to timeout_ms for the next well-formed message. Malformed ones are dropped and
  /// counted. Returns false on timeout or after Stop().
  virtual bool Recv(Message* msg, int timeout_ms) = 0;
  /// Makes a Recv in progress (or the next one) return false soon. Any thread may call it.
  virtual void Interrupt() = 0;
  /// Closes every socket; wakes Recv. Messages still queued for sending get up to linger_ms
  /// to leave (0 = drop them).
  virtual void Stop(int linger_ms) = 0;

  /// Asks to hear, through lost(id), when the connection to a connected peer breaks (its
  /// process is gone: the kernel closed its sockets). Called on a van thread. Vans that cannot
  /// tell (in-process) never call it.
  virtual void WatchPeers(std::function<void(int id)> lost) { (void)lost; }

  virtual const VanCounters& counters() const { return counters_; }
  VanCounters& mutable_counters() { return counters_; }

 protected:
  VanCounters counters_;
};

/// True when something accepts TCP connections at host:port within timeout_ms. A node that
/// joins a running job checks this first: ZeroMQ retries a refused connection silently, so a
/// wrong address would otherwise show only after the registration timeout.
bool TcpListening(const std::string& host, int port, int timeout_ms);

/// The van selected by the configuration: in-process when config.inproc is set, else ZeroMQ
/// with the configuration's bounds (max_message_mb, send_queue).
std::unique_ptr<Van> MakeVan(const Config& config);

}  // namespace ps

#endif  // PS_TRANSPORT_VAN_H_
