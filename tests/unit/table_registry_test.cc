#include "control/table_registry.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

TableSpec Spec(const std::string& name, const std::string& rule = "sum", int width = 1) {
  TableSpec t;
  t.name = name;
  t.rule = rule;
  t.width = width;
  return t;
}

TEST(TableRegistryTest, NamesGetIdsOfTheirOwnAndTheSameSpecFindsTheSameTable) {
  TableRegistry r;
  TableSpec a = Spec("emb"), b = Spec("counts", "count", 0), again = Spec("emb");
  ASSERT_EQ(r.Create(&a), "");
  ASSERT_EQ(r.Create(&b), "");
  ASSERT_EQ(r.Create(&again), "");
  EXPECT_EQ(a.app_id, kTableAppBase);
  EXPECT_EQ(b.app_id, kTableAppBase + 1);
  EXPECT_EQ(again.app_id, a.app_id);
  EXPECT_EQ(r.tables().size(), 2u);
  // The name taken by another spec is refused, naming the field.
  TableSpec other = Spec("emb", "max");
  const std::string why = r.Create(&other);
  EXPECT_NE(why.find("rule: sum vs max"), std::string::npos) << why;
  other = Spec("emb");
  other.dtype = DataType::kInt64;
  EXPECT_NE(r.Create(&other).find("dtype"), std::string::npos);
  EXPECT_EQ(r.tables().size(), 2u);
}

TEST(TableRegistryTest, MalformedSpecsNameTheField) {
  TableRegistry r;
  auto why = [&](TableSpec t) { return r.Create(&t); };
  EXPECT_NE(why(Spec("")).find("table name"), std::string::npos);
  EXPECT_NE(why(Spec("a b")).find("table name"), std::string::npos);
  EXPECT_NE(why(Spec(std::string(65, 'x'))).find("table name"), std::string::npos);
  EXPECT_NE(why(Spec("t", "sum", -1)).find("width"), std::string::npos);
  for (const char* rule : {"", "nope", "sum:1", "sgd", "sgd:x", "sgd:-1", "adagrad:1:2:3"}) {
    EXPECT_NE(why(Spec("t", rule)).find("rule '"), std::string::npos) << rule;
  }
  for (const char* rule :
       {"sum", "count", "assign", "max", "min", "sgd:0.1", "adagrad:0.5", "adagrad:0.5:1e-6"}) {
    EXPECT_EQ(CheckTableSpec(Spec("t", rule)), "") << rule;
  }
  // An application's rule (TableRules): a name with a '.', positive numbers; servers decide
  // whether they know it.
  for (const char* rule : {"lda.words", "lda.words:0.01", "a.b.c:1:2", "app_1.rule_2"}) {
    EXPECT_EQ(CheckTableSpec(Spec("t", rule)), "") << rule;
  }
  for (const char* rule : {"a.", ".a", "a.b:x", "a.b:0", "a.b c", "a-b.c"}) {
    EXPECT_NE(why(Spec("t", rule)).find("application's rule"), std::string::npos) << rule;
  }
  TableSpec c = Spec("t");
  c.compress = "zip";
  EXPECT_NE(why(c).find("compress"), std::string::npos);
  c = Spec("t");
  c.quantize_bits = 4;
  EXPECT_NE(why(c).find("quantize_bits"), std::string::npos);
  EXPECT_TRUE(r.tables().empty());
}

}  // namespace
}  // namespace ps
