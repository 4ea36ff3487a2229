// The server's side of a sparse push and pull, in one process: what a ServerCore spends on a
// 1M-key request (float values, sorted hash keys, 1 MB parts like a worker sends), with no
// network. Prints one JSON line per measurement:
//   build/bench/server_bench [--keys N] [--churn_keys N] [--reps R]
// Lines: "push"/"pull" through ServerCore::Process (validation, exactly-once log, store,
// reply), and "store_push"/"store_pull" through the Store alone, in ns per key. "store_churn":
// int32 counts under the CountRule (zeros dropped) pushed as scattered subsets that create
// cells and return others to zero, as the LDA app's word-topic counts do (seeded; the store
// is checked against a local copy at the end).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "consistency/barrier_policy.h"
#include "kv/server_core.h"
#include "store/store.h"
#include "util/retain_memory.h"
#include "util/rng.h"
#include "util/sorted_keys.h"

namespace {

using ps_bench::Clock;

constexpr int kServer = 8, kWorker = 9;
constexpr size_t kPartKeys = (1 << 20) / sizeof(float);  // a worker's 1 MB value parts

struct Bench {
  std::shared_ptr<ps::Store<float>> store =
      std::make_shared<ps::Store<float>>(std::make_shared<ps::SumRule<float>>());
  size_t replies = 0;
  std::string last_error;
  ps::ServerCore core{0,
                      ps::DataType::kFloat,
                      store,
                      ps::ParsePolicy("asp"),
                      1,
                      {kWorker},
                      [this](ps::Message& m) {
                        replies++;
                        if (!m.meta.error().empty()) last_error = m.meta.error();
                      },
                      [] { return int64_t{0}; },
                      kServer};
  int64_t ts = 0;

