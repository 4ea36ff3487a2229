// The documents one worker samples, their topic assignments, and its copy of the counts of the
// words they use (pulled snapshot and live).
#ifndef PS_APPS_LDA_SHARD_H_
#define PS_APPS_LDA_SHARD_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "lda/corpus.h"
#include "lda/rng.h"
#include "lda/sampler.h"
#include "lda/word_topic.h"

namespace lda {

class Shard {
 public:
  /// doc_ids: each document's index in the whole corpus (empty: 0, 1, ...).
  Shard(const Hyper& h, Corpus docs, std::vector<uint64_t> doc_ids = {});

  /// Initial topics: token i of corpus document d gets a uniform topic drawn from (seed, d, i)
  /// alone, so a run starts from the same state however the documents are sharded.
  void RandomTopics(uint64_t seed);
  const Corpus& docs() const { return docs_; }
  /// Each document's index in the whole corpus, ascending.
  const std::vector<uint64_t>& doc_ids() const { return doc_ids_; }
  std::vector<uint32_t>& z() { return z_; }
  const std::vector<uint32_t>& z() const { return z_; }
  /// The distinct words of the documents, ascending, and how often each occurs here.
  const std::vector<uint32_t>& words() const { return words_; }
  uint32_t local_freq(uint32_t w) const { return local_freq_[w]; }

  /// Lays the tables out anew, each row with room for the distinct topics known(w) says the
  /// snapshot will hold and a third as many again (WordTopicTable::AddRow). Counts start at zero.
  /// Fill rows in ascending topic order: where a row's counts sit, and so the order the sampler
  /// meets them in, then depends on the counts alone.
  void Layout(const std::function<uint32_t(uint32_t)>& known);
  /// Lays the tables out for this shard's own assignments and puts their counts in the
  /// snapshot (a serial run's model, a worker's first push).
  void LayoutOwn();
  WordTopicTable& snapshot() { return snap_; }
  const WordTopicTable& snapshot() const { return snap_; }
  std::vector<int64_t>& snapshot_totals() { return snap_totals_; }
  /// Live = snapshot; call after the snapshot is filled.
  void StartPass();
  /// The first push of a run: live = this shard's own counts, snapshot = zero.
  void StartFromZero();
  /// Samples every document once, in `blocks` blocks of documents, each visited word by word
  /// (Sampler::Sample; the order costs 8 bytes per token, built at the first pass and kept
  /// while `blocks` stays the same). Blocks bound the documents whose counts the sampler reads
  /// at random (they should fit the cache) and refresh the topic totals new proposals use.
  uint64_t Pass(Sampler* s, int blocks = 1);
  /// Blocks of about block_tokens tokens each (0: one block).
  int Blocks(uint64_t block_tokens) const;
  const WordTopicTable& live() const { return live_; }
  const std::vector<int64_t>& totals() const { return totals_; }

  /// What this shard changed since StartPass, for one word (f(topic, delta) per nonzero delta)
  /// and for the totals.
  template <typename F>
  void RowDelta(uint32_t w, F f) const {
    live_.ForEachDifference(w, snap_, f);
  }
  std::vector<int64_t> TotalsDelta() const;

 private:
  Hyper h_;
  Corpus docs_;
  std::vector<uint64_t> doc_ids_;
  std::vector<uint32_t> z_;
  std::vector<uint32_t> words_;
  std::vector<uint32_t> local_freq_;  // per vocabulary word
  WordTopicTable snap_, live_;
  std::vector<int64_t> snap_totals_, totals_;
  // Fills order_: per block of nb, its tokens grouped by word, in document order within a word.
  void Order(size_t nb);
  std::vector<std::vector<TokenRef>> order_;
};

}  // namespace lda

#endif  // PS_APPS_LDA_SHARD_H_
