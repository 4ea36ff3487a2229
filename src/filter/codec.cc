#include "filter/codec.h"

#include <snappy.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ps {
namespace {

inline char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

// Reads a varint from [*p, end); false when truncated or longer than 10 bytes.
inline bool GetVarint(const char** p, const char* end, uint64_t* v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    const uint8_t b = static_cast<uint8_t>(*(*p)++);
    r |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return true;
    }
  }
  return false;
}

template <typename T>
void Put(char** p, T v) {
  std::memcpy(*p, &v, sizeof(T));
  *p += sizeof(T);
}

template <typename T>
bool Get(const char** p, const char* end, T* v) {
  if (static_cast<size_t>(end - *p) < sizeof(T)) return false;
  std::memcpy(v, *p, sizeof(T));
  *p += sizeof(T);
  return true;
}

// The largest |x| of the frame; false when a value is NaN or infinite. |x| as an integer (the
// bits without the sign) orders like the value and puts infinities and NaNs above every
// finite number, so one integer max, which the compiler vectorizes, answers both.
template <typename V, typename U>
__attribute__((target_clones("avx2", "default"))) bool ScaleOf(const V* __restrict x, size_t n,
                                                               double* scale) {
  constexpr U kAbs = ~U{0} >> 1;
  U m = 0;
  for (size_t i = 0; i < n; ++i) {
    U b;
    std::memcpy(&b, x + i, sizeof(U));
    b &= kAbs;
    m = b > m ? b : m;
  }
  V v;
  std::memcpy(&v, &m, sizeof(V));
  *scale = static_cast<double>(v);
  return std::isfinite(v);
}

// A 32-bit hash with full avalanche (Wellons' lowbias32): random bits for element i from a
// per-frame seed, with no state carried from one element to the next, so the loop runs in
// vector lanes.
inline uint32_t Hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// Compiled for AVX2 too (chosen at load time where the CPU has it): without 32-bit lane
// multiplies (SSE4.1) the hash is mostly shuffles. Blocks of two loops, each of one lane width
// (32-bit hashes, then the arithmetic in doubles), so both vectorize without spills.
template <typename V, typename Q>
__attribute__((target_clones("avx2", "default"))) void QuantizeRun(const V* __restrict x, size_t n,
                                                                   double f, uint64_t seed,
                                                                   Q* __restrict q) {
  constexpr int top = std::numeric_limits<Q>::max();  // M = 2^(bits-1) - 1
  constexpr double shift = top + 1.0, hi = 2.0 * top + 1.0;
  const uint32_t s0 = static_cast<uint32_t>(seed), s1 = static_cast<uint32_t>(seed >> 32);
  constexpr size_t kBlock = 512;
  int32_t r[kBlock];
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t m = std::min(kBlock, n - b);
    const uint32_t base = static_cast<uint32_t>(b);
    for (uint32_t j = 0; j < m; ++j) {
      r[j] = static_cast<int32_t>(Hash32(((base + j) ^ s0) * 0x9E3779B1U + s1) >> 1);
    }
    const V* __restrict xb = x + b;
    Q* __restrict qb = q + b;
    // u uniform in [0, 1) on a 2^-31 grid: floor(y + u) has expectation y up to 2^-31 of a
    // step. y + u + M + 1 is clamped to [1, 2M + 1], where truncation is the floor and much
    // cheaper than std::floor; subtracting M + 1 then gives q in [-M, M]. 8 bits work in
    // floats (twice the lanes): below 256 a float resolves 2^-16 of a step, so the rounding
    // adds a bias of at most about 2^-16 of a step; 16 bits need doubles for the same.
    using T = typename std::conditional<sizeof(Q) == 1, float, double>::type;
    const T tf = static_cast<T>(f), tshift = static_cast<T>(shift), thi = static_cast<T>(hi);
    for (size_t j = 0; j < m; ++j) {
      T y = static_cast<T>(xb[j]) * tf + static_cast<T>(r[j]) * static_cast<T>(0x1.0p-31) + tshift;
      y = y > T(1) ? y : T(1);  // written so that it maps to vector max and min
      y = y < thi ? y : thi;
      qb[j] = static_cast<Q>(static_cast<int32_t>(y) - (top + 1));
    }
  }
}

