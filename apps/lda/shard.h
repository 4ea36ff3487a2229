// The documents one worker samples, their topic assignments, and its copy of the counts of the
// words they use (pulled snapshot and live).
#ifndef PS_APPS_LDA_SHARD_H_
#define PS_APPS_LDA_SHARD_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "lda/corpus.h"
#include "lda/rng.h"
#include "lda/sampler.h"
#include "lda/word_topic.h"

namespace lda {

class Shard {
 public:
  Shard(const Hyper& h, Corpus docs);

  /// Topics drawn uniformly from seed.
  void RandomTopics(uint64_t seed);
  const Corpus& docs() const { return docs_; }
  std::vector<uint32_t>& z() { return z_; }
  const std::vector<uint32_t>& z() const { return z_; }
  /// The distinct words of the documents, ascending, and how often each occurs here.
  const std::vector<uint32_t>& words() const { return words_; }
  uint32_t local_freq(uint32_t w) const { return local_freq_[w]; }

  /// Lays the tables out anew: dense rows for the words dense(w) says, sparse rows for the
  /// others with room for known(w) topics plus one per local token. Counts start at zero.
  void Layout(const std::function<bool(uint32_t)>& dense,
              const std::function<uint32_t(uint32_t)>& known);
  /// Adds the counts of this shard's own assignments to the snapshot (a serial run's model).
  void CountOwn();
  WordTopicTable& snapshot() { return snap_; }
  std::vector<int64_t>& snapshot_totals() { return snap_totals_; }
  /// Live = snapshot; call after the snapshot is filled.
  void StartPass();
  /// Samples every document once.
  uint64_t Pass(Sampler* s);
  const WordTopicTable& live() const { return live_; }
  const std::vector<int64_t>& totals() const { return totals_; }

  /// What this shard changed since StartPass, for one word (f(topic, delta) per nonzero delta)
  /// and for the totals.
  template <typename F>
  void RowDelta(uint32_t w, F f) const {
    live_.ForEach(w, [&](uint32_t t, int32_t n) {
      const int32_t d = n - snap_.Get(w, t);
      if (d) f(t, d);
    });
    // Topics whose live count fell to zero are not visited above.
    snap_.ForEach(w, [&](uint32_t t, int32_t n) {
      if (live_.Get(w, t) == 0) f(t, -n);
    });
  }
  std::vector<int64_t> TotalsDelta() const;

 private:
  Hyper h_;
  Corpus docs_;
  std::vector<uint32_t> z_;
  std::vector<uint32_t> words_;
  std::vector<uint32_t> local_freq_;  // per vocabulary word
  WordTopicTable snap_, live_;
  std::vector<int64_t> snap_totals_, totals_;
};

}  // namespace lda

#endif  // PS_APPS_LDA_SHARD_H_
