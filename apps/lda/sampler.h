// Collapsed Gibbs sampling for LDA with Metropolis-Hastings proposals whose cost per token does
// not grow with the number of topics K (LightLDA's cycle of a word proposal and a document
// proposal, with the acceptance rates derived for proposals that depend on the token's own
// topic, as WarpLDA does for its document proposal).
//
// For token i of word w in document d, at topic s when its update starts, the target is the
// collapsed conditional  pi(x) ~ (n'_dx + alpha) (n'_wx + beta) / (n'_x + V beta),  where '
// removes the token itself. A chain of MH steps moves the token's topic y (starting at s):
//  - word proposal: the counts N pulled at the start of the pass (a snapshot, stale by design)
//    include the token at s. With it removed (N'), the proposal from state y is
//    q(x | y) ~ g(x) + [x = y] d(y),  g(x) = (N'_wx + beta) / (N'_x + V beta),  d(y) the growth
//    of g(y) when the token sits at y. q(. | s) is drawn in O(1) from an alias table over the
//    word's nonzero counts mixed with one shared alias table of the smoothing term; a draw
//    from g alone rejects the part of s that d(s) adds. Acceptance of y -> t:
//    pi(t) g(y) (Z' + d(y)) / (pi(y) g(t) (Z' + d(t))),  Z' = sum_x g(x).
//  - document proposal: q(x | y) ~ n'_dx + [x = y] + alpha, drawn in O(1) by taking the topic of
//    a random token of the document (the token itself counting as y) or, with probability
//    K alpha / (L_d + K alpha), a uniform topic; the document terms cancel in the acceptance
//    (n'_wt + beta)(n'_y + V beta) / ((n'_wy + beta)(n'_t + V beta)).
// Each step leaves pi invariant for a given snapshot, whatever the token's topic was when the
// pass began (a proposal that treats the snapshot as if it did not hold the token itself is
// biased towards the token's current topic: measured 0.18 nats per token too greedy on a small
// corpus). The target reads the live counts: the snapshot plus every change this worker made
// since. A sweep is exact only as far as the proposals are fresh: a proposal built from counts
// that hold the old topics of tokens updated since depends on the chain's past, not only on
// its state. So a word's proposal is rebuilt from the live counts once the word has met as many
// tokens as the proposal has topics (at most a cell per token). With rebuilds only at block
// boundaries, one block per pass, the chain ran 0.05 nats per token more greedy than plain
// Gibbs on a small planted corpus and a chi-square test on the exact joint posterior of a
// 6-token corpus saw the bias (838 against a 0.1% point of 748); with the rebuilds neither does
// (sampler and training tests in tests/apps/lda_test.cc). Across workers the pulled counts are
// stale by design (SSP), the approximation of every distributed sampler.
#ifndef PS_APPS_LDA_SAMPLER_H_
#define PS_APPS_LDA_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "lda/alias.h"
#include "lda/corpus.h"
#include "lda/doc_counts.h"
#include "lda/rng.h"
#include "lda/word_topic.h"

namespace lda {

struct Hyper {
  uint32_t topics = 100;
  uint32_t words = 0;  // vocabulary size V
  double alpha = 0.5;
  double beta = 0.01;
};

/// Live and snapshot counts a sampler works on (owned by the caller).
struct Counts {
  WordTopicTable* live = nullptr;
  const WordTopicTable* snapshot = nullptr;  // what word proposals are built from (may be live)
  int64_t* totals = nullptr;                 // live topic totals, K
  const int64_t* snapshot_totals = nullptr;  // K
};

/// One token of a block in the order the sampler visits it: its position in the corpus and its
/// document.
struct TokenRef {
  uint32_t pos, doc;
};

class Sampler {
 public:
  Sampler(const Hyper& h, int mh_steps, uint64_t seed);

  /// Starts a pass over a new snapshot (fresh: every word's proposal is built from it when the
  /// word is first met) or a later block of one (new topic totals for the proposals built from
  /// now on). A proposal is rebuilt from the live counts once its word has met as many tokens
  /// since its last build as the proposal has topics; one met rarely keeps an older proposal,
  /// which stays exact: it carries its own counts and totals.
  void BeginPass(const Counts& c, bool fresh = true);
  /// Resamples every token of documents [begin, end) of corpus (assignments z, indexed like
  /// corpus.words), updating the live counts, word by word: order holds the block's n tokens
  /// grouped by word (Shard keeps it). A word's rows and proposal then stay in cache while its
  /// tokens are sampled, whatever K; the counts of the block's documents, which its tokens reach
  /// in random order, are rows of a DocCounts (a block's documents are few). Any fixed visiting
  /// order leaves the posterior invariant. Those random reads are fetched a token ahead: the
  /// next token's own count, and the counts of its word steps' proposals, drawn a token early
  /// (independent draws of a proposal that stays until its word's next rebuild, so the chain
  /// is the same Markov chain; SOTU, K = 1000, serial: 20-30% faster). Returns the number of
  /// topic changes.
  uint64_t Sample(const Corpus& corpus, size_t begin, size_t end, const TokenRef* order, size_t n,
                  uint32_t* z);

  /// A word's hash row is copied into a dense row for a run of its tokens when it has at most
  /// this many cells per token of the run (default 4; 0: never). The chain is the same either
  /// way: only the cost of its lookups changes (tests compare the two).
  void set_copy_cells_per_token(uint64_t n) { copy_cells_per_token_ = n; }

