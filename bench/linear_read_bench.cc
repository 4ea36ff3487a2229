// How fast apps/linear reads its training data: ReadPart over whole files and in parts, as
// JSON lines (MB/s of the file, rows, nonzeros). The reader is on every job's critical path:
// each worker reads its parts before its first step.
//
//   build/bench/linear_read_bench data/spam/train.libsvm [more files] [--parts 2] [--reps 3]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "linear/data.h"

int main(int argc, char** argv) {
  std::vector<std::string> files;
  int parts = 1, reps = 3;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--parts") && i + 1 < argc) {
      parts = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      files.push_back(argv[i]);
    }
  }
  if (files.empty() || parts < 1 || reps < 1) {
    std::fprintf(stderr, "usage: linear_read_bench FILE... [--parts N] [--reps N]\n");
    return 2;
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary | std::ios::ate);
    const double mb = static_cast<double>(in.tellg()) / 1e6;
    for (int r = 0; r < reps; ++r) {
      size_t rows = 0, nnz = 0, keys = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (int p = 0; p < parts; ++p) {
        const linear::Dataset d = linear::ReadPart(f, linear::Format::kLibsvm, p, parts);
        rows += d.rows();
        nnz += d.col.size();
        keys += d.keys.size();
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf(
          "{\"bench\": \"linear_read\", \"file\": \"%s\", \"parts\": %d, \"rep\": %d, \"seconds\": "
          "%.4f, \"mb_per_s\": %.1f, \"rows\": %zu, \"nnz\": %zu, \"keys\": %zu}\n",
          f.c_str(), parts, r, s, mb / s, rows, nnz, keys);
      std::fflush(stdout);
    }
  }
  return 0;
}
