// TableServer: a KVServer for every named table (include/ps/table.h), made as the node learns
// of each table.
#include <glog/logging.h>

#include <cstdlib>
#include <mutex>
#include <thread>

#include "control/node_impl.h"
#include "control/table_registry.h"
#include "ps/kv_server.h"

namespace ps {

template <typename V>
std::shared_ptr<const UpdateRule<V>> MakeRule(const std::string& rule) {
  std::string name;
  std::vector<double> args;
  ParseRule(rule, &name, &args);  // the registry refused malformed numbers
  auto arg = [&](size_t i, double fallback) { return i < args.size() ? args[i] : fallback; };
  if (name == "sum") return std::make_shared<SumRule<V>>();
  if (name == "count") return std::make_shared<CountRule<V>>();
  if (name == "assign") return std::make_shared<AssignRule<V>>();
  if (name == "max") return std::make_shared<MaxRule<V>>();
  if (name == "min") return std::make_shared<MinRule<V>>();
  if (name == "sgd") return std::make_shared<SgdRule<V>>(arg(0, 0.1));
  if (name == "adagrad") return std::make_shared<AdaGradRule<V>>(arg(0, 0.1), arg(1, 1e-8));
  throw Error("no update rule named '" + rule + "'");
}

template std::shared_ptr<const UpdateRule<float>> MakeRule<float>(const std::string&);
template std::shared_ptr<const UpdateRule<double>> MakeRule<double>(const std::string&);
template std::shared_ptr<const UpdateRule<int32_t>> MakeRule<int32_t>(const std::string&);
template std::shared_ptr<const UpdateRule<int64_t>> MakeRule<int64_t>(const std::string&);

void TableRules::Put(const std::string& name, DataType dtype, std::shared_ptr<const void> make) {
  if (!IsAppRule(name)) {
    throw Error("TableRules: rule '" + name + "' needs a '.' in its name (app.rule)");
  }
  if (!rules_.emplace(name, Entry{dtype, std::move(make)}).second) {
    throw Error("TableRules: rule '" + name + "' is added twice");
  }
}

TableRules& TableRules::Add(const TableRules& other) {
  for (const auto& r : other.rules_) Put(r.first, r.second.dtype, r.second.make);
  return *this;
}

std::vector<std::string> TableRules::names() const {
  std::vector<std::string> out;
  for (const auto& r : rules_) out.push_back(r.first);
  return out;
}

struct TableServer::Impl {
  Node* node;
  TableRules rules;
  int listener = 0;
  mutable std::mutex mu;
  // Each server by its own type (KVServerBase's destructor is not public), and as its base.
  std::map<std::string, std::shared_ptr<void>> held;
  std::map<std::string, KVServerBase*> servers;
  // Stops the job when a table names a rule this server does not know: off the thread that
  // told of the table (AbortJob waits for the scheduler's word, which that thread receives).
  std::thread aborter;

  template <typename V>
  KVServer<V>* Make(const TableSpec& t) {
    std::string name;
    std::vector<double> args;
    ParseRule(t.rule, &name, &args);
    if (!IsAppRule(name)) return new KVServer<V>(node, t.app_id, MakeRule<V>(t.rule));
    auto it = rules.rules_.find(name);
    if (it == rules.rules_.end()) {
      std::string known;
      for (const std::string& n : rules.names()) known += (known.empty() ? "" : ", ") + n;
      throw Error("table " + t.name + ": this server program has no rule '" + name + "' (it has " +
                  (known.empty() ? std::string("none") : known) +
                  "): run the servers with a program whose TableServer serves it");
    }
    if (it->second.dtype != DataTypeOf<V>::value) {
      throw Error("table " + t.name + ": rule '" + name + "' is for another value type (dtype " +
                  std::to_string(static_cast<int>(it->second.dtype)) + ", the table's is " +
                  std::to_string(static_cast<int>(t.dtype)) + ")");
    }
    const auto& make = *static_cast<const TableRules::Make<V>*>(it->second.make.get());
    TableRule<V> r = make(args);
    return new KVServer<V>(node, t.app_id, std::move(r.rule), std::move(r.reducers));
  }

  void Serve(const TableSpec& t) {
    std::lock_guard<std::mutex> lk(mu);
    if (servers.count(t.name)) return;
    KVServerBase* base = nullptr;
    std::shared_ptr<void> s;
    auto make = [&](auto* typed) {
      base = typed;
      s.reset(typed);  // deleted as its own type
    };
    try {
      switch (t.dtype) {
        case DataType::kFloat:
          make(Make<float>(t));
          break;
        case DataType::kDouble:
          make(Make<double>(t));
          break;
        case DataType::kInt32:
          make(Make<int32_t>(t));
          break;
        case DataType::kInt64:
          make(Make<int64_t>(t));
          break;
      }
    } catch (const Error& e) {
      LOG(ERROR) << e.what();
      if (!aborter.joinable()) {
        Node* n = node;
        const std::string why = "server rank " + std::to_string(node->rank()) + ": " + e.what();
        aborter = std::thread([n, why] { n->AbortJob(why); });
      }
      return;
    }
    VLOG(1) << "serving table " << t.name << " (application " << t.app_id << ")";
    servers[t.name] = base;
    held[t.name] = std::move(s);
  }
};

TableServer::TableServer(Node* node, TableRules rules) : impl_(new Impl) {
  if (node->role() != Role::kServer) throw Error("TableServer needs a server node");
  impl_->node = node;
  impl_->rules = std::move(rules);
  Impl* impl = impl_.get();
  impl_->listener = node->impl()->AddTableListener([impl](const TableSpec& t) { impl->Serve(t); });
}

TableServer::~TableServer() {
  impl_->node->impl()->RemoveTableListener(impl_->listener);
  if (impl_->aborter.joinable()) impl_->aborter.join();
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->servers.clear();
  impl_->held.clear();
}

KVServerBase* TableServer::Find(const std::string& table) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto it = impl_->servers.find(table);
  return it == impl_->servers.end() ? nullptr : it->second;
}

}  // namespace ps
