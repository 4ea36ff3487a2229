#include "control/metrics.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

namespace ps {

namespace {

std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // Integers print exactly (counters up to 2^53), others with full precision.
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.17g", v);
  }
  return buf;
}

std::string EscapeLabel(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeJson(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

bool ValidSample(const pb::Metric& m) {
  static const std::set<std::string> kTypes = {"counter", "gauge", "histogram"};
  static const std::set<std::string> kSuffixes = {"_bucket", "_sum", "_count"};
  if (!ValidMetricName(m.name(), false) || !kTypes.count(m.type())) return false;
  if (m.type() == "histogram" ? !kSuffixes.count(m.suffix()) : !m.suffix().empty()) return false;
  if (m.label_names_size() != m.label_values_size() || m.label_names_size() > 8) return false;
  for (int i = 0; i < m.label_names_size(); ++i) {
    const std::string& n = m.label_names(i);
    if (!ValidMetricName(n, true) || n == "node" || n == "role" || n == "rank" || n == "group") {
      return false;
    }
    if (m.label_values(i).size() > 256) return false;
  }
  return true;
}

}  // namespace

bool ValidMetricName(const std::string& s, bool label) {
  if (s.empty() || s.size() > 200) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool ok = alpha || (!label && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string SampleKey(const pb::Metric& m,
                      const std::vector<std::pair<std::string, std::string>>& extra) {
  std::string out = m.name() + m.suffix();
  std::vector<std::pair<std::string, std::string>> labels = extra;
  for (int i = 0; i < m.label_names_size(); ++i) {
    labels.emplace_back(m.label_names(i), m.label_values(i));
  }
  if (labels.empty()) return out;
  out += '{';
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += labels[i].first + "=\"" + EscapeLabel(labels[i].second) + "\"";
  }
  return out + '}';
}

void MetricSet::Add(const std::string& name, const char* type, const char* suffix, double value,
                    const Labels& labels) {
  pb::Metric m;
  m.set_name(name);
  m.set_type(type);
  m.set_suffix(suffix);
  for (const auto& l : labels) {
    m.add_label_names(l.first);
    m.add_label_values(l.second);
  }
  m.set_value(value);
  samples_.push_back(std::move(m));
}

void MetricSet::NameTables(const std::map<std::string, std::string>& table_of) {
  if (table_of.empty()) return;
  for (pb::Metric& m : samples_) {
    for (int i = 0; i < m.label_names_size(); ++i) {
      if (m.label_names(i) != "app") continue;
      auto it = table_of.find(m.label_values(i));
      if (it != table_of.end()) {
        m.add_label_names("table");
        m.add_label_values(it->second);
      }
      break;
    }
  }
}

void MetricSet::Counter(const std::string& name, double value, Labels labels) {
  Add(name, "counter", "", value, labels);
}

void MetricSet::Gauge(const std::string& name, double value, Labels labels) {
  Add(name, "gauge", "", value, labels);
}

void MetricSet::Histogram(const std::string& name, const std::vector<double>& bounds,
                          const std::vector<uint64_t>& counts, double sum, Labels labels) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    Labels l = labels;
    l.emplace_back("le", i < bounds.size() ? Number(bounds[i]) : "+Inf");
    Add(name, "histogram", "_bucket", static_cast<double>(cumulative), l);
  }
  Add(name, "histogram", "_sum", sum, labels);
  Add(name, "histogram", "_count", static_cast<double>(cumulative), labels);
}

void MetricSet::ToProto(google::protobuf::RepeatedPtrField<pb::Metric>* out) const {
  for (const auto& m : samples_) *out->Add() = m;
}

void PeerTraffic::Emit(MetricSet* out, const std::string& dir) const {
  for (int i = 0; i < kMaxPeers; ++i) {
    const uint64_t n = slots_[i].messages.load(std::memory_order_relaxed);
    if (n == 0) continue;
    const MetricSet::Labels l = {{"peer", i == kMaxPeers - 1 ? "other" : std::to_string(i)}};
    out->Counter("ps_peer_messages_" + dir + "_total", static_cast<double>(n), l);
    out->Counter("ps_peer_data_bytes_" + dir + "_total",
                 static_cast<double>(slots_[i].bytes.load(std::memory_order_relaxed)), l);
  }
}

LatencyHistogram::LatencyHistogram() {
  for (double b : {50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 20e-3, 50e-3, 100e-3,
                   200e-3, 500e-3, 1.0, 2.0, 5.0}) {
    bounds_.push_back(b);
  }
  counts_.assign(bounds_.size() + 1, 0);
}

void LatencyHistogram::Add(uint64_t us) {
  sum_us_ += us;
  const double s = static_cast<double>(us) * 1e-6;
  size_t i = 0;
  while (i < bounds_.size() && s > bounds_[i]) ++i;
  counts_[i]++;
}

