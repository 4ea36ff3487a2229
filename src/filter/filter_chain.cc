#include "filter/filter_chain.h"

#include <algorithm>
#include <sstream>

namespace ps {
namespace {

const char* RoleName(int role) { return role == 0 ? "keys" : (role == 1 ? "values" : "other"); }

std::string Name(uint32_t packed) {
  if (packed == 0) return "none";
  std::string n;
  for (int i = 0; i < 8 && (packed >> (4 * i)) & 0xf; ++i) {
    if (!n.empty()) n += "+";
    n += CodecName(static_cast<Codec>((packed >> (4 * i)) & 0xf));
  }
  return n;
}

}  // namespace

FilterOptions FilterOptions::Parse(const std::string& compress, int quantize_bits, int key_cache_mb,
                                   int max_message_mb) {
  FilterOptions o;
  if (max_message_mb < 1) throw Error(ErrorCode::kBadConfig, "PS_MAX_MESSAGE_MB must be >= 1");
  o.max_frame = static_cast<size_t>(max_message_mb) << 20;
  if (key_cache_mb < 0) throw Error(ErrorCode::kBadConfig, "PS_KEY_CACHE_MB must be >= 0");
  o.key_cache_bytes = static_cast<size_t>(key_cache_mb) << 20;
  if (compress.empty() || compress == "off") {
    o.mode = Mode::kOff;
  } else if (compress == "auto") {
    o.mode = Mode::kAuto;
  } else if (compress == "delta") {
    o.mode = Mode::kDelta;
  } else if (compress == "zero") {
    o.mode = Mode::kZero;
  } else if (compress == "snappy") {
    o.mode = Mode::kSnappy;
  } else {
    throw Error(ErrorCode::kBadConfig,
                "PS_COMPRESS='" + compress + "': expected off, auto, delta, zero or snappy");
  }
  if (quantize_bits != 0 && quantize_bits != 8 && quantize_bits != 16) {
    throw Error(ErrorCode::kBadConfig,
                "PS_QUANTIZE=" + std::to_string(quantize_bits) + ": expected 0, 8 or 16");
  }
  o.quantize_bits = quantize_bits;
  return o;
}

FilterChain::FilterChain(FilterOptions options, uint64_t seed)
    : opt_(options), rng_(seed), cache_(options.key_cache_bytes) {}

uint64_t FilterChain::key_cache_hits() const {
  std::lock_guard<std::mutex> lk(mu_);
  return cache_.hits();
}
uint64_t FilterChain::key_cache_misses() const {
  std::lock_guard<std::mutex> lk(mu_);
  return cache_.misses();
}

FilterChain::Role FilterChain::FrameRole(const Message& m, size_t frame) {
  const auto& meta = m.meta;
  const bool request = meta.request();
  switch (meta.op()) {
    case pb::Meta::DATA:
      if (request) {  // a push or pull (or a replica copy): keys, then values, then lengths
        if (frame == 0) return Role::kKeys;
        return frame == 1 ? Role::kValues : Role::kOther;
      }
      return frame == 0 && meta.pull() ? Role::kValues : Role::kOther;  // pull reply: values
    case pb::Meta::DENSE_PUSH:
      return request && frame == 0 ? Role::kValues : Role::kOther;
    case pb::Meta::RANGE_PULL:
      if (request || meta.reducer() != 0) return Role::kOther;  // a reduction's doubles
      return frame == 0 ? Role::kKeys : (frame == 1 ? Role::kValues : Role::kOther);
    case pb::Meta::REFILL:
      if (request) return Role::kOther;
      return frame == 1 ? Role::kKeys : (frame == 2 ? Role::kValues : Role::kOther);
    default:
      return Role::kOther;
  }
}

uint32_t FilterChain::EncodeFrame(const Message& m, size_t frame, SArray<char>* data,
                                  uint64_t* list_id) {
  if (data->size() < opt_.min_frame) return 0;
  const Role role = FrameRole(m, frame);
  const size_t esize = DataTypeSize(static_cast<DataType>(m.meta.dtype()));
  uint32_t packed = 0;
  int stage = 0;
  auto applied = [&](Codec c) { packed |= static_cast<uint32_t>(c) << (4 * stage++); };
  SArray<char> out;
  // The request's own choice (KVWorker::SetFilters) over the node's defaults.
  const int qbits = m.meta.quantize() == 0 ? opt_.quantize_bits : std::max(0, m.meta.quantize());
  using Mode = FilterOptions::Mode;
  const Mode mode =
      m.meta.compress() > 0 && m.meta.compress() <= static_cast<int>(Mode::kSnappy) + 1
          ? static_cast<Mode>(m.meta.compress() - 1)
          : opt_.mode;
  // Lossy first: quantization of the values a worker pushes (not replica copies, replies or
  // hand-offs, which must stay exact copies of the master's state).
  const bool push_values =
      role == Role::kValues && m.meta.request() && !m.meta.replica() && m.meta.push();
  const auto dtype = static_cast<DataType>(m.meta.dtype());
  if (qbits && push_values && (dtype == DataType::kFloat || dtype == DataType::kDouble)) {
    bool ok;
    {
      std::lock_guard<std::mutex> lk(mu_);
      ok = EncodeQuantize(*data, dtype, qbits, &rng_, &out);
    }
    if (ok && out.size() < data->size()) {
      *data = out;
      applied(qbits == 8 ? Codec::kQuantize8 : Codec::kQuantize16);
    }
  }
  // A replica copy refers to a cached list only on its first hop, from the master, which keeps
  // the copy and sends it again on a miss; a member passing it down the chain keeps nothing.
  const bool own_copy = !m.meta.replica() || m.meta.master() == m.meta.sender();
  if (opt_.key_cache_bytes && frame == 0 && role == Role::kKeys && m.meta.request() && own_copy &&
      m.meta.op() == pb::Meta::DATA && data->size() % sizeof(Key) == 0) {
    const SArray<Key> keys(*data);
    const uint64_t hash = HashBytes(data->data(), data->size());
    uint64_t id;
    bool hit;
    {
      std::lock_guard<std::mutex> lk(mu_);
      hit = cache_.Send(m.meta.receiver(), keys, hash, &id);
    }
    if (hit) {
      SArray<uint64_t> ref{id, hash, keys.size()};
      *data = SArray<char>(ref);
      applied(Codec::kKeyCache);
      return packed;
    }
    *list_id = id;  // the message tells the receiver to keep the list under it
  }
  if (packed == 0 && role == Role::kKeys && data->size() % sizeof(Key) == 0 &&
      (mode == Mode::kAuto || mode == Mode::kDelta)) {
    const SArray<Key> keys(*data);
    if (EncodeDeltaVarint(keys.data(), keys.size(), &out) && out.size() < data->size()) {
      *data = out;
      applied(Codec::kDeltaVarint);
    }
  }
  if (packed == 0 && role == Role::kValues && esize > 0 && data->size() % esize == 0 &&
      (mode == Mode::kZero ||
       (mode == Mode::kAuto && ZeroFraction(data->data(), data->size() / esize, esize) >= 0.2))) {
    EncodeZeroSuppress(data->data(), data->size() / esize, esize, &out);
    if (out.size() < data->size()) {
      *data = out;
      applied(Codec::kZeroSuppress);
    }
  }
  if (mode == Mode::kSnappy) {
    EncodeSnappy(*data, &out);
    if (out.size() < data->size()) {
      *data = out;
      applied(Codec::kSnappy);
    }
  }
  return packed;
}

bool FilterChain::Applies(const Message& msg) const {
  return !msg.data.empty() && (enabled() || msg.meta.compress() > 1 || msg.meta.quantize() > 0);
}

void FilterChain::Encode(Message* msg) {
  if (!Applies(*msg)) return;
  msg->meta.clear_codec();
  uint64_t list_id = 0;
  bool any = false;
  std::vector<uint32_t> codecs(msg->data.size(), 0);
  std::vector<size_t> raw(msg->data.size());
  for (size_t i = 0; i < msg->data.size(); ++i) {
    raw[i] = msg->data[i].size();
    codecs[i] = EncodeFrame(*msg, i, &msg->data[i], &list_id);
    any |= codecs[i] != 0;
  }
  if (any) {
    for (uint32_t c : codecs) msg->meta.add_codec(c);
  }
  msg->meta.set_key_list_id(list_id);
  std::lock_guard<std::mutex> lk(mu_);
  auto& peer = sent_peer_[msg->meta.receiver()];
  for (size_t i = 0; i < msg->data.size(); ++i) {
    auto& t = sent_codec_[std::string(RoleName(static_cast<int>(FrameRole(*msg, i)))) + ":" +
                          Name(codecs[i])];
    t.frames++;
    t.raw += raw[i];
    t.wire += msg->data[i].size();
    peer.frames++;
    peer.raw += raw[i];
    peer.wire += msg->data[i].size();
  }
}

Message FilterChain::MissReply(const Message& msg, uint64_t missed) {
  Message miss = AnswerTo(msg);
  miss.meta.set_key_miss(true);
  miss.meta.set_key_list_id(missed);
  if (msg.meta.replica()) {  // the copy's master sends it again (ChainReplicator::OnAck)
    miss.meta.set_replica(true);
    miss.meta.set_fwd_id(msg.meta.fwd_id());
    miss.meta.set_master(msg.meta.master());
  }
  return miss;
}

std::string FilterChain::Decode(Message* msg, uint64_t* missed) {
  if (msg->meta.key_miss()) {  // a reply: the peer does not hold a list this node sent it
    std::lock_guard<std::mutex> lk(mu_);
    cache_.Missed(msg->meta.sender(), msg->meta.key_list_id());
    return "";
  }
  const int n = msg->meta.codec_size();
  if (n != 0 && static_cast<size_t>(n) != msg->data.size()) {
    return "codec list names " + std::to_string(n) + " frames, the message has " +
           std::to_string(msg->data.size());
  }
  std::vector<size_t> wire(msg->data.size());
  std::vector<uint32_t> codecs(msg->data.size(), 0);
  for (size_t i = 0; i < msg->data.size(); ++i) {
    wire[i] = msg->data[i].size();
    const uint32_t packed = n ? msg->meta.codec(static_cast<int>(i)) : 0;
    codecs[i] = packed;
    int stages = 0;
    while (stages < 8 && (packed >> (4 * stages)) & 0xf) ++stages;
    if (stages < 8 && (packed >> (4 * stages)) != 0) return "codec list has a gap";
    for (int s = stages - 1; s >= 0; --s) {  // undo in reverse order
      const auto c = static_cast<Codec>((packed >> (4 * s)) & 0xf);
      SArray<char> out;
      std::string err;
      switch (c) {
        case Codec::kDeltaVarint:
          err = DecodeDeltaVarint(msg->data[i], &out);
          break;
        case Codec::kZeroSuppress:
          err = DecodeZeroSuppress(msg->data[i], &out);
          break;
        case Codec::kSnappy:
          err = DecodeSnappy(msg->data[i], opt_.max_frame, &out);
          break;
        case Codec::kQuantize8:
        case Codec::kQuantize16:
          err = DecodeQuantize(msg->data[i], &out);
          break;
        case Codec::kKeyCache: {
          if (stages != 1 || msg->data[i].size() != 24) {
            err = "key-cache reference malformed";
            break;
          }
          const SArray<uint64_t> ref(msg->data[i]);
          SArray<Key> keys;
          bool found;
          {
            std::lock_guard<std::mutex> lk(mu_);
            found = cache_.Lookup(msg->meta.sender(), ref[0], ref[1], ref[2], &keys);
          }
          if (!found) {
            if (missed) *missed = ref[0];
            return "key list " + std::to_string(ref[0]) + " of node " +
                   std::to_string(msg->meta.sender()) + " is not held here (key-cache miss)";
          }
          out = SArray<char>(keys);
          break;
        }
        default:
          err = "unknown codec " + std::to_string(static_cast<uint32_t>(c));
      }
      if (!err.empty()) return "frame " + std::to_string(i) + ": " + err;
      msg->data[i] = out;
    }
  }
  msg->meta.clear_codec();
  std::lock_guard<std::mutex> lk(mu_);
  if (msg->meta.key_list_id() && !msg->data.empty() && msg->data[0].size() % sizeof(Key) == 0) {
    cache_.Received(msg->meta.sender(), msg->meta.key_list_id(), SArray<Key>(msg->data[0]),
                    HashBytes(msg->data[0].data(), msg->data[0].size()));
  }
  auto& peer = recv_peer_[msg->meta.sender()];
  for (size_t i = 0; i < msg->data.size(); ++i) {
    auto& t = recv_codec_[std::string(RoleName(static_cast<int>(FrameRole(*msg, i)))) + ":" +
                          Name(codecs[i])];
    t.frames++;
    t.raw += msg->data[i].size();
    t.wire += wire[i];
    peer.frames++;
    peer.raw += msg->data[i].size();
    peer.wire += wire[i];
  }
  return "";
}

std::map<std::string, FilterChain::Traffic> FilterChain::sent_by_codec() const {
  std::lock_guard<std::mutex> lk(mu_);
  return sent_codec_;
}
std::map<std::string, FilterChain::Traffic> FilterChain::received_by_codec() const {
  std::lock_guard<std::mutex> lk(mu_);
  return recv_codec_;
}
std::map<int, FilterChain::Traffic> FilterChain::sent_to() const {
  std::lock_guard<std::mutex> lk(mu_);
  return sent_peer_;
}
std::map<int, FilterChain::Traffic> FilterChain::received_from() const {
  std::lock_guard<std::mutex> lk(mu_);
  return recv_peer_;
}

std::string FilterChain::StatsJson() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::ostringstream os;
  auto dump = [&os](const auto& m) {
    os << "{";
    bool first = true;
    for (const auto& kv : m) {
      os << (first ? "" : ",") << "\"" << kv.first << "\":{\"frames\":" << kv.second.frames
         << ",\"raw\":" << kv.second.raw << ",\"wire\":" << kv.second.wire << "}";
      first = false;
    }
    os << "}";
  };
  os << "{\"sent\":";
  dump(sent_codec_);
  os << ",\"received\":";
  dump(recv_codec_);
  os << ",\"sent_to\":";
  dump(sent_peer_);
  os << ",\"received_from\":";
  dump(recv_peer_);
  os << "}";
  return os.str();
}

}  // namespace ps
