#include "linear/data.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <type_traits>
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

// A number at p (up to end) in strtod's syntax without its leading whitespace and hex forms;
// nullptr when there is none. std::from_chars, which neither allocates nor looks at the locale,
// reads it several times faster than strtod.
template <typename T>
const char* Number(const char* p, const char* end, T* out) {
  const char* q = p < end && *p == '+' ? p + 1 : p;  // from_chars takes no '+'
  if (q < end && *q == '-' && std::is_unsigned<T>::value) return nullptr;
  const auto r = std::from_chars(q, end, *out);
  if (r.ec != std::errc() || r.ptr == q) return nullptr;
  return r.ptr;
}

// A feature id: up to 18 digits read here (no overflow), longer ones by from_chars, which
// stops where this loop does on anything else ('.', 'e', 'x': not part of an integer).
const char* Id(const char* p, const char* end, unsigned long long* out) {
  const char* q = p < end && *p == '+' ? p + 1 : p;
  unsigned long long v = 0;
  const char* d = q;
  while (d < end && d - q < 18 && static_cast<unsigned char>(*d - '0') < 10) {
    v = 10 * v + static_cast<unsigned>(*d - '0');
    ++d;
  }
  if (d == q) return nullptr;
  if (d < end && static_cast<unsigned char>(*d - '0') < 10) return Number(p, end, out);
  *out = v;
  return d;
}

// A value: plain decimals with at most 15 significant digits ("1", "0.25", "-3.5") are read
// here as m / 10^k, both exact in a double, so the quotient is correctly rounded (Clinger's
// fast path): the same double as from_chars gives. Anything else goes to from_chars.
const char* Value(const char* p, const char* end, double* out) {
  static constexpr double kPow10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
  const char* q = p;
  bool neg = false;
  if (q < end && (*q == '+' || *q == '-')) neg = *q++ == '-';
  uint64_t m = 0;
  int digits = 0, frac = 0;
  const char* d = q;
  for (; d < end && static_cast<unsigned char>(*d - '0') < 10; ++d, ++digits) {
    m = 10 * m + static_cast<unsigned>(*d - '0');
  }
  const bool whole = d > q;
  if (d < end && *d == '.') {
    const char* f = ++d;
    for (; d < end && static_cast<unsigned char>(*d - '0') < 10; ++d, ++digits) {
      m = 10 * m + static_cast<unsigned>(*d - '0');
    }
    frac = static_cast<int>(d - f);
    if (!whole && frac == 0) return nullptr;  // "." alone
  } else if (!whole) {
    return Number(p, end, out);  // "inf", "nan" and the like: from_chars decides
  }
  // (from_chars reads no hex here: "0x1" stops at the 'x' either way.)
  if (digits > 15 || (d < end && (*d == 'e' || *d == 'E'))) return Number(p, end, out);
  const double v = static_cast<double>(m) / kPow10[frac];
  *out = neg ? -v : v;
  return d;
}

// (key, index in keys) sorted by key. Keys are hashes, spread evenly: one counting pass on
// their top bits leaves buckets of a few keys each, which a sort finishes (a plain sort of the
// pairs took a tenth of a read).
std::vector<std::pair<ps::Key, uint32_t>> SortedWithIds(const std::vector<ps::Key>& keys) {
  int bits = 1;
  while (bits < 24 && (size_t{1} << bits) < keys.size()) ++bits;
  const int shift = 64 - bits;
  std::vector<uint32_t> start((size_t{1} << bits) + 1, 0);
  for (ps::Key k : keys) ++start[(k >> shift) + 1];
  for (size_t b = 1; b < start.size(); ++b) start[b] += start[b - 1];
  std::vector<std::pair<ps::Key, uint32_t>> out(keys.size());
  std::vector<uint32_t> at(start.begin(), start.end() - 1);
  for (uint32_t i = 0; i < keys.size(); ++i) out[at[keys[i] >> shift]++] = {keys[i], i};
  for (size_t b = 0; b + 1 < start.size(); ++b) {
    if (start[b + 1] - start[b] > 1) std::sort(out.begin() + start[b], out.begin() + start[b + 1]);
  }
  return out;
}

