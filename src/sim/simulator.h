// Deterministic simulation of a ps job on virtual time: many logical workers and servers in one
// process and one thread. Servers run the real ServerCore (validation, store, update rule,
// barrier gate, staleness accounting); workers use the real bounded-delay tracker and speak the
// real message format; a virtual network delivers messages after a fixed latency. Same seed,
// same options: byte-identical output.
#ifndef PS_SIM_SIMULATOR_H_
#define PS_SIM_SIMULATOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace ps {

struct SimOptions {
  int workers = 100;
  int servers = 2;
  int vnodes = 16;
  std::string policy = "bsp";  // as PS_CONSISTENCY
  int max_delay = -1;          // tau; -1 unbounded
  std::string step_time = "exp:1";
  double latency = 0;   // one-way message delay, in the step-time unit
  int64_t steps = 100;  // every worker runs this many steps...
  double until = 0;     // ...or, when > 0, the run stops at this virtual time
  uint64_t seed = 1;
  // The model every worker trains with minibatch SGD: least squares on synthetic data.
  int dim = 20;
  int samples = 64;  // per worker
  int batch = 8;
  double lr = 0.5;  // divided by the number of workers: one round of pushes = one step of lr
  double noise = 0.1;
  // Output besides the summary lines.
  std::vector<double> snapshots;  // times at which to print every worker's step
  double loss_every = 0;          // print the test loss every so much virtual time
  bool trace = false;             // one line per completed step
};

struct SimResult {
  double end_time = 0;
  std::vector<int64_t> steps;   // per worker
  std::vector<double> blocked;  // per worker: virtual time its pulls were held
  std::map<int64_t, uint64_t> staleness, read_lag, peer_lag;
  uint64_t checks = 0, first_pass = 0;  // reads at server 0, and how many passed at once
  // PSP only: for those first checks, the sum of the exact pass probabilities (hypergeometric
  // over the table the check saw) and of the with-replacement approximation F^beta.
  double expected_first_pass = 0, f_beta_sum = 0;
  uint64_t gate_checks = 0;  // every policy decision at server 0, re-checks included
  double final_loss = 0;
  uint64_t events = 0;
};

class Simulator {
 public:
  /// Throws ps::Error for an unusable option (naming it).
  explicit Simulator(const SimOptions& options);
  ~Simulator();
  /// Runs the whole simulation, writing JSON lines to out.
  SimResult Run(std::ostream& out);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace ps

#endif  // PS_SIM_SIMULATOR_H_
