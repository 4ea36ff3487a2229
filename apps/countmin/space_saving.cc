#include "countmin/space_saving.h"

#include <algorithm>
#include <stdexcept>

namespace countmin {

SpaceSaving::SpaceSaving(size_t capacity) : capacity_(capacity) {
  if (capacity == 0) throw std::runtime_error("--hh_capacity must be positive");
  heap_.reserve(capacity);
  where_.reserve(capacity * 2);
}

void SpaceSaving::Add(uint64_t id, std::string_view name) {
  auto it = where_.find(id);
  if (it != where_.end()) {
    heap_[it->second].count++;
    SiftDown(it->second);
    return;
  }
  if (heap_.size() < capacity_) {
    // A new entry of count 1 is a smallest one: it goes to the root's level by sifting up.
    heap_.push_back({id, std::string(name), 1});
    size_t i = heap_.size() - 1;
    while (i > 0 && heap_[(i - 1) / 2].count > heap_[i].count) {
      std::swap(heap_[i], heap_[(i - 1) / 2]);
      where_[heap_[i].id] = i;
      i = (i - 1) / 2;
    }
    where_[id] = i;
    return;
  }
  // Replace the smallest: the newcomer inherits its count (its error bound).
  Entry& root = heap_[0];
  where_.erase(root.id);
  root.id = id;
  root.name.assign(name.data(), name.size());
  root.count++;
  where_[id] = 0;
  SiftDown(0);
}

void SpaceSaving::SiftDown(size_t i) {
  const size_t n = heap_.size();
  for (;;) {
    size_t m = i;
    const size_t l = 2 * i + 1, r = l + 1;
    if (l < n && heap_[l].count < heap_[m].count) m = l;
    if (r < n && heap_[r].count < heap_[m].count) m = r;
    if (m == i) break;
    std::swap(heap_[i], heap_[m]);
    where_[heap_[i].id] = i;
    where_[heap_[m].id] = m;
    i = m;
  }
}

std::vector<SpaceSaving::Entry> SpaceSaving::Top(size_t k) const {
  std::vector<Entry> out(heap_);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return a.count != b.count ? a.count > b.count : a.id < b.id;
  });
  if (out.size() > k) out.resize(k);
  return out;
}

}  // namespace countmin
