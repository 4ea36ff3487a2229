// Frame codecs of the filter chain (src/filter/codec.h): exact round trips, stated error for
// quantization, and corrupted or truncated frames rejected with an error.
#include "filter/codec.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "filter/filter_chain.h"
#include "filter/key_cache.h"

namespace ps {
namespace {

SArray<Key> SortedKeys(Rng* rng, size_t n, uint64_t max_gap) {
  SArray<Key> k(n);
  Key at = rng->Below(1000);
  for (size_t i = 0; i < n; ++i) {
    k[i] = at;
    at += 1 + rng->Below(max_gap);
  }
  return k;
}

SArray<float> SparseValues(Rng* rng, size_t n, double zero_fraction) {
  SArray<float> v(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    if (rng->Below(1000000) >= zero_fraction * 1000000) {
      v[i] = static_cast<float>(rng->Below(2000)) / 7.0f - 100.0f;
    }
  }
  return v;
}

TEST(CodecTest, DeltaVarintRoundTripsAndShrinksDenseKeys) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    const uint64_t max_gap = seed % 2 ? 1000 : (uint64_t{1} << 50);
    SArray<Key> keys = SortedKeys(&rng, 1 + rng.Below(5000), max_gap);
    SArray<char> enc, dec;
    ASSERT_TRUE(EncodeDeltaVarint(keys.data(), keys.size(), &enc));
    ASSERT_EQ(DecodeDeltaVarint(enc, &dec), "") << "seed " << seed;
    ASSERT_EQ(dec.size(), keys.size() * sizeof(Key));
    EXPECT_EQ(std::memcmp(dec.data(), keys.data(), dec.size()), 0) << "seed " << seed;
    if (max_gap == 1000) {
      // Gaps below 1000 take at most 2 bytes: at least 3x smaller than 8-byte keys.
      EXPECT_LE(enc.size() * 3, keys.size() * sizeof(Key) + 40) << "seed " << seed;
    }
    // Never more than 1 byte per key beyond the keys themselves (a count varint of up to 10).
    EXPECT_LE(enc.size(), keys.size() * (sizeof(Key) + 1) + 10) << "seed " << seed;
  }
  {
    // The worst case: gaps that need all 8 bytes (keys spread over the whole key space).
    Rng rng(99);
    SArray<Key> keys(1000);
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = (kMaxKey / 1001) * (i + 1) + rng.Below(1000);
    SArray<char> enc, dec;
    ASSERT_TRUE(EncodeDeltaVarint(keys.data(), keys.size(), &enc));
    EXPECT_LE(enc.size(), keys.size() * (sizeof(Key) + 1));
    ASSERT_EQ(DecodeDeltaVarint(enc, &dec), "");
    EXPECT_EQ(std::memcmp(dec.data(), keys.data(), dec.size()), 0);
  }
  SArray<Key> unsorted{5, 3};
  SArray<char> enc;
  EXPECT_FALSE(EncodeDeltaVarint(unsorted.data(), 2, &enc));
  SArray<Key> none;
  ASSERT_TRUE(EncodeDeltaVarint(none.data(), 0, &enc));
  SArray<char> dec;
  EXPECT_EQ(DecodeDeltaVarint(enc, &dec), "");
  EXPECT_EQ(dec.size(), 0u);
}

// The format, written the slow way: varint count, first key, one control byte per four gaps
// (2 bits each: 1, 2, 4 or 8 bytes), then each gap - 1 in its little-endian low bytes.
std::string ReferenceDelta(const SArray<Key>& keys) {
  std::string out;
  uint64_t n = keys.size();
  do {
    out.push_back(static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0)));
    n >>= 7;
  } while (n);
  if (keys.empty()) return out;
  out.append(reinterpret_cast<const char*>(&keys[0]), 8);
  const size_t gaps = keys.size() - 1;
  std::string ctrl((gaps + 3) / 4, '\0'), data;
  for (size_t i = 0; i < gaps; ++i) {
    const uint64_t g = keys[i + 1] - keys[i] - 1;
    const int code = g <= 0xff ? 0 : g <= 0xffff ? 1 : g <= 0xffffffffull ? 2 : 3;
    ctrl[i / 4] = static_cast<char>(ctrl[i / 4] | code << (2 * (i % 4)));
    data.append(reinterpret_cast<const char*>(&g), size_t{1} << code);
  }
  return out + ctrl + data;
}

