// apps/lda on its own: the sampler's chain against the exact conditional (chi-square), the
// count tables, the planted-topic recovery and the agreement with plain collapsed Gibbs, the
// evaluation functions, and the readers' errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <string>

#include "lda/alias.h"
#include "lda/corpus.h"
#include "lda/doc_counts.h"
#include "lda/eval.h"
#include "lda/recovery.h"
#include "lda/reference.h"
#include "lda/sampler.h"
#include "lda/shard.h"

namespace lda {
namespace {

Hyper MakeHyper(uint32_t topics, uint32_t words, double alpha, double beta) {
  Hyper h;
  h.topics = topics;
  h.words = words;
  h.alpha = alpha;
  h.beta = beta;
  return h;
}

// Pearson's statistic of observed counts against probabilities (cells with expectation >= 5).
double ChiSquare(const std::vector<uint64_t>& seen, const std::vector<double>& p, uint64_t n,
                 int* dof) {
  double x2 = 0;
  *dof = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = p[i] * static_cast<double>(n);
    if (e < 5) continue;
    x2 += (static_cast<double>(seen[i]) - e) * (static_cast<double>(seen[i]) - e) / e;
    ++*dof;
  }
  return x2;
}

// Upper 0.1% point of chi-square with k degrees of freedom (Wilson-Hilferty).
double ChiSquareCritical(int k) {
  const double z = 3.09, a = 2.0 / (9.0 * k);
  return k * std::pow(1 - a + z * std::sqrt(a), 3);
}

TEST(AliasTest, DrawsFollowTheWeights) {
  const uint64_t seed = 11;
  const uint32_t values[5] = {3, 9, 4, 7, 1};
  const float weights[5] = {0.5f, 3.0f, 0.0f, 1.25f, 0.25f};
  AliasCell cells[5];
  BuildAlias(values, weights, 5, cells);
  AliasTable a;  // over the indices 0..4
  a.Build(weights, 5);
  Rng r(seed);
  std::vector<uint64_t> seen(10, 0), by_index(10, 0);
  const uint64_t n = 200000;
  for (uint64_t i = 0; i < n; ++i) {
    seen[DrawAlias(cells, 5, &r)]++;
    by_index[values[a.Draw(&r)]]++;
  }
  std::vector<double> p(10, 0);
  for (int i = 0; i < 5; ++i) p[values[i]] = weights[i] / 5.0;
  for (const auto* s : {&seen, &by_index}) {
    EXPECT_EQ((*s)[4], 0u) << "a zero weight is never drawn, seed " << seed;
    int dof = 0;
    const double x2 = ChiSquare(*s, p, n, &dof);
    EXPECT_LT(x2, ChiSquareCritical(dof)) << "seed " << seed;
  }
}

// A block's document counts agree with a plain map through growth, dense rows and counts that
// return to zero.
TEST(DocCountsTest, CountsAgreeWithAMap) {
  for (uint32_t K : {20u, 1000u}) {
    const uint64_t seed = 90 + K;
    Rng r(seed);
    DocCounts dc;
    const uint32_t docs = 40;
    dc.Reset(K, docs);
    std::map<std::pair<uint32_t, uint32_t>, int32_t> want;
    for (uint32_t d = 0; d < docs; ++d) dc.AddRow(d, d % 5);  // rows too small: they grow
    for (int op = 0; op < 20000; ++op) {
      const uint32_t d = r.Below(docs), t = r.Below(d % 2 ? K : 8);
      int32_t& n = want[{d, t}];
      const int32_t delta = n > 0 && r.Uniform() < 0.4 ? -1 : 1;
      dc.Add(d, t, delta);
      n += delta;
      ASSERT_EQ(dc.Get(d, t), n) << "K " << K << " doc " << d << " topic " << t << ", seed "
                                 << seed;
    }
    for (uint32_t d = 0; d < docs; ++d) {
      for (uint32_t t = 0; t < K; ++t) {
        const auto it = want.find({d, t});
        ASSERT_EQ(dc.Get(d, t), it == want.end() ? 0 : it->second) << "K " << K << " doc " << d;
      }
    }
  }
  EXPECT_TRUE(DocCounts::Fits(1000, 65534));
  EXPECT_FALSE(DocCounts::Fits(1000, 70000));
  EXPECT_FALSE(DocCounts::Fits(70000, 10));
}

TEST(WordTopicTableTest, DenseAndSparseRowsCountAlike) {
  WordTopicTable t;
  t.Reset(200, 4);
  t.AddDense(1);
  t.AddSparse(3, 6);
  EXPECT_FALSE(t.Has(0));
  EXPECT_TRUE(t.IsDense(1));
  EXPECT_FALSE(t.IsDense(3));
  for (uint32_t w : {1u, 3u}) {
    t.Add(w, 49, 2);
    t.Add(w, 17, 1);
    t.Add(w, 33, 5);
    t.Add(w, 17, -1);  // back to zero: not listed
    t.Add(w, 1, 1);
    EXPECT_EQ(t.Get(w, 49), 2);
    EXPECT_EQ(t.Get(w, 17), 0);
    EXPECT_EQ(t.Get(w, 0), 0);
    std::vector<std::pair<uint32_t, int32_t>> got;
    t.ForEach(w, [&](uint32_t x, int32_t n) { got.emplace_back(x, n); });
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, (std::vector<std::pair<uint32_t, int32_t>>{{1, 1}, {33, 5}, {49, 2}}));
  }
  // A hash row that fills up moves to a larger one, keeping every count.
  for (uint32_t x = 2; x < 20; ++x) t.Add(3, x, static_cast<int32_t>(x));
  EXPECT_FALSE(t.IsDense(3));
  for (uint32_t x = 2; x < 20; ++x) EXPECT_EQ(t.Get(3, x), static_cast<int32_t>(x));
  EXPECT_EQ(t.Get(3, 33), 5);
  EXPECT_EQ(t.Get(3, 49), 2);
  EXPECT_EQ(t.Get(3, 20), 0);
  // Beyond the bytes of a dense row (200 counts: 800 bytes, 100 hash cells) it turns dense.
  for (uint32_t x = 20; x < 200; ++x) t.Add(3, x, 1);
  EXPECT_TRUE(t.IsDense(3));
  EXPECT_EQ(t.Get(3, 33), 6);
  EXPECT_EQ(t.Get(3, 17), 17);
  int64_t sum = 0;
  t.ForEach(3, [&](uint32_t, int32_t n) { sum += n; });
  EXPECT_EQ(sum, 189 + 1 + 5 + 2 + 180);
}

