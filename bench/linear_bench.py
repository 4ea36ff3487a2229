#!/usr/bin/env python3
"""Time to accuracy of apps/linear against liblinear (docs/apps/linear.md). JSON lines.

For each data set (--sets: the spam words and bigrams of scripts/fetch-data.sh) and regulariser
(L2: `liblinear-train -s 0 -c 1` against `ps_linear --l2 1 --l1 0`; L1: `-s 6 -c 1` against
`--l1 1 --l2 0`; no bias term in either), alternating --rounds times:

  liblinear  wall-clock of liblinear-train (reading the file included) and the test logloss of
             its model (liblinear-predict -b 1, computed here from the probabilities); the
             target below is this run's;
  liblinear, tuned malloc  the same with malloc set up as ps-launch sets it up for ps's
             processes (huge pages, one arena: PS_HUGEPAGES), which makes liblinear faster too;
  ps SOLVER 2S2W  ps-launch with 2 servers and 2 workers, and 1S1W with one of each, for each
             of --solvers (dbpg, lbfgs): the wall-clock
             from launch until worker 0 prints a line whose test logloss is within 1% of
             liblinear's (stamped when the line reaches this script), and the whole job's time
             and final test logloss.

A summary line per (set, regulariser, run) has the medians. Needs Debian liblinear-tools.

  python3 bench/linear_bench.py [--build build] [--sets spam spam.bigram] [--rounds 3]
                                [--iterations 150] [--l1_iterations 150] [--eval_every 5]
                                [--solvers dbpg lbfgs]
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from run_kv_bench import malloc_env  # noqa: E402
REGS = {"l2": (["-s", "0", "-c", "1"], ["--l2", "1", "--l1", "0"]),
        "l1": (["-s", "6", "-c", "1"], ["--l1", "1", "--l2", "0"])}


def emit(row):
    print(json.dumps(row), flush=True)


def files(a, name):
    base = name.split(".", 1)
    suffix = "." + base[1] if len(base) > 1 else ""
    d = os.path.join(a.data, base[0])
    return (os.path.join(d, "train%s.libsvm" % suffix), os.path.join(d, "test%s.libsvm" % suffix))


def logloss(labels, probs):
    eps = 1e-15
    return -sum(math.log(max(eps, p if y > 0 else 1 - p)) for y, p in zip(labels, probs)) / len(
        labels)


def liblinear(train, test, flags, d, env=None):
    model, preds = os.path.join(d, "ll.model"), os.path.join(d, "ll.out")
    t = time.monotonic()
    subprocess.run(["liblinear-train", "-q"] + flags + [train, model], check=True, env=env,
                   stdout=subprocess.DEVNULL, timeout=1200)
    secs = time.monotonic() - t
    subprocess.run(["liblinear-predict", "-b", "1", test, model, preds], check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    with open(preds) as f:
        header = f.readline().split()  # "labels 1 -1": the order of the probabilities
        col = header[1:].index("1")
        probs = [float(line.split()[1 + col]) for line in f]
    with open(test) as f:
        labels = [1 if line.split()[0] in ("+1", "1") else -1 for line in f if line.strip()]
    return secs, logloss(labels, probs)


def ps(a, train, test, servers, workers, flags, target, solver):
    cmd = [sys.executable, os.path.join(ROOT, "tracker", "ps-launch"), "-s", str(servers), "-w",
           str(workers), "--timeout", "1200", "--",
           os.path.join(a.build, "apps", "linear", "ps_linear"), "--train", train, "--test", test,
           "--solver", solver, "--eval_every", str(a.eval_every)] + flags
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    reached, last, tail = None, None, []
    for line in p.stdout:
        tail = (tail + [line])[-40:]
        m = re.search(r"\] iteration (\d+) time \S+ .* test_logloss (\S+)", line)
        if m:
            last = float(m.group(2))
            if reached is None and last <= target:
                reached = (time.monotonic() - start, int(m.group(1)))
    p.wait()
    total = time.monotonic() - start
    res = re.search(r"RESULT solver \S+ test_logloss (\S+)", "".join(tail))
    if p.returncode != 0 or not res:
        sys.stdout.write("".join(tail))
        sys.exit("linear_bench: %s exited %d" % (" ".join(cmd), p.returncode))
    return reached, total, float(res.group(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--data", default=os.path.join(ROOT, "data"))
    p.add_argument("--sets", nargs="+", default=["spam", "spam.bigram"])
    p.add_argument("--regs", nargs="+", default=["l2", "l1"], choices=sorted(REGS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iterations", type=int, default=150)
    p.add_argument("--l1_iterations", type=int, default=150)
    p.add_argument("--eval_every", type=int, default=5)
    p.add_argument("--solvers", nargs="+", default=["dbpg", "lbfgs"], choices=["dbpg", "lbfgs"])
    a = p.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as d:
        for r in range(a.rounds):
            for s in a.sets:
                train, test = files(a, s)
                for reg in a.regs:
                    ll_flags, ps_flags = REGS[reg]
                    iters = a.iterations if reg == "l2" else a.l1_iterations
                    secs, ll = liblinear(train, test, ll_flags, d)
                    target = 1.01 * ll
                    row = {"bench": "linear_tta", "set": s, "reg": reg, "round": r,
                           "run": "liblinear", "seconds": round(secs, 3), "test_logloss": ll}
                    rows.setdefault((s, reg, "liblinear"), []).append(row)
                    emit(row)
                    secs, tuned = liblinear(train, test, ll_flags, d,
                                            malloc_env(dict(os.environ, PS_HUGEPAGES="1")))
                    row = dict(row, run="liblinear, tuned malloc", seconds=round(secs, 3),
                               test_logloss=tuned)
                    rows.setdefault((s, reg, row["run"]), []).append(row)
                    emit(row)
                    for solver, sv, wk in [(x, y, z) for x in a.solvers for y, z in ((2, 2), (1, 1))]:
                        reached, total, final = ps(a, train, test, sv, wk,
                                                   ps_flags + ["--iterations", str(iters)], target,
                                                   solver)
                        row = {"bench": "linear_tta", "set": s, "reg": reg, "round": r,
                               "run": "ps %s %dS%dW" % (solver, sv, wk), "target_logloss": target,
                               "seconds_to_target": round(reached[0], 3) if reached else None,
                               "iteration_at_target": reached[1] if reached else None,
                               "seconds": round(total, 3), "test_logloss": final,
                               "iterations": iters}
                        rows.setdefault((s, reg, row["run"]), []).append(row)
                        emit(row)
    med = statistics.median
    for (s, reg, run), rs in sorted(rows.items()):
        out = {"summary": "linear_tta", "set": s, "reg": reg, "run": run, "rounds": len(rs),
               "seconds": med(x["seconds"] for x in rs),
               "test_logloss": med(x["test_logloss"] for x in rs)}
        if not run.startswith("liblinear"):
            hit = [x["seconds_to_target"] for x in rs if x["seconds_to_target"] is not None]
            out["seconds_to_target"] = med(hit) if len(hit) == len(rs) else None
            out["reached"] = "%d/%d" % (len(hit), len(rs))
        emit(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
