// apps/countmin on its own: the hash family, the sketch's guarantees, the stream reader's
// parts, SpaceSaving and the Zipf generator. Seeded; failures print the seed.
#include "countmin/countmin.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "countmin/space_saving.h"

namespace countmin {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/countmin_" + std::to_string(getpid()) + "_" + name;
}

// The text items of a part, as strings.
std::vector<std::string> Texts(const PartItems& part, Format format) {
  std::vector<std::string> out;
  ForEachText(part.text, format, [&out](std::string_view item) { out.emplace_back(item); });
  return out;
}

TEST(CountMinTest, ShapeFollowsEpsilonAndDelta) {
  const Shape s = Shape::FromError(0.001, 0.01);
  EXPECT_EQ(s.width, 2719u);  // ceil(e / 0.001)
  EXPECT_EQ(s.depth, 5u);     // ceil(ln 100)
  EXPECT_THROW(Shape::FromError(0, 0.1), std::runtime_error);
  EXPECT_THROW(Shape::FromError(0.1, 1), std::runtime_error);
}

// Pairwise independence, checked where it shows: two distinct ids share a column with
// probability 1/w over the draw of the hash function (the seed), also for ids that are
// consecutive or differ in one bit (what a weak family fails on). For one fixed function such
// structured pairs are not random (x and x + 1 collide in row j for every x or almost none), so
// the rate is taken over seeds.
TEST(CountMinTest, DistinctIdsCollideAtTheRateOfOneInWidthOverSeeds) {
  const uint32_t w = 64, d = 4;
  std::mt19937_64 rng(11);
  const char* kinds[] = {"consecutive", "one bit apart", "random"};
  for (int kind = 0; kind < 3; ++kind) {
    uint64_t trials = 0, same = 0;
    for (uint64_t seed = 1; seed <= 3000; ++seed) {
      HashFamily h({w, d}, seed);
      const uint64_t x = rng();
      const uint64_t y = kind == 0 ? x + 1 : kind == 1 ? x ^ (1ull << (rng() % 64)) : rng();
      if (y == x) continue;
      for (uint32_t j = 0; j < d; ++j) {
        trials++;
        same += h.Column(j, x) == h.Column(j, y);
      }
    }
    // 12 000 trials: the binomial's standard deviation is about 0.0011.
    EXPECT_NEAR(static_cast<double>(same) / trials, 1.0 / w, 0.005)
        << kinds[kind] << " (rng seed 11)";
  }
}

// The CountMin guarantees on a skewed stream: no estimate below the count, and the fraction of
// items whose error exceeds epsilon * N at most delta (with room for sampling noise).
TEST(CountMinTest, EstimatesNeverFallBelowCountsAndRarelyExceedTheBound) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const double eps = 0.002, delta = 0.05;
    const Shape shape = Shape::FromError(eps, delta);
    LocalSketch plain(shape, seed), cons(shape, seed);
    Zipf z(20000, 1.1, seed);
    std::unordered_map<uint64_t, int64_t> exact;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
      const uint64_t x = z.Next();
      exact[x]++;
      plain.Add(x);
      cons.AddConservative(x);
    }
    size_t over_plain = 0, over_cons = 0;
    int64_t err_plain = 0, err_cons = 0;
    for (const auto& [x, c] : exact) {
      ASSERT_GE(plain.Estimate(x), c) << "seed " << seed;
      ASSERT_GE(cons.Estimate(x), c) << "seed " << seed;
      ASSERT_LE(cons.Estimate(x), plain.Estimate(x)) << "seed " << seed;
      over_plain += plain.Estimate(x) - c > eps * n;
      over_cons += cons.Estimate(x) - c > eps * n;
      err_plain += plain.Estimate(x) - c;
      err_cons += cons.Estimate(x) - c;
    }
    EXPECT_LE(static_cast<double>(over_plain) / exact.size(), delta) << "seed " << seed;
    EXPECT_LE(over_cons, over_plain) << "seed " << seed;
    EXPECT_LT(err_cons, err_plain) << "conservative update errs less; seed " << seed;
  }
}

