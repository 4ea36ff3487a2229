// ps_countmin: a CountMin sketch on the parameter server (docs/apps/countmin.md).
//   tracker/ps-launch -s 1 -w 2 -- build/apps/countmin/ps_countmin --input FILE
//   build/apps/countmin/ps_countmin --local --input FILE      (one process: the reference)
//   build/apps/countmin/ps_countmin --zipf_out FILE           (a seeded Zipf stream of ids)
#include <gflags/gflags.h>

#include <iostream>

#include "app_help.h"
#include "countmin/countmin.h"

DEFINE_string(input, "",
              "the stream: a file of items (see --format); \"-\" reads stdin (in a job, the "
              "scheduler's: it hands the workers the stream's parts as tasks that carry them)");
DEFINE_string(format, "tokens",
              "tokens (whitespace-separated), lines (one item per line) or u64 (little-endian "
              "64-bit ids)");
DEFINE_double(epsilon, 0.0001,
              "error bound: estimates exceed counts by more than epsilon * N "
              "with probability at most delta (width = ceil(e / epsilon))");
DEFINE_double(delta, 0.01, "failure probability (depth = ceil(ln(1 / delta)))");
DEFINE_uint32(width, 0, "width w (0: from --epsilon)");
DEFINE_uint32(depth, 0, "depth d (0: from --delta)");
DEFINE_uint64(seed, 1, "seed of the hash family (and of --zipf_out)");
DEFINE_uint64(batch, 1 << 20, "items a worker counts before it pushes the changed cells");
DEFINE_int32(max_inflight, 4, "batches a worker has in flight");
DEFINE_double(part_mb, 8, "MB of the input per part (a scheduler task)");
DEFINE_double(part_s, 1,
              "--input - in a job: a part also ends when the stream has been quiet this long "
              "(a slow live stream is counted as it comes; 0: only at --part_mb)");
DEFINE_int32(stream_parts, 8,
             "--input - in a job: parts of the stream the scheduler holds until they are done "
             "(its memory: this times --part_mb); the pipe waits beyond");
DEFINE_string(query, "", "items to estimate at the end, one per line (ESTIMATE lines)");
DEFINE_string(sketch_out, "", "write the final cells here (identical for identical streams)");
DEFINE_string(tables, "countmin",
              "prefix of the run's table names on the servers (PREFIX.cells, PREFIX.candidates): "
              "runs that share servers need prefixes of their own");
DEFINE_int32(top_k, 100, "heavy hitters printed at the end (TOP lines)");
DEFINE_uint64(hh_capacity, 4096, "SpaceSaving entries per worker for heavy-hitter candidates");
DEFINE_uint32(hh_sample, 4, "every this many items feed the SpaceSaving summary");
DEFINE_double(progress_s, 1.0, "seconds between progress lines (0: none)");
DEFINE_bool(quiet, false, "no progress lines");
DEFINE_double(top_every, 0,
              "worker 0 prints the --top_k heavy hitters so far every this many seconds while "
              "the stream goes on (LIVE lines; 0: only at the end)");
DEFINE_double(rate, 0,
              "replay the stream at this many items per second per worker (0: as fast as it "
              "goes)");
DEFINE_bool(log_acks, false,
            "print, at the end, the wall-clock time each push was found acknowledged (ACKS "
            "lines; bench/countmin_bench.py measures fail-over with them)");
DEFINE_int32(counter_bits, 64,
             "bits of a cell's value on the servers: 64, or 32 (a cell saturates at 2^32 - 1)");
DEFINE_bool(local, false, "count the stream in this process alone (no servers)");
DEFINE_bool(conservative, false,
            "--local only: conservative update (order-dependent, so not for the distributed "
            "sketch: docs/apps/countmin.md)");
DEFINE_string(zipf_out, "", "write a Zipf stream of u64 ids here and exit");
DEFINE_uint64(zipf_items, 100000000, "--zipf_out: items");
DEFINE_uint64(zipf_distinct, 10000000, "--zipf_out: distinct ids (ranks 1..n)");
DEFINE_double(zipf_exponent, 1.1, "--zipf_out: exponent s (P(k) ~ k^-s)");

