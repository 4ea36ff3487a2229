#include "ps/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "consistency/barrier_policy.h"
#include "filter/filter_chain.h"
#include "transport/inproc_van.h"
#include "util/process_setup.h"

extern char** environ;

namespace ps {
namespace {

using Env = std::map<std::string, std::string>;

// Returns the value of the first name present; *used gets the name for error messages.
bool Lookup(const Env& env, std::initializer_list<const char*> names, std::string* value,
            std::string* used) {
  for (const char* n : names) {
    auto it = env.find(n);
    if (it != env.end() && !it->second.empty()) {
      *value = it->second;
      *used = n;
      return true;
    }
  }
  return false;
}

void ReadInt(const Env& env, std::initializer_list<const char*> names, int lo, int hi, int* out) {
  std::string v, name;
  if (!Lookup(env, names, &v, &name)) return;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v.c_str(), &end, 10);
  if (errno != 0 || end == v.c_str() || *end != '\0' || x < lo || x > hi) {
    throw Error(ErrorCode::kBadConfig, name + "='" + v + "': expected an integer in [" +
                                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = static_cast<int>(x);
}

void ReadInt64(const Env& env, const char* name, int64_t lo, int64_t hi, int64_t* out) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(it->second.c_str(), &end, 10);
  if (errno != 0 || end == it->second.c_str() || *end != '\0' || x < lo || x > hi) {
    throw Error(ErrorCode::kBadConfig, std::string(name) + "='" + it->second +
                                           "': expected an integer in [" + std::to_string(lo) +
                                           ", " + std::to_string(hi) + "]");
  }
  *out = x;
}

void ReadFraction(const Env& env, const char* name, double* out) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return;
  char* end = nullptr;
  double x = std::strtod(it->second.c_str(), &end);
  if (*end != '\0' || !(x >= 0 && x <= 1)) {
    throw Error(ErrorCode::kBadConfig,
                std::string(name) + "='" + it->second + "': expected a fraction in [0, 1]");
  }
  *out = x;
}

void ReadString(const Env& env, std::initializer_list<const char*> names, std::string* out) {
  std::string v, name;
  if (Lookup(env, names, &v, &name)) *out = v;
}

// "train:4,eval:1" -> {{"train", 4}, {"eval", 1}}.
std::vector<std::pair<std::string, int>> ParseGroups(const std::string& spec) {
  std::vector<std::pair<std::string, int>> out;
  size_t at = 0;
  while (at <= spec.size()) {
    const size_t end = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, end - at);
    const size_t colon = item.find(':');
    const std::string name = item.substr(0, colon);
    const std::string size = colon == std::string::npos ? "" : item.substr(colon + 1);
    char* stop = nullptr;
    const long n = size.empty() ? 0 : std::strtol(size.c_str(), &stop, 10);
    bool ok = !name.empty() && n >= 1 && n <= (1 << 20) && stop && *stop == '\0';
    for (char ch : name)
      ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-');
    for (const auto& g : out) ok = ok && g.first != name;
    if (!ok) {
      throw Error(ErrorCode::kBadConfig,
                  "PS_WORKER_GROUPS='" + spec + "': expected NAME:SIZE[,NAME:SIZE...] with " +
                      "distinct names of letters, digits, _ and -, and sizes of at least 1 " +
                      "(at '" + item + "')");
    }
    out.emplace_back(name, static_cast<int>(n));
    at = end + 1;
  }
  return out;
}

// "a=x,b=y" -> {a: x, b: y} for one value per worker group; errors name the variable.
void ReadGroupMap(const Env& env, const char* name, const char* what,
                  std::map<std::string, std::string>* out) {
  std::string spec;
  ReadString(env, {name}, &spec);
  for (size_t at = 0; !spec.empty() && at <= spec.size();) {
    const size_t end = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, end - at);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size() ||
        out->count(item.substr(0, eq))) {
      throw Error(ErrorCode::kBadConfig, std::string(name) + "='" + spec +
                                             "': expected GROUP=" + what + "[,GROUP=" + what +
                                             "...] with each group once (at '" + item + "')");
    }
    (*out)[item.substr(0, eq)] = item.substr(eq + 1);
    at = end + 1;
  }
}

}  // namespace

