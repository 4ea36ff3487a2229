#include "transport/ucx_van.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <glog/logging.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "transport/ucx_wire.h"

namespace ps {
namespace {

void CreditDone(void* request, ucs_status_t, void* user) {
  delete static_cast<Credit*>(user);
  ucp_request_free(request);
}

void SendDone(void* request, ucs_status_t, void* user) {
  auto* hold = static_cast<SendHold*>(user);
  hold->peer->inflight -= static_cast<int>(hold->count);
  delete hold;
  ucp_request_free(request);
}

sockaddr_in Resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) {
    throw Error(ErrorCode::kBadConfig, "cannot resolve host '" + host + "' (set PS_NODE_HOST)");
  }
  sockaddr_in sa = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  freeaddrinfo(res);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  return sa;
}

bool HasRdmaDevice() {
  DIR* d = opendir("/sys/class/infiniband");
  if (!d) return false;
  bool any = false;
  while (dirent* e = readdir(d)) any |= e->d_name[0] != '.';
  closedir(d);
  return any;
}

// A rendezvous receive in progress: its slot in the sender's stream.
struct RecvHold {
  UcxVan* van;
  uint64_t stream;
  std::shared_ptr<UcxVan::Slot> slot;
};

void RecvDone(void* request, ucs_status_t status, size_t, void* user) {
  std::unique_ptr<RecvHold> h(static_cast<RecvHold*>(user));
  h->slot->ready = true;
  h->slot->failed = status != UCS_OK;
  h->van->Flush(h->stream);
  ucp_request_free(request);
}

}  // namespace

UcxVan::Job::Job() = default;
UcxVan::Job::Job(Job&&) noexcept = default;
UcxVan::Job::~Job() = default;

UcxVan::UcxVan(int64_t max_message, int queue, int busy_poll_us)
    : max_message_(max_message),
      max_held_(2 * static_cast<uint64_t>(max_message)),
      queue_bound_(static_cast<size_t>(queue)),
      seed_(std::random_device{}() * 0x9E3779B97F4A7C15ull ^
            static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())),
      credit_batch_(std::max<size_t>(1, static_cast<size_t>(queue) / 8)),
      busy_poll_us_(busy_poll_us) {}

UcxVan::~UcxVan() { Stop(0); }

