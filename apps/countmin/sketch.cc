#include "countmin/sketch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace countmin {
namespace {

uint64_t SplitMix(uint64_t* x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t ItemId(std::string_view item) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : item) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  uint64_t x = h;
  return SplitMix(&x);
}

Shape Shape::FromError(double epsilon, double delta) {
  if (!(epsilon > 0 && epsilon < 1)) throw std::runtime_error("--epsilon must be in (0, 1)");
  if (!(delta > 0 && delta < 1)) throw std::runtime_error("--delta must be in (0, 1)");
  const double w = std::ceil(std::exp(1.0) / epsilon);
  const double d = std::ceil(std::log(1.0 / delta));
  if (w > (1u << 31)) throw std::runtime_error("--epsilon is too small: width above 2^31");
  return {static_cast<uint32_t>(w), static_cast<uint32_t>(std::max(1.0, d))};
}

HashFamily::HashFamily(Shape shape, uint64_t seed) : width_(shape.width), seed_(seed) {
  if (shape.width == 0 || shape.depth == 0) {
    throw std::runtime_error("a sketch needs width and depth of at least 1");
  }
  uint64_t s = seed;
  for (uint32_t j = 0; j < shape.depth; ++j) {
    uint64_t a = 0;
    while (a == 0) a = SplitMix(&s) % kPrime;
    a_.push_back(a);
    b_.push_back(SplitMix(&s) % kPrime);
  }
}

void LocalSketch::AddConservative(uint64_t x, int64_t count) {
  const uint32_t d = hash_.shape().depth;
  int64_t target = Estimate(x) + count;
  for (uint32_t j = 0; j < d; ++j) {
    int64_t& c = cells_[hash_.Cell(j, x)];
    c = std::max(c, target);
  }
}

uint64_t LocalSketch::Saturate(int64_t cap) {
  uint64_t at = 0;
  for (int64_t& c : cells_) {
    if (c >= cap) {
      c = cap;
      ++at;
    }
  }
  return at;
}

int64_t LocalSketch::Estimate(uint64_t x) const {
  const uint32_t d = hash_.shape().depth;
  int64_t e = std::numeric_limits<int64_t>::max();
  for (uint32_t j = 0; j < d; ++j) e = std::min(e, cells_[hash_.Cell(j, x)]);
  return e;
}

void WriteSketch(const std::string& path, Shape shape, uint64_t seed,
                 const std::vector<int64_t>& cells) {
  if (cells.size() != shape.cells()) throw std::runtime_error("WriteSketch: cells do not fit");
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error(path + ": cannot write");
  out << "countmin " << shape.width << " " << shape.depth << " " << seed << "\n";
  out.write(reinterpret_cast<const char*>(cells.data()),
            static_cast<std::streamsize>(cells.size() * sizeof(int64_t)));
  if (!out) throw std::runtime_error(path + ": write failed");
}

LocalSketch ReadSketch(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read");
  std::string header;
  std::getline(in, header);
  std::istringstream h(header);
  std::string magic;
  Shape shape;
  uint64_t seed = 0;
  if (!(h >> magic >> shape.width >> shape.depth >> seed) || magic != "countmin" ||
      shape.width == 0 || shape.depth == 0) {
    throw std::runtime_error(path + ":1: not a sketch header (want \"countmin W D SEED\")");
  }
  LocalSketch s(shape, seed);
  auto* cells = s.mutable_cells();
  in.read(reinterpret_cast<char*>(cells->data()),
          static_cast<std::streamsize>(cells->size() * sizeof(int64_t)));
  if (in.gcount() != static_cast<std::streamsize>(cells->size() * sizeof(int64_t)) ||
      in.peek() != std::char_traits<char>::eof()) {
    throw std::runtime_error(path + ": cell data does not match " + std::to_string(shape.width) +
                             " x " + std::to_string(shape.depth));
  }
  return s;
}

}  // namespace countmin