int Config::GroupIndexIn(const std::vector<std::pair<std::string, int>>& groups,
                         const std::string& name) {
  if (groups.empty()) return name.empty() ? 0 : -1;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i].first == name) return static_cast<int>(i);
  }
  return -1;
}

std::string Config::GroupOfRank(const std::vector<std::pair<std::string, int>>& groups, int rank) {
  int first = 0;
  for (const auto& g : groups) {
    if (rank >= first && rank < first + g.second) return g.first;
    first += g.second;
  }
  return "";
}

Config Config::FromMap(const Env& env) {
  Config c;
  std::string role, name;
  if (Lookup(env, {"PS_ROLE", "DMLC_ROLE"}, &role, &name)) {
    if (role == "scheduler") {
      c.role = Role::kScheduler;
    } else if (role == "server") {
      c.role = Role::kServer;
    } else if (role == "worker") {
      c.role = Role::kWorker;
    } else {
      throw Error(ErrorCode::kBadConfig,
                  name + "='" + role + "': expected scheduler, server or worker");
    }
  } else {
    throw Error(ErrorCode::kBadConfig,
                "PS_ROLE (or DMLC_ROLE) is not set: expected scheduler, server or worker");
  }
  ReadString(env, {"PS_SCHEDULER_HOST", "DMLC_PS_ROOT_URI"}, &c.scheduler_host);
  ReadInt(env, {"PS_SCHEDULER_PORT", "DMLC_PS_ROOT_PORT"}, 0, 65535, &c.scheduler_port);
  ReadInt(env, {"PS_NUM_SERVERS", "DMLC_NUM_SERVER"}, 1, 1 << 20, &c.num_servers);
  ReadInt(env, {"PS_NUM_WORKERS", "DMLC_NUM_WORKER"}, 1, 1 << 20, &c.num_workers);
  ReadString(env, {"PS_NODE_HOST", "DMLC_NODE_HOST"}, &c.host);
  ReadString(env, {"PS_INTERFACE", "DMLC_INTERFACE"}, &c.interface);
  int k8s = 0;
  ReadInt(env, {"PS_USE_KUBERNETES", "DMLC_USE_KUBERNETES"}, 0, 1, &k8s);
  c.kubernetes = k8s == 1;
  ReadInt(env, {"PS_PORT", "DMLC_PORT"}, 0, 65535, &c.port);
  ReadInt(env, {"PS_VNODES"}, 1, 1 << 16, &c.vnodes);
  ReadInt(env, {"PS_RANK"}, -1, 1 << 20, &c.rank_hint);
  if (c.role == Role::kWorker && !env.count("PS_RANK")) {
    ReadInt(env, {"DMLC_WORKER_ID"}, -1, 1 << 20, &c.rank_hint);
  }
  ReadInt(env, {"PS_HEARTBEAT_INTERVAL_MS"}, 1, 1 << 30, &c.heartbeat_interval_ms);
  ReadInt(env, {"PS_HEARTBEAT_TIMEOUT_MS"}, 1, 1 << 30, &c.heartbeat_timeout_ms);
  ReadInt(env, {"PS_METRICS_PORT"}, 0, 65535, &c.metrics_port);
  ReadString(env, {"PS_METRICS_HOST"}, &c.metrics_host);
  ReadString(env, {"PS_CONSISTENCY"}, &c.consistency);
  ReadGroupMap(env, "PS_GROUP_CONSISTENCY", "POLICY", &c.group_consistency);
  std::map<std::string, std::string> delays;
  ReadGroupMap(env, "PS_GROUP_MAX_DELAY", "TAU", &delays);
  for (const auto& d : delays) {
    char* end = nullptr;
    const long tau = std::strtol(d.second.c_str(), &end, 10);
    if (*end != '\0' || tau < -1 || tau > (1 << 30)) {
      throw Error(ErrorCode::kBadConfig, "PS_GROUP_MAX_DELAY: " + d.first + "=" + d.second +
                                             ": expected an integer >= -1 (-1: unbounded)");
    }
    c.group_max_delay[d.first] = static_cast<int>(tau);
  }
  ReadString(env, {"PS_VAN", "DMLC_PS_VAN_TYPE"}, &c.van);
  ReadInt(env, {"PS_UCX_BUSY_POLL_US"}, 0, 1000000, &c.ucx_busy_poll_us);
  ReadInt(env, {"PS_REPLICAS"}, -1, 64, &c.replicas);
  ReadInt(env, {"PS_REPLICATION_WINDOW_MS"}, 0, 60000, &c.replication_window_ms);
  ReadString(env, {"PS_COMPRESS"}, &c.compress);
  ReadInt(env, {"PS_QUANTIZE"}, 0, 16, &c.quantize_bits);
  ReadInt(env, {"PS_KEY_CACHE_MB"}, 0, 1 << 20, &c.key_cache_mb);
  FilterOptions::Parse(c.compress, c.quantize_bits, c.key_cache_mb, c.max_message_mb);  // throws
  ReadInt(env, {"PS_MAX_DELAY"}, -1, 1 << 30, &c.max_delay);
  ReadFraction(env, "PS_FAULT_DROP", &c.fault_drop);
  ReadFraction(env, "PS_FAULT_DUPLICATE", &c.fault_duplicate);
  ReadFraction(env, "PS_FAULT_DELAY", &c.fault_delay);
  ReadInt(env, {"PS_FAULT_DELAY_MS"}, 0, 600000, &c.fault_delay_ms);
  ReadString(env, {"PS_FAULT_MUTE_SCHEDULER_FILE"}, &c.fault_mute_scheduler_file);
  ReadInt(env, {"PS_RESEND_TIMEOUT_MS"}, 1, 1 << 30, &c.resend_timeout_ms);
  ReadInt64(env, "PS_FIRST_TIMESTAMP", 0, int64_t{1} << 62, &c.first_timestamp);
  ReadInt(env, {"PS_MAX_MESSAGE_MB"}, 1, 1 << 20, &c.max_message_mb);
  ReadInt(env, {"PS_REFILL_PIECE_MB"}, 1, 1 << 20, &c.refill_piece_mb);
  ReadInt(env, {"PS_MALLOC_RETAIN_MB"}, 0, 1 << 20, &c.malloc_retain_mb);
  ReadInt(env, {"PS_SEND_QUEUE"}, 16, 1 << 30, &c.send_queue);
  ReadInt(env, {"PS_MAX_INFLIGHT"}, 1, 1 << 24, &c.max_inflight);
  ReadInt(env, {"PS_TASK_TIMEOUT_MS"}, 0, 1 << 30, &c.task_timeout_ms);
  std::string loss;
  ReadString(env, {"PS_ON_SCHEDULER_LOSS"}, &loss);
  if (loss == "exit") {
    c.exit_on_scheduler_loss = true;
  } else if (!loss.empty() && loss != "throw") {
    throw Error(ErrorCode::kBadConfig,
                "PS_ON_SCHEDULER_LOSS='" + loss + "': expected exit or throw");
  }
  int join = 0;
  ReadInt(env, {"PS_JOIN"}, 0, 1, &join);
  c.join = join == 1;
  std::string groups;
  ReadString(env, {"PS_WORKER_GROUPS"}, &groups);
  if (!groups.empty()) {
    c.worker_groups = ParseGroups(groups);
    int sum = 0;
    for (const auto& g : c.worker_groups) sum += g.second;
    std::string v, n;
    if (!Lookup(env, {"PS_NUM_WORKERS", "DMLC_NUM_WORKER"}, &v, &n)) c.num_workers = sum;
  }
  ReadString(env, {"PS_WORKER_GROUP"}, &c.worker_group);
  if (c.worker_group.empty() && c.role == Role::kWorker && c.rank_hint >= 0 && !c.join) {
    // Launchers that number workers (PS_RANK, DMLC_WORKER_ID, an MPI or Slurm rank) need not
    // name groups: ranks go to the groups in order.
    c.worker_group = GroupOfRank(c.worker_groups, c.rank_hint);
  }

  int seed = 0;
  ReadInt(env, {"PS_SEED"}, 0, 0x7fffffff, &seed);
  c.seed = static_cast<uint64_t>(seed);
  ReadInt(env, {"PS_REGISTER_TIMEOUT_MS"}, 1, 1 << 30, &c.register_timeout_ms);
  ReadInt(env, {"PS_REQUEST_TIMEOUT_MS"}, 1, 1 << 30, &c.request_timeout_ms);
  ReadInt(env, {"PS_BARRIER_TIMEOUT_MS"}, 1, 1 << 30, &c.barrier_timeout_ms);
  ReadString(env, {"PS_SCHEDULER_PORT_FILE"}, &c.scheduler_port_file);
  c.Validate();
  return c;
}

