// Configuration of one node, from code or from the environment.
#ifndef PS_CONFIG_H_
#define PS_CONFIG_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ps/base.h"

namespace ps {

class InprocNetwork;

/// Everything a node needs to join a job. Config::FromEnv() fills it from PS_* variables (and
/// the DMLC_* names that ps-lite scripts already set); docs/operations.md lists them all.
struct Config {
  Role role = Role::kWorker;
  /// Address and port of the scheduler (PS_SCHEDULER_HOST/PS_SCHEDULER_PORT).
  std::string scheduler_host = "127.0.0.1";
  int scheduler_port = 0;
  /// Expected numbers of servers and workers at start (PS_NUM_SERVERS/PS_NUM_WORKERS).
  int num_servers = 1;
  int num_workers = 1;
  /// Address this node advertises and binds (PS_NODE_HOST or DMLC_NODE_HOST); empty: the
  /// address of `interface` if set, else this host's address on its route to the scheduler
  /// (127.0.0.1 for a scheduler on loopback). Port 0 = any free port (PS_PORT).
  std::string host;
  int port = 0;
  /// The network interface whose address a node advertises when `host` is empty
  /// (PS_INTERFACE or DMLC_INTERFACE, "eth0").
  std::string interface;
  /// UCX van: its progress thread spins this many µs after the last event before it sleeps
  /// (PS_UCX_BUSY_POLL_US; 0 = never spins). Lower latency on machines with a core to spare.
  int ucx_busy_poll_us = 0;
  /// Kubernetes (PS_USE_KUBERNETES or DMLC_USE_KUBERNETES=1): every node binds all interfaces
  /// (its pod's address may be reached through a service name), and advertises as above.
  bool kubernetes = false;
  /// Virtual positions per server on the ring (PS_VNODES).
  int vnodes = 128;
  /// Rank wished for by the launcher (PS_RANK; for a worker also DMLC_WORKER_ID, as the
  /// MXNet operator and BytePS set it); -1 = assigned in order of arrival.
  int rank_hint = -1;
  /// Heartbeat period and the silence after which the scheduler marks a node dead (ms).
  int heartbeat_interval_ms = 200;
  int heartbeat_timeout_ms = 800;
  /// Scheduler: serve job-wide metrics over HTTP on this port (PS_METRICS_PORT; 0 = off) and
  /// address (PS_METRICS_HOST, loopback by default): Prometheus text at /metrics, JSON at
  /// /stats. Nodes then send their counters with a heartbeat about once a second.
  int metrics_port = 0;
  std::string metrics_host = "127.0.0.1";
  /// How long the scheduler waits for the expected nodes, and nodes for the node table (ms).
  int register_timeout_ms = 60000;
  /// How long Wait() waits for a request before throwing ps::Error (ms).
  int request_timeout_ms = 60000;
  /// How long a barrier (and Finalize) waits for the other nodes (ms).
  int barrier_timeout_ms = 600000;
  /// Copies of every key range besides the master's (PS_REPLICAS): a push is acknowledged
  /// once every copy holds it, and the job survives that many server failures. -1 = 1 when
  /// there are at least 2 servers, else 0.
  int replicas = -1;
  /// Replication after aggregation (PS_REPLICATION_WINDOW_MS): a server adds up the pushes it
  /// applies within this many ms and sends each chain one copy of the sum, instead of one copy
  /// per push. Only for additive update rules (sum, SGD); pushes wait up to the window longer
  /// for their acknowledgement. 0 (default) = every push is copied at once.
  int replication_window_ms = 0;
  /// Lossless compression of data frames (PS_COMPRESS): "off" (default), "auto" (delta-varint
  /// for sorted key lists, zero suppression for values with many zeros, chosen per frame by a
  /// cheap estimate), or one forced codec: "delta", "zero", "snappy" (docs/filters.md).
  std::string compress = "off";
  /// Lossy fixed-point quantization of the float/double values workers push (PS_QUANTIZE): 0
  /// (off), 8 or 16 bits, unbiased stochastic rounding.
  int quantize_bits = 0;
  /// Key caching (PS_KEY_CACHE_MB): a worker sends a key list it sent a server before as a
  /// 24-byte reference; each side keeps up to this many MB of lists per peer. 0 (default): off.
  int key_cache_mb = 0;
  int EffectiveReplicas() const { return replicas >= 0 ? replicas : (num_servers >= 2 ? 1 : 0); }
  /// Barrier policy of the servers (PS_CONSISTENCY): "asp" (default: never wait), "bsp",
  /// "ssp:S", "psp:BETA[:S]" (probabilistic: BETA sampled workers), "backup:B[:S]".
  std::string consistency = "asp";
  /// Barrier policies of single worker groups (PS_GROUP_CONSISTENCY="train=bsp,eval=asp"):
  /// group name -> spec as in PS_CONSISTENCY, which the other groups follow. The scheduler's
  /// setting is the job's.
  std::map<std::string, std::string> group_consistency;
  /// Bounded delays of single worker groups (PS_GROUP_MAX_DELAY="train=0,eval=-1"); the other
  /// groups follow PS_MAX_DELAY. The scheduler's setting is the job's.
  std::map<std::string, int> group_max_delay;
  /// Transport between processes (PS_VAN, or DMLC_PS_VAN_TYPE): "zmq" (default, ZeroMQ over
  /// TCP) or "ucx" (UCX: shared memory between processes on one host, TCP between hosts).
  std::string van = "zmq";
  /// Bounded delay tau of the workers (PS_MAX_DELAY): a step starts only when every request
  /// of steps before step - tau has completed; -1 = unbounded.
  int max_delay = -1;
  /// Fault injection for tests (PS_FAULT_DROP, PS_FAULT_DUPLICATE, PS_FAULT_DELAY: fractions of
  /// the data messages this node sends that are lost, sent twice, or held back
  /// PS_FAULT_DELAY_MS and so overtaken by later ones; seeded by PS_SEED).
  double fault_drop = 0;
  double fault_duplicate = 0;
  double fault_delay = 0;
  int fault_delay_ms = 20;
  /// PS_FAULT_MUTE_SCHEDULER_FILE (tests): while a file named this plus "." and the process id
  /// exists, the node's control messages to and from the scheduler are lost (its data links
  /// work): a node cut from the scheduler alone.
  std::string fault_mute_scheduler_file;
  /// A worker resends a request part that has no reply after this long (PS_RESEND_TIMEOUT_MS);
  /// servers recognise the copies and apply each push once.
  int resend_timeout_ms = 1000;
  /// The timestamp of a worker's first request (PS_FIRST_TIMESTAMP, default 0). Request
  /// identities are 64-bit and never wrap; tests start a worker just below 2^31 or 2^32 to
  /// show that crossing those points changes nothing.
  int64_t first_timestamp = 0;
  /// Bounds on what peers can make a node hold (docs/operations.md). The largest message frame
  /// a node accepts, and a frame may decode to, in MB (PS_MAX_MESSAGE_MB); a peer that sends a
  /// larger frame is disconnected, a coded frame that claims more is dropped and counted.
  int max_message_mb = 4096;
  /// Key ranges move between servers (refill, join, leave) in pieces of about this many MB
  /// (PS_REFILL_PIECE_MB): each piece is imported before the next is asked for, so a hand-off
  /// of a multi-GB range costs each end about a piece of memory, not the range.
  int refill_piece_mb = 16;
  /// A server's or worker's process keeps up to this many MB of freed memory for reuse instead
  /// of handing it back to the kernel (PS_MALLOC_RETAIN_MB; glibc's malloc thresholds,
  /// process-wide, set at Start by server and worker roles): the MB-sized buffers of each step
  /// are then not faulted in page by page again. 0 leaves malloc as it is.
  int malloc_retain_mb = 64;
  /// Messages queued per peer and direction (PS_SEND_QUEUE): beyond it a node stops reading
  /// from that peer (TCP back-pressure) and drops, and counts, what it would send to it; the
  /// protocol resends what is lost, so a stalled peer costs bounded memory.
  int send_queue = 10000;
  /// Requests a worker keeps in flight (PS_MAX_INFLIGHT): a push or pull beyond it blocks until
  /// one completes (back-pressure to the caller; not on the receive thread, where a callback
  /// may issue requests).
  int max_inflight = 1024;
  /// What a server or worker does when it cannot go on: it lost the scheduler, was fenced
  /// (declared dead) or the job aborted because data was lost (PS_ON_SCHEDULER_LOSS=exit|throw).
  /// throw (the library's default): every blocking call, and every call after it, throws
  /// ps::Error with the reason and its ErrorCode; the program decides. exit: print why and
  /// exit with code 1 at once, even under a thread busy computing (ps-launch sets this for the
  /// processes it starts: a hang is worse).
  bool exit_on_scheduler_loss = false;
  /// A task held longer than this goes back to the pool (PS_TASK_TIMEOUT_MS; 0 = never).
  int task_timeout_ms = 0;
  /// Join a job that is already running (PS_JOIN=1); only workers can, for now. The new worker
  /// gets the next id and rank, takes part in every barrier not released yet, and enters the
  /// servers' step tables at the current minimum step.
  bool join = false;
  /// Worker groups (PS_WORKER_GROUPS="train:4,eval:1"): named groups and their sizes, in
  /// order; the sizes add up to num_workers (PS_NUM_WORKERS may be left out: it is then their
  /// sum). Each group has its own barrier policy, bounded delay, task pool and step table on
  /// the servers (docs/api.md). Empty: one unnamed group of every worker.
  std::vector<std::pair<std::string, int>> worker_groups;
  /// The group of this worker (PS_WORKER_GROUP), one of worker_groups; "" when there are none.
  std::string worker_group;
  /// The index of a group name in worker_groups (0 for "" when there are none), or -1.
  int GroupIndex(const std::string& name) const { return GroupIndexIn(worker_groups, name); }
  /// The same over any list of groups (the scheduler's, which grows as groups join).
  static int GroupIndexIn(const std::vector<std::pair<std::string, int>>& groups,
                          const std::string& name);
  /// The group of the worker of rank `rank` when ranks go to the groups in order
  /// ("train:4,eval:1": 0-3 train, 4 eval); "" past their sizes.
  static std::string GroupOfRank(const std::vector<std::pair<std::string, int>>& groups, int rank);
  /// Seed of every random choice a node makes (PS_SEED), e.g. PSP's samples.
  uint64_t seed = 0;
  /// The scheduler writes the port it bound to this file when set (PS_SCHEDULER_PORT_FILE);
  /// launchers use it to avoid guessing free ports.
  std::string scheduler_port_file;
  /// When set, nodes talk through this in-memory network instead of ZeroMQ (tests, simulation).
  std::shared_ptr<InprocNetwork> inproc;

