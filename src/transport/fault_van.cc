#include "transport/fault_van.h"

#include <unistd.h>

namespace ps {

FaultVan::FaultVan(std::unique_ptr<Van> inner, const FaultSpec& spec)
    : inner_(std::move(inner)),
      spec_(spec),
      mute_path_(spec.mute_scheduler_file.empty()
                     ? ""
                     : spec.mute_scheduler_file + "." + std::to_string(getpid())),
      rng_(spec.seed * 0x2545F4914F6CDD1Dull + 17) {
  delayer_ = std::thread([this] { DelayLoop(); });
}

FaultVan::~FaultVan() { Stop(0); }

bool FaultVan::Muted(const Message& msg, int peer) {
  if (mute_path_.empty() || peer != 0 || !msg.meta.has_control()) return false;
  // A control message is rare enough for a look at the file each time.
  if (access(mute_path_.c_str(), F_OK) != 0) return false;
  inner_->mutable_counters().injected_drops++;
  return true;
}

bool FaultVan::Send(const Message& msg) {
  if (msg.meta.has_control() && msg.meta.control().cmd() != pb::Control::NONE) {
    if (Muted(msg, msg.meta.receiver())) return true;  // lost on the way to the scheduler
    return inner_->Send(msg);
  }
  // No path yet: say so, as the wrapped van would, so the caller connects and sends again. (A
  // message taken for later to a peer never connected was lost when its time came, and the
  // caller, told it had left, never connected: with every message delayed nothing arrived.)
  if (!inner_->Connected(msg.meta.receiver())) return false;
  double u;
  {
    std::lock_guard<std::mutex> lk(mu_);
    u = rng_.Uniform();
  }
  if (u < spec_.drop) {
    inner_->mutable_counters().injected_drops++;
    return true;  // lost on the wire: the sender cannot tell
  }
  u -= spec_.drop;
  if (u < spec_.duplicate) {
    inner_->mutable_counters().injected_duplicates++;
    inner_->Send(msg);
    return inner_->Send(msg);
  }
  u -= spec_.duplicate;
  if (u < spec_.delay) {
    inner_->mutable_counters().injected_delays++;
    std::lock_guard<std::mutex> lk(mu_);
    late_.push_back(
        {std::chrono::steady_clock::now() + std::chrono::milliseconds(spec_.delay_ms), msg});
    cv_.notify_all();
    return true;
  }
  return inner_->Send(msg);
}

bool FaultVan::Recv(Message* msg, int timeout_ms) {
  if (!inner_->Recv(msg, timeout_ms)) return false;
  // Lost on the way from the scheduler: to the caller, nothing came this time.
  return !Muted(*msg, msg->meta.sender());
}

void FaultVan::DelayLoop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    if (late_.empty()) {
      cv_.wait(lk);
      continue;
    }
    if (cv_.wait_until(lk, late_.front().due) == std::cv_status::timeout ||
        std::chrono::steady_clock::now() >= late_.front().due) {
      Message m = std::move(late_.front().msg);
      late_.pop_front();
      lk.unlock();
      inner_->Send(m);
      lk.lock();
    }
  }
}

void FaultVan::Stop(int linger_ms) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return;
    stop_ = true;
    cv_.notify_all();
  }
  if (delayer_.joinable()) delayer_.join();
  inner_->Stop(linger_ms);
}

}  // namespace ps