TEST(CodecTest, DeltaVarintMatchesTheFormatForEveryGapSize) {
  // Gaps of every length class mixed within groups, lists of every length around the group
  // and block sizes, and keys across the sign bit (the vector path compares unsigned).
  const uint64_t bounds[5] = {1, 0x100, 0x10000, 0x100000000ull, uint64_t{1} << 40};
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Rng rng(seed);
    const size_t n = seed < 40 ? seed : 1 + rng.Below(3000);
    SArray<Key> keys(n);
    Key k = seed % 3 == 0 ? (uint64_t{1} << 63) - rng.Below(1 << 20) : rng.Below(1000);
    for (size_t i = 0; i < n; ++i) {
      keys[i] = k;
      k += 1 + rng.Below(bounds[rng.Below(5)]);
    }
    SArray<char> enc, dec;
    ASSERT_TRUE(EncodeDeltaVarint(keys.data(), n, &enc)) << "seed " << seed;
    EXPECT_EQ(std::string(enc.data(), enc.size()), ReferenceDelta(keys)) << "seed " << seed;
    ASSERT_EQ(DecodeDeltaVarint(enc, &dec), "") << "seed " << seed;
    EXPECT_EQ(std::memcmp(dec.data(), keys.data(), dec.size()), 0) << "seed " << seed;
  }
}

TEST(CodecTest, DeltaVarintRefusesAnUnsortedPairAnywhere) {
  // A repeated or decreasing key at every position, in the vector groups and in the tail.
  for (size_t n : {2u, 5u, 9u, 64u, 1031u}) {
    for (size_t at = 1; at < n; at += (n > 100 ? 97 : 1)) {
      for (int repeat = 0; repeat < 2; ++repeat) {
        SArray<Key> keys(n);
        for (size_t i = 0; i < n; ++i) keys[i] = 1000 + 10 * i;
        keys[at] = repeat ? keys[at - 1] : keys[at - 1] - 1;
        SArray<char> enc;
        EXPECT_FALSE(EncodeDeltaVarint(keys.data(), n, &enc)) << "n " << n << " at " << at;
      }
    }
  }
  // Across the sign bit: 2^63 - 1 < 2^63 is in order, the reverse is not.
  SArray<Key> up{(uint64_t{1} << 63) - 1, uint64_t{1} << 63, (uint64_t{1} << 63) + 5, ~Key{0} - 1,
                 ~Key{0}};
  SArray<char> enc;
  EXPECT_TRUE(EncodeDeltaVarint(up.data(), up.size(), &enc));
  SArray<Key> down{1, 2, uint64_t{1} << 63, (uint64_t{1} << 63) - 1, ~Key{0}};
  EXPECT_FALSE(EncodeDeltaVarint(down.data(), down.size(), &enc));
}

TEST(CodecTest, ZeroSuppressionRoundTripsEveryValueSize) {
  Rng rng(3);
  for (double zf : {0.0, 0.5, 0.9, 1.0}) {
    SArray<float> v = SparseValues(&rng, zf == 0.9 ? 5000 : 1 + rng.Below(3000), zf);
    SArray<char> enc, dec;
    EncodeZeroSuppress(reinterpret_cast<const char*>(v.data()), v.size(), 4, &enc);
    ASSERT_EQ(DecodeZeroSuppress(enc, &dec), "");
    ASSERT_EQ(dec.size(), v.size() * 4);
    EXPECT_EQ(std::memcmp(dec.data(), v.data(), dec.size()), 0) << "zero fraction " << zf;
    if (zf == 0.9) {
      EXPECT_LT(enc.size() * 5, v.size() * 4) << "not 5x smaller at 90% zeros";
    }
  }
  SArray<double> d{0.0, -0.0, 1.5, 0.0, 3.25};  // -0.0 is not all-zero bytes: kept exactly
  SArray<char> enc, dec;
  EncodeZeroSuppress(reinterpret_cast<const char*>(d.data()), d.size(), 8, &enc);
  ASSERT_EQ(DecodeZeroSuppress(enc, &dec), "");
  EXPECT_EQ(std::memcmp(dec.data(), d.data(), dec.size()), 0);
}

