// Basic types shared by the whole public API: keys, key ranges, roles, value types, errors.
#ifndef PS_BASE_H_
#define PS_BASE_H_

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace ps {

/// A parameter key. Keys are ordered; the ring assigns contiguous key ranges to servers, so
/// applications should spread their raw ids over the 64-bit space with HashKey().
using Key = uint64_t;

/// The largest key is reserved as the exclusive end of the key space: valid keys are
/// [0, kMaxKey).
constexpr Key kMaxKey = std::numeric_limits<Key>::max();

/// Maps an application id (feature index, string hash) to a key spread uniformly over the key
/// space: the splitmix64 finalizer, a bijection on 64-bit integers. It never returns kMaxKey:
/// the one id the finalizer maps there gets the key of id 2^64 - 1 instead, so distinct ids
/// below 2^64 - 1 never share a key.
Key HashKey(uint64_t id);

/// The id that HashKey() maps to `key`: the inverse, so that a model keyed by HashKey can be
/// written with the application's own ids. Of the two ids sharing one key (see HashKey) it
/// returns the one below 2^64 - 1. `key` must be a value HashKey returns (not kMaxKey).
uint64_t UnhashKey(Key key);

/// Half-open key range [begin, end).
struct Range {
  Key begin = 0;
  Key end = 0;
  Range() = default;
  Range(Key b, Key e) : begin(b), end(e) {}
  /// Number of keys in the range (0 when end <= begin).
  uint64_t size() const { return end > begin ? end - begin : 0; }
  /// True if key lies in [begin, end).
  bool Contains(Key k) const { return k >= begin && k < end; }
  /// The whole key space.
  static Range All() { return Range(0, kMaxKey); }
  bool operator==(const Range& o) const { return begin == o.begin && end == o.end; }
  bool operator!=(const Range& o) const { return !(*this == o); }
};

/// The three kinds of node in a job.
enum class Role { kScheduler = 0, kServer = 1, kWorker = 2 };

/// "scheduler", "server" or "worker".
const char* RoleName(Role role);

/// Value types that can be pushed and pulled.
enum class DataType { kFloat = 0, kDouble = 1, kInt32 = 2, kInt64 = 3 };

/// Maps a C++ value type to its DataType tag; only the four supported types are defined.
template <typename V>
struct DataTypeOf;
template <>
struct DataTypeOf<float> {
  static constexpr DataType value = DataType::kFloat;
};
template <>
struct DataTypeOf<double> {
  static constexpr DataType value = DataType::kDouble;
};
template <>
struct DataTypeOf<int32_t> {
  static constexpr DataType value = DataType::kInt32;
};
template <>
struct DataTypeOf<int64_t> {
  static constexpr DataType value = DataType::kInt64;
};

/// Size in bytes of one value of the given type.
int DataTypeSize(DataType t);

/// What kind of failure an Error is, for callers that react differently to each. The library
/// never ends the host process on its own (unless PS_ON_SCHEDULER_LOSS=exit, which ps-launch
/// sets for the processes it starts): fatal conditions reach the program as these.
enum class ErrorCode {
  /// A call was misused: unsorted keys, mismatched sizes, the wrong role, an unknown
  /// timestamp. Nothing was sent.
  kInvalidArgument = 0,
  /// The configuration cannot work (Config::FromEnv, Validate, SetFilters, a port that cannot
  /// be bound); the message names the option.
  kBadConfig = 1,
  /// Waited longer than a configured timeout (registration, a request, a barrier, a task, a
  /// slot among PS_MAX_INFLIGHT); the message names the timeout and what was awaited.
  kTimeout = 2,
  /// A server refused a request (malformed for it: value type, sizes), or the scheduler
  /// refused this node's registration (the job is full).
  kRejected = 3,
  /// This node, or the worker whose request it is, was declared dead by the scheduler (silent
  /// longer than PS_HEARTBEAT_TIMEOUT_MS, or its connection broke) and its work went to others.
  /// A dead node cannot come back: start a new one (ps-launch --join).
  kFenced = 4,
  /// The job stopped because some key range lost every copy (more server failures in one chain
  /// than PS_REPLICAS before a refill ended); nothing is served in its place.
  kDataLost = 5,
  /// The scheduler is gone (its connection broke, or it was silent far too long).
  kSchedulerLost = 6,
  /// The node is stopping, or was used before Start / after Finalize.
  kShutDown = 7,
};

/// "invalid argument", "bad configuration", "timeout", ...
const char* ErrorCodeName(ErrorCode code);

/// Every error that the library reports to its caller. code() says which kind (see
/// ErrorCode); what() says exactly what happened and names the option, timeout, node or range.
/// The exit code of a process that a ps::Error nothing caught ends (Config::FromEnv and Node
/// install the handler that does it; it prints "ps: <code name>: <message>" first): 80 plus the
/// code's number, so 80 invalid argument, 81 bad configuration, 82 timeout, 83 rejected,
/// 84 fenced, 85 data lost, 86 scheduler lost, 87 shut down.
int ExitCodeOf(ErrorCode code);

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, ErrorCode code = ErrorCode::kInvalidArgument)
      : std::runtime_error(what), code_(code) {}
  Error(ErrorCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace ps

#endif  // PS_BASE_H_
