// In-memory message: protobuf Meta plus zero-copy data frames.
#ifndef PS_MESSAGE_MESSAGE_H_
#define PS_MESSAGE_MESSAGE_H_

#include <string>
#include <vector>

#include "meta.pb.h"
#include "ps/base.h"
#include "ps/sarray.h"

namespace ps {

/// First field of every Meta; anything else on the port is garbage.
constexpr uint32_t kMagic = 0x70730001;

struct Message {
  pb::Meta meta;
  std::vector<SArray<char>> data;
  /// Never sent: on a server's reply to a fixed-width pull, the request's keys (the
  /// significantly-modified filter codes the values against them just before sending).
  SArray<char> reply_keys;

  /// Total bytes of the data frames.
  size_t DataBytes() const {
    size_t n = 0;
    for (const auto& d : data) n += d.size();
    return n;
  }
  /// One line for logs.
  std::string DebugString() const;
};

/// An ErrorCode as Meta.error_code or Control.error_code carry it; 0 or an unknown value (a
/// peer of another version) gives `fallback`.
inline ErrorCode ErrorCodeFromWire(int wire, ErrorCode fallback) {
  return wire > 0 && wire <= static_cast<int>(ErrorCode::kShutDown) ? static_cast<ErrorCode>(wire)
                                                                    : fallback;
}

/// The header of an answer to request `req`: back to its sender and naming the same request
/// (app, timestamp, part, attempt, push and pull), which is how the sender matches it.
Message AnswerTo(const Message& req);

/// Parses and checks frame 0 of a received message. On failure returns false and sets *why;
/// the caller drops the message and counts it.
bool DecodeMeta(const void* data, size_t size, pb::Meta* meta, std::string* why);

}  // namespace ps

#endif  // PS_MESSAGE_MESSAGE_H_
