#include "control/scheduler_core.h"

#include <algorithm>
#include <cstdio>

#include "message/message.h"

namespace ps {

using Kind = SchedulerCore::Action::Kind;

SchedulerCore::SchedulerCore(Options o)
    : o_(std::move(o)), membership_(o_.num_servers, o_.num_workers, o_.host, o_.port) {
  membership_.SetWorkerGroups(o_.worker_groups);
}

void SchedulerCore::FillEntry(const NodeInfo& n, pb::NodeEntry* e) {
  e->set_id(n.id);
  e->set_role(static_cast<int>(n.role));
  e->set_rank(n.rank);
  e->set_host(n.host);
  e->set_port(n.port);
  e->set_group(n.group);
  e->set_group_rank(n.group_rank);
}

NodeInfo SchedulerCore::EntryInfo(const pb::NodeEntry& e) {
  NodeInfo n;
  n.id = e.id();
  n.role = static_cast<Role>(e.role());
  n.rank = e.rank();
  n.host = e.host();
  n.port = e.port();
  n.group = e.group();
  n.group_rank = e.group_rank();
  return n;
}

pb::Control SchedulerCore::RefillMessage(int app, const RefillReport& r) {
  pb::Control c;
  c.set_cmd(pb::Control::REFILL);
  c.set_app(app);
  c.set_epoch(r.epoch);
  c.set_pending(r.pending);
  for (const Range& x : r.orphans) {
    c.add_orphans(x.begin);
    c.add_orphans(x.end);
  }
  return c;
}

std::vector<int> SchedulerCore::Live(bool servers_only) const {
  std::vector<int> out;
  for (const auto& n : membership_.nodes()) {
    if (n.id == 0 || membership_.IsDead(n.id)) continue;
    if (servers_only && n.role != Role::kServer) continue;
    out.push_back(n.id);
  }
  return out;
}

void SchedulerCore::Send(int to, pb::Control c, bool quiet, Actions* out) const {
  Action a(Kind::kSend);
  a.to = to;
  a.msg = std::move(c);
  a.quiet = quiet;
  out->push_back(std::move(a));
}

void SchedulerCore::SendAll(std::vector<int> to, pb::Control c, bool quiet, Actions* out) const {
  if (to.empty()) return;
  if (to.size() == 1) {
    Send(to[0], std::move(c), quiet, out);
    return;
  }
  Action a(Kind::kSend);
  a.fanout = std::move(to);
  a.msg = std::move(c);
  a.quiet = quiet;
  out->push_back(std::move(a));
}

void SchedulerCore::Log(std::string text, bool warning, Actions* out) const {
  Action a(Kind::kLog);
  a.text = std::move(text);
  a.warning = warning;
  out->push_back(std::move(a));
}

int SchedulerCore::WorkerGroup(int id) const {
  const NodeInfo* n = membership_.Find(id);
  if (!n || n->role != Role::kWorker) return -1;
  return std::max(0, membership_.GroupIndex(n->group));
}

SchedulerCore::Actions SchedulerCore::OnControl(int from, const pb::Control& c, int64_t now) {
  Actions out;
  if (ring_core_ && ring_core_->HasLeft(from)) return out;  // its last beats mean nothing
  if (from > 0 && membership_.IsDead(from) && c.cmd() != pb::Control::REGISTER) {
    // Fencing: a node declared dead that speaks again (a hang that ended) has been replaced;
    // it must not serve anything with its old view. Tell it to stop.
    pb::Control a;
    a.set_cmd(pb::Control::ABORT);
    a.set_error("node " + std::to_string(from) +
                " was declared dead by the scheduler (silent too long, or its connection "
                "broke) and its work was given to others; a dead node cannot come back");
    a.set_error_code(static_cast<int>(ErrorCode::kFenced));
    Send(from, std::move(a), true, &out);
    return out;
  }
  if (from > 0) {
    const int64_t silent = membership_.Heartbeat(from, now);
    // A near miss: past half the timeout the node was close to being declared dead. Said (at
    // most once a minute per node) so that an operator can raise the timeout before a slow but
    // live node is lost; a loaded node's beats are late, not missing. Not for silences the
    // beat interval itself makes (in-process tests beat every 30 s).
    int64_t& warned = late_warned_ms_[from];
    const int64_t late = std::max(o_.heartbeat_timeout_ms / 2, 2 * o_.heartbeat_interval_ms);
    if (silent > late && (warned == 0 || now - warned >= 60000)) {
      warned = now;
      Log("node " + std::to_string(from) + " was silent for " + std::to_string(silent) +
              " ms, more than half of PS_HEARTBEAT_TIMEOUT_MS=" +
              std::to_string(o_.heartbeat_timeout_ms) +
              " (it is slow or overloaded; raise the timeout if this recurs)",
          true, &out);
    }
  }
  // Past the fencing above, `from` is no node declared dead.
  const bool complete = membership_.complete();
  switch (c.cmd()) {
    case pb::Control::ABORT:
      if (from > 0) {
        Action a(Kind::kAbort);
        a.text = "node " + std::to_string(from) + " stopped the job: " + c.error();
        a.code = ErrorCodeFromWire(c.error_code(), ErrorCode::kInvalidArgument);
        out.push_back(std::move(a));
      }
      break;
    case pb::Control::HEARTBEAT:
      if (from <= 0) break;
      if (c.metrics_size() > 0) out.push_back(Action(Kind::kForward));  // the runtime keeps them
      if (c.beat_us() > 0) {
        // The echo tells the node the scheduler still counts it in (its read lease).
        pb::Control echo;
        echo.set_cmd(pb::Control::HEARTBEAT);
        echo.set_beat_us(c.beat_us());
        Send(from, std::move(echo), true, &out);
      }
      break;
    case pb::Control::REGISTER:
      if (c.nodes_size() == 1) Register(c, now, &out);
      break;
    case pb::Control::ADD_TASKS:
      if (complete && c.task() >= 0) out.push_back(Action(Kind::kForward));
      break;
    case pb::Control::CREATE_TABLE:
    case pb::Control::CONSISTENCY:
      if (complete) out.push_back(Action(Kind::kForward));
      break;
    case pb::Control::BARRIER:
      Released(membership_.EnterBarrier(from, c.barrier_groups(), c.barrier_seq()),
               c.barrier_groups(), c.barrier_seq(), &out);
      break;
    case pb::Control::TASK_TAKE:
      if (!aborted_) {  // an aborted job hands out nothing
        TaskPool::Reply reply;
        if (tasks_.Request(from, WorkerGroup(from), !c.task_nowait(), now, &reply)) {
          AnswerTasks({reply}, &out);
        }
      }
      break;
    case pb::Control::TASK_DONE:
      if (!tasks_.Done(from, c.task())) {
        Log("task " + std::to_string(c.task()) + " reported done by node " + std::to_string(from) +
                " after it was taken back: ignored",
            false, &out);
      }
      ServeTaskWaiters(now, &out);
      break;
    case pb::Control::LEAVE:
      if (ring_core_) ActOnRing(ring_core_->Leave(from, now), -1, &out);
      break;
    case pb::Control::REFILL:
      if (ring_core_) {
        std::vector<Range> orphans;
        for (int i = 0; i + 1 < c.orphans_size(); i += 2) {
          orphans.emplace_back(c.orphans(i), c.orphans(i + 1));
        }
        ActOnRing(ring_core_->Refill(from, c.app(), c.epoch(), c.pending(), now, orphans), -1,
                  &out);
      }
      break;
    default:
      break;
  }
  return out;
}

void SchedulerCore::Register(const pb::Control& c, int64_t now, Actions* out) {
  const auto& e = c.nodes(0);
  if (e.role() < 0 || e.role() > 2 || e.port() <= 0) return;
  Registration r;
  r.role = static_cast<Role>(e.role());
  r.host = e.host();
  r.port = e.port();
  r.rank_hint = e.rank_hint();
  r.join = e.join();
  r.group = e.group();
  std::string why;
  switch (membership_.Register(r, &why)) {
    case Membership::RegisterResult::kRejected: {
      Log("rejected registration: " + why, true, out);
      Action a(Kind::kReject);
      a.text = why;
      a.host = r.host;
      a.port = r.port;
      out->push_back(std::move(a));
      break;
    }
    case Membership::RegisterResult::kJoined: {
      const NodeInfo n = membership_.nodes().back();
      membership_.Heartbeat(n.id, now);
      Action ev(Kind::kEvent);
      ev.text = std::string(RoleName(n.role)) + " " + std::to_string(n.rank) + " (node " +
                std::to_string(n.id) + ", " + n.host + ":" + std::to_string(n.port) +
                ") joined the running job";
      ev.warning = false;
      out->push_back(std::move(ev));
      Action t(Kind::kTable);
      t.to = n.id;
      out->push_back(std::move(t));
      pb::Control j;
      j.set_cmd(pb::Control::NODE_JOINED);
      FillEntry(n, j.add_nodes());
      std::vector<int> others = Live();
      others.erase(std::remove(others.begin(), others.end(), n.id), others.end());
      SendAll(std::move(others), std::move(j), false, out);
      Action a(Kind::kJoined);
      a.node = n;
      out->push_back(std::move(a));
      if (n.role == Role::kServer && ring_core_) {
        ActOnRing(ring_core_->ServerJoined(n.id, now), -1, out);
      }
      break;
    }
    case Membership::RegisterResult::kDuplicate:
      // A repeat from a node that has its id: the table may not have reached it yet.
      if (membership_.complete()) {
        const int id = membership_.IdOf(r.host, r.port);
        if (id > 0) {
          Action t(Kind::kTable);
          t.to = id;
          t.quiet = true;
          out->push_back(std::move(t));
        }
      }
      break;
    case Membership::RegisterResult::kComplete: {
      ring_core_ = std::make_unique<RingCore>(membership_.ServerIds(), o_.vnodes, o_.replicas,
                                              membership_.epoch());
      for (const auto& n : membership_.nodes()) membership_.Heartbeat(n.id, now);
      for (const auto& n : membership_.nodes()) {
        if (n.id == 0) continue;
        Action t(Kind::kTable);
        t.to = n.id;
        out->push_back(std::move(t));
      }
      // Last: the scheduler's own Start returns then, and what its program does next (a
      // consistency setting, a table) must reach nodes that have their table.
      Action done(Kind::kComplete);
      done.ring = ring_core_->ring();
      out->push_back(std::move(done));
      break;
    }
    case Membership::RegisterResult::kPending:
      break;
  }
}

void SchedulerCore::ActOnRing(const RingCore::Decision& d, int dead, Actions* out) {
  for (const auto& e : d.events) {
    Action a(Kind::kEvent);
    a.text = e;
    out->push_back(std::move(a));
  }
  if (!d.abort.empty()) {
    Action a(Kind::kAbort);
    a.text = d.abort;
    a.code = ErrorCode::kDataLost;
    out->push_back(std::move(a));
    return;
  }
  // Most refill reports decide nothing: the walk over every node for the recipients is then
  // skipped (at 1000 servers and 10 000 workers it was most of the scheduler's time).
  if (RingCore::HasMessages(d, dead)) {
    for (auto& f : RingCore::Messages(d, dead, Live(), Live(true))) {
      SendAll(std::move(f.to), std::move(f.msg), true, out);
    }
  }
  std::shared_ptr<const Ring> fresh = d.cut ? d.cut : d.failover;
  if (fresh) {
    Action a(Kind::kRing);
    a.ring = fresh;
    out->push_back(std::move(a));
  }
  if (d.cut) {
    // The servers that left got the ring too (it tells them they are out); now they are
    // marked gone: barriers stop waiting for them.
    std::vector<Membership::Release> releases;
    for (int s : d.left) {
      for (auto& r : membership_.MarkDead(s)) releases.push_back(r);
      Action a(Kind::kDead);
      a.to = s;
      a.warning = false;
      a.quiet = true;
      out->push_back(std::move(a));
    }
    for (auto& r : releases) Released(r.ids, r.groups, r.seq, out);
  }
}

void SchedulerCore::Released(const std::vector<int>& ids, int groups, uint64_t seq,
                             Actions* out) const {
  if (ids.empty()) return;
  Action a(Kind::kRelease);
  a.release = {ids, groups, seq};
  out->push_back(std::move(a));
}

SchedulerCore::Actions SchedulerCore::EnterBarrier(int from, int groups, uint64_t seq) {
  Actions out;
  Released(membership_.EnterBarrier(from, groups, seq), groups, seq, &out);
  return out;
}

SchedulerCore::Actions SchedulerCore::NodeDead(int id, const std::string& how, int64_t now) {
  Actions out;
  if (finished_) return out;  // the job is over: everyone is leaving
  if (!membership_.Find(id) || id == 0 || membership_.IsDead(id)) return out;
  const std::vector<Membership::Release> releases = membership_.MarkDead(id);
  const std::vector<int> back = tasks_.WorkerDead(id);
  if (!back.empty()) {
    Log(std::to_string(back.size()) + " unfinished task(s) of node " + std::to_string(id) +
            " go back to the pool",
        true, &out);
  }
  Actions tasks;
  ServeTaskWaiters(now, &tasks);
  // NODE_DEAD (with a new ring) to every live node, then the ring's other messages.
  Actions ring;
  if (ring_core_) ActOnRing(ring_core_->NodeDead(id, now), id, &ring);
  const bool abort =
      std::any_of(ring.begin(), ring.end(), [](const Action& a) { return a.kind == Kind::kAbort; });
  Action ev(Kind::kEvent);
  ev.text = "node " + std::to_string(id) + " declared dead: " + how;
  out.push_back(std::move(ev));
  Action d(Kind::kDead);
  d.to = id;
  d.quiet = abort;  // an abort tells everyone everything
  out.push_back(std::move(d));
  for (auto& a : ring) out.push_back(std::move(a));
  if (abort) return out;
  for (auto& a : tasks) out.push_back(std::move(a));
  for (const auto& r : releases) Released(r.ids, r.groups, r.seq, &out);
  return out;
}

SchedulerCore::Actions SchedulerCore::ConnectionBroke(int id, int64_t now) {
  Actions dead = NodeDead(id, "its connection broke", now);
  if (dead.empty()) return dead;  // nobody, or declared already
  Actions out;
  Log("connection to node " + std::to_string(id) + " broke", true, &out);
  for (auto& a : dead) out.push_back(std::move(a));
  return out;
}

SchedulerCore::Actions SchedulerCore::Tick(int64_t now, int64_t gap, int64_t tick, bool beat,
                                           bool want_metrics) {
  Actions out;
  // A scheduler that did not run for longer than a beat interval (stopped, swapped out,
  // starved of CPU) did not read the beats meanwhile either: that time is nobody's silence.
  // Without this, the first look after a pause declares every node dead.
  if (gap > o_.heartbeat_interval_ms) {
    membership_.Paused(now, gap - tick);
    Log("the scheduler did not run for " + std::to_string(gap - tick) +
            " ms (stopped or starved of CPU): that time does not count as any node's silence",
        true, &out);
  }
  const std::vector<int> silent = membership_.Silent(now, o_.heartbeat_timeout_ms);
  if (ring_core_) {
    const std::string slow = ring_core_->SlowPreparation(now);
    if (!slow.empty()) Log(slow, true, &out);
  }
  Actions later;
  ReportOpenBarriers(now, &later);
  if (!tasks_.Expire(now, o_.task_timeout_ms).empty()) ServeTaskWaiters(now, &later);
  AnswerTasks(tasks_.AskAgain(now, o_.task_keep_ms), &later);
  for (int id : silent) {
    const std::string how = "silent for more than " + std::to_string(o_.heartbeat_timeout_ms) +
                            " ms (PS_HEARTBEAT_TIMEOUT_MS)";
    for (auto& a : NodeDead(id, how, now)) out.push_back(std::move(a));
  }
  if (beat) {
    // The scheduler beats too, so that every node can tell when it is gone.
    pb::Control c;
    c.set_cmd(pb::Control::HEARTBEAT);
    c.set_want_metrics(want_metrics);
    SendAll(Live(), std::move(c), true, &out);
  }
  for (auto& a : later) out.push_back(std::move(a));
  return out;
}

SchedulerCore::Actions SchedulerCore::AddTasks(int group, int n, bool once, const std::string* data,
                                               int pool, int64_t now, int* first) {
  Actions out;
  *first = -1;
  if (pool == 1) {
    tasks_.Open(group);
  } else if (pool == 2) {
    tasks_.Close(group);
  } else if (data) {
    *first = tasks_.AddData(*data, group);
  } else {
    *first = once ? tasks_.AddOnce(n, group) : tasks_.Add(n, group);
  }
  ServeTaskWaiters(now, &out);
  return out;
}

void SchedulerCore::AnswerTasks(const std::vector<TaskPool::Reply>& replies, Actions* out) const {
  for (const TaskPool::Reply& r : replies) {
    pb::Control c;
    c.set_cmd(pb::Control::TASK_GIVE);
    c.set_task(r.task);
    if (r.task >= 0) {
      if (const std::string* d = tasks_.Data(r.task)) c.set_task_data(*d);
    }
    Send(r.worker, std::move(c), false, out);
  }
}

void SchedulerCore::ServeTaskWaiters(int64_t now, Actions* out) {
  if (aborted_) return;  // an aborted job hands out nothing
  AnswerTasks(tasks_.Serve(now), out);
}

void SchedulerCore::ReportOpenBarriers(int64_t now, Actions* out) {
  const auto open = membership_.OpenBarriers();
  std::map<std::pair<int, uint64_t>, int64_t> seen;
  for (const auto& b : open) {
    const auto key = std::make_pair(b.groups, b.seq);
    auto it = barrier_open_ms_.find(key);
    seen[key] = it == barrier_open_ms_.end() ? now : it->second;
  }
  barrier_open_ms_.swap(seen);  // barriers released since are forgotten
  if (now < next_barrier_report_ms_) return;
  const int64_t every = o_.barrier_report_ms;
  next_barrier_report_ms_ = now + every;
  for (const auto& b : open) {
    const int64_t held = now - barrier_open_ms_[{b.groups, b.seq}];
    if (held < every) continue;
    // Finalize's barrier of every node is open from the servers' start: it is news only once a
    // worker is in it (its job is over while another's is not).
    const bool final = (b.groups & kAllGroups) == kAllGroups;
    if (final && std::none_of(b.arrived.begin(), b.arrived.end(), [this](int id) {
          const NodeInfo* n = membership_.Find(id);
          return n && n->role == Role::kWorker;
        })) {
      continue;
    }
    std::string who;
    for (size_t i = 0; i < b.awaited.size() && i < 8; ++i) {
      who += (i ? ", " : "") + membership_.Describe(b.awaited[i]);
    }
    if (b.awaited.size() > 8) who += " and " + std::to_string(b.awaited.size() - 8) + " more";
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.1f", held / 1000.0);
    const std::string text = "barrier " + std::to_string(b.seq) + " of " +
                             Membership::GroupNames(b.groups, membership_.groups()) + " held " +
                             secs + " s: waiting for " + who + " (" +
                             std::to_string(b.arrived.size()) + " of " +
                             std::to_string(b.arrived.size() + b.awaited.size()) + " arrived)";
    Log(text, !final, out);
    pb::Control c;
    c.set_cmd(pb::Control::BARRIER_WAIT);
    c.set_barrier_groups(b.groups);
    c.set_barrier_seq(b.seq);
    c.set_error(text);
    for (int id : b.arrived) Send(id, c, true, out);  // id 0: the scheduler's own wait
  }
}

}  // namespace ps
