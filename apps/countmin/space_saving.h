// SpaceSaving (Metwally, Agrawal and El Abbadi, 2005): the candidates for heavy hitters in
// bounded memory. With capacity c, every item seen more than N / c times is held.
#ifndef PS_APPS_COUNTMIN_SPACE_SAVING_H_
#define PS_APPS_COUNTMIN_SPACE_SAVING_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace countmin {

class SpaceSaving {
 public:
  struct Entry {
    uint64_t id = 0;
    std::string name;
    uint64_t count = 0;  // an upper bound on the item's occurrences seen
  };
  explicit SpaceSaving(size_t capacity);
  /// Counts one occurrence of item id (name: how to print it).
  void Add(uint64_t id, std::string_view name);
  /// The held entries with the largest counts first (at most k).
  std::vector<Entry> Top(size_t k) const;
  size_t size() const { return heap_.size(); }

 private:
  void SiftDown(size_t i);
  size_t capacity_;
  std::vector<Entry> heap_;  // a min-heap by count
  std::unordered_map<uint64_t, size_t> where_;
};

}  // namespace countmin

#endif  // PS_APPS_COUNTMIN_SPACE_SAVING_H_
