#include "transport/inproc_van.h"

#include <chrono>

namespace ps {

int InprocVan::Bind(const std::string& host, int port) {
  std::lock_guard<std::mutex> lk(hub_->mu);
  if (port == 0) {
    while (hub_->boxes.count(hub_->next_port)) ++hub_->next_port;
    port = hub_->next_port++;
  } else if (hub_->boxes.count(port)) {
    throw Error(ErrorCode::kBadConfig,
                "in-process port " + std::to_string(port) + " is already bound");
  }
  box_ = std::make_shared<InprocMailbox>();
  hub_->boxes[port] = box_;
  port_ = port;
  return port;
}

void InprocVan::Connect(int id, const std::string& host, int port) {
  std::lock_guard<std::mutex> lk(mu_);
  peer_port_[id] = port;
}

bool InprocVan::Connected(int id) const {
  std::lock_guard<std::mutex> lk(mu_);
  return peer_port_.count(id) > 0;
}

bool InprocVan::Send(const Message& msg) {
  int port;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = peer_port_.find(msg.meta.receiver());
    if (it == peer_port_.end()) return false;
    port = it->second;
  }
  std::shared_ptr<InprocMailbox> box;
  {
    std::lock_guard<std::mutex> lk(hub_->mu);
    auto it = hub_->boxes.find(port);
    if (it == hub_->boxes.end()) return false;
    box = it->second;
  }
  {
    std::lock_guard<std::mutex> lk(box->mu);
    if (box->stopped) return false;
    box->queue.push_back(msg);
  }
  box->cv.notify_one();
  counters_.messages_sent++;
  counters_.bytes_sent += msg.DataBytes() + msg.meta.ByteSizeLong();
  return true;
}

bool InprocVan::Recv(Message* msg, int timeout_ms) {
  if (!box_) return false;
  std::unique_lock<std::mutex> lk(box_->mu);
  if (!box_->cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), [this] {
        return box_->stopped || box_->interrupted || !box_->queue.empty();
      })) {
    return false;
  }
  if (box_->queue.empty()) {
    box_->interrupted = false;
    return false;
  }
  *msg = std::move(box_->queue.front());
  box_->queue.pop_front();
  counters_.messages_received++;
  counters_.bytes_received += msg->DataBytes() + msg->meta.ByteSizeLong();
  return true;
}

void InprocVan::Interrupt() {
  if (!box_) return;
  {
    std::lock_guard<std::mutex> lk(box_->mu);
    box_->interrupted = true;
  }
  box_->cv.notify_all();
}

void InprocVan::Stop(int /*linger_ms: queued messages are already delivered*/) {
  if (!box_) return;
  {
    std::lock_guard<std::mutex> lk(box_->mu);
    box_->stopped = true;
  }
  box_->cv.notify_all();
  std::lock_guard<std::mutex> lk(hub_->mu);
  auto it = hub_->boxes.find(port_);
  if (it != hub_->boxes.end() && it->second == box_) hub_->boxes.erase(it);
}

}  // namespace ps
