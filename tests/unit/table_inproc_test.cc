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

// An application's rule: sums that stop at a cap given in the table's spec, with a reducer
// that counts the keys at the cap.
class CappedSum : public UpdateRule<int64_t> {
 public:
  explicit CappedSum(int64_t cap) : cap_(cap) {}
  void Apply(Key, const int64_t* pushed, int64_t* val, int64_t*, int n) const override {
    for (int i = 0; i < n; ++i) val[i] = std::min(cap_, val[i] + pushed[i]);
  }
  bool Elementwise() const override { return true; }

 private:
  int64_t cap_;
};
class AtCap : public RangeReducer<int64_t> {
 public:
  explicit AtCap(int64_t cap) : cap_(cap) {}
  int Width() const override { return 1; }
  void Add(Key, const int64_t* vals, int n, double* acc) const override {
    for (int i = 0; i < n; ++i) acc[0] += vals[i] == cap_;
  }

 private:
  int64_t cap_;
};

TEST(TableInprocTest, AnApplicationsRuleIsServedByNameWithItsNumbersAndReducers) {
  TableRules rules;
  rules.Add<int64_t>("test.capped", [](const std::vector<double>& args) {
    const auto cap = static_cast<int64_t>(args.at(0));
    return TableRule<int64_t>{std::make_shared<CappedSum>(cap),
                              {{1, std::make_shared<AtCap>(cap)}}};
  });
  EXPECT_NE(ErrorOf([&] { TableRules().Add<int64_t>("capped", nullptr); }).find("needs a '.'"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { TableRules(rules).Add(rules); }).find("added twice"), std::string::npos);
  Job::Run(
      true, 2, 2,
      [](Node* node, int rank) {
        // Two tables of the same rule with other caps, and the same keys: each its own.
        node->CreateTable(Spec("c7", DataType::kInt64, 1, "test.capped:7"));
        node->CreateTable(Spec("c100", DataType::kInt64, 1, "test.capped:100"));
        KVWorker<int64_t> c7(node, "c7"), c100(node, "c100");
        const SArray<Key> keys{1, 2, 3};
        for (int i = 0; i < 3; ++i) {
          c7.Wait(c7.Push(keys, SArray<int64_t>{2, 3, 0}));
          c100.Wait(c100.Push(keys, SArray<int64_t>{2, 3, 0}));
        }
        node->Barrier(kWorkerGroup);
        SArray<int64_t> v7(3), v100(3);
        c7.Wait(c7.Pull(keys, &v7));
        c100.Wait(c100.Pull(keys, &v100));
        // 2 workers x 3 pushes: 12 and 18, capped at 7 in one table only.
        EXPECT_EQ(std::vector<int64_t>(v7.begin(), v7.end()), (std::vector<int64_t>{7, 7, 0}));
        EXPECT_EQ(std::vector<int64_t>(v100.begin(), v100.end()),
                  (std::vector<int64_t>{12, 18, 0}));
        std::vector<double> at7, at100;
        c7.Wait(c7.Reduce(1, {Range::All()}, &at7));
        c100.Wait(c100.Reduce(1, {Range::All()}, &at100));
        EXPECT_EQ(at7, std::vector<double>{2});
        EXPECT_EQ(at100, std::vector<double>{0});
        EXPECT_NE(ErrorOf([&] {
                    node->CreateTable(Spec("c", DataType::kInt64, 1, "test.capped:x"));
                  }).find("application's rule"),
                  std::string::npos)
            << rank;
        node->Barrier(kWorkerGroup);
      },
      static_cast<int64_t*>(nullptr), nullptr, nullptr, {}, rules);
}

TEST(TableInprocTest, AGroupsPolicySetAtRunTimeReachesEveryNodeAndLeavesTheOthers) {
  Job::Run(
      true, 1, 2,
      [](Node* node, int rank) {
        EXPECT_EQ(node->group(), rank == 0 ? "a" : "b");
        EXPECT_EQ(node->group_rank(), 0);
        KVWorker<int64_t> kv(node);  // its bounded delay is its own group's
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
        // Group a's delay reached a's worker only (checked after the later change, which the
        // node handled after every effect of the first).
        EXPECT_EQ(kv.max_delay(), rank == 0 ? 2 : 3) << "rank " << rank;
      },
      static_cast<int64_t*>(nullptr),
      [](Config* c) {
        c->worker_groups = {{"a", 1}, {"b", 1}};
        c->group_max_delay = {{"b", 3}};
      });
}

}  // namespace
}  // namespace ps
