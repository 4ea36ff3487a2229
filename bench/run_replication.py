#!/usr/bin/env python3
"""Replication traffic with and without aggregation (PS_REPLICATION_WINDOW_MS).

    python3 bench/run_replication.py [--build build] [--workers 4] [--rounds 30]

Each run: 2 servers (one replica per range), W workers pushing int64 sums with the exact-sum
job (tests/integration/kv_exact_job.cc, which checks every value at the end), over two key
patterns: "hot" (every worker pushes the same 20000 keys each round, like a dense model) and
"sparse" (each push draws 20000 of 200000 keys). Printed as JSON lines, one per (pattern,
window): the copies and bytes the servers sent their replicas, the pushes that travelled in an
aggregate, the bytes relative to window 0, and worker 0's push phase in seconds.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATTERNS = {"hot": ["--universe", "20000", "--keys", "20000"],
            "sparse": ["--universe", "200000", "--keys", "20000"]}


def run(a, pattern, window):
    cmd = [sys.executable, os.path.join(ROOT, "tracker", "ps-launch"), "-s", "2", "-w",
           str(a.workers), "--timeout", "120", "--env", "PS_REPLICAS=1",
           "--env", "PS_REPLICATION_WINDOW_MS=%d" % window, "--",
           os.path.join(a.build, "tests", "kv_exact_job"), "--scenario", "sum",
           "--rounds", str(a.rounds)] + PATTERNS[pattern]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout)
        raise SystemExit("run failed: %s" % " ".join(cmd))
    stats = re.findall(r"STATS .* copies=(\d+) copy_bytes=(\d+) aggregated=(\d+) conflicts=(\d+)",
                       p.stdout)
    ok = re.findall(r"\[worker \d+\] OK worker", p.stdout)
    push = re.search(r"\[worker 0\] OK worker 0 .* push phase ([\d.]+) s", p.stdout)
    if len(stats) != 2 or len(ok) != a.workers or not push:
        raise SystemExit("missing STATS/OK lines in:\n" + p.stdout)
    return {"copies": sum(int(s[0]) for s in stats), "bytes": sum(int(s[1]) for s in stats),
            "aggregated": sum(int(s[2]) for s in stats),
            "conflicts": sum(int(s[3]) for s in stats), "push_s": float(push.group(1))}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--windows", default="0,1,5,20")
    a = p.parse_args()
    for pattern in PATTERNS:
        base = None
        for w in [int(x) for x in a.windows.split(",")]:
            r = run(a, pattern, w)
            base = base or r["bytes"]
            r.update({"bench": "replication", "pattern": pattern, "window_ms": w,
                      "workers": a.workers, "bytes_vs_window0": round(r["bytes"] / base, 3)})
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
