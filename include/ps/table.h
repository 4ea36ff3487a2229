// Named tables: parameter namespaces of their own on the servers, created by name while a job
// runs and addressed by name from any worker group (docs/api.md, "Tables").
#ifndef PS_TABLE_H_
#define PS_TABLE_H_

#include <string>

#include "ps/base.h"

namespace ps {

/// What a named table is. Two tables never share a key: each is an application id of its own,
/// with its own store, replication chains, refill and exactly-once log on every server.
struct TableSpec {
  /// Letters, digits, '_', '-' and '.'; at most 64 characters.
  std::string name;
  DataType dtype = DataType::kFloat;
  /// Values per key (a push with another count is refused by the worker), or 0: variable
  /// length (each push gives its lengths).
  int width = 1;
  /// The update rule, by name: "sum", "count" (a sum that drops zeros), "assign", "max", "min",
  /// "sgd:LR", "adagrad:LR[:EPS]", or an application's rule, whose name has a '.' and which the
  /// servers' TableServer was given (TableRules): "lda.words:0.01".
  std::string rule = "sum";
  /// Filters of the requests a KVWorker opened by name sends (RequestFilters; "" and -1: the
  /// node's).
  std::string compress;
  int quantize_bits = -1;
  double significant = -1;
  /// The application id the scheduler gave the table (kTableAppBase and up); set by
  /// Node::CreateTable.
  int app_id = -1;
};

/// Application ids of named tables start here; smaller ids are the short form (KVWorker(node,
/// id)), which never collides with a named table.
constexpr int kTableAppBase = 1 << 20;

/// "" or what is wrong with a spec, naming the field (the rule's syntax included).
std::string CheckTableSpec(const TableSpec& spec);
/// "" when the two specs describe the same table (the app id aside), else the first field in
/// which they differ ("rule: sum vs max").
std::string TableSpecDiff(const TableSpec& a, const TableSpec& b);

}  // namespace ps

#endif  // PS_TABLE_H_
