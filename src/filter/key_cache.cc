#include "filter/key_cache.h"

#include <cstring>

namespace ps {

const KeyListLru::Entry* KeyListLru::Find(uint64_t key) {
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second.second);
  return &it->second.first;
}

void KeyListLru::Put(uint64_t key, Entry e) {
  Erase(key);
  const size_t size = e.keys.size() * sizeof(Key);
  if (size > max_bytes_) return;  // larger than the whole cache: never kept
  order_.push_front(key);
  map_.emplace(key, std::make_pair(std::move(e), order_.begin()));
  bytes_ += size;
  while (bytes_ > max_bytes_ && !order_.empty()) {
    Erase(order_.back());
    evictions_++;
  }
}

void KeyListLru::Erase(uint64_t key) {
  auto it = map_.find(key);
  if (it == map_.end()) return;
  bytes_ -= it->second.first.keys.size() * sizeof(Key);
  order_.erase(it->second.second);
  map_.erase(it);
}

KeyListLru& KeyCache::Side(std::map<int, KeyListLru>* m, int peer) {
  auto it = m->find(peer);
  if (it == m->end()) it = m->emplace(peer, KeyListLru(max_bytes_)).first;
  return it->second;
}

bool KeyCache::Send(int peer, const SArray<Key>& keys, uint64_t hash, uint64_t* id) {
  KeyListLru& lru = Side(&sent_, peer);
  const KeyListLru::Entry* e = lru.Find(hash);
  if (e && e->keys.size() == keys.size() &&
      std::memcmp(e->keys.data(), keys.data(), keys.size() * sizeof(Key)) == 0) {
    *id = e->id;
    hits_++;
    return true;
  }
  // New, or another list with the same hash: a fresh id (the old one is forgotten here).
  KeyListLru::Entry fresh;
  // A copy: the caller may change its array once the request completed, and the comparison
  // above must be against what the peer holds.
  fresh.keys.CopyFrom(keys.data(), keys.size());
  fresh.hash = hash;
  fresh.id = next_id_++;
  *id = fresh.id;
  lru.Put(hash, fresh);
  return false;
}

void KeyCache::Missed(int peer, uint64_t id) {
  misses_++;
  // Entries are found by hash, the miss names an id; a miss is rare (the peer evicted or is
  // new), so forget every list of this peer: each is sent in full once more.
  (void)id;
  auto it = sent_.find(peer);
  if (it != sent_.end()) it->second = KeyListLru(max_bytes_);
}

void KeyCache::Received(int peer, uint64_t id, const SArray<Key>& keys, uint64_t hash) {
  KeyListLru::Entry e;
  e.keys = keys;
  e.hash = hash;
  e.id = id;
  Side(&received_, peer).Put(id, e);
}

bool KeyCache::Lookup(int peer, uint64_t id, uint64_t hash, uint64_t count, SArray<Key>* keys) {
  const KeyListLru::Entry* e = Side(&received_, peer).Find(id);
  if (!e || e->hash != hash || e->keys.size() != count) return false;
  *keys = e->keys;
  return true;
}

}  // namespace ps
