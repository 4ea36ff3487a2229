// Whole jobs inside one process for tests: scheduler, servers and workers as Node objects,
// over the in-process transport or real ZeroMQ sockets on loopback.
#ifndef PS_TESTS_UNIT_INPROC_JOB_H_
#define PS_TESTS_UNIT_INPROC_JOB_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ps/ps.h"

namespace ps {

struct Job {
  // Starts scheduler, S servers and W workers; runs body(worker node, rank) on each worker.
  // tweak: changes the configuration of every node; on_server: sees each server's KVServer
  // after the job finished; reducers: the servers' (KVServer, with the Sum rule); table_rules:
  // the application rules of the servers' TableServer.
  template <typename Body, typename V = int64_t>
  static void Run(bool inproc, int S, int W, Body body, V* = nullptr,
                  const std::function<void(Config*)>& tweak = nullptr,
                  const std::function<void(KVServerBase&)>& on_server = nullptr,
                  const Reducers<V>& reducers = {}, const TableRules& table_rules = TableRules()) {
    static int next_port = 7000;
    auto net = std::make_shared<InprocNetwork>();
    Config base;
    base.num_servers = S;
    base.num_workers = W;
    base.vnodes = 16;
    base.register_timeout_ms = 20000;
    base.request_timeout_ms = 20000;
    base.barrier_timeout_ms = 20000;
    base.exit_on_scheduler_loss = false;  // many nodes share this process
    // No heartbeats while a test runs: some tests count the messages a node receives.
    base.heartbeat_interval_ms = 30000;
    base.heartbeat_timeout_ms = 60000;
    if (tweak) tweak(&base);
    if (inproc) {
      base.inproc = net;
      base.scheduler_port = next_port++;
    }
    Config sc = base;
    sc.role = Role::kScheduler;
    std::string port_file;
    if (!inproc) {
      // Real sockets: the scheduler binds any free port and tells us through a file.
      port_file = ::testing::TempDir() + "ps_sched_" + std::to_string(getpid()) + "_" +
                  std::to_string(next_port++) + ".port";
      std::remove(port_file.c_str());
      sc.scheduler_port_file = port_file;
    }
    Node scheduler(sc);
    std::vector<std::thread> threads;
    std::exception_ptr failure;
    std::mutex fail_mu;
    auto guard = [&](auto fn) {
      return [&, fn] {
        try {
          fn();
        } catch (...) {
          std::lock_guard<std::mutex> lk(fail_mu);
          failure = std::current_exception();
        }
      };
    };
    threads.emplace_back(guard([&] {
      scheduler.Start();
      scheduler.Finalize();
    }));
    if (!inproc) {
      int port = 0;
      for (int i = 0; i < 500 && port == 0; ++i) {
        std::ifstream f(port_file);
        if (!(f >> port)) {
          port = 0;
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
      EXPECT_GT(port, 0) << "scheduler did not write " << port_file;
      base.scheduler_port = port;
    }
    for (int s = 0; s < S; ++s) {
      threads.emplace_back(guard([&, base] {
        Config c = base;
        c.role = Role::kServer;
        Node node(c);
        node.Start();
        KVServer<V> server(&node, 0, std::make_shared<SumRule<V>>(), reducers);
        TableServer tables(&node, table_rules);  // named tables, if a test creates any
        node.Finalize();
        if (on_server) {
          std::lock_guard<std::mutex> lk(fail_mu);
          on_server(server);
        }
      }));
    }
    for (int w = 0; w < W; ++w) {
      threads.emplace_back(guard([&, base, w] {
        Config c = base;
        c.role = Role::kWorker;
        c.rank_hint = w;
        // Worker groups (a tweak's): ranks take them in order, as launchers' ranks do.
        if (c.worker_group.empty()) c.worker_group = Config::GroupOfRank(c.worker_groups, w);
        Node node(c);
        node.Start();
        body(&node, node.rank());
        node.Finalize();
      }));
    }
    for (auto& t : threads) t.join();
    if (failure) std::rethrow_exception(failure);
  }
};

}  // namespace ps

#endif  // PS_TESTS_UNIT_INPROC_JOB_H_
