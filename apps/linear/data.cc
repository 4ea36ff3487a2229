#include "linear/data.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <unordered_set>

namespace linear {
namespace {

// Line number (from 1) of byte `offset` of the file: counted only when an error is reported.
uint64_t LineOf(const std::string& path, uint64_t offset) {
  std::ifstream in(path, std::ios::binary);
  uint64_t line = 1, at = 0;
  char buf[1 << 16];
  while (at < offset && in) {
    in.read(buf, static_cast<std::streamsize>(std::min<uint64_t>(sizeof(buf), offset - at)));
    const auto got = static_cast<uint64_t>(in.gcount());
    line += static_cast<uint64_t>(std::count(buf, buf + got, '\n'));
    at += got;
    if (got == 0) break;
  }
  return line;
}

uint64_t Fnv1a(int column, const char* s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ static_cast<uint64_t>(column);
  h *= 0x100000001b3ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(s[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Rows as parsed: labels and, per entry, the raw key and value.
struct Raw {
  std::vector<float> label;
  std::vector<size_t> row{0};
  std::vector<ps::Key> key;
  std::vector<float> val;
  // Criteo, when set: each feature's key, column and text (to name a model's keys).
  std::function<void(ps::Key, int, const std::string&)> on_feature;
};

// Parses one libsvm line; "" or what is wrong.
std::string ParseLibsvm(const char* p, const char* end, Raw* r) {
  char* stop = nullptr;
  errno = 0;
  const double y = std::strtod(p, &stop);
  if (stop == p || errno) return "expected a label at the start of the line";
  if (y != 1 && y != -1 && y != 0) return "label must be -1, 0, 1 or +1";
  p = stop;
  bool first = true;
  unsigned long long prev = 0;
  while (true) {
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    if (p >= end || *p == '#') break;
    if (!std::strncmp(p, "qid:", 4)) {  // ranking ids: not a feature
      while (p < end && *p != ' ' && *p != '\t') ++p;
      continue;
    }
    errno = 0;
    const unsigned long long id = std::strtoull(p, &stop, 10);
    if (stop == p || *p == '-' || errno) return "expected a feature id (a non-negative integer)";
    // As liblinear asks: ids in increasing order, each once (a repeated id would count twice).
    if (!first && id <= prev) {
      return "feature ids must increase along a line: " + std::to_string(id) + " after " +
             std::to_string(prev);
    }
    first = false;
    prev = id;
    p = stop;
    double v = 1;  // "id" alone: a binary feature
    if (p < end && *p == ':') {
      ++p;
      errno = 0;
      v = std::strtod(p, &stop);
      if (stop == p || errno || !std::isfinite(v)) return "expected a finite value after ':'";
      p = stop;
    }
    if (p < end && *p != ' ' && *p != '\t' && *p != '#') return "unexpected character";
    r->key.push_back(FeatureKey(id));
    r->val.push_back(static_cast<float>(v));
  }
  r->label.push_back(y > 0 ? 1.0f : -1.0f);
  r->row.push_back(r->key.size());
  return "";
}

// Criteo: label, 13 integer columns, 26 categorical columns, tab-separated; empty = missing.
std::string ParseCriteo(const char* p, const char* end, Raw* r) {
  std::vector<std::pair<const char*, const char*>> f;
  const char* b = p;
  for (const char* q = p;; ++q) {
    if (q == end || *q == '\t') {
      f.emplace_back(b, q);
      if (q == end) break;
      b = q + 1;
    }
  }
  if (f.size() != 40) {
    return "expected 40 tab-separated fields (label, 13 integers, 26 categories), got " +
           std::to_string(f.size());
  }
  if (f[0].second - f[0].first != 1 || (*f[0].first != '0' && *f[0].first != '1')) {
    return "label must be 0 or 1";
  }
  for (int c = 1; c < 40; ++c) {
    const char* s = f[c].first;
    const size_t n = static_cast<size_t>(f[c].second - s);
    if (n == 0) continue;
    if (c <= 13) {
      char* stop = nullptr;
      errno = 0;
      const long long v = std::strtoll(s, &stop, 10);
      if (stop != f[c].second || errno) {
        return "column " + std::to_string(c + 1) + ": expected an integer";
      }
      // Buckets: small values as they are, larger ones by their magnitude (log2).
      const long long bucket = v <= 2 ? v : 3 + static_cast<long long>(std::log2(v));
      const std::string t = "#" + std::to_string(bucket);
      r->key.push_back(FeatureKey(c, t));
      if (r->on_feature) r->on_feature(r->key.back(), c, t);
    } else {
      r->key.push_back(ps::HashKey(Fnv1a(c, s, n)));  // = FeatureKey(c, text)
      if (r->on_feature) r->on_feature(r->key.back(), c, std::string(s, n));
    }
    r->val.push_back(1.0f);
  }
  r->label.push_back(*f[0].first == '1' ? 1.0f : -1.0f);
  r->row.push_back(r->key.size());
  return "";
}

}  // namespace

void Dataset::Append(const Dataset& o) {
  std::vector<ps::Key> merged;
  merged.reserve(keys.size() + o.keys.size());
  std::set_union(keys.begin(), keys.end(), o.keys.begin(), o.keys.end(),
                 std::back_inserter(merged));
  auto remap = [&merged](const std::vector<ps::Key>& ks) {
    std::vector<uint32_t> m(ks.size());
    size_t at = 0;
    for (size_t i = 0; i < ks.size(); ++i) {
      while (merged[at] != ks[i]) ++at;
      m[i] = static_cast<uint32_t>(at);
    }
    return m;
  };
  const auto mine = remap(keys), theirs = remap(o.keys);
  for (auto& c : col) c = mine[c];
  if (row.empty()) row.push_back(0);
  for (size_t i = 0; i < o.rows(); ++i) {
    for (size_t e = o.row[i]; e < o.row[i + 1]; ++e) {
      col.push_back(theirs[o.col[e]]);
      val.push_back(o.val[e]);
    }
    label.push_back(o.label[i]);
    row.push_back(col.size());
  }
  keys.swap(merged);
}

Format ParseFormat(const std::string& name) {
  if (name == "libsvm") return Format::kLibsvm;
  if (name == "criteo") return Format::kCriteo;
  throw ps::Error("--format=" + name + ": expected libsvm or criteo");
}

void PartRange(uint64_t size, int part, int parts, uint64_t* begin, uint64_t* end) {
  *begin = size * static_cast<uint64_t>(part) / static_cast<uint64_t>(parts);
  *end = size * static_cast<uint64_t>(part + 1) / static_cast<uint64_t>(parts);
}

// HashKey never returns kMaxKey (no key), so every feature has a valid key.
ps::Key FeatureKey(uint64_t id) { return ps::HashKey(id); }

ps::Key FeatureKey(int column, const std::string& text) {
  return ps::HashKey(Fnv1a(column, text.data(), text.size()));
}

bool HasRows(const std::string& path, Format format) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot open: " + std::strerror(errno));
  std::string line;
  while (std::getline(in, line)) {
    size_t i = 0;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    if (i == line.size()) continue;
    if (format == Format::kLibsvm && line[i] == '#') continue;
    return true;
  }
  return false;
}

Dataset ReadPart(const std::string& path, Format format, int part, int parts) {
  if (parts < 1 || part < 0 || part >= parts) throw ps::Error("bad data part");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot open: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  uint64_t b, e;
  PartRange(size, part, parts, &b, &e);
  // The lines that start in [b, e): from the first line start at or after b to the end of
  // the line holding byte e - 1.
  uint64_t start = b;
  if (b > 0) start = b - 1;  // a line starts at b if byte b - 1 ends the previous one
  in.seekg(static_cast<std::streamoff>(start));
  std::string buf;
  std::string line;
  uint64_t at = start;
  if (b > 0) {
    std::getline(in, line);  // the rest of a line that started before b
    at += line.size() + (in.eof() ? 0 : 1);
  }
  Raw raw;
  while (at < e && std::getline(in, line)) {
    const uint64_t line_at = at;
    at += line.size() + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const char* p = line.data();
    const char* end = p + line.size();
    while (p < end && (*p == ' ' || *p == '\t') && format == Format::kLibsvm) ++p;
    if (p == end || (*p == '#' && format == Format::kLibsvm)) continue;  // blank or comment
    const std::string err =
        format == Format::kLibsvm ? ParseLibsvm(p, end, &raw) : ParseCriteo(p, end, &raw);
    if (!err.empty()) {
      throw DataError(path + ":" + std::to_string(LineOf(path, line_at)) + ": " + err);
    }
  }
  Dataset d;
  d.keys = raw.key;
  std::sort(d.keys.begin(), d.keys.end());
  d.keys.erase(std::unique(d.keys.begin(), d.keys.end()), d.keys.end());
  d.col.resize(raw.key.size());
  for (size_t i = 0; i < raw.key.size(); ++i) {
    d.col[i] = static_cast<uint32_t>(std::lower_bound(d.keys.begin(), d.keys.end(), raw.key[i]) -
                                     d.keys.begin());
  }
  d.val = std::move(raw.val);
  d.label = std::move(raw.label);
  d.row = std::move(raw.row);
  return d;
}

std::string CriteoColumnName(int column) {
  return column <= 13 ? "I" + std::to_string(column) : "C" + std::to_string(column - 13);
}

int CriteoColumn(const std::string& name) {
  if (name.size() < 2 || (name[0] != 'I' && name[0] != 'C')) return -1;
  for (size_t i = 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || i > 3) return -1;
  }
  const int n = std::atoi(name.c_str() + 1);
  if (name[0] == 'I') return n >= 1 && n <= 13 ? n : -1;
  return n >= 1 && n <= 26 ? n + 13 : -1;
}

std::unordered_map<ps::Key, std::string> CriteoNames(const std::string& path,
                                                     const std::vector<ps::Key>& wanted) {
  std::unordered_map<ps::Key, std::string> names;
  std::unordered_set<ps::Key> want(wanted.begin(), wanted.end());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot open: " + std::strerror(errno));
  Raw raw;
  raw.on_feature = [&](ps::Key k, int column, const std::string& text) {
    if (want.erase(k)) names.emplace(k, CriteoColumnName(column) + "\t" + text);
  };
  std::string line;
  while (!want.empty() && std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    // The training run read these lines already; one that does not parse names nothing.
    ParseCriteo(line.data(), line.data() + line.size(), &raw);
    raw.key.clear();
    raw.val.clear();
    raw.label.clear();
    raw.row.resize(1);
  }
  return names;
}

}  // namespace linear
