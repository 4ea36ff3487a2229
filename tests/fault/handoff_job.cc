// The job of fault.big_handoff (tests/fault/run_big_handoff.py): servers that hold GBs of
// values hand ranges off (a join, a leave, a refill after a SIGKILL) while workers push, and the
// test measures the memory each server needs beyond its slots.
//
//   handoff_job --universe N --width W [--batch B] [--seed S]
//
// Workers: worker w fills the keys i with i % workers == w (W int64 values each, a formula of
// i), prints FILLED, then pushes +1 to a few hundred of its keys per round, counting them, until
// it gets SIGUSR1; then it pulls all its keys in batches and checks each value against the
// formula plus its counts (exit 1 on the first difference), prints OK and finalizes.
// Servers: serve (Sum) until SIGUSR1 (leave the running job: Node::Leave, then print LEFT) or
// SIGUSR2 (finish with the job).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ps/ps.h"

namespace {

struct Options {
  uint64_t universe = 1 << 20;
  int width = 256;
  size_t batch = 8192;
  uint64_t seed = 2026;
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--universe") {
      o.universe = std::stoull(v);
    } else if (k == "--width") {
      o.width = std::stoi(v);
    } else if (k == "--batch") {
      o.batch = std::stoull(v);
    } else if (k == "--seed") {
      o.seed = std::stoull(v);
    } else {
      std::cerr << "unknown option " << k << "\n";
      std::exit(2);
    }
  }
  return o;
}

// Key i of the universe (spread over the key space, so every server holds a share).
ps::Key KeyOf(const Options& o, uint64_t i) { return ps::HashKey(o.seed * 1000003 + i); }

int64_t Fill(uint64_t i, int j) { return static_cast<int64_t>((i * 31 + j * 7) % 1000003); }

int RunWorker(ps::Node* node, const Options& o, const sigset_t& done_signal) {
  ps::KVWorker<int64_t> kv(node);
  const int w = node->rank(), workers = node->num_workers();
  // This worker's keys in key order (pushes take sorted keys), with their universe indices.
  std::vector<std::pair<ps::Key, uint64_t>> mine;
  for (uint64_t i = w; i < o.universe; i += workers) mine.emplace_back(KeyOf(o, i), i);
  std::sort(mine.begin(), mine.end());
  auto push_batch = [&](size_t b, size_t e, std::vector<int64_t>* ts) {
    ps::SArray<ps::Key> keys;
    ps::SArray<int64_t> vals;
    for (size_t x = b; x < e; ++x) {
      keys.push_back(mine[x].first);
      for (int j = 0; j < o.width; ++j) vals.push_back(Fill(mine[x].second, j));
    }
    ts->push_back(kv.Push(keys, vals));
  };
  std::vector<int64_t> open;
  for (size_t b = 0; b < mine.size(); b += o.batch) {
    if (open.size() >= 4) {
      kv.Wait(open.front());
      open.erase(open.begin());
    }
    push_batch(b, std::min(mine.size(), b + o.batch), &open);
  }
  for (int64_t ts : open) kv.Wait(ts);
  open.clear();
  std::cout << "FILLED worker " << w << " keys=" << mine.size() << std::endl;
  // Small pushes go on through the hand-offs until the test says they are over.
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&done_signal, &sig);
    done = true;
  });
  std::vector<uint32_t> extra(mine.size(), 0);
  std::mt19937_64 rng(o.seed ^ (static_cast<uint64_t>(w) << 32));
  uint64_t rounds = 0;
  while (!done) {
    std::vector<size_t> pick;
    for (int n = 0; n < 256; ++n) pick.push_back(rng() % mine.size());
    std::sort(pick.begin(), pick.end());
    pick.erase(std::unique(pick.begin(), pick.end()), pick.end());
    ps::SArray<ps::Key> keys;
    ps::SArray<int64_t> vals(pick.size() * o.width, 1);
    for (size_t x : pick) {
      keys.push_back(mine[x].first);
      extra[x]++;
    }
    kv.Wait(kv.Push(keys, vals));
    rounds++;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  waiter.join();
  uint64_t checked = 0;
  for (size_t b = 0; b < mine.size(); b += o.batch) {
    const size_t e = std::min(mine.size(), b + o.batch);
    ps::SArray<ps::Key> keys;
    for (size_t x = b; x < e; ++x) keys.push_back(mine[x].first);
    ps::SArray<int64_t> out;
    kv.Wait(kv.Pull(keys, &out));
    for (size_t x = b; x < e; ++x) {
      for (int j = 0; j < o.width; ++j) {
        const int64_t want = Fill(mine[x].second, j) + extra[x];
        const int64_t got = out[(x - b) * o.width + j];
        if (got != want) {
          std::cout << "WRONG worker " << w << " key " << mine[x].first << " value " << j << ": "
                    << got << " want " << want << std::endl;
          return 1;
        }
        checked++;
      }
    }
  }
  std::cout << "OK worker " << w << " checked " << checked << " values after " << rounds
            << " rounds of small pushes" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  // SIGUSR1 and SIGUSR2 are taken only by sigwait (blocked before any thread starts, so all
  // inherit it).
  sigset_t usr1, server_signals;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  server_signals = usr1;
  sigaddset(&server_signals, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &server_signals, nullptr);
  try {
    ps::Node node(ps::Config::FromEnv());
    node.Start();
    int rc = 0;
    if (node.role() == ps::Role::kServer) {
      ps::KVServer<int64_t> server(&node);
      std::cout << "SERVING server " << node.rank() << " pid " << getpid() << std::endl;
      // The test says when: SIGUSR1 = leave the running job, SIGUSR2 = finish with the job.
      int sig = 0;
      sigwait(&server_signals, &sig);
      if (sig == SIGUSR1) {
        node.Leave();
        std::cout << "LEFT server " << node.rank() << " keys=" << server.NumKeys()
                  << " mastered=" << server.NumMasteredKeys() << std::endl;
        return 0;
      }
      node.Finalize();
      std::cout << "STATS server " << node.rank() << " keys=" << server.NumKeys() << std::endl;
    } else if (node.role() == ps::Role::kWorker) {
      rc = RunWorker(&node, o, usr1);
      node.Finalize();
    } else {
      node.Finalize();
    }
    return rc;
  } catch (const std::exception& e) {
    std::cerr << "handoff_job: " << e.what() << std::endl;
    return 1;
  }
}
