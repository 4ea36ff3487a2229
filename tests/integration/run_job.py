#!/usr/bin/env python3
"""Runs one kv_exact_job scenario through ps-launch over loopback and checks its output."""
import argparse
import os
import re
import subprocess
import sys

SCENARIOS = {
    # (servers, workers, job arguments)
    "sum": (3, 4, ["--universe", "1000000", "--keys", "100000", "--rounds", "20"]),
    "range": (3, 2, ["--universe", "200000", "--keys", "50000", "--rounds", "3"]),
    "varlen": (2, 2, ["--universe", "100000", "--keys", "30000", "--rounds", "4"]),
    "garbage": (2, 2, ["--universe", "200000", "--keys", "50000", "--rounds", "5"]),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    p.add_argument("--seed", default="2026")
    a = p.parse_args()
    s, w, job_args = SCENARIOS[a.scenario]
    # Generous heartbeats: these jobs test results, not failure detection, and a loaded machine
    # (or a sanitizer build) must not make a live node look dead.
    # garbage: every process gets 3 GB of address space, so a node that believed a frame's
    # claim of almost 4 GB (the job sends such claims to every node) would die of it.
    limit = ["prlimit", "--as=%d" % (3 << 30), "--"] if a.scenario == "garbage" else []
    cmd = [sys.executable, a.launcher, "-s", str(s), "-w", str(w), "--timeout", "500",
           "--env", "PS_HEARTBEAT_TIMEOUT_MS=5000", "--"] + limit + [
           a.job, "--scenario", a.scenario, "--seed", a.seed] + job_args
    print("running:", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout)
    failures = []
    if r.returncode != 0:
        failures.append("ps-launch exited with %d" % r.returncode)
    ok = re.findall(r"^\[worker (\d+)\] OK worker", r.stdout, re.M)
    if sorted(set(ok)) != [str(i) for i in range(w)]:
        failures.append("expected an OK line from each of %d workers, got %s" % (w, ok))
    stats = re.findall(r"^\[server \d+\] STATS .*\"malformed_dropped\":(\d+)", r.stdout, re.M)
    if len(stats) != s:
        failures.append("expected STATS from %d servers, got %d" % (s, len(stats)))
    # Over UCX each of the 10000 random active messages a server gets is dropped and counted
    # (a header with the van's magic but random numbers claims a place far out of its stream).
    want = 20 + (10000 if os.environ.get("PS_VAN") == "ucx" else 0)
    if a.scenario == "garbage" and stats and min(int(x) for x in stats) < want:
        failures.append("a server reports fewer dropped messages than the %d crafted ones it "
                        "got: %s" % (want, stats))
    workers = re.findall(r"^\[worker ([1-9]\d*)\] OK worker .*\"malformed_dropped\":(\d+)",
                         r.stdout, re.M)
    if a.scenario == "garbage" and (len(workers) != w - 1 or
                                    any(int(x[1]) < 20 for x in workers)):
        failures.append("the other workers did not drop the 20 crafted size claims each: %s"
                        % workers)
    if failures:
        print("FAILED (seed %s): %s" % (a.seed, "; ".join(failures)))
        return 1
    print("PASSED %s: servers dropped %s malformed messages" % (a.scenario, stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
