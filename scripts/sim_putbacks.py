#!/usr/bin/env python3
"""Puts protocol bugs back one at a time and lets the whole-cluster simulation hunt for them
(issue 21: "the hunter finds real bugs"). For each bug: the fix is taken out of a scratch copy
of the source (a textual patch that must match exactly once), ps_sim and libps are built there
and copied to a directory of their own (ps_sim loads libps.so from its build directory, so a
hunt must not share one), the file is restored, and `ps_sim --cluster --seed FIRST --seeds N`
runs with the bug's options until the first seed that breaks an invariant (`ps_sim --fuzz`
where the options begin with --fuzz: each seed draws its faults). One JSON line per
bug: the first failing seed, the number of runs it took and the invariant. With --check, each
bug's regression seed (the one ClusterSimTest replays) is also run on the build with the fix,
which must hold it.

    python3 scripts/sim_putbacks.py [--work /tmp/ps-putbacks] [--only epoch,r27] [--seeds 1500]
                                    [--extra "--resend timer"]

--extra adds ps_sim options to every bug's hunt and check (to see how a change to the
simulation moves the seeds before making it the default). The hunts run ps_sim's default
resend rule (mixed: the fixed rule or KVWorker's timer, drawn per run) unless a bug's options
or --extra name one; the regression seeds are run with `--resend fixed`, as ClusterSimTest
runs them.

The first build of the scratch copy takes as long as a build of the project; later ones only
rebuild the file patched. Run from the repository's root.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EVERYTHING = ("--servers 10 --workers 8 --sched-pause-every-s 0.7 --sched-pause-max-s 4 "
              "--sched-cut-every-s 1 --worker-cut-every-s 0.5 --max-worker-kills 4 "
              "--kill-worker-every-s 3 --partition-every-s 2")

# name, file, the fix as it is, the bug put back, hunt options, first seed, regression seed
BUGS = [
    ("joiner-death-stall", "src/control/ring_core.cc",
     "  if (next_ring_ && (member || next_ring_->HasServer(id))) Prepare(now_ms, &d);",
     "  if (next_ring_ && member) Prepare(now_ms, &d);", "", 1, None),
    ("epoch-issued-twice", "src/control/ring_core.cc",
     "  epochs_issued_ =\n"
     "      std::max({epochs_issued_, ring_->epoch(), next_ring_ ? next_ring_->epoch() : 0}) + 1;",
     "  epochs_issued_ = ring_->epoch() + 1;", "", 1, None),
    ("ack-before-tail", "src/replication/chain_replicator.cc",
     "bool ChainReplicator::HoldReply(int worker, int64_t ts, Message* reply) {\n  auto it",
     "bool ChainReplicator::HoldReply(int worker, int64_t ts, Message* reply) {\n"
     "  if (worker >= 0) return false;\n  auto it", "", 1, None),
    ("copies-out-of-order", "src/replication/chain_order.cc",
     "  const auto verdict = seq_.Check(Entries(msg), Words(msg), held);",
     "  auto verdict = seq_.Check(Entries(msg), Words(msg), held);\n"
     "  if (verdict == SeqMap::Verdict::kGap) verdict = SeqMap::Verdict::kApply;",
     "--rule assign", 1, None),
    ("duplicate-applied-twice", "src/kv/server_core.cc",
     "  const SArray<Key> keys(m.data[0]);\n  if (m.meta.val_total() > 0) {",
     "  const SArray<Key> keys(m.data[0]);\n  if (keys.size() > 0) return true;\n"
     "  if (m.meta.val_total() > 0) {", "", 1, None),
    ("clock-early-worker", "src/kv/step_gate.cc",
     "  return clock ? std::min(s + 1, OldestOpenPush()) : SafeStep();\n}\n\n"
     "bool StepGate::HoldClock(int64_t ts, int64_t s) {\n"
     "  if (held_.empty() && OldestOpenPush() > s) return false;",
     "  return clock ? s + 1 : SafeStep();\n}\n\n"
     "bool StepGate::HoldClock(int64_t ts, int64_t s) {\n"
     "  if (ts >= 0 || s >= 0) return false;", "", 1, None),
    ("clock-early-server", "src/kv/server_core.cc",
     "  const int64_t done = msg.meta.has_done_step() ? msg.meta.done_step() : step;",
     "  const int64_t done = step;", "", 1, None),
    # The fixes that ClusterSimTest's regression seeds stand for.
    ("keep-stale-copy", "src/kv/server_refill.cc",
     "  const RangeSet adopt = Intersect(plan.orphans, stale_);", "  const RangeSet adopt;", "",
     1, 52),
    ("drop-gone", "src/replication/chain_replicator.cc",
     "void ChainReplicator::DropGone() {\n  auto ring",
     "void ChainReplicator::DropGone() {\n  if (self_ >= 0) return;\n  auto ring", "", 1, 104),
    ("abandon-rerouted", "src/replication/chain_replicator.cc",
     "    ReplaceHop(id, Touches(msg, others), std::move(pieces));",
     "    ReplaceHop(id, false && Touches(msg, others), std::move(pieces));", "", 1, 616),
    ("refill-after-handover", "src/kv/server_refill.cc",
     "  if (chain_.Awaiting(rs)) return \"a hand-over of the ranges has not come yet\";\n", "",
     "--join-every-s 1 --crash-every-s 1.5 --leave-every-s 2", 1, 320),
    ("replayed-copies", "src/replication/chain_replicator.cc",
     "  ApplyOrphans(*ring, jumped_);\n  Reroute(*ring, alive);", "  Reroute(*ring, alive);",
     "--crash-every-s 1 --join-every-s 2 --pause-every-s 1.5", 1500, 2004),
    ("steps-to-joiners", "src/sim/cluster_workers.cc",
     "  if (!Gained(before, live) || w.steps.ReportStep() < 0 || o.step_every_us == 0) return;",
     "  return;",
     "--policy bsp --join-every-s 1", 1000, 1010),
    ("mark-at-jump", "src/replication/chain_replicator.cc", "  Announce(jumped, ring);\n}", "}",
     "--kill-worker-every-s 2 --max-worker-kills 4", 1, 473),
    ("refetch-mark", "src/replication/chain_replicator.h",
     "    Announce(rs, nullptr, /*refetch=*/true);", "    Announce(rs, nullptr, /*refetch=*/false);",
     EVERYTHING + " --rule assign", 2000, 2198),
    ("refuse-copy", "src/replication/chain_order.cc", "        if (!replay) Refuse(msg, mine);",
     "", EVERYTHING + " --rule assign", 2000, 2832),
    ("resend-bound", "src/replication/chain_replicator.cc",
     "  return std::min(static_cast<int64_t>(base) << shift, kHopMaxUs);",
     "  return static_cast<int64_t>(base) << shift;",
     "--partition-every-s 0.5 --partition-max-s 3", 1, 1107),
    ("mark-after-handover", "src/replication/chain_order.cc",
     "  Announce(Normalize(std::move(took)));\n  return true;", "  return true;",
     EVERYTHING + " --rule assign", 5000, 5081),
    ("wait-for-old-master", "src/replication/chain_order.cc",
     "      RangeSet wait = after.HasServer(a.first) ? Intersect(a.second, still) : RangeSet{};",
     "      RangeSet wait;", "--worker-cut-every-s 0.5", 1, 27),
    ("fetched-moves-no-points", "src/replication/chain_order.cc",
     "  RangeSet held = host_->Held(), advance = held;",
     "  RangeSet held = host_->Held(), advance = {Range::All()};", EVERYTHING, 4000, 4410),
    ("settle-waits-for-handover", "src/sim/cluster_sim.cc",
     "        v.core->CopiesInFlight() > 0 || v.core->AwaitingHandover()) {",
     "        v.core->CopiesInFlight() > 0) {", EVERYTHING, 1000, 1055),
    ("released-read-moved", "src/kv/server_core.cc",
     "    if (RedirectIfMoved(r.req, &reply)) continue;\n", "",
     "--timeout-s 5 --heartbeat-s 0.5 --pause-max-s 4.5 --worker-cut-every-s 0.5 "
     "--join-every-s 1", 1, 7),
    ("report-step", "src/kv/step_gate.h", "  int64_t ReportStep() const { return step_ - 1; }",
     "  int64_t ReportStep() const { return step_; }", "--policy bsp --join-every-s 1", 1, 163),
    ("held-served-in-ring-change", "src/kv/server_core.cc",
     "  if (taking_ring_) return;  // RingChanged serves them once this core follows the ring\n",
     "", "--policy bsp --join-every-s 1", 1, 912),
    ("replayed-in-jumped-ranges", "src/replication/chain_replicator.cc",
     "    if (h.replay && Touches(m, took)) return true;\n", "",
     "--policy bsp --join-every-s 1", 1, 671),
    ("unsure-report", "src/replication/chain_order.cc",
     "  for (const auto& a : awaiting_) unsure = Union(unsure, Intersect(a.second, {r}));\n", "",
     "--partition-every-s 0.5 --partition-max-s 3 --kill-worker-every-s 3", 1, 216),
    ("stale-reports", "src/replication/chain_replicator.cc",
     "  handover_points_.clear();\n  awaiting_.clear();",
     "  handover_points_.clear();\n  for (auto& a : awaiting_) reported_.insert(a.first);\n"
     "  awaiting_.clear();", "--kill-worker-every-s 3", 1, 949),
    ("stale-prepare", "src/control/ring_core.cc",
     "  if (issued <= std::max(ring_epoch, *prepare_seen)) return false;",
     "  if (issued == 0) return false;", "--ctl-stall-every-s 0.3", 1, 173),
    ("refill-asker-outside", "src/kv/server_refill.cc",
     "  if (!Subtract(rs, theirs).empty()) {", "  if (theirs.size() > (1u << 30)) {",
     "--ctl-stall-every-s 0.3", 900, 936),
    ("precopies-kept", "src/replication/refill.cc",
     "  return after.epoch() == p || after.cut_epoch() == p || after.base_epoch() < p;",
     "  return p > 0;", "--ctl-stall-every-s 0.3", 1, 78),
    ("missed-cut", "src/replication/refill.cc",
     "  if (!prepared || prepared->epoch() <= ring_epoch ||",
     "  if (ring_epoch || !prepared || prepared->epoch() <= ring_epoch ||",
     "--ctl-stall-every-s 0.3", 1, 188),
    ("joiner-alive", "src/replication/chain_replicator.cc",
     "    return ring->HasServer(id) || (ahead && next->HasServer(id));",
     "    return ring->HasServer(id) || (ahead && next->HasServer(id) && id < 0);",
     "--ctl-stall-every-s 0.3 --join-every-s 1 --crash-every-s 1.5 --leave-every-s 2", 1, 1557),
    ("reroute-points", "src/replication/chain_replicator.cc",
     "        CutSeq(SegmentsOf(p.msg, ring), &p.msg);\n", "",
     "--partition-every-s 0.5 --partition-max-s 3 --kill-worker-every-s 3 --resend timer", 1, 492),
    ("probe-refused", "src/replication/chain_order.cc",
     "      if (!others.empty() && LacksIn(msg, others)) {",
     "      if (others.size() > (1u << 30)) {",
     "--partition-every-s 0.5 --partition-max-s 3 --kill-worker-every-s 3", 3000, 3107),
    ("refetch-after-handover", "src/replication/chain_replicator.cc",
     "  if (refetch) refetch_pending_ = Union(refetch_pending_, Subtract(mastered, mine));\n", "",
     "--kill-worker-every-s 3 --resend timer", 1, 44),
    ("copy-below-mark", "src/replication/chain_order.cc",
     "  if (!Apply(msg, next_here)) return Delivery::kRejected;",
     "  if (!Apply(msg, false)) return Delivery::kRejected;", "--sched-cut-every-s 1 --resend mixed",
     1, 9),
    # Found by ps_sim --fuzz (hunt options that begin with --fuzz: each seed draws its own).
    ("replayed-below-mark", "src/replication/chain_replicator.cc",
     "    if (Apply(m, lacks)) {", "    if (Apply(m, false && lacks)) {", "--fuzz", 1, 1811),
]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def build(src, log):
    build_dir = os.path.join(src, "build")
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        cfg = ["cmake", "-S", src, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"]
        if shutil.which("ccache"):
            cfg.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
        run(cfg, stdout=log, stderr=subprocess.STDOUT)
    run(["cmake", "--build", build_dir, "-j2", "--target", "ps_sim"], stdout=log,
        stderr=subprocess.STDOUT)
    return build_dir


def install(build_dir, dest):
    os.makedirs(dest, exist_ok=True)
    for name in os.listdir(build_dir):
        if name == "ps_sim" or name.startswith("libps.so"):
            target = os.path.join(dest, name)
            if os.path.lexists(target):
                os.remove(target)
            shutil.copy2(os.path.join(build_dir, name), target, follow_symlinks=False)


def sim(bin_dir, seed, seeds, options):
    env = dict(os.environ, LD_LIBRARY_PATH=bin_dir)
    opts = options.split()
    mode = "--cluster"
    if opts[:1] == ["--fuzz"]:
        mode, opts = "--fuzz", opts[1:]
    cmd = [os.path.join(bin_dir, "ps_sim"), mode, "--seed", str(seed), "--seeds",
           str(seeds)] + opts
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    failed = [r for r in rows if not r["ok"]]
    why = next((l for l in out.splitlines() if l.startswith("invariant violated")), "")
    return rows, failed, why


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", default="/tmp/ps-putbacks")
    p.add_argument("--only", default="", help="comma-separated bug names")
    p.add_argument("--seeds", type=int, default=1500)
    p.add_argument("--extra", default="", help="ps_sim options added to every bug's")
    p.add_argument("--check", action="store_true",
                   help="also run each regression seed on the build with the fix")
    a = p.parse_args()
    only = set(filter(None, a.only.split(",")))
    unknown = only - {b[0] for b in BUGS}
    if unknown:
        sys.exit("--only: no bug named " + ", ".join(sorted(unknown)))
    src = os.path.join(a.work, "src")
    os.makedirs(src, exist_ok=True)
    # By content, and without the source's times: a file that an interrupted run left patched
    # gets a new time when it is put right, so the build sees it (with -a it kept an older time
    # than its objects, and the "fixed" build still had the last patch in).
    run(["rsync", "-rlpD", "--checksum", "--delete", "--exclude", "build", "--exclude", ".git",
         "--exclude", "data", ROOT + "/", src + "/"])
    log = open(os.path.join(a.work, "build.log"), "a")
    fixed = os.path.join(a.work, "fixed")
    install(build(src, log), fixed)
    for name, path, fix, bug, options, first, regression in BUGS:
        if only and name not in only:
            continue
        options = (options + " " + a.extra).strip()
        f = os.path.join(src, path)
        text = open(f).read()
        if text.count(fix) != 1:
            print(json.dumps({"bug": name, "error": "the fix is not found once in " + path}))
            continue
        open(f, "w").write(text.replace(fix, bug))
        try:
            dest = os.path.join(a.work, name)
            install(build(src, log), dest)
        finally:
            open(f, "w").write(text)
        rows, failed, why = sim(dest, first, a.seeds, options)
        line = {"bug": name, "options": options, "first_seed": first, "runs": len(rows),
                "found_at": failed[0]["seed"] if failed else None, "invariant": why}
        if a.check and regression is not None:
            # The regression seeds were found with every worker on the fixed resend rule, which
            # ClusterSimTest names (the default draws the rule per run).
            # A fuzzed seed draws its own rule.
            again = options
            if "--resend" not in options and not options.startswith("--fuzz"):
                again += " --resend fixed"
            _, bad, _ = sim(dest, regression, 1, again)
            _, bad_fixed, _ = sim(fixed, regression, 1, again)
            line["regression_seed"] = regression
            line["regression_fails_without_fix"] = bool(bad)
            line["regression_holds_with_fix"] = not bad_fixed
        print(json.dumps(line), flush=True)
    build(src, log)  # the scratch copy as it is, for the next run
    return 0


if __name__ == "__main__":
    sys.exit(main())