void UcxVan::Start(const sockaddr_in& where) {
  if (worker_) return;
  ucp_config_t* config;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) {
    throw Error(ErrorCode::kBadConfig, "UCX: cannot read its configuration (UCX_* variables)");
  }
  // A node on a loopback address talks to this host only: without this UCX also opens lanes
  // over the other interfaces' addresses (traffic to our own eth0 address, say). UCX_NET_DEVICES
  // set by the user wins.
  if ((ntohl(where.sin_addr.s_addr) >> 24) == 127 && !getenv("UCX_NET_DEVICES")) {
    ucp_config_modify(config, "NET_DEVICES", "lo");
  }
  // Without an RDMA device UCX's rendezvous moves the data by copies anyway (over TCP: an
  // am_bcopy pipeline) and only adds a handshake per message, each a wake-up of both progress
  // threads: messages up to 2 MB (ps's parts of 1 MB of values) go eager instead. That took
  // the 4 MB dense push from 0.9 to 1.7 GB/s (docs/benchmarks.md). Not higher: at 8 MB eager
  // messages that arrived faster than the node handled them took a refilling server 300 MB
  // past its slots (fault.big_handoff.ucx; 60-80 MB at 1-2 MB). UCX_RNDV_THRESH set by the
  // user wins; with an RDMA device UCX's own choice (zero-copy rendezvous) stands.
  if (!getenv("UCX_RNDV_THRESH") && !HasRdmaDevice()) {
    ucp_config_modify(config, "RNDV_THRESH", "2mb");
  }
  // UCX's TCP transport moves an eager message in segments of 8 KB by default: a send() and a
  // pack per segment, and the receiver reads 64 KB at a time. 256 KB segments read into 1 MB
  // buffers took the 1M-key push from 224-369 to 798-878 MB/s and the dense 4 MB push from
  // 1.4-2.7 to 4.1 GB/s (docs/benchmarks.md); larger ones were no faster and a receive buffer
  // is held per connection with data in flight. The user's UCX_TCP_*_SEG_SIZE wins. (Named
  // without the transport's prefix: UCX matches it against the TCP transport's table; no other
  // transport has these names.)
  if (!getenv("UCX_TCP_TX_SEG_SIZE") && !getenv("UCX_TCP_RX_SEG_SIZE")) {
    if (ucp_config_modify(config, "TX_SEG_SIZE", "256k") != UCS_OK ||
        ucp_config_modify(config, "RX_SEG_SIZE", "1m") != UCS_OK) {
      LOG(WARNING) << "UCX: cannot set its TCP segment sizes (UCX_TCP_TX_SEG_SIZE)";
    }
  }
  // Shared memory (the UCX_MM_ERROR_HANDLING=y opt-in): a sender whose receiver's FIFO (64
  // segments of 8 KB) is full waits for a wake-up that only other traffic brings, so in a
  // 2S/2W job the 100K-key push ran at 25-49 MB/s a worker. 1024 segments: 191-205 MB/s, and
  // 1S/1W unchanged (docs/benchmarks.md). The user's UCX_*_FIFO_SIZE wins.
  if (!getenv("UCX_MM_FIFO_SIZE") && !getenv("UCX_SYSV_FIFO_SIZE") &&
      !getenv("UCX_POSIX_FIFO_SIZE") &&
      ucp_config_modify(config, "MM_FIFO_SIZE", "1024") != UCS_OK) {
    LOG(WARNING) << "UCX: cannot set its shared-memory FIFO size (UCX_MM_FIFO_SIZE)";
  }
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  ucs_status_t st = ucp_init(&p, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) {
    throw Error(ErrorCode::kBadConfig, std::string("UCX init: ") + ucs_status_string(st));
  }
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // the progress role's holder alone calls UCX
  st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) {
    throw Error(ErrorCode::kBadConfig, std::string("UCX worker: ") + ucs_status_string(st));
  }
  ucp_worker_get_efd(worker_, &efd_);
  ucp_worker_attr_t wa{};
  wa.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  if (ucp_worker_query(worker_, &wa) == UCS_OK && wa.max_am_header > kFixed) {
    max_header_ = wa.max_am_header;
  }
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                  UCP_AM_HANDLER_PARAM_FIELD_ARG;
  hp.id = kAmId;
  hp.arg = this;
  hp.cb = [](void* arg, const void* header, size_t header_length, void* data, size_t length,
             const ucp_am_recv_param_t* param) {
    return static_cast<UcxVan*>(arg)->OnMessage(header, header_length, data, length, param);
  };
  ucp_worker_set_am_recv_handler(worker_, &hp);
  hp.id = kCreditAmId;
  hp.cb = [](void* arg, const void* header, size_t header_length, void*, size_t,
             const ucp_am_recv_param_t*) {
    static_cast<UcxVan*>(arg)->OnCredit(header, header_length);
    return UCS_OK;
  };
  ucp_worker_set_am_recv_handler(worker_, &hp);
}

void UcxVan::Run(const sockaddr_in& where) {
  Start(where);
  if (!progress_.joinable()) progress_ = std::thread([this] { ProgressLoop(); });
}

