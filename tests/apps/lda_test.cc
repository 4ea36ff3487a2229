// apps/lda on its own: the sampler's chain against the exact conditional (chi-square), the
// count tables, the planted-topic recovery and the agreement with plain collapsed Gibbs, the
// evaluation functions, and the readers' errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>

#include "lda/alias.h"
#include "lda/corpus.h"
#include "lda/eval.h"
#include "lda/reference.h"
#include "lda/sampler.h"
#include "lda/shard.h"

namespace lda {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
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
  AliasTable a;
  a.Build(values, weights, 5);
  Rng r(seed);
  std::vector<uint64_t> seen(10, 0);
  const uint64_t n = 200000;
  for (uint64_t i = 0; i < n; ++i) seen[a.Draw(&r)]++;
  std::vector<double> p(10, 0);
  for (int i = 0; i < 5; ++i) p[values[i]] = weights[i] / 5.0;
  EXPECT_EQ(seen[4], 0u) << "a zero weight is never drawn, seed " << seed;
  int dof = 0;
  const double x2 = ChiSquare(seen, p, n, &dof);
  EXPECT_LT(x2, ChiSquareCritical(dof)) << "seed " << seed;
}

TEST(WordTopicTableTest, DenseAndSparseRowsCountAlike) {
  WordTopicTable t;
  t.Reset(50, 4);
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
  // Six distinct topics fit the sparse row; more is an error, never a silent overwrite.
  for (uint32_t x : {2u, 3u, 4u}) t.Add(3, x, 1);
  EXPECT_THROW(
      {
        for (uint32_t x = 5; x < 50; ++x) t.Add(3, x, 1);
      },
      std::length_error);
}

// Counts of a small random state: one document holding the token, the word's counts.
struct SmallState {
  Hyper h;
  WordTopicTable live, snap;
  std::vector<int64_t> totals, snap_totals;
  std::vector<int32_t> nd;
  std::vector<uint32_t> dz;
  uint32_t w = 0, s = 0;
};

SmallState RandomState(uint64_t seed, bool dense, bool stale) {
  Rng r(seed);
  SmallState st;
  st.h.topics = 3 + r.Below(8);
  st.h.words = 5;
  st.h.alpha = 0.05 + r.Uniform();
  st.h.beta = 0.01 + r.Uniform() * 0.5;
  const uint32_t K = st.h.topics;
  st.live.Reset(K, 5);
  st.snap.Reset(K, 5);
  st.w = 2;
  if (dense) {
    st.live.AddDense(2);
    st.snap.AddDense(2);
  } else {
    st.live.AddSparse(2, K);
    st.snap.AddSparse(2, K);
  }
  st.totals.assign(K, 0);
  st.snap_totals.assign(K, 0);
  st.nd.assign(K, 0);
  // The document: 1 to 12 tokens, the first is the one resampled.
  const uint32_t len = 1 + r.Below(12);
  for (uint32_t i = 0; i < len; ++i) st.dz.push_back(r.Below(K));
  st.s = st.dz[0];
  for (uint32_t t : st.dz) st.nd[t]++;
  for (uint32_t t = 0; t < K; ++t) {
    const int32_t n = static_cast<int32_t>(r.Below(6)) * (r.Below(3) == 0);
    if (n) st.live.Add(2, t, n);
    st.totals[t] = n + r.Below(40);
  }
  st.live.Add(2, st.s, 1);  // the token itself
  st.totals[st.s] += 1;
  for (uint32_t t = 0; t < K; ++t) {
    // A stale snapshot differs from the live counts (other workers' updates not seen yet).
    const int32_t n = stale ? static_cast<int32_t>(r.Below(5)) : st.live.Get(2, t);
    if (n) st.snap.Add(2, t, n);
    st.snap_totals[t] = stale ? st.totals[t] + r.Below(20) : st.totals[t];
  }
  return st;
}

// DESIGN of the sampler: whatever the proposals (fresh or stale), the MH chain's states follow
// the collapsed conditional of the token.
TEST(SamplerTest, ChainFollowsTheExactConditional) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const bool dense = seed % 2, stale = seed % 3 != 0;
    SmallState st = RandomState(seed, dense, stale);
    Sampler sampler(st.h, 1, seed * 7919);
    Counts c;
    c.live = &st.live;
    c.snapshot = &st.snap;
    c.totals = st.totals.data();
    c.snapshot_totals = st.snap_totals.data();
    sampler.BeginPass(c);
    const std::vector<double> p =
        ExactConditional(st.h, st.w, st.s, st.nd.data(), st.live, st.totals.data());
    std::vector<uint64_t> seen(st.h.topics, 0);
    const uint64_t n = 40000;
    for (uint64_t i = 0; i < n; ++i) {
      seen[sampler.Chain(st.w, st.s, st.nd.data(), st.dz.data(), st.dz.size(), 100)]++;
    }
    int dof = 0;
    const double x2 = ChiSquare(seen, p, n, &dof);
    ASSERT_GT(dof, 0) << "seed " << seed;
    EXPECT_LT(x2, ChiSquareCritical(dof))
        << "seed " << seed << " K " << st.h.topics << (dense ? " dense" : " sparse")
        << (stale ? " stale" : " fresh");
  }
}

