// Links against the installed ps and runs a one-process job on the in-memory network.
#include <iostream>
#include <thread>

#include "ps/ps.h"

int main() {
  auto net = std::make_shared<ps::InprocNetwork>();
  ps::Config base;
  base.inproc = net;
  base.scheduler_port = 1;
  auto run = [&](ps::Role role, auto body) {
    return std::thread([&, role, body] {
      ps::Config c = base;
      c.role = role;
      ps::Node node(c);
      node.Start();
      body(&node);  // each body ends with node.Finalize(), while its KVServer/KVWorker lives
    });
  };
  int64_t got = 0;
  std::thread s = run(ps::Role::kScheduler, [](ps::Node* n) { n->Finalize(); });
  std::thread v = run(ps::Role::kServer, [](ps::Node* n) {
    ps::KVServer<int64_t> server(n);
    n->Finalize();
  });
  std::thread w = run(ps::Role::kWorker, [&](ps::Node* n) {
    ps::KVWorker<int64_t> kv(n);
    ps::SArray<ps::Key> keys{ps::HashKey(42)};
    kv.Wait(kv.Push(keys, ps::SArray<int64_t>{40}));
    kv.Wait(kv.Push(keys, ps::SArray<int64_t>{2}));
    ps::SArray<int64_t> out;
    kv.Wait(kv.Pull(keys, &out));
    got = out[0];
    n->Finalize();
  });
  s.join();
  v.join();
  w.join();
  std::cout << "consumer pulled " << got << std::endl;
  return got == 42 ? 0 : 1;
}