template <typename V>
bool Quantize(const V* __restrict x, size_t n, int bits, Rng* rng, SArray<char>* out) {
  double scale = 0;
  using U = typename std::conditional<sizeof(V) == 4, uint32_t, uint64_t>::type;
  if (!ScaleOf<V, U>(x, n, &scale)) return false;
  const size_t qsize = bits == 8 ? 1 : 2;
  auto buf = SArray<char>::Uninitialized(24 + n * qsize);
  char* p = buf.data();
  Put<uint64_t>(&p, n);
  Put<uint32_t>(&p, std::is_same<V, float>::value ? static_cast<uint32_t>(DataType::kFloat)
                                                  : static_cast<uint32_t>(DataType::kDouble));
  Put<uint32_t>(&p, static_cast<uint32_t>(bits));
  Put<double>(&p, scale);
  const double m = bits == 8 ? 127.0 : 32767.0;
  const double f = scale > 0 ? m / scale : 0;
  const uint64_t seed = rng->Next();
  if (bits == 8) {
    QuantizeRun(x, n, f, seed, reinterpret_cast<int8_t*>(p));
  } else {
    QuantizeRun(x, n, f, seed, reinterpret_cast<int16_t*>(p));  // 24-byte header: aligned
  }
  *out = buf;
  return true;
}

template <typename V>
void Dequantize(const char* p, size_t n, int bits, double scale, V* out) {
  const double m = bits == 8 ? 127.0 : 32767.0;
  const double f = scale / m;
  for (size_t i = 0; i < n; ++i) {
    double q;
    if (bits == 8) {
      int8_t v;
      std::memcpy(&v, p + i, 1);
      q = v;
    } else {
      int16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      q = v;
    }
    out[i] = static_cast<V>(q * f);
  }
}

}  // namespace

const char* CodecName(Codec c) {
  switch (c) {
    case Codec::kNone:
      return "none";
    case Codec::kDeltaVarint:
      return "delta";
    case Codec::kZeroSuppress:
      return "zero";
    case Codec::kSnappy:
      return "snappy";
    case Codec::kQuantize8:
      return "quant8";
    case Codec::kQuantize16:
      return "quant16";
    case Codec::kKeyCache:
      return "keycache";
  }
  return "?";
}

namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "gaps are stored little-endian");

// The byte length of a gap's code: 0..3 for 1, 2, 4, 8 bytes.
inline uint32_t GapCode(uint64_t g) {
  // The index of the highest nonzero byte (0..7), mapped 0->0, 1->1, 2..3->2, 4..7->3 by a
  // table packed in one constant.
  const int top = (63 - __builtin_clzll(g | 1)) >> 3;
  return (0xFFA4u >> (2 * top)) & 3;
}
constexpr uint64_t kGapMask[4] = {0xff, 0xffff, 0xffffffffull, ~uint64_t{0}};

// Per control byte: where its four gaps start in the data and how many bytes they take.
struct GroupTable {
  uint8_t off[256][4];
  uint8_t total[256];
  GroupTable() {
    for (int c = 0; c < 256; ++c) {
      int at = 0;
      for (int j = 0; j < 4; ++j) {
        off[c][j] = static_cast<uint8_t>(at);
        at += 1 << ((c >> (2 * j)) & 3);
      }
      total[c] = static_cast<uint8_t>(at);
    }
  }
};
const GroupTable& Groups() {
  static const GroupTable t;  // a constant table, built once
  return t;
}