int MetricsTable::Update(const NodeKey& key,
                         const google::protobuf::RepeatedPtrField<pb::Metric>& samples,
                         int64_t now_ms) {
  Entry& e = nodes_[key.id];
  e.key = key;
  e.at_ms = now_ms;
  e.samples.clear();
  int dropped = 0;
  for (const auto& m : samples) {
    if (static_cast<int>(e.samples.size()) >= kMaxSamples || !ValidSample(m)) {
      dropped++;
      continue;
    }
    e.samples.push_back(m);
  }
  invalid_ += dropped;
  // The histogram's _count is the number of requests finished.
  e.history.push_back(
      {now_ms, SumOf(e.samples, "ps_bytes_sent_total"), SumOf(e.samples, "ps_bytes_received_total"),
       SumOf(e.samples, "ps_server_pulls_total"), SumOf(e.samples, "ps_worker_request_seconds")});
  if (e.history.size() > kHistory) e.history.pop_front();
  return dropped;
}

double MetricsTable::SumOf(const std::vector<pb::Metric>& samples, const std::string& name) {
  double s = 0;
  for (const auto& m : samples) {
    if (m.name() == name && (m.suffix().empty() || m.suffix() == "_count")) s += m.value();
  }
  return s;
}

std::string MetricsTable::Prometheus(const MetricSet& job) const {
  // Families in first-seen order, each with its TYPE line once, then its samples from every
  // node (the format wants a family's samples together).
  std::vector<std::string> order;
  std::map<std::string, std::string> type;
  std::map<std::string, std::string> body;
  auto add = [&](const pb::Metric& m, const std::vector<std::pair<std::string, std::string>>& l) {
    auto t = type.find(m.name());
    if (t == type.end()) {
      type[m.name()] = m.type();
      order.push_back(m.name());
    } else if (t->second != m.type()) {
      return;  // two nodes disagree on a family's type: keep the first
    }
    body[m.name()] += SampleKey(m, l) + " " + Number(m.value()) + "\n";
  };
  for (const auto& m : job.samples()) add(m, {});
  for (const auto& n : nodes_) {
    std::vector<std::pair<std::string, std::string>> l = {
        {"node", std::to_string(n.first)},
        {"role", n.second.key.role},
        {"rank", std::to_string(n.second.key.rank)}};
    if (!n.second.key.group.empty()) l.emplace_back("group", n.second.key.group);
    for (const auto& m : n.second.samples) add(m, l);
  }
  std::ostringstream os;
  for (const auto& name : order) {
    os << "# TYPE " << name << " " << type[name] << "\n" << body[name];
  }
  return os.str();
}

std::string MetricsTable::Json(const MetricSet& job, int64_t now_ms, const std::set<int>& dead,
                               const std::deque<std::pair<int64_t, std::string>>& events) const {
  auto object = [](const std::vector<pb::Metric>& samples) {
    std::string s = "{";
    for (size_t i = 0; i < samples.size(); ++i) {
      if (i) s += ",";
      s += "\"" + EscapeJson(SampleKey(samples[i], {})) + "\":" + Number(samples[i].value());
    }
    return s + "}";
  };
  std::string out = "{\"job\":" + object(job.samples()) + ",\"nodes\":[";
  bool first = true;
  for (const auto& n : nodes_) {
    if (!first) out += ",";
    first = false;
    out += "{\"id\":" + std::to_string(n.first) + ",\"role\":\"" + EscapeJson(n.second.key.role) +
           "\",\"rank\":" + std::to_string(n.second.key.rank) +
           (n.second.key.group.empty() ? ""
                                       : ",\"group\":\"" + EscapeJson(n.second.key.group) + "\"") +
           ",\"age_ms\":" + std::to_string(now_ms - n.second.at_ms) +
           ",\"dead\":" + (dead.count(n.first) ? "true" : "false") +
           ",\"metrics\":" + object(n.second.samples) + ",\"history\":[";
    for (size_t i = 0; i < n.second.history.size(); ++i) {
      const Point& p = n.second.history[i];
      out += std::string(i ? "," : "") + "[" + std::to_string(now_ms - p.at_ms) + "," +
             Number(p.sent) + "," + Number(p.received) + "," + Number(p.pulls) + "," +
             Number(p.requests) + "]";
    }
    out += "]}";
  }
  out += "],\"events\":[";
  for (size_t i = 0; i < events.size(); ++i) {
    if (i) out += ",";
    out += "{\"ms\":" + std::to_string(events[i].first) + ",\"what\":\"" +
           EscapeJson(events[i].second) + "\"}";
  }
  return out + "]}";
}

}  // namespace ps
