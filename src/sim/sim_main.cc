// ps_sim: runs one deterministic simulation and prints JSON lines (docs/consistency.md);
// ps_sim --cluster runs the whole-cluster simulation (cluster_main.cc).
//
//   ps_sim [--workers P] [--servers S] [--policy bsp|ssp:S|asp|psp:B[:S]|backup:B[:S]]
//          [--max-delay TAU] [--step-time exp:1|pareto:A:XM|bimodal:P:A:B|stragglers:K:N]
//          [--latency L] [--steps N | --until T] [--seed S] [--dim D] [--samples N]
//          [--batch B] [--lr LR] [--snapshots T1,T2,...] [--loss-every DT] [--trace]
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "ps/base.h"
#include "sim/simulator.h"

namespace ps {
int ClusterMain(int argc, char** argv);  // cluster_main.cc
}  // namespace ps

namespace {

double Num(const std::string& name, const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') throw ps::Error(name + ": not a number: '" + v + "'");
  return x;
}

const char kUsage[] =
    "ps_sim: runs one deterministic simulation of workers under a barrier policy and prints\n"
    "JSON lines (docs/consistency.md).\n"
    "\n"
    "  --workers P        workers (default 100)\n"
    "  --servers S        servers (default 2)\n"
    "  --policy SPEC      bsp | ssp:S | asp | psp:BETA[:S] | backup:B[:S]\n"
    "  --max-delay TAU    bounded delay of the workers\n"
    "  --step-time DIST   exp:1 | pareto:A:XM | bimodal:P:A:B | stragglers:K:N\n"
    "  --latency L        one-way message latency\n"
    "  --steps N | --until T\n"
    "                     run N steps, or until simulated time T\n"
    "  --seed S           seed of every random choice\n"
    "  --dim D --samples N --batch B --lr LR\n"
    "                     the least-squares model the workers train\n"
    "  --snapshots T1,T2  times at which to print the workers' steps\n"
    "  --loss-every DT    print the loss every DT\n"
    "  --trace            print every event\n"
    "  --help             this text\n"
    "\n"
    "ps_sim --cluster ... simulates the whole cluster under a seeded adversary instead, and\n"
    "ps_sim --fuzz ... hunts with a mix of faults drawn per seed (ps_sim --cluster --help).\n";

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && (std::string(argv[1]) == "--cluster" || std::string(argv[1]) == "--fuzz")) {
      return ps::ClusterMain(argc, argv);
    }
    ps::SimOptions o;
    for (int i = 1; i < argc; ++i) {
      std::string k = argv[i];
      if (k == "--help" || k == "-h" || k == "-help") {
        std::cout << kUsage;
        return 0;
      }
      if (k == "--trace") {
        o.trace = true;
        continue;
      }
      if (i + 1 >= argc) throw ps::Error(k + ": missing value");
      std::string v = argv[++i];
      if (k == "--workers") {
        o.workers = static_cast<int>(Num(k, v));
      } else if (k == "--servers") {
        o.servers = static_cast<int>(Num(k, v));
      } else if (k == "--policy") {
        o.policy = v;
      } else if (k == "--max-delay") {
        o.max_delay = static_cast<int>(Num(k, v));
      } else if (k == "--step-time") {
        o.step_time = v;
      } else if (k == "--latency") {
        o.latency = Num(k, v);
      } else if (k == "--steps") {
        o.steps = static_cast<int64_t>(Num(k, v));
      } else if (k == "--until") {
        o.until = Num(k, v);
      } else if (k == "--seed") {
        o.seed = static_cast<uint64_t>(Num(k, v));
      } else if (k == "--dim") {
        o.dim = static_cast<int>(Num(k, v));
      } else if (k == "--samples") {
        o.samples = static_cast<int>(Num(k, v));
      } else if (k == "--batch") {
        o.batch = static_cast<int>(Num(k, v));
      } else if (k == "--lr") {
        o.lr = Num(k, v);
      } else if (k == "--loss-every") {
        o.loss_every = Num(k, v);
      } else if (k == "--snapshots") {
        std::stringstream ss(v);
        std::string t;
        while (std::getline(ss, t, ',')) o.snapshots.push_back(Num(k, t));
      } else {
        throw ps::Error("unknown option " + k);
      }
    }
    ps::Simulator sim(o);
    sim.Run(std::cout);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ps_sim: " << e.what() << "\n";
    return 2;
  }
}
