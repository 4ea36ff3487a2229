#include "linear/model_file.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace linear {
namespace {

const char* FormatName(Format f) { return f == Format::kLibsvm ? "libsvm" : "criteo"; }

// Headers: "<kHeader><format>: ..." now; kHeaderV1 for files of hashed keys.
const std::string kHeader = "# ps linear model v2 format ";
const std::string kHeaderV1 = "# ps linear model: feature key";

// Parses a whole unsigned decimal or a finite double; false when anything is left over.
bool ParseU64(const std::string& s, uint64_t* v) {
  if (s.empty() || s[0] == '-' || s[0] == '+') return false;
  char* end = nullptr;
  errno = 0;
  *v = std::strtoull(s.c_str(), &end, 10);
  return errno == 0 && *end == '\0';
}
bool ParseDouble(const std::string& s, double* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *v = std::strtod(s.c_str(), &end);
  return errno == 0 && *end == '\0';
}

// Fields separated by single tabs (Criteo's, where a value may hold spaces), or by runs of
// blanks.
std::vector<std::string> SplitTabs(const std::string& line) {
  std::vector<std::string> f;
  size_t at = 0;
  while (true) {
    const size_t next = line.find('\t', at);
    f.push_back(line.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) return f;
    at = next + 1;
  }
}
std::vector<std::string> SplitBlanks(const std::string& line) {
  std::vector<std::string> f;
  std::istringstream in(line);
  for (std::string s; in >> s;) f.push_back(s);
  return f;
}

}  // namespace

void WriteModel(const std::string& path, Format format, const std::string& train,
                const ps::Key* keys, const double* w, size_t n) {
  std::unordered_map<ps::Key, std::string> names;
  if (format == Format::kCriteo) {
    std::vector<ps::Key> wanted;
    for (size_t i = 0; i < n; ++i) {
      if (w[i] != 0) wanted.push_back(keys[i]);
    }
    names = CriteoNames(train, wanted);
  }
  std::ofstream out(path);
  if (!out) throw ps::Error("--model_out=" + path + ": cannot open for writing");
  out << kHeader << FormatName(format)
      << (format == Format::kLibsvm
              ? ": feature id, weight (nonzero weights only)\n"
              : ": column, value, weight (tab-separated; integer columns I1-I13 by bucket #b: "
                "b = v for v <= 2, else 3 + floor(log2 v); nonzero weights only)\n");
  char buf[64];
  for (size_t i = 0; i < n; ++i) {
    if (w[i] == 0) continue;
    std::snprintf(buf, sizeof(buf), "%.17g", w[i]);
    if (format == Format::kLibsvm) {
      out << ps::UnhashKey(keys[i]) << ' ' << buf << '\n';
    } else {
      auto it = names.find(keys[i]);
      if (it != names.end()) {
        out << it->second << '\t' << buf << '\n';
      } else {
        out << "key\t" << keys[i] << '\t' << buf << '\n';
      }
    }
  }
  out.flush();
  if (!out) throw ps::Error("--model_out=" + path + ": write failed");
}

std::unordered_map<ps::Key, double> ReadModel(const std::string& path, Format format) {
  std::ifstream in(path);
  if (!in) throw ps::Error("--model_in=" + path + ": cannot open: " + std::strerror(errno));
  std::unordered_map<ps::Key, double> w;
  bool hashed = false;  // a first-version file: keys as the servers store them
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = path + ":" + std::to_string(n) + ": ";
    if (n == 1) {
      if (line.rfind(kHeaderV1, 0) == 0) {
        hashed = true;
      } else if (line.rfind(kHeader, 0) == 0) {
        const std::string f = line.substr(kHeader.size(), line.find(':') - kHeader.size());
        if (f != FormatName(format)) {
          throw ps::Error(where + "a model of " + f + " data, but --format=" + FormatName(format));
        }
      } else {
        throw ps::Error(where + "not a ps linear model (no '# ps linear model' header)");
      }
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    ps::Key k;
    double v;
    if (hashed || format == Format::kLibsvm) {
      const auto f = SplitBlanks(line);
      uint64_t id;
      if (f.size() != 2 || !ParseU64(f[0], &id) || !ParseDouble(f[1], &v)) {
        throw ps::Error(where +
                        (hashed ? "expected 'key weight'" : "expected 'feature_id weight'"));
      }
      k = hashed ? id : FeatureKey(id);
    } else {
      const auto f = SplitTabs(line);
      uint64_t raw;
      if (f.size() != 3 || !ParseDouble(f[2], &v)) {
        throw ps::Error(where + "expected 'column<TAB>value<TAB>weight'");
      }
      if (f[0] == "key") {
        if (!ParseU64(f[1], &raw)) throw ps::Error(where + "expected a decimal key after 'key'");
        k = raw;
      } else {
        const int c = CriteoColumn(f[0]);
        if (c < 0) throw ps::Error(where + "unknown column '" + f[0] + "' (I1-I13, C1-C26)");
        k = FeatureKey(c, f[1]);
      }
    }
    if (!w.emplace(k, v).second) throw ps::Error(where + "feature given twice");
  }
  return w;
}

}  // namespace linear
