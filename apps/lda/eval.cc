#include "lda/eval.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace lda {

LgammaTable::LgammaTable(double a, uint64_t max_n) : a_(a), lg_a_(std::lgamma(a)) {
  t_.resize(std::min<uint64_t>(max_n + 1, kMaxTable));
  for (size_t n = 0; n < t_.size(); ++n) t_[n] = std::lgamma(static_cast<double>(n) + a) - lg_a_;
}

double DocLogLikelihood(const Corpus& c, size_t begin, size_t end, const uint32_t* z,
                        uint32_t topics, double alpha) {
  std::vector<int32_t> nd(topics, 0);
  size_t longest = 0;
  for (size_t d = begin; d < end; ++d) longest = std::max(longest, c.length(d));
  const LgammaTable counts(alpha, longest), lengths(topics * alpha, longest);
  double ll = 0;
  for (size_t d = begin; d < end; ++d) {
    const size_t b = c.offsets[d], len = c.length(d);
    for (size_t i = 0; i < len; ++i) nd[z[b + i]]++;
    ll -= lengths(static_cast<int64_t>(len));  // lgamma(K a) - lgamma(L_d + K a)
    for (size_t i = 0; i < len; ++i) {
      int32_t& n = nd[z[b + i]];
      if (n > 0) {
        ll += counts(n);
        n = 0;  // each topic once
      }
    }
  }
  return ll;
}

double WordRowsLogLikelihood(const WordTopicTable& table, const std::vector<uint32_t>& words,
                             double beta) {
  const LgammaTable lg(beta);
  double ll = 0;
  for (uint32_t w : words) {
    if (!table.Has(w)) continue;
    table.ForEach(w, [&](uint32_t, int32_t n) {
      if (n > 0) ll += lg(n);
    });
  }
  return ll;
}

double TotalsLogLikelihood(const int64_t* totals, uint32_t topics, uint32_t vocab, double beta) {
  const double vb = vocab * beta, lg_vb = std::lgamma(vb);
  double ll = 0;
  for (uint32_t t = 0; t < topics; ++t)
    ll += lg_vb - std::lgamma(static_cast<double>(totals[t]) + vb);
  return ll;
}

void WritePhi(const Phi& phi, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error(path + ": cannot open for writing");
  out << "phi " << phi.topics << " " << phi.words << "\n";
  out.write(reinterpret_cast<const char*>(phi.p.data()),
            static_cast<std::streamsize>(phi.p.size() * sizeof(float)));
  if (!out) throw std::runtime_error(path + ": write error");
}

Phi ReadPhi(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::string magic;
  Phi phi;
  if (!(in >> magic >> phi.topics >> phi.words) || magic != "phi" || in.get() != '\n' ||
      phi.topics == 0 || phi.words == 0) {
    throw std::runtime_error(path + ": not a phi file (expected the line \"phi K V\")");
  }
  phi.p.resize(static_cast<size_t>(phi.topics) * phi.words);
  in.read(reinterpret_cast<char*>(phi.p.data()),
          static_cast<std::streamsize>(phi.p.size() * sizeof(float)));
  if (in.gcount() != static_cast<std::streamsize>(phi.p.size() * sizeof(float))) {
    throw std::runtime_error(path + ": holds fewer than K*V = " + std::to_string(phi.p.size()) +
                             " values");
  }
  for (size_t i = 0; i < phi.p.size(); ++i) {
    if (!(phi.p[i] >= 0) || !std::isfinite(phi.p[i])) {
      throw std::runtime_error(path + ": value " + std::to_string(i) + " is not a probability");
    }
  }
  return phi;
}

Model Model::Empty(const Hyper& h) {
  Model m;
  m.topics = h.topics;
  m.words = h.words;
  m.alpha = h.alpha;
  m.beta = h.beta;
  m.totals.assign(m.topics, 0);
  m.rows.resize(m.words);
  return m;
}

Phi Model::ToPhi() const {
  Phi phi;
  phi.topics = topics;
  phi.words = words;
  phi.p.assign(static_cast<size_t>(topics) * words, 0.0f);
  for (uint32_t w = 0; w < words; ++w) {
    for (const auto& c : rows[w]) phi.p[static_cast<size_t>(c.first) * words + w] = c.second;
  }
  for (uint32_t t = 0; t < topics; ++t) {
    const double norm = 1.0 / (static_cast<double>(totals[t]) + words * beta);
    float* row = &phi.p[static_cast<size_t>(t) * words];
    for (uint32_t w = 0; w < words; ++w) row[w] = static_cast<float>((row[w] + beta) * norm);
  }
  return phi;
}

void WriteModel(const Model& m, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(path + ": cannot open for writing");
  out.precision(17);
  out << "lda-model " << m.topics << " " << m.words << " " << m.alpha << " " << m.beta
      << "\ntotals";
  for (int64_t n : m.totals) out << " " << n;
  out << "\n";
  for (uint32_t w = 0; w < m.words; ++w) {
    if (m.rows[w].empty()) continue;
    out << w;
    for (const auto& c : m.rows[w]) out << " " << c.first << ":" << c.second;
    out << "\n";
  }
  if (!out) throw std::runtime_error(path + ": write error");
}