// What a worker pushes: live minus snapshot, for rows that kept the snapshot's layout, rows
// that grew (or turned dense) since, and dense rows, against a count-by-count comparison; for
// a plain copy and for a fork (whose shared layout is not checked cell by cell), and with
// topics new to the fork's base after the fork (they may take cells the fork gave to others).
class DifferencesTest : public ::testing::TestWithParam<int> {};

TEST_P(DifferencesTest, DifferencesAreWhatChanged) {
  const int mode = GetParam();  // 0 copy, 1 fork, 2 fork and then new topics in the base
  const uint64_t seed = 12;
  Rng r(seed);
  const uint32_t K = 300, V = 6;
  WordTopicTable snap;
  snap.Reset(K, V);
  for (uint32_t w = 0; w < V; ++w) snap.AddRow(w, w == 5 ? 200 : 4 + w);
  for (uint32_t w = 0; w < V; ++w) {
    for (uint32_t j = 0; j < 3 + w; ++j)
      snap.Add(w, r.Below(K), 1 + static_cast<int32_t>(r.Below(4)));
  }
  WordTopicTable live;
  if (mode == 0) {
    live = snap;
  } else {
    live.ForkFrom(&snap);
  }
  // Row 0 unchanged; rows 1-2 a few moves; row 3 new topics until it grows; row 4 turns dense.
  for (uint32_t w = 1; w < V; ++w) {
    const uint32_t moves = w == 3 ? 40 : w == 4 ? 120 : 6;
    for (uint32_t j = 0; j < moves; ++j) live.Add(w, r.Below(K), 1);
  }
  snap.ForEach(2, [&](uint32_t t, int32_t n) { live.Add(2, t, -n); });  // back to zero
  if (mode == 2) {
    // Row 1 of the base gains the topics live gained there, shifted by one (the next cell).
    std::vector<uint32_t> gained;
    live.ForEach(1, [&](uint32_t t, int32_t) {
      if (snap.Get(1, t) == 0 && snap.Get(1, t + 1) == 0 && t + 1 < K) gained.push_back(t + 1);
    });
    ASSERT_FALSE(gained.empty());
    for (uint32_t t : gained) snap.Add(1, t, 5);
  }
  EXPECT_TRUE(live.IsDense(4) && !snap.IsDense(4)) << "seed " << seed;
  for (uint32_t w = 0; w < V; ++w) {
    std::map<uint32_t, int32_t> got, want;
    live.ForEachDifference(w, snap, [&](uint32_t t, int32_t d) {
      EXPECT_EQ(got.count(t), 0u) << "topic " << t << " twice";
      got[t] = d;
    });
    for (uint32_t t = 0; t < K; ++t) {
      if (live.Get(w, t) != snap.Get(w, t)) want[t] = live.Get(w, t) - snap.Get(w, t);
    }
    EXPECT_EQ(got, want) << "word " << w << ", seed " << seed << ", mode " << mode;
  }
}

