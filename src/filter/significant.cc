#include "filter/significant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "filter/codec.h"

namespace ps {
namespace {

constexpr size_t kHeader = 40;

template <typename T>
bool MovedT(const char* old_row, const char* new_row, size_t width, double threshold) {
  for (size_t j = 0; j < width; ++j) {
    T a, b;
    std::memcpy(&a, old_row + j * sizeof(T), sizeof(T));
    std::memcpy(&b, new_row + j * sizeof(T), sizeof(T));
    // NaN compares false: a NaN is always sent.
    if (!(std::fabs(static_cast<double>(b) - static_cast<double>(a)) <= threshold)) return true;
  }
  return false;
}

// Whether a key's values moved by more than threshold. At threshold 0 any change of bits
// counts (so -0 replacing +0 travels too): the filter is then exactly lossless.
bool Moved(const char* old_row, const char* new_row, size_t width, size_t esize, double threshold) {
  if (std::memcmp(old_row, new_row, width * esize) == 0) return false;
  if (!(threshold > 0)) return true;
  return esize == 4 ? MovedT<float>(old_row, new_row, width, threshold)
                    : MovedT<double>(old_row, new_row, width, threshold);
}

}  // namespace

uint64_t SignificantFilter::FrameEpoch(const SArray<char>& in) {
  uint64_t e = 0;
  if (in.size() >= 8) std::memcpy(&e, in.data(), 8);
  return e;
}

SArray<char> SignificantFilter::Encode(int peer, const Key* keys, size_t n, const char* vals,
                                       size_t width, DataType dtype, double threshold) {
  Link& l = send_[peer];
  const uint32_t esize = static_cast<uint32_t>(DataTypeSize(dtype));
  // One width and type per copy; another, or a copy beyond the bound, starts an epoch (the
  // receiver adopts it from the frame's sequence 0, which carries every value).
  if (l.seq > 0 && (l.width != width || l.esize != esize || Bytes(l) > max_bytes_)) {
    l.Clear(l.epoch + 1);
    stats_.epochs++;
  }
  if (l.seq == 0) {
    l.width = static_cast<uint32_t>(width);
    l.esize = esize;
  }
  const size_t row = width * esize, words = (n + 63) / 64;
  auto buf = SArray<char>::Uninitialized(kHeader + 8 * words + n * row);
  char* p = buf.data();
  const uint64_t head[3] = {l.epoch, l.seq, n};
  const uint32_t shape[2] = {static_cast<uint32_t>(width), esize};
  std::memcpy(p, head, 24);
  std::memcpy(p + 24, shape, 8);
  char* bitmap = p + kHeader;
  std::memset(bitmap, 0, 8 * words);
  char* v = bitmap + 8 * words;
  uint64_t sent = 0;
  for (size_t i = 0; i < n; ++i) {
    const char* x = vals + i * row;
    auto it = l.slot.find(keys[i]);
    if (it != l.slot.end() &&
        !Moved(l.vals.data() + it->second * row, x, width, esize, threshold)) {
      continue;
    }
    if (it == l.slot.end()) {
      it = l.slot.emplace(keys[i], static_cast<uint32_t>(l.vals.size() / row)).first;
      l.vals.resize(l.vals.size() + row);
    }
    std::memcpy(l.vals.data() + it->second * row, x, row);
    uint64_t w;
    std::memcpy(&w, bitmap + 8 * (i / 64), 8);
    w |= uint64_t{1} << (i % 64);
    std::memcpy(bitmap + 8 * (i / 64), &w, 8);
    std::memcpy(v, x, row);
    v += row;
    sent++;
  }
  // The bitmap decides which value belongs to which key: guard it (values are as exposed as
  // in an uncoded frame).
  const uint64_t guard = HashBytes(bitmap, 8 * words);
  std::memcpy(p + 32, &guard, 8);
  l.seq++;
  stats_.sent += sent;
  stats_.suppressed += n - sent;
  return buf.Segment(0, static_cast<size_t>(v - buf.data()));
}

void SignificantFilter::Reset(int peer, uint64_t epoch) {
  Link& l = send_[peer];
  if (epoch <= l.epoch) return;
  l.Clear(epoch);
  stats_.epochs++;
}

void SignificantFilter::Refuse(int peer, uint64_t frame_epoch) {
  Link& l = recv_[peer];
  stats_.refused++;
  if (frame_epoch < l.epoch) return;  // from before an epoch already asked for
  l.Clear(std::max(l.epoch, frame_epoch) + 1);
  l.pending_reset = l.epoch;
  stats_.epochs++;
}

uint64_t SignificantFilter::PendingReset(int peer) const {
  auto it = recv_.find(peer);
  return it == recv_.end() ? 0 : it->second.pending_reset;
}

std::string SignificantFilter::Decode(int peer, const Key* keys, size_t n, const SArray<char>& in,
                                      SArray<char>* out, bool* stale) {
  *stale = false;
  if (in.size() < kHeader) return "significant: truncated header";
  uint64_t head[3];
  uint32_t shape[2];
  std::memcpy(head, in.data(), 24);
  std::memcpy(shape, in.data() + 24, 8);
  const uint64_t epoch = head[0], seq = head[1], count = head[2];
  const size_t width = shape[0], esize = shape[1];
  Link& l = recv_[peer];
  auto refuse = [&](const std::string& why) {
    *stale = epoch < l.epoch;
    Refuse(peer, epoch);
    return "significant: " + why;
  };
  if (epoch < l.epoch) return refuse("a frame of an epoch already left");
  if (count != n)
    return refuse("frame codes " + std::to_string(count) + " keys, request has " +
                  std::to_string(n));
  if ((esize != 4 && esize != 8) || width == 0 || width > (1u << 20)) {
    return refuse("bad value shape");
  }
  const bool adopt = seq == 0 && epoch > l.epoch;
  if (!adopt && !(epoch == l.epoch && seq == l.seq)) {
    return refuse("frame " + std::to_string(epoch) + "/" + std::to_string(seq) + " out of order (" +
                  std::to_string(l.epoch) + "/" + std::to_string(l.seq) + " expected)");
  }
  if (!adopt && seq > 0 && (width != l.width || esize != l.esize)) {
    return refuse("value shape changed within an epoch");
  }
  const size_t row = width * esize, words = (n + 63) / 64;
  if (in.size() < kHeader + 8 * words) return refuse("truncated bitmap");
  const char* bitmap = in.data() + kHeader;
  uint64_t guard;
  std::memcpy(&guard, in.data() + 32, 8);
  if (guard != HashBytes(bitmap, 8 * words)) return refuse("bitmap does not match its hash");
  const uint64_t sent = BitmapCount(bitmap, n);
  if (in.size() - kHeader - 8 * words != sent * row) return refuse("values do not match bitmap");
  // Check before changing anything: every value not sent must be in the copy.
  const bool fresh = adopt || seq == 0;
  auto bit = [&](size_t i) {
    uint64_t w;
    std::memcpy(&w, bitmap + 8 * (i / 64), 8);
    return (w >> (i % 64)) & 1;
  };
  for (size_t i = 0; i < n; ++i) {
    if (!bit(i) && (fresh || l.slot.find(keys[i]) == l.slot.end())) {
      return refuse("key " + std::to_string(keys[i]) + " not sent and not held");
    }
  }
  if (adopt) l.Clear(epoch);
  if (seq == 0) {
    l.width = static_cast<uint32_t>(width);
    l.esize = static_cast<uint32_t>(esize);
  }
  if (l.pending_reset && epoch >= l.pending_reset) l.pending_reset = 0;
  // 8-byte aligned (readable as any type); every byte of the n * row is written below.
  auto store = SArray<uint64_t>::Uninitialized((n * row + 7) / 8);
  char* o = reinterpret_cast<char*>(store.data());
  const char* v = bitmap + 8 * words;
  for (size_t i = 0; i < n; ++i) {
    if (bit(i)) {
      auto it = l.slot.find(keys[i]);
      if (it == l.slot.end()) {
        it = l.slot.emplace(keys[i], static_cast<uint32_t>(l.vals.size() / row)).first;
        l.vals.resize(l.vals.size() + row);
      }
      std::memcpy(l.vals.data() + it->second * row, v, row);
      std::memcpy(o + i * row, v, row);
      v += row;
    } else {
      std::memcpy(o + i * row, l.vals.data() + l.slot.find(keys[i])->second * row, row);
    }
  }
  l.seq = seq + 1;
  *out = SArray<char>(store).Segment(0, n * row);
  return "";
}

}  // namespace ps
