// KVServer: the server side of one application id.
#ifndef PS_KV_SERVER_H_
#define PS_KV_SERVER_H_

#include <memory>

#include "ps/base.h"
#include "ps/node.h"
#include "ps/update_rule.h"

namespace ps {

class StoreBase;

/// The untyped core of KVServer<V>: validates requests, runs them against the store, replies.
class KVServerBase {
 public:
  /// Number of keys this server stores.
  size_t NumKeys() const;
  /// Requests rejected because they were malformed or did not match the store.
  uint64_t RejectedRequests() const;

 protected:
  KVServerBase(Node* node, int app_id, DataType dtype, std::shared_ptr<StoreBase> store);
  ~KVServerBase();

  /// Builds the store for value type V with a rule (defined in the library for the four types).
  template <typename V>
  static std::shared_ptr<StoreBase> MakeStore(std::shared_ptr<const UpdateRule<V>> rule);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Serves the keys this node masters for app_id. The framework owns the store; `rule` says how
/// pushes change it (SumRule by default). Requests are handled on the node's receive thread.
/// Construct it right after Node::Start(); requests that arrive earlier are kept and handled
/// then.
template <typename V>
class KVServer : public KVServerBase {
 public:
  explicit KVServer(Node* node, int app_id = 0,
                    std::shared_ptr<const UpdateRule<V>> rule = std::make_shared<SumRule<V>>())
      : KVServerBase(node, app_id, DataTypeOf<V>::value, MakeStore<V>(std::move(rule))) {}
};

}  // namespace ps

#endif  // PS_KV_SERVER_H_