TEST(CodecTest, SnappyRoundTrips) {
  Rng rng(4);
  SArray<float> v = SparseValues(&rng, 10000, 0.9);
  SArray<char> enc, dec;
  EncodeSnappy(SArray<char>(v), &enc);
  ASSERT_EQ(DecodeSnappy(enc, 1 << 30, &dec), "");
  ASSERT_EQ(dec.size(), v.size() * 4);
  EXPECT_EQ(std::memcmp(dec.data(), v.data(), dec.size()), 0);
  EXPECT_LT(enc.size() * 4, v.size() * 4);
  EXPECT_NE(DecodeSnappy(enc, 100, &dec), "") << "a frame larger than allowed was accepted";
}

// The most compressible input there is (all zeros) still decodes: the bound on claims is the
// format's own largest expansion.
TEST(CodecTest, SnappyAcceptsTheLargestRealExpansion) {
  SArray<char> zeros(16 << 20, 0), enc, dec;
  EncodeSnappy(zeros, &enc);
  ASSERT_EQ(DecodeSnappy(enc, size_t{1} << 33, &dec), "");
  ASSERT_EQ(dec.size(), zeros.size());
  EXPECT_EQ(std::memcmp(dec.data(), zeros.data(), dec.size()), 0);
}

// A 10-byte frame whose header claims almost 4 GB is refused before anything is allocated: in a
// child process limited to 1 GB of address space, the decode returns an error instead of
// dying of bad_alloc.
TEST(CodecDeathTest, SnappyLengthClaimsBeyondTheFrameAllocateNothing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  uint64_t claim = (uint64_t{1} << 32) - 16;  // snappy lengths are 32-bit
  SArray<char> frame;
  while (claim >= 0x80) {
    frame.push_back(static_cast<char>((claim & 0x7f) | 0x80));
    claim >>= 7;
  }
  frame.push_back(static_cast<char>(claim));
  for (int i = 0; i < 5; ++i) frame.push_back(static_cast<char>(0xfe));
  ASSERT_LE(frame.size(), 10u);
  auto decode_in_1gb = [&frame] {
    rlimit lim;
    lim.rlim_cur = lim.rlim_max = size_t{1} << 30;
    setrlimit(RLIMIT_AS, &lim);
    SArray<char> out;
    const std::string err = DecodeSnappy(frame, size_t{1} << 34, &out);
    std::_Exit(err.empty() ? 1 : 0);
  };
  EXPECT_EXIT(decode_in_1gb(), ::testing::ExitedWithCode(0), "");
}

// The mean of many quantized copies of a value must be the value (unbiased rounding): within
// 3 standard errors over 10^5 copies.
TEST(CodecTest, QuantizationIsUnbiased) {
  for (int bits : {8, 16}) {
    const float x = 0.3137f, top = 1.0f;  // top sets the scale
    Rng rng(11 + bits);
    const int copies = 100000;
    double sum = 0, sum2 = 0;
    for (int c = 0; c < copies; ++c) {
      SArray<float> in{x, top};
      SArray<char> enc, dec;
      ASSERT_TRUE(EncodeQuantize(SArray<char>(in), DataType::kFloat, bits, &rng, &enc));
      ASSERT_EQ(DecodeQuantize(enc, &dec), "");
      const double q = reinterpret_cast<const float*>(dec.data())[0];
      sum += q;
      sum2 += q * q;
    }
    const double mean = sum / copies;
    const double var = sum2 / copies - mean * mean;
    const double se = std::sqrt(var / copies);
    EXPECT_LT(std::fabs(mean - x), 3 * se + 1e-7) << bits << " bits: mean " << mean;
    // One step of the grid is the largest error of a single copy.
    EXPECT_GT(var, 0.0);
  }
}

