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
/// space. It is the splitmix64 finalizer: a bijection on 64-bit integers, so distinct ids never
/// collide. kMaxKey is never returned for ids below 2^64-1 in practice; callers that need a
/// hard guarantee may reject it.
Key HashKey(uint64_t id);

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

/// Every error that the library reports to its caller: bad configuration (the message names the
/// option), a timeout while waiting on the network (the message names what was awaited), a
/// request the servers rejected.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace ps

#endif  // PS_BASE_H_