// Parses one libsvm line; "" or what is wrong.
std::string ParseLibsvm(const char* p, const char* end, Raw* r) {
  const char* stop = nullptr;
  double y = 0;
  stop = Value(p, end, &y);
  if (!stop) return "expected a label at the start of the line";
  if (y != 1 && y != -1 && y != 0) return "label must be -1, 0, 1 or +1";
  p = stop;
  bool first = true;
  unsigned long long prev = 0;
  while (true) {
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    if (p >= end || *p == '#') break;
    if (*p == 'q' && end - p >= 4 && !std::strncmp(p, "qid:", 4)) {  // ranking ids: not a feature
      while (p < end && *p != ' ' && *p != '\t') ++p;
      continue;
    }
    unsigned long long id = 0;
    stop = Id(p, end, &id);
    if (!stop) return "expected a feature id (a non-negative integer)";
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
      stop = Value(p, end, &v);
      if (!stop || !std::isfinite(v)) return "expected a finite value after ':'";
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
  // the line holding byte e - 1. Found first, then read with one call and parsed in place
  // (not a line at a time through a std::string, which copied every byte twice).
  const uint64_t start = b > 0 ? b - 1 : 0;  // a line starts at b if byte b - 1 ends the last
  uint64_t stop = e;
  if (e > start) {        // on to the newline that ends the line holding byte e - 1 (or the end)
    uint64_t at = e - 1;  // the file offset of chunk[0]
    in.seekg(static_cast<std::streamoff>(at));
    char chunk[4096];
    for (;;) {
      in.read(chunk, sizeof(chunk));
      const auto got = static_cast<size_t>(in.gcount());
      const char* nl = static_cast<const char*>(std::memchr(chunk, '\n', got));
      if (nl) {
        stop = at + static_cast<uint64_t>(nl - chunk) + 1;
        break;
      }
      at += got;
      stop = at;
      if (got < sizeof(chunk)) break;  // the end of the file
    }
    in.clear();
  }
  const size_t n = stop - start;
  std::unique_ptr<char[]> bytes(new char[n]);  // not zeroed first: read over at once
  in.seekg(static_cast<std::streamoff>(start));
  in.read(bytes.get(), static_cast<std::streamsize>(n));
  if (static_cast<uint64_t>(in.gcount()) != n) {
    throw DataError(path + ": read error: " + std::strerror(errno));
  }
  const char* const base = bytes.get();
  const char* p = base;
  const char* const end = base + n;
  if (b > 0) {  // the rest of a line that started before b
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    p = nl ? nl + 1 : end;
  }
  Raw raw;
  // About one nonzero per 7 bytes of libsvm text ("1234:1 "): room up front, no regrowth.
  raw.key.reserve(static_cast<size_t>(end - p) / 7 + 16);
  raw.val.reserve(static_cast<size_t>(end - p) / 7 + 16);
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const char* line_end = nl ? nl : end;
    const uint64_t line_at = start + static_cast<uint64_t>(p - base);
    const char* q = p;
    const char* le = line_end;
    p = nl ? nl + 1 : end;
    if (le > q && le[-1] == '\r') --le;
    while (q < le && (*q == ' ' || *q == '\t') && format == Format::kLibsvm) ++q;
    if (q == le || (*q == '#' && format == Format::kLibsvm)) continue;  // blank or comment
    const std::string err =
        format == Format::kLibsvm ? ParseLibsvm(q, le, &raw) : ParseCriteo(q, le, &raw);
    if (!err.empty()) {
      throw DataError(path + ":" + std::to_string(LineOf(path, line_at)) + ": " + err);
    }
  }
  bytes.reset();
  // Features in order of first appearance, then ranked by key: a lookup in a flat table per
  // nonzero (keys are hashes already: their low bits place them) instead of a binary search
  // over every key.
  Dataset d;
  std::vector<ps::Key> seen;
  constexpr uint32_t kFree = UINT32_MAX;
  // Sized for about one distinct feature per 8 nonzeros (grown when more).
  size_t mask = 1023;
  while (mask + 1 < raw.key.size() / 4) mask = 2 * mask + 1;
  std::vector<ps::Key> slot_key(mask + 1);
  std::vector<uint32_t> slot_id(mask + 1, kFree);
  auto grow = [&] {
    const size_t cap = 2 * (mask + 1);
    slot_key.assign(cap, 0);
    slot_id.assign(cap, kFree);
    mask = cap - 1;
    for (uint32_t id = 0; id < seen.size(); ++id) {
      size_t h = seen[id] & mask;
      while (slot_id[h] != kFree) h = (h + 1) & mask;
      slot_key[h] = seen[id];
      slot_id[h] = id;
    }
  };
  d.col.resize(raw.key.size());
  for (size_t i = 0; i < raw.key.size(); ++i) {
    const ps::Key k = raw.key[i];
    size_t h = k & mask;
    while (slot_id[h] != kFree && slot_key[h] != k) h = (h + 1) & mask;
    if (slot_id[h] == kFree) {
      slot_key[h] = k;
      slot_id[h] = static_cast<uint32_t>(seen.size());
      seen.push_back(k);
      if (2 * seen.size() > mask + 1) {  // at most half full: probes stay short
        d.col[i] = slot_id[h];
        grow();
        continue;
      }
    }
    d.col[i] = slot_id[h];
  }
  const std::vector<std::pair<ps::Key, uint32_t>> order = SortedWithIds(seen);
  std::vector<uint32_t> rank(seen.size());
  d.keys.resize(seen.size());
  for (uint32_t i = 0; i < order.size(); ++i) {
    rank[order[i].second] = i;
    d.keys[i] = order[i].first;
  }
  for (auto& c : d.col) c = rank[c];
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