  /// One token's update (tests): word w at topic s, position i of a document whose counts
  /// (including the token) are doc_counts and whose assignments are doc_z (length len); the
  /// live counts and the snapshot include the token at s. Returns the topic after `steps`
  /// cycles; counts are not changed.
  uint32_t Chain(uint32_t w, uint32_t s, size_t i, const int32_t* doc_counts, const uint32_t* doc_z,
                 size_t len, int steps);

 private:
  // The terms of one candidate topic x for the token at s (' = without the token):
  // phi = (n'_wx + beta) / (n'_x + V beta) from the live counts, nd = n'_dx, and the word
  // proposal's g(x) and d(x) (its growth with the token at x) from the snapshot.
  struct Cand {
    uint32_t x;
    double phi, nd, g, d;
  };
  Cand Live(uint32_t x, uint32_t s, int32_t ndx) const;
  // Points word_row_ at word w's live counts as K dense counts: the table's own row where dense,
  // else (for a run of tokens long enough to pay for it) a copy in row_scratch_ that the sampler
  // keeps in step with the row, else null (lookups in the table); and prop_row_ at its
  // proposal's counts, copied into prop_scratch_ from the proposal's cells. Lookups by index, no
  // probes. LeaveWord clears the copies.
  void EnterWord(uint32_t w, size_t run);
  void LeaveWord();
  // prop_row_ for the current word's proposal (after a build), and the copy's clearing.
  void SetPropRow();
  void ClearPropCopy();
  // n: the proposal's count N_wx if known (a draw from the word's own table carries it), or -1.
  void WordTerms(uint32_t w, uint32_t s, Cand* c, int32_t n = -1) const;
  uint32_t DrawWord(uint32_t w, int32_t* n);
  void BuildWord(uint32_t w, const WordTopicTable& from);
  // One token's chain: mh_steps cycles from s (the chain's state's terms are kept, so a step
  // reads the counts of the proposed topic only).
  // nd: the document's counts, nd[x] (a dense array or DocRow).
  // Draws of the word's proposal made ahead, used by the first word steps before any fresh
  // draw (their counts in n, as DrawWord gives them).
  struct Ahead {
    static constexpr int kMax = 2;
    int size = 0, used = 0;
    uint32_t t[kMax];
    int32_t n[kMax];
  };
  template <typename Doc>
  uint32_t Update(uint32_t w, uint32_t s, size_t i, const Doc& nd, const uint32_t* dz, size_t len,
                  int steps, Ahead* ahead = nullptr);

  Hyper h_;
  int mh_steps_;
  Rng rng_;
  Counts c_;
  double vbeta_;
  // The topic totals a word proposal was built with, per block of the pass.
  struct Generation {
    std::vector<int64_t> totals;
    std::vector<double> inv_total;  // 1 / (N_x + V beta)
    AliasTable smooth;              // over beta / (N_x + V beta)
    double smooth_mass = 0;
  };
  std::vector<Generation> gens_;
  uint32_t gen_ = 0;  // this block's
  // Word proposals of this pass, built when the word is first met: cells in one pool, each with
  // the counts it was built from (the current word's also in prop_scratch_, by topic).
  struct WordProposal {
    uint32_t pass = 0;  // built in this pass
    uint32_t gen = 0;
    uint32_t n = 0;
    uint32_t since = 0;  // tokens met since the build
    uint32_t cap = 0;    // cells at `at`
    uint64_t at = 0;
    double mass = 0;  // sum of N_wx / (N_x + V beta)
  };
  std::vector<WordProposal> word_;
  // A word's alias cell with the proposal's counts of its two topics: a draw needs no lookup.
  struct WordCell {
    AliasCell a;
    int32_t value_n, alias_n;
  };
  std::vector<WordCell> pool_;
  std::vector<AliasCell> scratch_cells_;
  std::vector<uint32_t> scratch_at_;
  std::vector<int32_t> scratch_n_;
  uint32_t pass_ = 0;
  // Sample's block loop over the documents' counts held in docs.
  template <typename Table>
  uint64_t SampleBlock(Table* docs, const Corpus& corpus, size_t begin, size_t end,
                       const TokenRef* order, size_t n, uint32_t* z);
  // The block's documents' counts, a row per document: small cells where they fit.
  DocCounts small_docs_;
  WordTopicTable wide_docs_;
  uint64_t copy_cells_per_token_ = 4;
  std::vector<int32_t> row_scratch_, prop_scratch_;  // K each; zero outside a copied run
  const int32_t* word_row_ = nullptr;
  const int32_t* prop_row_ = nullptr;
  uint32_t row_word_ = 0;
  bool row_copied_ = false;     // prop_row_ is set while prop_scratch_ holds a copy
  std::vector<uint32_t> seen_;  // per topic: 1 + the last document row that counted it
  std::vector<uint32_t> scratch_t_;
  std::vector<float> scratch_w_;
};

/// Exact conditional pi(x) of one token, normalised (tests and the serial reference).
std::vector<double> ExactConditional(const Hyper& h, uint32_t w, uint32_t s,
                                     const int32_t* doc_counts, const WordTopicTable& live,
                                     const int64_t* totals);

}  // namespace lda

#endif  // PS_APPS_LDA_SAMPLER_H_
