#include "lda/sampler.h"

#include <algorithm>
#include <cmath>

namespace lda {

Sampler::Sampler(const Hyper& h, int mh_steps, uint64_t seed)
    : h_(h), mh_steps_(std::max(1, mh_steps)), rng_(seed), vbeta_(h.words * h.beta) {
  nd_.assign(h.topics, 0);
}

void Sampler::BeginPass(const Counts& c) {
  c_ = c;
  ++pass_;
  pool_.clear();
  if (word_.size() < h_.words) word_.resize(h_.words);
  const uint32_t K = h_.topics;
  inv_snap_total_.resize(K);
  scratch_t_.resize(K);
  scratch_w_.resize(K);
  smooth_mass_ = 0;
  for (uint32_t x = 0; x < K; ++x) {
    inv_snap_total_[x] = 1.0 / (static_cast<double>(c.snapshot_totals[x]) + vbeta_);
    scratch_t_[x] = x;
    scratch_w_[x] = static_cast<float>(h_.beta * inv_snap_total_[x]);
    smooth_mass_ += h_.beta * inv_snap_total_[x];
  }
  smooth_.Build(scratch_t_.data(), scratch_w_.data(), K);
}

void Sampler::BuildWord(uint32_t w) {
  WordProposal& p = word_[w];
  p.pass = pass_;
  p.n = 0;
  p.mass = 0;
  p.at = pool_.size();
  c_.snapshot->ForEach(w, [&](uint32_t t, int32_t n) {
    if (n <= 0) return;
    const double m = n * inv_snap_total_[t];
    scratch_t_[p.n] = t;
    scratch_w_[p.n] = static_cast<float>(m);
    p.mass += m;
    p.n++;
  });
  pool_.resize(pool_.size() + p.n);
  BuildAlias(scratch_t_.data(), scratch_w_.data(), p.n, &pool_[p.at]);
}

uint32_t Sampler::DrawWord(uint32_t w) {
  const WordProposal& p = word_[w];
  if (p.n && rng_.Uniform() * (p.mass + smooth_mass_) < p.mass) {
    return DrawAlias(&pool_[p.at], p.n, &rng_);
  }
  return smooth_.Draw(&rng_);
}

void Sampler::WordTerms(uint32_t w, uint32_t x, uint32_t s, double* g, double* d) const {
  const int self = x == s;
  const double nw = c_.snapshot->Get(w, x) - self + h_.beta;
  const double nt = static_cast<double>(c_.snapshot_totals[x] - self) + vbeta_;
  *g = nw / nt;
  *d = (nw + 1) / (nt + 1) - *g;
}

double Sampler::Target(uint32_t w, uint32_t x, uint32_t s, const int32_t* nd) const {
  const int self = x == s;
  return (nd[x] - self + h_.alpha) * (c_.live->Get(w, x) - self + h_.beta) /
         (static_cast<double>(c_.totals[x] - self) + vbeta_);
}

uint32_t Sampler::Step(uint32_t w, uint32_t s, uint32_t y, size_t i, const int32_t* nd,
                       const uint32_t* dz, size_t len) {
  // Word proposal from y: with probability d(y) / (Z' + d(y)) y itself, else a draw from g
  // (a draw of q(. | s) that lands on s stands for g with probability g(s) / (g(s) + d(s))).
  double gs, ds, gy, dy;
  WordTerms(w, s, s, &gs, &ds);
  const double z = word_[w].mass + smooth_mass_ - ds;  // Z'
  if (y == s) {
    gy = gs;
    dy = ds;
  } else {
    WordTerms(w, y, s, &gy, &dy);
  }
  if (rng_.Uniform() * (z + dy) >= dy) {
    uint32_t t = DrawWord(w);
    while (t == s && rng_.Uniform() * (gs + ds) >= gs) t = DrawWord(w);
    if (t != y) {
      double gt, dt;
      WordTerms(w, t, s, &gt, &dt);
      const double a = Target(w, t, s, nd) * gy * (z + dy) / (Target(w, y, s, nd) * gt * (z + dt));
      if (a >= 1 || rng_.Uniform() < a) {
        y = t;
        gy = gt;
        dy = dt;
      }
    }
  }
  // Document proposal: the topic of a random token of the document (this one is at y), or a
  // uniform topic. The document terms cancel.
  const double u = rng_.Uniform() * (static_cast<double>(len) + h_.topics * h_.alpha);
  uint32_t t;
  if (u < static_cast<double>(len)) {
    const size_t at = static_cast<size_t>(u);
    t = at == i ? y : dz[at];
  } else {
    t = rng_.Below(h_.topics);
  }
  if (t != y) {
    const int ts = t == s, ys = y == s;
    const double a =
        (c_.live->Get(w, t) - ts + h_.beta) * (static_cast<double>(c_.totals[y] - ys) + vbeta_) /
        ((c_.live->Get(w, y) - ys + h_.beta) * (static_cast<double>(c_.totals[t] - ts) + vbeta_));
    if (a >= 1 || rng_.Uniform() < a) y = t;
  }
  return y;
}

uint64_t Sampler::SampleDocs(const Corpus& corpus, size_t begin, size_t end, uint32_t* z) {
  uint64_t changed = 0;
  int32_t* nd = nd_.data();
  for (size_t d = begin; d < end; ++d) {
    const size_t b = corpus.offsets[d], len = corpus.length(d);
    uint32_t* dz = z + b;
    const uint32_t* dw = corpus.words.data() + b;
    for (size_t i = 0; i < len; ++i) nd[dz[i]]++;
    for (size_t i = 0; i < len; ++i) {
      const uint32_t w = dw[i], s = dz[i];
      if (word_[w].pass != pass_) BuildWord(w);
      uint32_t c = s;
      for (int k = 0; k < mh_steps_; ++k) c = Step(w, s, c, i, nd, dz, len);
      if (c == s) continue;
      dz[i] = c;
      nd[s]--;
      nd[c]++;
      c_.live->Add(w, s, -1);
      c_.live->Add(w, c, 1);
      c_.totals[s]--;
      c_.totals[c]++;
      changed++;
    }
    for (size_t i = 0; i < len; ++i) nd[dz[i]] = 0;
  }
  return changed;
}

uint32_t Sampler::Chain(uint32_t w, uint32_t s, size_t i, const int32_t* doc_counts,
                        const uint32_t* doc_z, size_t len, int steps) {
  if (word_.size() < h_.words) word_.resize(h_.words);
  if (word_[w].pass != pass_) BuildWord(w);
  uint32_t c = s;
  for (int k = 0; k < steps; ++k) c = Step(w, s, c, i, doc_counts, doc_z, len);
  return c;
}

std::vector<double> ExactConditional(const Hyper& h, uint32_t w, uint32_t s,
                                     const int32_t* doc_counts, const WordTopicTable& live,
                                     const int64_t* totals) {
  std::vector<double> p(h.topics);
  double sum = 0;
  for (uint32_t x = 0; x < h.topics; ++x) {
    const int self = x == s;
    p[x] = (doc_counts[x] - self + h.alpha) * (live.Get(w, x) - self + h.beta) /
           (static_cast<double>(totals[x] - self) + h.words * h.beta);
    sum += p[x];
  }
  for (auto& v : p) v /= sum;
  return p;
}

}  // namespace lda
