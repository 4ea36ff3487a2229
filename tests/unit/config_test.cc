#include "ps/config.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(ConfigTest, ReadsPsNamesAndDmlcAliases) {
  Config c = Config::FromMap({{"DMLC_ROLE", "server"},
                              {"DMLC_PS_ROOT_URI", "10.0.0.1"},
                              {"DMLC_PS_ROOT_PORT", "9091"},
                              {"DMLC_NUM_SERVER", "3"},
                              {"PS_NUM_WORKERS", "4"},
                              {"PS_VNODES", "64"}});
  EXPECT_EQ(c.role, Role::kServer);
  EXPECT_EQ(c.scheduler_host, "10.0.0.1");
  EXPECT_EQ(c.scheduler_port, 9091);
  EXPECT_EQ(c.num_servers, 3);
  EXPECT_EQ(c.num_workers, 4);
  EXPECT_EQ(c.vnodes, 64);
  EXPECT_EQ(c.van, "zmq");
  EXPECT_EQ(Config::FromMap({{"PS_ROLE", "scheduler"}, {"DMLC_PS_VAN_TYPE", "ucx"}}).van, "ucx");
  EXPECT_EQ(c.malloc_retain_mb, 64);
  EXPECT_EQ(
      Config::FromMap({{"PS_ROLE", "scheduler"}, {"PS_MALLOC_RETAIN_MB", "0"}}).malloc_retain_mb,
      0);
}

// The library reports fatal conditions as errors; exiting is the launcher's choice (ps-launch
// sets PS_ON_SCHEDULER_LOSS=exit for its processes).
TEST(ConfigTest, TheLibraryThrowsByDefaultAndExitsOnlyWhenAsked) {
  EXPECT_FALSE(Config().exit_on_scheduler_loss);
  EXPECT_FALSE(Config::FromMap({{"PS_ROLE", "scheduler"}}).exit_on_scheduler_loss);
  EXPECT_TRUE(Config::FromMap({{"PS_ROLE", "scheduler"}, {"PS_ON_SCHEDULER_LOSS", "exit"}})
                  .exit_on_scheduler_loss);
}

TEST(ConfigTest, PsNameWinsOverAlias) {
  Config c = Config::FromMap(
      {{"PS_ROLE", "worker"}, {"PS_SCHEDULER_PORT", "1"}, {"DMLC_PS_ROOT_PORT", "2"}});
  EXPECT_EQ(c.scheduler_port, 1);
}

TEST(ConfigTest, ErrorsNameTheOption) {
  auto message = [](std::map<std::string, std::string> env) {
    try {
      Config::FromMap(env);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig) << e.what();
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"PS_ROLE", "boss"}}).find("PS_ROLE"), std::string::npos);
  EXPECT_NE(message({}).find("PS_ROLE"), std::string::npos);
  EXPECT_NE(
      message({{"PS_ROLE", "worker"}, {"PS_SCHEDULER_PORT", "x1"}}).find("PS_SCHEDULER_PORT='x1'"),
      std::string::npos);
  EXPECT_NE(message({{"PS_ROLE", "worker"}}).find("PS_SCHEDULER_PORT"), std::string::npos);
  EXPECT_NE(message({{"PS_ROLE", "scheduler"}, {"PS_VNODES", "0"}}).find("PS_VNODES"),
            std::string::npos);
  EXPECT_NE(message({{"PS_ROLE", "scheduler"}, {"PS_MALLOC_RETAIN_MB", "-1"}})
                .find("PS_MALLOC_RETAIN_MB"),
            std::string::npos);
  EXPECT_NE(message({{"PS_ROLE", "scheduler"}, {"PS_VAN", "tcp"}}).find("PS_VAN='tcp'"),
            std::string::npos);
  EXPECT_NE(message({{"PS_ROLE", "scheduler"},
                     {"PS_HEARTBEAT_INTERVAL_MS", "500"},
                     {"PS_HEARTBEAT_TIMEOUT_MS", "100"}})
                .find("PS_HEARTBEAT_TIMEOUT_MS"),
            std::string::npos);
}