INSTANTIATE_TEST_SUITE_P(CopyForkAndBaseInserts, DifferencesTest, ::testing::Values(0, 1, 2));

TEST(WordTopicTableTest, RowsAreHashedOrDenseByWhatTakesLessMemory) {
  WordTopicTable t;
  t.Reset(1000, 3);
  t.AddRow(0, 10);   // 32 cells of 8 bytes against 4000 bytes
  t.AddRow(1, 300);  // 1024 cells: dense is smaller
  t.AddRow(2, 0);
  EXPECT_FALSE(t.IsDense(0));
  EXPECT_TRUE(t.IsDense(1));
  EXPECT_FALSE(t.IsDense(2));
  t.Add(2, 999, 7);
  EXPECT_EQ(t.Get(2, 999), 7);
}

// The counts around one token, without it (primed) and with it at topic s: one document that
// holds it at position i, its word's live counts and a snapshot (fresh or stale: other
// workers' updates not seen yet) that both hold it.
struct SmallState {
  Hyper h;
  uint32_t w = 2;
  size_t i = 0;
  std::vector<int32_t> nd0, nw0, snap0;  // without the token
  std::vector<int64_t> totals0, snap_totals0;
  std::vector<uint32_t> dz;  // the document's topics; dz[i] is set per s
  bool dense = false;
  // With the token at s.
  WordTopicTable live, snap;
  std::vector<int64_t> totals, snap_totals;
  std::vector<int32_t> nd;
  void Place(uint32_t s) {
    const uint32_t K = h.topics;
    live.Reset(K, 5);
    snap.Reset(K, 5);
    if (dense) {
      live.AddDense(w);
      snap.AddDense(w);
    } else {
      live.AddSparse(w, K);
      snap.AddSparse(w, K);
    }
    for (uint32_t t = 0; t < K; ++t) {
      if (nw0[t] + (t == s)) live.Add(w, t, nw0[t] + (t == s));
      if (snap0[t] + (t == s)) snap.Add(w, t, snap0[t] + (t == s));
    }
    totals = totals0;
    snap_totals = snap_totals0;
    totals[s]++;
    snap_totals[s]++;
    nd = nd0;
    nd[s]++;
    dz[i] = s;
  }
};

SmallState RandomState(uint64_t seed, bool dense, bool stale) {
  Rng r(seed);
  SmallState st;
  st.dense = dense;
  st.h.topics = 3 + r.Below(8);
  st.h.words = 5;
  st.h.alpha = 0.05 + r.Uniform();
  st.h.beta = 0.01 + r.Uniform() * 0.5;
  const uint32_t K = st.h.topics;
  st.nd0.assign(K, 0);
  const uint32_t len = 1 + r.Below(12);
  st.i = r.Below(len);
  for (uint32_t j = 0; j < len; ++j) {
    st.dz.push_back(r.Below(K));
    if (j != st.i) st.nd0[st.dz.back()]++;
  }
  st.nw0.assign(K, 0);
  st.snap0.assign(K, 0);
  st.totals0.assign(K, 0);
  st.snap_totals0.assign(K, 0);
  for (uint32_t t = 0; t < K; ++t) {
    st.nw0[t] = static_cast<int32_t>(r.Below(6)) * (r.Below(3) == 0);
    st.totals0[t] = st.nw0[t] + r.Below(40);
    st.snap0[t] = stale ? static_cast<int32_t>(r.Below(5)) : st.nw0[t];
    st.snap_totals0[t] = stale ? st.snap0[t] + r.Below(40) : st.totals0[t];
  }
  return st;
}

