#include "control/metrics.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

google::protobuf::RepeatedPtrField<pb::Metric> Samples(const MetricSet& s) {
  google::protobuf::RepeatedPtrField<pb::Metric> out;
  s.ToProto(&out);
  return out;
}

TEST(MetricsTest, PrometheusTextGroupsEachFamilyAndLabelsEveryNode) {
  MetricSet a, b, job;
  a.Counter("ps_bytes_sent_total", 10);
  a.Gauge("ps_server_keys", 5, {{"app", "0"}});
  b.Counter("ps_bytes_sent_total", 7);
  job.Gauge("ps_job_dead_nodes", 1);
  MetricsTable t;
  EXPECT_EQ(t.Update({1, "server", 0}, Samples(a), 100), 0);
  EXPECT_EQ(t.Update({2, "worker", 0}, Samples(b), 100), 0);
  EXPECT_EQ(t.Prometheus(job),
            "# TYPE ps_job_dead_nodes gauge\n"
            "ps_job_dead_nodes 1\n"
            "# TYPE ps_bytes_sent_total counter\n"
            "ps_bytes_sent_total{node=\"1\",role=\"server\",rank=\"0\"} 10\n"
            "ps_bytes_sent_total{node=\"2\",role=\"worker\",rank=\"0\"} 7\n"
            "# TYPE ps_server_keys gauge\n"
            "ps_server_keys{node=\"1\",role=\"server\",rank=\"0\",app=\"0\"} 5\n");
  // A node's new set replaces its old one (the JSON below holds 12, and both in its history).
  MetricSet a2;
  a2.Counter("ps_bytes_sent_total", 12);
  t.Update({1, "server", 0}, Samples(a2), 200);
  EXPECT_EQ(
      t.Json(MetricSet(), 250, {2}, {{40, "node 2 declared dead: \"x\""}}),
      "{\"job\":{},\"nodes\":[{\"id\":1,\"role\":\"server\",\"rank\":0,\"age_ms\":50,"
      "\"dead\":false,\"metrics\":{\"ps_bytes_sent_total\":12},\"history\":[[150,10,0,0,0],[50,12,"
      "0,0,0]]},{\"id\":2,\"role\":"
      "\"worker\",\"rank\":0,\"age_ms\":150,\"dead\":true,\"metrics\":{\"ps_bytes_sent_total\":"
      "7},\"history\":[[150,7,0,0,0]]}],\"events\":[{\"ms\":40,\"what\":\"node 2 declared dead: "
      "\\\"x\\\"\"}]}");
}

TEST(MetricsTest, AWorkersGroupLabelsItsSamples) {
  MetricSet w;
  w.Gauge("ps_worker_step", 4, {{"app", "0"}});
  MetricsTable t;
  EXPECT_EQ(t.Update({3, "worker", 1, "eval"}, Samples(w), 100), 0);
  EXPECT_EQ(t.Prometheus(MetricSet()),
            "# TYPE ps_worker_step gauge\n"
            "ps_worker_step{node=\"3\",role=\"worker\",rank=\"1\",group=\"eval\",app=\"0\"} 4\n");
  EXPECT_NE(t.Json(MetricSet(), 100, {}, {}).find("\"rank\":1,\"group\":\"eval\""),
            std::string::npos);
  // A node's own sample may not claim the label.
  MetricSet bad;
  bad.Gauge("ps_x", 1, {{"group", "train"}});
  EXPECT_EQ(t.Update({3, "worker", 1, "eval"}, Samples(bad), 200), 1);
}

TEST(MetricsTest, ANamedTablesSamplesCarryItsName) {
  MetricSet s;
  s.Gauge("ps_server_keys", 7, {{"app", "1048576"}});
  s.Gauge("ps_server_keys", 3, {{"app", "0"}});  // an application id without a name
  s.Counter("ps_x_total", 1);
  s.NameTables({{"1048576", "lda.dense"}});
  MetricsTable t;
  EXPECT_EQ(t.Update({1, "server", 0, ""}, Samples(s), 100), 0);
  EXPECT_EQ(t.Prometheus(MetricSet()),
            "# TYPE ps_server_keys gauge\n"
            "ps_server_keys{node=\"1\",role=\"server\",rank=\"0\",app=\"1048576\","
            "table=\"lda.dense\"} 7\n"
            "ps_server_keys{node=\"1\",role=\"server\",rank=\"0\",app=\"0\"} 3\n"
            "# TYPE ps_x_total counter\n"
            "ps_x_total{node=\"1\",role=\"server\",rank=\"0\"} 1\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithInfEqualToTheCount) {
  LatencyHistogram h;
  h.Add(30);       // <= 50 us
  h.Add(150);      // <= 200 us
  h.Add(9000000);  // past 5 s
  MetricSet s;
  s.Histogram("ps_worker_request_seconds", h.bounds(), h.counts(), h.sum_seconds());
  const auto& v = s.samples();
  ASSERT_EQ(v.size(), h.bounds().size() + 3);
  EXPECT_EQ(v[0].value(), 1);                      // le=5e-05
  EXPECT_EQ(v[2].value(), 2);                      // le=0.0002
  EXPECT_EQ(v[h.bounds().size() - 1].value(), 2);  // le=5
  EXPECT_EQ(SampleKey(v[h.bounds().size()], {}), "ps_worker_request_seconds_bucket{le=\"+Inf\"}");
  EXPECT_EQ(v[h.bounds().size()].value(), 3);
  EXPECT_EQ(SampleKey(v.back(), {}), "ps_worker_request_seconds_count");
  EXPECT_EQ(v.back().value(), 3);
  EXPECT_NEAR(v[v.size() - 2].value(), 9.00018, 1e-9);  // _sum in seconds
}

TEST(MetricsTest, InvalidSamplesFromANodeAreDroppedAndCounted) {
  google::protobuf::RepeatedPtrField<pb::Metric> in;
  auto add = [&](const std::string& name, const std::string& type, const std::string& label) {
    pb::Metric* m = in.Add();
    m->set_name(name);
    m->set_type(type);
    if (!label.empty()) {
      m->add_label_names(label);
      m->add_label_values("v\"al\nue");
    }
    m->set_value(1);
  };
  add("ok_total", "counter", "app");
  add("bad name", "counter", "");
  add("x", "summary", "");      // a type ps never sends
  add("y", "gauge", "node");    // would clash with the label the scheduler adds
  add("z", "gauge", "le:gal");  // ':' is not allowed in label names
  add("9lives", "gauge", "");   // a name may not start with a digit
  MetricsTable t;
  EXPECT_EQ(t.Update({3, "worker", 1}, in, 0), 5);
  EXPECT_EQ(t.invalid(), 5u);
  // The label value is escaped as the text format wants.
  EXPECT_EQ(t.Prometheus(MetricSet()),
            "# TYPE ok_total counter\n"
            "ok_total{node=\"3\",role=\"worker\",rank=\"1\",app=\"v\\\"al\\nue\"} 1\n");
  // Bounded: a node cannot make the scheduler keep more than kMaxSamples of its samples.
  google::protobuf::RepeatedPtrField<pb::Metric> many;
  for (int i = 0; i < MetricsTable::kMaxSamples + 10; ++i) {
    pb::Metric* m = many.Add();
    m->set_name("g");
    m->set_type("gauge");
  }
  EXPECT_EQ(t.Update({3, "worker", 1}, many, 0), 10);
}

}  // namespace
}  // namespace ps
