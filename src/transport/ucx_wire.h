// The UCX van's wire format (shared by src/transport/ucx_van*.cc): active-message ids, the
// message header, credits, batches, and what a send holds until UCX is done with it.
#ifndef PS_TRANSPORT_UCX_WIRE_H_
#define PS_TRANSPORT_UCX_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/ucx_van.h"

namespace ps {

inline constexpr unsigned kAmId = 7;
inline constexpr unsigned kCreditAmId = 8;
inline constexpr uint32_t kCreditMagic = 0x50534352;  // "PSCR"
// A receiver's credit: of the sender's stream, this many messages and bytes are taken.
struct Credit {
  uint32_t magic, spare;
  uint64_t stream, taken, bytes;
};
// What a sender keeps in a receiver's hands at most (UcxVan's flow control).
inline constexpr uint64_t kWindowBytes = 16u << 20;
inline constexpr uint32_t kHeaderMagic = 0x50535558;  // "PSUX"
inline constexpr size_t kMaxFrames = 64;
// The header: magic, meta length, frame count, flags, the sender's stream and the message's
// sequence number in it, then the frame sizes and the meta bytes. A header larger than UCX
// takes (its max_am_header: a meta of thousands of metric samples or nodes) leaves the meta
// out: kMetaInData, and the meta leads the data, padded to 8 bytes.
struct Fixed {
  uint32_t magic, meta_size, frames, flags;
  uint64_t stream, seq;
};
inline constexpr uint32_t kMetaInData = 1;
inline constexpr size_t kFixed = sizeof(Fixed);
// Bounds on what a sender (or garbage that passes for one) can make us hold back: how far
// ahead of the next expected message of its stream a message may be, and how many streams we
// track. Held messages' bytes are bounded too (UcxVan::max_held_).
inline constexpr uint64_t kMaxAhead = 1u << 20;
inline constexpr size_t kMaxStreams = 65536;
inline constexpr char kPad[8] = {0};
// Several small messages of one stream in one active message (UcxVan's batches): the header is
// a Fixed alone, its frames the number of messages and its seq the first's; the data holds
// each message's header (padded to 8 bytes) followed by its data, in order.
inline constexpr uint32_t kBatch = 2;
inline constexpr uint32_t kMaxBatch = 256;
// What is packed: messages up to kPackItem bytes, batches up to kPackTotal.
inline constexpr uint64_t kPackItem = 8192;
inline constexpr uint64_t kPackTotal = 65536;

inline size_t Padded(size_t n) { return (n + 7) & ~size_t{7}; }

// Everything a send needs until UCX is done with it.
struct SendHold {
  std::shared_ptr<UcxVan::Peer> peer;
  std::vector<char> header;
  std::vector<char> meta;  // the meta, when it travels in the data (kMetaInData)
  std::vector<ucp_dt_iov_t> iov;
  std::vector<SArray<char>> frames;
  uint64_t bytes = 0;        // header and padded frames: what the receiver counts
  uint32_t count = 1;        // messages in it (a batch: more)
  std::vector<char> packed;  // a batch's data
};

}  // namespace ps

#endif  // PS_TRANSPORT_UCX_WIRE_H_
