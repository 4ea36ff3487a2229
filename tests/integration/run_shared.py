#!/usr/bin/env python3
"""ps_lda and ps_countmin at once on one set of servers (ps_server), each in named tables of
its own, with real processes over loopback (worker groups lda and cm, ps-launch --group-cmd).

  exact        2 servers; group cm: 2 workers with 32-bit cells, group lda: 1 worker under BSP
               (an application's rule, countmin.sat32, served by ps_server): every LDA
               iteration line is the serial run's (the same counts as alone), and the cells are
               byte-identical to the stream counted in one process; the servers hold both apps'
               tables, under their prefixes.
  kill_server  3 servers with one replica each; group lda: 2 workers under SSP(1), group cm: 2
               workers replaying a u64 stream at a fixed rate; SIGKILL to server 1 (by PID)
               while both run: LDA runs all its iterations and its counts are exact (the app's
               invariant and the model file), the CountMin cells are byte-identical to the local
               count.
  kill_worker  2 servers; group lda: 2 workers under BSP, group cm: 3 workers replaying a u64
               stream, the LDA group's policy from PS_GROUP_CONSISTENCY (no --consistency: the
               job's setting wins over the app's default); SIGKILL to CountMin's worker 1 mid-stream: its parts go to the other cm
               workers (cells byte-identical to the local count) and the LDA group, whose own
               workers all live, neither pauses nor waits for it (no recovery line, every
               iteration, exact counts).
"""
import argparse
import os
import re
import signal
import sys
import tempfile

import run_countmin
import run_lda
from run_lda import fail, run
from kills import track_pid


def launch(a, servers, groups, lda, cm, env=(), allow=(), on_line=None):
    cmd = [sys.executable, a.launcher, "-s", str(servers), "-w", groups, "--timeout", "240",
           "--group-cmd", "lda=" + " ".join([a.lda] + lda),
           "--group-cmd", "cm=" + " ".join([a.countmin] + cm)]
    for e in env:
        cmd += ["--env", e]
    for flag in allow:
        cmd += [flag, "1"]
    return run(cmd + ["--", a.server], on_line)


def tables(out):
    """The tables server 0 lists at its end."""
    return sorted(set(re.findall(r"\[server 0\] SERVER rank 0 table (\S+) ", out)))


def exact(a, d):
    run_lda.make_data(d, a.seed)
    it = ["--iterations", "20"]
    rc, serial = run([a.lda, "--serial"] + run_lda.flags(d, it))
    if rc != 0:
        fail("the serial LDA run failed (exit %d)" % rc, serial)
    path, counts, _ = run_countmin.make_text(d, a.seed)
    shape = ["--width", str(run_countmin.WIDTH), "--depth", str(run_countmin.DEPTH)]
    ref = os.path.join(d, "local.bin")
    rc, out = run([a.countmin, "--local", "--input", path, "--sketch_out", ref] + shape)
    if rc != 0:
        fail("the local count failed (exit %d)" % rc, out)
    dist = os.path.join(d, "dist.bin")
    # The cm group first: the LDA worker is worker 2 of the job and worker 0 of its group.
    rc, out = launch(a, 2, "cm:2,lda:1",
                     run_lda.flags(d, it + ["--consistency", "bsp"]),
                     ["--input", path, "--sketch_out", dist, "--part_mb", "0.05", "--batch",
                      "5000", "--counter_bits", "32"] + shape)
    if rc != 0:
        fail("the shared job exited %d" % rc, out)
    s, o = run_lda.iterations(serial), run_lda.iterations(out)
    if len(s) != 20 or s != o:
        fail("the LDA group's %d iteration lines are not the serial run's %d" % (len(o), len(s)),
             out)
    if not run_countmin.same_file(ref, dist):
        fail("the CountMin group's cells differ from the local count", out)
    n = sum(counts.values())
    if "RESULT items %d " % n not in out:
        fail("the CountMin group did not count %d items" % n, out)
    want = ["countmin.candidates", "countmin.cells", "lda.control", "lda.dense", "lda.sparse",
            "lda.stats", "lda.topics", "lda.totals"]
    if tables(out) != want:
        fail("server 0 holds tables %s, expected %s" % (tables(out), want), out)
    print("exact: LDA (1 worker, BSP) = its serial run over 20 iterations, CountMin (2 workers, "
          "32-bit cells) = the local count of %d items, on the same 2 servers" % n, flush=True)


def inputs(a, d, items):
    """The LDA corpus and a u64 stream of `items` ids counted in one process: (the corpus's
    tokens, the stream's flags, the local cells' file)."""
    tokens = run_lda.make_data(d, a.seed)
    ids = os.path.join(d, "ids.bin")
    rc, out = run([a.countmin, "--zipf_out", ids, "--zipf_items", str(items), "--zipf_distinct",
                   "50000", "--seed", str(a.seed)])
    if rc != 0:
        fail("--zipf_out exited %d" % rc, out)
    u64 = ["--input", ids, "--format", "u64", "--width", str(run_countmin.WIDTH), "--depth",
           str(run_countmin.DEPTH)]
    ref = os.path.join(d, "local.bin")
    rc, out = run([a.countmin, "--local", "--sketch_out", ref] + u64)
    if rc != 0:
        fail("the local count failed (exit %d)" % rc, out)
    return tokens, u64, ref


