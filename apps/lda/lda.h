// apps/lda: the options, the tables on the servers and how keys name counts.
#ifndef PS_APPS_LDA_LDA_H_
#define PS_APPS_LDA_LDA_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "lda/sampler.h"
#include "ps/kv_server.h"
#include "ps/ps.h"
#include "team.h"

namespace lda {

// How a worker pulls the sparse table (--sparse_pull).
enum class SparsePull { kAuto, kRows, kTable };

// A run's tables on the servers: named tables "<--tables>.<part>" (so several runs, and other
// apps, can share the servers), count deltas pushed:
//  - dense: one key per frequent word, K int32 counts (rule lda.words: counts that drop zeros,
//    with the servers' word log-likelihood reducer kWordLLReducer);
//  - sparse: one key per nonzero (word, topic) count of the other words, one int32 (lda.words);
//  - totals: key 0, K int64 topic totals (count);
//  - stats: key = iteration, what every worker adds up for the progress lines (sum);
//  - control: int64, the pause and finish protocol of worker failures (lda/recovery.h; sum);
//  - topics: int32, each document's saved topic assignments (key DocKey(d); assign).
// Their application ids, this worker's team and its team's first task, set once its node has
// started (OpenJob).
struct Job {
  apps::Team team;
  int dense = -1, sparse = -1, totals = -1, stats = -1, control = -1, topics = -1;
  int first_task = 0;
};

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
  std::string tables = "lda";  // prefix of the table names
  std::string consistency;     // the team's barrier policy ("": ssp:1 unless the job sets one)
  Job job;                     // set by OpenJob
};

/// What a worker does before the job's start barrier: creates the run's tables (or finds them:
/// every worker asks for the same), adds the run's data parts to its team's task pool once
/// and sets its team's barrier policy. Returns the Job.
Job OpenJob(ps::Node* node, const Options& o);
/// Rules of the run's tables for the servers' ps::TableServer ("lda.words:BETA").
ps::TableRules TableRules();
/// The data part of a task of the run (tasks count across the job's worker groups).
inline int PartOf(const Options& o, int task) {
  return (task - o.job.first_task) % (o.parts_per_worker * o.job.team.size);
}

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