#if defined(__x86_64__)
// For each control byte whose four codes are at most 2 (gaps below 2^32): the pshufb pattern
// that packs four 32-bit lanes into their 1, 2 or 4 low bytes, back to back.
struct PackTable {
  alignas(16) uint8_t shuf[256][16];
  PackTable() {
    for (int c = 0; c < 256; ++c) {
      int at = 0;
      for (int b = 0; b < 16; ++b) shuf[c][b] = 0x80;  // zero bytes past the group
      for (int j = 0; j < 4; ++j) {
        const int len = 1 << ((c >> (2 * j)) & 3);
        for (int b = 0; b < len && b < 4 && at < 16; ++b)
          shuf[c][at++] = static_cast<uint8_t>(4 * j + b);
      }
    }
  }
};
const PackTable& Packs() {
  static const PackTable t;  // a constant table, built once
  return t;
}

// Four 2-bit codes from three 4-lane masks (lane i's code is how many masks have bit i):
// bit i of m goes to bit 2i.
constexpr uint8_t kSpread[16] = {0x00, 0x01, 0x04, 0x05, 0x10, 0x11, 0x14, 0x15,
                                 0x40, 0x41, 0x44, 0x45, 0x50, 0x51, 0x54, 0x55};

// Whole groups of four gaps in AVX2 lanes: gaps and their codes for four keys at a time, and
// a group whose gaps all fit 32 bits leaves as one 16-byte store of its packed bytes (one
// pointer advance per group instead of four). Stops when the output nears `limit`. Returns
// the groups done; *bad is set when a pair of keys is out of order.
__attribute__((target("avx2"))) size_t EncodeGroupsAvx2(const Key* keys, size_t groups, char* ctrl,
                                                        char** dp, const char* limit, bool* bad) {
  const GroupTable& gt = Groups();
  const PackTable& pt = Packs();
  const __m256i one = _mm256_set1_epi64x(1), zero = _mm256_setzero_si256();
  const __m256i sign = _mm256_set1_epi64x(static_cast<int64_t>(0x8000000000000000ull));
  const __m256i low32 = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
  __m256i unsorted = zero;
  char* d = *dp;
  size_t g = 0;
  for (; g < groups && d <= limit; ++g) {
    const Key* k = keys + 4 * g;
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 1));
    // b <= a, unsigned: flip the signs and compare signed.
    unsorted = _mm256_or_si256(
        unsorted,
        _mm256_or_si256(_mm256_cmpeq_epi64(a, b),
                        _mm256_cmpgt_epi64(_mm256_xor_si256(a, sign), _mm256_xor_si256(b, sign))));
    const __m256i gap = _mm256_sub_epi64(_mm256_sub_epi64(b, a), one);
    const int m1 = ~_mm256_movemask_pd(
                       _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_srli_epi64(gap, 8), zero))) &
                   15;
    const int m2 = ~_mm256_movemask_pd(
                       _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_srli_epi64(gap, 16), zero))) &
                   15;
    const int m3 = ~_mm256_movemask_pd(
                       _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_srli_epi64(gap, 32), zero))) &
                   15;
    const int c = kSpread[m1] + kSpread[m2] + kSpread[m3];
    ctrl[g] = static_cast<char>(c);
    if (m3 == 0) {
      const __m128i g32 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(gap, low32));
      const __m128i packed =
          _mm_shuffle_epi8(g32, _mm_load_si128(reinterpret_cast<const __m128i*>(pt.shuf[c])));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), packed);
    } else {
      alignas(32) uint64_t lanes[4];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), gap);
      for (int j = 0; j < 4; ++j) std::memcpy(d + gt.off[c][j], &lanes[j], 8);
    }
    d += gt.total[c];
  }
  *bad = !_mm256_testz_si256(unsorted, unsorted);
  *dp = d;
  return g;
}

bool HaveAvx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

}  // namespace

// Gaps - 1 of keys[0..m] and their length codes; true when a pair is out of order. No
// branches and no chain between elements, so it runs in vector lanes. Only machines without
// AVX2 get here (the others take EncodeGroupsAvx2).
bool GapsOf(const Key* __restrict k, size_t m, uint64_t* __restrict gap,
            uint64_t* __restrict code) {
  uint64_t bad = 0;
  for (size_t j = 0; j < m; ++j) {
    bad |= k[j + 1] <= k[j];
    const uint64_t g = k[j + 1] - k[j] - 1;
    gap[j] = g;
    // 64-bit codes: the same lane width as the keys, so no packing between lanes.
    code[j] = static_cast<uint64_t>(g > 0xff) + (g > 0xffff) + (g > 0xffffffffull);
  }
  return bad != 0;
}

