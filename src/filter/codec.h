// Frame codecs of the filter chain (DESIGN §9). Pure functions: a frame in, a frame out, and
// every decoder checks what it reads, so a corrupted or truncated frame gives an error, never
// a crash or a wrong value.
#ifndef PS_FILTER_CODEC_H_
#define PS_FILTER_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "ps/base.h"
#include "ps/sarray.h"
#include "util/rng.h"

namespace ps {

/// Codec tags as recorded per data frame in the message header (Meta.codec).
enum class Codec : uint32_t {
  kNone = 0,
  kDeltaVarint = 1,   // strictly increasing 64-bit keys: first key, then gaps - 1, group varint
  kZeroSuppress = 2,  // values: a bitmap of the nonzero ones, then those values
  kSnappy = 3,        // any bytes
  kQuantize8 = 4,     // float/double values to 8 bits, stochastic rounding (lossy)
  kQuantize16 = 5,    // ... to 16 bits (lossy)
  kKeyCache = 6,      // a key list the receiver caches: (list id, hash, count), 24 bytes
};
const char* CodecName(Codec c);

/// Delta + group-varint coding of sorted unique keys. Returns false when the keys are not
/// strictly increasing. Layout: varint count; the first key (8 bytes); one control byte per
/// four gaps (2 bits each: the gap takes 1, 2, 4 or 8 bytes); then each gap - 1, little-endian,
/// in its length. Lengths apart from the data (as in Stream VByte) let the decoder read four
/// gaps at once instead of walking continuation bits byte by byte.
bool EncodeDeltaVarint(const Key* keys, size_t n, SArray<char>* out);
/// "" or why the frame is malformed.
std::string DecodeDeltaVarint(const SArray<char>& in, SArray<char>* out);

/// Zero suppression of `n` values of `esize` bytes (a value is zero when all its bytes are).
/// Layout: uint64 count, uint64 esize, the bitmap (one bit per value, 64 per word), then the
/// nonzero values in order.
void EncodeZeroSuppress(const char* vals, size_t n, size_t esize, SArray<char>* out);
std::string DecodeZeroSuppress(const SArray<char>& in, SArray<char>* out);

/// Snappy with the raw size checked on the way back; max_size bounds what a frame may claim,
/// and so does the format's largest expansion (64 bytes out of 3): nothing is allocated for a
/// claim the frame cannot hold.
void EncodeSnappy(const SArray<char>& in, SArray<char>* out);
std::string DecodeSnappy(const SArray<char>& in, size_t max_size, SArray<char>* out);

/// Fixed-point quantization of float or double values (dtype) to `bits` = 8 or 16 with
/// unbiased stochastic rounding: q = floor(x / scale * M + u), u uniform in [0, 1),
/// M = 2^(bits-1) - 1, scale = max |x| of the frame. Layout: uint64 count, uint32 dtype,
/// uint32 bits, double scale, then the integers. NaN or infinite values: returns false.
bool EncodeQuantize(const SArray<char>& in, DataType dtype, int bits, Rng* rng, SArray<char>* out);
std::string DecodeQuantize(const SArray<char>& in, SArray<char>* out);

/// Set bits among the first n of a bitmap of 64-bit words (the bits past n are ignored).
uint64_t BitmapCount(const char* bitmap, uint64_t n);

/// Fraction of zero values among up to `sample` evenly spread values (the cheap estimate).
double ZeroFraction(const char* vals, size_t n, size_t esize, size_t sample = 1024);

/// 64-bit hash of a byte range (splitmix64 over 8-byte words and the length).
uint64_t HashBytes(const char* data, size_t n);

}  // namespace ps

#endif  // PS_FILTER_CODEC_H_
