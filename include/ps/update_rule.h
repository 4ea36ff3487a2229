// Update rules: how a server applies pushed values to the values it stores.
#ifndef PS_UPDATE_RULE_H_
#define PS_UPDATE_RULE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <typeinfo>

#include "ps/base.h"

namespace ps {

/// How a server turns pushes into stored values. The framework owns the store; a rule only
/// sees one key's slot at a time: `n` values and `n * StateWidth()` values of private state
/// (for example AdaGrad's running sum of squares). Rules run on the server's receive thread,
/// one call at a time, so they need no locking. A pull of a key that was never pushed returns
/// zeros without calling the rule.
template <typename V>
class UpdateRule {
 public:
  virtual ~UpdateRule() = default;
  /// Values of private state kept per stored value.
  virtual int StateWidth() const { return 0; }
  /// Initialises a new slot before its first Apply. Default: zero value and state.
  virtual void Init(Key key, V* val, V* state, int n) const {
    std::fill(val, val + n, V(0));
    std::fill(state, state + n * StateWidth(), V(0));
  }
  /// Applies the pushed values to the slot.
  virtual void Apply(Key key, const V* pushed, V* val, V* state, int n) const = 0;
  /// True if Apply and Read treat every key's values on their own and ignore the key. The
  /// store may then call them once over the values of many consecutive keys of one width
  /// (key = the first one; n = keys x width, each key's values in turn), which is several
  /// times faster. A rule whose values go in records (pairs) still qualifies when it walks n in
  /// records of its width. Default: false, so a user rule is always called per key.
  virtual bool Elementwise() const { return false; }
  /// True if applying the sum of two pushes equals applying them one after the other, in
  /// either order (up to floating-point rounding). Then a server may add up the pushes of a
  /// short window and send its replicas the sum once (PS_REPLICATION_WINDOW_MS). Default: false.
  virtual bool Additive() const { return false; }
  /// Writes what a pull returns for the slot: ReadWidth(n) values. Default: the stored values.
  virtual void Read(Key key, const V* val, const V* state, V* out, int n) const {
    if (n > 0) std::memcpy(out, val, sizeof(V) * n);  // an empty value may come with null out
  }
  /// As Read, for a pull that a worker issued during step `step` (its Clock() count; INT64_MAX
  /// when there is none, such as a hand-off). A rule whose pushes belong to iterations can
  /// answer with the state as of the start of that step: apps/linear's DBPG rule takes the
  /// proximal step of an iteration's sums lazily and must not let a pull of step t see a step
  /// of sums that iteration t is still adding to. Default: Read.
  virtual void ReadAt(Key key, const V* val, const V* state, V* out, int n, int64_t step) const {
    Read(key, val, state, out, n);
  }
  /// Values a pull returns for a slot of n stored values. Default n. A rule may keep more per
  /// key than a pull returns (a push then carries n values and a pull gets ReadWidth(n)); the
  /// DBPG rule of apps/linear stores weight, gradient sum and curvature sum and returns the
  /// weight. Such a key cannot be pulled in value parts (one key larger than 1 MB).
  virtual int ReadWidth(int n) const { return n; }
  /// True if a slot whose values and state are all zero means the same as no slot (counts):
  /// the store may then drop such slots, so its memory follows the nonzero ones. A pull reads
  /// zeros either way; a range pull and a hand-off skip them. Default: false (a key once
  /// pushed stays, whatever its value).
  virtual bool DropsZeros() const { return false; }
  /// True if Read and ReadAt return the stored values as they are (ReadWidth(n) == n): the
  /// store then copies a range pull's values in runs instead of calling Read per key. Default:
  /// false. The library's rules say true for their own class only (typeid), so a subclass that
  /// overrides Read is never read around.
  virtual bool ReadsRaw() const { return false; }
};

/// A read-only function the servers run over the keys they store (KVWorker::Reduce): each
/// server visits the stored keys of the requested ranges that it masters, in key order, and
/// adds each key's contribution into Width() doubles; the worker receives the element-wise sum
/// of every server's doubles. So a reducer computes what adds up over keys: sums, counts,
/// squared norms, dot products of values kept in one slot, a log-likelihood. It sees a key's
/// values as a pull would read them (UpdateRule::ReadAt at the step of the request), never
/// keys that are not stored (a rule that drops zeros has no slot for them). Reducers run on
/// the server's receive thread like rules and must not change anything.
template <typename V>
class RangeReducer {
 public:
  virtual ~RangeReducer() = default;
  /// Doubles it adds into (at least 1).
  virtual int Width() const = 0;
  /// Adds the contribution of `key`, whose slot reads as vals[0, n), to acc[0, Width()).
  virtual void Add(Key key, const V* vals, int n, double* acc) const = 0;
};

/// The reducers of a table, by id (ids above 0; KVWorker::Reduce names one).
template <typename V>
using Reducers = std::map<int, std::shared_ptr<const RangeReducer<V>>>;

/// A reducer every table has (KVWorker::CountKeys): how many keys are stored. Its id is
/// reserved.
constexpr int kCountKeysReducer = 0x7fffffff;

/// val += pushed (the default: aggregation of gradients or counts).
template <typename V>
class SumRule : public UpdateRule<V> {
 public:
  bool Elementwise() const override { return true; }
  bool Additive() const override { return true; }
  void Apply(Key, const V* pushed, V* val, V*, int n) const override {
    for (int i = 0; i < n; ++i) val[i] += pushed[i];
  }
  bool ReadsRaw() const override { return typeid(*this) == typeid(SumRule<V>); }
};

/// val += pushed, for counts: a slot that returns to zero is dropped (UpdateRule::DropsZeros),
/// so a table of counts that come and go (the LDA app's word-topic counts) costs memory in
/// proportion to its nonzero counts.
template <typename V>
class CountRule : public SumRule<V> {
 public:
  bool DropsZeros() const override { return true; }
  bool ReadsRaw() const override { return typeid(*this) == typeid(CountRule<V>); }
};

/// val = pushed (last writer wins; per worker-server link the order is the push order).
template <typename V>
class AssignRule : public UpdateRule<V> {
 public:
  bool Elementwise() const override { return true; }
  void Apply(Key, const V* pushed, V* val, V*, int n) const override {
    std::memcpy(val, pushed, sizeof(V) * n);
  }
  bool ReadsRaw() const override { return typeid(*this) == typeid(AssignRule<V>); }
};

/// val -= lr * pushed: plain SGD on pushed gradients.
template <typename V>
class SgdRule : public UpdateRule<V> {
 public:
  explicit SgdRule(double lr) : lr_(lr) {}
  bool Elementwise() const override { return true; }
  bool Additive() const override { return true; }
  void Apply(Key, const V* g, V* val, V*, int n) const override {
    for (int i = 0; i < n; ++i) val[i] -= static_cast<V>(lr_ * g[i]);
  }

