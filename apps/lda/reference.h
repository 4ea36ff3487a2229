// Plain collapsed Gibbs sampling in one process (Griffiths and Steyvers): O(K) per token over
// dense counts. The exact reference the tests hold the MH sampler and the distributed app to.
#ifndef PS_APPS_LDA_REFERENCE_H_
#define PS_APPS_LDA_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "lda/corpus.h"
#include "lda/rng.h"
#include "lda/sampler.h"

namespace lda {

class ReferenceGibbs {
 public:
  /// Random initial topics drawn from seed.
  ReferenceGibbs(const Corpus& c, const Hyper& h, uint64_t seed);
  /// One pass over every token.
  void Pass();
  /// log p(w, z) per token.
  double LogLikelihoodPerToken() const;
  /// p(w | t) = (n_wt + beta) / (n_t + V beta).
  std::vector<float> Phi() const;
  const std::vector<uint32_t>& z() const { return z_; }

 private:
  const Corpus& c_;
  Hyper h_;
  Rng rng_;
  std::vector<uint32_t> z_;
  std::vector<int32_t> nwt_, ndt_;  // V x K, D x K
  std::vector<int64_t> nt_;
  std::vector<double> p_;
};

}  // namespace lda

#endif  // PS_APPS_LDA_REFERENCE_H_