def kill_server(a, d):
    tokens, u64, ref = inputs(a, d, 600000)
    state = {"pids": {}, "killed": None, "cm_done": False}

    # Worker 0 is the LDA group's first (groups take ranks in order); the cm group's workers
    # print their WORKER line when their stream ends: the kill must come before that.
    def on_line(line):
        track_pid(state, line)
        if re.match(r"\[worker [23]\] WORKER ", line):
            state["cm_done"] = True
        m = re.match(r"\[worker 0\] iteration (\d+) ", line)
        if m and state["killed"] is None and int(m.group(1)) >= 5:
            os.kill(state["pids"][("server", 1)], signal.SIGKILL)  # by PID, never by name
            state["killed"] = (int(m.group(1)), state["cm_done"])
            print("SIGKILL to server 1 after LDA iteration %s" % m.group(1), flush=True)

    model = os.path.join(d, "model.txt")
    dist = os.path.join(d, "dist.bin")
    rc, out = launch(a, 3, "lda:2,cm:2",
                     run_lda.flags(d, ["--iterations", "300", "--consistency", "ssp:1",
                                       "--model_out", model]),
                     u64 + ["--sketch_out", dist, "--part_mb", "0.2", "--batch", "4000",
                            "--rate", "150000", "--progress_s", "0.1"],
                     env=("PS_REPLICAS=1", "PS_HEARTBEAT_INTERVAL_MS=100",
                          "PS_HEARTBEAT_TIMEOUT_MS=1000"),
                     allow=("--allow-dead-servers",), on_line=on_line)
    if state["killed"] is None:
        fail("nothing was killed", out)
    if state["killed"][1]:
        fail("the CountMin stream had ended before the kill", out)
    last = run_lda.iterations(out)
    if rc != 0 or "INVARIANT ok" not in out or not last or last[-1][0] != 300:
        fail("exit %d after the kill; last LDA iteration %s; %s" % (
            rc, last[-1][0] if last else None, re.findall(r"INVARIANT.*", out)), out)
    why = run_lda.check_model(model, tokens)
    if why:
        fail("LDA: " + why, out)
    if not run_countmin.same_file(ref, dist):
        fail("the CountMin cells differ from the local count after the kill", out)
    print("kill_server: server 1 killed after LDA iteration %d, mid-stream: LDA ran its 300 "
          "iterations with exact counts, the CountMin cells equal the local count"
          % state["killed"][0], flush=True)


def kill_worker(a, d):
    tokens, u64, ref = inputs(a, d, 900000)
    # Groups take ranks in order: lda's workers are 0 and 1, cm's 2, 3 and 4 (its rank 1 is
    # the job's worker 3).
    state = {"pids": {}, "killed": None, "progress": 0, "lda": 0}

    def on_line(line):
        track_pid(state, line)
        m = re.match(r"\[worker 0\] iteration (\d+) ", line)
        if m:
            state["lda"] = int(m.group(1))
        if line.startswith("[worker 3] progress"):
            state["progress"] += 1
            if state["progress"] == 3 and state["killed"] is None:
                os.kill(state["pids"][("worker", 3)], signal.SIGKILL)  # by PID, never by name
                state["killed"] = state["lda"]
                print("SIGKILL to worker 3 (cm rank 1), LDA at iteration %d: %s"
                      % (state["lda"], line.strip()), flush=True)

    model = os.path.join(d, "model.txt")
    dist = os.path.join(d, "dist.bin")
    rc, out = launch(a, 2, "lda:2,cm:3",
                     run_lda.flags(d, ["--iterations", "150", "--model_out", model]),
                     u64 + ["--sketch_out", dist, "--part_mb", "0.0625", "--batch", "3000",
                            "--rate", "150000", "--progress_s", "0.1"],
                     # The job's policy for the LDA group, and no --consistency: BSP, not the
                     # app's default SSP(1).
                     env=("PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000",
                          "PS_GROUP_CONSISTENCY=lda=bsp"),
                     allow=("--allow-dead-workers",), on_line=on_line)
    if state["killed"] is None or state["killed"] >= 150:
        fail("nothing was killed while LDA ran (%s)" % state["killed"], out)
    if rc != 0 or not run_countmin.same_file(ref, dist):
        fail("exit %d; the CountMin cells after its worker's death equal the local count: %s"
             % (rc, rc == 0 and run_countmin.same_file(ref, dist)), out)
    last = run_lda.iterations(out)
    recovery = re.findall(r"\[worker [01]\] .*(?:pause|takes over|coordinates).*", out)
    if "INVARIANT ok" not in out or not last or last[-1][0] != 150 or recovery:
        fail("LDA after a CountMin worker's death: last iteration %s, %s, recovery lines %s" % (
            last[-1][0] if last else None, re.findall(r"INVARIANT.*", out), recovery[:3]), out)
    why = run_lda.check_model(model, tokens)
    if why:
        fail("LDA: " + why, out)
    stale = [float(x) for x in re.findall(r"iteration \d+ .* stale (\S+)", out)]
    if len(stale) != 150 or max(stale) != 0:
        fail("LDA under PS_GROUP_CONSISTENCY=lda=bsp: staleness per line %s (BSP: 0)"
             % sorted(set(stale)), out)
    print("kill_worker: CountMin's worker 1 killed mid-stream: its parts were counted by the "
          "other two (cells identical to the local count); LDA ran its 150 BSP iterations "
          "without a pause, counts exact", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--server", required=True, help="ps_server")
    p.add_argument("--lda", required=True, help="ps_lda")
    p.add_argument("--countmin", required=True, help="ps_countmin")
    p.add_argument("--scenario", required=True, choices=["exact", "kill_server", "kill_worker"])
    p.add_argument("--seed", type=int, default=5)
    a = p.parse_args()
    print("seed %d" % a.seed, flush=True)
    with tempfile.TemporaryDirectory() as d:
        {"exact": exact, "kill_server": kill_server,
         "kill_worker": kill_worker}[a.scenario](a, d)
    print("PASSED %s" % a.scenario)
    return 0


if __name__ == "__main__":
    sys.exit(main())
