// apps/lda: the options, the tables on the servers and how keys name counts.
#ifndef PS_APPS_LDA_LDA_H_
#define PS_APPS_LDA_LDA_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "lda/sampler.h"
#include "ps/ps.h"

namespace lda {

// How a worker pulls the sparse table (--sparse_pull).
enum class SparsePull { kAuto, kRows, kTable };

struct Options {
  std::string train, test, vocab;
  Hyper hyper;
  int iterations = 100;
  int mh_steps = 2;
  // Tokens per block of documents (Shard::Pass): the block's documents' counts are read at
  // random, so they should fit the cache; 0: the whole shard in one block.
  uint64_t block_tokens = 80000;
  uint64_t seed = 1;
  uint64_t dense_min = 0;  // words at least this frequent have dense rows (0: K / 2)
  int parts_per_worker = 2;
  SparsePull sparse_pull = SparsePull::kAuto;
  int eval_every = 10;  // held-out perplexity every this many iterations (0: at the end)
  int fold_in_iterations = 50;
  int top_words = 10;
  std::string model_out, log_json;
  bool quiet = false;
  int checkpoint_every = 10;  // save the assignments on the servers this often (0: never)
  // Benchmarks: a worker stalls for straggle_ms after sampling, in each iteration with
  // probability straggle_p (drawn from the seed, its rank and the iteration).
  double straggle_p = 0;
  int straggle_ms = 0;
};

// The tables on the servers (app ids), all with the Sum rule (count deltas are pushed):
//  - kDenseApp: one key per frequent word, K int32 counts;
//  - kSparseApp: one key per nonzero (word, topic) count of the other words, one int32;
//  - kTotalsApp: key 0, K int64 topic totals;
//  - kStatsApp: key = iteration, what every worker adds up for the progress lines.
constexpr int kDenseApp = 1;
constexpr int kSparseApp = 2;
constexpr int kTotalsApp = 3;
constexpr int kStatsApp = 4;
//  - kControlApp: int64, the pause and finish protocol of worker failures (lda/recovery.h);
//  - kTopicsApp: int32, Assign rule: each document's saved topic assignments (key DocKey(d)).
constexpr int kControlApp = 5;
constexpr int kTopicsApp = 6;

// A word's row key: the word id scrambled by a bijection of 44 bits (so that frequent words,
// which have small ids, spread over the ring's key ranges), shifted left by 20: the sparse
// table's key of (w, t) is RowKey(w) + t, and one word's counts are one contiguous key range.
constexpr int kTopicBits = 20;
constexpr uint32_t kMaxTopics = 1u << kTopicBits;
inline ps::Key RowKey(uint32_t w) {
  constexpr uint64_t mask = (uint64_t{1} << 44) - 1;
  uint64_t x = w;
  x = (x * 0x9E3779B97F4Bull) & mask;  // odd: invertible modulo 2^44
  x ^= x >> 23;
  x = (x * 0xBF58476D1CE5ull) & mask;
  x ^= x >> 21;
  return x << kTopicBits;
}
inline ps::Key CellKey(uint32_t w, uint32_t t) { return RowKey(w) | t; }
/// Document d's key in kTopicsApp (the same scrambling: documents spread over the servers).
inline ps::Key DocKey(uint64_t d) { return RowKey(static_cast<uint32_t>(d)); }

/// Words at least this frequent get dense rows (--dense_min, default K / 2, at least 1).
inline uint64_t DenseMin(const Options& o) {
  return o.dense_min ? o.dense_min : std::max<uint64_t>(1, o.hyper.topics / 2);
}

/// The seed of worker rank's sampler (a serial run is rank 0).
inline uint64_t SamplerSeed(uint64_t seed, int rank) {
  return seed * 0x9E3779B97F4A7C15ull + 1 + static_cast<uint64_t>(rank);
}

}  // namespace lda

#endif  // PS_APPS_LDA_LDA_H_
