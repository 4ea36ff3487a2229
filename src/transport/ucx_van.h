// UCX van: UCP active messages carry a message's meta and frames, over the transport UCX
// picks (shared memory between processes on one host, TCP between hosts). A message is one
// active message: its header holds the frame sizes and the serialised meta, its data the frames
// (8-byte aligned), sent from the SArrays without a copy and, when UCX uses rendezvous for a
// large message, received into one buffer without a copy.
//
// Threads: UCX's worker is driven by one thread at a time, the holder of the progress role
// (role_mu_; the worker is UCS_THREAD_MODE_SERIALIZED, so UCX takes no locks of its own). The
// thread in Recv takes the role and sleeps on the worker's event fd itself, so a message is
// received and handed over on one thread, with no wake-up between a progress thread and the
// receiver (it cost about 30 us of each round trip, and more than the whole shared-memory
// floor). A Send made while nobody holds the role hands the message to UCX on the caller's
// thread; one made while another thread holds it is queued for the holder, woken by
// ucp_worker_signal (callable from any thread), so a caller never waits for the network or
// for another thread's progress: with a thread-safe worker, UCX's own lock was held for
// hundreds of ms by a thread busy with incoming traffic, a server's heartbeat stalled and the
// scheduler declared it dead. The progress thread takes the role when no Recv has held it for
// a grace period (a node busy with one message still reads, sends and answers its peers),
// and gives it up as soon as a Recv wants it. Callbacks into the node (a lost peer) run after
// the role is released.
// Received messages wait for Recv (one thread) in a queue per sender's stream, taken in turn
// as ZeroMQ's router does: a scheduler's heartbeat never waits behind a worker's backlog.
//
// Batches: small messages queued for one peer meanwhile (sent while another thread held the
// role) travel as one active message, one send() instead of one per message; each keeps its
// own sequence number, and the receiver splits the batch at its turn in the stream.
//
// Flow control: UCX reads every socket it progresses, so a receiver cannot stop reading one
// peer as ZeroMQ does (TCP back-pressure). Instead the receiver tells each sender what it has
// taken of its messages (credits: counts of messages and bytes, on the endpoint the sender's
// messages came by). A sender keeps at most kWindowBytes (16 MB, or one larger message) in the
// receiver's hands; what is beyond waits in the sender, where its frames are anyway. Messages
// not yet taken are at most `queue` per peer: beyond that Send drops and counts
// (send_queue_full), as ZeroMQ's high-water mark does. Without credits a slow server took in
// everything, dropped past its queue, and the resends that followed took its chain master to
// 750 MB (fault.slow_server.ucx on one core); with a message count alone a refilling server
// held 500 MB of workers' pushes (fault.big_handoff.ucx).
#ifndef PS_TRANSPORT_UCX_VAN_H_
#define PS_TRANSPORT_UCX_VAN_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
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

struct SendHold;  // a send's header, iov and frames until UCX is done with them

class UcxVan : public Van {
 public:
  /// max_message: the largest message accepted (larger ones are dropped and counted);
  /// queue: messages held for Recv, and messages in flight to one peer, before more are
  /// dropped and counted (recv_queue_full, send_queue_full).
  /// busy_poll_us: the holder of the progress role (Recv, or the progress thread) spins this
  /// long after its last event before it sleeps on the worker's file descriptor
  /// (PS_UCX_BUSY_POLL_US; 0 = sleep at once). Spinning saves the wake-up of each message that
  /// comes within it, at the price of a core while it spins.
  explicit UcxVan(int64_t max_message = int64_t{4} << 30, int queue = 10000, int busy_poll_us = 0);
  ~UcxVan() override;
  int Bind(const std::string& host, int port) override;
  void Connect(int id, const std::string& host, int port) override;
  bool Connected(int id) const override;
  bool Send(const Message& msg) override;
  bool Recv(Message* msg, int timeout_ms) override;
  void Interrupt() override;
  void Stop(int linger_ms) override;
  void WatchPeers(std::function<void(int)> lost) override;