  /// Reads the configuration from the environment. Throws ps::Error naming the variable when
  /// a value is malformed or out of range.
  static Config FromEnv();
  /// Same as FromEnv but from an explicit name->value map (tests).
  static Config FromMap(const std::map<std::string, std::string>& env);
  /// The PS_* and DMLC_* names in env that ps does not read, each with the known name it is
  /// closest to when one is close ("PS_VNODE (PS_VNODES?)"). FromEnv prints a warning for each
  /// ("ps: ignoring ..."): a misspelt variable does nothing, silently, otherwise.
  static std::vector<std::string> UnknownVariables(const std::map<std::string, std::string>& env);
  /// Throws ps::Error naming the offending option if the configuration cannot work.
  void Validate() const;
};

/// An in-memory network that connects Node objects living in one process. Create one and put
/// it in the Config of every node that should see the others.
class InprocNetwork {
 public:
  InprocNetwork();
  ~InprocNetwork();
  InprocNetwork(const InprocNetwork&) = delete;
  InprocNetwork& operator=(const InprocNetwork&) = delete;
  /// Internal state (opaque to users).
  struct Hub;
  Hub* hub() const { return hub_.get(); }

 private:
  std::unique_ptr<Hub> hub_;
};

}  // namespace ps

#endif  // PS_CONFIG_H_
