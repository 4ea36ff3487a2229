// ClusterSim's workers: they push, resend what is not acknowledged, and plan again under each
// newer ring, as KVWorker does.
#include <algorithm>

#include "ps/base.h"
#include "sim/cluster_state.h"

namespace ps {

void ClusterSim::State::WorkerControl(Worker& w, const Ctl& c) {
  std::shared_ptr<const Ring> r;
  if ((c.type == Ctl::kNodeDead || c.type == Ctl::kRing) && c.ring &&
      c.ring->epoch() > w.view->epoch()) {
    r = c.ring;
  }
  if (!r) return;
  w.view = r;
  // Requests planned under the old ring are planned again at once (a new attempt).
  for (auto& q : w.inflight) Send(w, &q.second);
}

void ClusterSim::State::WorkerReply(Worker& w, const Message& m) {
  auto it = w.inflight.find(m.meta.timestamp());
  if (it == w.inflight.end() || m.meta.attempt() != it->second.attempt) return;
  if (m.meta.redirect()) {
    res.redirects++;
    return;  // resent under the newer ring once the worker has it (or at the resend timer)
  }
  if (!m.meta.error().empty()) {
    Fail("a push is never refused", "server " + std::to_string(m.meta.sender()) +
                                        " refused worker " + std::to_string(w.id) + ": " +
                                        m.meta.error());
    return;
  }
  it->second.open.erase(m.meta.part());
  if (it->second.open.empty()) w.inflight.erase(it);
}

void ClusterSim::State::Send(Worker& w, Request* r) {
  r->attempt++;
  r->sent_at = now;
  r->open.clear();
  std::map<int, std::pair<SArray<Key>, SArray<int64_t>>> by_server;
  for (size_t i = 0; i < r->keys.size(); ++i) {
    auto& p = by_server[w.view->Owner(r->keys[i])];
    p.first.push_back(r->keys[i]);
    p.second.push_back(r->vals[i]);
  }
  int part = 0;
  for (auto& b : by_server) {
    Message m;
    m.meta.set_sender(w.id);
    m.meta.set_receiver(b.first);
    m.meta.set_app_id(0);
    m.meta.set_timestamp(r->ts);
    m.meta.set_part(part);
    m.meta.set_attempt(r->attempt);
    m.meta.set_request(true);
    m.meta.set_push(true);
    m.meta.set_dtype(static_cast<int>(DataType::kInt64));
    m.meta.set_epoch(w.view->epoch());
    m.meta.set_width(1);
    m.data = {SArray<char>(b.second.first), SArray<char>(b.second.second)};
    r->open.insert(part++);
    SendData(m);
  }
}

void ClusterSim::State::Push(Worker& w) {
  if (!faults) return;  // the settle phase issues nothing new
  At(now + Exp(o.push_every_us), kPush, w.id);
  if (static_cast<int>(w.inflight.size()) >= o.inflight) return;
  Request r;
  r.ts = w.next_ts++;
  std::set<Key> ks;
  while (static_cast<int>(ks.size()) < o.keys_per_push) {
    ks.insert(universe[rng.Below(universe.size())]);
  }
  for (Key k : ks) {
    r.keys.push_back(k);
    r.vals.push_back(static_cast<int64_t>(rng.Below(1000)) - 400);
    ref[k] += r.vals.back();
  }
  res.pushes++;
  Request& in = w.inflight[r.ts] = std::move(r);
  Send(w, &in);
}

void ClusterSim::State::Resend(Worker& w) {
  for (auto& q : w.inflight) {
    if (now - q.second.sent_at >= o.resend_us) {
      res.resends++;
      Send(w, &q.second);
    }
  }
  At(now + o.resend_us / 2, kResend, w.id);
}
}  // namespace ps
