#!/usr/bin/env python3
"""apps/countmin against the limits it is judged by (docs/apps/countmin.md). JSON lines.

  speed     the Zipf stream (data/countmin/zipf.bin: 10^8 ids) counted end to end by 1 server
            and 2 workers (reading the stream to acknowledged server updates) and by one
            process alone (--local, the same w and d): items/s of each and their ratio,
            alternating, --rounds times; medians in the summary line.
  accuracy  the token streams of data/countmin (King James Bible, State of the Union): every
            distinct token's estimate against its exact count (a dict), for the distributed
            sketch and the local one with and without conservative update: underestimates
            (must be 0), the fraction above epsilon * N (bound: delta), mean and largest
            overestimate; and precision and recall of the top 100 heavy hitters.
  failover  1 server killed (SIGKILL, by PID) mid-stream while 2 workers replay the Zipf
            stream, 3 servers with one replica each: the time from the kill to the next
            acknowledged batch (the later of the two workers' first acknowledgements after the
            kill, from their --log_acks times on the same clock), --kills runs; the longest
            wait for an acknowledgement of a run without a kill for comparison.

  bits      the speed job with 64-bit and with 32-bit cells (--counter_bits), alternating,
            --rounds times: items/s, the servers' bytes of cells and bytes received.

  python3 bench/countmin_bench.py [--only speed|bits|accuracy|failover] [--rounds 3] [--kills 10]
Data: scripts/fetch-countmin-data.sh.
"""
import argparse
import collections
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, on_line=None):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in p.stdout:
        lines.append(line)
        if on_line:
            on_line(line, p)
    p.wait()
    out = "".join(lines)
    if p.returncode != 0:
        sys.stdout.write(out[-4000:])
        sys.exit("countmin_bench: %s exited %d" % (" ".join(cmd[:6]), p.returncode))
    return out


def emit(row):
    print(json.dumps(row), flush=True)


def launch(a, s, w, flags, env=(), on_line=None, allow=()):
    cmd = [sys.executable, os.path.join(ROOT, "tracker", "ps-launch"), "-s", str(s), "-w", str(w),
           "--timeout", "1200"]
    for e in env:
        cmd += ["--env", e]
    for f in allow:
        cmd += [f, "1"]
    return run(cmd + ["--", a.job] + flags, on_line)


def rate(out, local):
    m = re.search(r"RESULT %sitems (\d+) .* seconds (\S+) items/s (\S+)" % ("local " if local else ""),
                  out)
    return int(m.group(1)), float(m.group(2)), float(m.group(3))


def speed(a):
    stream = os.path.join(a.data, "zipf.bin")
    flags = ["--input", stream, "--format", "u64", "--epsilon", str(a.epsilon), "--delta",
             str(a.delta), "--quiet", "--top_k", "10"]
    loc, dist = [], []
    for r in range(a.rounds):
        n, s, ips = rate(run([a.job, "--local"] + flags), True)
        loc.append(ips)
        emit({"bench": "countmin", "op": "speed", "run": "local", "round": r, "items": n,
              "seconds": s, "items_per_s": round(ips)})
        n, s, ips = rate(launch(a, 1, 2, flags), False)
        dist.append(ips)
        emit({"bench": "countmin", "op": "speed", "run": "1S2W", "round": r, "items": n,
              "seconds": s, "items_per_s": round(ips)})
    med = statistics.median
    emit({"summary": "countmin_speed", "local_items_per_s": round(med(loc)),
          "job_1S2W_items_per_s": round(med(dist)), "job_over_local": round(med(dist) / med(loc), 3),
          "rounds": a.rounds})


def bits(a):
    stream = os.path.join(a.data, "zipf.bin")
    flags = ["--input", stream, "--format", "u64", "--epsilon", str(a.epsilon), "--delta",
             str(a.delta), "--quiet", "--top_k", "10"]
    rows = collections.defaultdict(list)
    for r in range(a.rounds):
        for b in ("64", "32"):
            out = launch(a, 1, 2, flags + ["--counter_bits", b])
            n, s, ips = rate(out, False)
            m = re.search(r"SERVER rank 0 cells (\d+) cell_bytes (\d+) .*MB received (\S+)", out)
            row = {"bench": "countmin", "op": "bits", "counter_bits": int(b), "round": r,
                   "items": n, "items_per_s": round(ips), "cells": int(m.group(1)),
                   "cell_bytes": int(m.group(2)), "server_mb_received": float(m.group(3))}
            rows[b].append(row)
            emit(row)
    med = statistics.median
    emit({"summary": "countmin_bits", "rounds": a.rounds,
          **{"items_per_s_%s" % b: round(med(x["items_per_s"] for x in rows[b])) for b in rows},
          **{"cell_bytes_%s" % b: rows[b][0]["cell_bytes"] for b in rows},
          **{"server_mb_received_%s" % b: med(x["server_mb_received"] for x in rows[b])
             for b in rows}})