bool EncodeDeltaVarint(const Key* keys, size_t n, SArray<char>* out) {
  const size_t gaps = n > 0 ? n - 1 : 0, groups = (gaps + 3) / 4;
  // Sized for dense keys (two bytes a gap) and grown when gaps are larger: a buffer of the
  // worst case (8 bytes a gap) costs more in fresh pages than the coding itself. Every gap is
  // stored as 8 bytes and the pointer advances by its length, so 8 bytes of slack follow.
  auto buf = SArray<char>::Uninitialized(32 + groups + 2 * gaps + 40);
  char* p = PutVarint(buf.data(), n);
  if (n == 0) {
    *out = buf.Segment(0, static_cast<size_t>(p - buf.data()));
    return true;
  }
  std::memcpy(p, &keys[0], 8);
  p += 8;
  const size_t ctrl_at = static_cast<size_t>(p - buf.data());
  char* d = p + groups;
  size_t g = 0;
  // Whole groups, in blocks: the gaps and their length codes first, in a loop that runs in
  // vector lanes; then the stores, whose only chain is the output pointer.
  bool unsorted = false;
  // Locals, not buf's members: stores through a char* could alias those, forcing reloads.
  const char* const limit = buf.data() + buf.size() - 40;
  char* const ctrl = buf.data() + ctrl_at;
  constexpr size_t kBlock = 256;  // gaps, a multiple of 4
  uint64_t gap[kBlock];
  uint64_t code[kBlock];
#if defined(__x86_64__)
  if (HaveAvx2()) {
    // Whole groups only: the lanes read keys[4g..4g+4], so the last full group is the last.
    bool bad = false;
    g = EncodeGroupsAvx2(keys, gaps / 4, ctrl, &d, limit, &bad);
    unsorted |= bad;
  }
#endif
  while (4 * g + 4 <= gaps && d <= limit) {
    const size_t m = std::min(kBlock, (gaps - 4 * g) & ~size_t{3});
    unsorted |= GapsOf(keys + 4 * g, m, gap, code);
    size_t j = 0;
    for (; j < m && d <= limit; j += 4, ++g) {
      for (int x = 0; x < 4; ++x) {
        std::memcpy(d, &gap[j + x], 8);
        d += size_t{1} << code[j + x];
      }
      ctrl[g] = static_cast<char>(code[j] | code[j + 1] << 2 | code[j + 2] << 4 | code[j + 3] << 6);
    }
  }
  if (unsorted) return false;
  for (; g < groups; ++g) {
    if (d + 40 > buf.data() + buf.size()) {
      const size_t used = static_cast<size_t>(d - buf.data());
      auto bigger = SArray<char>::Uninitialized(used + 8 * (gaps - 4 * g) + 40);
      std::memcpy(bigger.data(), buf.data(), used);
      buf = bigger;
      d = buf.data() + used;
    }
    const size_t b = 1 + 4 * g, e = std::min(b + 4, n);
    uint32_t c = 0;
    for (size_t i = b; i < e; ++i) {
      if (keys[i] <= keys[i - 1]) return false;
      const uint64_t gap = keys[i] - keys[i - 1] - 1;
      const uint32_t code = GapCode(gap);
      std::memcpy(d, &gap, 8);
      d += size_t{1} << code;
      c |= code << (2 * (i - b));
    }
    buf[ctrl_at + g] = static_cast<char>(c);
  }
  *out = buf.Segment(0, static_cast<size_t>(d - buf.data()));
  return true;
}

