// The roles of ps_countmin and the query client (countmin.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "countmin/countmin.h"
#include "countmin/space_saving.h"

namespace countmin {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::vector<std::string> ReadQueries(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot read (--query)");
  std::vector<std::string> q;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    q.push_back(line);
  }
  return q;
}

// Candidate values: [id, name bytes, name packed 8 bytes to a word].
void PackCandidate(const SpaceSaving::Entry& e, std::vector<int64_t>* words) {
  words->push_back(static_cast<int64_t>(e.id));
  words->push_back(static_cast<int64_t>(e.name.size()));
  for (size_t i = 0; i < e.name.size(); i += 8) {
    uint64_t w = 0;
    for (size_t j = 0; j < 8 && i + j < e.name.size(); ++j) {
      w |= static_cast<uint64_t>(static_cast<unsigned char>(e.name[i + j])) << (8 * j);
    }
    words->push_back(static_cast<int64_t>(w));
  }
}

std::string NameOf(uint64_t id, const std::string& name) {
  return name.empty() ? std::to_string(id) : name;
}

// The k of (name, estimate) with the largest estimates, largest first.
void KeepTop(size_t k, std::vector<std::pair<std::string, int64_t>>* all) {
  std::sort(all->begin(), all->end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (all->size() > k) all->resize(k);
}

// What the end of a run prints: estimates of --query and the heavy hitters.
void Report(const Options& o, const LocalSketch& s,
            const std::vector<std::pair<std::string, int64_t>>& top) {
  if (!o.sketch_out.empty()) WriteSketch(o.sketch_out, s.hash().shape(), o.seed, s.cells());
  if (!o.query.empty()) {
    const auto q = ReadQueries(o.query);
    const auto est = Client::Estimate(s, q, o.format);
    for (size_t i = 0; i < q.size(); ++i) {
      // From 32-bit cells that all reached their cap: a lower bound, not an upper one.
      const bool at_cap = o.counter_bits == 32 && est[i] >= kCap32;
      std::printf("ESTIMATE %s %lld%s\n", q[i].c_str(), static_cast<long long>(est[i]),
                  at_cap ? " saturated" : "");
    }
  }
  for (size_t i = 0; i < top.size(); ++i) {
    std::printf("TOP %zu %s %lld\n", i + 1, top[i].first.c_str(),
                static_cast<long long>(top[i].second));
  }
}

int64_t RowSum(const LocalSketch& s) {
  int64_t n = 0;
  for (uint32_t c = 0; c < s.hash().shape().width; ++c) n += s.cells()[c];
  return n;
}

// Counts a stream into cell deltas and heavy-hitter candidates: the part of a worker that does
// not talk to the servers.
class Counter {
 public:
  explicit Counter(const Options& o)
      : o_(o), hash_(o.shape, o.seed), delta_(o.shape.cells(), 0), hh_(o.hh_capacity) {}
  // Counts one item; true when the batch is full.
  bool Add(uint64_t id, std::string_view name) {
    const uint32_t d = o_.shape.depth;
    for (uint32_t j = 0; j < d; ++j) delta_[hash_.Cell(j, id)]++;
    if (++sample_ == o_.hh_sample) {
      sample_ = 0;
      hh_.Add(id, name);
    }
    return ++in_batch_ >= o_.batch;
  }
  uint64_t in_batch() const { return in_batch_; }
  // Distinct items in the batch Take last took (an estimate).
  double distinct() const { return distinct_; }
  // The changed cells as sorted keys and their deltas; the deltas start again from zero.
  void Take(ps::SArray<ps::Key>* keys, ps::SArray<int64_t>* vals) {
    const uint64_t n = delta_.size();
    keys->clear();
    vals->clear();
    // Distinct items of the batch by linear counting (Whang et al., 1990) on row 0: each item
    // lands in one of its w cells, so with z of them still zero about -w ln(z / w) distinct
    // items came (exact while they are few next to w, saturated when no cell is zero).
    const uint64_t w = o_.shape.width;
    uint64_t zeros = 0;
    for (uint64_t c = 0; c < w; ++c) zeros += delta_[c] == 0;
    distinct_ = zeros == 0 ? static_cast<double>(w) * std::log(static_cast<double>(w))
                           : -static_cast<double>(w) * std::log(static_cast<double>(zeros) / w);
    for (uint64_t i = 0; i < n; ++i) {
      if (delta_[i] != 0) {
        keys->push_back(CellKey(i, n));
        vals->push_back(delta_[i]);
        delta_[i] = 0;
      }
    }
    in_batch_ = 0;
  }
  // The current candidates as sorted keys with their packed values.
  void Candidates(size_t k, ps::SArray<ps::Key>* keys, ps::SArray<int64_t>* vals,
                  ps::SArray<int>* lens) const {
    auto top = hh_.Top(k);
    std::sort(top.begin(), top.end(), [](const SpaceSaving::Entry& a, const SpaceSaving::Entry& b) {
      return ps::HashKey(a.id) < ps::HashKey(b.id);
    });
    std::vector<int64_t> words;
    keys->clear();
    vals->clear();
    lens->clear();
    for (const auto& e : top) {
      const ps::Key k = ps::HashKey(e.id);
      if (k == ps::kMaxKey || (!keys->empty() && keys->back() == k)) continue;
      words.clear();
      PackCandidate(e, &words);
      keys->push_back(k);
      lens->push_back(static_cast<int>(words.size()));
      for (int64_t w : words) vals->push_back(w);
    }
  }

 private:
  const Options& o_;
  HashFamily hash_;
  std::vector<int64_t> delta_;
  SpaceSaving hh_;
  uint32_t sample_ = 0;
  uint64_t in_batch_ = 0;
  double distinct_ = 0;
};

}  // namespace

