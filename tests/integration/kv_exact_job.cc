// The job that the integration tests launch through tracker/ps-launch: every role runs this
// program. Workers push seeded random data, pull it back and compare with an exact reference
// computed locally from the same seeds; any difference exits non-zero.
//
//   kv_exact_job --scenario sum|range|varlen|garbage|fail|hang [--universe U] [--keys K]
//                [--rounds R] [--pace-ms MS] [--seed S] [--window N] [--seconds S]
//   --window N: pushes in flight per worker (0: the job never waits, the library's
//   PS_MAX_INFLIGHT holds it back); --seconds S: stop pushing after S s (workers share how
//   many rounds each pushed through app 1, for the reference); --min-epoch E: push on past R
//   rounds until the ring reaches epoch E (a join's cut-over; at most 200 s).
//                [--leave-rank R --leave-after-ms MS]  (server R leaves the running job;
//                MS < 0: when it gets SIGUSR1, after printing LEAVE-READY with its pid)
//                [--shout N]  (each process prints three lines of N letters of its own: a
//                cluster launcher must forward every line whole)
//                [--rules sum,assign,adagrad]  (the same pushes also go to app 2 under Assign
//                and app 3 under AdaGrad, whose results depend on the order of updates;
//                servers print a DIGEST line per chain segment and app at the end, which
//                tests/fault compares across the members of each chain)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "integration/ucx_raw.h"
#include "ps/ps.h"

namespace {

struct Options {
  std::string scenario = "sum";
  size_t universe = 1000000;
  size_t keys = 100000;
  int rounds = 20;
  int pace_ms = 0;          // pause between rounds, so a fault test can act while pushes go on
  int window = 1;           // pushes in flight (0 = no limit of the job's own)
  double seconds = 0;       // > 0: push rounds until this much time passed (at most `rounds`)
  uint64_t min_epoch = 0;   // > 0: push on past `rounds` until the ring reaches this epoch
  int server_delay_ms = 0;  // a server waits this long before serving (a joiner that is slow)
  int leave_rank = -1;      // this server leaves the running job (Node::Leave) ...
  int leave_after_ms = 0;   // ... this long after it started serving
  uint64_t seed = 2026;
  bool assign = false, adagrad = false;  // --rules: also push to the order-dependent apps
  size_t shout = 0;
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--scenario") {
      o.scenario = v;
    } else if (k == "--universe") {
      o.universe = std::stoull(v);
    } else if (k == "--keys") {
      o.keys = std::stoull(v);
    } else if (k == "--rounds") {
      o.rounds = std::stoi(v);
    } else if (k == "--leave-rank") {
      o.leave_rank = std::stoi(v);
    } else if (k == "--leave-after-ms") {
      o.leave_after_ms = std::stoi(v);
    } else if (k == "--pace-ms") {
      o.pace_ms = std::stoi(v);
    } else if (k == "--window") {
      o.window = std::stoi(v);
    } else if (k == "--server-delay-ms") {
      o.server_delay_ms = std::stoi(v);
    } else if (k == "--min-epoch") {
      o.min_epoch = std::stoull(v);
    } else if (k == "--seconds") {
      o.seconds = std::stod(v);
    } else if (k == "--seed") {
      o.seed = std::stoull(v);
    } else if (k == "--shout") {
      o.shout = std::stoull(v);
    } else if (k == "--rules") {
      o.assign = v.find("assign") != std::string::npos;
      o.adagrad = v.find("adagrad") != std::string::npos;
    } else {
      std::cerr << "unknown option " << k << "\n";
      std::exit(2);
    }
  }
  return o;
}

// The sorted key universe: distinct keys spread over the whole key space.
std::vector<ps::Key> Universe(const Options& o) {
  std::vector<ps::Key> u(o.universe);
  for (size_t i = 0; i < u.size(); ++i) u[i] = ps::HashKey(o.seed * 1000003 + i);
  std::sort(u.begin(), u.end());
  u.erase(std::unique(u.begin(), u.end()), u.end());
  return u;
}