std::string DecodeDeltaVarint(const SArray<char>& in, SArray<char>* out) {
  const char* p = in.data();
  const char* end = p + in.size();
  uint64_t n;
  if (!GetVarint(&p, end, &n)) return "delta-varint: truncated count";
  if (n == 0) {
    if (p != end) return "delta-varint: trailing bytes";
    *out = SArray<char>();
    return "";
  }
  Key k;
  if (!Get(&p, end, &k)) return "delta-varint: truncated first key";
  // Every gap takes at least one byte: a count beyond the frame is a lie.
  const uint64_t gaps = n - 1, groups = (gaps + 3) / 4;
  if (gaps > static_cast<uint64_t>(end - p) || groups > static_cast<uint64_t>(end - p)) {
    return "delta-varint: count exceeds the frame";
  }
  const uint8_t* ctrl = reinterpret_cast<const uint8_t*>(p);
  const char* d = p + groups;
  const GroupTable& t = Groups();
  // The lengths the control bytes give must add up to the data exactly; then no read below
  // goes past the frame (the last groups are read byte-exact).
  uint64_t want = 0;
  for (uint64_t g = 0; g + 1 < groups; ++g) want += t.total[ctrl[g]];
  if (groups > 0) {
    const uint32_t last = ctrl[groups - 1];
    const uint64_t used = gaps - 4 * (groups - 1);
    if (used < 4 && (last >> (2 * used)) != 0) return "delta-varint: bad control byte";
    for (uint64_t j = 0; j < used; ++j) want += uint64_t{1} << ((last >> (2 * j)) & 3);
  }
  if (want != static_cast<uint64_t>(end - d)) return "delta-varint: gaps do not match the frame";
  auto keys = SArray<Key>::Uninitialized(n);
  Key* o = keys.data();
  o[0] = k;
  size_t i = 1;
  bool wrapped = false;
  uint64_t g = 0;
  // Whole groups with 32 bytes to spare: four independent 8-byte loads, masked.
  for (; g < groups && 4 * g + 4 <= gaps && d + 32 <= end; ++g) {
    const uint32_t c = ctrl[g];
    const uint8_t* off = t.off[c];
    for (int j = 0; j < 4; ++j) {
      uint64_t gap;
      std::memcpy(&gap, d + off[j], 8);
      gap &= kGapMask[(c >> (2 * j)) & 3];
      const Key next = k + gap + 1;
      wrapped |= next <= k;
      k = next;
      o[i++] = k;
    }
    d += t.total[c];
  }
  for (; g < groups; ++g) {
    const uint32_t c = ctrl[g];
    for (int j = 0; j < 4 && i < n; ++j) {
      const size_t len = size_t{1} << ((c >> (2 * j)) & 3);
      uint64_t gap = 0;
      std::memcpy(&gap, d, len);
      d += len;
      const Key next = k + gap + 1;
      wrapped |= next <= k;
      k = next;
      o[i++] = k;
    }
  }
  if (wrapped) return "delta-varint: key overflows";
  if (k == kMaxKey) return "delta-varint: the reserved key kMaxKey";
  *out = SArray<char>(keys);
  return "";
}

// With AVX2 where the CPU has it: the bitmap of 64 values is a few vector compares.
__attribute__((target_clones("avx2", "default"))) void EncodeZeroSuppress(const char* vals,
                                                                          size_t n, size_t esize,
                                                                          SArray<char>* out) {
  const size_t words = (n + 63) / 64;
  // Sized for a quarter of nonzero values, grown when more come (fresh pages are expensive).
  const size_t head = 16 + 8 * words;
  auto buf = SArray<char>::Uninitialized(head + (n / 4 + 64) * esize);
  char* p = buf.data();
  Put<uint64_t>(&p, n);
  Put<uint64_t>(&p, esize);
  char* bitmap = p;
  char* v = p + 8 * words;
  for (size_t w = 0; w < words; ++w) {
    uint64_t bits = 0;
    const size_t lo = w * 64, hi = std::min(n, lo + 64);
    // The mask first, without branches; then only the nonzero values are copied.
    if (esize == 4) {
      const uint32_t* x = reinterpret_cast<const uint32_t*>(vals) + lo;
      for (size_t i = 0; i < hi - lo; ++i) bits |= static_cast<uint64_t>(x[i] != 0) << i;
    } else if (esize == 8) {
      const uint64_t* x = reinterpret_cast<const uint64_t*>(vals) + lo;
      for (size_t i = 0; i < hi - lo; ++i) bits |= static_cast<uint64_t>(x[i] != 0) << i;
    } else {
      for (size_t i = lo; i < hi; ++i) {
        bool nz = false;
        for (size_t b = 0; b < esize; ++b) nz |= vals[i * esize + b] != 0;
        bits |= static_cast<uint64_t>(nz) << (i - lo);
      }
    }
    std::memcpy(bitmap + 8 * w, &bits, 8);
    if (static_cast<size_t>(v - buf.data()) + 64 * esize > buf.size()) {
      const size_t used = static_cast<size_t>(v - buf.data());
      auto bigger = SArray<char>::Uninitialized(head + n * esize);
      std::memcpy(bigger.data(), buf.data(), used);
      buf = bigger;
      bitmap = buf.data() + 16;
      v = buf.data() + used;
    }
    for (uint64_t m = bits; m; m &= m - 1) {
      std::memcpy(v, vals + (lo + static_cast<size_t>(__builtin_ctzll(m))) * esize, esize);
      v += esize;
    }
  }
  *out = buf.Segment(0, static_cast<size_t>(v - buf.data()));
}

