// One app's run among others on the same servers: its workers are the worker's own group when
// the job has worker groups (several apps, or one app's training and evaluation), every worker
// otherwise (Node::rank() counts the workers of every group; an app numbers its own with
// these), and its tables are named tables under a prefix of its own.
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

/// The size of worker group `group` ("": every worker of a job without groups), 0 when the job
/// has no such group.
inline int GroupSize(const ps::Node& node, const std::string& group) {
  if (group.empty()) return node.num_workers();
  for (const auto& g : node.worker_groups()) {
    if (g.first == group) return g.second;
  }
  return 0;
}

/// The team of a worker node: its group, that group's size and its rank in it.
inline Team OwnTeam(const ps::Node& node) {
  Team t;
  t.group = node.group();
  t.size = GroupSize(node, t.group);
  t.rank = t.group.empty() ? node.rank() : node.group_rank();
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

/// Creates the named table PREFIX.PART (or finds it: every worker of a run asks for the same
/// spec) and returns its application id.
inline int OpenTable(ps::Node* node, const std::string& prefix, const char* part,
                     ps::DataType dtype, int width, const std::string& rule) {
  ps::TableSpec t;
  t.name = prefix + "." + part;
  t.dtype = dtype;
  t.width = width;
  t.rule = rule;
  return node->CreateTable(t).app_id;
}

}  // namespace apps

#endif  // PS_APPS_TEAM_H_