TEST(CodecTest, QuantizationErrorIsBelowOneStep) {
  Rng rng(5);
  SArray<double> in(1000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(static_cast<double>(i)) * 40;
  SArray<char> enc, dec;
  ASSERT_TRUE(EncodeQuantize(SArray<char>(in), DataType::kDouble, 16, &rng, &enc));
  ASSERT_EQ(DecodeQuantize(enc, &dec), "");
  const double* out = reinterpret_cast<const double*>(dec.data());
  double scale = 0;
  for (size_t i = 0; i < in.size(); ++i) scale = std::max(scale, std::fabs(in[i]));
  for (size_t i = 0; i < in.size(); ++i) EXPECT_LE(std::fabs(out[i] - in[i]), scale / 32767);
  SArray<float> bad{1.0f, std::nanf("")};
  EXPECT_FALSE(EncodeQuantize(SArray<char>(bad), DataType::kFloat, 8, &rng, &enc));
}

// Every prefix of an encoded frame, and every frame with one byte flipped, decodes to an error
// or to exactly the original (a flipped value byte in zero suppression changes a value: that
// is what the checksum-free codecs cannot see, so only structure is checked there).
TEST(CodecTest, TruncatedAndCorruptedFramesAreRejected) {
  Rng rng(6);
  SArray<Key> keys = SortedKeys(&rng, 300, 5000);
  SArray<float> vals = SparseValues(&rng, 300, 0.8);
  SArray<char> delta, zero, snap, quant;
  ASSERT_TRUE(EncodeDeltaVarint(keys.data(), keys.size(), &delta));
  EncodeZeroSuppress(reinterpret_cast<const char*>(vals.data()), vals.size(), 4, &zero);
  EncodeSnappy(SArray<char>(vals), &snap);
  ASSERT_TRUE(EncodeQuantize(SArray<char>(vals), DataType::kFloat, 8, &rng, &quant));
  SArray<char> out;
  for (size_t cut = 0; cut < delta.size(); ++cut) {
    EXPECT_NE(DecodeDeltaVarint(delta.Segment(0, cut), &out), "") << "cut " << cut;
  }
  for (size_t cut = 0; cut < zero.size(); ++cut) {
    EXPECT_NE(DecodeZeroSuppress(zero.Segment(0, cut), &out), "") << "cut " << cut;
  }
  for (size_t cut = 0; cut < snap.size(); ++cut) {
    EXPECT_NE(DecodeSnappy(snap.Segment(0, cut), 1 << 20, &out), "") << "cut " << cut;
  }
  for (size_t cut = 0; cut < quant.size(); ++cut) {
    EXPECT_NE(DecodeQuantize(quant.Segment(0, cut), &out), "") << "cut " << cut;
  }
  // Random garbage of every small size never crashes a decoder.
  for (int trial = 0; trial < 2000; ++trial) {
    SArray<char> junk(rng.Below(64));
    for (auto& c : junk) c = static_cast<char>(rng.Next());
    DecodeDeltaVarint(junk, &out);
    DecodeZeroSuppress(junk, &out);
    DecodeSnappy(junk, 1 << 20, &out);
    DecodeQuantize(junk, &out);
  }
}

TEST(CodecTest, ZeroFractionEstimate) {
  Rng rng(7);
  SArray<float> v = SparseValues(&rng, 100000, 0.9);
  const double f = ZeroFraction(reinterpret_cast<const char*>(v.data()), v.size(), 4);
  EXPECT_NEAR(f, 0.9, 0.05);
}

// The chain on a whole message: a push encodes keys and values as configured, records what it
// did, and decodes to the same bytes; a message whose codec list or frames are damaged is
// refused with an error.
TEST(FilterChainTest, PushRoundTripsAndDamagedMessagesAreRefused) {
  Rng rng(8);
  SArray<Key> keys = SortedKeys(&rng, 5000, 900);
  SArray<float> vals = SparseValues(&rng, 5000, 0.9);
  Message m;
  m.meta.set_request(true);
  m.meta.set_push(true);
  m.meta.set_op(pb::Meta::DATA);
  m.meta.set_dtype(static_cast<int>(DataType::kFloat));
  m.meta.set_receiver(3);
  m.data = {SArray<char>(keys), SArray<char>(vals)};
  FilterChain chain(FilterOptions::Parse("auto", 0), 1);
  Message wire = m;
  chain.Encode(&wire);
  ASSERT_EQ(wire.meta.codec_size(), 2);
  EXPECT_EQ(wire.meta.codec(0), static_cast<uint32_t>(Codec::kDeltaVarint));
  EXPECT_EQ(wire.meta.codec(1), static_cast<uint32_t>(Codec::kZeroSuppress));
  EXPECT_LT(wire.DataBytes() * 4, m.DataBytes());
  Message back = wire;
  ASSERT_EQ(chain.Decode(&back), "");
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(back.data[i].size(), m.data[i].size());
    EXPECT_EQ(std::memcmp(back.data[i].data(), m.data[i].data(), m.data[i].size()), 0);
  }
  EXPECT_EQ(chain.sent_by_codec().at("keys:delta").raw, keys.size() * 8);
  // Damaged: a codec list for the wrong number of frames, an unknown codec, a cut frame.
  Message bad = wire;
  bad.meta.add_codec(0);
  EXPECT_NE(chain.Decode(&bad), "");
  bad = wire;
  bad.meta.set_codec(0, 9);
  EXPECT_NE(chain.Decode(&bad), "");
  bad = wire;
  bad.data[1] = bad.data[1].Segment(0, bad.data[1].size() - 3);
  EXPECT_NE(chain.Decode(&bad), "");
  EXPECT_THROW(FilterOptions::Parse("gzip", 0), Error);
  EXPECT_THROW(FilterOptions::Parse("auto", 12), Error);
}