// Indices into the universe that worker w pushes in round t (sorted, distinct), and values.
void Draw(const Options& o, size_t usize, int w, int t, std::vector<uint32_t>* idx,
          std::vector<int64_t>* vals, std::vector<int>* lens) {
  std::mt19937_64 rng(o.seed ^ (static_cast<uint64_t>(w) << 40) ^ (static_cast<uint64_t>(t) << 20));
  size_t want = std::min(o.keys, usize);
  std::vector<char> taken(usize, 0);
  idx->clear();
  while (idx->size() < want) {
    uint32_t i = static_cast<uint32_t>(rng() % usize);
    if (!taken[i]) {
      taken[i] = 1;
      idx->push_back(i);
    }
  }
  std::sort(idx->begin(), idx->end());
  vals->clear();
  lens->clear();
  for (size_t j = 0; j < idx->size(); ++j) {
    int len = 1;
    if (o.scenario == "varlen") len = static_cast<int>((*idx)[j] % 5);  // 0..4 values
    lens->push_back(len);
    for (int l = 0; l < len; ++l) {
      vals->push_back(static_cast<int64_t>(rng() % (1ull << 41)) - (1ll << 40));
    }
  }
}

void PutVarint(std::string* s, uint64_t v) {
  while (v >= 0x80) {
    s->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  s->push_back(static_cast<char>(v));
}

// A well-formed push whose key and value frames say they are Snappy-coded and claim almost
// 4 GB each in a few bytes (the wire format of meta.proto, written by hand).
std::vector<std::string> HugeClaim(int sender, int receiver, uint64_t ts) {
  std::string meta;
  meta += '\x0d';  // magic, fixed32
  const uint32_t magic = 0x70730001;
  meta.append(reinterpret_cast<const char*>(&magic), 4);
  meta += '\x10';
  PutVarint(&meta, static_cast<uint64_t>(sender));
  meta += '\x18';
  PutVarint(&meta, static_cast<uint64_t>(receiver));
  meta += '\x58';  // timestamp
  PutVarint(&meta, ts);
  meta += "\x60\x01\x70\x01";      // request, push
  meta += "\x80\x01\x03";          // dtype int64
  meta += "\xca\x02\x02\x03\x03";  // codec (41, packed): snappy on frames 1 and 2
  std::string claim;
  PutVarint(&claim, (uint64_t{1} << 32) - 16);
  claim += "\xfe\xfe\xfe\xfe";
  return {meta, claim, claim};
}

void RawTcpJunk(const ps::NodeInfo& n, std::mt19937_64* rng) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(n.port));
  inet_pton(AF_INET, n.host.c_str(), &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
    std::string junk(65536, '\0');
    for (auto& c : junk) c = static_cast<char>((*rng)());
    ssize_t ignored = write(fd, junk.data(), junk.size());
    (void)ignored;
  }
  close(fd);
}

void SendGarbage(const std::vector<ps::NodeInfo>& nodes, int self, uint64_t seed, int frames,
                 int claims) {
  std::mt19937_64 rng(seed);
  void* ctx = zmq_ctx_new();
  // Crafted size claims go to every other node (scheduler, servers, workers).
  for (const auto& n : nodes) {
    if (n.id == self) continue;
    void* s = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 5000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
    zmq_connect(s, ("tcp://" + n.host + ":" + std::to_string(n.port)).c_str());
    for (int i = 0; i < claims; ++i) {
      auto parts = HugeClaim(self, n.id, (uint64_t{1} << 40) + static_cast<uint64_t>(i));
      for (size_t j = 0; j < parts.size(); ++j) {
        zmq_send(s, parts[j].data(), parts[j].size(), j + 1 < parts.size() ? ZMQ_SNDMORE : 0);
      }
    }
    zmq_close(s);
  }
  for (const auto& n : nodes) {
    if (n.role != ps::Role::kServer) continue;
    std::string addr = "tcp://" + n.host + ":" + std::to_string(n.port);
    void* s = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 5000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
    zmq_connect(s, addr.c_str());
    for (int i = 0; i < frames; ++i) {
      std::string junk(1 + rng() % 200, '\0');
      for (auto& c : junk) c = static_cast<char>(rng());
      if (i % 50 == 0) {
        // Now and then a frame that starts like a real meta (magic field tag + value).
        junk[0] = 0x0d;
      }
      zmq_send(s, junk.data(), junk.size(), rng() % 4 == 0 ? ZMQ_SNDMORE : 0);
    }
    zmq_send(s, "end", 3, 0);
    zmq_close(s);
    RawTcpJunk(n, &rng);  // bytes that are not even ZMTP
  }
  zmq_ctx_term(ctx);
}

