// The scheduler's registry of named tables (include/ps/table.h): names to specs and the
// application ids it gives them. Pure logic.
#ifndef PS_CONTROL_TABLE_REGISTRY_H_
#define PS_CONTROL_TABLE_REGISTRY_H_

#include <string>
#include <vector>

#include "ps/table.h"

namespace ps {

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