Message KeysRequest(const SArray<Key>& keys, int from, int to) {
  Message m;
  m.meta.set_sender(from);
  m.meta.set_receiver(to);
  m.meta.set_request(true);
  m.meta.set_pull(true);
  m.meta.set_op(pb::Meta::DATA);
  m.meta.set_dtype(static_cast<int>(DataType::kFloat));
  m.data = {SArray<char>(keys)};
  return m;
}

// Sends keys from `tx` (node 1) to `rx` (node 2); returns the missed id (0: delivered) and
// checks that what arrives is exactly the list.
uint64_t Deliver(FilterChain* tx, FilterChain* rx, const SArray<Key>& keys, bool* by_ref) {
  Message wire = KeysRequest(keys, 1, 2);
  tx->Encode(&wire);
  *by_ref = wire.data[0].size() == 24;
  uint64_t missed = 0;
  const std::string err = rx->Decode(&wire, &missed);
  if (missed) return missed;
  EXPECT_EQ(err, "");
  EXPECT_EQ(wire.data[0].size(), keys.size() * sizeof(Key));
  EXPECT_EQ(std::memcmp(wire.data[0].data(), keys.data(), wire.data[0].size()), 0);
  return 0;
}

void AnswerMiss(FilterChain* tx, uint64_t id) {
  Message miss;
  miss.meta.set_sender(2);
  miss.meta.set_receiver(1);
  miss.meta.set_key_miss(true);
  miss.meta.set_key_list_id(id);
  EXPECT_EQ(tx->Decode(&miss), "");
}

TEST(KeyCacheTest, HitsMissesEvictionAndARestartedReceiver) {
  Rng rng(9);
  SArray<Key> a = SortedKeys(&rng, 1000, 1 << 20), b = SortedKeys(&rng, 1000, 1 << 20);
  FilterOptions o = FilterOptions::Parse("off", 0, 1);  // 1 MB per peer
  FilterChain tx(o, 1), rx(o, 2);
  bool by_ref;
  EXPECT_EQ(Deliver(&tx, &rx, a, &by_ref), 0u);
  EXPECT_FALSE(by_ref);  // first time: in full
  EXPECT_EQ(Deliver(&tx, &rx, a, &by_ref), 0u);
  EXPECT_TRUE(by_ref);  // then as a 24-byte reference, resolved to the same list
  // A receiver that lost its cache (a new process): a miss, answered; then in full again.
  FilterChain fresh(o, 3);
  const uint64_t id = Deliver(&tx, &fresh, a, &by_ref);
  EXPECT_TRUE(by_ref);
  ASSERT_NE(id, 0u);
  AnswerMiss(&tx, id);
  EXPECT_EQ(Deliver(&tx, &fresh, a, &by_ref), 0u);
  EXPECT_FALSE(by_ref);
  EXPECT_EQ(Deliver(&tx, &fresh, a, &by_ref), 0u);
  EXPECT_TRUE(by_ref);
  // Eviction: a receiver that keeps a single list.
  FilterOptions tiny = o;
  tiny.key_cache_bytes = 1000 * sizeof(Key);
  FilterChain small(tiny, 4), tx2(o, 5);
  EXPECT_EQ(Deliver(&tx2, &small, a, &by_ref), 0u);
  EXPECT_EQ(Deliver(&tx2, &small, b, &by_ref), 0u);  // evicts a at the receiver
  const uint64_t gone = Deliver(&tx2, &small, a, &by_ref);
  EXPECT_NE(gone, 0u) << "an evicted list must be a miss, never a wrong or stale list";
  AnswerMiss(&tx2, gone);
  EXPECT_EQ(Deliver(&tx2, &small, a, &by_ref), 0u);
  EXPECT_FALSE(by_ref);
}

