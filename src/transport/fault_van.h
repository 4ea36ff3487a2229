// A van that wraps another and injects faults into data messages for tests: it drops,
// duplicates and delays a configured fraction of them, seeded. Control messages (registration,
// heartbeats, barriers) pass untouched: their own repetition rules are not what the fault
// tests exercise. One exception: while a mute file exists, every control message to and from
// the scheduler is lost, so that a test can cut one node from the scheduler alone.
#ifndef PS_TRANSPORT_FAULT_VAN_H_
#define PS_TRANSPORT_FAULT_VAN_H_

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/van.h"
#include "util/rng.h"

namespace ps {

struct FaultSpec {
  double drop = 0;       // fraction of data messages lost
  double duplicate = 0;  // fraction sent twice
  double delay = 0;      // fraction held back for delay_ms (so they overtake nothing)
  int delay_ms = 20;
  uint64_t seed = 0;
  // While the file named this plus "." and the process id exists, control messages to and from
  // the scheduler (node 0) are lost.
  std::string mute_scheduler_file;
  bool any() const {
    return drop > 0 || duplicate > 0 || delay > 0 || !mute_scheduler_file.empty();
  }
};

class FaultVan : public Van {
 public:
  FaultVan(std::unique_ptr<Van> inner, const FaultSpec& spec);
  ~FaultVan() override;
  int Bind(const std::string& host, int port) override { return inner_->Bind(host, port); }
  void Connect(int id, const std::string& host, int port) override {
    inner_->Connect(id, host, port);
  }
  bool Connected(int id) const override { return inner_->Connected(id); }
  bool Send(const Message& msg) override;
  bool Recv(Message* msg, int timeout_ms) override;
  void Interrupt() override { inner_->Interrupt(); }
  void WatchPeers(std::function<void(int)> lost) override { inner_->WatchPeers(std::move(lost)); }
  void Stop(int linger_ms) override;
  /// The wrapped van's counters, with the injected faults added to them.
  const VanCounters& counters() const override { return inner_->counters(); }

 private:
  void DelayLoop();
  // Whether msg is a control message between this node and the scheduler while muted.
  bool Muted(const Message& msg, int peer);

  std::unique_ptr<Van> inner_;
  FaultSpec spec_;
  std::string mute_path_;  // the mute file of this process ("": no muting)
  std::mutex mu_;
  std::condition_variable cv_;
  Rng rng_;
  struct Late {
    std::chrono::steady_clock::time_point due;
    Message msg;
  };
  std::deque<Late> late_;  // due times are nondecreasing: every delay has the same length
  bool stop_ = false;
  std::thread delayer_;
};

}  // namespace ps

#endif  // PS_TRANSPORT_FAULT_VAN_H_