int UcxVan::Bind(const std::string& host, int port) {
  // Before the progress thread runs: nodes bind first, then connect.
  if (progress_.joinable()) throw Error("UcxVan::Bind after Connect");
  sockaddr_in sa = Resolve(host, port);
  Start(sa);
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
  lp.sockaddr.addrlen = sizeof(sa);
  lp.conn_handler.cb = [](ucp_conn_request_h req, void* arg) {
    static_cast<UcxVan*>(arg)->OnConnRequest(req);
  };
  lp.conn_handler.arg = this;
  ucs_status_t st = ucp_listener_create(worker_, &lp, &listener_);
  if (st != UCS_OK) {
    throw Error(ErrorCode::kBadConfig, "cannot bind " + host + ":" + std::to_string(port) +
                                           " over UCX: " + ucs_status_string(st) +
                                           " (set PS_NODE_HOST/PS_PORT)");
  }
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  int bound = port;
  if (ucp_listener_query(listener_, &attr) == UCS_OK) {
    bound = ntohs(reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
  }
  Run(sa);
  return bound;
}

void UcxVan::Connect(int id, const std::string& host, int port) {
  sockaddr_in sa = Resolve(host, port);  // a bad name is the caller's error, at once
  Caller in(&callers_);
  if (stop_.load()) return;
  Run(sa);
  auto peer = std::make_shared<Peer>();
  peer->van = this;
  peer->id = id;
  Job job;
  std::memcpy(&job.addr, &sa, sizeof(sa));
  job.peer = peer;
  {
    // Published and queued under jobs_mu_: a Send that finds the peer queues behind the
    // endpoint's making (Send takes jobs_mu_ after it found the peer).
    std::lock_guard<std::mutex> jl(jobs_mu_);
    {
      std::lock_guard<std::mutex> lk(peers_mu_);
      seed_ = seed_ * 6364136223846793005ull + 1442695040888963407ull;
      peer->stream = seed_ ^ (seed_ >> 29);
      peers_[id] = peer;
    }
    jobs_.push_back(std::move(job));
  }
  ucp_worker_signal(worker_);
  if (role_owner_.load() == std::thread::id()) Kick();  // nobody drives UCX to make it
}

void UcxVan::Drain(Peer* peer) {
  while (peer->wired && !peer->waiting.empty() && !peer->failed &&
         FitsWindow(*peer, peer->waiting.front()->bytes)) {
    std::unique_ptr<SendHold> hold = std::move(peer->waiting.front());
    peer->waiting.pop_front();
    Hand(peer, std::move(hold));
  }
}

void UcxVan::OnPeerError(Peer* peer) {
  if (peer->shared_memory && !peer->failed) counters_.shared_memory_peers--;
  peer->failed = true;  // its queued sends are dropped; the endpoint is closed at Stop
  for (const auto& w : peer->waiting) peer->inflight -= static_cast<int>(w->count);
  peer->waiting.clear();
  std::lock_guard<std::mutex> lk(peers_mu_);
  auto it = peers_.find(peer->id);
  if (it == peers_.end() || it->second.get() != peer) return;  // replaced since
  peers_.erase(it);
  lost_pending_.push_back(peer->id);  // told once the role is released (RunLost)
}

bool UcxVan::Connected(int id) const { return GetPeer(id) != nullptr; }

std::shared_ptr<UcxVan::Peer> UcxVan::GetPeer(int id) const {
  std::lock_guard<std::mutex> lk(peers_mu_);
  auto it = peers_.find(id);
  return it == peers_.end() ? nullptr : it->second;
}

bool UcxVan::Send(const Message& msg) {
  Caller in(&callers_);  // Stop waits for it before it destroys the worker
  std::shared_ptr<Peer> peer = GetPeer(msg.meta.receiver());
  if (!peer || stop_.load()) return false;
  const size_t meta_size = msg.meta.ByteSizeLong();
  const size_t n = msg.data.size();
  if (meta_size == 0 || meta_size > (1u << 24) || n > kMaxFrames) return false;
  if (peer->sent.load() - peer->credited.load() >= queue_bound_) {
    counters_.send_queue_full++;  // a stalled peer costs bounded memory; resends cover the loss
    return false;
  }
  // The header and the iov are made here, on the caller's thread; the progress thread only
  // stamps the sequence number and hands them to UCX.
  auto hold = std::make_unique<SendHold>();
  const bool meta_in_data = kFixed + n * sizeof(uint64_t) + meta_size > max_header_;
  hold->header.resize(kFixed + n * sizeof(uint64_t) + (meta_in_data ? 0 : meta_size));
  char* h = hold->header.data();
  Fixed fixed{kHeaderMagic,
              static_cast<uint32_t>(meta_size),
              static_cast<uint32_t>(n),
              meta_in_data ? kMetaInData : 0,
              peer->stream,
              0};
  std::memcpy(h, &fixed, kFixed);
  size_t bytes = meta_size;
  if (meta_in_data) {
    hold->meta.resize(Padded(meta_size));
    msg.meta.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(hold->meta.data()));
    hold->iov.push_back({hold->meta.data(), hold->meta.size()});
  }
  for (size_t i = 0; i < n; ++i) {
    const uint64_t size = msg.data[i].size();
    std::memcpy(h + kFixed + i * sizeof(uint64_t), &size, sizeof(size));
    if (size) hold->iov.push_back({msg.data[i].data(), size});
    if (Padded(size) != size) hold->iov.push_back({const_cast<char*>(kPad), Padded(size) - size});
    bytes += size;
  }
  if (!meta_in_data) {
    msg.meta.SerializeWithCachedSizesToArray(
        reinterpret_cast<uint8_t*>(h + kFixed + n * sizeof(uint64_t)));
  }
  hold->frames = msg.data;
  hold->bytes = hold->header.size();
  for (const auto& v : hold->iov) hold->bytes += v.length;
  hold->peer = peer;
  peer->inflight++;
  peer->sent++;
  Peer* p = peer.get();
  Job job;
  job.peer = std::move(peer);
  job.send = std::move(hold);
  counters_.messages_sent++;
  counters_.bytes_sent += bytes;
  const std::thread::id me = std::this_thread::get_id();
  {
    std::lock_guard<std::mutex> lk(jobs_mu_);
    jobs_.push_back(std::move(job));
  }
  if (role_owner_.load() != me && role_mu_.try_lock()) {
    // Nobody drives UCX: hand the message over on this thread, with what was queued before
    // it (packed with it when small).
    role_owner_.store(me);
    RunJobs();
    // What is left for UCX to finish (a large message's tail, sends waiting for credits or
    // wiring) needs a driver now, not after the progress thread's nap.
    const bool pending = p->inflight.load() > 0;
    role_owner_.store(std::thread::id());
    role_mu_.unlock();
    if (pending || JobsQueued()) Kick();
    RunLost();
    return true;
  }
  ucp_worker_signal(worker_);
  // The holder may have let the role go before it saw the signal.
  if (role_owner_.load() == std::thread::id()) Kick();
  return true;
}