def accuracy(a):
    eps, delta = a.epsilon, a.delta
    for name in ("bible", "sotu"):
        path = os.path.join(a.data, name + ".txt")
        with open(path) as f:
            counts = collections.Counter(f.read().split())
        n = sum(counts.values())
        with tempfile.TemporaryDirectory() as d:
            q = os.path.join(d, "q.txt")
            with open(q, "w") as f:
                f.write("\n".join(counts) + "\n")
            flags = ["--input", path, "--epsilon", str(eps), "--delta", str(delta), "--query", q,
                     "--top_k", "100", "--quiet"]
            outs = {"job_1S2W": launch(a, 1, 2, flags),
                    "local": run([a.job, "--local"] + flags),
                    "local_conservative": run([a.job, "--local", "--conservative"] + flags)}
        exact_top = [w for w, _ in counts.most_common(100)]
        c100 = counts[exact_top[-1]]
        for run_name, out in outs.items():
            est = {m.group(1): int(m.group(2)) for m in re.finditer(r"ESTIMATE (\S+) (-?\d+)", out)}
            err = [est[w] - c for w, c in counts.items()]
            top = [m.group(1) for m in re.finditer(r"TOP \d+ (\S+) \d+", out)]
            emit({"bench": "countmin", "op": "accuracy", "stream": name, "run": run_name,
                  "items": n, "distinct": len(counts), "epsilon": eps, "delta": delta,
                  "under": sum(e < 0 for e in err),
                  "over_eps_N_fraction": round(sum(e > eps * n for e in err) / len(err), 6),
                  "mean_over": round(sum(err) / len(err), 3), "max_over": max(err),
                  "top100_recall": len(set(top) & set(exact_top)) / 100.0,
                  "top100_precision": round(sum(counts[w] >= c100 for w in top) / max(1, len(top)),
                                            3)})


def failover(a):
    stream = os.path.join(a.data, "zipf.bin")
    # A tenth of the stream, replayed at 2 M ids a second per worker: 2.5 s per run.
    with tempfile.TemporaryDirectory() as d:
        part = os.path.join(d, "zipf10.bin")
        with open(stream, "rb") as f, open(part, "wb") as g:
            g.write(f.read(80000000))
        flags = ["--input", part, "--format", "u64", "--epsilon", str(a.epsilon), "--delta",
                 str(a.delta), "--rate", "2000000", "--batch", "65536", "--top_k", "10",
                 "--progress_s", "0.2", "--log_acks"]
        env = ("PS_REPLICAS=1",)
        waits = []
        for k in range(a.kills + 1):
            kill = k > 0
            state = {"pids": {}, "killed": None, "lines": 0}

            def on_line(line, p, state=state, kill=kill):
                m = re.search(r"started (server|worker) (\d+) pid (\d+)", line)
                if m:
                    state["pids"][(m.group(1), int(m.group(2)))] = int(m.group(3))
                if kill and line.startswith("[worker 0] progress"):
                    state["lines"] += 1
                    if state["lines"] == 4 and state["killed"] is None:
                        os.kill(state["pids"][("server", 1)], signal.SIGKILL)  # by PID
                        state["killed"] = time.time()

            out = launch(a, 3, 2, flags, env=env, on_line=on_line,
                         allow=("--allow-dead-servers",) if kill else ())
            w = max(float(m.group(1)) for m in re.finditer(r"max_ack_wait_ms (\S+)", out))
            row = {"bench": "countmin", "op": "failover", "killed": kill, "max_ack_wait_ms": w}
            if kill:
                # Each worker's first push acknowledged after the kill (same host, same clock;
                # every push has cells on every server, so none completes before the fail-over):
                # the later of the two workers.
                firsts = []
                for m in re.finditer(r"ACKS rank \d+((?: \S+)*)", out):
                    after = [float(t) for t in m.group(1).split() if float(t) > state["killed"]]
                    if after:
                        firsts.append(min(after))
                row["kill_to_next_ack_ms"] = round((max(firsts) - state["killed"]) * 1e3, 1)
                waits.append(row["kill_to_next_ack_ms"])
            emit(row)
        emit({"summary": "countmin_failover", "kills": len(waits),
              "kill_to_next_ack_p50_ms": statistics.median(waits), "max_ms": max(waits)})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--data", default=os.path.join(ROOT, "data", "countmin"))
    p.add_argument("--only", choices=["speed", "bits", "accuracy", "failover"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--epsilon", type=float, default=0.0001)
    p.add_argument("--delta", type=float, default=0.01)
    a = p.parse_args()
    a.job = os.path.join(a.build, "apps", "countmin", "ps_countmin")
    for name, f in (("speed", speed), ("bits", bits), ("accuracy", accuracy),
                    ("failover", failover)):
        if a.only in (None, name):
            f(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
