// UcxVan's batches: small messages queued for one peer leave packed in one active message, and
// the receiver splits a batch at its turn in the sender's stream (ucx_wire.h has the layout).
#include <cstring>

#include "transport/ucx_van.h"
#include "transport/ucx_wire.h"

namespace ps {

std::unique_ptr<SendHold> UcxVan::Pack(std::vector<std::unique_ptr<SendHold>>* run,
                                       uint64_t stream) {
  auto b = std::make_unique<SendHold>();
  b->count = 0;
  size_t total = 0;
  for (const auto& h : *run) total += Padded(h->header.size()) + (h->bytes - h->header.size());
  b->packed.resize(total);
  char* o = b->packed.data();
  for (const auto& h : *run) {
    // The message's own header, its sequence number unstamped: the batch's first and the
    // message's place in it say it.
    std::memcpy(o, h->header.data(), h->header.size());
    std::memset(o + h->header.size(), 0, Padded(h->header.size()) - h->header.size());
    o += Padded(h->header.size());
    for (const auto& v : h->iov) {
      std::memcpy(o, v.buffer, v.length);
      o += v.length;
    }
    b->bytes += h->bytes;  // what the receiver credits: each message as if it came alone
    b->count += h->count;
  }
  b->peer = run->front()->peer;
  b->header.resize(kFixed);
  const Fixed f{kHeaderMagic, 0, b->count, kBatch, stream, 0};
  std::memcpy(b->header.data(), &f, kFixed);
  b->iov.push_back({b->packed.data(), b->packed.size()});
  return b;
}

void UcxVan::SendAll(const std::shared_ptr<Peer>& peer,
                     std::vector<std::unique_ptr<SendHold>>* holds) {
  // A run of small messages is packed (a copy of a few KB each, against a send() and a
  // receive per message); a large one goes alone, from its frames.
  std::vector<std::unique_ptr<SendHold>> run;
  uint64_t run_bytes = 0;
  auto emit = [&] {
    if (run.size() == 1) {
      SendNow(peer, std::move(run.front()));
    } else if (run.size() > 1) {
      counters_.messages_batched += run.size();
      SendNow(peer, Pack(&run, peer->stream));
    }
    run.clear();
    run_bytes = 0;
  };
  for (auto& h : *holds) {
    if (h->bytes > kPackItem) {
      emit();
      SendNow(peer, std::move(h));
      continue;
    }
    const uint64_t b = Padded(h->header.size()) + h->bytes;
    if (run_bytes + b > kPackTotal || run.size() >= kMaxBatch) emit();
    run_bytes += b;
    run.push_back(std::move(h));
  }
  emit();
}

void UcxVan::DeliverBatch(uint64_t stream, const Slot& batch) {
  const SArray<char>& d = batch.data;
  size_t at = 0;
  uint32_t done = 0;
  for (; done < batch.count; ++done) {
    if (d.size() - at < kFixed) break;
    Fixed f;
    std::memcpy(&f, d.data() + at, kFixed);
    if (f.magic != kHeaderMagic || f.frames > kMaxFrames || f.stream != stream ||
        (f.flags & kBatch)) {
      break;
    }
    const bool meta_in_data = f.flags & kMetaInData;
    const uint64_t hlen = kFixed + f.frames * sizeof(uint64_t) + (meta_in_data ? 0 : f.meta_size);
    if (hlen > d.size() - at) break;
    uint64_t dlen = meta_in_data ? Padded(f.meta_size) : 0;
    bool ok = true;
    for (uint32_t i = 0; i < f.frames && ok; ++i) {
      uint64_t size;
      std::memcpy(&size, d.data() + at + kFixed + i * sizeof(uint64_t), sizeof(size));
      ok = size <= d.size();  // no sum below can wrap
      dlen += Padded(size);
    }
    const size_t data_at = at + Padded(hlen);
    if (!ok || data_at > d.size() || dlen > d.size() - data_at) break;
    Deliver(d.Segment(at, at + hlen), d.Segment(data_at, data_at + dlen));
    at = data_at + dlen;
  }
  if (done < batch.count) {
    // Only garbage that passes for a batch gets here: the rest is dropped, counted and
    // credited (the sender's window must not shrink for it).
    std::lock_guard<std::mutex> lk(q_mu_);
    counters_.malformed_dropped++;
    counters_.bytes_received += d.size() - at;
    Taken(stream, &inbox_[stream], d.size() - at, batch.count - done);
  }
}

}  // namespace ps