// 32-bit cells (--counter_bits 32): the servers' saturating sum gives min(total, 2^32 - 1)
// whatever the order and the split of the deltas, so the cells equal a local count clamped at
// the end.
TEST(CountMinTest, ThirtyTwoBitCellsSaturateInAnyOrder) {
  const uint64_t seed = 21;
  std::mt19937_64 rng(seed);
  SaturatingU32Rule rule;
  for (int round = 0; round < 200; ++round) {
    std::vector<int64_t> deltas;
    int64_t total = 0;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      // Near the cap, and small ones, so that sums cross 2^31 (the sign bit) and 2^32.
      const int64_t d = rng() % 2 ? static_cast<int64_t>(rng() % kCap32) : rng() % 1000;
      deltas.push_back(d);
      total += d;
    }
    std::shuffle(deltas.begin(), deltas.end(), rng);
    int32_t cell = 0;
    for (int64_t d : deltas) {
      const int32_t p = static_cast<int32_t>(static_cast<uint32_t>(d));
      rule.Apply(0, &p, &cell, nullptr, 1);
    }
    ASSERT_EQ(static_cast<uint32_t>(cell), std::min(total, kCap32))
        << "seed " << seed << " round " << round;
  }
}

TEST(CountMinTest, ClampingAtTheEndEqualsClampingEveryConservativeInsert) {
  const uint64_t seed = 23;
  std::mt19937_64 rng(seed);
  const Shape shape{16, 3};
  const int64_t cap = 40;  // a small cap stands in for 2^32 - 1
  LocalSketch end(shape, seed);
  std::vector<int64_t> step(shape.cells(), 0);  // conservative, clamped at every insert
  for (int i = 0; i < 3000; ++i) {
    const uint64_t x = rng() % 60;
    end.AddConservative(x);
    int64_t est = cap;
    for (uint32_t j = 0; j < shape.depth; ++j) est = std::min(est, step[end.hash().Cell(j, x)]);
    for (uint32_t j = 0; j < shape.depth; ++j) {
      int64_t& c = step[end.hash().Cell(j, x)];
      c = std::min(cap, std::max(c, est + 1));
    }
  }
  const uint64_t at = end.Saturate(cap);
  EXPECT_GT(at, 0u) << "the test must reach the cap";
  EXPECT_EQ(end.cells(), step) << "seed " << seed;
}

TEST(CountMinTest, SketchFilesRoundTripAndBadOnesNameTheFile) {
  LocalSketch s({100, 3}, 7);
  for (uint64_t x = 0; x < 1000; ++x) s.Add(x * 31, static_cast<int64_t>(x % 5));
  const std::string path = TempPath("sketch");
  WriteSketch(path, s.hash().shape(), 7, s.cells());
  const LocalSketch r = ReadSketch(path);
  EXPECT_EQ(r.cells(), s.cells());
  EXPECT_EQ(r.hash().seed(), 7u);
  {
    std::ofstream f(path, std::ios::app | std::ios::binary);
    f << "x";
  }
  try {
    ReadSketch(path);
    ADD_FAILURE() << "a longer file was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

// Cut into parts of any size, a text file yields every item exactly once, in order, whatever
// the part boundaries cut through (tokens, lines, runs of delimiters, CRLF).
TEST(CountMinTest, PartsOfATextFileHoldEveryItemOnce) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 rng(seed);
    std::string text;
    const char* seps[] = {" ", "\n", "  ", "\t", "\r\n", "\n\n"};
    for (int i = 0; i < 300; ++i) {
      const int len = 1 + static_cast<int>(rng() % 12);
      for (int j = 0; j < len; ++j) text += static_cast<char>('a' + rng() % 26);
      if (rng() % 3 == 0) text += ' ' + std::string(1, static_cast<char>('A' + rng() % 26));
      text += seps[rng() % 6];
    }
    if (rng() % 2) text.pop_back();  // sometimes no final delimiter
    const std::string path = TempPath("text");
    {
      std::ofstream f(path, std::ios::binary);
      f << text;
    }
    for (Format format : {Format::kTokens, Format::kLines}) {
      PartItems all;
      std::string buf;
      ReadPart(path, format, 1 << 30, 0, &buf, &all);
      const std::vector<std::string> want = Texts(all, format);
      ASSERT_GT(want.size(), 100u);
      const uint64_t part_bytes = 1 + rng() % 200;
      const int parts = CountParts(path, format, part_bytes);
      std::vector<std::string> got;
      for (int p = 0; p < parts; ++p) {
        PartItems items;
        ReadPart(path, format, part_bytes, p, &buf, &items);
        for (auto& v : Texts(items, format)) got.push_back(v);
      }
      EXPECT_EQ(got, want) << "seed " << seed << " part_bytes " << part_bytes << " format "
                           << (format == Format::kLines ? "lines" : "tokens");
    }
    std::remove(path.c_str());
  }
}