// One token's update leaves its conditional invariant: with its topic s drawn from the exact
// conditional (and the counts holding it there), the topic after the update follows the same
// distribution, for the step counts the app uses. Proposals that depend on where the token
// stood (the snapshot and the document hold it) make this fail unless the acceptance accounts
// for it.
// kept: the word's proposal was built in an earlier block of the pass and is kept into a block
// whose totals differ: it must go on using the totals it was built with.
void ExpectUpdatesLeaveTheConditionalInvariant(bool kept) {
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    const bool dense = seed % 2, stale = seed % 3 != 0;
    const int steps = 1 + static_cast<int>(seed % 2);
    SmallState st = RandomState(seed, dense, stale);
    const uint32_t K = st.h.topics;
    st.Place(0);
    const std::vector<double> p =
        ExactConditional(st.h, st.w, 0, st.nd.data(), st.live, st.totals.data());
    // One sampler per starting topic, over the counts that hold the token there.
    std::vector<SmallState> at(K, st);
    std::vector<std::unique_ptr<Sampler>> samplers;
    std::vector<std::vector<int64_t>> later(K);
    for (uint32_t s = 0; s < K; ++s) {
      at[s].Place(s);
      samplers.emplace_back(new Sampler(st.h, steps, seed * 7919 + s));
      Counts c;
      c.live = &at[s].live;
      c.snapshot = &at[s].snap;
      c.totals = at[s].totals.data();
      c.snapshot_totals = at[s].snap_totals.data();
      samplers.back()->BeginPass(c);
      if (!kept) continue;
      SmallState& a = at[s];
      samplers.back()->Chain(a.w, s, a.i, a.nd.data(), a.dz.data(), a.dz.size(), steps);
      for (uint32_t t = 0; t < K; ++t) later[s].push_back(a.totals[t] * 3 + 50 + 13 * t);
      c.snapshot = &a.live;
      c.snapshot_totals = later[s].data();
      samplers.back()->BeginPass(c, false);
    }
    Rng r(seed);
    std::vector<uint64_t> seen(K, 0);
    const uint64_t n = 60000;
    for (uint64_t j = 0; j < n; ++j) {
      double u = r.Uniform();
      uint32_t s = 0;
      while (s + 1 < K && u >= p[s]) u -= p[s++];
      SmallState& a = at[s];
      seen[samplers[s]->Chain(a.w, s, a.i, a.nd.data(), a.dz.data(), a.dz.size(), steps)]++;
    }
    int dof = 0;
    const double x2 = ChiSquare(seen, p, n, &dof);
    ASSERT_GT(dof, 0) << "seed " << seed;
    EXPECT_LT(x2, ChiSquareCritical(dof))
        << "seed " << seed << " K " << K << (dense ? " dense" : " sparse")
        << (stale ? " stale" : " fresh") << " steps " << steps << (kept ? " kept" : "");
  }
}

TEST(SamplerTest, AnUpdateLeavesTheExactConditionalInvariant) {
  ExpectUpdatesLeaveTheConditionalInvariant(false);
}

TEST(SamplerTest, AProposalKeptFromAnEarlierBlockStaysExact) {
  ExpectUpdatesLeaveTheConditionalInvariant(true);
}

// A chain that never moves, or moves by the proposal alone, fails the same check: the test can
// tell a right sampler from a wrong one.
TEST(SamplerTest, TheChiSquareCheckRejectsAWrongDistribution) {
  SmallState st = RandomState(2, true, true);
  st.Place(0);
  const std::vector<double> p =
      ExactConditional(st.h, st.w, 0, st.nd.data(), st.live, st.totals.data());
  std::vector<double> wrong(p.size());
  for (size_t i = 0; i < p.size(); ++i) wrong[i] = (p[i] + 1.0 / p.size()) / 2;
  Rng r(5);
  std::vector<uint64_t> seen(p.size(), 0);
  const uint64_t n = 40000;
  for (uint64_t i = 0; i < n; ++i) {
    double u = r.Uniform();
    size_t x = 0;
    while (x + 1 < wrong.size() && u >= wrong[x]) u -= wrong[x++];
    seen[x]++;
  }
  int dof = 0;
  const double x2 = ChiSquare(seen, p, n, &dof);
  ASSERT_GT(dof, 0);
  EXPECT_GT(x2, ChiSquareCritical(dof));
}

// The exact collapsed posterior of every assignment z of a tiny corpus (K^N states, z read as
// base-K digits, token 0 the lowest): p(z) ~ prod_dk G(n_dk + alpha) prod_wk G(n_wk + beta) /
// prod_k G(n_k + V beta).
std::vector<double> ExactJoint(const Hyper& h, const Corpus& c) {
  const size_t n = c.tokens(), K = h.topics;
  size_t states = 1;
  for (size_t i = 0; i < n; ++i) states *= K;
  std::vector<double> logp(states);
  std::vector<uint32_t> z(n);
  for (size_t st = 0; st < states; ++st) {
    for (size_t i = 0, x = st; i < n; ++i, x /= K) z[i] = static_cast<uint32_t>(x % K);
    double lp = 0;
    std::vector<double> nk(K, 0);
    std::vector<std::vector<double>> nwk(h.words, std::vector<double>(K, 0));
    for (size_t d = 0; d < c.docs(); ++d) {
      std::vector<double> ndk(K, 0);
      for (uint64_t i = c.offsets[d]; i < c.offsets[d + 1]; ++i) {
        ndk[z[i]]++;
        nwk[c.words[i]][z[i]]++;
        nk[z[i]]++;
      }
      for (size_t k = 0; k < K; ++k) lp += std::lgamma(ndk[k] + h.alpha);
    }
    for (size_t k = 0; k < K; ++k) {
      for (uint32_t w = 0; w < h.words; ++w) lp += std::lgamma(nwk[w][k] + h.beta);
      lp -= std::lgamma(nk[k] + h.words * h.beta);
    }
    logp[st] = lp;
  }
  const double top = *std::max_element(logp.begin(), logp.end());
  double sum = 0;
  for (auto& v : logp) sum += v = std::exp(v - top);
  for (auto& v : logp) v /= sum;
  return logp;
}