// A chain that never moves, or moves by the proposal alone, fails the same check: the test can
// tell a right sampler from a wrong one.
TEST(SamplerTest, TheChiSquareCheckRejectsAWrongDistribution) {
  SmallState st = RandomState(2, true, true);
  const std::vector<double> p =
      ExactConditional(st.h, st.w, st.s, st.nd.data(), st.live, st.totals.data());
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

// A corpus drawn from planted topics: K topics, each on its own band of words (with a little
// mass everywhere), documents mixing two or three of them.
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
  std::vector<uint32_t> doc;
  for (size_t d = 0; d < docs; ++d) {
    const uint32_t a = r.Below(K), b = r.Below(K);
    const size_t len = 40 + r.Below(80);
    doc.clear();
    for (size_t i = 0; i < len; ++i) {
      const auto& topic = p.topics[r.Uniform() < 0.7 ? a : b];
      double u = r.Uniform();
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
  SerialRun(const Hyper& h, const Corpus& c, uint64_t seed) : shard(h, c), sampler(h, 2, seed + 1) {
    shard.RandomTopics(seed);
    Refresh();
  }
  void SetTopics(const std::vector<uint32_t>& z) {
    shard.z() = z;
    Refresh();
  }
  void Refresh() {
    shard.Layout([](uint32_t) { return false; }, [](uint32_t) { return 0u; });
    shard.CountOwn();
    shard.StartPass();
  }
  void Pass() {
    shard.Pass(&sampler);
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
  Planted p = MakePlanted(K, V, 600, seed);
  Hyper h;
  h.topics = K;
  h.words = V;
  h.alpha = 0.1;
  h.beta = 0.01;
  SerialRun run(h, p.corpus, seed);
  for (int i = 0; i < 60; ++i) run.Pass();
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

// The MH sampler samples the same posterior as plain collapsed Gibbs: started from one state
// of the reference chain, both hold the same log-likelihood on average (within noise). (From
// separate random starts both can sit in different local modes for hundreds of passes, topics
// merged or split, which says nothing about either sampler.)
TEST(LdaTrainingTest, MetropolisHastingsAgreesWithPlainGibbs) {
  const uint64_t seed = 33;
  Planted p = MakePlanted(10, 300, 300, seed);
  Hyper h;
  h.topics = 10;
  h.words = 300;
  h.alpha = 0.2;
  h.beta = 0.05;
  ReferenceGibbs ref(p.corpus, h, seed);
  const double start = ref.LogLikelihoodPerToken();
  for (int i = 0; i < 150; ++i) ref.Pass();
  SerialRun mh(h, p.corpus, seed);
  mh.SetTopics(ref.z());
  double mh_ll = 0, ref_ll = 0;
  const int keep = 100;
  for (int i = 0; i < keep; ++i) {
    mh.Pass();
    ref.Pass();
    mh_ll += mh.LogLikelihoodPerToken(h) / keep;
    ref_ll += ref.LogLikelihoodPerToken() / keep;
  }
  EXPECT_NEAR(mh_ll, ref_ll, 0.01) << "seed " << seed;
  EXPECT_GT(ref_ll, start + 1.0) << "the reference learned something";
}

// The log-likelihood pieces the app adds up across workers equal the reference's whole.
TEST(LdaEvalTest, LogLikelihoodPiecesAddUpToTheWhole) {
  const uint64_t seed = 4;
  Planted p = MakePlanted(6, 120, 50, seed);
  Hyper h;
  h.topics = 6;
  h.words = 120;
  h.alpha = 0.3;
  h.beta = 0.02;
  ReferenceGibbs ref(p.corpus, h, seed);
  ref.Pass();
  Shard s(h, p.corpus);
  s.z() = ref.z();
  s.Layout([](uint32_t w) { return w % 3 == 0; }, [](uint32_t) { return 0u; });
  s.CountOwn();
  s.StartPass();
  const Corpus& c = s.docs();
  const double ll = DocLogLikelihood(c, 0, c.docs() / 2, s.z().data(), 6, h.alpha) +
                    DocLogLikelihood(c, c.docs() / 2, c.docs(), s.z().data(), 6, h.alpha) +
                    WordRowsLogLikelihood(s.live(), s.words(), h.beta) +
                    TotalsLogLikelihood(s.totals().data(), 6, 120, h.beta);
  EXPECT_NEAR(ll / static_cast<double>(c.tokens()), ref.LogLikelihoodPerToken(), 1e-9);
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
  EXPECT_LT(good, 0.5 * bad) << "seed " << seed;

  // The file format the baselines use round-trips, and a short file is refused.
  const std::string path = ::testing::TempDir() + "lda_phi.bin";
  WritePhi(truth, path);
  Phi back = ReadPhi(path);
  EXPECT_EQ(back.topics, 5u);
  EXPECT_EQ(back.p, truth.p);
  std::ofstream(path) << "phi 5 200\n1234";
  EXPECT_THROW(ReadPhi(path), std::runtime_error);
}

TEST(LdaCorpusTest, ErrorsNameTheFileAndLine) {
  const std::string ok = Write("lda_ok.txt", "0 1 2\n\n2 2\n");
  Corpus c = ReadCorpus(ok, 3);
  ASSERT_EQ(c.docs(), 3u);
  EXPECT_EQ(c.length(1), 0u);
  EXPECT_EQ(c.tokens(), 5u);
  const std::string bad = Write("lda_bad.txt", "0 1\n1 x2 0\n");
  try {
    ReadCorpus(bad, 3);
    FAIL() << "x2 is not a word id";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("lda_bad.txt:2"), std::string::npos) << e.what();
  }
  try {
    ReadCorpus(ok, 2);
    FAIL() << "2 is not below the vocabulary size";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("lda_ok.txt:1"), std::string::npos) << e.what();
  }
  const std::string vocab = Write("lda_vocab.txt", "the\t10\nend\t3\n");
  Vocab v = ReadVocab(vocab);
  EXPECT_EQ(v.size(), 2u);
  EXPECT_EQ(v.freq[1], 3u);
  const std::string badv = Write("lda_badv.txt", "the\t10\nend\tmany\n");
  try {
    ReadVocab(badv);
    FAIL() << "many is not a count";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("lda_badv.txt:2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lda
