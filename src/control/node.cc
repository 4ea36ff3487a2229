#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "consistency/barrier_policy.h"
#include "control/node_impl.h"
#include "util/process_setup.h"

namespace ps {
namespace {

constexpr size_t kMaxParked = 100000;
constexpr uint64_t kMaxParkedBytes = 256ull << 20;
// Parked messages handed to their customer between two receives.
constexpr size_t kDrainBatch = 64;
constexpr int64_t kDrainBudgetUs = 5000;
constexpr int kRecvPollMs = 100;

}  // namespace

// ---- Node (public facade) ----

Node::Node(Config config) {
  ExitOnUncaughtError();
  InitLoggingOnce();
  config.Validate();
  impl_ = std::make_unique<Impl>(std::move(config));
}
Node::~Node() = default;
void Node::Start() { impl_->Start(); }
void Node::Barrier(int groups) { impl_->Barrier(groups); }
void Node::Finalize() { impl_->Finalize(); }
void Node::Leave() { impl_->Leave(); }
Role Node::role() const { return impl_->cfg.role; }
int Node::id() const { return impl_->id(); }
int Node::rank() const {
  std::lock_guard<std::mutex> lk(impl_->mu_);
  return impl_->my_rank_;
}
int Node::num_servers() const { return impl_->cfg.num_servers; }
int Node::num_workers() const { return impl_->cfg.num_workers; }
std::vector<NodeInfo> Node::nodes() const {
  std::lock_guard<std::mutex> lk(impl_->mu_);
  return impl_->nodes_;
}
int Node::TryNextTask() { return impl_->NextTask(false); }
void Node::TaskDone(int task) { impl_->TaskDone(task); }
void Node::AbortJob(const std::string& why, ErrorCode code) { impl_->AbortJob(why, code); }
Node::TaskStats Node::task_stats() const { return impl_->GetTaskStats(); }
void Node::SetConsistency(const std::string& policy, int max_delay) {
  impl_->SetConsistency(policy, max_delay != kKeepDelay, max_delay == kKeepDelay ? 0 : max_delay);
}
void Node::SetConsistency(const std::string& policy, int max_delay, const std::string& group) {
  impl_->SetConsistency(policy, max_delay != kKeepDelay, max_delay == kKeepDelay ? 0 : max_delay,
                        impl_->GroupIndexOf(group, "SetConsistency"));
}
std::string Node::consistency_policy() const { return impl_->policy(); }
int Node::max_delay() const { return impl_->max_delay(); }
std::string Node::consistency_policy(const std::string& group) const {
  return impl_->policy(impl_->GroupIndexOf(group, "consistency_policy"));
}
int Node::max_delay(const std::string& group) const {
  return impl_->max_delay(impl_->GroupIndexOf(group, "max_delay"));
}
std::string Node::group() const { return impl_->cfg.worker_group; }
int Node::group_rank() const {
  std::lock_guard<std::mutex> lk(impl_->mu_);
  for (const auto& n : impl_->nodes_) {
    if (n.id == impl_->my_id_) return n.group_rank;
  }
  return -1;
}
std::vector<std::pair<std::string, int>> Node::worker_groups() const {
  std::lock_guard<std::mutex> lk(impl_->mu_);  // a worker joining with a new group adds one
  if (!impl_->cfg.worker_groups.empty()) return impl_->cfg.worker_groups;
  return {{"", impl_->cfg.num_workers}};
}
void Node::Barrier(const std::string& group) {
  impl_->Barrier(WorkerGroupBarrier(impl_->GroupIndexOf(group, "Barrier")));
}
std::vector<int> Node::dead_nodes() const {
  std::lock_guard<std::mutex> lk(impl_->mu_);
  return impl_->dead_;
}
uint64_t Node::ring_epoch() const { return impl_->ring_epoch(); }
const Config& Node::config() const { return impl_->cfg; }

NodeStats Node::stats() const { return impl_->Stats(); }

NodeStats Node::Impl::Stats() const {
  NodeStats s;
  if (!van) return s;
  const auto& c = van->counters();
  s.messages_sent = c.messages_sent;
  s.messages_received = c.messages_received;
  s.bytes_sent = c.bytes_sent;
  s.bytes_received = c.bytes_received;
  s.malformed_dropped = c.malformed_dropped + filter_rejected_.load() + alloc_dropped_.load();
  s.send_queue_full = c.send_queue_full;
  s.shared_memory_peers = c.shared_memory_peers;
  s.messages_batched = c.messages_batched;
  s.injected_drops = c.injected_drops;
  s.injected_duplicates = c.injected_duplicates;
  s.injected_delays = c.injected_delays;
  s.lease_dropped = lease_dropped_.load();
  return s;
}

std::string Node::StatsJson() const {
  NodeStats s = stats();
  std::ostringstream os;
  os << "{\"role\":\"" << RoleName(role()) << "\",\"rank\":" << rank() << ",\"id\":" << id()
     << ",\"messages_sent\":" << s.messages_sent << ",\"messages_received\":" << s.messages_received
     << ",\"bytes_sent\":" << s.bytes_sent << ",\"bytes_received\":" << s.bytes_received
     << ",\"malformed_dropped\":" << s.malformed_dropped
     << ",\"send_queue_full\":" << s.send_queue_full
     << ",\"shared_memory_peers\":" << s.shared_memory_peers
     << ",\"messages_batched\":" << s.messages_batched << ",\"injected_drops\":" << s.injected_drops
     << ",\"injected_duplicates\":" << s.injected_duplicates
     << ",\"injected_delays\":" << s.injected_delays << ",\"lease_dropped\":" << s.lease_dropped
     << ",\"filters\":" << impl_->filters->StatsJson() << "}";
  return os.str();
}

// ---- Node::Impl ----

int Node::Impl::id() const {
  std::lock_guard<std::mutex> lk(mu_);
  return my_id_;
}

std::shared_ptr<const Ring> Node::Impl::ring() const {
  std::lock_guard<std::mutex> lk(mu_);
  return ring_;
}

void Node::Impl::SendControl(int to, pb::Control control, bool quiet) {
  Message m;
  m.meta.set_receiver(to);
  *m.meta.mutable_control() = std::move(control);
  if (!Send(m) && !quiet) LOG(WARNING) << "cannot send control message to node " << to;
}

int Node::Impl::WorkerGroupOf(int id) const {
  std::lock_guard<std::mutex> lk(mu_);
  return WorkerGroupLocked(id);
}

int Node::Impl::WorkerGroupLocked(int id) const {
  for (const auto& n : nodes_) {
    if (n.id == id) return n.role == Role::kWorker ? std::max(0, cfg.GroupIndex(n.group)) : -1;
  }
  return -1;
}

bool Node::Impl::IsWorker(int id) const {
  std::lock_guard<std::mutex> lk(mu_);
  return IsWorkerLocked(id);
}

bool Node::Impl::IsWorkerLocked(int id) const {
  for (const auto& n : nodes_) {
    if (n.id == id) return n.role == Role::kWorker;
  }
  return false;
}

void Node::Impl::CountDeadWorkers() {
  const auto n =
      std::count_if(dead_.begin(), dead_.end(), [this](int id) { return IsWorkerLocked(id); });
  dead_workers_.store(static_cast<uint32_t>(n), std::memory_order_release);
}

bool Node::Impl::Send(Message& msg) {
  msg.meta.set_magic(kMagic);
  msg.meta.set_sender(my_id_.load(std::memory_order_relaxed));
  if (!msg.meta.has_control() && filters->Applies(msg)) {
    // The caller keeps its message as it was (a worker resends it): encode a copy.
    Message wire = msg;
    filters->Encode(&wire);
    return SendRaw(wire);
  }
  return SendRaw(msg);
}

bool Node::Impl::SendRaw(Message& msg) {
  if (!SendOrConnect(msg)) return false;
  peer_sent_.Add(msg.meta.receiver(), msg.DataBytes());
  return true;
}

bool Node::Impl::SendOrConnect(Message& msg) {
  if (van->Send(msg)) return true;
  // Not connected yet (or the send failed): connect from the node table and try once more.
  const int to = msg.meta.receiver();
  {
    std::lock_guard<std::mutex> ck(connect_mu_);
    if (!van->Connected(to)) {
      NodeInfo target;
      {
        std::lock_guard<std::mutex> lk(mu_);
        for (const auto& n : nodes_) {
          if (n.id == to) target = n;
        }
      }
      if (target.id < 0) return false;
      van->Connect(to, target.host, target.port);
    }
  }
  return van->Send(msg);
}

void Node::Impl::PollOnce(int timeout_ms) {
  Message msg;
  struct Mark {  // who is dispatching, for KVWorker's back-pressure
    std::atomic<std::thread::id>* at;
    explicit Mark(std::atomic<std::thread::id>* a) : at(a) {
      at->store(std::this_thread::get_id());
    }
    ~Mark() { at->store(std::thread::id()); }
  } mark(&dispatcher_);
  try {
    if (draining_.load(std::memory_order_acquire) && DrainParked(kDrainBatch, kDrainBudgetUs))
      timeout_ms = 0;
    if (!van->Recv(&msg, timeout_ms)) return;
    peer_received_.Add(msg.meta.sender(), msg.DataBytes());
    if (msg.meta.sender() == 0) heard_scheduler_ms_ = NowMs();
    if (msg.meta.has_control()) {
      HandleControl(msg);
    } else {
      Dispatch(msg);
    }
  } catch (const std::bad_alloc&) {
    // One message that asks for more memory than there is (a hostile size claim, or a real one
    // this machine cannot hold) is dropped and counted; the node goes on. Senders of lost
    // requests resend them, and Wait times out naming the server if it never fits.
    alloc_dropped_++;
    LOG(ERROR) << "dropped a message from node " << msg.meta.sender()
               << ": out of memory while handling it";
  }
}

void Node::Impl::RecvLoop() {
  if (cfg.role != Role::kWorker) {
    // Only workers wait for replies, so on other nodes this thread always receives.
    while (running_) PollOnce(kRecvPollMs);
    return;
  }
  constexpr auto kGrace = std::chrono::milliseconds(2);
  while (running_) {
    {
      std::unique_lock<std::mutex> g(token_mu_);
      auto free_now = [this, kGrace] {
        return holder_ == Holder::kNone && !want_ &&
               std::chrono::steady_clock::now() - user_released_ >= kGrace;
      };
      token_cv_.wait_for(g, kGrace, [&] { return !running_ || free_now(); });
      if (!running_) break;
      if (!free_now()) continue;
      holder_ = Holder::kBackground;
    }
    PollOnce(kRecvPollMs);
    {
      std::lock_guard<std::mutex> g(token_mu_);
      holder_ = Holder::kNone;
    }
    token_cv_.notify_all();
  }
}

bool Node::Impl::AcquireReceiver() {
  std::unique_lock<std::mutex> g(token_mu_);
  if (!running_ || cfg.role != Role::kWorker || holder_ == Holder::kUser || want_) return false;
  want_ = true;
  while (holder_ == Holder::kBackground && running_) {
    van->Interrupt();
    token_cv_.wait_for(g, std::chrono::milliseconds(5));
  }
  want_ = false;
  if (!running_ || holder_ != Holder::kNone) {
    token_cv_.notify_all();
    return false;
  }
  holder_ = Holder::kUser;
  return true;
}

void Node::Impl::ReleaseReceiver() {
  // No notify: the background thread looks again when its grace period ends, and waking it
  // now would cost a context switch per request for nothing.
  std::lock_guard<std::mutex> g(token_mu_);
  holder_ = Holder::kNone;
  user_released_ = std::chrono::steady_clock::now();
}

void Node::Impl::HandleControl(const Message& msg) {
  const pb::Control& c = msg.meta.control();
  const int from = msg.meta.sender();
  if (cfg.role == Role::kScheduler) {
    std::unique_lock<std::mutex> lk(mu_);
    if (Apply(sched_->OnControl(from, c, NowMs()), &lk)) Forwarded(from, c);
    return;
  }
  if (from == 0 && c.cmd() == pb::Control::HEARTBEAT && c.want_metrics()) {
    // On the receive thread, not the heartbeat thread: collecting takes the customers' locks
    // (a server's core lock, which a range copy holds for a while), and beats must not wait.
    want_metrics_.store(true);
    SendMetrics(false);
  }
  if (from == 0 && c.cmd() == pb::Control::HEARTBEAT && c.beat_us() > 0) {
    // The scheduler heard a heartbeat sent at beat_us: the lease runs from it, and after a
    // stall it holds again.
    const bool lapsed = unechoed_.exchange(false);  // LeaseValid found no fresh echo
    if (lease_.Echoed(c.beat_us()) || lapsed) {
      LOG(INFO) << "node " << id() << ": the scheduler confirmed it is in the job; serving again";
    }
    return;
  }
  std::unique_lock<std::mutex> lk(mu_);
  if (from != 0) return;  // only the scheduler sends control messages to nodes
  switch (c.cmd()) {
    case pb::Control::NODE_TABLE: {
      if (ready_) break;
      nodes_.clear();
      for (const auto& e : c.nodes()) {
        NodeInfo n = SchedulerCore::EntryInfo(e);
        nodes_.push_back(n);
        if (n.id == c.your_id()) my_rank_ = n.rank;
      }
      my_id_ = c.your_id();
      dead_.assign(c.dead().begin(), c.dead().end());
      CountDeadWorkers();
      // The job's barrier policy and bounded delay are the scheduler's, whatever this node's
      // own environment said (a node that joins later gets them as they are now).
      if (!c.policy().empty()) policy_ = c.policy();
      if (c.set_delay()) max_delay_ = c.max_delay();
      // A node that joined takes the job's groups (its own environment named only its group).
      if (c.group_names_size() > 0 && c.group_names_size() == c.group_sizes_size()) {
        cfg.worker_groups.clear();
        for (int i = 0; i < c.group_names_size(); ++i) {
          cfg.worker_groups.emplace_back(c.group_names(i), c.group_sizes(i));
        }
      }
      // The named tables so far (a node that joins a running job learns them here; listeners
      // start after Start and hear of every table known when they do).
      if (tables_.empty()) TablesFrom(c, &tables_);
      group_policy_.clear();
      group_delay_.clear();
      for (int i = 0; i < c.policy_groups_size() && i < c.group_policies_size(); ++i) {
        group_policy_[c.policy_groups(i)] = c.group_policies(i);
      }
      for (int i = 0; i < c.delay_groups_size() && i < c.group_delays_size(); ++i) {
        group_delay_[c.delay_groups(i)] = c.group_delays(i);
      }
      for (int i = 0; i < c.released_groups_size() && i < c.released_seqs_size(); ++i) {
        barrier_sent_[c.released_groups(i)] = c.released_seqs(i);
        barrier_done_[c.released_groups(i)] = c.released_seqs(i);
      }
      SetRing(RingCore::RingOf(c.ring()));
      lease_.Start(SteadyUs());  // the scheduler counted this node in when it sent the table
      ready_ = true;
      cv_.notify_all();
      break;
    }
    case pb::Control::BARRIER_WAIT: {
      // Kept for the timeout's message; logged so that a held barrier is never silent.
      barrier_wait_[c.barrier_groups()] = {c.barrier_seq(), c.error()};
      LOG_IF(WARNING, c.barrier_groups() != kAllGroups) << c.error();
      LOG_IF(INFO, c.barrier_groups() == kAllGroups) << c.error();
      break;
    }
    case pb::Control::BARRIER_DONE: {
      uint64_t& done = barrier_done_[c.barrier_groups()];
      done = std::max<uint64_t>(done, c.barrier_seq());
      cv_.notify_all();
      break;
    }
    case pb::Control::REJECT:
      reject_ = c.error().empty() ? "rejected" : c.error();
      cv_.notify_all();
      break;
    case pb::Control::CONSISTENCY:
      lk.unlock();
      ApplyConsistency(c);
      lk.lock();
      break;
    case pb::Control::TABLES:
      lk.unlock();
      AdoptTables(c);
      lk.lock();
      break;
    case pb::Control::NODE_JOINED: {
      if (c.nodes_size() != 1) break;
      NodeInfo n = SchedulerCore::EntryInfo(c.nodes(0));
      bool known = false;
      for (const auto& m : nodes_) known |= m.id == n.id;
      if (known) break;
      nodes_.push_back(n);
      // The scheduler's order of joins: every node's group indexes agree.
      if (n.role == Role::kWorker) JoinGroup(&cfg.worker_groups, n.group, cfg.num_workers);
      lk.unlock();
      NotifyJoined(n);
      lk.lock();
      break;
    }
    case pb::Control::NODE_DEAD: {
      std::shared_ptr<const Ring> fresh;
      if (c.has_ring() && ring_ && c.ring().epoch() > ring_->epoch()) {
        SetRing(RingCore::RingOf(c.ring()));
        if (next_ring_ && next_ring_->epoch() <= ring_->epoch()) next_ring_ = nullptr;
        fresh = ring_;
      }
      const bool known = std::find(dead_.begin(), dead_.end(), c.dead_id()) != dead_.end();
      if (!known) {
        dead_.push_back(c.dead_id());
        CountDeadWorkers();
      }
      lk.unlock();
      if (!known) NotifyDead(c.dead_id());
      if (fresh) NotifyRing(fresh);
      lk.lock();
      break;
    }
    case pb::Control::RING_PREPARE: {
      if (!c.has_ring() || !ring_ || !RingCore::TakePrepare(c, ring_->epoch(), &prepare_seen_)) {
        break;
      }
      auto next = RingCore::RingOf(c.ring());
      auto cut = MissedCut(next_ring_, *next, ring_->epoch());
      if (cut) {
        SetRing(cut);
        cv_.notify_all();  // as for the RING itself
      }
      next_ring_ = next->epoch() > ring_->epoch() ? next : nullptr;
      lk.unlock();
      if (cut) NotifyRing(cut);
      NotifyPrepare(next);
      lk.lock();
      break;
    }
    case pb::Control::RING: {
      if (!c.error().empty()) {  // the scheduler refused this server's Leave
        leave_error_ = c.error();
        cv_.notify_all();
        break;
      }
      if (!c.has_ring() || !ring_ || c.ring().epoch() <= ring_->epoch()) break;
      SetRing(RingCore::RingOf(c.ring()));
      if (next_ring_ && next_ring_->epoch() <= ring_->epoch()) next_ring_ = nullptr;
      cv_.notify_all();  // a Leave waits for the ring without this server
      auto fresh = ring_;
      lk.unlock();
      NotifyRing(fresh);
      lk.lock();
      break;
    }
    case pb::Control::TASK_GIVE:
      task_answer_ = c.task();
      task_data_ = c.task_data();
      task_answers_++;
      cv_.notify_all();
      break;
    case pb::Control::ADD_TASKS:
      tasks_added_[c.request()] = c.task();
      cv_.notify_all();
      break;
    case pb::Control::ABORT:
      lk.unlock();
      Fatal(c.error(), ErrorCodeFromWire(c.error_code(), ErrorCode::kShutDown));
      lk.lock();
      break;
    default:
      break;
  }
}

void Node::Impl::Dispatch(Message& msg) {
  if (cfg.role == Role::kServer && msg.meta.request()) {
    const int64_t now = SteadyUs();
    if (!LeaseValid(now)) {
      lease_dropped_++;  // the sender resends; by then the lease is confirmed, or this node fenced
      return;
    }
    if (stalled_) served_since_stall_++;
    last_served_us_.store(now, std::memory_order_relaxed);
  }
  if (msg.meta.codec_size() > 0 || filters->enabled() || msg.meta.key_miss()) {
    uint64_t missed = 0;
    const std::string err = filters->Decode(&msg, &missed);
    if (missed) {
      // A key list this node no longer holds (evicted; or it is new): ask for the keys.
      Message miss = FilterChain::MissReply(msg, missed);
      Send(miss);
      return;
    }
    if (!err.empty()) {
      filter_rejected_++;
      LOG(WARNING) << "dropped a message from node " << msg.meta.sender()
                   << " whose frames do not decode: " << err;
      return;
    }
  }
  // A worker's request routed under the prepared ring: the cut-over reached the worker first.
  // (Copies between servers carry epochs too, but only a worker has adopted a cut-over.)
  if (msg.meta.epoch() > ring_epoch() && msg.meta.request() && !msg.meta.replica() &&
      msg.meta.op() != pb::Meta::REFILL && msg.meta.op() != pb::Meta::HANDOVER) {
    AdoptNextRing(msg.meta.epoch());
  }
  std::lock_guard<std::mutex> lk(cust_mu_);
  auto it = customers_.find(msg.meta.app_id());
  auto parked = parked_.find(msg.meta.app_id());
  if (it != customers_.end() && parked == parked_.end()) {
    it->second->Process(msg);
    return;
  }
  // No customer yet, or older messages for it are still parked: it waits (behind them).
  const uint64_t bytes = msg.DataBytes();
  if (parked_count_ >= kMaxParked || parked_bytes_ + bytes > kMaxParkedBytes) {
    LOG_EVERY_N(WARNING, 1000) << "dropping a message for app " << msg.meta.app_id()
                               << ": too many wait for their customer (its sender resends it)";
    return;
  }
  parked_[msg.meta.app_id()].push_back(std::move(msg));
  parked_count_++;
  parked_bytes_ += bytes;
}

void Node::Impl::Stop() {
  if (stopped_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    running_ = false;
    cv_.notify_all();
  }
  {
    std::lock_guard<std::mutex> g(token_mu_);
    token_cv_.notify_all();
  }
  metrics_http_.reset();  // waits for a page being served
  if (van) van->Interrupt();
  if (recv_thread_.joinable()) recv_thread_.join();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  // The scheduler's last messages (the release of the final barrier) must reach everyone;
  // the other nodes' last messages were answered already, and anything still queued (a
  // heartbeat to a scheduler that has exited) is dropped instead of delaying the exit.
  if (van) van->Stop(cfg.role == Role::kScheduler ? 2000 : 0);
}

}  // namespace ps