Model ReadModel(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  Model m;
  std::string line, magic;
  auto bad = [&](size_t no, const std::string& why) {
    return std::runtime_error(path + ":" + std::to_string(no) + ": " + why);
  };
  if (!std::getline(in, line)) throw bad(1, "empty file");
  {
    std::istringstream h(line);
    if (!(h >> magic >> m.topics >> m.words >> m.alpha >> m.beta) || magic != "lda-model" ||
        m.topics == 0 || m.words == 0) {
      throw bad(1, "expected \"lda-model K V alpha beta\"");
    }
  }
  if (!std::getline(in, line)) throw bad(2, "the totals line is missing");
  {
    std::istringstream t(line);
    std::string word;
    t >> word;
    int64_t n;
    while (t >> n) m.totals.push_back(n);
    if (word != "totals" || m.totals.size() != m.topics) {
      throw bad(2, "expected \"totals\" and " + std::to_string(m.topics) + " counts");
    }
  }
  m.rows.resize(m.words);
  for (size_t no = 3; std::getline(in, line); ++no) {
    std::istringstream r(line);
    uint64_t w;
    if (!(r >> w) || w >= m.words)
      throw bad(no, "expected a word id below " + std::to_string(m.words));
    std::string cell;
    while (r >> cell) {
      const size_t colon = cell.find(':');
      char* end = nullptr;
      const unsigned long t = std::strtoul(cell.c_str(), &end, 10);
      if (colon == std::string::npos || end != cell.c_str() + colon || t >= m.topics) {
        throw bad(no, "\"" + cell + "\" is not topic:count");
      }
      const long long n = std::strtoll(cell.c_str() + colon + 1, &end, 10);
      if (*end || n < 0) throw bad(no, "\"" + cell + "\" is not topic:count");
      m.rows[w].emplace_back(static_cast<uint32_t>(t), n);
    }
  }
  return m;
}

namespace {

// Word-major copy of phi: row w holds p(w | t) for every t (one cache-friendly row per token).
std::vector<float> Transpose(const Phi& phi) {
  std::vector<float> out(phi.p.size());
  for (uint32_t t = 0; t < phi.topics; ++t) {
    for (uint32_t w = 0; w < phi.words; ++w) {
      out[static_cast<size_t>(w) * phi.topics + t] = phi.p[static_cast<size_t>(t) * phi.words + w];
    }
  }
  return out;
}

// theta for the tokens at positions start, start + stride, ... of a document.
void FoldIn(const Phi& phi, const float* by_word, const uint32_t* w, size_t len, size_t start,
            size_t stride, double alpha, int iterations, std::vector<double>* theta,
            std::vector<double>* acc, std::vector<double>* r) {
  const uint32_t K = phi.topics;
  theta->assign(K, 1.0 / K);
  for (int it = 0; it < iterations; ++it) {
    acc->assign(K, alpha);
    for (size_t i = start; i < len; i += stride) {
      if (w[i] >= phi.words) continue;
      const float* row = by_word + static_cast<size_t>(w[i]) * K;
      double z = 0;
      for (uint32_t t = 0; t < K; ++t) {
        (*r)[t] = (*theta)[t] * row[t];
        z += (*r)[t];
      }
      if (z <= 0) continue;
      for (uint32_t t = 0; t < K; ++t) (*acc)[t] += (*r)[t] / z;
    }
    double sum = 0;
    for (uint32_t t = 0; t < K; ++t) sum += (*acc)[t];
    for (uint32_t t = 0; t < K; ++t) (*theta)[t] = (*acc)[t] / sum;
  }
}

}  // namespace

Perplexity DocumentCompletion(const Phi& phi, const Corpus& test, double alpha, int iterations) {
  Perplexity out;
  const std::vector<float> by_word = Transpose(phi);
  std::vector<double> theta, acc, r(phi.topics);
  for (size_t d = 0; d < test.docs(); ++d) {
    const uint32_t* w = test.words.data() + test.offsets[d];
    const size_t len = test.length(d);
    if (len < 2) continue;
    FoldIn(phi, by_word.data(), w, len, 0, 2, alpha, iterations, &theta, &acc, &r);
    for (size_t i = 0; i < len; i += 2) out.folded += w[i] < phi.words;
    for (size_t i = 1; i < len; i += 2) {
      if (w[i] >= phi.words) continue;
      const float* row = by_word.data() + static_cast<size_t>(w[i]) * phi.topics;
      double p = 0;
      for (uint32_t t = 0; t < phi.topics; ++t) p += theta[t] * row[t];
      out.log_prob += std::log(std::max(p, 1e-300));
      out.scored++;
    }
  }
  out.perplexity = out.scored ? std::exp(-out.log_prob / static_cast<double>(out.scored)) : 0;
  return out;
}

std::vector<std::vector<double>> InferMixtures(const Phi& phi, const Corpus& docs, double alpha,
                                               int iterations) {
  std::vector<std::vector<double>> out(docs.docs());
  const std::vector<float> by_word = Transpose(phi);
  std::vector<double> acc, r(phi.topics);
  for (size_t d = 0; d < docs.docs(); ++d) {
    FoldIn(phi, by_word.data(), docs.words.data() + docs.offsets[d], docs.length(d), 0, 1, alpha,
           iterations, &out[d], &acc, &r);
  }
  return out;
}

}  // namespace lda