// A whole sweep (Shard::Pass over its blocks, tokens visited word by word, the documents'
// counts kept as the block goes) leaves the exact joint posterior invariant, as far as 60 000
// chains can tell: chains started from exact draws end, after one sweep each, distributed by
// the same law. Stale proposals would break it: with proposals rebuilt only at block
// boundaries, one block per pass failed with chi-square 838 (0.1% point 748). So does leaving
// the documents' counts unchanged as tokens move (chi-square 1652 and 3126).
TEST(SamplerTest, ASweepLeavesTheExactJointPosteriorInvariant) {
  Corpus c;
  const uint32_t d0[] = {0, 1, 0, 2}, d1[] = {1, 2};
  c.Add(d0, 4);
  c.Add(d1, 2);
  const Hyper h = MakeHyper(3, 3, 0.3, 0.2);
  const std::vector<double> p = ExactJoint(h, c);
  for (int blocks = 1; blocks <= 2; ++blocks) {
    const uint64_t seed = 40 + blocks;
    Rng r(seed);
    Sampler sampler(h, blocks, seed);  // 1 and 2 MH cycles
    std::vector<uint64_t> seen(p.size(), 0);
    const uint64_t n = 60000;
    std::vector<uint32_t> z(c.tokens());
    for (uint64_t j = 0; j < n; ++j) {
      double u = r.Uniform();
      size_t st = 0;
      while (st + 1 < p.size() && u >= p[st]) u -= p[st++];
      for (size_t i = 0, x = st; i < z.size(); ++i, x /= h.topics) z[i] = x % h.topics;
      Shard shard(h, c);
      shard.z() = z;
      shard.LayoutOwn();
      shard.StartPass();
      shard.Pass(&sampler, blocks);
      size_t out = 0;
      for (size_t i = z.size(); i-- > 0;) out = out * h.topics + shard.z()[i];
      seen[out]++;
    }
    int dof = 0;
    const double x2 = ChiSquare(seen, p, n, &dof);
    ASSERT_GT(dof, 0) << "seed " << seed;
    EXPECT_LT(x2, ChiSquareCritical(dof)) << "seed " << seed << " blocks " << blocks;
  }
}

// A corpus drawn from planted topics: K topics, each on its own band of words (with a little
// mass everywhere), documents mixing all of them.
struct Planted {
  Corpus corpus;
  std::vector<std::vector<double>> topics;  // K x V
};

Planted MakePlanted(uint32_t K, uint32_t V, size_t docs, uint64_t seed) {
  Rng r(seed);
  Planted p;
  p.topics.assign(K, std::vector<double>(V, 0.0));
  for (uint32_t k = 0; k < K; ++k) {
    double sum = 0;
    for (uint32_t w = 0; w < V; ++w) {
      const bool band = w % K == k;
      p.topics[k][w] = band ? 1.0 + r.Uniform() : 0.002;
      sum += p.topics[k][w];
    }
    for (auto& x : p.topics[k]) x /= sum;
  }
  // Each document mixes every topic by proportions drawn from a symmetric Dirichlet(1) (as
  // normalised exponentials).
  std::vector<uint32_t> doc;
  std::vector<double> theta(K);
  for (size_t d = 0; d < docs; ++d) {
    double tsum = 0;
    for (auto& x : theta) tsum += (x = -std::log(1.0 - r.Uniform()));
    const size_t len = 60 + r.Below(80);
    doc.clear();
    for (size_t i = 0; i < len; ++i) {
      double u = r.Uniform() * tsum;
      uint32_t k = 0;
      while (k + 1 < K && u >= theta[k]) u -= theta[k++];
      const auto& topic = p.topics[k];
      u = r.Uniform();
      uint32_t w = 0;
      while (w + 1 < V && u >= topic[w]) u -= topic[w++];
      doc.push_back(w);
    }
    p.corpus.Add(doc.data(), doc.size());
  }
  return p;
}

