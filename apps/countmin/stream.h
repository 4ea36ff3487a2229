// Item streams: text (whitespace-separated tokens, or one item per line) and binary files of
// 64-bit ids, cut into parts (the scheduler's tasks) at item boundaries; and a seeded Zipf
// generator for throughput runs.
#ifndef PS_APPS_COUNTMIN_STREAM_H_
#define PS_APPS_COUNTMIN_STREAM_H_

#include <cstdint>
#include <cstring>
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
/// lies in the part, in file order. Text formats: `text`, a view into *buffer (valid until
/// the next call), from the part's first item on (ForEachText cuts it); kU64: `ids`.
struct PartItems {
  std::string_view text;
  std::vector<uint64_t> ids;
  uint64_t bytes = 0;  // bytes of the file read for the part
};

inline bool IsSpace(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/// c ends a text item of the format (a line ends at a newline, a token at any white space).
inline bool EndsItem(char c, Format format) {
  return format == Format::kLines ? c == '\n' : IsSpace(c);
}

/// Calls f(std::string_view item) for each text item (token or line) of text, in order: a
/// reader that counts as it cuts keeps no list of the part's items (which at 8 MB parts
/// outgrows the caches).
template <typename F>
void ForEachText(std::string_view text, Format format, F&& f) {
  const char* p = text.data();
  const char* e = p + text.size();
  if (format == Format::kLines) {
    while (p < e) {
      if (*p == '\n') {  // an empty line is no item
        ++p;
        continue;
      }
      const char* q = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(e - p)));
      if (!q) q = e;
      const char* t = q;
      if (t > p && t[-1] == '\r') --t;
      if (t > p) f(std::string_view(p, static_cast<size_t>(t - p)));
      p = q;
    }
    return;
  }
  while (p < e) {
    while (p < e && IsSpace(*p)) ++p;
    const char* q = p;
    while (q < e && !IsSpace(*q)) ++q;
    if (q > p) f(std::string_view(p, static_cast<size_t>(q - p)));
    p = q;
  }
}
void ReadPart(const std::string& path, Format format, uint64_t part_bytes, int part,
              std::string* buffer, PartItems* out);

/// The items of bytes that hold whole items of the format (a chunk of a stream, as a task's
/// data): text in `bytes`, ids copied out. Throws naming `what` when kU64 bytes are not a whole
/// number of ids.
void ItemsOf(const std::string& bytes, Format format, const std::string& what, PartItems* out);

/// Items from a pipe (stdin), in chunks of about part_bytes: each chunk ends at an item
/// boundary (the partial item at its end waits for the next chunk). With max_wait_s > 0 a
/// chunk also ends when it has waited that long for more input and holds a whole item (a live
/// stream that comes slowly is still counted as it comes).
class ChunkReader {
 public:
  ChunkReader(int fd, Format format, uint64_t part_bytes, double max_wait_s = 0)
      : fd_(fd), format_(format), part_bytes_(part_bytes), max_wait_s_(max_wait_s) {}
  /// The next chunk's items (text in *buffer, valid until the next call); false at the end.
  bool Next(std::string* buffer, PartItems* out);

 private:
  int fd_;
  Format format_;
  uint64_t part_bytes_;
  double max_wait_s_;
  std::string carry_;  // the start of an item cut by the last read
  bool eof_ = false;
  uint64_t offset_ = 0;  // bytes read so far (for errors)
};

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
