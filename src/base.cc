#include "ps/base.h"

namespace ps {

namespace {
// splitmix64's finalizer: a bijection on 64-bit integers.
uint64_t Mix(uint64_t id) {
  uint64_t z = id + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The inverse of a * x mod 2^64 for odd a (Newton's iteration doubles the correct bits).
constexpr uint64_t InverseOdd(uint64_t a) {
  uint64_t x = a;  // correct to 3 bits for odd a
  for (int i = 0; i < 5; ++i) x *= 2 - a * x;
  return x;
}

uint64_t Unmix(uint64_t z) {
  z ^= (z >> 31) ^ (z >> 62);
  z *= InverseOdd(0x94d049bb133111ebULL);
  z ^= (z >> 27) ^ (z >> 54);
  z *= InverseOdd(0xbf58476d1ce4e5b9ULL);
  z ^= (z >> 30) ^ (z >> 60);
  return z - 0x9e3779b97f4a7c15ULL;
}
}  // namespace

uint64_t UnhashKey(Key key) {
  const uint64_t id = Unmix(key);
  // Mix(kMaxKey) is also the key of the id that Mix maps to kMaxKey.
  return id == kMaxKey ? Unmix(kMaxKey) : id;
}

Key HashKey(uint64_t id) {
  // One id maps to kMaxKey, which is no key (the end of the key space): it takes the key of
  // the largest id instead, so ids below 2^64 - 1 still never share a key.
  const uint64_t z = Mix(id);
  return z == kMaxKey ? Mix(kMaxKey) : z;
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kScheduler:
      return "scheduler";
    case Role::kServer:
      return "server";
    case Role::kWorker:
      return "worker";
  }
  return "unknown";
}

int DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kFloat:
    case DataType::kInt32:
      return 4;
    case DataType::kDouble:
    case DataType::kInt64:
      return 8;
  }
  return 0;
}

int ExitCodeOf(ErrorCode code) { return 80 + static_cast<int>(code); }

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kBadConfig:
      return "bad configuration";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kRejected:
      return "rejected";
    case ErrorCode::kFenced:
      return "fenced";
    case ErrorCode::kDataLost:
      return "data lost";
    case ErrorCode::kSchedulerLost:
      return "scheduler lost";
    case ErrorCode::kShutDown:
      return "shut down";
  }
  return "unknown";
}

}  // namespace ps
