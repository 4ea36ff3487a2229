// The job the filter tests launch (tests/integration/run_filters.py): workers push int64
// values of which 90% are zero, on sorted keys whose gaps are below 1000, then pull every key
// and compare with an exact reference computed locally from the same seeds. Run with any
// PS_COMPRESS: the results must be identical; the filters' byte counts go to the stats line.
//
//   filter_job [--keys K] [--rounds R] [--seed S] [--float 1] [--significant T]
//
// With --float 1 the values are floats (small integers, so sums stay exact). With
// --significant T (>= 0) every round ends with a pull of all keys through the
// significantly-modified filter at threshold T, checked against the reference of that round.
#include <iostream>
#include <string>
#include <vector>

#include "ps/ps.h"

namespace {

uint64_t Mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Value of key i pushed by worker w in round t: 90% of them zero.
int64_t Value(uint64_t seed, int w, int t, size_t i) {
  const uint64_t h = Mix(seed ^ Mix((static_cast<uint64_t>(w) << 40) ^ (uint64_t(t) << 24) ^ i));
  return h % 10 == 0 ? static_cast<int64_t>(h >> 40) % 2001 - 1000 : 0;
}

template <typename V>
int Serve(ps::Node* node) {
  ps::KVServer<V> server(node);
  node->Finalize();
  std::cout << "STATS " << node->StatsJson() << std::endl;
  const auto sig = server.significant_stats();
  std::cout << "SIGNIFICANT sent " << sig.sent << " suppressed " << sig.suppressed << " epochs "
            << sig.epochs << std::endl;
  return 0;
}

template <typename V>
int Work(ps::Node* node, size_t nkeys, int rounds, uint64_t seed, double significant) {
  // Sorted keys, gaps below 1000, spread over the key space by a large stride per block so
  // that every server gets some.
  ps::SArray<ps::Key> keys(nkeys);
  ps::Key at = 0;
  for (size_t i = 0; i < nkeys; ++i) {
    if (i % 1000 == 0) at = (ps::kMaxKey / (nkeys / 1000 + 1)) * (i / 1000);
    at += 1 + Mix(seed + i) % 999;
    keys[i] = at;
  }
  ps::KVWorker<V> kv(node);
  const int W = node->num_workers(), rank = node->rank();
  if (significant >= 0) {
    ps::RequestFilters f;
    f.significant = significant;
    kv.SetFilters(f);
  }
  std::vector<int64_t> sum(nkeys, 0);  // the reference after the rounds so far
  for (int t = 0; t < rounds; ++t) {
    ps::SArray<V> v(nkeys);
    for (size_t i = 0; i < nkeys; ++i) v[i] = static_cast<V>(Value(seed, rank, t, i));
    kv.Wait(kv.Push(keys, v));  // the same key list every round
    if (significant < 0) continue;
    for (size_t i = 0; i < nkeys; ++i) {
      for (int w = 0; w < W; ++w) sum[i] += Value(seed, w, t, i);
    }
    node->Barrier(ps::kWorkerGroup);  // every worker's round t is in
    ps::SArray<V> now(nkeys);         // pre-sized: the width is known, so the filter applies
    kv.Wait(kv.Pull(keys, &now));
    for (size_t i = 0; i < nkeys; ++i) {
      const double err = static_cast<double>(now[i]) - static_cast<double>(sum[i]);
      if (err > significant || -err > significant) {
        std::cerr << "MISMATCH round " << t << " key " << keys[i] << ": got " << now[i] << " want "
                  << sum[i] << " (threshold " << significant << ", seed " << seed << ")\n";
        return 1;
      }
    }
    node->Barrier(ps::kWorkerGroup);  // nobody pushes round t + 1 before all have pulled
  }
  node->Barrier(ps::kWorkerGroup);
  ps::SArray<V> out;
  kv.Wait(kv.Pull(keys, &out));
  for (size_t i = 0; i < nkeys; ++i) {
    int64_t want = 0;
    for (int w = 0; w < W; ++w) {
      for (int t = 0; t < rounds; ++t) want += Value(seed, w, t, i);
    }
    if (out[i] != static_cast<V>(want)) {
      std::cerr << "MISMATCH key " << keys[i] << ": got " << out[i] << " want " << want << " (seed "
                << seed << ")\n";
      return 1;
    }
  }
  std::cout << "OK worker " << rank << " checked " << nkeys << " values " << node->StatsJson()
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  size_t nkeys = 200000;
  int rounds = 10;
  uint64_t seed = 5;
  bool floats = false;
  double significant = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--keys") nkeys = std::stoull(argv[i + 1]);
    if (k == "--rounds") rounds = std::stoi(argv[i + 1]);
    if (k == "--seed") seed = std::stoull(argv[i + 1]);
    if (k == "--float") floats = std::string(argv[i + 1]) == "1";
    if (k == "--significant") significant = std::stod(argv[i + 1]);
  }
  try {
    ps::Node node(ps::Config::FromEnv());
    node.Start();
    if (node.role() == ps::Role::kServer) {
      int rc = floats ? Serve<float>(&node) : Serve<int64_t>(&node);
      return rc;
    }
    if (node.role() == ps::Role::kWorker) {
      int rc = floats ? Work<float>(&node, nkeys, rounds, seed, significant)
                      : Work<int64_t>(&node, nkeys, rounds, seed, significant);
      if (rc != 0) return rc;
    }
    node.Finalize();
    return 0;
  } catch (const ps::Error& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
}