std::string DecodeZeroSuppress(const SArray<char>& in, SArray<char>* out) {
  const char* p = in.data();
  const char* end = p + in.size();
  uint64_t n, esize;
  if (!Get(&p, end, &n) || !Get(&p, end, &esize)) return "zero-suppress: truncated header";
  if (esize == 0 || esize > 16) return "zero-suppress: bad value size";
  const uint64_t words = n / 64 + (n % 64 != 0);
  if (words > static_cast<uint64_t>(end - p) / 8) return "zero-suppress: truncated bitmap";
  const char* bitmap = p;
  const char* v = p + 8 * words;
  if (n > (uint64_t{1} << 40) / esize) return "zero-suppress: count too large";
  // Count first, so a short frame is refused before anything is written.
  const uint64_t nonzero = BitmapCount(bitmap, n);
  if (nonzero * esize != static_cast<uint64_t>(end - v)) {
    return "zero-suppress: values do not match the bitmap";
  }
  // Storage of 8-byte words so that the values can be read as any type.
  SArray<uint64_t> store((n * esize + 7) / 8, 0);
  char* o = reinterpret_cast<char*>(store.data());
  for (uint64_t w = 0; w < words; ++w) {
    uint64_t bits;
    std::memcpy(&bits, bitmap + 8 * w, 8);
    if (w == words - 1 && n % 64) bits &= (uint64_t{1} << (n % 64)) - 1;
    while (bits) {
      const int b = __builtin_ctzll(bits);
      bits &= bits - 1;
      std::memcpy(o + (w * 64 + static_cast<uint64_t>(b)) * esize, v, esize);
      v += esize;
    }
  }
  *out = SArray<char>(store).Segment(0, n * esize);
  return "";
}

void EncodeSnappy(const SArray<char>& in, SArray<char>* out) {
  auto buf = SArray<char>::Uninitialized(snappy::MaxCompressedLength(in.size()));
  size_t len = 0;
  snappy::RawCompress(in.data(), in.size(), buf.data(), &len);
  *out = buf.Segment(0, len);
}

std::string DecodeSnappy(const SArray<char>& in, size_t max_size, SArray<char>* out) {
  size_t len = 0;
  if (!snappy::GetUncompressedLength(in.data(), in.size(), &len)) {
    return "snappy: bad length header";
  }
  if (len > max_size) return "snappy: frame claims more than the limit";
  // No snappy element expands more than 64 bytes out of 3 (a copy with a 2-byte offset), so a
  // length beyond that ratio is a lie: refuse it before allocating anything (a 10-byte frame
  // could otherwise ask for gigabytes).
  if (len / 64 > in.size() / 3 + 1) return "snappy: frame claims more than its size can hold";
  auto store = SArray<uint64_t>::Uninitialized((len + 7) / 8);  // snappy writes every byte
  if (!snappy::RawUncompress(in.data(), in.size(), reinterpret_cast<char*>(store.data()))) {
    return "snappy: corrupted frame";
  }
  *out = SArray<char>(store).Segment(0, len);
  return "";
}