Config Config::FromEnv() {
  ExitOnUncaughtError();
  Env env;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (!eq) continue;
    std::string k(*e, eq - *e);
    if (k.rfind("PS_", 0) == 0 || k.rfind("DMLC_", 0) == 0) env[k] = eq + 1;
  }
  Config c = FromMap(env);
  for (const std::string& u : UnknownVariables(env)) {
    std::fprintf(stderr, "ps: ignoring %s: not a variable ps reads (docs/operations.md)\n",
                 u.c_str());
  }
  return c;
}

void Config::Validate() const {
  if (!inproc && role != Role::kScheduler && scheduler_port <= 0) {
    throw Error(ErrorCode::kBadConfig,
                "PS_SCHEDULER_PORT (or DMLC_PS_ROOT_PORT) must be set to the scheduler's port");
  }
  if (num_servers < 1) throw Error(ErrorCode::kBadConfig, "PS_NUM_SERVERS must be at least 1");
  if (num_workers < 1) throw Error(ErrorCode::kBadConfig, "PS_NUM_WORKERS must be at least 1");
  if (vnodes < 1) throw Error(ErrorCode::kBadConfig, "PS_VNODES must be at least 1");
  // A node that joins a running job takes the ring (and its replicas) from the scheduler:
  // its own PS_NUM_SERVERS counts only what its launch started.
  if (!join && replicas >= num_servers) {
    throw Error(ErrorCode::kBadConfig,
                "PS_REPLICAS=" + std::to_string(replicas) + " needs more than " +
                    std::to_string(replicas) +
                    " servers (PS_NUM_SERVERS=" + std::to_string(num_servers) + ")");
  }
  ParsePolicy(consistency, "PS_CONSISTENCY");  // throws naming the option when malformed
  for (const auto& g : group_consistency) {
    ParsePolicy(g.second, "PS_GROUP_CONSISTENCY");
    if (GroupIndex(g.first) < 0 && !join) {
      throw Error(ErrorCode::kBadConfig, "PS_GROUP_CONSISTENCY names '" + g.first +
                                             "', which is not a group of PS_WORKER_GROUPS");
    }
  }
  for (const auto& g : group_max_delay) {
    if (GroupIndex(g.first) < 0 && !join) {
      throw Error(ErrorCode::kBadConfig, "PS_GROUP_MAX_DELAY names '" + g.first +
                                             "', which is not a group of PS_WORKER_GROUPS");
    }
  }
  if (van != "zmq" && van != "ucx") {
    throw Error(ErrorCode::kBadConfig, "PS_VAN='" + van + "': expected zmq or ucx");
  }
  if (max_delay < -1)
    throw Error(ErrorCode::kBadConfig, "PS_MAX_DELAY must be -1 (unbounded) or >= 0");
  if (fault_drop + fault_duplicate + fault_delay > 1) {
    throw Error(ErrorCode::kBadConfig,
                "PS_FAULT_DROP + PS_FAULT_DUPLICATE + PS_FAULT_DELAY must not exceed 1");
  }
  if (!worker_groups.empty() && !join) {
    int sum = 0;
    for (const auto& g : worker_groups) sum += g.second;
    if (sum != num_workers && !join) {
      throw Error(ErrorCode::kBadConfig,
                  "PS_WORKER_GROUPS has " + std::to_string(sum) +
                      " workers in all but PS_NUM_WORKERS=" + std::to_string(num_workers));
    }
    if (role == Role::kWorker && GroupIndex(worker_group) < 0) {
      std::string names;
      for (const auto& g : worker_groups) names += (names.empty() ? "" : ", ") + g.first;
      throw Error(ErrorCode::kBadConfig, "PS_WORKER_GROUP='" + worker_group +
                                             "': expected one of the groups of " +
                                             "PS_WORKER_GROUPS (" + names + ")");
    }
  } else if (!worker_group.empty() && !join) {
    throw Error(ErrorCode::kBadConfig, "PS_WORKER_GROUP='" + worker_group +
                                           "' needs PS_WORKER_GROUPS (the job's groups and sizes)");
  }
  if (heartbeat_timeout_ms <= heartbeat_interval_ms) {
    throw Error(ErrorCode::kBadConfig,
                "PS_HEARTBEAT_TIMEOUT_MS must exceed PS_HEARTBEAT_INTERVAL_MS");
  }
}