double Cosine(const std::vector<double>& a, const float* b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

// Serial MH training: one shard holding everything, its snapshot refreshed every pass.
struct SerialRun {
  Shard shard;
  Sampler sampler;
  SerialRun(const Hyper& h, const Corpus& c, uint64_t seed, int mh_steps = 2)
      : shard(h, c), sampler(h, mh_steps, seed + 1) {
    shard.RandomTopics(seed);
    Refresh();
  }
  void SetTopics(const std::vector<uint32_t>& z) {
    shard.z() = z;
    Refresh();
  }
  void Refresh() {
    shard.LayoutOwn();
    shard.StartPass();
  }
  int blocks = 10;
  void Pass() {
    shard.Pass(&sampler, blocks);
    Refresh();
  }
  double LogLikelihoodPerToken(const Hyper& h) const {
    const Corpus& c = shard.docs();
    double ll = DocLogLikelihood(c, 0, c.docs(), shard.z().data(), h.topics, h.alpha) +
                WordRowsLogLikelihood(shard.live(), shard.words(), h.beta) +
                TotalsLogLikelihood(shard.totals().data(), h.topics, h.words, h.beta);
    return ll / static_cast<double>(c.tokens());
  }
};

TEST(LdaTrainingTest, PlantedTopicsAreRecovered) {
  const uint64_t seed = 21;
  const uint32_t K = 8, V = 400;
  Planted p = MakePlanted(K, V, 1000, seed);
  const Hyper h = MakeHyper(K, V, 0.1, 0.01);
  // Collapsed Gibbs leaves a mode with two topics merged (and one split) only slowly: with two
  // MH cycles per token seeds 21 and 23 still sat in one after 400 passes; with four, seeds 21
  // to 26 all reached 0.95 within 100.
  SerialRun run(h, p.corpus, seed, 4);
  for (int i = 0; i < 100; ++i) run.Pass();
  // Learned p(w | t) from the counts.
  std::vector<float> phi(static_cast<size_t>(K) * V);
  for (uint32_t t = 0; t < K; ++t) {
    for (uint32_t w = 0; w < V; ++w) {
      phi[t * V + w] =
          static_cast<float>((run.shard.live().Has(w) ? run.shard.live().Get(w, t) : 0) + h.beta) /
          static_cast<float>(run.shard.totals()[t] + V * h.beta);
    }
  }
  for (uint32_t k = 0; k < K; ++k) {
    double best = 0;
    for (uint32_t t = 0; t < K; ++t) best = std::max(best, Cosine(p.topics[k], &phi[t * V], V));
    EXPECT_GE(best, 0.9) << "planted topic " << k << ", seed " << seed;
  }
}

// After every pass the live counts equal a recount of the assignments (the count invariant),
// also for rare words whose sparse rows must take a new topic for every token that moves.
TEST(LdaTrainingTest, LiveCountsEqualARecountAfterEveryPass) {
  const uint64_t seed = 17;
  Rng r(seed);
  Corpus c;
  std::vector<uint32_t> doc;
  for (int d = 0; d < 200; ++d) {
    doc.clear();
    for (int i = 0; i < 30; ++i)
      doc.push_back(r.Uniform() < 0.5 ? r.Below(20) : 20 + r.Below(2000));
    c.Add(doc.data(), doc.size());
  }
  const Hyper h = MakeHyper(64, 2020, 0.5, 0.01);
  Shard s(h, c);
  s.RandomTopics(seed);
  Sampler sampler(h, 2, seed);
  for (int pass = 0; pass < 6; ++pass) {
    s.LayoutOwn();
    s.StartPass();
    ASSERT_NO_THROW(s.Pass(&sampler)) << "pass " << pass << ", seed " << seed;
    std::vector<std::vector<int32_t>> recount(h.words, std::vector<int32_t>(h.topics, 0));
    std::vector<int64_t> totals(h.topics, 0);
    for (size_t i = 0; i < c.tokens(); ++i) {
      recount[c.words[i]][s.z()[i]]++;
      totals[s.z()[i]]++;
    }
    for (uint32_t w : s.words()) {
      for (uint32_t t = 0; t < h.topics; ++t) {
        ASSERT_EQ(s.live().Get(w, t), recount[w][t]) << "word " << w << " topic " << t;
      }
    }
    EXPECT_EQ(s.totals(), totals) << "pass " << pass;
  }
}

// A word's hash row copied into a dense row for a run of its tokens must read as the row
// itself: the copy follows every move the sampler makes and is cleared for the next word. So
// samplers that copy every row, some rows and none walk the same chain from one seed. (Without
// the copy's updates as tokens move, or with a copy left uncleared, they part within a pass.)
TEST(SamplerTest, RowsCopiedForAWordsRunReadAsTheTable) {
  const uint64_t seed = 23;
  Rng r(seed);
  Corpus c;
  std::vector<uint32_t> doc;
  for (int d = 0; d < 300; ++d) {
    doc.clear();
    // Frequent words (long runs, rows that turn dense) and rare ones (short runs, hash rows).
    for (int i = 0; i < 40; ++i) {
      doc.push_back(r.Uniform() < 0.4 ? r.Below(10) : 10 + r.Below(1500));
    }
    c.Add(doc.data(), doc.size());
  }
  const Hyper h = MakeHyper(128, 1510, 0.3, 0.05);
  std::vector<std::vector<uint32_t>> ends;
  for (uint64_t copy : {uint64_t{0}, uint64_t{4}, uint64_t{1} << 40}) {
    Shard s(h, c);
    s.RandomTopics(seed);
    Sampler sampler(h, 2, seed);
    sampler.set_copy_cells_per_token(copy);
    for (int pass = 0; pass < 4; ++pass) {
      s.LayoutOwn();
      s.StartPass();
      s.Pass(&sampler, 3);
    }
    ends.push_back(s.z());
  }
  EXPECT_TRUE(ends[0] == ends[1]) << "seed " << seed << ": copying some rows changed the chain";
  EXPECT_TRUE(ends[0] == ends[2]) << "seed " << seed << ": copying every row changed the chain";
}

// The MH sampler samples the same posterior as plain collapsed Gibbs: started from one state
// of the reference chain, both hold the same log-likelihood on average (within noise). (From
// separate random starts both can sit in different local modes for hundreds of passes, topics
// merged or split, which says nothing about either sampler.) One block per pass, where stale
// proposals matter most: with proposals rebuilt only at block boundaries the chain was 0.046 to
// 0.056 nats per token more greedy on each of these six seeds; rebuilt as a word's tokens go,
// the mean is within noise (seeds spread by about 0.005).
TEST(LdaTrainingTest, MetropolisHastingsAgreesWithPlainGibbs) {
  double mean = 0;
  std::string diffs;
  const int seeds = 6;
  for (uint64_t seed = 33; seed < 33 + seeds; ++seed) {
    Planted p = MakePlanted(10, 300, 300, seed);
    const Hyper h = MakeHyper(10, 300, 0.2, 0.05);
    ReferenceGibbs ref(p.corpus, h, seed);
    const double start = ref.LogLikelihoodPerToken();
    for (int i = 0; i < 400; ++i) ref.Pass();
    SerialRun mh(h, p.corpus, seed);
    mh.blocks = 1;
    mh.SetTopics(ref.z());
    double mh_ll = 0, ref_ll = 0;
    const int keep = 100;
    for (int i = 0; i < keep; ++i) {
      mh.Pass();
      ref.Pass();
      mh_ll += mh.LogLikelihoodPerToken(h) / keep;
      ref_ll += ref.LogLikelihoodPerToken() / keep;
    }
    EXPECT_GT(ref_ll, start + 1.0) << "the reference learned something, seed " << seed;
    mean += (mh_ll - ref_ll) / seeds;
    diffs += " " + std::to_string(seed) + ": " + std::to_string(mh_ll - ref_ll);
  }
  EXPECT_NEAR(mean, 0.0, 0.006) << "MH minus plain Gibbs per seed:" << diffs;
}

// The log-likelihood pieces the app adds up across workers equal the reference's whole.
TEST(LdaEvalTest, LogLikelihoodPiecesAddUpToTheWhole) {
  const uint64_t seed = 4;
  Planted p = MakePlanted(6, 120, 50, seed);
  const Hyper h = MakeHyper(6, 120, 0.3, 0.02);
  ReferenceGibbs ref(p.corpus, h, seed);
  ref.Pass();
  Shard s(h, p.corpus);
  s.z() = ref.z();
  s.LayoutOwn();
  s.StartPass();
  const Corpus& c = s.docs();
  const double ll = DocLogLikelihood(c, 0, c.docs() / 2, s.z().data(), 6, h.alpha) +
                    DocLogLikelihood(c, c.docs() / 2, c.docs(), s.z().data(), 6, h.alpha) +
                    WordRowsLogLikelihood(s.live(), s.words(), h.beta) +
                    TotalsLogLikelihood(s.totals().data(), 6, 120, h.beta);
  EXPECT_NEAR(ll / static_cast<double>(c.tokens()), ref.LogLikelihoodPerToken(), 1e-9);
}

// The table gives the very values lgamma does, in the table, past it and (not a count, but
// defined) below zero.
TEST(LdaEvalTest, LgammaTableHoldsLgammaItself) {
  for (double a : {0.01, 0.5, 50.0}) {
    const LgammaTable lg(a, 100);
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{100}, int64_t{101}, int64_t{5000},
                      int64_t{1} << 40}) {
      EXPECT_EQ(lg(n), std::lgamma(static_cast<double>(n) + a) - std::lgamma(a))
          << "n " << n << " a " << a;
    }
  }
  const LgammaTable big(0.1, 1 << 20);  // the table stops at 4096 counts; past it, computed
  EXPECT_EQ(big(9000), std::lgamma(9000.1) - std::lgamma(0.1));
}