bool EncodeQuantize(const SArray<char>& in, DataType dtype, int bits, Rng* rng, SArray<char>* out) {
  if (bits != 8 && bits != 16) return false;
  if (dtype == DataType::kFloat && in.size() % 4 == 0) {
    return Quantize(reinterpret_cast<const float*>(in.data()), in.size() / 4, bits, rng, out);
  }
  if (dtype == DataType::kDouble && in.size() % 8 == 0) {
    return Quantize(reinterpret_cast<const double*>(in.data()), in.size() / 8, bits, rng, out);
  }
  return false;
}

std::string DecodeQuantize(const SArray<char>& in, SArray<char>* out) {
  const char* p = in.data();
  const char* end = p + in.size();
  uint64_t n;
  uint32_t dtype, bits;
  double scale;
  if (!Get(&p, end, &n) || !Get(&p, end, &dtype) || !Get(&p, end, &bits) || !Get(&p, end, &scale)) {
    return "quantize: truncated header";
  }
  if (bits != 8 && bits != 16) return "quantize: bad bit width";
  if (!std::isfinite(scale) || scale < 0) return "quantize: bad scale";
  if (n != static_cast<uint64_t>(end - p) / (bits / 8) ||
      static_cast<uint64_t>(end - p) % (bits / 8)) {
    return "quantize: size does not match the count";
  }
  if (dtype == static_cast<uint32_t>(DataType::kFloat)) {
    SArray<float> v = SArray<float>::Uninitialized(n);
    Dequantize(p, n, static_cast<int>(bits), scale, v.data());
    *out = SArray<char>(v);
  } else if (dtype == static_cast<uint32_t>(DataType::kDouble)) {
    SArray<double> v = SArray<double>::Uninitialized(n);
    Dequantize(p, n, static_cast<int>(bits), scale, v.data());
    *out = SArray<char>(v);
  } else {
    return "quantize: bad value type";
  }
  return "";
}

uint64_t BitmapCount(const char* bitmap, uint64_t n) {
  const uint64_t words = (n + 63) / 64;
  uint64_t count = 0;
  for (uint64_t w = 0; w < words; ++w) {
    uint64_t bits;
    std::memcpy(&bits, bitmap + 8 * w, 8);
    if (w == words - 1 && n % 64) bits &= (uint64_t{1} << (n % 64)) - 1;
    count += static_cast<uint64_t>(__builtin_popcountll(bits));
  }
  return count;
}

double ZeroFraction(const char* vals, size_t n, size_t esize, size_t sample) {
  if (n == 0) return 0;
  const size_t step = n > sample ? n / sample : 1;
  size_t seen = 0, zero = 0;
  for (size_t i = 0; i < n; i += step, ++seen) {
    bool z = true;
    for (size_t b = 0; b < esize; ++b) z &= vals[i * esize + b] == 0;
    zero += z;
  }
  return static_cast<double>(zero) / static_cast<double>(seen);
}

uint64_t HashBytes(const char* data, size_t n) {
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  // Four independent lanes (multiply-rotate per word), mixed at the end: the lanes run in
  // parallel in the CPU, so hashing keeps up with memory.
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h[4] = {n ^ 0x243F6A8885A308D3ull, 0x13198A2E03707344ull, 0xA4093822299F31D0ull,
                   0x082EFA98EC4E6C89ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, data + i + 8 * l, 8);
      h[l] = ((h[l] ^ w) * kMul);
      h[l] = (h[l] << 31) | (h[l] >> 33);
    }
  }
  uint64_t r = mix(h[0]) ^ mix(h[1] + 1) ^ mix(h[2] + 2) ^ mix(h[3] + 3);
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, data + i, 8);
    r = mix(r ^ w) + kMul;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, data + i, n - i);
  return mix(r ^ tail ^ (static_cast<uint64_t>(n - i) << 56));
}

}  // namespace ps
