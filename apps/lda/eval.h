// Model quality: the joint log-likelihood of words and assignments (training progress) and
// document-completion perplexity on held-out documents (one function for every model, ours and
// the baselines').
#ifndef PS_APPS_LDA_EVAL_H_
#define PS_APPS_LDA_EVAL_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "lda/corpus.h"
#include "lda/sampler.h"
#include "lda/word_topic.h"

namespace lda {

/// lgamma(n + a) - lgamma(a) for counts n, the terms of the log-likelihoods below, from a table
/// for the counts below a bound (most counts are small) and computed beyond it: the same
/// values as calling lgamma, a load instead of a call for nearly every count.
class LgammaTable {
 public:
  static constexpr uint64_t kMaxTable = 4096;
  /// A table for n < min(max_n + 1, kMaxTable).
  explicit LgammaTable(double a, uint64_t max_n = kMaxTable - 1);
  double operator()(int64_t n) const {
    return n >= 0 && static_cast<uint64_t>(n) < t_.size()
               ? t_[static_cast<size_t>(n)]
               : std::lgamma(static_cast<double>(n) + a_) - lg_a_;
  }

 private:
  double a_, lg_a_;
  std::vector<double> t_;
};

/// log p(z) of documents [begin, end): sum over documents of
/// lgamma(K a) - lgamma(L_d + K a) + sum_t [lgamma(n_dt + a) - lgamma(a)].
double DocLogLikelihood(const Corpus& c, size_t begin, size_t end, const uint32_t* z,
                        uint32_t topics, double alpha);

/// The part of log p(w | z) from the rows of `words` in table (nonzero counts only):
/// sum over (w, t) of lgamma(n_wt + b) - lgamma(b).
double WordRowsLogLikelihood(const WordTopicTable& table, const std::vector<uint32_t>& words,
                             double beta);
/// The topic totals' part: sum over t of lgamma(V b) - lgamma(n_t + V b).
double TotalsLogLikelihood(const int64_t* totals, uint32_t topics, uint32_t vocab, double beta);

/// Topic-word distributions: row t holds p(w | t) for w < V (each row sums to 1).
struct Phi {
  uint32_t topics = 0, words = 0;
  std::vector<float> p;  // topics x words
  const float* row(uint32_t t) const { return &p[static_cast<size_t>(t) * words]; }
};
/// Writes / reads the binary format the baseline scripts share: the line "phi K V\n" and then
/// K*V little-endian float32 values, row by row. Read throws std::runtime_error naming the
/// file and what is wrong.
void WritePhi(const Phi& phi, const std::string& path);
Phi ReadPhi(const std::string& path);

/// A trained model on disk: "lda-model K V alpha beta", the line "totals n_0 ... n_K-1", then one
/// line per word with nonzero counts: "w t:n t:n ..." (topics ascending). Read throws
/// std::runtime_error naming the file and line.
struct Model {
  uint32_t topics = 0, words = 0;
  double alpha = 0, beta = 0;
  std::vector<int64_t> totals;
  std::vector<std::vector<std::pair<uint32_t, int64_t>>> rows;  // per word
  /// p(w | t) = (n_wt + beta) / (n_t + V beta).
  Phi ToPhi() const;
  /// A model of h's shape with no counts: K zero totals, V empty rows.
  static Model Empty(const Hyper& h);
};
void WriteModel(const Model& m, const std::string& path);
Model ReadModel(const std::string& path);

struct Perplexity {
  double perplexity = 0;
  double log_prob = 0;  // sum over scored tokens
  uint64_t scored = 0;  // odd-position tokens scored
  uint64_t folded = 0;  // even-position tokens used to estimate the mixtures
};

/// Document completion: for each document, its topic mixture is estimated from the tokens at
/// even positions (0, 2, ...) with phi fixed (a fixed number of expectation steps from the
/// uniform mixture: theta_t ~ alpha + sum_i r_it with r_it ~ theta_t phi_t,w_i), and the
/// tokens at odd positions are scored by log sum_t theta_t phi_t,w. Words phi does not know
/// (ids >= V) are skipped. perplexity = exp(-log_prob / scored).
Perplexity DocumentCompletion(const Phi& phi, const Corpus& test, double alpha,
                              int iterations = 50);

/// Mixtures of new documents with phi fixed (the same estimate, over all their tokens): one
/// row of K proportions per document.
std::vector<std::vector<double>> InferMixtures(const Phi& phi, const Corpus& docs, double alpha,
                                               int iterations = 50);

}  // namespace lda

#endif  // PS_APPS_LDA_EVAL_H_