// A pipe (stdin) read in chunks of any size yields the items of the whole stream, in order,
// also when an item is longer than a chunk.
TEST(CountMinTest, ChunksOfAPipeHoldEveryItemOnce) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    std::string text;
    for (int i = 0; i < 200; ++i) {
      const int len = rng() % 10 == 0 ? 300 : 1 + static_cast<int>(rng() % 12);
      for (int j = 0; j < len; ++j) text += static_cast<char>('a' + rng() % 26);
      text += rng() % 4 ? " " : (rng() % 2 ? "\n" : " \r\n\n");
    }
    const std::string path = TempPath("pipe");
    {
      std::ofstream f(path, std::ios::binary);
      f << text;
    }
    for (Format format : {Format::kTokens, Format::kLines}) {
      std::string buf;
      PartItems all;
      ReadPart(path, format, 1 << 30, 0, &buf, &all);
      const std::vector<std::string> want = Texts(all, format);
      const uint64_t chunk = 1 + rng() % 100;
      const int fd = open(path.c_str(), O_RDONLY);
      ASSERT_GE(fd, 0);
      ChunkReader r(fd, format, chunk);
      std::vector<std::string> got;
      PartItems items;
      while (r.Next(&buf, &items)) {
        for (auto& v : Texts(items, format)) got.push_back(v);
      }
      close(fd);
      EXPECT_EQ(got, want) << "seed " << seed << " chunk " << chunk;
    }
    std::remove(path.c_str());
  }
}

TEST(CountMinTest, U64FilesSplitOnRecordsAndRefuseAPartialOne) {
  const std::string path = TempPath("u64");
  std::vector<uint64_t> ids(1000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i * i + 3;
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(ids.data()), ids.size() * 8);
  }
  std::vector<uint64_t> got;
  const int parts = CountParts(path, Format::kU64, 100);  // 96-byte parts: 12 ids each
  EXPECT_EQ(parts, 84);
  std::string buf;
  for (int p = 0; p < parts; ++p) {
    PartItems items;
    ReadPart(path, Format::kU64, 100, p, &buf, &items);
    got.insert(got.end(), items.ids.begin(), items.ids.end());
  }
  EXPECT_EQ(got, ids);
  {
    std::ofstream f(path, std::ios::app | std::ios::binary);
    f << "xyz";
  }
  try {
    CountParts(path, Format::kU64, 100);
    ADD_FAILURE() << "a partial record was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("8000"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

// SpaceSaving holds every item seen more than N / capacity times, and its counts bound them
// from above.
TEST(CountMinTest, SpaceSavingHoldsEveryFrequentItem) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    SpaceSaving ss(50);
    Zipf z(5000, 1.2, seed);
    std::map<uint64_t, uint64_t> exact;
    const uint64_t n = 100000;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t x = z.Next();
      exact[x]++;
      ss.Add(x, std::to_string(x));
    }
    std::map<uint64_t, uint64_t> held;
    for (const auto& e : ss.Top(50)) held[e.id] = e.count;
    for (const auto& [x, c] : exact) {
      if (c > n / 50) {
        ASSERT_TRUE(held.count(x)) << "item " << x << " seen " << c << " times; seed " << seed;
        EXPECT_GE(held[x], c);
      }
    }
  }
}

// The generator follows Zipf's law: rank frequencies against k^-s over the head.
TEST(CountMinTest, ZipfRanksFollowThePowerLaw) {
  const uint64_t n = 100000;
  const double s = 1.1;
  Zipf z(n, s, 42);
  std::vector<uint64_t> count(n + 1, 0);
  const int draws = 1000000;
  for (int i = 0; i < draws; ++i) {
    const uint64_t k = z.Next();
    ASSERT_GE(k, 1u);
    ASSERT_LE(k, n);
    count[k]++;
  }
  double hn = 0;
  for (uint64_t k = 1; k <= n; ++k) hn += std::pow(static_cast<double>(k), -s);
  for (uint64_t k : {1, 2, 3, 5, 10, 20}) {
    const double want = draws * std::pow(static_cast<double>(k), -s) / hn;
    EXPECT_NEAR(count[k], want, 5 * std::sqrt(want)) << "rank " << k << " (seed 42)";
  }
}

TEST(CountMinTest, CellKeysAreSortedAndSpreadOverTheKeySpace) {
  const uint64_t n = 1000;
  for (uint64_t i = 1; i < n; ++i) ASSERT_LT(CellKey(i - 1, n), CellKey(i, n));
  EXPECT_LT(CellKey(n - 1, n), ps::kMaxKey);
  EXPECT_GT(CellKey(n - 1, n), ps::kMaxKey / 10 * 9);
}

}  // namespace
}  // namespace countmin