  // Entry points of UCX's callbacks (the role's holder; not for callers).
  ucs_status_t OnMessage(const void* header, size_t header_length, void* data, size_t length,
                         const ucp_am_recv_param_t* param);
  void OnConnRequest(ucp_conn_request_h req);
  struct Peer;
  void OnPeerError(Peer* peer);       // an endpoint of ours to a peer failed
  void OnAcceptedError(ucp_ep_h ep);  // an endpoint a peer made to us failed
  void Deliver(const SArray<char>& header, SArray<char> data);
  // A message of one sender's stream, delivered only after every earlier one: UCX does not
  // keep an endpoint's messages in order (a rendezvous completes after smaller messages sent
  // behind it; lanes differ by size), and ps needs each sender's messages in order, as ZeroMQ
  // keeps them. Each endpoint a sender creates is a stream with its own sequence numbers.
  struct Slot {
    SArray<char> header, data;
    bool ready = false, failed = false;
    uint32_t count = 1;  // messages in it (a batch: more than 1)
  };
  // A batch's messages, in order (at its turn in the stream); false when it is malformed (its
  // messages not delivered are dropped and counted).
  void DeliverBatch(uint64_t stream, const Slot& batch);
  void Flush(uint64_t stream);
  struct Peer {
    UcxVan* van = nullptr;
    int id = -1;
    // Fields without an atomic type belong to the progress role's holder.
    ucp_ep_h ep = nullptr;
    bool failed = false;  // its sends are dropped
    uint64_t stream = 0;  // random: names this endpoint's sequence to the receiver
    uint64_t next_seq = 0;
    std::atomic<int> inflight{0};       // queued or in UCX, not yet completed
    std::atomic<uint64_t> sent{0};      // messages Send accepted
    std::atomic<uint64_t> credited{0};  // of them, taken by the receiver (its credits)
    // Bytes handed to UCX and taken by the receiver; sends that wait for credits.
    uint64_t bytes_out = 0, bytes_credited = 0;
    std::deque<std::unique_ptr<SendHold>> waiting;
    // The endpoint's lanes are set up (its first flush completed). UCX 1.13
    // replays the sends made before that on the final lanes with the first lanes' protocol
    // choice: over shared memory that failed ("Invalid am_short_iov length") or crashed
    // (ucp_wireup_replay_pending_requests), so nothing is handed to UCX before.
    bool wired = false;
    bool shared_memory = false;  // its lanes include a shared-memory transport
  };
  void OnWired(Peer* peer);
  // Calls done(ok) once the endpoint's first flush completes (its lanes are set up), at once
  // when UCX finishes or fails it at once.
  void WhenWired(ucp_ep_h ep, std::function<void(bool)> done);
  void Drain(Peer* peer);  // hands over the waiting sends the window and the wiring allow
  void OnCredit(const void* header, size_t length);

 private:
  struct Stream {
    uint64_t next = 0;
    std::map<uint64_t, std::shared_ptr<Slot>> held;
    ucp_ep_h reply = nullptr;  // the endpoint the sender's messages come by: credits go back
  };
  // A sender's delivered messages waiting for Recv (under q_mu_).
  struct Inbox {
    std::deque<std::pair<Message, uint64_t>> q;  // and its bytes
    uint64_t taken = 0, taken_bytes = 0;         // messages taken by Recv or dropped, and bytes
    uint64_t credited = 0, credited_bytes = 0;   // what the sender was last told
    bool listed = false;                         // in ready_
  };
  void Taken(uint64_t stream, Inbox* in, uint64_t bytes, uint64_t count = 1);  // q_mu_ held
  // Work for the role's holder, in the order queued: make an endpoint, send, or credit.
  struct Job {
    std::shared_ptr<Peer> peer;
    uint64_t credit_stream = 0, credit = 0, credit_bytes = 0;  // peer null: a credit
    sockaddr_storage addr{};                                   // connect
    std::unique_ptr<SendHold> send;                            // null: connect
    Job();
    Job(Job&&) noexcept;
    ~Job();
  };
  void Start(const sockaddr_in& where);  // context and worker, once
  void Run(const sockaddr_in& where);    // the progress thread, once
  void ProgressLoop();
  // One turn of the role's holder: queued jobs, then UCX's progress; when neither did
  // anything (and the busy poll is over), sleeps on the worker's fd up to wait_ms. True when
  // something happened.
  bool Turn(std::chrono::steady_clock::time_point* last_event, int wait_ms);
  bool TakeReady(Message* msg, bool* got);  // true: Recv returns (*got: with a message)
  void RunLost();                           // without the role
  bool LostPending();                       // lost peers not told to lost_ yet
  void Kick();     // the progress thread takes the role now (work waits and nobody holds it)
  bool RunJobs();  // false when none were queued
  bool JobsQueued();
  void MakeEndpoint(Job* job);
  void SendNow(const std::shared_ptr<Peer>& peer, std::unique_ptr<SendHold> hold);
  // Sends one peer's queued messages in order, the small ones packed into batches.
  void SendAll(const std::shared_ptr<Peer>& peer, std::vector<std::unique_ptr<SendHold>>* holds);
  static std::unique_ptr<SendHold> Pack(std::vector<std::unique_ptr<SendHold>>* run,
                                        uint64_t stream);
  void Hand(Peer* peer, std::unique_ptr<SendHold> hold);     // to UCX
  static bool FitsWindow(const Peer& peer, uint64_t bytes);  // flow control: may it go now
  void SendCredit(const Job& job);
  std::shared_ptr<Peer> GetPeer(int id) const;

