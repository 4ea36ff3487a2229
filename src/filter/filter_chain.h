// The filter chain on a node's message path (DESIGN §9): encodes the data frames of every data
// message it sends and decodes what it receives. What was applied to each frame travels in the
// header (Meta.codec: per frame, the codecs in the order applied, 4 bits each), so the receiver
// never guesses. Lossless codecs are chosen per frame (auto: delta-varint for sorted key
// lists, zero suppression for values with many zeros; or forced); quantization of pushed
// float/double values is lossy and opt-in. Every frame's bytes before and after are counted
// per codec, per direction and per peer.
#ifndef PS_FILTER_FILTER_CHAIN_H_
#define PS_FILTER_FILTER_CHAIN_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "filter/codec.h"
#include "filter/key_cache.h"
#include "message/message.h"

namespace ps {

struct FilterOptions {
  /// PS_COMPRESS: off | auto | delta | zero | snappy (snappy on every frame it shrinks).
  enum class Mode { kOff, kAuto, kDelta, kZero, kSnappy } mode = Mode::kOff;
  /// PS_QUANTIZE: 0 (off), 8 or 16 bits for float/double values that workers push.
  int quantize_bits = 0;
  /// Frames smaller than this travel as they are (a header costs more than it saves).
  size_t min_frame = 256;
  /// PS_KEY_CACHE_MB: key caching with this many bytes of lists per peer and side (0: off).
  size_t key_cache_bytes = 0;
  /// The most a coded frame may decode to (PS_MAX_MESSAGE_MB): a larger claim is dropped.
  size_t max_frame = size_t{4} << 30;
  /// Parses PS_COMPRESS / PS_QUANTIZE / PS_KEY_CACHE_MB / PS_MAX_MESSAGE_MB values; throws
  /// ps::Error naming the variable.
  static FilterOptions Parse(const std::string& compress, int quantize_bits, int key_cache_mb = 0,
                             int max_message_mb = 4096);
  bool enabled() const { return mode != Mode::kOff || quantize_bits != 0 || key_cache_bytes; }
};

class FilterChain {
 public:
  FilterChain(FilterOptions options, uint64_t seed);
  bool enabled() const { return opt_.enabled(); }
  /// Whether Encode changes msg: the node's filters are on, or the request chose some.
  bool Applies(const Message& msg) const;

  /// Encodes the data frames of msg (the copy that goes on the wire) and records the codecs.
  void Encode(Message* msg);
  /// Restores the frames; "" or why the message is malformed (then it must be dropped). When
  /// it names a key list this node does not hold, *missed gets its id (answer with key_miss).
  std::string Decode(Message* msg, uint64_t* missed = nullptr);
  /// The answer to msg whose key list `missed` Decode did not find: its sender forgets the list
  /// and sends msg again with the keys in full (a worker's part, or a master's replica copy).
  static Message MissReply(const Message& msg, uint64_t missed);
  uint64_t key_cache_hits() const;
  uint64_t key_cache_misses() const;

  struct Traffic {
    uint64_t frames = 0;
    uint64_t raw = 0;   // bytes before the filter (sent) / after decoding (received)
    uint64_t wire = 0;  // bytes on the wire
  };
  /// Per frame kind and codec ("keys:delta", "values:zero", "other:none", ...) and direction,
  /// and per peer and direction.
  std::map<std::string, Traffic> sent_by_codec() const;
  std::map<std::string, Traffic> received_by_codec() const;
  std::map<int, Traffic> sent_to() const;
  std::map<int, Traffic> received_from() const;
  /// The counters as a JSON object (for Node::StatsJson and the Finalize summary).
  std::string StatsJson() const;

 private:
  enum class Role { kKeys = 0, kValues = 1, kOther = 2 };
  // What a data frame holds, from the message's op and direction.
  static Role FrameRole(const Message& m, size_t frame);
  // Encodes one frame; returns the packed list of codecs applied (0: none). *list_id: the id
  // under which the receiver is to keep the frame's key list (0: none).
  uint32_t EncodeFrame(const Message& m, size_t frame, SArray<char>* data, uint64_t* list_id);

  FilterOptions opt_;
  mutable std::mutex mu_;  // the rng and the counters
  Rng rng_;
  KeyCache cache_;
  std::map<std::string, Traffic> sent_codec_, recv_codec_;
  std::map<int, Traffic> sent_peer_, recv_peer_;
};

}  // namespace ps

#endif  // PS_FILTER_FILTER_CHAIN_H_
