#include "message/message.h"

#include <sstream>

namespace ps {

std::string Message::DebugString() const {
  std::ostringstream os;
  os << "msg{" << meta.sender() << "->" << meta.receiver();
  if (meta.has_control()) {
    os << " control=" << meta.control().cmd();
  } else {
    os << " app=" << meta.app_id() << " ts=" << meta.timestamp()
       << (meta.request() ? " req" : " reply") << (meta.push() ? " push" : "")
       << (meta.pull() ? " pull" : "") << " op=" << meta.op();
  }
  os << " frames=" << data.size() << " bytes=" << DataBytes() << "}";
  return os.str();
}

bool DecodeMeta(const void* data, size_t size, pb::Meta* meta, std::string* why) {
  if (size == 0 || size > (1u << 24)) {
    *why = "bad meta size " + std::to_string(size);
    return false;
  }
  if (!meta->ParseFromArray(data, static_cast<int>(size))) {
    *why = "meta does not parse";
    return false;
  }
  if (meta->magic() != kMagic) {
    *why = "bad magic";
    return false;
  }
  // receiver -2: a node without an id yet (the scheduler's REJECT of its registration; it was
  // dropped here, and a rejected node waited out its registration timeout without a word).
  if (!pb::Meta_Op_IsValid(meta->op()) || meta->dtype() < 0 || meta->dtype() > 3 ||
      meta->width() < 0 || meta->sender() < -1 || meta->receiver() < -2) {
    *why = "meta fields out of range";
    return false;
  }
  if (meta->has_control() && !pb::Control_Command_IsValid(meta->control().cmd())) {
    *why = "unknown control command";
    return false;
  }
  return true;
}

Message AnswerTo(const Message& req) {
  Message a;
  a.meta.set_receiver(req.meta.sender());
  a.meta.set_app_id(req.meta.app_id());
  a.meta.set_timestamp(req.meta.timestamp());
  a.meta.set_part(req.meta.part());
  a.meta.set_attempt(req.meta.attempt());
  a.meta.set_request(false);
  a.meta.set_push(req.meta.push());
  a.meta.set_pull(req.meta.pull());
  return a;
}

}  // namespace ps
