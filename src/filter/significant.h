// The significantly-modified filter (DESIGN §9), both ends of a link. Pure logic: no I/O.
//
// The sender (a server answering pulls) sends a value only when it moved by more than a
// threshold from the value it last sent that peer for that key; the receiver (the worker) takes
// every other value from its copy of what it was last sent. So each value the receiver sees is
// within the threshold of the sender's, and a threshold of 0 is lossless (only values that
// changed travel).
//
// Both ends must hold the same copy. Every coded frame carries the link's epoch and sequence
// number and the receiver decodes only the frame it expects next, so a lost, duplicated or
// reordered frame cannot yield a stale value: it is refused, the receiver starts a new epoch
// (it forgets its copy) and asks the sender for it with its next request; the sender forgets
// too, and the first frame of an epoch (sequence 0) carries every value. The sender may also
// start an epoch on its own (its copy outgrew the memory bound). Wrong values are impossible,
// not unlikely: no hash is trusted.
#ifndef PS_FILTER_SIGNIFICANT_H_
#define PS_FILTER_SIGNIFICANT_H_

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "ps/base.h"
#include "ps/sarray.h"

namespace ps {

class SignificantFilter {
 public:
  /// max_bytes bounds the copy kept per peer on each side (values plus index).
  explicit SignificantFilter(size_t max_bytes = size_t{256} << 20) : max_bytes_(max_bytes) {}

  /// Sender: codes the values of n keys (width values each of dtype float or double) for peer.
  /// Layout: uint64 epoch, seq, n; uint32 width, esize; uint64 hash of the bitmap; a bitmap
  /// of the values sent (one bit per key, 64 per word); those keys' values in order.
  SArray<char> Encode(int peer, const Key* keys, size_t n, const char* vals, size_t width,
                      DataType dtype, double threshold);
  /// Sender: the peer asks for epoch `epoch` (ignored unless newer than the current one).
  void Reset(int peer, uint64_t epoch);

  /// Receiver: decodes a frame from peer for keys (the keys of the request it answers) into
  /// *out (n * width values). "" or why it was refused; *stale is set when the frame belongs
  /// to an epoch the receiver already left (then it only needs to ask again, no new epoch).
  std::string Decode(int peer, const Key* keys, size_t n, const SArray<char>& in, SArray<char>* out,
                     bool* stale);
  /// Receiver: a frame of peer could not be decoded (its request is unknown): start a new epoch
  /// unless it was stale.
  void Refuse(int peer, uint64_t frame_epoch);
  /// Receiver: the epoch to ask peer for with the next request (0: none).
  uint64_t PendingReset(int peer) const;
  /// The epoch of a coded frame (0 when too short).
  static uint64_t FrameEpoch(const SArray<char>& in);

  struct Stats {
    uint64_t sent = 0;        // sender: values sent
    uint64_t suppressed = 0;  // sender: values left to the receiver's copy
    uint64_t refused = 0;     // receiver: frames refused
    uint64_t epochs = 0;      // new epochs started (either side)
  };
  Stats stats() const { return stats_; }

 private:
  struct Link {
    uint64_t epoch = 0;
    uint64_t seq = 0;  // sender: the next to send; receiver: the next expected
    uint32_t width = 0, esize = 0;
    std::unordered_map<Key, uint32_t> slot;  // key -> index into vals (width values each)
    std::vector<char> vals;
    uint64_t pending_reset = 0;  // receiver only
    void Clear(uint64_t new_epoch) {
      epoch = new_epoch;
      seq = 0;
      width = esize = 0;
      slot.clear();
      vals.clear();
    }
  };
  size_t Bytes(const Link& l) const { return l.vals.size() + l.slot.size() * 32; }

  size_t max_bytes_;
  std::map<int, Link> send_, recv_;
  Stats stats_;
};

}  // namespace ps

#endif  // PS_FILTER_SIGNIFICANT_H_