void UcxVan::SendNow(const std::shared_ptr<Peer>& to, std::unique_ptr<SendHold> hold) {
  Peer& peer = *to;
  if (peer.failed || !peer.ep) {
    peer.inflight -= static_cast<int>(hold->count);
    return;  // lost with the peer, as a message in a broken connection is
  }
  if (!peer.wired || !peer.waiting.empty() || !FitsWindow(peer, hold->bytes)) {
    peer.waiting.push_back(std::move(hold));
    return;
  }
  Hand(&peer, std::move(hold));
}

bool UcxVan::FitsWindow(const Peer& peer, uint64_t bytes) {
  // A large message counts as half a window, so that one that waits always has more than an
  // eighth of a window taken ahead of it, and the credit that lets it go is sure to come.
  const uint64_t out = peer.bytes_out - peer.bytes_credited;
  return out == 0 || out + std::min(bytes, kWindowBytes / 2) <= kWindowBytes;
}

void UcxVan::Hand(Peer* peer, std::unique_ptr<SendHold> hold) {
  const uint64_t seq = peer->next_seq;  // a batch takes one number per message
  peer->next_seq += hold->count;
  std::memcpy(hold->header.data() + offsetof(Fixed, seq), &seq, sizeof(seq));
  peer->bytes_out += hold->bytes;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_CALLBACK |
                   UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;  // the receiver's credits come back by this endpoint
  // No data at all goes as an empty contiguous buffer (UCX rejects an empty iov).
  const bool empty = hold->iov.empty();
  const bool one = hold->iov.size() == 1;
  p.datatype = empty || one ? ucp_dt_make_contig(1) : ucp_dt_make_iov();
  p.cb.send = SendDone;
  p.user_data = hold.get();
  void* r = ucp_am_send_nbx(peer->ep, kAmId, hold->header.data(), hold->header.size(),
                            empty ? nullptr
                            : one ? hold->iov[0].buffer
                                  : hold->iov.data(),
                            one ? hold->iov[0].length : hold->iov.size(), &p);
  if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
    hold.release();  // SendDone frees it
  } else {
    // Done at once, or failed (the endpoint's error handler reports it).
    peer->inflight -= static_cast<int>(hold->count);
  }
}

