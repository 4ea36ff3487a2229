// SArray: a shared, reference-counted, zero-copy array.
#ifndef PS_SARRAY_H_
#define PS_SARRAY_H_

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <type_traits>
#include <vector>

namespace ps {

/// A contiguous array of trivially copyable values whose storage is shared by every copy.
/// Copying an SArray copies a pointer, not the data; Segment() views a part without copying;
/// an SArray<V> can be viewed as SArray<char> (and back) without copying, which is how values
/// travel through the transport. Writers must make sure nobody else reads the storage while it
/// changes (the library never changes an array it was handed).
template <typename V>
class SArray {
  static_assert(std::is_trivially_copyable<V>::value, "SArray holds trivially copyable values");

 public:
  using value_type = V;

  SArray() = default;

  /// n values, each set to init.
  explicit SArray(size_t n, V init = V()) { resize(n, init); }

  /// n values left uninitialised, for buffers that are about to be overwritten entirely
  /// (saves a pass over the memory, which matters for large arrays).
  static SArray<V> Uninitialized(size_t n) {
    SArray<V> a;
    a.reserve(n);
    a.size_ = n;
    return a;
  }

  /// A copy of the values of v.
  SArray(const std::vector<V>& v) { CopyFrom(v.data(), v.size()); }  // NOLINT: implicit on purpose

  /// A copy of the listed values.
  SArray(std::initializer_list<V> l) { CopyFrom(l.begin(), l.size()); }

  /// Wraps existing memory without copying; owner keeps it alive (may be null for memory the
  /// caller guarantees outlives every copy).
  SArray(V* data, size_t size, std::shared_ptr<void> owner)
      : ptr_(std::move(owner), data), size_(size), capacity_(size) {}

  /// Views the storage of another SArray as values of type V, without copying. The byte size
  /// of other must be a multiple of sizeof(V).
  template <typename W, typename = std::enable_if_t<!std::is_same<W, V>::value>>
  explicit SArray(const SArray<W>& other)
      : ptr_(other.ptr(), reinterpret_cast<V*>(other.data())),
        size_(other.size() * sizeof(W) / sizeof(V)),
        capacity_(other.capacity() * sizeof(W) / sizeof(V)) {}

  /// Replaces the content with a copy of n values at data.
  void CopyFrom(const V* data, size_t n) {
    Allocate(n);
    if (n) std::memcpy(ptr_.get(), data, n * sizeof(V));
    size_ = n;
  }

  /// Resizes; new values are set to init. Storage is reallocated (and the old values copied)
  /// only when n exceeds the capacity.
  void resize(size_t n, V init = V()) {
    size_t old = size_;
    if (n > capacity_) reserve(std::max(n, capacity_ * 2));  // geometric: amortised O(1) growth
    size_ = n;
    for (size_t i = old; i < n; ++i) ptr_.get()[i] = init;
  }

  /// Makes room for n values without changing the size.
  void reserve(size_t n) {
    if (n <= capacity_) return;
    std::shared_ptr<V> fresh(new V[n], std::default_delete<V[]>());
    if (size_) std::memcpy(fresh.get(), ptr_.get(), size_ * sizeof(V));
    ptr_ = std::move(fresh);
    capacity_ = n;
  }

  /// Appends one value (amortised constant time).
  void push_back(const V& v) {
    if (size_ == capacity_) reserve(std::max<size_t>(16, capacity_ * 2));
    ptr_.get()[size_++] = v;
  }

  /// Appends the values of other.
  void append(const SArray<V>& other) {
    if (other.empty()) return;
    if (size_ + other.size() > capacity_) reserve(std::max(size_ + other.size(), capacity_ * 2));
    std::memcpy(ptr_.get() + size_, other.data(), other.size() * sizeof(V));
    size_ += other.size();
  }

  /// Drops every value (keeps no storage).
  void clear() {
    ptr_.reset();
    size_ = capacity_ = 0;
  }

  /// A view of values [begin, end) sharing this storage.
  SArray<V> Segment(size_t begin, size_t end) const {
    SArray<V> s;
    s.ptr_ = std::shared_ptr<V>(ptr_, ptr_.get() + begin);
    s.size_ = end - begin;
    s.capacity_ = end - begin;
    return s;
  }

  /// Pointer to the first value (null when nothing was ever allocated).
  V* data() const { return ptr_.get(); }
  /// Number of values.
  size_t size() const { return size_; }
  /// Values that fit before the storage must be reallocated.
  size_t capacity() const { return capacity_; }
  /// True when size() is 0.
  bool empty() const { return size_ == 0; }
  /// Iterators over the values (plain pointers).
  V* begin() { return data(); }
  V* end() { return data() + size_; }
  const V* begin() const { return data(); }
  const V* end() const { return data() + size_; }
  /// Value i (unchecked).
  V& operator[](size_t i) { return ptr_.get()[i]; }
  const V& operator[](size_t i) const { return ptr_.get()[i]; }
  /// The last value (the array must not be empty).
  V& back() { return ptr_.get()[size_ - 1]; }
  const V& back() const { return ptr_.get()[size_ - 1]; }
  /// The shared owner of the storage (what keeps it alive).
  const std::shared_ptr<V>& ptr() const { return ptr_; }
  /// A std::vector copy of the values.
  std::vector<V> ToVector() const { return std::vector<V>(begin(), end()); }

 private:
  void Allocate(size_t n) {
    if (n > capacity_ || ptr_.use_count() > 1) {
      ptr_ = n ? std::shared_ptr<V>(new V[n], std::default_delete<V[]>()) : nullptr;
      capacity_ = n;
    }
  }

  std::shared_ptr<V> ptr_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace ps

#endif  // PS_SARRAY_H_
