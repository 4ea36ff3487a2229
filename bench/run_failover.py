#!/usr/bin/env python3
"""Fail-over benchmark: kills one server per run and measures how long its key ranges were
unavailable, with default settings (no PS_* overrides besides the job layout).

    python3 bench/run_failover.py [--kills 10] [--hang] [--build build] [--seed 1]
                                  [--plot docs/img/failover.png]

Each run: 3 servers (one replica per range, the default), 1 worker pushing one key at a time
over all servers (bench/failover_job.cc); 1 s after the pushes start a seeded server gets
SIGKILL (a crash) or, with --hang, SIGSTOP (a hang; killed by PID when the run ends). Printed
as JSON lines: per run the time from the signal to the first successful push, issued after
the signal, on a key the victim mastered; then p50 and max over the runs; then the push rate in
25 ms buckets around the signal (averaged over runs), which --plot draws (needs Debian's
python3-matplotlib; run with /usr/bin/python3).
"""
import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUCKET_MS = 25


def one_run(a, run, rng):
    victim = rng.randrange(3)
    cmd = [sys.executable, os.path.join(ROOT, "tracker", "ps-launch"), "-s", "3", "-w", "1",
           "--allow-dead-servers", "1", "--timeout", "60", "--",
           os.path.join(a.build, "bench", "failover_job"), "--seconds", "3"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, pids, state = [], {}, {"t_sig": None}
    sig = signal.SIGSTOP if a.hang else signal.SIGKILL

    def fire(pid):
        time.sleep(1.0)
        state["t_sig"] = time.time() * 1000
        os.kill(pid, sig)

    def read():
        for line in proc.stdout:
            lines.append(line)
            m = re.search(r"started server (\d+) pid (\d+)", line)
            if m:
                pids[int(m.group(1))] = int(m.group(2))
            if "READY" in line:
                threading.Thread(target=fire, args=(pids[victim],)).start()
            if "P " in line and sig == signal.SIGSTOP and state["t_sig"] and not state.get("reaped"):
                state["reaped"] = True
                os.kill(pids[victim], signal.SIGKILL)  # the hung one, by PID

    t = threading.Thread(target=read)
    t.start()
    rc = proc.wait()
    t.join()
    if rc != 0 or state["t_sig"] is None:
        sys.stderr.write("".join(lines[-30:]))
        raise SystemExit("run %d failed (rc %d)" % (run, rc))
    recs = []
    for line in lines:
        m = re.match(r"\[worker 0\] P ([\d.]+) ([\d.]+) (\d+)$", line.strip())
        if m:
            recs.append((float(m.group(1)), float(m.group(2)), int(m.group(3))))
    t_sig, victim_id = state["t_sig"], victim + 1  # servers have ids 1..S in rank order
    after = [r for r in recs if r[2] == victim_id and r[0] >= t_sig]
    if not after:
        raise SystemExit("run %d: no push on the victim's ranges after the signal" % run)
    first = min(after, key=lambda r: r[1])
    series = {}
    for issued, done, _ in recs:
        b = int((done - t_sig) // BUCKET_MS)
        if -20 <= b < 60:
            series[b] = series.get(b, 0) + 1
    return {"run": run, "victim_rank": victim, "signal": signal.Signals(sig).name,
            "failover_ms": round(first[1] - t_sig, 1), "pushes": len(recs)}, series


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--hang", action="store_true")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--plot")
    a = p.parse_args()
    rng = random.Random(a.seed)
    results, total = [], {}
    for run in range(a.kills):
        r, series = one_run(a, run, rng)
        print(json.dumps(r), flush=True)
        results.append(r["failover_ms"])
        for b, n in series.items():
            total[b] = total.get(b, 0) + n
    summary = {"summary": "failover", "signal": "SIGSTOP" if a.hang else "SIGKILL",
               "kills": a.kills, "p50_ms": round(statistics.median(results), 1),
               "min_ms": round(min(results), 1), "max_ms": round(max(results), 1)}
    print(json.dumps(summary))
    rate = [{"t_ms": b * BUCKET_MS, "pushes_per_s": round(total.get(b, 0) / a.kills *
                                                          1000 / BUCKET_MS)}
            for b in range(-20, 60)]
    print(json.dumps({"series": "push_rate", "bucket_ms": BUCKET_MS, "points": rate}))
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.plot([x["t_ms"] for x in rate], [x["pushes_per_s"] for x in rate], drawstyle="steps-post")
        ax.axvline(0, color="red", linestyle="--", label="%s of a server" % summary["signal"])
        ax.set_xlabel("ms since the signal")
        ax.set_ylabel("acknowledged pushes per second (mean of %d runs)" % a.kills)
        ax.set_title("Fail-over, 3 servers, 1 replica: p50 %.0f ms, max %.0f ms"
                     % (summary["p50_ms"], summary["max_ms"]))
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(a.plot, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
