// ps_lda: LDA topic models by collapsed Gibbs sampling on the parameter server, launched by
// tracker/ps-launch (every role runs this program), or on one machine (--serial, --infer,
// --score_phi).
//
//   tracker/ps-launch -s 1 -w 2 -- build/apps/lda/ps_lda --train data/sotu/train.txt
//       --test data/sotu/test.txt --vocab data/sotu/vocab.txt --topics 100
//
// docs/apps/lda.md has the algorithm, the flags and the measured results.
#include <gflags/gflags.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "app_help.h"
#include "lda/corpus.h"
#include "lda/eval.h"
#include "lda/lda.h"
#include "lda/shard.h"
#include "lda/worker.h"

DEFINE_string(train, "", "training documents (one per line: word ids)");
DEFINE_string(test, "", "held-out documents, scored by document completion");
DEFINE_string(vocab, "", "vocabulary (word TAB frequency per line; id = line number)");
DEFINE_int32(topics, 100, "number of topics K");
DEFINE_double(alpha, -1, "symmetric document-topic prior (-1: 50 / K)");
DEFINE_double(beta, 0.01, "symmetric topic-word prior");
DEFINE_int32(iterations, 100, "passes over the training documents");
DEFINE_int32(mh_steps, 2, "Metropolis-Hastings cycles (word + document proposal) per token");
DEFINE_uint64(block_tokens, 80000,
              "tokens per block of documents (a block's document counts are read at random and "
              "should fit the CPU's L2 cache; 0: one block)");
DEFINE_uint64(seed, 1, "seed of the initial topics and the samplers");
DEFINE_int32(eval_every, 10, "held-out perplexity every this many iterations (0: at the end)");
DEFINE_int32(top_words, 10, "words printed per topic at the end");
DEFINE_uint64(dense_min, 0, "words at least this frequent get dense rows (0: K / 2)");
DEFINE_int32(parts_per_worker, 2, "data parts (scheduler tasks) per worker");
DEFINE_string(sparse_pull, "auto",
              "how a worker pulls the rare words' rows: rows (only its own words', one key range "
              "each), table (the whole sparse table in one range) or auto (rows when the worker "
              "holds under 40% of the rare words, where the ranges cost less than the rest)");
DEFINE_string(consistency, "",
              "barrier policy of the run's workers (bsp, ssp:S, asp); default: ssp:1, unless "
              "PS_CONSISTENCY, or PS_GROUP_CONSISTENCY for the run's worker group, sets one");
DEFINE_string(tables, "lda",
              "prefix of the run's table names on the servers (PREFIX.dense, ...): runs that "
              "share servers need prefixes of their own");
DEFINE_string(model_out, "",
              "write the trained model here (the coordinator: worker 0, or the lowest live rank)");
DEFINE_bool(infer, false,
            "topic mixtures of the documents in --test under --model_in, one line per document");
DEFINE_string(model_in, "", "--infer: a model written by --model_out");
DEFINE_string(
    log_json, "",
    "write one JSON object per iteration here (the coordinator; one that takes over appends)");
DEFINE_bool(quiet, false, "no progress lines");
DEFINE_int32(checkpoint_every, 10,
             "save the topic assignments on the servers every this many iterations: a dead "
             "worker's documents resume from there (0: from their initial topics)");
DEFINE_string(straggle, "",
              "P:MS (benchmarks): each worker stalls MS milliseconds after sampling, in each "
              "iteration with probability P (seeded by --seed, its rank and the iteration)");
DEFINE_bool(serial, false, "train in this process alone (no servers): the reference run");
DEFINE_string(score_phi, "",
              "score this topic-word matrix (phi file: \"phi K V\\n\" + K*V float32) on --test by "
              "document completion and exit (how bench/lda_baselines.py scores gensim and "
              "scikit-learn)");