ucs_status_t UcxVan::OnMessage(const void* header, size_t header_length, void* data, size_t length,
                               const ucp_am_recv_param_t* param) {
  const bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
  auto drop = [&] {
    counters_.malformed_dropped++;
    counters_.bytes_received += header_length + length;
    if (rndv) ucp_am_data_release(worker_, data);
    return UCS_OK;
  };
  if (header_length < kFixed || static_cast<int64_t>(length) > max_message_) return drop();
  Fixed fixed;
  std::memcpy(&fixed, header, kFixed);
  if (fixed.magic != kHeaderMagic) return drop();  // before it can name a stream
  const bool batch = fixed.flags & kBatch;
  const uint64_t count = batch ? fixed.frames : 1;
  if (batch && (header_length != kFixed || count < 2 || count > kMaxBatch)) return drop();
  auto sit = streams_.find(fixed.stream);
  if (sit == streams_.end()) {
    if (streams_.size() >= kMaxStreams) return drop();
    sit = streams_.emplace(fixed.stream, Stream()).first;
  }
  Stream& st = sit->second;
  if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) st.reply = param->reply_ep;
  const uint64_t bytes = header_length + length;
  auto overlaps = [&st](uint64_t seq, uint64_t n) {  // a slot held already covers one of them
    auto it = st.held.lower_bound(seq);
    if (it != st.held.end() && it->first < seq + n) return true;
    return it != st.held.begin() && std::prev(it)->first + std::prev(it)->second->count > seq;
  };
  if (fixed.seq < st.next || fixed.seq - st.next >= kMaxAhead || overlaps(fixed.seq, count) ||
      held_bytes_ + bytes > max_held_) {
    return drop();  // a repeat, or further ahead or more than any peer of ours sends
  }
  held_bytes_ += bytes;
  auto slot = std::make_shared<Slot>();
  slot->count = static_cast<uint32_t>(count);
  slot->header = SArray<char>(header_length);
  std::memcpy(slot->header.data(), header, header_length);
  st.held.emplace(fixed.seq, slot);
  if (!rndv) {
    slot->data = SArray<char>(length);
    if (length) std::memcpy(slot->data.data(), data, length);
    slot->ready = true;
  } else {
    slot->data = SArray<char>::Uninitialized(length);
    auto hold = std::make_unique<RecvHold>(RecvHold{this, fixed.stream, slot});
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = RecvDone;
    p.user_data = hold.get();
    void* r = ucp_am_recv_data_nbx(worker_, data, slot->data.data(), length, &p);
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
      hold.release();  // RecvDone marks it ready and flushes
      return UCS_OK;
    }
    slot->ready = true;
    slot->failed = UCS_PTR_IS_ERR(r);
  }
  Flush(fixed.stream);
  return UCS_OK;
}

void UcxVan::Flush(uint64_t stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  Stream& st = it->second;
  while (!st.held.empty() && st.held.begin()->first == st.next && st.held.begin()->second->ready) {
    std::shared_ptr<Slot> s = std::move(st.held.begin()->second);
    st.held.erase(st.held.begin());
    st.next += s->count;
    held_bytes_ -= s->header.size() + s->data.size();
    if (s->failed) {
      std::lock_guard<std::mutex> lk(q_mu_);
      counters_.malformed_dropped++;
      counters_.bytes_received += s->header.size() + s->data.size();
      Taken(stream, &inbox_[stream], s->header.size() + s->data.size(), s->count);
    } else if (s->count > 1) {
      DeliverBatch(stream, *s);
    } else {
      Deliver(s->header, s->data);
    }
  }
}