CellsTable::CellsTable(ps::Node* node, int app_id, int bits) {
  if (bits == 32) {
    w32_.reset(new ps::KVWorker<int32_t>(node, app_id));
  } else {
    w64_.reset(new ps::KVWorker<int64_t>(node, app_id));
  }
}

int64_t CellsTable::PushForTask(int task, int64_t seq, const ps::SArray<ps::Key>& keys,
                                const ps::SArray<int64_t>& deltas, ps::KVWorkerBase::Callback cb) {
  if (w64_) return w64_->PushForTask(task, seq, keys, deltas, {}, std::move(cb));
  ps::SArray<int32_t> narrow(deltas.size());
  for (size_t i = 0; i < deltas.size(); ++i) {
    // --batch < 2^32 (checked at start) bounds a delta.
    narrow[i] = static_cast<int32_t>(static_cast<uint32_t>(deltas[i]));
  }
  return w32_->PushForTask(task, seq, keys, narrow, {}, std::move(cb));
}

void CellsTable::Pull(const ps::SArray<ps::Key>& keys, std::vector<int64_t>* out) {
  if (w64_) {
    ps::SArray<int64_t> vals(keys.size());
    w64_->Wait(w64_->Pull(keys, &vals));
    std::copy(vals.begin(), vals.end(), out->begin());
  } else {
    ps::SArray<int32_t> vals(keys.size());
    w32_->Wait(w32_->Pull(keys, &vals));
    for (size_t i = 0; i < vals.size(); ++i) (*out)[i] = static_cast<uint32_t>(vals[i]);
  }
}

LocalSketch Client::PullSketch() {
  const uint64_t n = shape_.cells();
  ps::SArray<ps::Key> keys(n);
  for (uint64_t i = 0; i < n; ++i) keys[i] = CellKey(i, n);
  LocalSketch s(shape_, seed_);
  cells_.Pull(keys, s.mutable_cells());
  return s;
}

std::vector<int64_t> Client::Estimate(const LocalSketch& s, const std::vector<std::string>& items,
                                      Format format) {
  std::vector<int64_t> out;
  for (const auto& item : items) {
    if (format == Format::kU64 && item.find_first_not_of("0123456789") != std::string::npos) {
      throw std::runtime_error("query '" + item + "' is not a decimal id (--format u64)");
    }
    out.push_back(s.Estimate(IdOf(item, format)));
  }
  return out;
}

