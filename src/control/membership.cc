#include "control/membership.h"

#include <algorithm>

namespace ps {

bool InGroups(Role role, int groups) {
  switch (role) {
    case Role::kScheduler:
      return groups & kSchedulerGroup;
    case Role::kServer:
      return groups & kServerGroup;
    case Role::kWorker:
      return groups & kWorkerGroup;
  }
  return false;
}

Membership::Membership(int num_servers, int num_workers, const std::string& scheduler_host,
                       int scheduler_port)
    : num_servers_(num_servers), num_workers_(num_workers) {
  NodeInfo s;
  s.id = 0;
  s.role = Role::kScheduler;
  s.rank = 0;
  s.host = scheduler_host;
  s.port = scheduler_port;
  AddNode(s);
}

void Membership::AddNode(const NodeInfo& info) {
  nodes_.push_back(info);
  if (info.id != 0) id_at_.emplace(std::make_pair(info.host, info.port), info.id);
  count_of_[info.role]++;
  if (info.role == Role::kWorker) workers_in_group_[info.group]++;
}

void JoinGroup(std::vector<std::pair<std::string, int>>* groups, const std::string& group,
               int num_workers) {
  if (groups->empty()) {
    if (group.empty()) return;  // no groups, and none to add
    groups->emplace_back("", num_workers);
  }
  for (auto& g : *groups) {
    if (g.first == group) {
      g.second++;
      return;
    }
  }
  groups->emplace_back(group, 1);
}

Membership::RegisterResult Membership::Register(const Registration& r, std::string* why) {
  if (r.role == Role::kScheduler) {
    *why = "a second scheduler tried to register from " + r.host + ":" + std::to_string(r.port);
    return RegisterResult::kRejected;
  }
  if (pending_at_.count({r.host, r.port})) return RegisterResult::kDuplicate;
  // A worker that joins the running job may bring a group of its own; one that names none
  // joins the job's only (unnamed) group, if it has no groups.
  const bool new_group = r.role == Role::kWorker && GroupIndex(r.group) < 0;
  if (new_group && (!complete_ || !r.join || r.group.empty())) {
    *why = "worker from " + r.host + ":" + std::to_string(r.port) + " names group '" + r.group +
           "', which is not one of the job's (PS_WORKER_GROUPS" +
           (groups_.empty() ? std::string(" is not set on the scheduler") : std::string("")) +
           "; a worker joining a running job may add a named group)";
    return RegisterResult::kRejected;
  }
  if (complete_ && r.join) {
    if (IdOf(r.host, r.port) >= 0) return RegisterResult::kDuplicate;
    NodeInfo info;
    info.id = nodes_.back().id + 1;
    info.role = r.role;
    info.rank = count_of_[r.role];
    info.host = r.host;
    info.port = r.port;
    if (r.role == Role::kWorker) {
      info.group = r.group;
      info.group_rank = workers_in_group_[r.group];
      JoinGroup(&groups_, r.group, num_workers_);
    }
    AddNode(info);
    return RegisterResult::kJoined;
  }
  // A joiner that arrives before the job started waits (its registration is repeated).
  if (r.join) return RegisterResult::kDuplicate;
  const int have = r.role == Role::kServer ? pending_servers_ : pending_workers_;
  int want = r.role == Role::kServer ? num_servers_ : num_workers_;
  if (complete_ || have >= want) {
    *why = std::string("the job already has its ") + std::to_string(want) + " " + RoleName(r.role) +
           "s (PS_NUM_SERVERS/PS_NUM_WORKERS; a worker joining a running job sets PS_JOIN=1)";
    return RegisterResult::kRejected;
  }
  if (r.role == Role::kWorker && !groups_.empty()) {
    const int size = groups_[GroupIndex(r.group)].second;
    if (pending_in_group_[r.group] >= size) {
      *why = "the job already has the " + std::to_string(size) + " workers of group " + r.group +
             " (PS_WORKER_GROUPS; a worker joining a running job sets PS_JOIN=1)";
      return RegisterResult::kRejected;
    }
  }
  pending_.emplace_back(r, static_cast<int>(pending_.size()));
  pending_at_.insert({r.host, r.port});
  (r.role == Role::kServer ? pending_servers_ : pending_workers_)++;
  if (r.role == Role::kWorker) pending_in_group_[r.group]++;
  if (pending_servers_ < num_servers_ || pending_workers_ < num_workers_) {
    return RegisterResult::kPending;
  }

  // Ranks: launcher hints first when valid and unique, then arrival order. Servers take ids
  // 1..S and workers S+1..S+W in rank order.
  int next_id = 1;
  for (Role role : {Role::kServer, Role::kWorker}) {
    std::vector<std::pair<Registration, int>> group;
    for (const auto& p : pending_) {
      if (p.first.role == role) group.push_back(p);
    }
    int n = static_cast<int>(group.size());
    std::vector<int> hint_count(n, 0);
    for (const auto& g : group) {
      if (g.first.rank_hint >= 0 && g.first.rank_hint < n) hint_count[g.first.rank_hint]++;
    }
    auto key = [&](const std::pair<Registration, int>& g) {
      int h = g.first.rank_hint;
      bool good = h >= 0 && h < n && hint_count[h] == 1;
      return std::make_pair(good ? h : n, g.second);
    };
    std::sort(group.begin(), group.end(),
              [&](const auto& a, const auto& b) { return key(a) < key(b); });
    for (int i = 0; i < n; ++i) {
      NodeInfo info;
      info.id = next_id++;
      info.role = role;
      info.rank = i;
      info.host = group[i].first.host;
      info.port = group[i].first.port;
      if (role == Role::kWorker) {
        info.group = group[i].first.group;
        info.group_rank = workers_in_group_[info.group];
      }
      AddNode(info);
    }
  }
  complete_ = true;
  epoch_ = 1;
  return RegisterResult::kComplete;
}

std::vector<int> Membership::ServerIds() const {
  std::vector<int> ids;
  for (const auto& n : nodes_) {
    if (n.role == Role::kServer) ids.push_back(n.id);
  }
  return ids;
}

std::string Membership::Missing() const {
  const int servers = pending_servers_, workers = pending_workers_;
  return std::to_string(servers) + " of " + std::to_string(num_servers_) + " servers and " +
         std::to_string(workers) + " of " + std::to_string(num_workers_) + " workers registered";
}

int64_t Membership::Heartbeat(int id, int64_t now_ms) {
  if (dead_.count(id)) return 0;
  auto it = last_seen_.find(id);
  const int64_t silent = it == last_seen_.end() ? 0 : std::max<int64_t>(0, now_ms - it->second);
  last_seen_[id] = now_ms;
  return silent;
}

std::vector<int> Membership::Silent(int64_t now_ms, int64_t timeout_ms) const {
  std::vector<int> out;
  for (const auto& n : nodes_) {
    if (n.id == 0) continue;
    auto it = last_seen_.find(n.id);
    if (it != last_seen_.end() && now_ms - it->second > timeout_ms) out.push_back(n.id);
  }
  return out;
}

void Membership::Paused(int64_t now_ms, int64_t pause_ms) {
  if (pause_ms <= 0) return;
  for (auto& s : last_seen_) s.second = std::min(now_ms, s.second + pause_ms);
}

int Membership::GroupIndex(const std::string& name) const {
  return Config::GroupIndexIn(groups_, name);
}

bool Membership::InBarrier(const NodeInfo& n, int groups) const {
  if (!InGroups(n.role, groups)) return false;
  const int g = BarrierWorkerGroup(groups);
  return g < 0 || n.role != Role::kWorker || GroupIndex(n.group) == g;
}

std::vector<int> Membership::Members(int groups) const {
  std::vector<int> members;
  for (const auto& n : nodes_) {
    if (InBarrier(n, groups) && !dead_.count(n.id)) members.push_back(n.id);
  }
  return members;
}

std::vector<int> Membership::EnterBarrier(int id, int groups, uint64_t seq) {
  const NodeInfo* me = nullptr;
  for (const auto& n : nodes_) {
    if (n.id == id) me = &n;
  }
  if (!me || dead_.count(id) || !InBarrier(*me, groups)) return {};
  auto& arrived = barriers_[{groups, seq}];
  arrived.insert(id);
  std::vector<int> members = Members(groups);
  for (int m : members) {
    if (!arrived.count(m)) return {};
  }
  barriers_.erase({groups, seq});
  released_[groups] = std::max(released_[groups], seq);
  return members;
}

std::vector<int> Membership::Awaited(int groups, uint64_t seq) const {
  auto it = barriers_.find({groups, seq});
  std::vector<int> out;
  for (int m : Members(groups)) {
    if (it == barriers_.end() || !it->second.count(m)) out.push_back(m);
  }
  return out;
}

std::vector<Membership::OpenBarrier> Membership::OpenBarriers() const {
  std::vector<OpenBarrier> out;
  for (const auto& b : barriers_) {
    OpenBarrier o{b.first.first, b.first.second, {}, {}};
    for (int m : Members(o.groups)) (b.second.count(m) ? o.arrived : o.awaited).push_back(m);
    if (!o.arrived.empty()) out.push_back(std::move(o));
  }
  return out;
}

std::string Membership::Describe(int id) const {
  for (const auto& n : nodes_) {
    if (n.id != id) continue;
    if (n.role == Role::kScheduler) return "the scheduler";
    return std::string(RoleName(n.role)) + " " + std::to_string(n.rank) + " (node " +
           std::to_string(id) + ")";
  }
  return "node " + std::to_string(id);
}

std::string Membership::GroupNames(int groups,
                                   const std::vector<std::pair<std::string, int>>& worker_groups) {
  const int g = BarrierWorkerGroup(groups);
  if (g >= 0) {
    const std::string name = g < static_cast<int>(worker_groups.size()) ? worker_groups[g].first
                                                                        : "#" + std::to_string(g);
    return "the workers of group " + name;
  }
  if ((groups & kAllGroups) == kAllGroups) return "every node";
  std::vector<std::string> names;
  if (groups & kSchedulerGroup) names.push_back("the scheduler");
  if (groups & kServerGroup) names.push_back("the servers");
  if (groups & kWorkerGroup) names.push_back("the workers");
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  }
  return s.empty() ? "no group" : s;
}

int Membership::IdOf(const std::string& host, int port) const {
  auto it = id_at_.find({host, port});
  return it == id_at_.end() ? -1 : it->second;
}

std::vector<Membership::Release> Membership::MarkDead(int id) {
  bool known = false;
  for (const auto& n : nodes_) known |= n.id == id && id != 0;
  if (!known || !dead_.insert(id).second) return {};
  last_seen_.erase(id);
  std::vector<Release> out;
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    it->second.erase(id);
    std::vector<int> members = Members(it->first.first);
    bool all = true;
    for (int m : members) all &= it->second.count(m) > 0;
    if (all && !it->second.empty()) {
      out.push_back({members, it->first.first, it->first.second});
      released_[it->first.first] = std::max(released_[it->first.first], it->first.second);
      it = barriers_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

}  // namespace ps
