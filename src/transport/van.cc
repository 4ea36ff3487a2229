#include "transport/van.h"

#include "transport/inproc_van.h"
#include "transport/zmq_van.h"

namespace ps {

std::unique_ptr<Van> MakeVan(const Config& config) {
  if (config.inproc) return std::make_unique<InprocVan>(config.inproc->hub());
  return std::make_unique<ZmqVan>();
}

}  // namespace ps
