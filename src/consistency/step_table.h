// The steps of the live workers as one server sees them. Pure logic.
#ifndef PS_CONSISTENCY_STEP_TABLE_H_
#define PS_CONSISTENCY_STEP_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace ps {

/// A worker's step is the number of steps it has completed: it starts at 0, a push or pull
/// tagged with step t says the worker has completed at least t steps, and Clock() after step t
/// says t + 1. Steps never go back.
class StepTable {
 public:
  /// Adds a worker at the current minimum step (0 when the table is empty); a worker already
  /// present keeps its step. Returns the step it entered at.
  int64_t Add(int worker);
  /// Adds a worker at an explicit step (initial membership: every worker at 0).
  void AddAt(int worker, int64_t step);
  /// Removes a worker (it left or was declared dead). Unknown ids are ignored.
  void Remove(int worker);
  bool Has(int worker) const;
  /// Raises the worker's step to at least `step`. Returns false for a worker not in the table
  /// (its report is ignored: a worker declared dead does not come back through a late message).
  bool Advance(int worker, int64_t step);
  /// The worker's step, or -1 if it is not in the table.
  int64_t Step(int worker) const;
  /// The smallest step of all workers; INT64_MAX when the table is empty.
  int64_t Min() const;
  /// The largest step; -1 when empty.
  int64_t Max() const;
  /// How many workers have a step below `step`.
  size_t CountBelow(int64_t step) const;
  size_t size() const { return ids_.size(); }
  /// Worker ids in increasing order, and their steps at the same index.
  const std::vector<int>& workers() const { return ids_; }
  const std::vector<int64_t>& steps() const { return steps_; }

 private:
  size_t Index(int worker) const;  // ids_.size() if absent
  void Count(int64_t step, int delta);

  std::vector<int> ids_;
  std::vector<int64_t> steps_;
  std::map<int64_t, int> hist_;  // step -> number of workers at it
};

}  // namespace ps

#endif  // PS_CONSISTENCY_STEP_TABLE_H_
