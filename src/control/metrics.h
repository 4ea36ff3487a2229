// Job-wide metrics (issue 19): each node collects its counters into a MetricSet and sends them
// with a heartbeat; the scheduler keeps the last set of every node in a MetricsTable and
// renders the table as Prometheus text (/metrics) and JSON (/stats). Pure: no sockets, no
// clocks of its own.
#ifndef PS_CONTROL_METRICS_H_
#define PS_CONTROL_METRICS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "meta.pb.h"

namespace ps {

/// The samples of one node, in the order they were added.
class MetricSet {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  void Counter(const std::string& name, double value, Labels labels = {});
  void Gauge(const std::string& name, double value, Labels labels = {});
  /// A histogram from cumulative-free bucket counts: bounds[i] is bucket i's upper bound
  /// (counts has one more entry, for +Inf).
  void Histogram(const std::string& name, const std::vector<double>& bounds,
                 const std::vector<uint64_t>& counts, double sum, Labels labels = {});

  /// Adds every sample of `other`.
  void Append(const MetricSet& other) {
    samples_.insert(samples_.end(), other.samples_.begin(), other.samples_.end());
  }
  /// Adds the label table=NAME to every sample labelled app=ID when table_of maps ID (the
  /// application id, as a string) to NAME: a named table's metrics carry its name.
  void NameTables(const std::map<std::string, std::string>& table_of);
  const std::vector<pb::Metric>& samples() const { return samples_; }
  void ToProto(google::protobuf::RepeatedPtrField<pb::Metric>* out) const;

 private:
  void Add(const std::string& name, const char* type, const char* suffix, double value,
           const Labels& labels);
  std::vector<pb::Metric> samples_;
};

/// Messages and data bytes per peer id, counted without a lock on every send and receive (ids
/// past kMaxPeers - 2 share one slot, reported as peer "other").
class PeerTraffic {
 public:
  static constexpr int kMaxPeers = 4096;
  PeerTraffic() : slots_(new Slot[kMaxPeers]) {}
  void Add(int peer, uint64_t bytes) {
    Slot& s = slots_[peer < 0 || peer >= kMaxPeers - 1 ? kMaxPeers - 1 : peer];
    s.messages.fetch_add(1, std::memory_order_relaxed);
    s.bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  /// ps_peer_messages_<dir>_total and ps_peer_data_bytes_<dir>_total for every peer seen.
  void Emit(MetricSet* out, const std::string& dir) const;

 private:
  struct Slot {
    std::atomic<uint64_t> messages{0}, bytes{0};
  };
  std::unique_ptr<Slot[]> slots_;
};

/// Latency histogram with fixed bounds from 50 us to 5 s (a request's round trip).
class LatencyHistogram {
 public:
  LatencyHistogram();
  void Add(uint64_t us);
  const std::vector<double>& bounds() const { return bounds_; }  // seconds
  const std::vector<uint64_t>& counts() const { return counts_; }
  double sum_seconds() const { return static_cast<double>(sum_us_) * 1e-6; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  uint64_t sum_us_ = 0;
};

/// The scheduler's view: the last sample set of every node, plus job-wide gauges it adds
/// itself. Bounded: one set per node, at most kMaxSamples samples in a set; samples with a
/// name or label that is not valid Prometheus are dropped and counted.
class MetricsTable {
 public:
  static constexpr int kMaxSamples = 4096;
  struct NodeKey {
    int id;
    std::string role;
    int rank;
    std::string group = "";  // a worker's group (worker groups); "" without
  };
  /// Replaces node `key.id`'s samples. Returns how many were dropped as invalid.
  int Update(const NodeKey& key, const google::protobuf::RepeatedPtrField<pb::Metric>& samples,
             int64_t now_ms);
  /// Forgets nothing when a node dies: its last counters stay, marked by the job gauges.
  /// Prometheus text format 0.0.4, every sample labelled with node, role and rank; `job` is
  /// the scheduler's own set (no node labels).
  std::string Prometheus(const MetricSet& job) const;
  /// {"job": {...}, "nodes": [{"id":..,"role":..,"rank":..,"age_ms":..,"dead":..,
  /// "metrics":{..},"history":[[ms ago, sent, received, pulls, requests], ...]}],
  /// "events": [{"ms":..,"what":..}]}: a sample's key is its name with its labels, as in
  /// Prometheus text; history holds the node's last sets, oldest first; events are (ms since
  /// the job began, text).
  std::string Json(const MetricSet& job, int64_t now_ms, const std::set<int>& dead = {},
                   const std::deque<std::pair<int64_t, std::string>>& events = {}) const;
  uint64_t invalid() const { return invalid_; }

 private:
  // A node's traffic over its last kHistory sets, for the live page's chart: when the set
  // came, and its bytes sent and received, server pulls and worker requests finished.
  static constexpr size_t kHistory = 120;
  struct Point {
    int64_t at_ms;
    double sent, received, pulls, requests;
  };
  struct Entry {
    NodeKey key;
    int64_t at_ms = 0;
    std::vector<pb::Metric> samples;
    std::deque<Point> history;
  };
  static double SumOf(const std::vector<pb::Metric>& samples, const std::string& name);
  std::map<int, Entry> nodes_;
  uint64_t invalid_ = 0;
};

/// Valid Prometheus metric and label names ([a-zA-Z_:][a-zA-Z0-9_:]*, no ':' in labels).
bool ValidMetricName(const std::string& s, bool label);
/// One sample line's name and labels: name{a="x",b="y"} with values escaped.
std::string SampleKey(const pb::Metric& m,
                      const std::vector<std::pair<std::string, std::string>>& extra);

}  // namespace ps

#endif  // PS_CONTROL_METRICS_H_
