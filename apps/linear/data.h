// Training data of the sparse linear app: readers for libsvm/svmlight text and Criteo-style
// TSV, in parts (byte ranges of a file, the shards the scheduler hands out as tasks).
//
// Feature ids are hashed to 64-bit keys, so arbitrary ids and string features need no
// dictionary: an integer id i of a libsvm file becomes ps::HashKey(i) (splitmix64 of the id,
// include/ps/base.h); column c of a Criteo file with value s becomes
// ps::HashKey(FNV-1a-64(c, s)), where integer columns are bucketed by log2 first. Collisions
// of two features are as likely as a collision of 64-bit random numbers.
#ifndef PS_APPS_LINEAR_DATA_H_
#define PS_APPS_LINEAR_DATA_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ps/base.h"

namespace linear {

/// Rows of a sparse matrix with labels in {-1, +1}. Features are indices into `keys` (the
/// sorted unique feature keys of these rows), so a worker pulls and pushes exactly `keys`.
struct Dataset {
  std::vector<float> label;   // -1 or +1
  std::vector<size_t> row;    // row i is [row[i], row[i+1]) of col/val
  std::vector<uint32_t> col;  // index into keys
  std::vector<float> val;     // feature values
  std::vector<ps::Key> keys;  // sorted unique
  size_t rows() const { return label.size(); }
  /// Appends other's rows (re-indexing its features into the union of keys).
  void Append(const Dataset& other);
};

enum class Format { kLibsvm, kCriteo };
/// Bad input: a data file that cannot be read, a malformed line (file:line), no rows. Another
/// worker would meet the same, so the app exits with kDataErrorExit and the launcher stops the
/// job instead of handing the part to another worker.
struct DataError : ps::Error {
  explicit DataError(const std::string& what) : ps::Error(what) {}
};
/// sysexits' EX_DATAERR; tracker/ps-launch treats it as fatal whatever --allow-dead-* says.
constexpr int kDataErrorExit = 65;

/// "libsvm" or "criteo"; throws ps::Error naming the option otherwise.
Format ParseFormat(const std::string& name);

/// Byte range [begin, end) of part `part` of `parts` equal parts of a file of `size` bytes. A
/// part holds the lines that start inside its range, so parts cover every line exactly once.
void PartRange(uint64_t size, int part, int parts, uint64_t* begin, uint64_t* end);

/// u . x over nonzeros [b, f) of col and val, u indexed by col. Added up in four running sums
/// (one sum is a chain of dependent adds, four cycles each, which took the better part of a
/// pass over the data), in an order fixed by the row alone: every run, thread count and split
/// of the rows among workers gives the same bits. Ahead > 0 prefetches u that many nonzeros
/// ahead (col must then hold Ahead more entries past f).
template <size_t Ahead = 0>
inline double SparseDot(const uint32_t* col, const float* val, size_t b, size_t f,
                        const double* u) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t k = b;
  for (; k + 4 <= f; k += 4) {
    if constexpr (Ahead > 0) {
      for (size_t j = 0; j < 4; ++j) __builtin_prefetch(&u[col[k + Ahead + j]]);
    }
    s0 += u[col[k]] * val[k];
    s1 += u[col[k + 1]] * val[k + 1];
    s2 += u[col[k + 2]] * val[k + 2];
    s3 += u[col[k + 3]] * val[k + 3];
  }
  for (; k < f; ++k) s0 += u[col[k]] * val[k];
  return (s0 + s1) + (s2 + s3);
}

/// w . x_i for row i, with w given per key index (w[j] is the weight of keys[j]).
inline double Margin(const Dataset& d, size_t i, const double* w) {
  return SparseDot(d.col.data(), d.val.data(), d.row[i], d.row[i + 1], w);
}

/// Reads part `part` of `parts` of path. Throws ps::Error with "path:line: what" on malformed
/// input (line numbers count from the start of the file).
Dataset ReadPart(const std::string& path, Format format, int part, int parts);
/// Whether the file holds at least one data line (not blank, not a comment); throws ps::Error
/// when it cannot be opened.
bool HasRows(const std::string& path, Format format);
/// Reads a whole file.
inline Dataset ReadFile(const std::string& path, Format format) {
  return ReadPart(path, format, 0, 1);
}

/// The key of libsvm feature id `id` and of Criteo column `column` with text value `text`.
/// A libsvm id is ps::UnhashKey of its key.
ps::Key FeatureKey(uint64_t id);
ps::Key FeatureKey(int column, const std::string& text);

/// Criteo's names of columns 1-39: I1-I13 (integers), C1-C26 (categories); CriteoColumn is
/// the inverse (-1 for no such column). An integer column's feature text is its bucket, "#b".
std::string CriteoColumnName(int column);
int CriteoColumn(const std::string& name);
/// The features of `wanted` keys as "column<TAB>text", found by reading the Criteo file at
/// path (the training data: a key's feature text is not kept, and the hash has no inverse).
/// Stops reading once every key is named; a key not found is missing from the result.
std::unordered_map<ps::Key, std::string> CriteoNames(const std::string& path,
                                                     const std::vector<ps::Key>& wanted);

}  // namespace linear

#endif  // PS_APPS_LINEAR_DATA_H_
