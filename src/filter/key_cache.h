// Key caching (DESIGN §9), both ends of every link. Pure logic: no I/O.
//
// A sender gives each distinct key list it sends to a peer an id, unique for that sender in the
// job (a counter; node ids are never reused, so (sender, id) never names two lists), and sends
// the list in full the first time. The receiver keeps lists by (sender, id). Afterwards the
// sender sends (id, hash, count) instead, but only after comparing the list with the one it
// sent under that id, byte for byte; the receiver checks hash and count of its copy. A list the
// receiver no longer has (evicted, or a restarted receiver: a new node) is a miss: it is
// answered, the sender forgets the id and sends the keys again. So a wrong list cannot be
// used: the id names exactly one list, and both ends verify it.
#ifndef PS_FILTER_KEY_CACHE_H_
#define PS_FILTER_KEY_CACHE_H_

#include <cstdint>
#include <list>
#include <map>
#include <unordered_map>
#include <utility>

#include "ps/base.h"
#include "ps/sarray.h"

namespace ps {

/// An LRU of key lists by 64-bit key, bounded in bytes.
class KeyListLru {
 public:
  explicit KeyListLru(size_t max_bytes) : max_bytes_(max_bytes) {}
  struct Entry {
    SArray<Key> keys;
    uint64_t hash = 0;
    uint64_t id = 0;
  };
  /// The entry, marked as used now; null when absent.
  const Entry* Find(uint64_t key);
  /// Inserts or replaces; evicts the least recently used entries beyond the bound.
  void Put(uint64_t key, Entry e);
  void Erase(uint64_t key);
  size_t bytes() const { return bytes_; }
  size_t size() const { return map_.size(); }
  uint64_t evictions() const { return evictions_; }

 private:
  size_t max_bytes_, bytes_ = 0;
  uint64_t evictions_ = 0;
  std::list<uint64_t> order_;  // most recent first
  std::unordered_map<uint64_t, std::pair<Entry, std::list<uint64_t>::iterator>> map_;
};

class KeyCache {
 public:
  /// max_bytes bounds what is kept per peer, on each side.
  explicit KeyCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  /// Sender: the list for peer. Returns true and sets *id when the peer has it (send the
  /// reference), else false and *id = the id to send it under (the peer caches it).
  bool Send(int peer, const SArray<Key>& keys, uint64_t hash, uint64_t* id);
  /// Sender: the peer answered that it does not have list id.
  void Missed(int peer, uint64_t id);

  /// Receiver: remembers a list peer sent in full under id.
  void Received(int peer, uint64_t id, const SArray<Key>& keys, uint64_t hash);
  /// Receiver: the list peer named; false when not held or not matching hash and count.
  bool Lookup(int peer, uint64_t id, uint64_t hash, uint64_t count, SArray<Key>* keys);

  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  KeyListLru& Side(std::map<int, KeyListLru>* m, int peer);
  size_t max_bytes_;
  uint64_t next_id_ = 1;
  uint64_t hits_ = 0, misses_ = 0;
  std::map<int, KeyListLru> sent_;      // per peer, by hash (the id inside)
  std::map<int, KeyListLru> received_;  // per peer, by id
};

}  // namespace ps

#endif  // PS_FILTER_KEY_CACHE_H_
