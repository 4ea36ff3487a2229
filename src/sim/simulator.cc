#include "sim/simulator.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "consistency/barrier_policy.h"
#include "consistency/pull_gate.h"
#include "kv/server_core.h"
#include "ps/update_rule.h"
#include "ring/ring.h"
#include "sim/step_time.h"
#include "store/store.h"

namespace ps {
namespace {

double Gaussian(Rng* rng) {
  // Box-Muller; one value per call keeps the stream simple to reproduce.
  return std::sqrt(-2.0 * std::log(rng->UniformOpen())) *
         std::cos(6.283185307179586 * rng->Uniform());
}

std::string Fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

std::string HistJson(const std::map<int64_t, uint64_t>& h) {
  std::string out = "{";
  for (const auto& e : h) {
    if (out.size() > 1) out += ",";
    out += "\"" + std::to_string(e.first) + "\":" + std::to_string(e.second);
  }
  return out + "}";
}

}  // namespace

struct Simulator::State {
  enum Kind { kDeliver, kComputeDone, kSnapshot, kLoss };
  struct Event {
    double t;
    uint64_t seq;
    Kind kind;
    int target;
    Message msg;
  };
  struct Worker {
    int64_t step = 0;
    int64_t read_clock = -1;
    BoundedDelay delay;
    int64_t next_ts = 0;
    std::map<int64_t, int> parts_left;  // ts -> replies still expected
    int64_t pull_ts = -1;
    int64_t pull_min_clock = INT64_MAX;
    uint64_t pull_max_held = 0;
    bool waiting_delay = false;
    bool done = false;
    double finished_at = 0;
    double blocked = 0;
    std::vector<float> w;  // the model as last pulled
    Rng rng{0};
  };

  SimOptions o;
  StepTime dist;
  std::unique_ptr<Ring> ring;
  std::vector<int> server_ids;
  std::vector<std::vector<size_t>> server_keys;  // per server index: indices into keys
  std::vector<Key> keys;
  std::vector<std::shared_ptr<StoreBase>> stores;
  std::vector<std::unique_ptr<ServerCore>> cores;
  std::vector<Worker> workers;
  // Features, row-major (dim per row): per worker shard, and the test set.
  std::vector<std::vector<double>> wx, wy;
  std::vector<double> tx, ty;
  std::vector<Event> heap;
  uint64_t seq = 0;
  double now = 0;
  bool first_read_passed = false;
  int64_t psp_beta = -1, psp_s = 0;  // parsed from a psp policy
  int64_t first_read_ts = -1;
  int first_read_worker = -1;
  SimResult res;
  std::ostream* out = nullptr;

  explicit State(const SimOptions& opt) : o(opt), dist(opt.step_time) {}

  int WorkerId(int w) const { return o.servers + 1 + w; }
  int WorkerIndex(int id) const { return id - o.servers - 1; }

  static bool Later(const Event& a, const Event& b) {
    return a.t != b.t ? a.t > b.t : a.seq > b.seq;
  }
  void Schedule(double t, Kind kind, int target, Message msg = {}) {
    heap.push_back(Event{t, seq++, kind, target, std::move(msg)});
    std::push_heap(heap.begin(), heap.end(), Later);
  }

