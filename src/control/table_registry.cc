#include "control/table_registry.h"

#include <cctype>
#include <cstdlib>

namespace ps {
bool ParseRule(const std::string& rule, std::string* name, std::vector<double>* args) {
  size_t at = rule.find(':');
  *name = rule.substr(0, at);
  while (at != std::string::npos) {
    const size_t next = rule.find(':', at + 1);
    const std::string num = rule.substr(at + 1, next == std::string::npos ? next : next - at - 1);
    char* end = nullptr;
    const double x = std::strtod(num.c_str(), &end);
    if (num.empty() || *end != '\0' || !(x > 0)) return false;
    args->push_back(x);
    at = next;
  }
  return true;
}

namespace {

std::string CheckFilters(const TableSpec& s) {
  if (!s.compress.empty() && s.compress != "off" && s.compress != "auto" && s.compress != "delta" &&
      s.compress != "zero" && s.compress != "snappy") {
    return "table " + s.name + ": compress '" + s.compress +
           "': expected off, auto, delta, zero or snappy";
  }
  if (s.quantize_bits != -1 && s.quantize_bits != 0 && s.quantize_bits != 8 &&
      s.quantize_bits != 16) {
    return "table " + s.name + ": quantize_bits must be -1, 0, 8 or 16";
  }
  return "";
}

}  // namespace

std::string CheckTableSpec(const TableSpec& s) {
  bool ok = !s.name.empty() && s.name.size() <= 64;
  for (char c : s.name) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
  }
  if (!ok) {
    return "table name '" + s.name + "': expected 1-64 letters, digits, '_', '-' or '.'";
  }
  const int dt = static_cast<int>(s.dtype);
  if (dt < 0 || dt > 3) return "table " + s.name + ": dtype " + std::to_string(dt) + " is unknown";
  if (s.width < 0) return "table " + s.name + ": width must be >= 0 (0: variable length)";
  std::string name;
  std::vector<double> args;
  const bool nums = ParseRule(s.rule, &name, &args);
  bool app_name = IsAppRule(name) && name.front() != '.' && name.back() != '.';
  for (char c : name) {
    app_name = app_name && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.');
  }
  if (IsAppRule(name)) {
    if (!nums || !app_name) {
      return "table " + s.name + ": rule '" + s.rule +
             "': an application's rule is NAME.NAME[:N...] (letters, digits, '_'; positive "
             "numbers)";
    }
    return CheckFilters(s);
  }
  const bool plain =
      name == "sum" || name == "count" || name == "assign" || name == "max" || name == "min";
  if (!nums || (plain && !args.empty()) || (name == "sgd" && args.size() != 1) ||
      (name == "adagrad" && (args.empty() || args.size() > 2)) ||
      (!plain && name != "sgd" && name != "adagrad")) {
    return "table " + s.name + ": rule '" + s.rule +
           "': expected sum, count, assign, max, min, sgd:LR or adagrad:LR[:EPS] (positive "
           "numbers), or an application's NAME.NAME[:N...] (TableRules)";
  }
  return CheckFilters(s);
}

std::string TableSpecDiff(const TableSpec& a, const TableSpec& b) {
  auto num = [](double x) { return std::to_string(x); };
  if (a.dtype != b.dtype) {
    return "dtype: " + std::to_string(static_cast<int>(a.dtype)) + " vs " +
           std::to_string(static_cast<int>(b.dtype));
  }
  if (a.width != b.width) return "width: " + num(a.width) + " vs " + num(b.width);
  if (a.rule != b.rule) return "rule: " + a.rule + " vs " + b.rule;
  if (a.compress != b.compress) return "compress: " + a.compress + " vs " + b.compress;
  if (a.quantize_bits != b.quantize_bits) {
    return "quantize_bits: " + num(a.quantize_bits) + " vs " + num(b.quantize_bits);
  }
  if (a.significant != b.significant) {
    return "significant: " + num(a.significant) + " vs " + num(b.significant);
  }
  return "";
}

std::string TableRegistry::Create(TableSpec* spec) {
  const std::string bad = CheckTableSpec(*spec);
  if (!bad.empty()) return bad;
  for (const TableSpec& t : tables_) {
    if (t.name != spec->name) continue;
    const std::string diff = TableSpecDiff(t, *spec);
    if (!diff.empty()) return "table " + spec->name + " exists with another spec (" + diff + ")";
    spec->app_id = t.app_id;
    return "";
  }
  spec->app_id = kTableAppBase + static_cast<int>(tables_.size());
  tables_.push_back(*spec);
  return "";
}

}  // namespace ps