  int64_t max_message_;
  uint64_t max_held_;        // bytes of messages held back for order, at most
  uint64_t held_bytes_ = 0;  // the role's holder
  size_t queue_bound_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  int efd_ = -1;
  size_t max_header_ = 1024;  // the worker's max_am_header (Start)
  std::thread progress_;
  std::atomic<bool> stop_{false};
  std::atomic<int> callers_{0};  // Send and Connect calls in progress
  struct Caller {
    explicit Caller(std::atomic<int>* n) : n_(n) { n_->fetch_add(1); }
    ~Caller() { n_->fetch_sub(1); }
    std::atomic<int>* n_;
  };

  // The progress role: its holder alone calls UCX (the worker, its endpoints and requests).
  std::mutex role_mu_;
  std::atomic<std::thread::id> role_owner_{};
  std::atomic<int> want_{0};                  // Recv callers waiting for the role
  std::atomic<int64_t> recv_released_ns_{0};  // when a Recv last gave it up (steady clock)
  std::atomic<bool> kick_{false};
  std::mutex aside_mu_;  // the progress thread's stand-by
  std::condition_variable aside_cv_;
  std::vector<int> lost_pending_;  // under peers_mu_

  std::mutex jobs_mu_;
  std::deque<Job> jobs_;

  mutable std::mutex peers_mu_;
  std::unordered_map<int, std::shared_ptr<Peer>> peers_;
  std::function<void(int)> lost_;
  // The role's holder (and Stop, which takes it for good) only.
  std::vector<ucp_ep_h> accepted_;  // endpoints of peers that connected to us
  std::vector<ucp_ep_h> retired_;   // accepted ones that failed, closed at Stop
  // Accepted endpoints whose first flush has not completed (see Peer::wired), with the last
  // credit of each stream that waits for it (credits are cumulative: the last says all).
  std::map<ucp_ep_h, std::map<uint64_t, std::pair<uint64_t, uint64_t>>> unwired_;
  void OnAcceptedWired(ucp_ep_h ep, bool ok);
  bool closing_ = false;  // Stop closes the endpoints: a flush completing then sends nothing
  std::vector<std::shared_ptr<Peer>> made_;        // every peer given an endpoint, closed at Stop
  std::unordered_map<uint64_t, Peer*> by_stream_;  // of made_: whose credits arrive
  // Per sender's stream: the next sequence number and the messages that wait for it.
  std::unordered_map<uint64_t, Stream> streams_;
  uint64_t seed_;  // of the stream names (under peers_mu_)

  std::mutex q_mu_;
  std::condition_variable q_cv_;
  std::unordered_map<uint64_t, Inbox> inbox_;
  std::deque<uint64_t> ready_;  // streams with messages, in turn
  size_t credit_batch_;
  int64_t busy_poll_us_;
  bool interrupted_ = false;
  bool stopped_ = false;
};

}  // namespace ps

#endif  // PS_TRANSPORT_UCX_VAN_H_