std::vector<std::pair<std::string, int64_t>> Client::HeavyHitters(const LocalSketch& s, size_t k) {
  ps::SArray<ps::Key> keys;
  ps::SArray<int64_t> vals;
  ps::SArray<int> lens;
  candidates_.Wait(candidates_.PullRange(ps::Range::All(), &keys, &vals, &lens));
  std::vector<std::pair<std::string, int64_t>> all;
  size_t at = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const size_t n = static_cast<size_t>(lens[i]);
    if (n < 2 || at + n > vals.size()) throw std::runtime_error("malformed candidate entry");
    const uint64_t id = static_cast<uint64_t>(vals[at]);
    const size_t bytes = static_cast<size_t>(vals[at + 1]);
    if ((bytes + 7) / 8 != n - 2) throw std::runtime_error("malformed candidate name");
    std::string name(bytes, '\0');
    for (size_t j = 0; j < bytes; ++j) {
      name[j] = static_cast<char>(static_cast<uint64_t>(vals[at + 2 + j / 8]) >> (8 * (j % 8)));
    }
    all.emplace_back(NameOf(id, name), s.Estimate(id));
    at += n;
  }
  KeepTop(k, &all);
  return all;
}

ps::TableRules TableRules() {
  return ps::TableRules().Add<int32_t>("countmin.sat32", [](const std::vector<double>&) {
    return ps::TableRule<int32_t>{std::make_shared<SaturatingU32Rule>(), {}};
  });
}

Job OpenJob(ps::Node* node, const Options& o, int parts) {
  Job j;
  j.team = apps::OwnTeam(*node);
  auto open = [&](const char* part, ps::DataType dtype, int width, const char* rule) {
    return apps::OpenTable(node, o.tables, part, dtype, width, rule);
  };
  j.cells = o.counter_bits == 32 ? open("cells", ps::DataType::kInt32, 1, "countmin.sat32")
                                 : open("cells", ps::DataType::kInt64, 1, "sum");
  j.candidates = open("candidates", ps::DataType::kInt64, 0, "assign");
  if (o.input == "-") {
    // The scheduler streams the parts into the first group's pool (FeedStdin).
    const auto groups = node->worker_groups();
    if (!groups.empty() && j.team.group != groups[0].first) {
      throw ps::Error("--input - (stdin) is fed to the job's first worker group (" +
                      groups[0].first + "), not to '" + j.team.group + "'");
    }
    return j;
  }
  j.first_task = node->AddTasksOnce(parts, j.team.group);
  return j;
}

void RunServer(ps::Node* node, const Options& o) {
  ps::TableServer tables(node, TableRules());
  node->Barrier(ps::kAllGroups);
  node->Finalize();
  const auto st = node->stats();
  const ps::KVServerBase* cells = tables.Find(o.tables + ".cells");
  const ps::KVServerBase* candidates = tables.Find(o.tables + ".candidates");
  std::printf("SERVER rank %d cells %zu cell_bytes %zu candidates %zu MB received %.2f sent %.2f\n",
              node->rank(), cells ? cells->NumKeys() : 0, cells ? cells->StoreBytes() : 0,
              candidates ? candidates->NumKeys() : 0, st.bytes_received / 1e6, st.bytes_sent / 1e6);
  std::fflush(stdout);
}

