// Named tables and worker groups in one process (the process tests are run_tables.py and
// run_groups.py): what a worker sees of a table it opens by name, and a group's policy set at
// run time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "inproc_job.h"
#include "ps/ps.h"

namespace ps {
namespace {

TableSpec Spec(const std::string& name, DataType dtype, int width, const std::string& rule) {
  TableSpec t;
  t.name = name;
  t.dtype = dtype;
  t.width = width;
  t.rule = rule;
  return t;
}

template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TableInprocTest, ATableOpenedByNameHasItsTypeWidthAndRuleAndCountsItsKeys) {
  Job::Run(true, 2, 2, [](Node* node, int rank) {
    node->CreateTable(Spec("vec", DataType::kFloat, 3, "sum"));
    node->CreateTable(Spec("top", DataType::kInt64, 0, "max"));
    KVWorker<float> vec(node, "vec");
    KVWorker<int64_t> top(node, "top");
    SArray<Key> keys(10);
    for (int i = 0; i < 10; ++i) keys[i] = HashKey(static_cast<uint64_t>(i));
    std::sort(keys.begin(), keys.end());
    vec.Wait(vec.Push(keys, SArray<float>(30, 1.0f + rank)));
    SArray<int> lens(10, 2);
    top.Wait(top.Push(keys, SArray<int64_t>(20, 5 * rank), lens));
    EXPECT_NE(ErrorOf([&] { vec.Push(keys, SArray<float>(20, 1.0f)); }).find("3 values per key"),
              std::string::npos);
    EXPECT_NE(ErrorOf([&] { KVWorker<double> wrong(node, "vec"); }).find("holds float values"),
              std::string::npos);
    EXPECT_NE(ErrorOf([&] { node->Table("nope"); }).find("no table named 'nope'"),
              std::string::npos);
    EXPECT_NE(ErrorOf([&] {
                node->CreateTable(Spec("vec", DataType::kFloat, 3, "max"));
              }).find("rule: sum vs max"),
              std::string::npos);
    EXPECT_NE(ErrorOf([&] {
                node->CreateTable(Spec("bad name", DataType::kFloat, 1, "sum"));
              }).find("table name"),
              std::string::npos);
    node->Barrier(kWorkerGroup);
    SArray<float> v(30);
    vec.Wait(vec.Pull(keys, &v));
    SArray<int64_t> t;
    SArray<int> tl;
    top.Wait(top.Pull(keys, &t, &tl));
    for (int i = 0; i < 30; ++i) EXPECT_EQ(v[i], 3.0f);  // 1 + 2: the sum rule
    for (int i = 0; i < 20; ++i) EXPECT_EQ(t[i], 5);     // max(0, 5): the max rule
    std::vector<double> n;
    vec.Wait(vec.CountKeys({Range::All()}, &n));
    EXPECT_EQ(n, std::vector<double>{10});
    EXPECT_EQ(node->Tables().size(), 2u);
    EXPECT_GE(node->Table("top").app_id, kTableAppBase);
    node->Barrier(kWorkerGroup);
  });
}

TEST(TableInprocTest, AGroupsPolicySetAtRunTimeReachesEveryNodeAndLeavesTheOthers) {
  Job::Run(
      true, 1, 2,
      [](Node* node, int rank) {
        EXPECT_EQ(node->group(), rank == 0 ? "a" : "b");
        EXPECT_EQ(node->group_rank(), 0);
        if (rank == 0) node->SetConsistency("ssp:3", 2, "a");
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (node->consistency_policy("a") != "ssp:3" &&
               std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        EXPECT_EQ(node->consistency_policy("a"), "ssp:3");
        EXPECT_EQ(node->max_delay("a"), 2);
        EXPECT_EQ(node->consistency_policy("b"), "asp");
        EXPECT_EQ(node->max_delay("b"), 3);  // PS_GROUP_MAX_DELAY's
        EXPECT_EQ(node->max_delay(), -1);
        EXPECT_EQ(node->consistency_policy(), "asp");
        EXPECT_NE(ErrorOf([&] { node->SetConsistency("bsp", 0, "c"); }).find("'c'"),
                  std::string::npos);
        node->Barrier(rank == 0 ? "a" : "b");  // one member each: passes alone
        node->Barrier(kWorkerGroup);
        if (rank == 1) node->SetConsistency("bsp", Node::kKeepDelay);  // the job's: every group
        while (node->consistency_policy("a") != "bsp" && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        EXPECT_EQ(node->consistency_policy("a"), "bsp");
        EXPECT_EQ(node->max_delay("a"), 2);  // the job's call kept the delay
      },
      static_cast<int64_t*>(nullptr),
      [](Config* c) {
        c->worker_groups = {{"a", 1}, {"b", 1}};
        c->group_max_delay = {{"b", 3}};
      });
}

}  // namespace
}  // namespace ps
