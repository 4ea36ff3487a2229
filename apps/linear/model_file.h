// The model file of the sparse linear app: its nonzero weights by the features of the data
// (libsvm ids, Criteo columns and values), written by worker 0 and read by --predict.
//
//   # ps linear model v2 format libsvm: feature id, weight (nonzero weights only)
//   17 0.25
//
//   # ps linear model v2 format criteo: column, value, weight (tab-separated; ...)
//   C3<TAB>68fd1e64<TAB>-0.5
//   I2<TAB>#5<TAB>0.125
//
// The servers store weights under hashed keys (data.h); libsvm ids come back by inverting the
// hash, Criteo features by reading the training file again. Files of the first version (hashed
// keys, "# ps linear model: feature key, weight") are still read.
#ifndef PS_APPS_LINEAR_MODEL_FILE_H_
#define PS_APPS_LINEAR_MODEL_FILE_H_

#include <string>
#include <unordered_map>

#include "linear/data.h"

namespace linear {

/// Writes the n weights w of keys (nonzero ones only, 17 significant digits) to path, named
/// as features of `format`; `train` is the Criteo training file the names are found in. A
/// Criteo key not found there is written as "key<TAB><decimal key><TAB>weight". Throws
/// ps::Error naming --model_out when the file cannot be written.
void WriteModel(const std::string& path, Format format, const std::string& train,
                const ps::Key* keys, const double* w, size_t n);

/// The weights of a model file by key. Throws ps::Error with "path:line: what" on a malformed
/// line, and naming --format when the file was written for another format.
std::unordered_map<ps::Key, double> ReadModel(const std::string& path, Format format);

}  // namespace linear

#endif  // PS_APPS_LINEAR_MODEL_FILE_H_
