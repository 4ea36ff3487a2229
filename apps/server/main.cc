// ps_server: the scheduler and servers of a job whose worker groups run different bundled apps
// on one set of servers (docs/operations.md, "Apps that share servers"): every group's
// program makes its run's named tables, and these servers serve them with the built-in rules
// and every bundled app's (TableRules). Workers run the apps:
//
//   ps-launch -s 2 -w lda:2,cm:2 --group-cmd lda="ps_lda --train ..."
//             --group-cmd cm="ps_countmin --input ..." -- ps_server
#include <gflags/gflags.h>

#include <cstdio>
#include <iostream>

#include "app_help.h"
#include "countmin/countmin.h"
#include "lda/lda.h"
#include "ps/kv_server.h"
#include "ps/ps.h"

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "the scheduler and servers of a job whose worker groups run bundled apps (ps_lda, "
      "ps_countmin) on the same servers, each app in tables of its own");
  apps::HandleHelp(argc, argv, "apps/server/");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  try {
    ps::Node node(ps::Config::FromEnv());
    if (node.role() == ps::Role::kWorker) {
      throw ps::Error(
          "ps_server runs the scheduler and the servers; a worker group runs its app "
          "(ps-launch --group-cmd GROUP=COMMAND)");
    }
    node.Start();
    if (node.role() == ps::Role::kScheduler) {
      node.Barrier(ps::kAllGroups);
      node.Finalize();
      return 0;
    }
    ps::TableRules rules = lda::TableRules();
    rules.Add(countmin::TableRules());
    ps::TableServer tables(&node, rules);
    node.Barrier(ps::kAllGroups);
    node.Finalize();
    for (const ps::TableSpec& t : node.Tables()) {
      const ps::KVServerBase* s = tables.Find(t.name);
      std::printf("SERVER rank %d table %s keys %zu bytes %zu\n", node.rank(), t.name.c_str(),
                  s ? s->NumKeys() : 0, s ? s->StoreBytes() : 0);
    }
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ps_server: " << e.what() << std::endl;
    return 1;
  }
}