  void Setup();
  void Send(Message& m) {  // from anyone, arrives after the latency
    const int to = m.meta.receiver();
    Schedule(now + o.latency, kDeliver, to, std::move(m));
  }
  Message Request(int w, int server_index, int64_t ts, bool push, bool pull) {
    Message m;
    m.meta.set_sender(WorkerId(w));
    m.meta.set_receiver(server_ids[server_index]);
    m.meta.set_request(true);
    m.meta.set_push(push);
    m.meta.set_pull(pull);
    m.meta.set_dtype(static_cast<int>(DataType::kFloat));
    m.meta.set_width(1);
    m.meta.set_timestamp(ts);
    m.meta.set_step(workers[w].step);
    // Low-water mark: the oldest request still open (servers forget what is below it).
    const auto& open = workers[w].parts_left;
    m.meta.set_lwm(open.empty() ? ts : std::min(ts, open.begin()->first));
    return m;
  }
  void StartStep(int w);
  void OnReply(int w, const Message& m);
  void ComputeDone(int w);
  double Loss();
  void Deliver(Event& e);
  SArray<char> KeyFrame(int server_index) const {
    SArray<Key> k(server_keys[server_index].size());
    for (size_t i = 0; i < k.size(); ++i) k[i] = keys[server_keys[server_index][i]];
    return SArray<char>(k);
  }
};

void Simulator::State::Setup() {
  for (int s = 0; s < o.servers; ++s) server_ids.push_back(s + 1);
  ring = std::make_unique<Ring>(server_ids, o.vnodes, 0, 1);
  // Model keys spread evenly over the key space, so every server holds some.
  const Key gap = kMaxKey / static_cast<Key>(o.dim + 1);
  for (int i = 0; i < o.dim; ++i) keys.push_back(gap * (i + 1));
  server_keys.assign(o.servers, {});
  for (size_t i = 0; i < keys.size(); ++i) {
    int owner = ring->Owner(keys[i]);
    server_keys[owner - 1].push_back(i);
  }
  std::vector<int> worker_ids;
  for (int w = 0; w < o.workers; ++w) worker_ids.push_back(WorkerId(w));
  auto policy = std::shared_ptr<const BarrierPolicy>(ParsePolicy(o.policy, "--policy"));
  const std::string spec = policy->Spec();
  if (spec.rfind("psp:", 0) == 0) {
    psp_beta = std::stoll(spec.substr(4));
    psp_s = std::stoll(spec.substr(spec.rfind(':') + 1));
  }
  for (int s = 0; s < o.servers; ++s) {
    stores.push_back(std::make_shared<Store<float>>(std::make_shared<SumRule<float>>()));
    cores.push_back(std::make_unique<ServerCore>(
        0, DataType::kFloat, stores.back(), policy, o.seed * 1000003 + s, worker_ids,
        [this, s](Message& m) {
          m.meta.set_sender(server_ids[s]);
          if (s == 0 && m.meta.pull() && m.meta.receiver() == first_read_worker &&
              m.meta.timestamp() == first_read_ts) {
            first_read_passed = true;
          }
          Send(m);
        },
        [this] { return static_cast<int64_t>(std::llround(now * 1e6)); }));
  }
  // Data: y = x . w* + noise, one shard per worker and a common test set.
  Rng data(o.seed * 7 + 3);
  std::vector<double> wstar(o.dim);
  for (auto& v : wstar) v = Gaussian(&data);
  auto row = [&](double* x, double* y) {
    double dot = 0;
    for (int j = 0; j < o.dim; ++j) dot += (x[j] = Gaussian(&data)) * wstar[j];
    *y = dot + o.noise * Gaussian(&data);
  };
  workers.resize(o.workers);
  wx.resize(o.workers);
  wy.resize(o.workers);
  for (int w = 0; w < o.workers; ++w) {
    workers[w].rng = Rng(o.seed * 0x9E3779B97F4A7C15ull + w);
    workers[w].w.assign(o.dim, 0.f);
    wx[w].resize(static_cast<size_t>(o.samples) * o.dim);
    wy[w].resize(o.samples);
    for (int i = 0; i < o.samples; ++i) row(&wx[w][static_cast<size_t>(i) * o.dim], &wy[w][i]);
  }
  ty.resize(1000);
  tx.resize(ty.size() * o.dim);
  for (size_t i = 0; i < ty.size(); ++i) row(&tx[i * o.dim], &ty[i]);
}

void Simulator::State::StartStep(int w) {
  Worker& k = workers[w];
  if (k.done) return;
  if (!k.delay.MayStart(k.step, o.max_delay)) {
    k.waiting_delay = true;
    return;
  }
  k.waiting_delay = false;
  const int64_t ts = k.next_ts++;
  k.pull_ts = ts;
  k.pull_min_clock = INT64_MAX;
  k.pull_max_held = 0;
  int parts = 0;
  for (int s = 0; s < o.servers; ++s) {
    if (server_keys[s].empty()) continue;
    Message m = Request(w, s, ts, false, true);
    m.data.push_back(KeyFrame(s));
    parts++;
    Send(m);
  }
  k.parts_left[ts] = parts;
  k.delay.Issued(ts, k.step);
}

void Simulator::State::OnReply(int w, const Message& m) {
  Worker& k = workers[w];
  const int64_t ts = m.meta.timestamp();
  auto it = k.parts_left.find(ts);
  if (it == k.parts_left.end()) return;
  if (m.meta.pull() && ts == k.pull_ts && m.data.size() == 1) {
    const int s = m.meta.sender() - 1;
    const float* v = reinterpret_cast<const float*>(m.data[0].data());
    for (size_t i = 0; i < server_keys[s].size(); ++i) k.w[server_keys[s][i]] = v[i];
    k.pull_min_clock = std::min<int64_t>(k.pull_min_clock, m.meta.server_clock());
    k.pull_max_held = std::max<uint64_t>(k.pull_max_held, m.meta.held_us());
  }
  if (--it->second > 0) return;
  k.parts_left.erase(it);
  k.delay.Completed(ts);
  if (ts == k.pull_ts) {
    k.read_clock = k.pull_min_clock;
    k.blocked += k.pull_max_held * 1e-6;
    Schedule(now + dist.Draw(w, &k.rng), kComputeDone, w);
  }
  if (k.waiting_delay) StartStep(w);
}

void Simulator::State::ComputeDone(int w) {
  Worker& k = workers[w];
  // Minibatch gradient of 1/2 (x.w - y)^2 at the pulled model; push -lr/P times it.
  std::vector<double> g(o.dim, 0.0);
  for (int b = 0; b < o.batch; ++b) {
    const size_t i = k.rng.Below(o.samples);
    const double* x = &wx[w][i * o.dim];
    double err = -wy[w][i];
    for (int j = 0; j < o.dim; ++j) err += x[j] * k.w[j];
    for (int j = 0; j < o.dim; ++j) g[j] += err * x[j];
  }
  const double scale = -o.lr / o.workers / o.batch;
  const int64_t push_ts = k.next_ts++;
  int parts = 0;
  for (int s = 0; s < o.servers; ++s) {
    if (server_keys[s].empty()) continue;
    Message m = Request(w, s, push_ts, true, false);
    if (k.read_clock >= 0) m.meta.set_read_clock(k.read_clock);
    SArray<float> vals(server_keys[s].size());
    for (size_t i = 0; i < vals.size(); ++i)
      vals[i] = static_cast<float>(scale * g[server_keys[s][i]]);
    m.data.push_back(KeyFrame(s));
    m.data.push_back(SArray<char>(vals));
    parts++;
    Send(m);
  }
  k.parts_left[push_ts] = parts;
  k.delay.Issued(push_ts, k.step);
  // Clock(): every server learns this worker completed step + 1 steps.
  const int64_t clock_ts = k.next_ts++;
  for (int s = 0; s < o.servers; ++s) {
    Message m = Request(w, s, clock_ts, false, false);
    m.meta.set_op(pb::Meta::CLOCK);
    m.meta.set_step(k.step + 1);
    Send(m);
  }
  k.parts_left[clock_ts] = o.servers;
  k.delay.Issued(clock_ts, k.step);
  k.step++;
  if (o.trace) {
    *out << "{\"type\":\"step\",\"t\":" << Fmt("%.9g", now) << ",\"w\":" << w
         << ",\"step\":" << k.step << "}\n";
  }
  if (o.until <= 0 && k.step >= o.steps) {
    k.done = true;
    k.finished_at = now;
    return;
  }
  StartStep(w);
}

double Simulator::State::Loss() {
  std::vector<double> w(o.dim, 0.0);
  for (int s = 0; s < o.servers; ++s) {
    if (server_keys[s].empty()) continue;
    SArray<Key> k(KeyFrame(s));
    SArray<char> vals;
    SArray<int> lens;
    stores[s]->Pull(k.data(), k.size(), 1, &vals, &lens);
    const float* v = reinterpret_cast<const float*>(vals.data());
    for (size_t i = 0; i < k.size(); ++i) w[server_keys[s][i]] = v[i];
  }
  double sum = 0;
  for (size_t i = 0; i < ty.size(); ++i) {
    double err = -ty[i];
    for (int j = 0; j < o.dim; ++j) err += tx[i * o.dim + j] * w[j];
    sum += 0.5 * err * err;
  }
  return sum / ty.size();
}

void Simulator::State::Deliver(Event& e) {
  if (e.target <= o.servers) {
    const int s = e.target - 1;
    Message& m = e.msg;
    const bool watch = s == 0 && m.meta.pull();
    if (watch) {
      // The lag of every other live worker behind the reader, as the check sees it.
      const StepTable& t = cores[0]->table();
      const int64_t step = m.meta.step();
      int64_t ok = 0, peers = 0;
      for (size_t i = 0; i < t.size(); ++i) {
        if (t.workers()[i] != m.meta.sender()) {
          res.peer_lag[std::max<int64_t>(0, step - t.steps()[i])]++;
          peers++;
          ok += t.steps()[i] >= step - psp_s;
        }
      }
      if (psp_beta >= 0 && peers > 0) {
        // P(all of k draws without replacement from `peers` fall among `ok`).
        const int64_t k = std::min<int64_t>(psp_beta, peers);
        double p = 1;
        for (int64_t j = 0; j < k; ++j) p *= std::max<double>(0, ok - j) / (peers - j);
        res.expected_first_pass += p;
        res.f_beta_sum += std::pow(static_cast<double>(ok) / peers, static_cast<double>(k));
      }
      first_read_passed = false;
      first_read_ts = m.meta.timestamp();
      first_read_worker = m.meta.sender();
    }
    cores[s]->Process(m);
    if (watch) {
      res.checks++;
      res.first_pass += first_read_passed;
      first_read_ts = first_read_worker = -1;
    }
    return;
  }
  OnReply(WorkerIndex(e.target), e.msg);
}

Simulator::Simulator(const SimOptions& options) : s_(new State(options)) {
  const SimOptions& o = s_->o;
  if (o.workers < 1) throw Error("--workers must be at least 1");
  if (o.servers < 1) throw Error("--servers must be at least 1");
  if (o.dim < 1 || o.samples < 1 || o.batch < 1) throw Error("--dim, --samples, --batch >= 1");
  if (o.latency < 0) throw Error("--latency must be >= 0");
  if (o.max_delay < -1) throw Error("--max-delay must be -1 or >= 0");
  if (o.until <= 0 && o.steps < 1) throw Error("--steps must be >= 1 (or give --until)");
  ParsePolicy(o.policy, "--policy");
}

Simulator::~Simulator() = default;

SimResult Simulator::Run(std::ostream& out) {
  State& s = *s_;
  s.out = &out;
  s.Setup();
  for (size_t i = 0; i < s.o.snapshots.size(); ++i) {
    s.Schedule(s.o.snapshots[i], State::kSnapshot, static_cast<int>(i));
  }
  if (s.o.loss_every > 0) s.Schedule(0, State::kLoss, 0);
  for (int w = 0; w < s.o.workers; ++w) s.StartStep(w);
  auto all_done = [&] {
    for (const auto& k : s.workers) {
      if (!k.done) return false;
    }
    return true;
  };
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), State::Later);
    State::Event e = std::move(s.heap.back());
    s.heap.pop_back();
    if (s.o.until > 0 && e.t > s.o.until) break;
    s.now = e.t;
    s.res.events++;
    switch (e.kind) {
      case State::kDeliver:
        s.Deliver(e);
        break;
      case State::kComputeDone:
        s.ComputeDone(e.target);
        break;
      case State::kSnapshot: {
        out << "{\"type\":\"steps\",\"t\":" << Fmt("%.9g", s.now) << ",\"policy\":\"" << s.o.policy
            << "\",\"steps\":[";
        for (int w = 0; w < s.o.workers; ++w) out << (w ? "," : "") << s.workers[w].step;
        out << "]}\n";
        break;
      }
      case State::kLoss:
        out << "{\"type\":\"loss\",\"t\":" << Fmt("%.9g", s.now)
            << ",\"loss\":" << Fmt("%.9g", s.Loss()) << "}\n";
        if (s.o.until > 0 || !all_done()) s.Schedule(s.now + s.o.loss_every, State::kLoss, 0);
        break;
    }
  }
  SimResult& r = s.res;
  r.end_time = s.o.until > 0 ? s.o.until : 0;
  for (const auto& k : s.workers) {
    r.steps.push_back(k.step);
    r.blocked.push_back(k.blocked);
    if (s.o.until <= 0) r.end_time = std::max(r.end_time, k.finished_at);
  }
  for (const auto& c : s.cores) {
    auto b = c->Stats();
    for (const auto& e : b.staleness) r.staleness[e.first] += e.second;
    for (const auto& e : b.read_lag) r.read_lag[e.first] += e.second;
  }
  r.final_loss = s.Loss();
  r.gate_checks = s.cores[0]->Stats().checks;
  for (int w = 0; w < s.o.workers; ++w) {
    out << "{\"type\":\"worker\",\"w\":" << w << ",\"steps\":" << r.steps[w]
        << ",\"blocked\":" << Fmt("%.9g", r.blocked[w])
        << ",\"blocked_frac\":" << Fmt("%.6f", r.end_time > 0 ? r.blocked[w] / r.end_time : 0)
        << "}\n";
  }
  int64_t total = 0;
  for (int64_t st : r.steps) total += st;
  out << "{\"type\":\"summary\",\"policy\":\"" << s.o.policy << "\",\"workers\":" << s.o.workers
      << ",\"servers\":" << s.o.servers << ",\"step_time\":\"" << s.o.step_time
      << "\",\"max_delay\":" << s.o.max_delay << ",\"latency\":" << Fmt("%.9g", s.o.latency)
      << ",\"seed\":" << s.o.seed << ",\"end_time\":" << Fmt("%.9g", r.end_time)
      << ",\"steps_total\":" << total << ",\"steps_per_time\":"
      << Fmt("%.9g", r.end_time > 0 ? total / (r.end_time * s.o.workers) : 0)
      << ",\"final_loss\":" << Fmt("%.9g", r.final_loss) << ",\"events\":" << r.events
      << ",\"checks\":" << r.checks << ",\"first_pass\":" << r.first_pass
      << ",\"expected_first_pass\":" << Fmt("%.9g", r.expected_first_pass)
      << ",\"f_beta_sum\":" << Fmt("%.9g", r.f_beta_sum) << ",\"gate_checks\":" << r.gate_checks
      << ",\"staleness\":" << HistJson(r.staleness) << ",\"read_lag\":" << HistJson(r.read_lag)
      << ",\"peer_lag\":" << HistJson(r.peer_lag) << "}\n";
  return r;
}

}  // namespace ps
