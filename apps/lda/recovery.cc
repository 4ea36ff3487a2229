#include "lda/recovery.h"

#include <algorithm>

namespace lda {
namespace {

constexpr int kControlWidth = 4;

}  // namespace

Recovery::Recovery(ps::Node* node, const Options& o)
    : node_(node), o_(o), control_(node, o.job.control), topics_(node, o.job.topics) {}

JobState Recovery::ReadJob() {
  ps::SArray<int64_t> v(kControlWidth);
  control_.Wait(control_.Pull(ps::SArray<ps::Key>{0}, &v));
  return {v[0], v[1], v[2], v[3]};
}

std::vector<MemberState> Recovery::ReadMembers() {
  const int W = o_.job.team.size;
  ps::SArray<ps::Key> keys;
  for (int r = 0; r < W; ++r) keys.push_back(static_cast<ps::Key>(1 + r));
  ps::SArray<int64_t> v(keys.size() * kControlWidth);
  control_.Wait(control_.Pull(keys, &v));
  std::vector<MemberState> out(W);
  for (int r = 0; r < W; ++r) out[r] = {v[r * kControlWidth], v[r * kControlWidth + 1]};
  return out;
}

void Recovery::SetJob(const JobState& s) {
  ps::SArray<int64_t> d{s.pause - job_.pause, s.step - job_.step, s.go - job_.go,
                        s.terminate - job_.terminate};
  control_.Wait(control_.Push(ps::SArray<ps::Key>{0}, d));
  job_ = s;
}

void Recovery::SetMember(const MemberState& s) {
  ps::SArray<int64_t> d{s.acked - me_.acked, s.finished - me_.finished, 0, 0};
  control_.Wait(control_.Push(ps::SArray<ps::Key>{static_cast<ps::Key>(1 + o_.job.team.rank)}, d));
  me_ = s;
}

void Recovery::SaveTopicsAsync(const Shard& s) {
  if (saving_ >= 0) topics_.Wait(saving_);
  // Keys must ascend; DocKey scrambles the ids (documents spread over the servers).
  const Corpus& d = s.docs();
  std::vector<std::pair<ps::Key, size_t>> order;
  for (size_t i = 0; i < d.docs(); ++i) order.emplace_back(DocKey(s.doc_ids()[i]), i);
  std::sort(order.begin(), order.end());
  save_keys_ = ps::SArray<ps::Key>();
  save_vals_ = ps::SArray<int32_t>();
  save_lens_ = ps::SArray<int>();
  for (const auto& k : order) {
    if (d.length(k.second) == 0) continue;
    save_keys_.push_back(k.first);
    save_lens_.push_back(static_cast<int>(d.length(k.second)));
    for (uint64_t i = d.offsets[k.second]; i < d.offsets[k.second + 1]; ++i) {
      save_vals_.push_back(static_cast<int32_t>(s.z()[i]));
    }
  }
  saving_ = save_keys_.empty() ? -1 : topics_.Push(save_keys_, save_vals_, save_lens_);
}

void Recovery::SaveTopics(const Shard& s) {
  SaveTopicsAsync(s);
  if (saving_ >= 0) topics_.Wait(saving_);
  saving_ = -1;
}

std::vector<uint32_t> Recovery::LoadTopics(const Corpus& docs, const std::vector<uint64_t>& ids) {
  if (docs.docs() != ids.size()) throw ps::Error("LoadTopics: one document per id");
  std::vector<std::pair<ps::Key, size_t>> order;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (docs.length(i)) order.emplace_back(DocKey(ids[i]), i);
  }
  std::sort(order.begin(), order.end());
  ps::SArray<ps::Key> keys;
  for (const auto& k : order) keys.push_back(k.first);
  ps::SArray<int32_t> vals;
  ps::SArray<int> lens;
  if (!keys.empty()) topics_.Wait(topics_.Pull(keys, &vals, &lens));
  // Initial topics of every document, then the saved ones over them.
  Shard fresh(o_.hyper, docs, ids);
  fresh.RandomTopics(o_.seed);
  std::vector<uint32_t> z = fresh.z();
  size_t at = 0;
  for (size_t j = 0; j < order.size(); ++j) {
    const size_t i = order[j].second;
    const size_t n = static_cast<size_t>(lens[j]);
    if (n == 0) {
      continue;  // never saved
    }
    if (n != docs.length(i)) {
      throw ps::Error("saved topics of document " + std::to_string(ids[i]) + " hold " +
                      std::to_string(n) + " entries for " + std::to_string(docs.length(i)) +
                      " tokens");
    }
    const uint64_t off = fresh.docs().offsets[i];
    for (size_t k = 0; k < n; ++k) {
      const int32_t t = vals[at + k];
      if (t < 0 || static_cast<uint32_t>(t) >= o_.hyper.topics) {
        throw ps::Error("saved topic " + std::to_string(t) + " of document " +
                        std::to_string(ids[i]) + " is not below K");
      }
      z[off + k] = static_cast<uint32_t>(t);
    }
    at += n;
  }
  return z;
}

