#!/usr/bin/env python3
"""Where a 1M-key push's CPU goes, ps against the bare ZeroMQ floor of the same shape (2
servers, 2 workers, no copy): user and system CPU seconds per push, summed over the processes,
and split by role for ps. Each side runs twice, with few and with many pushes, and the
difference is divided by the extra pushes, so start-up and the first (inserting) push drop out.
The floor is bench/chain_floor's zmq_chain_stream without copies (4 processes, values summed
into a flat array); ps is kv_bench --push-only under ps-launch with PS_REPLICAS=0. Rounds
alternate the two. Prints every measurement as a JSON line, then one summary line of medians.

    python3 bench/cpu_split.py [--build build] [--rounds 3] [--pushes 96]

--lib DIR runs ps with LD_LIBRARY_PATH=DIR (an other build of libps, for A/B comparisons).
"""
import argparse
import json
import os
import statistics
import sys

from van_bench import rows_of

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FEW = 16  # pushes per worker in the short run


def ps_run(a, reps):
    env = {"PS_REPLICAS": "0"}
    if a.lib:
        env["LD_LIBRARY_PATH"] = a.lib
    rows = rows_of([sys.executable, os.path.join(ROOT, "tracker", "ps-launch"), "-s", "2", "-w",
                    "2", "--timeout", "600", "--", os.path.join(a.build, "bench", "kv_bench"),
                    "--only", "sparse", "--keys", "1000000", "--push-only", "1", "--reps",
                    str(reps), "--rusage", "1"], env)
    cpu = {}
    for r in rows:
        if r.get("op") == "rusage" and r.get("role") in ("server", "worker"):
            for k in ("user_s", "sys_s"):
                cpu[r["role"] + "_" + k] = cpu.get(r["role"] + "_" + k, 0) + r[k]
    mbps = sum(r["push_MBps"] for r in rows if r.get("op") == "sparse")
    return cpu, mbps, len([r for r in rows if r.get("op") == "rusage"]) == 4


def floor_run(a, blocks):
    for r in rows_of([os.path.join(a.build, "bench", "floor_bench"), "--only",
                      "zmq_chain_stream_none", "--iters", str(blocks)]):
        if r.get("op") == "zmq_chain_stream_none":
            return r
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--pushes", type=int, default=96, help="pushes per worker in the long run")
    p.add_argument("--lib", default="")
    a = p.parse_args()
    got = {}

    def add(key, value):
        got.setdefault(key, []).append(value)

    extra = 2 * (a.pushes - FEW)  # both workers (clients)
    for rnd in range(a.rounds):
        short, _, ok1 = ps_run(a, FEW)
        long_, mbps, ok2 = ps_run(a, a.pushes)
        if ok1 and ok2:
            # The short run's whole CPU: start-up and the first (inserting) pushes dominate it.
            row = {"bench": "cpu_split", "round": rnd, "side": "ps", "push_MBps": mbps,
                   "short_run_cpu_s": round(sum(short.values()), 3)}
            for k in sorted(long_):
                row[k[:-2] + "_ms_per_push"] = 1e3 * (long_[k] - short[k]) / extra
            print(json.dumps(row), flush=True)
            for k, v in row.items():
                if k.endswith("_per_push") or k in ("push_MBps", "short_run_cpu_s"):
                    add("ps_" + k, v)
        f1, f2 = floor_run(a, FEW // 4), floor_run(a, a.pushes // 4)
        if f1 and f2 and "user_s" in f1 and "user_s" in f2:
            row = {"bench": "cpu_split", "round": rnd, "side": "floor",
                   "push_MBps": f2["no_copy_MBps"],
                   "user_ms_per_push": 1e3 * (f2["user_s"] - f1["user_s"]) / extra,
                   "sys_ms_per_push": 1e3 * (f2["sys_s"] - f1["sys_s"]) / extra}
            print(json.dumps(row), flush=True)
            for k, v in row.items():
                if k.endswith("_per_push") or k == "push_MBps":
                    add("floor_" + k, v)
    med = {k: round(statistics.median(v), 3) for k, v in sorted(got.items())}
    if all(k in med for k in ("ps_server_user_ms_per_push", "floor_user_ms_per_push")):
        ps_user = med["ps_server_user_ms_per_push"] + med["ps_worker_user_ms_per_push"]
        ps_sys = med["ps_server_sys_ms_per_push"] + med["ps_worker_sys_ms_per_push"]
        med["ps_user_ms_per_push"] = round(ps_user, 3)
        med["ps_sys_ms_per_push"] = round(ps_sys, 3)
        med["ps_cpu_over_floor_cpu"] = round(
            (ps_user + ps_sys) / (med["floor_user_ms_per_push"] + med["floor_sys_ms_per_push"]), 3)
        med["ps_MBps_over_floor_MBps"] = round(med["ps_push_MBps"] / med["floor_push_MBps"], 3)
    print(json.dumps(dict({"bench": "cpu_split", "summary": "medians"}, **med)), flush=True)


if __name__ == "__main__":
    main()