TEST(LdaEvalTest, DocumentCompletionScoresOddTokensUnderTheFoldedInMixture) {
  // One topic: the mixture is certain and every odd token scores log p(w).
  Phi one;
  one.topics = 1;
  one.words = 4;
  one.p = {0.1f, 0.2f, 0.3f, 0.4f};
  Corpus c;
  const uint32_t d0[5] = {0, 3, 1, 2, 3};
  c.Add(d0, 5);
  Perplexity q = DocumentCompletion(one, c, 0.1);
  EXPECT_EQ(q.scored, 2u);
  EXPECT_EQ(q.folded, 3u);
  EXPECT_NEAR(q.log_prob, std::log(0.4) + std::log(0.3), 1e-6);
  EXPECT_NEAR(q.perplexity, std::exp(-(std::log(0.4) + std::log(0.3)) / 2), 1e-6);

  // The planted topics score better than a uniform model on documents drawn from them.
  const uint64_t seed = 9;
  Planted p = MakePlanted(5, 200, 40, seed);
  Phi truth, flat;
  truth.topics = flat.topics = 5;
  truth.words = flat.words = 200;
  for (const auto& t : p.topics) {
    for (double x : t) truth.p.push_back(static_cast<float>(x));
  }
  flat.p.assign(5 * 200, 1.0f / 200);
  const double good = DocumentCompletion(truth, p.corpus, 0.1).perplexity;
  const double bad = DocumentCompletion(flat, p.corpus, 0.1).perplexity;
  EXPECT_NEAR(bad, 200.0, 1e-3);
  EXPECT_LT(good, 0.85 * bad) << "seed " << seed;  // every document mixes all five

  // The file format the baselines use round-trips, and a short file is refused.
  const std::string path = ::testing::TempDir() + "lda_phi.bin";
  WritePhi(truth, path);
  Phi back = ReadPhi(path);
  EXPECT_EQ(back.topics, 5u);
  EXPECT_EQ(back.p, truth.p);
  std::ofstream(path) << "phi 5 200\n1234";
  EXPECT_THROW(ReadPhi(path), std::runtime_error);
}

