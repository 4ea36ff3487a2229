// apps/linear pieces on their own: the readers (every error names file and line), the parts
// (every line in exactly one part), the metrics, and the update rules.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "linear/data.h"
#include "linear/lbfgs.h"
#include "linear/metrics.h"
#include "linear/model_file.h"
#include "linear/rules.h"
#include "util/rng.h"

namespace linear {
namespace {

using ps::Rng;

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(LinearDataTest, LibsvmLabelsIdsAndValues) {
  const std::string p = Write("a.libsvm",
                              "+1 3:0.5 7:2\n"
                              "# a comment line\n"
                              "\n"
                              "0 0:1 7\n"  // 0/1 labels, a 0-based id, a value-less id
                              "-1 qid:3 5:1.5 # trailing comment\n");
  Dataset d = ReadFile(p, Format::kLibsvm);
  ASSERT_EQ(d.rows(), 3u);
  EXPECT_EQ(d.label[0], 1.0f);
  EXPECT_EQ(d.label[1], -1.0f);
  EXPECT_EQ(d.label[2], -1.0f);
  EXPECT_EQ(d.row[1] - d.row[0], 2u);
  EXPECT_EQ(d.row[2] - d.row[1], 2u);
  EXPECT_EQ(d.row[3] - d.row[2], 1u);  // qid is not a feature
  EXPECT_EQ(d.keys.size(), 4u);        // ids 0, 3, 5, 7
  EXPECT_TRUE(std::is_sorted(d.keys.begin(), d.keys.end()));
  EXPECT_EQ(d.keys[d.col[1]], FeatureKey(7));
  EXPECT_EQ(d.val[1], 2.0f);
  EXPECT_EQ(d.val[3], 1.0f);  // "7" alone is 7:1
}

// The reader parses plain decimals itself (a fast path) and hands the rest to from_chars: every
// value must come out as strtod reads it, and every id as strtoull does.
TEST(LinearDataTest, ValuesAndIdsReadAsStrtodAndStrtoullReadThem) {
  const uint64_t seed = 20261128;
  Rng rng(seed);
  auto digits = [&rng](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += static_cast<char>('0' + rng.Below(10));
    return s;
  };
  std::string text;
  std::vector<std::string> vals;
  std::vector<std::string> ids;
  for (int line = 0; line < 400; ++line) {
    text += line % 2 ? "+1" : "-1";
    unsigned long long id = rng.Below(1000);
    for (int k = 0; k < 8; ++k) {
      std::string v;
      const int form = static_cast<int>(rng.Below(7));
      const std::string sign = rng.Below(4) == 0 ? "-" : rng.Below(8) == 0 ? "+" : "";
      if (form == 0) v = sign + digits(1 + static_cast<int>(rng.Below(18)));
      if (form == 1) {
        v = sign + digits(1 + static_cast<int>(rng.Below(9))) + "." +
            digits(static_cast<int>(rng.Below(12)));
      }
      if (form == 2) v = sign + "." + digits(1 + static_cast<int>(rng.Below(20)));
      if (form == 3) v = sign + digits(1 + static_cast<int>(rng.Below(3))) + "e-" + digits(1);
      if (form == 4) v = sign + "0.000" + digits(1 + static_cast<int>(rng.Below(16)));
      if (form == 5) v = sign + digits(1 + static_cast<int>(rng.Below(16))) + ".";
      if (form == 6) v = "1";
      // Ids grow along a line; some are long (up to 20 digits, below 2^64).
      id += 1 + rng.Below(rng.Below(3) == 0 ? 1000000000000000000ull : 1000);
      if (id >= 18000000000000000000ull) break;
      const std::string is = std::to_string(id);
      text += " " + is + ":" + v;
      ids.push_back(is);
      vals.push_back(v);
    }
    text += "\n";
  }
  const Dataset d = ReadFile(Write("values.libsvm", text), Format::kLibsvm);
  ASSERT_EQ(d.val.size(), vals.size()) << "seed " << seed;
  for (size_t i = 0; i < vals.size(); ++i) {
    EXPECT_EQ(d.val[i], static_cast<float>(std::strtod(vals[i].c_str(), nullptr)))
        << vals[i] << " (seed " << seed << ")";
    EXPECT_EQ(d.keys[d.col[i]], FeatureKey(std::strtoull(ids[i].c_str(), nullptr, 10)))
        << ids[i] << " (seed " << seed << ")";
  }
}

TEST(LinearDataTest, EveryMalformedLineIsNamedWithFileAndLine) {
  const char* bad[] = {"2 1:1",   "x 1:1",   "1 a:1",     "1 -3:1",    "1 1:abc",
                       "1 1:1:1", "1 1:inf", "1 5:1 3:1", "1 3:1 3:2", "1 0:1 2 2"};
  for (const char* line : bad) {
    const std::string p = Write("bad.libsvm", std::string("1 1:1\n\n") + line + "\n1 2:1\n");
    try {
      ReadFile(p, Format::kLibsvm);
      ADD_FAILURE() << "accepted: " << line;
    } catch (const ps::Error& e) {
      EXPECT_NE(std::string(e.what()).find(p + ":3: "), std::string::npos)
          << line << " -> " << e.what();
    }
  }
  const std::string c = Write("bad.tsv", "1\t1\t\t\t\t\t\t\t\t\t\t\t\t\ta\n");
  try {
    ReadFile(c, Format::kCriteo);
    ADD_FAILURE() << "accepted a short criteo line";
  } catch (const ps::Error& e) {
    EXPECT_NE(std::string(e.what()).find(c + ":1: expected 40"), std::string::npos) << e.what();
  }
  // An empty training file, or one of comments and blank lines only, holds no rows.
  EXPECT_FALSE(HasRows(Write("empty.libsvm", ""), Format::kLibsvm));
  EXPECT_FALSE(HasRows(Write("blank.libsvm", "\n  \n# only a comment\n"), Format::kLibsvm));
  EXPECT_TRUE(HasRows(Write("one.libsvm", "\n# c\n+1 1:1\n"), Format::kLibsvm));
  EXPECT_THROW(ParseFormat("csv"), ps::Error);
  EXPECT_THROW(ReadFile(::testing::TempDir() + "missing.libsvm", Format::kLibsvm), ps::Error);
}

TEST(LinearDataTest, CriteoColumnsAreHashedWithTheirColumn) {
  std::string line = "1";
  for (int i = 1; i <= 13; ++i) line += "\t" + std::to_string(i == 2 ? 1000 : i);
  for (int i = 0; i < 26; ++i) line += i == 5 ? "\t" : "\tabc";  // one missing category
  Dataset d = ReadFile(Write("c.tsv", line + "\n" + line + "\n"), Format::kCriteo);
  ASSERT_EQ(d.rows(), 2u);
  EXPECT_EQ(d.label[0], 1.0f);
  EXPECT_EQ(d.row[1], 13u + 25u);  // the same text in different columns: different keys
  EXPECT_EQ(d.keys.size(), 13u + 25u);
}

TEST(LinearDataTest, PartsCoverEveryLineExactlyOnce) {
  Rng rng(11);
  std::string text;
  const int n = 1000;
  for (int i = 0; i < n; ++i) {
    text += (i % 2 ? "+1" : "-1");
    const int k = 1 + static_cast<int>(rng.Below(20));
    for (int j = 0; j < k; ++j) text += " " + std::to_string(i * 32 + j) + ":1";
    text += "\n";
  }
  const std::string p = Write("parts.libsvm", text);
  for (int parts : {1, 2, 3, 7, 64}) {
    Dataset all;
    for (int i = 0; i < parts; ++i) {
      Dataset d = ReadPart(p, Format::kLibsvm, i, parts);
      all.Append(d);
    }
    ASSERT_EQ(all.rows(), static_cast<size_t>(n)) << "parts " << parts;
    // Row i's first feature has id 32 i, and rows come in file order.
    for (size_t i = 0; i < all.rows(); ++i) {
      ASSERT_EQ(all.keys[all.col[all.row[i]]], FeatureKey(i * 32))
          << "parts " << parts << " row " << i;
    }
  }
}

// The model file names features as the data does (it used to hold the servers' hashed keys)
// and reads back to the same weights under the same keys.
TEST(LinearModelFileTest, LibsvmModelsHoldFeatureIdsAndReadBack) {
  const std::vector<uint64_t> ids = {0, 3, 7, 123456789, 1ull << 40};
  std::vector<ps::Key> keys;
  std::vector<double> w;
  for (size_t i = 0; i < ids.size(); ++i) {
    keys.push_back(FeatureKey(ids[i]));
    w.push_back(i == 2 ? 0.0 : 0.1 * static_cast<double>(i) - 1.0 / 3);
  }
  const std::string p = ::testing::TempDir() + "m.libsvm.model";
  WriteModel(p, Format::kLibsvm, "", keys.data(), w.data(), keys.size());
  std::ifstream in(p);
  std::string header, line;
  std::getline(in, header);
  std::vector<uint64_t> written;
  while (std::getline(in, line)) written.push_back(std::stoull(line.substr(0, line.find(' '))));
  EXPECT_EQ(written, (std::vector<uint64_t>{0, 3, 123456789, 1ull << 40}))
      << "ids, without the zero weight";
  const auto back = ReadModel(p, Format::kLibsvm);
  ASSERT_EQ(back.size(), 4u);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (w[i] == 0) continue;
    ASSERT_TRUE(back.count(keys[i])) << "id " << ids[i];
    EXPECT_EQ(back.at(keys[i]), w[i]) << "17 digits read back exactly";
  }
  try {
    ReadModel(p, Format::kCriteo);
    ADD_FAILURE() << "read a libsvm model as criteo";
  } catch (const ps::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--format=criteo"), std::string::npos) << e.what();
  }
}

TEST(LinearModelFileTest, CriteoModelsNameColumnAndValue) {
  std::string line = "1";
  for (int i = 1; i <= 13; ++i) line += "\t" + std::to_string(i == 2 ? 1000 : i);
  for (int i = 0; i < 26; ++i) line += "\tv" + std::to_string(i % 3);
  const std::string train = Write("m.tsv", line + "\n");
  const Dataset d = ReadFile(train, Format::kCriteo);
  std::vector<double> w(d.keys.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0 + static_cast<double>(i);
  const ps::Key unknown = ps::HashKey(99);  // no feature of the file: kept as a key
  std::vector<ps::Key> keys = d.keys;
  keys.push_back(unknown);
  w.push_back(-2);
  const std::string p = ::testing::TempDir() + "m.criteo.model";
  WriteModel(p, Format::kCriteo, train, keys.data(), w.data(), keys.size());
  std::ifstream in(p);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\nI2\t#12\t"), std::string::npos) << "1000 is in bucket 3 + 9";
  EXPECT_NE(text.find("\nC26\tv1\t"), std::string::npos) << text;
  EXPECT_NE(text.find("\nkey\t" + std::to_string(unknown) + "\t-2\n"), std::string::npos);
  const auto back = ReadModel(p, Format::kCriteo);
  ASSERT_EQ(back.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(back.at(keys[i]), w[i]) << i;
}

TEST(LinearModelFileTest, MalformedModelLinesAreNamedWithFileAndLine) {
  const std::string h = "# ps linear model v2 format libsvm: feature id, weight\n";
  for (const std::string& bad : {h + "3 0.5\n-4 1\n", h + "3 0.5\n4\n", h + "3 x\n",
                                 h + "3 1\n3 2\n", std::string("3 0.5\n")}) {
    const std::string p = Write("bad.model", bad);
    try {
      ReadModel(p, Format::kLibsvm);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const ps::Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(p + ":", 0), 0u) << e.what();
    }
  }
}

TEST(LinearMetricsTest, LoglossAucAccuracy) {
  const std::vector<float> y = {1, -1, 1, -1};
  const Quality q = Evaluate(y, {2.0, -1.0, 0.5, 0.5});
  EXPECT_NEAR(q.logloss, (LogLoss(2) + LogLoss(1) + LogLoss(0.5) + LogLoss(-0.5)) / 4, 1e-12);
  EXPECT_DOUBLE_EQ(q.accuracy, 0.75);
  // Positives ranked 4 and 2.5 (tied with a negative): (4 + 2.5 - 3) / (2 * 2).
  EXPECT_DOUBLE_EQ(q.auc, 0.875);
  EXPECT_NEAR(LogLoss(-800), 800, 1e-9);  // no overflow
  EXPECT_NEAR(Sigmoid(-800), 0, 1e-300);
}

TEST(LinearRulesTest, ProxStepSolvesTheOneCoordinateProblem) {
  Rng rng(5);
  for (int i = 0; i < 1000; ++i) {
    const double w = rng.Uniform() * 4 - 2, g = rng.Uniform() * 4 - 2, h = rng.Uniform() * 3 + .1;
    const double l1 = rng.Uniform(), l2 = rng.Uniform();
    const double x = ProxStep(w, g, h, l1, l2);
    auto f = [&](double z) {
      return g * (z - w) + h / 2 * (z - w) * (z - w) + l1 * std::fabs(z) + l2 / 2 * z * z;
    };
    for (double d : {-1e-4, 1e-4, -0.1, 0.1})
      ASSERT_LE(f(x), f(x + d) + 1e-12) << "seed 5 case " << i;
  }
}

TEST(LinearRulesTest, DbpgStepsOnceTheSumsOfAnIterationAreCompleteAndPullsSeeTheirStep) {
  DbpgRule<double> rule(/*eta=*/1, /*l1=*/0, /*l2=*/1, /*momentum=*/false);
  double v[3] = {0, 0, 0}, s[6] = {0, 0, 0, 0, 0, 0}, out = -1;
  const double a[3] = {-1, 2, 1}, b[3] = {-3, 2, 1};  // two workers' parts of iteration 0
  rule.Apply(0, a, v, s, 3);
  rule.Apply(0, b, v, s, 3);
  const double step = ProxStep(0, -4, 4, 0, 1);  // 0.8
  rule.ReadAt(0, v, s, &out, 3, /*step=*/1);     // a pull of step 1 sees iteration 0's step
  EXPECT_DOUBLE_EQ(out, step);
  rule.ReadAt(0, v, s, &out, 3, /*step=*/0);  // a pull of step 0 does not
  EXPECT_DOUBLE_EQ(out, 0);
  const double c[3] = {1, 2, 2};  // iteration 1 starts: iteration 0 is stepped for good
  rule.Apply(0, c, v, s, 3);
  rule.ReadAt(0, v, s, &out, 3, /*step=*/1);  // iteration 1's partial sums stay unseen
  EXPECT_DOUBLE_EQ(out, step);
  EXPECT_EQ(rule.ReadWidth(3), 1);
}

TEST(LinearRulesTest, FtrlMatchesItsClosedForm) {
  const double alpha = 0.5, beta = 1, l1 = 0.1, l2 = 0.2;
  FtrlRule<double> rule(alpha, beta, l1, l2);
  double w = 0, s[2] = {0, 0};
  double z = 0, n = 0, want = 0;  // the per-coordinate recurrence of McMahan et al., by hand
  for (double g : {0.3, -1.2, 0.05, 0.4}) {
    rule.Apply(0, &g, &w, s, 1);
    const double sigma = (std::sqrt(n + g * g) - std::sqrt(n)) / alpha;
    z += g - sigma * want;
    n += g * g;
    want =
        std::fabs(z) <= l1 ? 0 : -(z - std::copysign(l1, z)) / ((beta + std::sqrt(n)) / alpha + l2);
    ASSERT_NEAR(w, want, 1e-12) << "after g = " << g;
  }
  const double g = 0.01;  // |z| inside the band now? then the weight is exactly zero
  double zz = s[0] + g - (std::sqrt(s[1] + g * g) - std::sqrt(s[1])) / alpha * w;
  rule.Apply(0, &g, &w, s, 1);
  EXPECT_EQ(w == 0, std::fabs(zz) <= l1);
}

// The vector-free two-loop recursion gives the direction of the plain one: pairs from a seeded
// convex function (so s.y > 0), the history cut by key slices as owners hold it, partials
// added up.
TEST(LinearLbfgsTest, VectorFreeDirectionEqualsTheTwoLoopRecursion) {
  const uint64_t seed = 7;
  Rng rng(seed);
  const size_t n = 40;
  const int memory = 4;
  std::vector<double> diag(n);
  for (auto& x : diag) x = 0.5 + 3 * rng.Uniform();
  auto gradient = [&](const std::vector<double>& w) {
    std::vector<double> g(n);
    // Not quadratic (a cubic term): s_i.y_j differs from s_j.y_i, as on a real objective.
    for (size_t j = 0; j < n; ++j) {
      g[j] = diag[j] * w[j] + 0.5 * w[j] * w[j] * w[j] - 1.0 + 0.1 * static_cast<double>(j % 3);
    }
    return g;
  };
  VectorFreeLbfgs lb(memory);
  std::vector<std::vector<double>> S, Y;
  std::vector<double> w(n, 0.0), g = gradient(w);
  double vv = 0;
  for (double x : g) vv += x * x;
  lb.SetGradient(vv);
  // Two owners: keys [0, 17) and [17, n).
  const size_t cut = 17;
  for (int step = 0; step < 7; ++step) {
    std::vector<double> x(n);
    for (size_t j = 0; j < n; ++j) x[j] = w[j] - (0.2 + 0.3 * rng.Uniform()) * g[j];
    const std::vector<double> gx = gradient(x);
    std::vector<double> s(n), y(n);
    for (size_t j = 0; j < n; ++j) {
      s[j] = x[j] - w[j];
      y[j] = gx[j] - g[j];
    }
    std::vector<double> part(lb.PartialCount(), 0.0);
    for (size_t b : {size_t{0}, cut}) {
      const size_t e = b == 0 ? cut : n;
      std::vector<std::pair<const double*, const double*>> held;
      for (size_t i = 0; i < S.size(); ++i) held.emplace_back(S[i].data() + b, Y[i].data() + b);
      lb.AddPartials(s.data() + b, y.data() + b, gx.data() + b, held, e - b, part.data());
    }
    ASSERT_TRUE(lb.Accept(part)) << "seed " << seed;
    S.push_back(s);
    Y.push_back(y);
    if (static_cast<int>(S.size()) > memory) {
      S.erase(S.begin());
      Y.erase(Y.begin());
    }
    w = x;
    g = gx;
    ASSERT_EQ(lb.pairs(), static_cast<int>(S.size()));
    // The plain two-loop recursion on the vectors.
    auto dot = [&](const std::vector<double>& a, const std::vector<double>& b) {
      double r = 0;
      for (size_t j = 0; j < n; ++j) r += a[j] * b[j];
      return r;
    };
    const int m = static_cast<int>(S.size());
    std::vector<double> q = g, a(m);
    for (int i = m - 1; i >= 0; --i) {
      a[i] = dot(S[i], q) / dot(S[i], Y[i]);
      for (size_t j = 0; j < n; ++j) q[j] -= a[i] * Y[i][j];
    }
    const double gamma = dot(S[m - 1], Y[m - 1]) / dot(Y[m - 1], Y[m - 1]);
    for (auto& x2 : q) x2 *= gamma;
    for (int i = 0; i < m; ++i) {
      const double b = dot(Y[i], q) / dot(S[i], Y[i]);
      for (size_t j = 0; j < n; ++j) q[j] += (a[i] - b) * S[i][j];
    }
    const VectorFreeLbfgs::Direction dir = lb.Compute();
    double vd = 0;
    for (size_t j = 0; j < n; ++j) {
      double r = dir.cv * g[j];
      for (int i = 0; i < m; ++i) r += dir.cs[i] * S[i][j] + dir.cy[i] * Y[i][j];
      EXPECT_NEAR(-r, -q[j], 1e-9 * (1 + std::fabs(q[j])))
          << "step " << step << " key " << j << " seed " << seed;
      vd += g[j] * -r;
    }
    EXPECT_NEAR(lb.VDotD(dir), vd, 1e-9 * (1 + std::fabs(vd))) << "seed " << seed;
    EXPECT_LT(vd, 0) << "not a descent direction; seed " << seed;
  }
}

// The first step from a first point decreases the objective by at least what its bound
// promises, half of a v.v, so Armijo's test passes at once: from w = 0 with any l1 and l2,
// and from any w without l1 (with l1 a coordinate may cross zero there, and the solver halves
// as before). Seeded dense problems whose features are large, so 1/|v| (the rule before) is
// far too long and fails.
TEST(LinearLbfgsTest, TheFirstStepDecreasesTheObjectiveAsItsBoundPromises) {
  const size_t rows = 60, cols = 12;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    std::vector<double> x(rows * cols), y(rows);
    for (auto& v : x) v = 3 * (2 * rng.Uniform() - 1);
    for (auto& v : y) v = rng.Uniform() < 0.4 ? 1 : -1;
    auto margins = [&](const std::vector<double>& w) {
      std::vector<double> m(rows, 0.0);
      for (size_t i = 0; i < rows; ++i) {
        for (size_t j = 0; j < cols; ++j) m[i] += x[i * cols + j] * w[j];
      }
      return m;
    };
    auto objective = [&](const std::vector<double>& w, double l1, double l2) {
      const std::vector<double> m = margins(w);
      double f = 0;
      for (size_t i = 0; i < rows; ++i) f += std::log1p(std::exp(-y[i] * m[i]));
      for (double wj : w) f += l1 * std::fabs(wj) + l2 / 2 * wj * wj;
      return f;
    };
    const double cases[6][3] = {{0, 1, 0},   {0, 0, 0}, {0.5, 0, 0},
                                {0.5, 1, 0}, {0, 1, 1}, {0, 0, 1}};
    for (const auto& c : cases) {
      const double l1 = c[0], l2 = c[1];
      std::vector<double> w(cols, 0.0);
      if (c[2] > 0) {
        for (auto& wj : w) wj = 2 * rng.Uniform() - 1;
      }
      const std::vector<double> m = margins(w);
      std::vector<double> g(cols, 0.0), v(cols);
      for (size_t i = 0; i < rows; ++i) {
        const double d = -y[i] / (1 + std::exp(y[i] * m[i]));
        for (size_t j = 0; j < cols; ++j) g[j] += d * x[i * cols + j];
      }
      double vv = 0;
      for (size_t j = 0; j < cols; ++j) {
        g[j] += l2 * w[j];
        // The pseudo-gradient (w = 0 wherever l1 is set).
        const double a = g[j] + l1, b = g[j] - l1;
        v[j] = w[j] != 0 ? g[j] + l1 * (w[j] > 0 ? 1 : -1) : (a < 0 ? a : (b > 0 ? b : 0));
        vv += v[j] * v[j];
      }
      const std::vector<double> xv = margins(v);
      double xv2 = 0;
      for (double t : xv) xv2 += t * t;
      const double step = FirstStepLength(vv, xv2, l2);
      std::vector<double> next(cols);
      for (size_t j = 0; j < cols; ++j) next[j] = w[j] - step * v[j];
      const double before = objective(w, l1, l2), after = objective(next, l1, l2);
      EXPECT_LE(after, before - 0.5 * step * vv * (1 - 1e-12))
          << "seed " << seed << " l1 " << l1 << " l2 " << l2 << " from w "
          << (c[2] > 0 ? "random" : "0") << ": step " << step << ", 1/|v| " << 1 / std::sqrt(vv);
    }
  }
}

TEST(LinearLbfgsTest, PartialsAreEachDotProductSummedInKeyOrder) {
  // The fused pass must give, bit for bit, one sequential dot product per partial: the
  // workers' sums (and so the models of a 1-worker and a 2-worker run) do not depend on it.
  const uint64_t seed = 11;
  Rng rng(seed);
  const size_t n = 1500;  // not a multiple of the pass's chunk
  auto vec = [&] {
    std::vector<double> x(n);
    for (auto& e : x) e = rng.Uniform() * 2 - 1;
    return x;
  };
  const std::vector<double> s = vec(), y = vec(), v = vec();
  std::vector<std::vector<double>> hs, hy;
  for (int i = 0; i < 3; ++i) {
    hs.push_back(vec());
    hy.push_back(vec());
  }
  VectorFreeLbfgs lb(5);
  std::vector<std::pair<const double*, const double*>> held;
  for (int i = 0; i < 3; ++i) held.emplace_back(hs[i].data(), hy[i].data());
  std::vector<double> got(6 * 3 + 6, 1.0);  // AddPartials adds to what is there
  lb.AddPartials(s.data(), y.data(), v.data(), held, n, got.data());
  auto dot = [&](const std::vector<double>& a, const std::vector<double>& b) {
    double r = 0;
    for (size_t j = 0; j < n; ++j) r += a[j] * b[j];
    return 1.0 + r;
  };
  std::vector<double> want;
  for (int i = 0; i < 3; ++i) {
    for (const auto* a : {&s, &y, &v}) {
      want.push_back(dot(*a, hs[i]));
      want.push_back(dot(*a, hy[i]));
    }
  }
  for (double x : {dot(s, s), dot(s, y), dot(y, y), dot(v, s), dot(v, y), dot(v, v)}) {
    want.push_back(x);
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_EQ(got[k], want[k]) << "partial " << k << ", seed " << seed;
}

}  // namespace
}  // namespace linear
