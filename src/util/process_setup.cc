#include "util/process_setup.h"

#include <glog/logging.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>

#include "ps/base.h"

namespace ps {
namespace {

// The handler before ours (set once, read by our handler: process state by nature, as
// std::set_terminate's is).
std::atomic<std::terminate_handler> previous{nullptr};

[[noreturn]] void OnTerminate() {
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      std::fprintf(stderr, "ps: %s: %s\n", ErrorCodeName(err.code()), err.what());
      std::fflush(stderr);
      _exit(ExitCodeOf(err.code()));
    } catch (...) {
    }
  }
  std::terminate_handler before = previous.load();
  if (before) before();
  std::abort();
}

}  // namespace

void ExitOnUncaughtError() {
  static std::once_flag once;
  std::call_once(once, [] { previous.store(std::set_terminate(OnTerminate)); });
}

void InitLoggingOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (google::IsGoogleLoggingInitialized()) return;
    if (!std::getenv("GLOG_logtostderr") && !std::getenv("GLOG_log_dir") &&
        !std::getenv("GLOG_alsologtostderr")) {
      FLAGS_logtostderr = true;
    }
    google::InitGoogleLogging("ps");
  });
}

}  // namespace ps