 private:
  double lr_;
};

/// AdaGrad: state += g^2; val -= lr * g / (sqrt(state) + eps).
template <typename V>
class AdaGradRule : public UpdateRule<V> {
 public:
  AdaGradRule(double lr, double eps = 1e-8) : lr_(lr), eps_(eps) {}
  bool Elementwise() const override { return true; }
  int StateWidth() const override { return 1; }
  void Apply(Key, const V* g, V* val, V* state, int n) const override {
    for (int i = 0; i < n; ++i) {
      double gi = static_cast<double>(g[i]);
      double s = static_cast<double>(state[i]) + gi * gi;
      state[i] = static_cast<V>(s);
      val[i] -= static_cast<V>(lr_ * gi / (std::sqrt(s) + eps_));
    }
  }

 private:
  double lr_, eps_;
};

/// val = max(val, pushed); a new key starts at its first pushed value.
template <typename V>
class MaxRule : public UpdateRule<V> {
 public:
  int StateWidth() const override { return 1; }  // 0 until the first push, then 1
  void Apply(Key, const V* p, V* val, V* seen, int n) const override {
    for (int i = 0; i < n; ++i) {
      val[i] = seen[i] ? std::max(val[i], p[i]) : p[i];
      seen[i] = V(1);
    }
  }
};

/// val = min(val, pushed); a new key starts at its first pushed value.
template <typename V>
class MinRule : public UpdateRule<V> {
 public:
  int StateWidth() const override { return 1; }
  void Apply(Key, const V* p, V* val, V* seen, int n) const override {
    for (int i = 0; i < n; ++i) {
      val[i] = seen[i] ? std::min(val[i], p[i]) : p[i];
      seen[i] = V(1);
    }
  }
};

}  // namespace ps

#endif  // PS_UPDATE_RULE_H_