// Worker 0 waits in a recount for a pull that must pass the barrier policy: the others catch
// up only as far as the policy needs.
TEST(LdaRecoveryTest, CatchUpFollowsTheBarrierPolicy) {
  EXPECT_EQ(CatchUpStep("bsp", 12), 12);
  EXPECT_EQ(CatchUpStep("ssp:1", 12), 11);
  EXPECT_EQ(CatchUpStep("ssp:4", 3), 0);
  EXPECT_EQ(CatchUpStep("asp", 12), 0);
  EXPECT_EQ(CatchUpStep("psp:3:2", 12), 10);
  EXPECT_EQ(CatchUpStep("backup:1", 12), 12);
}

// The recount's counts: those of the assignments of the documents listed, whatever the order
// of the words, and a shard built from them holds the same assignments.
TEST(LdaRecoveryTest, CountsOfAssignmentsAndPartsCoverTheCorpus) {
  Corpus all;
  const std::vector<std::vector<uint32_t>> docs = {{0, 1, 1}, {2}, {}, {1, 2, 0, 0}, {2, 2}};
  for (const auto& d : docs) all.Add(d.data(), d.size());
  std::vector<uint64_t> covered;
  for (int p = 0; p < 3; ++p) {
    for (uint64_t d : PartDocs(all.docs(), p, 3)) covered.push_back(d);
  }
  EXPECT_EQ(covered, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
  const std::vector<uint64_t> ids = {0, 3, 4};
  const std::vector<uint32_t> z = {0, 1, 1, /**/ 1, 0, 2, 0, /**/ 2, 2};
  Model m;
  m.topics = 3;
  m.words = 3;
  m.totals.assign(3, 0);
  m.rows.resize(3);
  AddCounts(all, ids, z.data(), &m);
  using Row = std::vector<std::pair<uint32_t, int64_t>>;
  EXPECT_EQ(m.rows[0], (Row{{0, 2}, {2, 1}}));
  EXPECT_EQ(m.rows[1], (Row{{1, 3}}));
  EXPECT_EQ(m.rows[2], (Row{{0, 1}, {2, 2}}));
  EXPECT_EQ(m.totals, (std::vector<int64_t>{3, 3, 3}));
  // Adding more documents merges into the rows in topic order.
  const std::vector<uint64_t> one = {1};
  const std::vector<uint32_t> z1 = {1};
  AddCounts(all, one, z1.data(), &m);
  EXPECT_EQ(m.rows[2], (Row{{0, 1}, {1, 1}, {2, 2}}));
  EXPECT_EQ(m.totals, (std::vector<int64_t>{3, 4, 3}));
  Hyper h;
  h.topics = 3;
  h.words = 3;
  const Shard s = ShardOf(h, all, ids, z);
  EXPECT_EQ(s.z(), z);
  EXPECT_EQ(s.doc_ids(), ids);
  EXPECT_EQ(s.docs().tokens(), 9u);
}

}  // namespace
}  // namespace lda
