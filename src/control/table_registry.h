// The scheduler's registry of named tables (include/ps/table.h): names to specs and the
// application ids it gives them. Pure logic.
#ifndef PS_CONTROL_TABLE_REGISTRY_H_
#define PS_CONTROL_TABLE_REGISTRY_H_

#include <string>
#include <vector>

#include "ps/table.h"

namespace ps {

/// Splits a table's rule "name:A:B" into its name and numbers; false when a number is missing,
/// malformed or not positive.
bool ParseRule(const std::string& rule, std::string* name, std::vector<double>* args);

/// Whether a rule name is an application's (TableRules): it has a '.'.
inline bool IsAppRule(const std::string& name) { return name.find('.') != std::string::npos; }

class TableRegistry {
 public:
  /// Creates the table *spec names, or finds it when it exists with the same spec; fills
  /// spec->app_id. Returns "" or why not (a malformed spec, or the name taken by another spec).
  std::string Create(TableSpec* spec);
  /// Every table, in order of creation.
  const std::vector<TableSpec>& tables() const { return tables_; }

 private:
  std::vector<TableSpec> tables_;
};

}  // namespace ps

#endif  // PS_CONTROL_TABLE_REGISTRY_H_