namespace {
// Every variable ps reads (above), and those its launcher and tests set for themselves.
const char* const kKnownVariables[] = {
    "PS_ROLE", "DMLC_ROLE", "PS_SCHEDULER_HOST", "DMLC_PS_ROOT_URI", "PS_SCHEDULER_PORT",
    "DMLC_PS_ROOT_PORT", "PS_NUM_SERVERS", "DMLC_NUM_SERVER", "PS_NUM_WORKERS", "DMLC_NUM_WORKER",
    "PS_NODE_HOST", "DMLC_NODE_HOST", "PS_INTERFACE", "DMLC_INTERFACE", "PS_USE_KUBERNETES",
    "DMLC_USE_KUBERNETES", "PS_PORT", "DMLC_PORT", "PS_VNODES", "PS_RANK", "DMLC_WORKER_ID",
    "PS_HEARTBEAT_INTERVAL_MS", "PS_HEARTBEAT_TIMEOUT_MS", "PS_METRICS_PORT", "PS_METRICS_HOST",
    "PS_CONSISTENCY", "PS_VAN", "PS_UCX_BUSY_POLL_US", "DMLC_PS_VAN_TYPE", "PS_REPLICAS",
    "PS_REPLICATION_WINDOW_MS", "PS_COMPRESS", "PS_QUANTIZE", "PS_KEY_CACHE_MB", "PS_MAX_DELAY",
    "PS_FAULT_DROP", "PS_FAULT_DUPLICATE", "PS_FAULT_DELAY", "PS_FAULT_DELAY_MS",
    "PS_FAULT_MUTE_SCHEDULER_FILE", "PS_RESEND_TIMEOUT_MS", "PS_FIRST_TIMESTAMP",
    "PS_MAX_MESSAGE_MB", "PS_REFILL_PIECE_MB", "PS_MALLOC_RETAIN_MB", "PS_SEND_QUEUE",
    "PS_MAX_INFLIGHT", "PS_TASK_TIMEOUT_MS", "PS_ON_SCHEDULER_LOSS", "PS_JOIN", "PS_SEED",
    "PS_REGISTER_TIMEOUT_MS", "PS_REQUEST_TIMEOUT_MS", "PS_BARRIER_TIMEOUT_MS",
    "PS_SCHEDULER_PORT_FILE", "PS_WORKER_GROUPS", "PS_WORKER_GROUP", "PS_GROUP_CONSISTENCY",
    "PS_GROUP_MAX_DELAY",
    // tracker/ps-launch and ps-task, and the tests
    "PS_GO_TIMEOUT_S", "PS_HUGEPAGES", "PS_LAUNCH_SERVERS", "PS_RANK_BASE", "PS_TASK_GRACE_S",
    "PS_TRACKER", "PS_TRACKER_TIMEOUT_S", "PS_TRACKER_TOKEN", "PS_TEST_NETNS"};

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

std::vector<std::string> Config::UnknownVariables(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  for (const auto& kv : env) {
    const std::string& k = kv.first;
    if (k.rfind("PS_", 0) != 0 && k.rfind("DMLC_", 0) != 0) continue;
    bool known = false;
    std::string closest;
    size_t best = 4;  // suggest only names within 3 edits
    for (const char* name : kKnownVariables) {
      if (k == name) known = true;
      const size_t d = EditDistance(k, name);
      if (d < best) {
        best = d;
        closest = name;
      }
    }
    if (!known) out.push_back(closest.empty() ? k : k + " (" + closest + "?)");
  }
  return out;
}

InprocNetwork::InprocNetwork() : hub_(new Hub()) {}
InprocNetwork::~InprocNetwork() = default;

}  // namespace ps