// The same over UCX: the crafted size claims in UcxVan's framing to every other node, then to
// each server active messages of random bytes (now and then with the van's magic in front)
// and raw bytes on its listening port.
void SendGarbageUcx(const std::vector<ps::NodeInfo>& nodes, int self, uint64_t seed, int frames,
                    int claims) {
  std::mt19937_64 rng(seed);
  for (const auto& n : nodes) {
    if (n.id == self) continue;
    ps_test::RawUcx raw(n.host, n.port);
    const uint64_t stream = rng();
    for (int i = 0; i < claims; ++i) {
      auto parts = HugeClaim(self, n.id, (uint64_t{1} << 40) + static_cast<uint64_t>(i));
      if (!raw.Send(ps_test::RawUcx::Header(stream, static_cast<uint64_t>(i), parts[0],
                                            {parts[1].size(), parts[2].size()}),
                    ps_test::RawUcx::Data({parts[1], parts[2]}))) {
        std::cerr << "garbage: a crafted claim to node " << n.id << " was not sent\n";
      }
    }
  }
  for (const auto& n : nodes) {
    if (n.role != ps::Role::kServer) continue;
    ps_test::RawUcx raw(n.host, n.port);
    for (int i = 0; i < frames; ++i) {
      std::string header(1 + rng() % 200, '\0'), data(rng() % 200, '\0');
      for (auto& c : header) c = static_cast<char>(rng());
      for (auto& c : data) c = static_cast<char>(rng());
      if (i % 50 == 0 && header.size() >= 4) {
        std::memcpy(&header[0], &ps_test::RawUcx::kMagic, 4);
      }
      raw.Send(header, data);
    }
    RawTcpJunk(n, &rng);
  }
}

