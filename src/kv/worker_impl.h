// The state of a KVWorker (internal): requests in flight, their plans and replies.
#ifndef PS_KV_WORKER_IMPL_H_
#define PS_KV_WORKER_IMPL_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "consistency/pull_gate.h"
#include "control/node_impl.h"
#include "filter/significant.h"
#include "kv/resend_timer.h"
#include "kv/slicer.h"
#include "kv/step_gate.h"
#include "ps/kv_worker.h"

namespace ps {

struct KVWorkerBase::Impl : public Customer {
  struct Pending {
    detail::KVRequest req;
    std::vector<RequestPart> parts;
    std::vector<RingSegment> segs;
    std::vector<size_t> seg_part;  // range pulls: the part (message) that carries segment k
    std::vector<int> part_server;
    std::vector<uint64_t> prefix;  // value offsets per key when lens are given
    std::vector<Message> replies;
    std::vector<bool> got;
    size_t received = 0;
    std::string error;
    ErrorCode error_code = ErrorCode::kRejected;
    int64_t ts = -1;
    // Fixed-width pulls of several parts are assembled into `out` as replies arrive.
    SArray<char> out;
    std::string copy_error;
    int64_t step = 0;
    int64_t min_clock = INT64_MAX;  // pulls: the smallest server clock among the replies
    uint64_t max_held_us = 0;       // pulls: the longest a server held a part
    int attempt = 0;                // how many times the request was planned again
    uint64_t epoch = 0;             // ring epoch of the current plan
    bool redirected = false;        // a server answered that it no longer masters a part
    bool held = false;  // a CLOCK waiting for the pushes of its steps (its parts not sent yet)
    std::vector<Message> sent;  // every part as sent, for resending
    std::vector<std::chrono::steady_clock::time_point> sent_at;
    std::vector<uint8_t> tries;  // resends of each part since it was planned (for back-off)
    std::chrono::steady_clock::time_point issued;  // for the latency histograms
    std::string held_why;  // the server's last word on why it holds this pull
    bool streams() const {
      return req.pull && req.op == detail::KVRequest::kData && req.pull_width > 0 &&
             prefix.empty() && parts.size() > 1;
    }
    // Makes a finished record as good as new but keeps its containers' storage. Requests are
    // planned on the caller's thread and finished on the receive thread, a pattern that makes
    // every allocation a cross-thread free; reusing records saves about half of them.
    void Recycle();
  };

  Impl(Node* n, int a, DataType t)
      : node(n),
        rt(n->impl()),
        app(a),
        group(rt->WorkerGroupOf(rt->id())),
        dtype(t),
        esize(DataTypeSize(t)),
        tau(rt->max_delay()),
        joiner(rt->cfg.join),
        created(std::chrono::steady_clock::now()),
        resend(rt->cfg.resend_timeout_ms * 1000.0, rt->cfg.request_timeout_ms * 1000.0) {
    next_ts = rt->cfg.first_timestamp;
  }

  void Process(Message& msg) override;
  void OnRingChange(std::shared_ptr<const Ring> ring) override { OnRing(std::move(ring)); }
  void OnFatal(const std::string& why, ErrorCode code) override {
    std::lock_guard<std::mutex> lk(mu);
    fatal = why;
    fatal_code = code;
    std::vector<int64_t> open(open_ts.begin(), open_ts.end());
    for (int64_t ts : open) {
      auto it = pending.find(ts);
      if (it == pending.end()) continue;
      Pending* p = it->second.get();
      if (p->error.empty()) {
        p->error = why;
        p->error_code = code;
      }
      Finish(p);
    }
  }
  void OnConsistency(int changed, const std::string&, bool set_delay, int max_delay) override {
    // The job's delay, or that of this worker's own group.
    if (!set_delay || (changed >= 0 && changed != group)) {
      return;
    }
    std::lock_guard<std::mutex> lk(mu);
    tau = max_delay;
    cv.notify_all();
  }
  void Finish(Pending* p);
  void Assemble(Pending* p);
  void CopyPart(Pending* p, size_t k, const Message& r);
  // report: a clock issued by the worker itself to report its steps (StepGate::ReportStep),
  // never held back by PS_MAX_INFLIGHT (it may run on the node's thread, which the
  // back-pressure would block).
  int64_t Submit(detail::KVRequest req, bool report = false);
  // Cuts req into messages under ring and records the plan in *p (parts, segments, prefix).
  // Throws ps::Error for a malformed request.
  std::vector<Message> Plan(Pending* p, const detail::KVRequest& req, const Ring* ring,
                            int64_t step_now, int64_t read_now);
  // The ring changed: requests with a part at a server that left are planned again under the
  // new ring and sent whole (servers apply each key of a push once, however it is regrouped).
  void OnRing(std::shared_ptr<const Ring> ring);
  // Plans a pending request again under ring (mu held); appends the messages to send.
  void Replan(Pending* p, const Ring& ring, std::vector<Message>* out);
  // Marks a planned request message with the worker's filter choice (worker_filters.cc).
  void MarkFilters(Message* m);
  // Decodes a reply coded by the significantly-modified filter (mu held). False when it was
  // refused: the part has been sent again (with a reset) if it is still waited for.
  bool DecodeSignificant(Message* msg, std::vector<Message>* resend);

