#include "countmin/stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace countmin {
namespace {

uint64_t SizeOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    throw std::runtime_error(path + ": " + std::strerror(errno));
  }
  return static_cast<uint64_t>(st.st_size);
}

class File {
 public:
  explicit File(const std::string& path) : path_(path), fd_(open(path.c_str(), O_RDONLY)) {
    if (fd_ < 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  }
  ~File() { close(fd_); }
  // Appends bytes [off, off + n) (fewer at the end of the file) to *out; returns how many.
  uint64_t Read(uint64_t off, uint64_t n, std::string* out) const {
    const size_t at = out->size();
    out->resize(at + n);
    uint64_t got = 0;
    while (got < n) {
      const ssize_t r = pread(fd_, &(*out)[at + got], n - got, static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw std::runtime_error(path_ + ": " + std::strerror(errno));
      if (r == 0) break;
      got += static_cast<uint64_t>(r);
    }
    out->resize(at + got);
    return got;
  }

 private:
  std::string path_;
  int fd_;
};

uint64_t RecordBytes(uint64_t part_bytes) { return std::max<uint64_t>(8, part_bytes / 8 * 8); }

}  // namespace

// The items of a buffer's bytes [from, end), which end at an item boundary.
static void SetItems(const std::string& buffer, size_t from, Format format, PartItems* out);

Format ParseFormat(const std::string& name) {
  if (name == "tokens") return Format::kTokens;
  if (name == "lines") return Format::kLines;
  if (name == "u64") return Format::kU64;
  throw std::runtime_error("--format must be tokens, lines or u64, not '" + name + "'");
}

int CountParts(const std::string& path, Format format, uint64_t part_bytes) {
  const uint64_t size = SizeOf(path);
  if (part_bytes == 0) throw std::runtime_error("--part_mb must be positive");
  if (format == Format::kU64) {
    if (size % 8 != 0) {
      throw std::runtime_error(path + ": " + std::to_string(size) +
                               " bytes is not a whole number of 8-byte ids (the last record "
                               "starts at byte " +
                               std::to_string(size / 8 * 8) + ")");
    }
    part_bytes = RecordBytes(part_bytes);
  }
  const uint64_t parts = std::max<uint64_t>(1, (size + part_bytes - 1) / part_bytes);
  if (parts > (1u << 30)) throw std::runtime_error(path + ": too many parts; raise --part_mb");
  return static_cast<int>(parts);
}

void ReadPart(const std::string& path, Format format, uint64_t part_bytes, int part,
              std::string* buffer, PartItems* out) {
  out->ids.clear();
  buffer->clear();
  File f(path);
  const uint64_t size = SizeOf(path);
  if (format == Format::kU64) {
    part_bytes = RecordBytes(part_bytes);
    const uint64_t begin = std::min(size, static_cast<uint64_t>(part) * part_bytes);
    const uint64_t end = std::min(size, begin + part_bytes);
    out->bytes = f.Read(begin, end - begin, buffer);
    if (out->bytes % 8 != 0) throw std::runtime_error(path + ": changed while being read");
    SetItems(*buffer, 0, format, out);
    return;
  }
  const uint64_t begin = std::min(size, static_cast<uint64_t>(part) * part_bytes);
  const uint64_t end = std::min(size, begin + part_bytes);
  // One byte before the part says whether its first bytes finish the previous part's item.
  const uint64_t from = begin > 0 ? begin - 1 : 0;
  f.Read(from, end - from, buffer);
  // The item that starts before `end` and crosses it is this part's: read on to its end.
  for (uint64_t at = end; at < size && !buffer->empty();) {
    const char last = buffer->back();
    if (EndsItem(last, format)) break;
    const uint64_t got = f.Read(at, 1 << 16, buffer);
    if (got == 0) break;
    // Stop at the first delimiter of what was read (the rest belongs to the next part).
    const size_t start = buffer->size() - got;
    size_t cut = buffer->size();
    for (size_t i = start; i < buffer->size(); ++i) {
      if (EndsItem((*buffer)[i], format)) {
        cut = i + 1;
        break;
      }
    }
    buffer->resize(cut);
    at += got;
    if (cut < start + got) break;
  }
  out->bytes = buffer->size();
  size_t skip = 0;
  if (begin > 0 && !buffer->empty()) {
    // Skip the tail of the previous part's item, if the part starts inside one.
    const bool at_start = EndsItem((*buffer)[0], format);
    skip = 1;
    if (!at_start) {
      while (skip < buffer->size() && !EndsItem((*buffer)[skip], format)) ++skip;
    }
  }
  SetItems(*buffer, skip, format, out);
}

bool ChunkReader::Next(std::string* buffer, PartItems* out) {
  if (eof_ && carry_.empty()) return false;
  buffer->swap(carry_);
  carry_.clear();
  uint64_t want = part_bytes_;
  size_t end = 0;
  const auto start = std::chrono::steady_clock::now();
  // Where the whole items of the buffer end.
  auto whole = [&] {
    size_t e = buffer->size();
    if (format_ == Format::kU64) return e / 8 * 8;
    while (e > 0 && !EndsItem((*buffer)[e - 1], format_)) --e;
    return e;
  };
  for (;;) {
    bool timed_out = false;
    while (!eof_ && buffer->size() < want) {
      if (max_wait_s_ > 0) {
        const double left =
            max_wait_s_ -
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // Past the wait, without a whole item yet: wait as long as the rest of one takes.
        const int ms = left > 0 ? static_cast<int>(left * 1000) + 1 : (whole() > 0 ? 0 : -1);
        pollfd p{fd_, POLLIN, 0};
        const int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) throw std::runtime_error(std::string("stdin: ") + std::strerror(errno));
        if (r == 0 && whole() > 0) {
          timed_out = true;
          break;
        }
        if (r == 0) continue;
      }
      const size_t at = buffer->size();
      buffer->resize(at + (1 << 16));
      const ssize_t r = read(fd_, &(*buffer)[at], 1 << 16);
      buffer->resize(at + static_cast<size_t>(std::max<ssize_t>(r, 0)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw std::runtime_error(std::string("stdin: ") + std::strerror(errno));
      if (r == 0) eof_ = true;
    }
    // The item cut at the end waits for the next chunk.
    end = eof_ ? buffer->size() : whole();
    if (eof_ || timed_out || end > 0) break;
    want = buffer->size() + part_bytes_;  // one item longer than a chunk: read on to its end
  }
  if (format_ == Format::kU64 && end % 8 != 0) {
    throw std::runtime_error("stdin: " + std::to_string(offset_ + buffer->size()) +
                             " bytes is not a whole number of 8-byte ids (the last record "
                             "starts at byte " +
                             std::to_string(offset_ + end / 8 * 8) + ")");
  }
  offset_ += end;
  carry_.assign(*buffer, end, std::string::npos);
  buffer->resize(end);
  out->bytes = end;
  SetItems(*buffer, 0, format_, out);
  return true;
}

void ItemsOf(const std::string& bytes, Format format, const std::string& what, PartItems* out) {
  if (format == Format::kU64 && bytes.size() % 8 != 0) {
    throw std::runtime_error(what + ": " + std::to_string(bytes.size()) +
                             " bytes is not a whole number of 8-byte ids");
  }
  out->bytes = bytes.size();
  SetItems(bytes, 0, format, out);
}

static void SetItems(const std::string& buffer, size_t from, Format format, PartItems* out) {
  out->ids.clear();
  out->text = std::string_view(buffer).substr(from);
  if (format == Format::kU64) {  // little-endian hosts
    out->ids.resize(out->text.size() / 8);
    std::memcpy(out->ids.data(), out->text.data(), out->ids.size() * 8);
    out->text = {};
  }
}

Zipf::Zipf(uint64_t n, double s, uint64_t seed) : n_(n), s_(s), state_(seed) {
  if (n == 0) throw std::runtime_error("--zipf_distinct must be positive");
  if (!(s > 0)) throw std::runtime_error("--zipf_exponent must be positive");
  h_x1_ = HIntegral(1.5) - 1.0;
  h_n_ = HIntegral(static_cast<double>(n) + 0.5);
  s_cut_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
}

double Zipf::H(double x) const { return std::exp(-s_ * std::log(x)); }

double Zipf::HIntegral(double x) const {
  const double lx = std::log(x), t = (1.0 - s_) * lx;
  // expm1(t) / t, stable near t = 0 (s close to 1).
  const double f = std::fabs(t) > 1e-8 ? std::expm1(t) / t : 1.0 + t * 0.5 * (1.0 + t / 3.0);
  return f * lx;
}

double Zipf::HIntegralInverse(double x) const {
  double t = x * (1.0 - s_);
  if (t < -1.0) t = -1.0;
  const double f = std::fabs(t) > 1e-8 ? std::log1p(t) / t : 1.0 - t * (0.5 - t / 3.0);
  return std::exp(f * x);
}

double Zipf::Uniform() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

uint64_t Zipf::Next() {
  for (;;) {
    const double u = h_n_ + Uniform() * (h_x1_ - h_n_);
    const double x = HIntegralInverse(u);
    double k = std::floor(x + 0.5);
    if (k < 1) k = 1;
    if (k > static_cast<double>(n_)) k = static_cast<double>(n_);
    if (k - x <= s_cut_ || u >= HIntegral(k + 0.5) - H(k)) return static_cast<uint64_t>(k);
  }
}

void WriteZipf(const std::string& path, uint64_t items, uint64_t n, double s, uint64_t seed) {
  Zipf z(n, s, seed);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error(path + ": " + std::strerror(errno));
  std::vector<uint64_t> buf(1 << 16);
  for (uint64_t done = 0; done < items;) {
    const size_t m = static_cast<size_t>(std::min<uint64_t>(buf.size(), items - done));
    for (size_t i = 0; i < m; ++i) buf[i] = z.Next();
    if (std::fwrite(buf.data(), sizeof(uint64_t), m, f) != m) {
      std::fclose(f);
      throw std::runtime_error(path + ": write failed");
    }
    done += m;
  }
  if (std::fclose(f) != 0) throw std::runtime_error(path + ": write failed");
}

}  // namespace countmin
