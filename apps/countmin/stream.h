// Item streams: text (whitespace-separated tokens, or one item per line) and binary files of
// 64-bit ids, cut into parts (the scheduler's tasks) at item boundaries; and a seeded Zipf
// generator for throughput runs.
#ifndef PS_APPS_COUNTMIN_STREAM_H_
#define PS_APPS_COUNTMIN_STREAM_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace countmin {

enum class Format { kTokens, kLines, kU64 };
/// "tokens", "lines" or "u64"; throws naming --format otherwise.
Format ParseFormat(const std::string& name);

/// How many parts of at most part_bytes (rounded to whole 8-byte records for kU64) a file
/// makes; throws naming the file when it cannot be read or (kU64) its size is not a multiple
/// of 8.
int CountParts(const std::string& path, Format format, uint64_t part_bytes);

/// The items of part `part` of a file cut as CountParts cut it: every item whose first byte
/// lies in the part, in file order. Text items are views into *buffer (valid until the next
/// call); for kU64, ids gets the ids and items stays empty.
struct PartItems {
  std::vector<std::string_view> items;
  std::vector<uint64_t> ids;
  uint64_t bytes = 0;  // bytes of the file read for the part
};
void ReadPart(const std::string& path, Format format, uint64_t part_bytes, int part,
              std::string* buffer, PartItems* out);

/// Zipf-distributed ranks in [1, n] with P(k) proportional to k^-s (s > 0), by rejection-
/// inversion (Hörmann and Derflinger, 1996): O(1) expected work per sample for any n.
class Zipf {
 public:
  Zipf(uint64_t n, double s, uint64_t seed);
  uint64_t Next();

 private:
  double H(double x) const;          // x^-s
  double HIntegral(double x) const;  // its integral from 1: (x^(1-s) - 1) / (1 - s)
  double HIntegralInverse(double x) const;
  double Uniform();
  uint64_t n_;
  double s_, h_x1_, h_n_, s_cut_;
  uint64_t state_;
};

/// Writes `items` Zipf(n, s) ranks as little-endian uint64 to path; throws naming the file.
void WriteZipf(const std::string& path, uint64_t items, uint64_t n, double s, uint64_t seed);

}  // namespace countmin

#endif  // PS_APPS_COUNTMIN_STREAM_H_
