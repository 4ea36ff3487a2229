// Node::Impl, named tables (include/ps/table.h): the scheduler's registry gives each name an
// application id and tells every node; a node keeps the list and tells its listeners (a
// TableServer on a server) of each table it had not seen.
#include <glog/logging.h>

#include <chrono>

#include "control/node_impl.h"

namespace ps {
namespace {

void FillTable(const TableSpec& t, pb::TableEntry* e) {
  e->set_name(t.name);
  e->set_dtype(static_cast<int>(t.dtype));
  e->set_width(t.width);
  e->set_rule(t.rule);
  e->set_compress(t.compress);
  e->set_quantize_bits(t.quantize_bits);
  e->set_significant(t.significant);
  e->set_app(t.app_id);
}

TableSpec TableOf(const pb::TableEntry& e) {
  TableSpec t;
  t.name = e.name();
  t.dtype = static_cast<DataType>(e.dtype());
  t.width = e.width();
  t.rule = e.rule();
  t.compress = e.compress();
  t.quantize_bits = e.quantize_bits();
  t.significant = e.significant();
  t.app_id = e.app();
  return t;
}

}  // namespace

TableSpec Node::CreateTable(const TableSpec& spec) { return impl_->CreateTable(spec); }
TableSpec Node::Table(const std::string& name) const { return impl_->Table(name); }
std::vector<TableSpec> Node::Tables() const {
  std::lock_guard<std::mutex> lk(impl_->mu_);
  return impl_->tables_;
}

void Node::Impl::TablesFrom(const pb::Control& c, std::vector<TableSpec>* out) {
  for (const auto& e : c.tables()) out->push_back(TableOf(e));
}

void Node::Impl::FillTables(pb::Control* c) const {
  for (const TableSpec& t : tables_) FillTable(t, c->add_tables());
}

TableSpec Node::Impl::Table(const std::string& name) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string names;
  for (const TableSpec& t : tables_) {
    if (t.name == name) return t;
    names += (names.empty() ? "" : ", ") + t.name;
  }
  throw Error("no table named '" + name + "' (" +
              (names.empty() ? std::string("none yet") : "tables: " + names) +
              "; Node::CreateTable makes one)");
}

TableSpec Node::Impl::CreateTable(TableSpec spec) {
  const std::string bad = CheckTableSpec(spec);
  if (!bad.empty()) throw Error("CreateTable: " + bad);
  pb::Control c;
  c.set_cmd(pb::Control::CREATE_TABLE);
  FillTable(spec, c.add_tables());
  const uint64_t request = NewRequest("CreateTable");
  c.set_request(request);
  if (cfg.role == Role::kScheduler) {
    OnCreateTable(0, c);
  } else {
    SendControl(0, c);
  }
  const std::string why = AwaitAnswer(&table_answers_, request, "CreateTable");
  if (!why.empty()) throw Error("CreateTable: " + why);
  std::lock_guard<std::mutex> lk(mu_);
  for (const TableSpec& t : tables_) {
    if (t.name == spec.name) return t;
  }
  throw Error("CreateTable: table " + spec.name + " missing from the scheduler's answer");
}

void Node::Impl::OnCreateTable(int from, const pb::Control& c) {
  if (c.tables_size() != 1) return;
  TableSpec spec = TableOf(c.tables(0));
  pb::Control answer;
  answer.set_cmd(pb::Control::TABLES);
  std::vector<int> tell;
  std::string why;
  bool created = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const size_t before = table_registry_.tables().size();
    why = table_registry_.Create(&spec);
    created = table_registry_.tables().size() > before;
    if (created) {  // the others learn of a new table; a creator of a known one only answers
      for (const auto& n : nodes_) {
        if (n.id != 0 && n.id != from && !sched_->membership().IsDead(n.id)) tell.push_back(n.id);
      }
    }
    for (const TableSpec& t : table_registry_.tables()) FillTable(t, answer.add_tables());
  }
  if (created) {
    LOG(INFO) << "table " << spec.name << " is application " << spec.app_id << " (" << spec.rule
              << ", width " << spec.width << ")";
  }
  // Everyone learns the list (the creator too, with its answer). The scheduler's own copy goes
  // through the same path.
  for (int to : tell) SendControl(to, answer);
  answer.set_request(c.request());
  answer.set_error(why);
  if (from == 0) {
    AdoptTables(answer);
  } else {
    SendControl(from, answer);
    pb::Control mine = answer;
    mine.set_request(0);
    AdoptTables(mine);
  }
}

void Node::Impl::AdoptTables(const pb::Control& c) {
  std::vector<TableSpec> fresh;
  // Held while listeners run: a listener removed is never called afterwards.
  std::lock_guard<std::mutex> calls(table_listen_mu_);
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& e : c.tables()) {
      TableSpec t = TableOf(e);
      bool known = false;
      for (const TableSpec& k : tables_) known |= k.name == t.name;
      if (known) continue;
      tables_.push_back(t);
      fresh.push_back(t);
    }
    if (c.request() != 0) {
      table_answers_[c.request()] = c.error();
      cv_.notify_all();
    }
  }
  for (const TableSpec& t : fresh) {
    for (const auto& l : table_listeners_) l.second(t);
  }
}

int Node::Impl::AddTableListener(std::function<void(const TableSpec&)> f) {
  std::lock_guard<std::mutex> calls(table_listen_mu_);
  std::vector<TableSpec> now;
  {
    std::lock_guard<std::mutex> lk(mu_);
    now = tables_;
  }
  const int id = ++table_listener_ids_;
  table_listeners_[id] = f;
  for (const TableSpec& t : now) f(t);
  return id;
}

void Node::Impl::RemoveTableListener(int id) {
  std::lock_guard<std::mutex> calls(table_listen_mu_);
  table_listeners_.erase(id);
}

}  // namespace ps