int RunWorker(ps::Node* node, const Options& o) {
  const apps::Team& team = o.job.team;
  CellsTable cells(node, o.job.cells, o.counter_bits);
  ps::KVWorker<int64_t> candidates(node, o.job.candidates);
  Counter counter(o);
  std::deque<std::pair<ps::KVWorkerBase*, int64_t>> inflight;
  const auto start = Clock::now();
  auto last = start, last_top = start;
  uint64_t items = 0, batches = 0, pushed_cells = 0, items_at_last = 0;
  double distinct_sum = 0;
  // The longest wait for an acknowledgement (a fail-over shows here), and with --log_acks
  // the wall-clock time each cell push completed (recorded by its callback on the receive
  // thread; bench/countmin_bench.py takes the first one after a kill).
  double max_wait_s = 0;
  std::mutex acks_mu;
  std::vector<double> acks;
  auto record_ack = [&] {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::lock_guard<std::mutex> lk(acks_mu);
    acks.push_back(now);
  };
  auto wait_to = [&](size_t n) {
    while (inflight.size() > n) {
      const auto t = Clock::now();
      inflight.front().first->Wait(inflight.front().second);
      max_wait_s = std::max(max_wait_s, Since(t));
      inflight.pop_front();
    }
  };
  // The part being counted and the number of its next push: a part's pushes are its own
  // request stream on the servers (PushForTask), so a part a dead worker left half pushed is
  // counted again from its start by another worker and nothing lands twice. Batches end at
  // fixed item counts within the part, so push seq of a part holds the same cells whoever
  // counts it.
  int task = -1;
  int64_t seq = 0;
  auto flush = [&] {
    if (counter.in_batch() == 0) return;
    ps::SArray<ps::Key> keys;
    ps::SArray<int64_t> vals;
    counter.Take(&keys, &vals);
    pushed_cells += keys.size();
    distinct_sum += counter.distinct();
    batches++;
    inflight.emplace_back(
        cells.base(),
        cells.PushForTask(task, seq++, keys, vals,
                          o.log_acks ? ps::KVWorkerBase::Callback(record_ack) : nullptr));
    ps::SArray<int> lens;
    counter.Candidates(2 * static_cast<size_t>(o.top_k), &keys, &vals, &lens);
    if (!keys.empty()) inflight.emplace_back(&candidates, candidates.Push(keys, vals, lens));
    wait_to(static_cast<size_t>(2 * o.max_inflight));
    if (o.top_every > 0 && team.rank == 0 && Since(last_top) >= o.top_every) {
      // A query while the stream goes on: each cell as of its server's answer.
      Client client(&cells, &candidates, o.shape, o.seed);
      const LocalSketch now = client.PullSketch();
      std::string line = "LIVE items " + std::to_string(RowSum(now)) + " top";
      for (const auto& t : client.HeavyHitters(now, static_cast<size_t>(o.top_k))) {
        line += " " + t.first + ":" + std::to_string(t.second);
      }
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
      last_top = Clock::now();
    }
    if (!o.quiet && o.progress_s > 0 && Since(last) >= o.progress_s) {
      const auto st = node->stats();
      std::printf(
          "progress worker %d items %llu items/s %.0f distinct/batch %.0f cells/batch %.0f "
          "batches %llu MB_sent %.1f\n",
          team.rank, static_cast<unsigned long long>(items), (items - items_at_last) / Since(last),
          distinct_sum / static_cast<double>(batches),
          static_cast<double>(pushed_cells) / static_cast<double>(batches),
          static_cast<unsigned long long>(batches), st.bytes_sent / 1e6);
      std::fflush(stdout);
      last = Clock::now();
      items_at_last = items;
    }
  };
  // Replays the stream at o.rate items per second (a live stream's pace, for queries during
  // it and for tests that kill a node mid-stream).
  auto pace = [&](uint64_t done) {
    const double ahead = static_cast<double>(done) / o.rate - Since(start);
    if (ahead > 0) std::this_thread::sleep_for(std::chrono::duration<double>(ahead));
  };
  std::string buffer;
  PartItems part;
  int parts = 0;
  const bool stream = o.input == "-";
  for (;;) {
    const int t = stream ? node->NextTask(&buffer) : node->NextTask();
    if (t < 0) break;
    task = t;
    seq = 0;
    if (stream) {
      ItemsOf(buffer, o.format, "stdin part (task " + std::to_string(t) + ")", &part);
    } else {
      ReadPart(o.input, o.format, o.part_bytes, t - o.job.first_task, &buffer, &part);
    }
    ForEachItem(part, o.format, [&](uint64_t id, std::string_view name) {
      ++items;
      if (counter.Add(id, name)) flush();
      if (o.rate > 0 && (items & 4095) == 0) pace(items);
    });
    // Everything counted from the part is acknowledged before the part is closed on the
    // servers (they then keep one word of it) and reported done.
    flush();
    wait_to(0);
    cells.base()->Wait(cells.base()->CloseTask(t));
    node->TaskDone(t);
    parts++;
  }
  const double own_s = Since(start);
  std::printf("WORKER rank %d parts %d items %llu seconds %.3f items/s %.0f max_ack_wait_ms %.1f\n",
              team.rank, parts, static_cast<unsigned long long>(items), own_s,
              items / std::max(own_s, 1e-9), max_wait_s * 1e3);
  if (o.log_acks) {
    std::lock_guard<std::mutex> lk(acks_mu);
    std::string line = "ACKS rank " + std::to_string(team.rank);
    char buf[32];
    for (double t : acks) {
      std::snprintf(buf, sizeof(buf), " %.4f", t);
      line += buf;
    }
    std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);
  node->Barrier(team.group);
  // The lowest live rank of the team reports (worker 0 unless it died).
  const std::vector<int> dead = apps::DeadRanks(*node, team);
  for (int r = 0; r < team.rank; ++r) {
    if (!std::binary_search(dead.begin(), dead.end(), r)) return 0;
  }
  const double secs = Since(start);
  Client client(&cells, &candidates, o.shape, o.seed);
  LocalSketch s = client.PullSketch();
  const int64_t n = RowSum(s);
  const uint64_t saturated = o.counter_bits == 32 ? s.Saturate(kCap32) : 0;
  Report(o, s, client.HeavyHitters(s, static_cast<size_t>(o.top_k)));
  std::printf(
      "RESULT items %lld width %u depth %u seconds %.3f items/s %.0f counter_bits %d "
      "saturated_cells %llu\n",
      static_cast<long long>(n), o.shape.width, o.shape.depth, secs,
      static_cast<double>(n) / std::max(secs, 1e-9), o.counter_bits,
      static_cast<unsigned long long>(saturated));
  std::fflush(stdout);
  return 0;
}