// Issue 19: ps-lite's and the Kubernetes operators' variables are read, and the ones ps does
// not read are named instead of being ignored in silence.
TEST(ConfigTest, WorkerGroupsAreReadCheckedAndGivenByRank) {
  const Config c = Config::FromMap({{"PS_ROLE", "worker"},
                                    {"PS_SCHEDULER_PORT", "1"},
                                    {"PS_WORKER_GROUPS", "train:3,eval:1"},
                                    {"PS_RANK", "3"},
                                    {"PS_GROUP_CONSISTENCY", "train=bsp"}});
  EXPECT_EQ(c.num_workers, 4);  // their sum, PS_NUM_WORKERS being unset
  EXPECT_EQ(c.worker_groups, (std::vector<std::pair<std::string, int>>{{"train", 3}, {"eval", 1}}));
  EXPECT_EQ(c.worker_group, "eval");  // rank 3: after train's 0-2
  EXPECT_EQ(c.GroupIndex("eval"), 1);
  EXPECT_EQ(c.group_consistency.at("train"), "bsp");
  auto error = [](const std::map<std::string, std::string>& env) {
    std::map<std::string, std::string> e = env;
    e["PS_ROLE"] = "worker";
    e["PS_SCHEDULER_PORT"] = "1";
    try {
      Config::FromMap(e);
    } catch (const Error& err) {
      return std::string(err.what());
    }
    return std::string();
  };
  EXPECT_NE(error({{"PS_WORKER_GROUPS", "train:0"}}).find("PS_WORKER_GROUPS"), std::string::npos);
  EXPECT_NE(error({{"PS_WORKER_GROUPS", "a:1,a:2"}}).find("PS_WORKER_GROUPS"), std::string::npos);
  EXPECT_NE(error({{"PS_WORKER_GROUPS", "a:1"}, {"PS_NUM_WORKERS", "3"}}).find("PS_NUM_WORKERS=3"),
            std::string::npos);
  EXPECT_NE(error({{"PS_WORKER_GROUPS", "a:1"}, {"PS_WORKER_GROUP", "b"}}).find("PS_WORKER_GROUP="),
            std::string::npos);
  EXPECT_NE(error({{"PS_WORKER_GROUP", "b"}}).find("needs PS_WORKER_GROUPS"), std::string::npos);
  EXPECT_NE(
      error({{"PS_WORKER_GROUPS", "a:1"}, {"PS_RANK", "0"}, {"PS_GROUP_CONSISTENCY", "b=bsp"}})
          .find("PS_GROUP_CONSISTENCY"),
      std::string::npos);
  EXPECT_NE(
      error({{"PS_WORKER_GROUPS", "a:1"}, {"PS_RANK", "0"}, {"PS_GROUP_CONSISTENCY", "a=xyz"}})
          .find("PS_GROUP_CONSISTENCY"),
      std::string::npos);
  EXPECT_NE(error({{"PS_WORKER_GROUPS", "a:1"}, {"PS_RANK", "0"}, {"PS_GROUP_MAX_DELAY", "a=-2"}})
                .find("PS_GROUP_MAX_DELAY"),
            std::string::npos);
  EXPECT_NE(error({{"PS_WORKER_GROUPS", "a:1"}, {"PS_RANK", "0"}, {"PS_GROUP_MAX_DELAY", "b=1"}})
                .find("PS_GROUP_MAX_DELAY"),
            std::string::npos);
  EXPECT_EQ(Config::FromMap({{"PS_ROLE", "scheduler"},
                             {"PS_WORKER_GROUPS", "a:1,b:1"},
                             {"PS_GROUP_MAX_DELAY", "a=0,b=-1"}})
                .group_max_delay,
            (std::map<std::string, int>{{"a", 0}, {"b", -1}}));
}

TEST(ConfigTest, KubernetesStyleVariablesAreRead) {
  Config w = Config::FromMap({{"DMLC_ROLE", "worker"},
                              {"DMLC_PS_ROOT_URI", "mxjob-scheduler-0"},
                              {"DMLC_PS_ROOT_PORT", "9091"},
                              {"DMLC_WORKER_ID", "3"},
                              {"DMLC_INTERFACE", "eth0"},
                              {"DMLC_USE_KUBERNETES", "1"}});
  EXPECT_EQ(w.rank_hint, 3);
  EXPECT_EQ(w.interface, "eth0");
  EXPECT_TRUE(w.kubernetes);
  EXPECT_EQ(w.host, "") << "no PS_NODE_HOST: chosen at Start from the route or interface";
  // PS_RANK wins; a server does not take a worker id.
  EXPECT_EQ(Config::FromMap({{"PS_ROLE", "worker"},
                             {"PS_SCHEDULER_PORT", "1"},
                             {"PS_RANK", "1"},
                             {"DMLC_WORKER_ID", "3"}})
                .rank_hint,
            1);
  EXPECT_EQ(
      Config::FromMap({{"PS_ROLE", "server"}, {"PS_SCHEDULER_PORT", "1"}, {"DMLC_WORKER_ID", "3"}})
          .rank_hint,
      -1);
}

TEST(ConfigTest, UnknownVariablesAreNamedWithTheClosestKnownOne) {
  auto u = Config::UnknownVariables({{"PS_VNODE", "8"},
                                     {"DMLC_ENABLE_RDMA", "1"},
                                     {"PS_VNODES", "8"},
                                     {"DMLC_NUM_WORKER", "2"},
                                     {"HOME", "/root"}});
  EXPECT_EQ(u, (std::vector<std::string>{"DMLC_ENABLE_RDMA", "PS_VNODE (PS_VNODES?)"}));
}

}  // namespace
}  // namespace ps
