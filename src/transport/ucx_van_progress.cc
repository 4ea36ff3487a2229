// UcxVan's progress role: who drives UCX (the thread in Recv, a sender that finds the role
// free, or the progress thread in the gaps), the receive side and the work queued for the
// holder. The rest of the van is in ucx_van.cc, its endpoints in ucx_van_endpoints.cc.
#include <poll.h>

#include <algorithm>
#include <chrono>

#include "transport/ucx_van.h"
#include "transport/ucx_wire.h"

namespace ps {

namespace {

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// How long the progress thread leaves the role to Recv after a Recv gave it up: the node's
// receive loop is back within a message's handling, and taking the role in between would cost
// both threads a wake-up per message. Longer gaps (a long message, a worker computing) are
// covered by the progress thread, which looks again after at most kMaxNapUs.
constexpr int64_t kRecvGraceNs = 1000000;
constexpr int64_t kMaxNapUs = 20000;

}  // namespace

bool UcxVan::Turn(std::chrono::steady_clock::time_point* last_event, int wait_ms) {
  const bool ran = RunJobs();
  if (ucp_worker_progress(worker_) || ran) {
    if (busy_poll_us_ > 0) *last_event = std::chrono::steady_clock::now();
    return true;
  }
  if (busy_poll_us_ > 0 &&
      std::chrono::steady_clock::now() - *last_event < std::chrono::microseconds(busy_poll_us_)) {
    return false;
  }
  // A job queued (or an Interrupt, or a Recv that wants the role) after RunJobs signalled the
  // worker: arm sees the signal and says busy.
  if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) return true;
  pollfd p{efd_, POLLIN, 0};
  poll(&p, 1, wait_ms);
  return false;
}

void UcxVan::ProgressLoop() {
  int64_t nap_us = 1000;
  while (!stop_.load()) {
    const bool kicked = kick_.exchange(false);
    if (want_.load() > 0 || (!kicked && SteadyNs() - recv_released_ns_.load() < kRecvGraceNs) ||
        !role_mu_.try_lock()) {
      // A Recv drives UCX, or did just now and will again soon: stand by.
      std::unique_lock<std::mutex> l(aside_mu_);
      aside_cv_.wait_for(l, std::chrono::microseconds(nap_us),
                         [this] { return stop_.load() || kick_.load(); });
      nap_us = std::min(nap_us * 2, kMaxNapUs);
      continue;
    }
    nap_us = 1000;
    role_owner_.store(std::this_thread::get_id());
    auto last_event = std::chrono::steady_clock::now();
    // Send, Connect, Stop and a Recv that wants the role signal the worker; the timeout is a
    // backstop.
    while (!stop_.load() && want_.load() == 0 && !LostPending()) Turn(&last_event, 100);
    role_owner_.store(std::thread::id());
    role_mu_.unlock();
    RunLost();
  }
}

bool UcxVan::LostPending() {
  std::lock_guard<std::mutex> lk(peers_mu_);
  return !lost_pending_.empty();
}

void UcxVan::RunLost() {
  std::vector<int> ids;
  std::function<void(int)> lost;
  {
    std::lock_guard<std::mutex> lk(peers_mu_);
    ids.swap(lost_pending_);
    lost = lost_;
  }
  if (lost) {
    for (int id : ids) lost(id);
  }
}

void UcxVan::Kick() {
  {
    std::lock_guard<std::mutex> l(aside_mu_);
    kick_ = true;
  }
  aside_cv_.notify_one();
}

bool UcxVan::JobsQueued() {
  std::lock_guard<std::mutex> lk(jobs_mu_);
  return !jobs_.empty();
}

bool UcxVan::RunJobs() {
  std::deque<Job> jobs;
  {
    std::lock_guard<std::mutex> lk(jobs_mu_);
    jobs.swap(jobs_);
  }
  // Sends are gathered per peer (in order) and leave packed; a connect or a credit first sends
  // what was gathered before it, so every job still runs after those queued before it.
  std::vector<std::pair<std::shared_ptr<Peer>, std::vector<std::unique_ptr<SendHold>>>> sends;
  auto send_gathered = [&] {
    for (auto& s : sends) SendAll(s.first, &s.second);
    sends.clear();
  };
  for (Job& j : jobs) {
    if (j.peer && j.send) {
      auto it = std::find_if(sends.begin(), sends.end(),
                             [&j](const auto& s) { return s.first == j.peer; });
      if (it == sends.end()) {
        sends.emplace_back(j.peer, std::vector<std::unique_ptr<SendHold>>());
        it = std::prev(sends.end());
      }
      it->second.push_back(std::move(j.send));
      continue;
    }
    send_gathered();
    if (!j.peer) {
      SendCredit(j);
    } else {
      MakeEndpoint(&j);
    }
  }
  send_gathered();
  return !jobs.empty();
}

bool UcxVan::TakeReady(Message* msg, bool* got) {
  std::lock_guard<std::mutex> lk(q_mu_);
  if (interrupted_) {
    interrupted_ = false;
    return true;
  }
  if (stopped_) return true;
  if (ready_.empty()) return false;
  const uint64_t stream = ready_.front();
  ready_.pop_front();
  Inbox& in = inbox_[stream];
  *msg = std::move(in.q.front().first);
  const uint64_t bytes = in.q.front().second;
  in.q.pop_front();
  if (in.q.empty()) {
    in.listed = false;
  } else {
    ready_.push_back(stream);
  }
  Taken(stream, &in, bytes);
  *got = true;
  return true;
}

bool UcxVan::Recv(Message* msg, int timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool got = false;
  {
    // The worker lives until Stop, which sets stopped_ first (under q_mu_) and destroys it only
    // with the role: Recv touches it after this check only with the role, or under q_mu_.
    std::unique_lock<std::mutex> lk(q_mu_);
    if (!worker_ || stopped_) {  // not bound (nothing can come), or stopped
      q_cv_.wait_until(lk, until, [this] { return interrupted_ || stopped_; });
      interrupted_ = false;
      return false;
    }
  }
  std::unique_lock<std::mutex> role(role_mu_, std::defer_lock);
  auto last_event = std::chrono::steady_clock::now();
  while (!TakeReady(msg, &got)) {
    if (!role.owns_lock()) {
      if (!role.try_lock()) {
        // The progress thread gives it up at the signal, a Send at once.
        want_++;
        {
          std::lock_guard<std::mutex> lk(q_mu_);
          if (!stopped_) ucp_worker_signal(worker_);
        }
        role.lock();
        want_--;
      }
      role_owner_.store(std::this_thread::get_id());
      continue;  // what the last holder received is in the inbox
    }
    if (LostPending()) {
      role_owner_.store(std::thread::id());
      role.unlock();
      RunLost();
      continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      // Time is up: one look without sleeping, then what came.
      Turn(&last_event, 0);
      TakeReady(msg, &got);
      break;
    }
    Turn(&last_event, static_cast<int>(std::min<int64_t>(left, 100)));
  }
  if (role.owns_lock()) {
    role_owner_.store(std::thread::id());
    recv_released_ns_.store(SteadyNs());
    role.unlock();
  }
  RunLost();
  return got;
}

void UcxVan::Interrupt() {
  std::lock_guard<std::mutex> lk(q_mu_);
  interrupted_ = true;
  q_cv_.notify_all();
  // A Recv sleeps on the worker's fd. The worker lives until Stop sets stopped_ (under q_mu_).
  if (worker_ && !stopped_) ucp_worker_signal(worker_);
}

}  // namespace ps