void FeedStdin(ps::Node* node, const Options& o) {
  ChunkReader pipe(0, o.format, o.part_bytes, o.part_s);
  std::string chunk;
  PartItems items;
  const int timeout_ms = node->config().barrier_timeout_ms;
  uint64_t parts = 0, bytes = 0;
  while (pipe.Next(&chunk, &items)) {
    if (chunk.empty()) continue;
    // At most stream_parts parts held (their bytes live here until done): the pipe waits.
    const auto since = Clock::now();
    for (;;) {
      const ps::Node::TaskStats t = node->task_stats();
      if (t.added - t.done < o.stream_parts) break;
      if (Since(since) * 1000 > timeout_ms) {
        throw ps::Error("stdin: no part of the stream was done within " +
                        std::to_string(timeout_ms) + " ms (PS_BARRIER_TIMEOUT_MS)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    node->AddTask(chunk);
    parts++;
    bytes += chunk.size();
  }
  node->CloseTasks();
  std::printf("STREAM parts %llu bytes %llu\n", static_cast<unsigned long long>(parts),
              static_cast<unsigned long long>(bytes));
  std::fflush(stdout);
}

int RunLocal(const Options& o, bool conservative) {
  LocalSketch s(o.shape, o.seed);
  SpaceSaving hh(o.hh_capacity);
  const bool piped = o.input == "-";
  const int parts = piped ? 0 : CountParts(o.input, o.format, o.part_bytes);
  std::string buffer;
  PartItems part;
  uint64_t items = 0;
  uint32_t sample = 0;
  const auto start = Clock::now();
  auto add = [&](uint64_t id, std::string_view name) {
    ++items;
    if (conservative) {
      s.AddConservative(id);
    } else {
      s.Add(id);
    }
    if (++sample == o.hh_sample) {
      sample = 0;
      hh.Add(id, name);
    }
  };
  ChunkReader pipe(0, o.format, o.part_bytes);
  for (int t = 0; piped || t < parts; ++t) {
    if (piped) {
      if (!pipe.Next(&buffer, &part)) break;
    } else {
      ReadPart(o.input, o.format, o.part_bytes, t - o.job.first_task, &buffer, &part);
    }
    ForEachItem(part, o.format, add);
  }
  const double secs = Since(start);
  // The cells the servers would hold with 32-bit counters (saturating sums).
  const uint64_t saturated = o.counter_bits == 32 ? s.Saturate(kCap32) : 0;
  std::vector<std::pair<std::string, int64_t>> top;
  for (const auto& e : hh.Top(hh.size())) top.emplace_back(NameOf(e.id, e.name), s.Estimate(e.id));
  KeepTop(static_cast<size_t>(o.top_k), &top);
  Report(o, s, top);
  std::printf(
      "RESULT local items %llu width %u depth %u seconds %.3f items/s %.0f counter_bits %d "
      "saturated_cells %llu%s\n",
      static_cast<unsigned long long>(items), o.shape.width, o.shape.depth, secs,
      items / std::max(secs, 1e-9), o.counter_bits, static_cast<unsigned long long>(saturated),
      conservative ? " conservative" : "");
  std::fflush(stdout);
  return 0;
}

}  // namespace countmin