namespace {

countmin::Options FromFlags() {
  countmin::Options o;
  o.input = FLAGS_input;
  o.format = countmin::ParseFormat(FLAGS_format);
  o.shape = countmin::Shape::FromError(FLAGS_epsilon, FLAGS_delta);
  if (FLAGS_width > 0) o.shape.width = FLAGS_width;
  if (FLAGS_depth > 0) o.shape.depth = FLAGS_depth;
  if (o.shape.cells() > (1ull << 32)) throw std::runtime_error("--width * --depth above 2^32");
  o.seed = FLAGS_seed;
  if (FLAGS_batch == 0) throw std::runtime_error("--batch must be positive");
  o.batch = FLAGS_batch;
  if (FLAGS_max_inflight < 1) throw std::runtime_error("--max_inflight must be >= 1");
  o.max_inflight = FLAGS_max_inflight;
  if (!(FLAGS_part_mb > 0)) throw std::runtime_error("--part_mb must be positive");
  o.part_bytes = static_cast<uint64_t>(FLAGS_part_mb * (1 << 20));
  if (FLAGS_part_s < 0) throw std::runtime_error("--part_s must be >= 0");
  o.part_s = FLAGS_part_s;
  if (FLAGS_stream_parts < 1) throw std::runtime_error("--stream_parts must be >= 1");
  o.stream_parts = FLAGS_stream_parts;
  if (o.part_bytes == 0) throw std::runtime_error("--part_mb must be positive");
  o.query = FLAGS_query;
  o.tables = FLAGS_tables;
  o.sketch_out = FLAGS_sketch_out;
  if (FLAGS_top_k < 0) throw std::runtime_error("--top_k must be >= 0");
  o.top_k = FLAGS_top_k;
  if (FLAGS_hh_capacity == 0) throw std::runtime_error("--hh_capacity must be positive");
  o.hh_capacity = FLAGS_hh_capacity;
  if (FLAGS_hh_sample == 0) throw std::runtime_error("--hh_sample must be positive");
  o.hh_sample = FLAGS_hh_sample;
  o.progress_s = FLAGS_progress_s;
  o.quiet = FLAGS_quiet;
  o.log_acks = FLAGS_log_acks;
  if (FLAGS_top_every < 0) throw std::runtime_error("--top_every must be >= 0");
  o.top_every = FLAGS_top_every;
  if (FLAGS_rate < 0) throw std::runtime_error("--rate must be >= 0");
  o.rate = FLAGS_rate;
  if (FLAGS_counter_bits != 32 && FLAGS_counter_bits != 64) {
    throw std::runtime_error("--counter_bits must be 32 or 64");
  }
  o.counter_bits = FLAGS_counter_bits;
  // A push carries a batch's delta per cell, at most --batch: it must fit a 32-bit cell.
  if (o.counter_bits == 32 && o.batch > static_cast<uint64_t>(countmin::kCap32)) {
    throw std::runtime_error("--batch must be below 2^32 with --counter_bits 32");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("a CountMin sketch on the parameter server");
  apps::HandleHelp(argc, argv, "apps/countmin/");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  try {
    if (!FLAGS_zipf_out.empty()) {
      countmin::WriteZipf(FLAGS_zipf_out, FLAGS_zipf_items, FLAGS_zipf_distinct,
                          FLAGS_zipf_exponent, FLAGS_seed);
      return 0;
    }
    const countmin::Options o = FromFlags();
    if (o.input.empty()) throw std::runtime_error("--input is required");
    if (FLAGS_local) return countmin::RunLocal(o, FLAGS_conservative);
    const bool stream = o.input == "-";
    if (stream && o.part_bytes > (32u << 20)) {
      throw std::runtime_error(
          "--part_mb is at most 32 with --input - in a job (a part travels "
          "as a task's data)");
    }
    if (FLAGS_conservative) {
      throw std::runtime_error(
          "--conservative needs --local: a conservative update reads the cells it raises, so "
          "its result depends on the order of the inserts, which workers do not share");
    }
    // Checked before any process starts waiting on the others.
    const int parts = stream ? 0 : countmin::CountParts(o.input, o.format, o.part_bytes);
    ps::Node node(ps::Config::FromEnv());
    node.Start();
    int rc = 0;
    switch (node.role()) {
      case ps::Role::kScheduler:
        // The workers make the tables and add their tasks (OpenJob), so that the scheduler's
        // program may be another (ps_server, servers shared by apps). Stdin is the
        // scheduler's: it adds the parts as they come, into a pool open until the stream ends
        // (opened before the start barrier, so no worker finds it empty and closed).
        if (stream) node.OpenTasks();
        node.Barrier(ps::kAllGroups);
        if (stream) countmin::FeedStdin(&node, o);
        node.Finalize();
        break;
      case ps::Role::kServer:
        countmin::RunServer(&node, o);
        break;
      case ps::Role::kWorker: {
        countmin::Options run = o;
        run.job = countmin::OpenJob(&node, run, parts);
        node.Barrier(ps::kAllGroups);
        rc = countmin::RunWorker(&node, run);
        node.Finalize();
        break;
      }
    }
    return rc;
  } catch (const std::exception& e) {
    std::cerr << "ps_countmin: " << e.what() << std::endl;
    return 1;
  }
}
