// TableServer: a KVServer for every named table (include/ps/table.h), made as the node learns
// of each table.
#include <glog/logging.h>

#include <cstdlib>
#include <mutex>

#include "control/node_impl.h"
#include "ps/kv_server.h"

namespace ps {

template <typename V>
std::shared_ptr<const UpdateRule<V>> MakeRule(const std::string& rule) {
  const size_t colon = rule.find(':');
  const std::string name = rule.substr(0, colon);
  auto arg = [&](int i, double fallback) {
    size_t at = colon;
    for (int k = 0; k < i && at != std::string::npos; ++k) at = rule.find(':', at + 1);
    return at == std::string::npos ? fallback : std::strtod(rule.c_str() + at + 1, nullptr);
  };
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

struct TableServer::Impl {
  Node* node;
  int listener = 0;
  mutable std::mutex mu;
  // Each server by its own type (KVServerBase's destructor is not public), and as its base.
  std::map<std::string, std::shared_ptr<void>> held;
  std::map<std::string, KVServerBase*> servers;

  void Serve(const TableSpec& t) {
    std::lock_guard<std::mutex> lk(mu);
    if (servers.count(t.name)) return;
    KVServerBase* base = nullptr;
    std::shared_ptr<void> s;
    auto make = [&](auto* typed) {
      base = typed;
      s.reset(typed);  // deleted as its own type
    };
    switch (t.dtype) {
      case DataType::kFloat:
        make(new KVServer<float>(node, t.app_id, MakeRule<float>(t.rule)));
        break;
      case DataType::kDouble:
        make(new KVServer<double>(node, t.app_id, MakeRule<double>(t.rule)));
        break;
      case DataType::kInt32:
        make(new KVServer<int32_t>(node, t.app_id, MakeRule<int32_t>(t.rule)));
        break;
      case DataType::kInt64:
        make(new KVServer<int64_t>(node, t.app_id, MakeRule<int64_t>(t.rule)));
        break;
    }
    VLOG(1) << "serving table " << t.name << " (application " << t.app_id << ")";
    servers[t.name] = base;
    held[t.name] = std::move(s);
  }
};

TableServer::TableServer(Node* node) : impl_(new Impl) {
  if (node->role() != Role::kServer) throw Error("TableServer needs a server node");
  impl_->node = node;
  Impl* impl = impl_.get();
  impl_->listener = node->impl()->AddTableListener([impl](const TableSpec& t) { impl->Serve(t); });
}

TableServer::~TableServer() {
  impl_->node->impl()->RemoveTableListener(impl_->listener);
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
