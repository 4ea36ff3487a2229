// The workers of one app's run: the worker's own group when the job has worker groups (several
// apps, or one app's training and evaluation, on one set of servers), every worker otherwise.
// Node::rank() counts the workers of every group; an app numbers its own with these.
#ifndef PS_APPS_TEAM_H_
#define PS_APPS_TEAM_H_

#include <algorithm>
#include <string>
#include <vector>

#include "ps/ps.h"

namespace apps {

struct Team {
  std::string group;  // "" without groups (Node::Barrier("") is every worker's)
  int size = 0;
  int rank = -1;
};

/// The team of a worker node: its group, that group's size and its rank in it.
inline Team OwnTeam(const ps::Node& node) {
  Team t;
  t.group = node.group();
  if (t.group.empty()) {
    t.size = node.num_workers();
    t.rank = node.rank();
    return t;
  }
  for (const auto& g : node.worker_groups()) {
    if (g.first == t.group) t.size = g.second;
  }
  t.rank = node.group_rank();
  return t;
}

/// The ranks in team t of its workers that are dead, ascending.
inline std::vector<int> DeadRanks(const ps::Node& node, const Team& t) {
  std::vector<int> out;
  const auto nodes = node.nodes();
  for (int id : node.dead_nodes()) {
    for (const auto& n : nodes) {
      if (n.id == id && n.role == ps::Role::kWorker && n.group == t.group) {
        out.push_back(t.group.empty() ? n.rank : n.group_rank);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace apps

#endif  // PS_APPS_TEAM_H_