// Replica copies: the master's copy to the first replica refers to a list the replica holds
// (the master keeps the copy and sends it again on a miss); a member passing the copy on down
// the chain keeps nothing to send again, so it sends the keys in full. The miss names the
// copy, so that its master (not the worker) sends it again.
TEST(KeyCacheTest, ReplicaCopiesReferToListsOnlyFromTheirMaster) {
  Rng rng(11);
  const SArray<Key> keys = SortedKeys(&rng, 1000, 1 << 20);
  FilterOptions o = FilterOptions::Parse("off", 0, 1);
  auto copy = [&](int master) {
    Message m = KeysRequest(keys, 1, 2);
    m.meta.set_pull(false);
    m.meta.set_push(true);
    m.meta.set_replica(true);
    m.meta.set_master(master);
    m.meta.set_fwd_id(77);
    return m;
  };
  for (int master : {1, 3}) {
    SCOPED_TRACE("master " + std::to_string(master));
    FilterChain tx(o, 1), rx(o, 2);
    for (int i = 0; i < 2; ++i) {
      Message wire = copy(master);
      tx.Encode(&wire);
      EXPECT_EQ(wire.data[0].size() == 24, master == 1 && i == 1) << "send " << i;
      uint64_t missed = 0;
      EXPECT_EQ(rx.Decode(&wire, &missed), "");
      EXPECT_EQ(missed, 0u);
    }
  }
  FilterChain tx(o, 1), rx(o, 2), fresh(o, 3);
  Message first = copy(1);
  tx.Encode(&first);
  Message wire = copy(1);
  tx.Encode(&wire);
  uint64_t missed = 0;
  fresh.Decode(&wire, &missed);
  ASSERT_NE(missed, 0u);
  const Message miss = FilterChain::MissReply(copy(1), missed);
  EXPECT_TRUE(miss.meta.replica());
  EXPECT_FALSE(miss.meta.request());
  EXPECT_TRUE(miss.meta.key_miss());
  EXPECT_EQ(miss.meta.fwd_id(), 77u);
  EXPECT_EQ(miss.meta.master(), 1);
}

TEST(KeyCacheTest, ListsAreComparedNotJustHashed) {
  KeyCache c(1 << 20);
  SArray<Key> l1{1, 2, 3}, l2{1, 2, 4};
  uint64_t id1, id2, id3;
  EXPECT_FALSE(c.Send(7, l1, 42, &id1));
  // Another list under the same hash (a collision) is never sent as a reference to the first.
  EXPECT_FALSE(c.Send(7, l2, 42, &id2));
  EXPECT_NE(id1, id2);
  // The caller changing its array after sending does not change what the cache compares with.
  SArray<Key> l3{5, 6, 7};
  EXPECT_FALSE(c.Send(7, l3, 43, &id3));
  l3[2] = 8;
  uint64_t id4;
  EXPECT_FALSE(c.Send(7, l3, 43, &id4));
  // The receiver checks hash and count of what it holds.
  c.Received(1, 10, l1, 42);
  SArray<Key> got;
  EXPECT_TRUE(c.Lookup(1, 10, 42, 3, &got));
  EXPECT_FALSE(c.Lookup(1, 10, 41, 3, &got));
  EXPECT_FALSE(c.Lookup(1, 10, 42, 4, &got));
  EXPECT_FALSE(c.Lookup(2, 10, 42, 3, &got));  // another sender's id 10 is another list
}

}  // namespace
}  // namespace ps