std::vector<int> Recovery::DeadRanks() const { return apps::DeadRanks(*node_, o_.job.team); }

void AddCounts(const Corpus& all, const std::vector<uint64_t>& docs, const uint32_t* z, Model* m) {
  std::vector<uint64_t> cells;
  size_t i = 0;
  for (uint64_t d : docs) {
    for (uint64_t k = all.offsets[d]; k < all.offsets[d + 1]; ++k, ++i) {
      cells.push_back(uint64_t{all.words[k]} << 32 | z[i]);
    }
  }
  std::sort(cells.begin(), cells.end());
  for (size_t a = 0; a < cells.size();) {
    size_t b = a;
    while (b < cells.size() && cells[b] == cells[a]) ++b;
    const uint32_t w = static_cast<uint32_t>(cells[a] >> 32), t = static_cast<uint32_t>(cells[a]);
    auto& row = m->rows[w];
    auto it =
        std::lower_bound(row.begin(), row.end(), std::make_pair(t, int64_t{0}),
                         [](const std::pair<uint32_t, int64_t>& x,
                            const std::pair<uint32_t, int64_t>& y) { return x.first < y.first; });
    if (it != row.end() && it->first == t) {
      it->second += static_cast<int64_t>(b - a);
    } else {
      row.insert(it, {t, static_cast<int64_t>(b - a)});
    }
    m->totals[t] += static_cast<int64_t>(b - a);
    a = b;
  }
}

Shard ShardOf(const Hyper& h, const Corpus& all, const std::vector<uint64_t>& ids,
              const std::vector<uint32_t>& z) {
  Corpus docs;
  for (uint64_t d : ids) docs.Add(&all.words[all.offsets[d]], all.length(d));
  Shard s(h, std::move(docs), ids);
  s.z() = z;
  return s;
}

int64_t CatchUpStep(const std::string& policy, int64_t step) {
  std::vector<std::string> part;
  size_t at = 0;
  for (;;) {
    const size_t c = policy.find(':', at);
    part.push_back(policy.substr(at, c == std::string::npos ? std::string::npos : c - at));
    if (c == std::string::npos) break;
    at = c + 1;
  }
  int64_t slack = 0;
  if (part[0] == "asp") return 0;
  if (part[0] == "ssp" && part.size() > 1) {
    slack = std::stoll(part[1]);
  } else if (part[0] != "bsp" && part.size() > 2) {
    slack = std::stoll(part[2]);  // psp:B:S, pssp:B:S, backup:B:S
  }
  return std::max<int64_t>(0, step - slack);
}

std::vector<uint64_t> PartDocs(uint64_t docs, int part, int parts) {
  const uint64_t b = docs * static_cast<uint64_t>(part) / static_cast<uint64_t>(parts);
  const uint64_t e = docs * static_cast<uint64_t>(part + 1) / static_cast<uint64_t>(parts);
  std::vector<uint64_t> out;
  for (uint64_t d = b; d < e; ++d) out.push_back(d);
  return out;
}

}  // namespace lda
