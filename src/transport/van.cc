#include "transport/van.h"

#include "transport/fault_van.h"
#include "transport/inproc_van.h"
#include "transport/zmq_van.h"

namespace ps {

std::unique_ptr<Van> MakeVan(const Config& config) {
  std::unique_ptr<Van> van;
  if (config.inproc) {
    van = std::make_unique<InprocVan>(config.inproc->hub());
  } else {
    van = std::make_unique<ZmqVan>(static_cast<int64_t>(config.max_message_mb) << 20,
                                   config.send_queue);
  }
  FaultSpec f;
  f.drop = config.fault_drop;
  f.duplicate = config.fault_duplicate;
  f.delay = config.fault_delay;
  f.delay_ms = config.fault_delay_ms;
  // Every node its own stream, reproducible from the seed and the launcher's role and rank.
  f.seed = config.seed * 1000003 + static_cast<uint64_t>(config.role) * 1009 +
           static_cast<uint64_t>(config.rank_hint + 1);
  if (f.any()) van = std::make_unique<FaultVan>(std::move(van), f);
  return van;
}

}  // namespace ps
