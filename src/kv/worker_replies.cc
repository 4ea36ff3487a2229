// KVWorker, replies: copying the parts of a pull into the caller's array as they arrive, and
// assembling a request's answer once every server replied (values by key, range pulls stitched
// in key order, reductions added up).
#include <cstring>
#include <vector>

#include "kv/worker_impl.h"

namespace ps {

void KVWorkerBase::Impl::CopyPart(Pending* p, size_t k, const Message& r) {
  const auto& req = p->req;
  const size_t row = req.pull_width * esize, total = req.keys.size() * row;
  if (p->out.size() != total) {
    p->out = req.out_view.size() == total ? req.out_view : SArray<char>::Uninitialized(total);
  }
  const RequestPart& part = p->parts[k];
  size_t want = part.value_part ? part.val_count * esize : part.num_keys * row;
  if (r.data.empty() || r.data[0].size() != want) {
    p->copy_error = "value size";
    return;
  }
  if (part.value_part) {
    std::memcpy(p->out.data() + part.runs[0].first * row + part.val_offset * esize,
                r.data[0].data(), want);
    return;
  }
  size_t at = 0;
  for (auto run : part.runs) {
    size_t bytes = (run.second - run.first) * row;
    std::memcpy(p->out.data() + run.first * row, r.data[0].data() + at, bytes);
    at += bytes;
  }
}

void KVWorkerBase::Impl::Assemble(Pending* p) {
  auto& req = p->req;
  auto bad = [&](const std::string& what) { p->error = "malformed reply: " + what; };
  if (req.op == detail::KVRequest::kRangePull && req.reducer) {
    // Each server's doubles over the ranges it masters: their sum.
    SArray<double> sum;
    for (auto& r : p->replies) {
      if (r.data.size() != 1 || r.data[0].empty() || r.data[0].size() % sizeof(double)) {
        return bad("reduction reply frames");
      }
      const SArray<double> d(r.data[0]);
      if (sum.empty()) sum.resize(d.size(), 0.0);
      if (d.size() != sum.size()) return bad("reduction widths differ between servers");
      for (size_t i = 0; i < d.size(); ++i) sum[i] += d[i];
    }
    if (req.set_vals) req.set_vals(SArray<char>(sum));
    return;
  }
  if (req.op == detail::KVRequest::kRangePull) {
    // Each server answered its ranges in order, with the number of keys per range; walk the
    // segments in key order, taking each one's keys from its server's reply.
    const size_t nparts = p->replies.size();
    std::vector<size_t> kcur(nparts, 0), vcur(nparts, 0), rcur(nparts, 0);
    for (auto& r : p->replies) {
      if (r.data.size() != 4 || r.data[0].size() % sizeof(Key) ||
          r.data[2].size() != r.data[0].size() / sizeof(Key) * sizeof(int) ||
          r.data[3].size() % sizeof(uint64_t)) {
        return bad("range pull reply frames");
      }
    }
    SArray<Key> keys;
    SArray<int> lens;
    SArray<char> vals;
    for (size_t k = 0; k < p->segs.size(); ++k) {
      const size_t g = p->seg_part[k];
      const auto& r = p->replies[g];
      SArray<Key> rk(r.data[0]);
      SArray<int> rl(r.data[2]);
      SArray<uint64_t> counts(r.data[3]);
      if (rcur[g] >= counts.size()) return bad("range counts");
      const size_t count = counts[rcur[g]++];
      if (count > rk.size() - kcur[g]) return bad("range counts");
      size_t bytes = 0;
      for (size_t i = kcur[g]; i < kcur[g] + count; ++i) {
        if (rl[i] < 0) return bad("negative length");
        bytes += static_cast<size_t>(rl[i]) * esize;
      }
      if (bytes > r.data[1].size() - vcur[g]) return bad("values shorter than lens");
      keys.append(rk.Segment(kcur[g], kcur[g] + count));
      lens.append(rl.Segment(kcur[g], kcur[g] + count));
      vals.append(r.data[1].Segment(vcur[g], vcur[g] + bytes));
      kcur[g] += count;
      vcur[g] += bytes;
    }
    if (req.out_keys) *req.out_keys = keys;
    if (req.out_lens) *req.out_lens = lens;
    if (req.set_vals) req.set_vals(vals);
    return;
  }
  const size_t n = req.keys.size();
  int width = req.pull_width;
  if (width > 0 && p->prefix.empty()) {
    const size_t row = width * esize, total = n * row;
    // One reply covering every key in order: hand its buffer over without copying.
    if (p->replies.size() == 1 && !p->parts[0].value_part && req.out_view.size() != total &&
        p->replies[0].data.size() >= 1 && p->replies[0].data[0].size() == total) {
      req.set_vals(p->replies[0].data[0]);
      return;
    }
    // Several parts were copied into p->out as they arrived (see Process); one part is
    // copied here.
    if (!p->streams()) {
      for (size_t k = 0; k < p->parts.size(); ++k) CopyPart(p, k, p->replies[k]);
    }
    if (!p->copy_error.empty()) return bad(p->copy_error);
    if (p->out.data() != req.out_view.data()) req.set_vals(p->out);
    return;
  }
  // Lengths come from the servers (variable-length values, or a width nobody told us).
  std::vector<int> lens(n, 0);
  std::vector<const char*> src(n, nullptr);
  for (size_t k = 0; k < p->parts.size(); ++k) {
    const RequestPart& part = p->parts[k];
    const auto& r = p->replies[k];
    if (r.data.size() != 2 || r.data[1].size() != part.num_keys * sizeof(int)) {
      return bad("lens frame");
    }
    const int* rl = reinterpret_cast<const int*>(r.data[1].data());
    size_t j = 0, at = 0;
    for (auto run : part.runs) {
      for (size_t i = run.first; i < run.second; ++i, ++j) {
        if (rl[j] < 0) return bad("negative length");
        lens[i] = rl[j];
        src[i] = r.data[0].data() + at;
        at += static_cast<size_t>(rl[j]) * esize;
        if (at > r.data[0].size()) return bad("values shorter than lens");
      }
    }
  }
  int w = 0;
  if (!req.want_lens) {
    for (int l : lens) {
      if (l && w && l != w) {
        p->error = "keys hold different numbers of values; pull with lens";
        p->error_code = ErrorCode::kInvalidArgument;
        return;
      }
      if (l) w = l;
    }
    if (w == 0) w = 1;  // nothing stored: one zero per key
  }
  size_t total = 0;
  for (int l : lens) total += req.want_lens ? l : w;
  auto out = SArray<char>::Uninitialized(total * esize);
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    size_t bytes = static_cast<size_t>(req.want_lens ? lens[i] : w) * esize;
    if (lens[i]) {
      std::memcpy(out.data() + at, src[i], bytes);
    } else {
      std::memset(out.data() + at, 0, bytes);
    }
    at += bytes;
  }
  if (req.out_lens) *req.out_lens = SArray<int>(lens);
  req.set_vals(out);
}

}  // namespace ps