void UcxVan::Deliver(const SArray<char>& header, SArray<char> data) {
  const size_t total = header.size() + data.size();
  Fixed fixed;
  std::memcpy(&fixed, header.data(), kFixed);
  const size_t n = fixed.frames, meta_size = fixed.meta_size;
  const bool meta_in_data = fixed.flags & kMetaInData;
  Message msg;
  std::string why;
  bool ok = fixed.magic == kHeaderMagic && n <= kMaxFrames &&
            header.size() == kFixed + n * sizeof(uint64_t) + (meta_in_data ? 0 : meta_size) &&
            (!meta_in_data || Padded(meta_size) <= data.size()) &&
            DecodeMeta(meta_in_data ? data.data() : header.data() + kFixed + n * sizeof(uint64_t),
                       meta_size, &msg.meta, &why);
  size_t at = meta_in_data ? Padded(meta_size) : 0;
  for (size_t i = 0; ok && i < n; ++i) {
    uint64_t size;
    std::memcpy(&size, header.data() + kFixed + i * sizeof(uint64_t), sizeof(size));
    if (size > data.size() || at > data.size() - size) {
      ok = false;
      break;
    }
    msg.data.push_back(data.Segment(at, at + size));
    at += Padded(size);
  }
  std::lock_guard<std::mutex> lk(q_mu_);
  counters_.bytes_received += total;
  Inbox& in = inbox_[fixed.stream];
  if (!ok) {
    counters_.malformed_dropped++;
    VLOG(1) << "dropped malformed UCX message: " << why;
    Taken(fixed.stream, &in, total);
    return;
  }
  if (in.q.size() >= queue_bound_) {
    // Only a sender that ignores our credits gets here.
    counters_.recv_queue_full++;
    Taken(fixed.stream, &in, total);
    return;
  }
  counters_.messages_received++;
  in.q.emplace_back(std::move(msg), total);
  if (!in.listed) {
    in.listed = true;
    ready_.push_back(fixed.stream);
  }
  q_cv_.notify_one();
}

void UcxVan::Taken(uint64_t stream, Inbox* in, uint64_t bytes, uint64_t count) {
  in->taken += count;
  in->taken_bytes += bytes;
  if (in->taken - in->credited < credit_batch_ &&
      in->taken_bytes - in->credited_bytes < kWindowBytes / 8) {
    return;
  }
  in->credited = in->taken;
  in->credited_bytes = in->taken_bytes;
  Job job;
  job.credit_stream = stream;
  job.credit = in->taken;
  job.credit_bytes = in->taken_bytes;
  {
    std::lock_guard<std::mutex> jl(jobs_mu_);
    jobs_.push_back(std::move(job));
  }
  // From Recv's thread as well: Stop destroys the worker only after Recv's callers are gone
  // (it sets stopped_ under q_mu_, which the caller of Taken holds).
  if (!stopped_) ucp_worker_signal(worker_);
}

void UcxVan::SendCredit(const Job& job) {
  auto it = streams_.find(job.credit_stream);
  if (it == streams_.end() || !it->second.reply) return;  // a sender that wants no credits
  auto un = unwired_.find(it->second.reply);
  if (un != unwired_.end()) {
    un->second[job.credit_stream] = {job.credit, job.credit_bytes};
    return;
  }
  auto* c = new Credit{kCreditMagic, 0, job.credit_stream, job.credit, job.credit_bytes};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = CreditDone;
  p.user_data = c;
  void* r = ucp_am_send_nbx(it->second.reply, kCreditAmId, c, sizeof(*c), nullptr, 0, &p);
  if (r == nullptr || UCS_PTR_IS_ERR(r)) delete c;  // done at once, or the endpoint failed
}