int RunWorker(ps::Node* node, const Options& o) {
  const int rank = node->rank(), W = node->num_workers();
  if (o.scenario == "fail" && rank == W - 1) {
    std::cerr << "worker " << rank << " fails on purpose\n";
    return 3;
  }
  if (o.scenario == "hang") {
    std::cout << "HANGING worker " << rank << std::endl;
    std::this_thread::sleep_for(std::chrono::hours(1));
  }
  const auto universe = Universe(o);
  const size_t U = universe.size();
  ps::KVWorker<int64_t> kv(node);
  std::unique_ptr<ps::KVWorker<int64_t>> assign;
  std::unique_ptr<ps::KVWorker<double>> adagrad;
  if (o.assign) assign = std::make_unique<ps::KVWorker<int64_t>>(node, 2);
  if (o.adagrad) adagrad = std::make_unique<ps::KVWorker<double>>(node, 3);
  std::deque<int64_t> open_assign, open_adagrad;
  std::thread garbage;
  if (o.scenario == "garbage" && rank == 0) {
    const char* van = std::getenv("PS_VAN");
    const bool ucx = van && std::string(van) == "ucx";
    garbage = std::thread([&, ucx] {
      (ucx ? SendGarbageUcx : SendGarbage)(node->nodes(), node->id(), o.seed, 10000, 20);
    });
  }
  // Push: round t's push is in flight while round t+1's is prepared.
  std::cout << "PUSHING worker " << rank << std::endl;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<uint32_t> idx;
  std::vector<int64_t> vals;
  std::vector<int> lens;
  std::deque<int64_t> open;
  int done_rounds = 0;
  auto elapsed = [&t0] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // --min-epoch: a test that adds a server while the pushes go on needs them to go on until
  // the cut-over, however long the new server takes to start (bounded: the launcher's timeout
  // is longer, and the test then finds no cut-over).
  auto more = [&](int t) {
    if (o.seconds > 0 && elapsed() >= o.seconds) return false;
    if (t < o.rounds) return true;
    return o.min_epoch > 0 && node->ring_epoch() < o.min_epoch && elapsed() < 200;
  };
  for (int t = 0; more(t); ++t) {
    Draw(o, U, rank, t, &idx, &vals, &lens);
    ps::SArray<ps::Key> keys(idx.size());
    for (size_t j = 0; j < idx.size(); ++j) keys[j] = universe[idx[j]];
    ps::SArray<int64_t> v(vals);
    ps::SArray<int> l = o.scenario == "varlen" ? ps::SArray<int>(lens) : ps::SArray<int>();
    if (o.window > 0 && static_cast<int>(open.size()) >= o.window) {
      kv.Wait(open.front());
      open.pop_front();
    }
    open.push_back(kv.Push(keys, v, l));
    if (assign) {
      if (static_cast<int>(open_assign.size()) >= std::max(o.window, 1)) {
        assign->Wait(open_assign.front());
        open_assign.pop_front();
      }
      open_assign.push_back(assign->Push(keys, v));
    }
    if (adagrad) {
      if (static_cast<int>(open_adagrad.size()) >= std::max(o.window, 1)) {
        adagrad->Wait(open_adagrad.front());
        open_adagrad.pop_front();
      }
      ps::SArray<double> g(v.size());
      for (size_t j = 0; j < v.size(); ++j) g[j] = static_cast<double>(v[j]) / 16;
      open_adagrad.push_back(adagrad->Push(keys, g));
    }
    done_rounds = t + 1;
    if (o.pace_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.pace_ms));
  }
  std::cout << "PUSHED worker " << rank << " rounds=" << done_rounds << std::endl;
  for (int64_t ts : open) kv.Wait(ts);
  for (int64_t ts : open_assign) assign->Wait(ts);
  for (int64_t ts : open_adagrad) adagrad->Wait(ts);
  if (garbage.joinable()) garbage.join();
  double push_s = elapsed();
  // How many rounds every worker pushed (they differ when the push phase is timed).
  std::vector<int> rounds(W, o.rounds);
  if (o.seconds > 0 || o.min_epoch > 0) {
    ps::KVWorker<int64_t> counts(node, 1);
    counts.Wait(counts.Push(ps::SArray<ps::Key>{static_cast<ps::Key>(rank)},
                            ps::SArray<int64_t>{done_rounds}));
    node->Barrier(ps::kWorkerGroup);
    ps::SArray<ps::Key> ids;
    for (int w = 0; w < W; ++w) ids.push_back(static_cast<ps::Key>(w));
    ps::SArray<int64_t> got;
    counts.Wait(counts.Pull(ids, &got));
    for (int w = 0; w < W; ++w) rounds[w] = static_cast<int>(got[w]);
  }
  node->Barrier(ps::kWorkerGroup);

  // The exact reference, from every worker's seeds.
  std::vector<std::vector<int64_t>> ref(U);
  std::vector<char> pushed(U, 0);
  for (int w = 0; w < W; ++w) {
    for (int t = 0; t < rounds[w]; ++t) {
      Draw(o, U, w, t, &idx, &vals, &lens);
      size_t at = 0;
      for (size_t j = 0; j < idx.size(); ++j) {
        auto& r = ref[idx[j]];
        pushed[idx[j]] = 1;
        r.resize(lens[j], 0);
        for (int l = 0; l < lens[j]; ++l) r[l] += vals[at++];
      }
    }
  }
  ps::SArray<ps::Key> all(universe);
  size_t checked = 0;
  if (o.scenario == "varlen") {
    ps::SArray<int64_t> out;
    ps::SArray<int> out_lens;
    kv.Wait(kv.Pull(all, &out, &out_lens));
    size_t at = 0;
    for (size_t i = 0; i < U; ++i) {
      if (static_cast<size_t>(out_lens[i]) != ref[i].size()) {
        std::cerr << "MISMATCH len of key " << universe[i] << ": " << out_lens[i] << " vs "
                  << ref[i].size() << " (seed " << o.seed << ")\n";
        return 1;
      }
      for (int64_t want : ref[i]) {
        if (out[at++] != want) {
          std::cerr << "MISMATCH value of key " << universe[i] << " (seed " << o.seed << ")\n";
          return 1;
        }
        ++checked;
      }
    }
  } else {
    ps::SArray<int64_t> out;
    kv.Wait(kv.Pull(all, &out));
    if (out.size() != U) {
      std::cerr << "MISMATCH: pulled " << out.size() << " values for " << U << " keys\n";
      return 1;
    }
    for (size_t i = 0; i < U; ++i) {
      int64_t want = ref[i].empty() ? 0 : ref[i][0];
      if (out[i] != want) {
        std::cerr << "MISMATCH key " << universe[i] << ": got " << out[i] << " want " << want
                  << " (seed " << o.seed << ")\n";
        return 1;
      }
      ++checked;
    }
  }
  if (o.scenario == "range") {
    std::mt19937_64 rng(o.seed + rank);
    for (int q = 0; q < 20; ++q) {
      ps::Key a = rng() % ps::kMaxKey, b = rng() % ps::kMaxKey;
      ps::Range r = q == 0 ? ps::Range::All() : ps::Range(std::min(a, b), std::max(a, b) + 1);
      ps::SArray<ps::Key> rk;
      ps::SArray<int64_t> rv;
      ps::SArray<int> rl;
      kv.Wait(kv.PullRange(r, &rk, &rv, &rl));
      size_t j = 0;
      for (size_t i =
               std::lower_bound(universe.begin(), universe.end(), r.begin) - universe.begin();
           i < U && universe[i] < r.end; ++i) {
        if (!pushed[i]) continue;
        if (j >= rk.size() || rk[j] != universe[i] || rv[j] != ref[i][0] || rl[j] != 1) {
          std::cerr << "MISMATCH range pull at key " << universe[i] << " (seed " << o.seed << ")\n";
          return 1;
        }
        ++j;
      }
      if (j != rk.size()) {
        std::cerr << "MISMATCH range pull returned " << rk.size() << " keys, want " << j << "\n";
        return 1;
      }
      checked += j;
    }
  }
  std::cout << "OK worker " << rank << " checked " << checked << " values; push phase " << push_s
            << " s; resends=" << kv.Resends() << " " << node->StatsJson() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = Parse(argc, argv);
  sigset_t leave_signal;
  sigemptyset(&leave_signal);
  sigaddset(&leave_signal, SIGUSR1);
  // Blocked before any thread starts, so every thread inherits it and only sigwait takes it
  // (the fault test signals every server; only the leaver acts on it).
  if (o.leave_after_ms < 0) pthread_sigmask(SIG_BLOCK, &leave_signal, nullptr);
  try {
    ps::Node node(ps::Config::FromEnv());
    node.Start();
    if (o.shout > 0) {
      const char c =
          static_cast<char>('a' + (node.rank() + (node.role() == ps::Role::kWorker ? 13 : 0)) % 26);
      const std::string line(o.shout, c);
      for (int i = 0; i < 3; ++i) std::cout << "SHOUT " << c << " " << line << std::endl;
    }
    int rc = 0;
    if (node.role() == ps::Role::kServer) {
      std::this_thread::sleep_for(std::chrono::milliseconds(o.server_delay_ms));
      ps::KVServer<int64_t> server(&node);
      std::unique_ptr<ps::KVServer<int64_t>> counts;  // timed pushes: rounds per worker
      if (o.seconds > 0 || o.min_epoch > 0) {
        counts = std::make_unique<ps::KVServer<int64_t>>(&node, 1);
      }
      std::unique_ptr<ps::KVServer<int64_t>> assign;
      std::unique_ptr<ps::KVServer<double>> adagrad;
      if (o.assign) {
        assign = std::make_unique<ps::KVServer<int64_t>>(
            &node, 2, std::make_shared<ps::AssignRule<int64_t>>());
      }
      if (o.adagrad) {
        adagrad = std::make_unique<ps::KVServer<double>>(
            &node, 3, std::make_shared<ps::AdaGradRule<double>>(0.1));
      }
      if (node.rank() == o.leave_rank) {
        if (o.leave_after_ms >= 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(o.leave_after_ms));
        } else {
          std::cout << "LEAVE-READY server " << node.rank() << " pid " << getpid() << std::endl;
          int sig = 0;
          sigwait(&leave_signal, &sig);
        }
        node.Leave();
        std::cout << "LEFT server " << node.rank() << " keys=" << server.NumKeys()
                  << " mastered=" << server.NumMasteredKeys() << std::endl;
        return 0;
      }
      node.Finalize();
      std::cout << "STATS " << node.StatsJson() << " keys=" << server.NumKeys()
                << " mastered=" << server.NumMasteredKeys()
                << " copies=" << server.replication_stats().copies
                << " copy_bytes=" << server.replication_stats().bytes
                << " aggregated=" << server.replication_stats().aggregated
                << " conflicts=" << server.replication_stats().conflicts
                << " rejected=" << server.RejectedRequests()
                << " duplicates=" << server.DuplicatePushes() << std::endl;
      // The state of every chain segment this server holds, per app: the members of a chain
      // must agree byte for byte, whatever the order the copies travelled in.
      std::vector<std::pair<int, const ps::KVServerBase*>> apps{{0, &server}};
      if (assign) apps.emplace_back(2, assign.get());
      if (adagrad) apps.emplace_back(3, adagrad.get());
      for (const auto& a : apps) {
        for (const auto& d : a.second->ChainDigests()) {
          std::cout << "DIGEST app=" << a.first << " range=" << d.first.begin << "-" << d.first.end
                    << " hash=" << d.second << std::endl;
        }
      }
      return 0;
    }
    if (node.role() == ps::Role::kWorker) rc = RunWorker(&node, o);
    if (rc != 0) return rc;
    node.Finalize();
    return 0;
  } catch (const ps::Error& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
}
