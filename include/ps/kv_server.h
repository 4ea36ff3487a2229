// KVServer: the server side of one application id.
#ifndef PS_KV_SERVER_H_
#define PS_KV_SERVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ps/base.h"
#include "ps/node.h"
#include "ps/table.h"
#include "ps/update_rule.h"

namespace ps {

class StoreBase;

/// The untyped core of KVServer<V>: validates requests, runs them against the store, replies.
class KVServerBase {
 public:
  /// Number of keys this server stores (the ranges it masters and its replicas).
  size_t NumKeys() const;
  /// Memory the stored keys, values and update-rule state take (without the containers' spare
  /// room): what a table costs on this server.
  size_t StoreBytes() const;
  /// Number of stored keys in the ranges this server masters under the current ring.
  size_t NumMasteredKeys() const;
  /// Key ranges this server still has to copy from others (after a failure, or while it
  /// joins); 0 when it holds everything its chains give it.
  size_t PendingRanges() const;
  /// Requests rejected because they were malformed or did not match the store.
  uint64_t RejectedRequests() const;
  /// Pushes that arrived again (a worker's resend, a duplicated message) and were acknowledged
  /// without being applied a second time.
  uint64_t DuplicatePushes() const;

  /// For each segment of the current ring whose chain this server is in (master or replica)
  /// and holds completely: the segment and a hash (FNV-1a, 64 bits) of its stored keys and raw
  /// slots, values and update-rule state. Every member of a chain reports the same hash for a
  /// segment once the pushes to it are acknowledged (DESIGN §8, invariant 3): a check of the
  /// replicas that needs no access to their memory (tests/fault compares them across
  /// processes).
  std::vector<std::pair<Range, uint64_t>> ChainDigests() const;

  /// What the barrier did on this server (docs/consistency.md).
  struct BarrierStats {
    std::string policy;     // the policy spec in force
    int64_t clock = 0;      // server clock: the smallest step of the live workers
    uint64_t reads = 0;     // pulls seen
    uint64_t deferred = 0;  // pulls the barrier held
    size_t held = 0;        // pulls held right now
    uint64_t checks = 0;    // policy decisions (a held pull is re-checked at every step change)
    std::vector<std::pair<int, int64_t>> steps;  // (worker id, step) of the live workers
    // Observed staleness of applied pushes: server clock at apply minus the clock the pushing
    // worker's last pull read -> number of pushes.
    std::map<int64_t, uint64_t> staleness;
    // Lag of answered pulls: the reader's step minus the server clock when the pull was
    // answered (how far behind the slowest live worker was) -> number of pulls.
    std::map<int64_t, uint64_t> read_lag;
  };
  BarrierStats barrier_stats() const;

  /// What this server sent its replicas (docs/fault-tolerance.md).
  struct ReplicationStats {
    uint64_t copies = 0;  // copies of pushes sent along chains (re-sends included)
    uint64_t bytes = 0;   // their data bytes
    uint64_t aggregated =
        0;                   // pushes that travelled inside an aggregate (PS_REPLICATION_WINDOW_MS)
    uint64_t conflicts = 0;  // aggregates that arrived partly applied and were refused (0)
  };
  ReplicationStats replication_stats() const;

  /// What the significantly-modified filter did on this server's pull replies
  /// (RequestFilters::significant).
  struct SignificantStats {
    uint64_t sent = 0;        // values sent
    uint64_t suppressed = 0;  // values left to the workers' copies
    uint64_t epochs = 0;      // copies started afresh (a worker refused a reply, or the bound)
  };
  SignificantStats significant_stats() const;

 protected:
  KVServerBase(Node* node, int app_id, DataType dtype, std::shared_ptr<StoreBase> store);
  ~KVServerBase();

  /// Builds the store for value type V with a rule (defined in the library for the four types).
  template <typename V>
  static std::shared_ptr<StoreBase> MakeStore(std::shared_ptr<const UpdateRule<V>> rule,
                                              Reducers<V> reducers);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Serves the keys this node masters for app_id. The framework owns the store; `rule` says how
/// pushes change it (SumRule by default); `reducers` are the functions KVWorker::Reduce can run
/// over its stored keys (every server of the table must be given the same ones: any of them
/// may come to master a range). Requests are handled on the node's receive thread. Construct
/// it right after Node::Start(); requests that arrive earlier are kept and handled then.
template <typename V>
class KVServer : public KVServerBase {
 public:
  explicit KVServer(Node* node, int app_id = 0,
                    std::shared_ptr<const UpdateRule<V>> rule = std::make_shared<SumRule<V>>(),
                    Reducers<V> reducers = {})
      : KVServerBase(node, app_id, DataTypeOf<V>::value,
                     MakeStore<V>(std::move(rule), std::move(reducers))) {}
};

/// The update rule a table names (TableSpec::rule): sum, count, assign, max, min, sgd:LR,
/// adagrad:LR[:EPS]. Throws ps::Error for another name.
template <typename V>
std::shared_ptr<const UpdateRule<V>> MakeRule(const std::string& rule);

/// What an application's rule gives a table's KVServer: its update rule and the reducers its
/// workers may run (KVWorker::Reduce).
template <typename V>
struct TableRule {
  std::shared_ptr<const UpdateRule<V>> rule;
  Reducers<V> reducers;
};

/// Rules that applications add to a TableServer's built-in ones, so that one server program
/// can serve the tables of several applications at once. A rule name with a '.' in it
/// ("lda.words", TableSpec::rule "lda.words:0.01" with its numbers) is an application's: a
/// server serves such a table only when its TableServer was given the name, and otherwise
/// stops the job with a message that names the table and the rule.
class TableRules {
 public:
  /// Makes a table's rule from the numbers after the name in its spec (each positive).
  template <typename V>
  using Make = std::function<TableRule<V>(const std::vector<double>& args)>;
  /// Adds rule `name` for tables of value type V. Throws ps::Error for a name without a '.'
  /// or one already added.
  template <typename V>
  TableRules& Add(const std::string& name, Make<V> make) {
    Put(name, DataTypeOf<V>::value, std::make_shared<Make<V>>(std::move(make)));
    return *this;
  }
  /// Adds every rule of other (a server program that serves several applications).
  TableRules& Add(const TableRules& other);
  /// The names added, sorted.
  std::vector<std::string> names() const;

 private:
  friend class TableServer;
  struct Entry {
    DataType dtype;
    std::shared_ptr<const void> make;  // a Make<V> of the entry's type
  };
  void Put(const std::string& name, DataType dtype, std::shared_ptr<const void> make);
  std::map<std::string, Entry> rules_;
};

/// Serves every named table (Node::CreateTable) on a server node: those that exist when it is
/// built and those created while the job runs, each as a KVServer of its value type with the
/// rule its spec names (a built-in one or one of `rules`). Construct it after Node::Start()
/// and keep it alive until Finalize returns, like a KVServer; a server that joins a running
/// job serves the tables that exist.
class TableServer {
 public:
  explicit TableServer(Node* node, TableRules rules = TableRules());
  ~TableServer();
  TableServer(const TableServer&) = delete;
  TableServer& operator=(const TableServer&) = delete;
  /// The server of a table this node serves, or null.
  KVServerBase* Find(const std::string& table) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ps

#endif  // PS_KV_SERVER_H_
