#include "lda/shard.h"

#include <algorithm>
#include <stdexcept>

namespace lda {

Shard::Shard(const Hyper& h, Corpus docs, std::vector<uint64_t> doc_ids)
    : h_(h), docs_(std::move(docs)), doc_ids_(std::move(doc_ids)) {
  if (doc_ids_.empty()) {
    for (size_t d = 0; d < docs_.docs(); ++d) doc_ids_.push_back(d);
  }
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
  for (size_t d = 0; d < docs_.docs(); ++d) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (doc_ids_[d] + 1) * 0xD1B54A32D192ED03ull;
    Rng r(Rng::SplitMix(&x));
    for (uint64_t i = docs_.offsets[d]; i < docs_.offsets[d + 1]; ++i) z_[i] = r.Below(h_.topics);
  }
}

void Shard::Layout(const std::function<uint32_t(uint32_t)>& known) {
  snap_.Reset(h_.topics, h_.words);
  for (uint32_t w : words_) snap_.AddRow(w, known(w));
  std::fill(snap_totals_.begin(), snap_totals_.end(), 0);
}

void Shard::LayoutOwn() {
  std::vector<uint64_t> cells(z_.size());
  for (size_t i = 0; i < z_.size(); ++i) cells[i] = uint64_t{docs_.words[i]} << 32 | z_[i];
  std::sort(cells.begin(), cells.end());
  std::vector<uint32_t> distinct(h_.words, 0);
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i == 0 || cells[i] != cells[i - 1]) distinct[cells[i] >> 32]++;
  }
  Layout([&](uint32_t w) { return distinct[w]; });
  for (uint32_t t : z_) snap_totals_[t]++;
  for (size_t i = 0; i < cells.size();) {
    size_t j = i;
    while (j < cells.size() && cells[j] == cells[i]) ++j;
    snap_.Add(static_cast<uint32_t>(cells[i] >> 32), static_cast<uint32_t>(cells[i]),
              static_cast<int32_t>(j - i));
    i = j;
  }
}

void Shard::StartPass() {
  live_.ForkFrom(&snap_);
  totals_ = snap_totals_;
}

void Shard::StartFromZero() {
  LayoutOwn();
  live_ = snap_;
  totals_ = snap_totals_;
  snap_.ZeroCounts();
  std::fill(snap_totals_.begin(), snap_totals_.end(), 0);
}

void Shard::Order(size_t nb) {
  if (docs_.tokens() > std::numeric_limits<uint32_t>::max()) {
    throw std::runtime_error("a worker's documents hold more than 2^32 tokens: use more workers");
  }
  const size_t n = docs_.docs();
  order_.assign(nb, {});
  for (size_t b = 0; b < nb; ++b) {
    std::vector<TokenRef>& o = order_[b];
    for (size_t d = n * b / nb; d < n * (b + 1) / nb; ++d) {
      for (uint64_t i = docs_.offsets[d]; i < docs_.offsets[d + 1]; ++i) {
        o.push_back(TokenRef{static_cast<uint32_t>(i), static_cast<uint32_t>(d)});
      }
    }
    // By word; within a word the tokens keep document order.
    std::stable_sort(o.begin(), o.end(), [&](const TokenRef& x, const TokenRef& y) {
      return docs_.words[x.pos] < docs_.words[y.pos];
    });
  }
}

int Shard::Blocks(uint64_t block_tokens) const {
  if (block_tokens == 0) return 1;
  const uint64_t n = (docs_.tokens() + block_tokens - 1) / block_tokens;
  return static_cast<int>(std::max<uint64_t>(1, std::min<uint64_t>(n, docs_.docs())));
}

uint64_t Shard::Pass(Sampler* s, int blocks) {
  uint64_t changed = 0;
  const size_t n = docs_.docs(), nb = static_cast<size_t>(std::max(1, blocks));
  if (order_.size() != nb) Order(nb);
  for (size_t b = 0; b < nb; ++b) {
    const size_t begin = n * b / nb, end = n * (b + 1) / nb;
    if (begin == end) continue;
    Counts c;
    c.live = &live_;
    c.totals = totals_.data();
    // The pulled counts are the freshest at the start of a pass; later blocks build their
    // proposals from the live counts.
    c.snapshot = b == 0 ? &snap_ : &live_;
    c.snapshot_totals = b == 0 ? snap_totals_.data() : totals_.data();
    s->BeginPass(c, b == 0);
    changed += s->Sample(docs_, begin, end, order_[b].data(), order_[b].size(), z_.data());
  }
  return changed;
}

std::vector<int64_t> Shard::TotalsDelta() const {
  std::vector<int64_t> d(h_.topics);
  for (uint32_t t = 0; t < h_.topics; ++t) d[t] = totals_[t] - snap_totals_[t];
  return d;
}

}  // namespace lda