void UcxVan::OnCredit(const void* header, size_t length) {
  Credit c;
  if (length != sizeof(c)) return;
  std::memcpy(&c, header, sizeof(c));
  if (c.magic != kCreditMagic) return;
  auto it = by_stream_.find(c.stream);
  if (it == by_stream_.end()) return;
  Peer* peer = it->second;
  // Cumulative, so a late credit cannot shrink the window; never past what was sent. This
  // thread alone writes credited.
  const uint64_t to = std::min(c.taken, peer->sent.load());
  if (to > peer->credited.load()) peer->credited.store(to);
  peer->bytes_credited = std::max(peer->bytes_credited, std::min(c.bytes, peer->bytes_out));
  Drain(peer);
}

void UcxVan::WatchPeers(std::function<void(int)> lost) {
  std::lock_guard<std::mutex> lk(peers_mu_);
  lost_ = std::move(lost);
}

void UcxVan::Stop(int linger_ms) {
  {
    std::lock_guard<std::mutex> lk(q_mu_);
    if (stopped_) return;
    stopped_ = true;
    q_cv_.notify_all();
  }
  if (!worker_) return;
  {
    std::lock_guard<std::mutex> lk(peers_mu_);
    lost_ = nullptr;
    peers_.clear();
  }
  stop_ = true;
  // A Send or Connect that read stop_ before it was set may still touch the worker.
  while (callers_.load() > 0) std::this_thread::yield();
  ucp_worker_signal(worker_);
  aside_cv_.notify_all();
  if (progress_.joinable()) progress_.join();
  // A Recv in progress saw stopped_ (the signal woke it) and gives the role up: this thread
  // takes it for good and is UCX's only caller now. Sends queued before Stop go out, and get
  // up to linger_ms with everything still in flight.
  role_mu_.lock();
  role_owner_.store(std::this_thread::get_id());
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(linger_ms);
  if (linger_ms > 0) {
    RunJobs();
    while (std::chrono::steady_clock::now() < until) {
      bool busy = false;
      for (const auto& p : made_) busy |= p->inflight.load() > 0 && !p->failed;
      if (!busy) break;
      ucp_worker_progress(worker_);
    }
  }
  {
    std::lock_guard<std::mutex> lk(jobs_mu_);
    jobs_.clear();
  }
  closing_ = true;
  std::vector<ucp_ep_h> eps;
  for (const auto& p : made_) eps.push_back(p->ep);
  eps.insert(eps.end(), accepted_.begin(), accepted_.end());
  eps.insert(eps.end(), retired_.begin(), retired_.end());
  accepted_.clear();
  retired_.clear();
  for (ucp_ep_h e : eps) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = linger_ms > 0 ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
    void* r = ucp_ep_close_nbx(e, &p);
    if (r && !UCS_PTR_IS_ERR(r)) {
      // Past the linger what is left is forced.
      while (ucp_request_check_status(r) == UCS_INPROGRESS &&
             std::chrono::steady_clock::now() < until) {
        ucp_worker_progress(worker_);
      }
      ucp_request_free(r);
    }
  }
  if (listener_) ucp_listener_destroy(listener_);
  ucp_worker_destroy(worker_);
  by_stream_.clear();
  made_.clear();  // after the worker: a peer is its endpoint's error-handler argument
  ucp_cleanup(context_);
  worker_ = nullptr;
  listener_ = nullptr;
  context_ = nullptr;
  {
    std::lock_guard<std::mutex> lk(peers_mu_);
    lost_pending_.clear();
  }
  role_owner_.store(std::thread::id());
  role_mu_.unlock();
}

}  // namespace ps

// What libps calls after loading this library (PS_VAN=ucx): see MakeVan in van.cc.
extern "C" ps::Van* PsMakeUcxVan(int64_t max_message, int queue, int busy_poll_us) {
  return new ps::UcxVan(max_message, queue, busy_poll_us);
}