  Node* node;
  Node::Impl* rt;
  int app;
  const int group;  // this worker's group index (groups only ever append: it stays)
  DataType dtype;
  size_t esize;
  mutable std::mutex mu;
  std::condition_variable cv;
  int64_t next_ts = 0;
  std::unordered_map<int64_t, std::unique_ptr<Pending>> pending;
  std::vector<std::unique_ptr<Pending>> spare;  // finished records for reuse (under mu)
  static constexpr size_t kMaxSpare = 256;
  std::unordered_map<int64_t, std::pair<std::string, ErrorCode>>
      failed;  // completed with an error, not yet waited
  // Timestamps in flight, ordered: the smallest is the low-water mark every message carries
  // (everything below it is complete, so servers may forget it).
  std::set<int64_t> open_ts;
  // The same per data task (PushForTask): seqs in flight, for each message's task_lwm.
  std::map<int, std::set<int64_t>> task_open;
  int64_t TaskLwm(const detail::KVRequest& req) const {
    auto it = task_open.find(req.task);
    return it == task_open.end() || it->second.empty() ? req.task_seq : *it->second.begin();
  }
  static bool Tasked(const detail::KVRequest& req) {
    return req.task >= 0 && req.op == detail::KVRequest::kData;
  }
  std::string fatal;  // the node cannot go on (lost the scheduler, fenced): every request fails
  ErrorCode fatal_code = ErrorCode::kShutDown;
  // Resending parts that got no reply within Config::resend_timeout_ms.
  void ResendLoop();
  std::thread resender;
  std::condition_variable resend_cv;  // only for stopping: completions must not wake it
  bool stopping = false;
  std::atomic<uint64_t> resends{0};
  // Round-trip estimate per server: a part is resent after its timeout (rtt_estimate.h) times
  // 2^backoff; a resend raises the server's backoff for every part bound to it.
  // Consistency (under mu): the steps, and the clocks held until their steps' pushes are
  // acknowledged (DESIGN §7).
  StepGate steps;
  // The servers of the last ring seen: those new to a ring have seen none of this worker's
  // clocks, so it reports its steps to them (OnRing).
  std::vector<int> ring_servers;
  std::vector<Message> due;  // clock messages released by Finish, sent once mu is let go
  // What a request reports as done (the worker's step counter moves on only after a clock is
  // submitted).
  int64_t DoneStep(const Pending& p) {
    return steps.DoneStep(p.req.op == detail::KVRequest::kClock, p.step);
  }
  // Releases the held clocks whose steps' pushes are all acknowledged into `due` (mu held).
  void ReleaseClocks();
  // Hands over `due` (mu held), to be sent once mu is let go.
  std::vector<Message> TakeDue() {
    std::vector<Message> out;
    out.swap(due);
    return out;
  }
  int tau;
  int64_t read_clock = -1;  // server clock the last completed pull read
  bool joiner = false, adopted_step = false;
  BoundedDelay delay;
  uint64_t barrier_wait_us = 0;
  double delay_wait_s = 0;
  // Requests finished and their round trips (issue to last reply), push and pull (under mu).
  LatencyHistogram push_latency, pull_latency;
  void Metrics(MetricSet* out) override;
  std::chrono::steady_clock::time_point created;
  // When parts go again: round trips, back-off and budgets per server (under mu).
  ResendTimer resend;
  // Filters chosen by SetFilters (under mu): compress and quantize as Meta carries them.
  int compress = 0, quantize = 0;
  double significant = -1;
  // The receiving end of the significantly-modified filter, per server (own lock: Plan runs
  // with and without mu).
  mutable std::mutex sig_mu;
  SignificantFilter sig;
};

}  // namespace ps

#endif  // PS_KV_WORKER_IMPL_H_