namespace {

using Clock = std::chrono::steady_clock;

lda::Options FromFlags() {
  lda::Options o;
  o.train = FLAGS_train;
  o.tables = FLAGS_tables;
  o.consistency = FLAGS_consistency;
  o.test = FLAGS_test;
  o.vocab = FLAGS_vocab;
  if (FLAGS_topics < 1 || static_cast<uint32_t>(FLAGS_topics) > lda::kMaxTopics) {
    throw std::runtime_error("--topics must be in [1, " + std::to_string(lda::kMaxTopics) + "]");
  }
  o.hyper.topics = static_cast<uint32_t>(FLAGS_topics);
  o.hyper.alpha = FLAGS_alpha < 0 ? 50.0 / FLAGS_topics : FLAGS_alpha;
  o.hyper.beta = FLAGS_beta;
  if (!(o.hyper.alpha > 0)) throw std::runtime_error("--alpha must be positive");
  if (!(o.hyper.beta > 0)) throw std::runtime_error("--beta must be positive");
  o.iterations = FLAGS_iterations;
  o.mh_steps = FLAGS_mh_steps;
  o.block_tokens = FLAGS_block_tokens;
  o.seed = FLAGS_seed;
  o.eval_every = FLAGS_eval_every;
  o.top_words = FLAGS_top_words;
  o.dense_min = FLAGS_dense_min;
  if (FLAGS_parts_per_worker < 1) throw std::runtime_error("--parts_per_worker must be >= 1");
  o.parts_per_worker = FLAGS_parts_per_worker;
  if (FLAGS_sparse_pull == "auto") {
    o.sparse_pull = lda::SparsePull::kAuto;
  } else if (FLAGS_sparse_pull == "rows") {
    o.sparse_pull = lda::SparsePull::kRows;
  } else if (FLAGS_sparse_pull == "table") {
    o.sparse_pull = lda::SparsePull::kTable;
  } else {
    throw std::runtime_error("--sparse_pull must be auto, rows or table, not '" +
                             FLAGS_sparse_pull + "'");
  }
  o.log_json = FLAGS_log_json;
  o.model_out = FLAGS_model_out;
  o.quiet = FLAGS_quiet;
  o.checkpoint_every = FLAGS_checkpoint_every;
  if (!FLAGS_straggle.empty()) {
    char extra = 0;
    if (std::sscanf(FLAGS_straggle.c_str(), "%lf:%d%c", &o.straggle_p, &o.straggle_ms, &extra) !=
            2 ||
        !(o.straggle_p >= 0 && o.straggle_p <= 1) || o.straggle_ms < 0) {
      throw std::runtime_error("--straggle must be P:MS with P in [0, 1] and MS >= 0, not '" +
                               FLAGS_straggle + "'");
    }
  }
  if (o.iterations < 1) throw std::runtime_error("--iterations must be >= 1");
  if (o.mh_steps < 1) throw std::runtime_error("--mh_steps must be >= 1");
  return o;
}

int ScorePhi(const lda::Options& o, const std::string& path) {
  if (o.test.empty()) throw std::runtime_error("--score_phi needs --test");
  const lda::Phi phi = lda::ReadPhi(path);
  const lda::Corpus test = lda::ReadCorpus(o.test, phi.words);
  const double alpha = FLAGS_alpha < 0 ? 50.0 / phi.topics : FLAGS_alpha;
  const lda::Perplexity p = lda::DocumentCompletion(phi, test, alpha, o.fold_in_iterations);
  std::printf("RESULT phi %s topics %u perplexity %.4f scored %llu folded %llu\n", path.c_str(),
              phi.topics, p.perplexity, static_cast<unsigned long long>(p.scored),
              static_cast<unsigned long long>(p.folded));
  return 0;
}

int Infer(const lda::Options& o) {
  if (FLAGS_model_in.empty() || o.test.empty()) {
    throw std::runtime_error("--infer needs --model_in and --test");
  }
  const lda::Model m = lda::ReadModel(FLAGS_model_in);
  const lda::Corpus docs = lda::ReadCorpus(o.test, m.words);
  const auto mix = lda::InferMixtures(m.ToPhi(), docs, m.alpha, o.fold_in_iterations);
  for (const auto& row : mix) {
    for (size_t t = 0; t < row.size(); ++t) std::printf(t ? " %.5f" : "%.5f", row[t]);
    std::printf("\n");
  }
  return 0;
}

int RunSerial(lda::Options o) {
  if (o.vocab.empty() || o.train.empty())
    throw std::runtime_error("--train and --vocab are required");
  const lda::Vocab vocab = lda::ReadVocab(o.vocab);
  o.hyper.words = vocab.size();
  lda::Corpus train = lda::ReadCorpus(o.train, vocab.size());
  lda::Corpus test;
  if (!o.test.empty()) test = lda::ReadCorpus(o.test, vocab.size());
  lda::Shard shard(o.hyper, std::move(train));
  shard.RandomTopics(o.seed);
  lda::Sampler sampler(o.hyper, o.mh_steps, lda::SamplerSeed(o.seed, 0));
  auto refresh = [&] {
    shard.LayoutOwn();
    shard.StartPass();
  };
  refresh();
  const auto& docs = shard.docs();
  double sample_s = 0;
  for (int it = 1; it <= o.iterations; ++it) {
    const auto t0 = Clock::now();
    const uint64_t changed = shard.Pass(&sampler, shard.Blocks(o.block_tokens));
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    sample_s += s;
    refresh();
    const double ll = (lda::DocLogLikelihood(docs, 0, docs.docs(), shard.z().data(), o.hyper.topics,
                                             o.hyper.alpha) +
                       lda::WordRowsLogLikelihood(shard.live(), shard.words(), o.hyper.beta) +
                       lda::TotalsLogLikelihood(shard.totals().data(), o.hyper.topics,
                                                o.hyper.words, o.hyper.beta)) /
                      static_cast<double>(docs.tokens());
    std::printf("iteration %d loglik/token %.5f changed %.3f tokens/s %.0f\n", it, ll,
                static_cast<double>(changed) / docs.tokens(), docs.tokens() / s);
    std::fflush(stdout);
  }
  double perplexity = 0;
  if (test.docs()) {
    lda::Model m = lda::Model::Empty(o.hyper);
    m.totals = shard.totals();
    for (uint32_t w : shard.words()) {
      shard.live().ForEach(w, [&](uint32_t t, int32_t n) { m.rows[w].emplace_back(t, n); });
    }
    perplexity = lda::DocumentCompletion(m.ToPhi(), test, o.hyper.alpha).perplexity;
  }
  std::printf("RESULT serial tokens/s %.0f perplexity %.2f\n",
              docs.tokens() * o.iterations / sample_s, perplexity);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("LDA by collapsed Gibbs sampling on the parameter server");
  apps::HandleHelp(argc, argv, "apps/lda/");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  try {
    const lda::Options o = FromFlags();
    if (!FLAGS_score_phi.empty()) return ScorePhi(o, FLAGS_score_phi);
    if (FLAGS_infer) return Infer(o);
    if (FLAGS_serial) return RunSerial(o);
    ps::Node node(ps::Config::FromEnv());
    node.Start();
    int rc = 0;
    switch (node.role()) {
      case ps::Role::kScheduler:
        // The workers make the tables, add their tasks and set their policy (OpenJob), so
        // that the scheduler's program may be another (ps_server, servers shared by apps).
        node.Barrier(ps::kAllGroups);
        node.Finalize();
        break;
      case ps::Role::kServer:
        lda::RunServer(&node, o);
        break;
      case ps::Role::kWorker: {
        lda::Options run = o;
        run.job = lda::OpenJob(&node, run);
        node.Barrier(ps::kAllGroups);
        rc = lda::RunWorker(&node, run);
        node.Finalize();
        break;
      }
    }
    return rc;
  } catch (const std::exception& e) {
    std::cerr << "ps_lda: " << e.what() << std::endl;
    return 1;
  }
}