  // One request of the whole key list, cut in parts like a worker cuts it.
  void Request(const ps::SArray<ps::Key>& keys, const ps::SArray<float>& vals, bool push) {
    const int64_t t = ts++;
    int part = 0;
    for (size_t b = 0; b < keys.size(); b += kPartKeys, ++part) {
      const size_t e = std::min(keys.size(), b + kPartKeys);
      ps::Message m;
      m.meta.set_sender(kWorker);
      m.meta.set_receiver(kServer);
      m.meta.set_request(true);
      m.meta.set_dtype(static_cast<int>(ps::DataType::kFloat));
      m.meta.set_width(1);
      m.meta.set_timestamp(t);
      m.meta.set_lwm(t);
      m.meta.set_part(part);
      m.data.push_back(ps::SArray<char>(keys.Segment(b, e)));
      if (push) {
        m.meta.set_push(true);
        m.data.push_back(ps::SArray<char>(vals.Segment(b, e)));
      } else {
        m.meta.set_pull(true);
      }
      core.Process(m);
    }
  }
};

void Emit(const char* op, size_t n, int reps, double sec) {
  printf(
      "{\"bench\":\"server\",\"op\":\"%s\",\"keys\":%zu,\"reps\":%d,\"ns_per_key\":%.3f,"
      "\"MBps_of_values\":%.1f}\n",
      op, n, reps, sec * 1e9 / (static_cast<double>(n) * reps),
      static_cast<double>(n) * sizeof(float) * reps / sec / 1e6);
  fflush(stdout);
}

// Pushes of `batch` keys (a third of the universe) drawn from a universe of n: a cell at zero goes
// up, others up or down at random, so cells are dropped and come back. Returns false on a wrong
// count.
bool Churn(size_t n, size_t batch, int reps, uint64_t seed) {
  ps::Store<int32_t> store(std::make_shared<ps::CountRule<int32_t>>());
  std::vector<int32_t> want(n, 0);
  std::vector<ps::Key> universe(n);
  for (size_t i = 0; i < n; ++i) universe[i] = ps::HashKey(i);
  std::sort(universe.begin(), universe.end());
  std::mt19937_64 rng(seed);
  std::vector<size_t> idx;
  std::vector<ps::Key> keys;
  std::vector<int32_t> deltas;
  auto make = [&] {
    idx.clear();
    for (size_t i = 0; i < batch; ++i) idx.push_back(rng() % n);
    std::sort(idx.begin(), idx.end());
    idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
    keys.clear();
    deltas.clear();
    for (size_t i : idx) {
      const int32_t d = want[i] == 0 || (rng() & 1) ? 1 : -1;
      want[i] += d;
      keys.push_back(universe[i]);
      deltas.push_back(d);
    }
  };
  for (int r = 0; r < 8; ++r) {  // fill: not timed
    make();
    store.Push(keys.data(), keys.size(), reinterpret_cast<const char*>(deltas.data()),
               deltas.size(), nullptr);
  }
  double sec = 0;
  size_t pushed = 0;
  for (int r = 0; r < reps; ++r) {
    make();
    auto t = Clock::now();
    store.Push(keys.data(), keys.size(), reinterpret_cast<const char*>(deltas.data()),
               deltas.size(), nullptr);
    sec += ps_bench::Sec(Clock::now() - t);
    pushed += keys.size();
  }
  printf(
      "{\"bench\":\"server\",\"op\":\"store_churn\",\"universe\":%zu,\"keys_per_push\":%zu,"
      "\"reps\":%d,\"stored\":%zu,\"ns_per_key\":%.3f}\n",
      n, pushed / reps, reps, store.size(), sec * 1e9 / static_cast<double>(pushed));
  ps::SArray<char> out;
  ps::SArray<int> lens;
  store.Pull(universe.data(), n, 1, &out, &lens);
  const int32_t* got = reinterpret_cast<const int32_t*>(out.data());
  size_t nonzero = 0;
  for (size_t i = 0; i < n; ++i) {
    nonzero += want[i] != 0;
    if (got[i] != want[i]) {
      fprintf(stderr, "server_bench: churn seed %llu: key %zu holds %d, want %d\n",
              static_cast<unsigned long long>(seed), i, got[i], want[i]);
      return false;
    }
  }
  if (store.size() < nonzero) {
    fprintf(stderr, "server_bench: churn seed %llu: %zu keys stored, %zu nonzero\n",
            static_cast<unsigned long long>(seed), store.size(), nonzero);
    return false;
  }
  return true;
}

// A fixed subset of about `share` of n stored keys (double sums), pushed and pulled again and
// again: what a data-parallel job sends each pass when each worker's data holds a scattered
// part of the features (the linear app's gradient table). Returns false on a wrong sum.
bool Subset(size_t n, double share, int reps, uint64_t seed) {
  ps::Store<double> store(std::make_shared<ps::SumRule<double>>());
  std::vector<ps::Key> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = ps::HashKey(i);
  std::sort(all.begin(), all.end());
  std::vector<double> ones(n, 1.0);
  store.Push(all.data(), n, reinterpret_cast<const char*>(ones.data()), n, nullptr);
  ps::Rng rng(seed);
  std::vector<ps::Key> keys;
  for (ps::Key k : all) {
    if (rng.Uniform() < share) keys.push_back(k);
  }
  const size_t m = keys.size();
  std::vector<double> vals(m, 0.5);
  double push = 0, pull = 0;
  ps::SArray<char> out;
  ps::SArray<int> lens;
  for (int r = 0; r < reps; ++r) {
    auto t = Clock::now();
    const std::string err =
        store.Push(keys.data(), m, reinterpret_cast<const char*>(vals.data()), m, nullptr);
    push += ps_bench::Sec(Clock::now() - t);
    t = Clock::now();
    store.Pull(keys.data(), m, 1, &out, &lens);
    pull += ps_bench::Sec(Clock::now() - t);
    if (!err.empty()) {
      fprintf(stderr, "server_bench: subset seed %llu: %s\n", static_cast<unsigned long long>(seed),
              err.c_str());
      return false;
    }
  }
  for (const auto& op :
       {std::make_pair("store_subset_push", push), std::make_pair("store_subset_pull", pull)}) {
    printf(
        "{\"bench\":\"server\",\"op\":\"%s\",\"stored\":%zu,\"keys_per_request\":%zu,"
        "\"reps\":%d,\"ns_per_key\":%.3f}\n",
        op.first, n, m, reps, op.second * 1e9 / (static_cast<double>(m) * reps));
  }
  fflush(stdout);
  const double want = 1.0 + 0.5 * reps;
  const double* got = reinterpret_cast<const double*>(out.data());
  for (size_t i = 0; i < m; ++i) {
    if (got[i] != want) {
      fprintf(stderr, "server_bench: subset seed %llu: key %zu holds %g, want %g\n",
              static_cast<unsigned long long>(seed), i, got[i], want);
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 1000000, churn_keys = 300000, subset_keys = 200000;
  int reps = 30;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--keys") {
      n = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (k == "--churn_keys") {
      churn_keys = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (k == "--subset_keys") {
      subset_keys = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (k == "--reps") {
      reps = std::atoi(argv[i + 1]);
    } else {
      fprintf(stderr,
              "usage: server_bench [--keys N] [--churn_keys N] [--subset_keys N] [--reps R]\n");
      return 2;
    }
  }
  // Freed memory kept for reuse, as a server node keeps it (PS_MALLOC_RETAIN_MB's default):
  // else every large request buffer is fresh pages.
  ps::RetainFreedMemory(ps::Config().malloc_retain_mb);
  ps::SArray<ps::Key> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = ps::HashKey(i);
  std::sort(keys.begin(), keys.end());
  ps::SArray<float> vals(n, 0.5f);

  // The order check every request's keys pass on the worker and in the store.
  auto t = Clock::now();
  size_t sorted = 0;
  for (int r = 0; r < reps; ++r) sorted += ps::SortedUnique(keys.data(), n);
  Emit("sorted_check", n, reps, ps_bench::Sec(Clock::now() - t));
  if (sorted != static_cast<size_t>(reps)) {
    fprintf(stderr, "server_bench: sorted keys checked as unsorted\n");
    return 1;
  }

  Bench b;
  b.Request(keys, vals, true);  // inserts: not timed
  t = Clock::now();
  for (int r = 0; r < reps; ++r) b.Request(keys, vals, true);
  Emit("push", n, reps, ps_bench::Sec(Clock::now() - t));
  t = Clock::now();
  for (int r = 0; r < reps; ++r) b.Request(keys, vals, false);
  Emit("pull", n, reps, ps_bench::Sec(Clock::now() - t));

  t = Clock::now();
  for (int r = 0; r < reps; ++r) {
    for (size_t s = 0; s < n; s += kPartKeys) {
      const size_t m = std::min(n - s, kPartKeys);
      b.store->Push(keys.data() + s, m, reinterpret_cast<const char*>(vals.data() + s), m, nullptr);
    }
  }
  Emit("store_push", n, reps, ps_bench::Sec(Clock::now() - t));
  t = Clock::now();
  for (int r = 0; r < reps; ++r) {
    for (size_t s = 0; s < n; s += kPartKeys) {
      const size_t m = std::min(n - s, kPartKeys);
      ps::SArray<char> out;
      ps::SArray<int> lens;
      b.store->Pull(keys.data() + s, m, 1, &out, &lens);
    }
  }
  Emit("store_pull", n, reps, ps_bench::Sec(Clock::now() - t));

  // Sanity: every key was pushed 1 + 2 * reps times by now.
  ps::SArray<char> out;
  ps::SArray<int> lens;
  b.store->Pull(keys.data() + n / 2, 1, 1, &out, &lens);
  const float want = 0.5f * static_cast<float>(1 + 2 * reps);
  const float got = ps::SArray<float>(out)[0];
  if (got != want || !b.last_error.empty() || b.replies == 0) {
    fprintf(stderr, "server_bench: wrong result %g (want %g), error '%s'\n", got, want,
            b.last_error.c_str());
    return 1;
  }
  if (!Subset(subset_keys, 0.6, reps, 11)) return 1;
  return Churn(churn_keys, std::max<size_t>(1, churn_keys / 3), reps, 7) ? 0 : 1;
}
