#include "lda/shard.h"

#include <algorithm>

namespace lda {

Shard::Shard(const Hyper& h, Corpus docs) : h_(h), docs_(std::move(docs)) {
  z_.assign(docs_.tokens(), 0);
  local_freq_.assign(h.words, 0);
  for (uint32_t w : docs_.words) local_freq_[w]++;
  for (uint32_t w = 0; w < h.words; ++w) {
    if (local_freq_[w]) words_.push_back(w);
  }
  snap_totals_.assign(h.topics, 0);
  totals_.assign(h.topics, 0);
}

void Shard::RandomTopics(uint64_t seed) {
  Rng r(seed);
  for (auto& t : z_) t = r.Below(h_.topics);
}

void Shard::Layout(const std::function<bool(uint32_t)>& dense,
                   const std::function<uint32_t(uint32_t)>& known) {
  snap_.Reset(h_.topics, h_.words);
  for (uint32_t w : words_) {
    if (dense(w)) {
      snap_.AddDense(w);
    } else {
      snap_.AddSparse(w, std::min<uint32_t>(h_.topics, known(w) + local_freq_[w]));
    }
  }
  std::fill(snap_totals_.begin(), snap_totals_.end(), 0);
}

void Shard::CountOwn() {
  for (size_t i = 0; i < z_.size(); ++i) {
    snap_.Add(docs_.words[i], z_[i], 1);
    snap_totals_[z_[i]]++;
  }
}

void Shard::StartPass() {
  live_ = WordTopicTable(h_.topics);
  live_.CopyLayoutAndCounts(snap_);
  totals_ = snap_totals_;
}

uint64_t Shard::Pass(Sampler* s) {
  Counts c;
  c.live = &live_;
  c.snapshot = &snap_;
  c.totals = totals_.data();
  c.snapshot_totals = snap_totals_.data();
  s->BeginPass(c);
  return s->SampleDocs(docs_, 0, docs_.docs(), z_.data());
}

std::vector<int64_t> Shard::TotalsDelta() const {
  std::vector<int64_t> d(h_.topics);
  for (uint32_t t = 0; t < h_.topics; ++t) d[t] = totals_[t] - snap_totals_[t];
  return d;
}

}  // namespace lda
