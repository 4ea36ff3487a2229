#!/usr/bin/env python3
"""How the whole-cluster simulation and the membership protocol scale (issue 21): runs
`ps_sim --cluster` with S servers and 10 S workers for each S given, with servers joining,
leaving and crashing, and prints one JSON line per run with the simulator's speed (events per
second of wall-clock) and what one membership change costs: the scheduler's decisions
(SchedulerCore, apart from the registration of every node at the start and its routine
heartbeats and quiet looks, each reported in total) and the servers' handling of a new or prepared ring (their refill and hand-over
plans), in wall-clock microseconds, and the range-copy and hand-over messages, per ring epoch
issued. The workers push rarely (--push-every-s) so that the network's load stays comparable
across sizes; steps are off.

    python3 bench/cluster_scale.py [--build build] [--servers 10 100 1000] [--seed 3]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--servers", type=int, nargs="+", default=[10, 100, 1000])
    p.add_argument("--seed", default="3")
    p.add_argument("--fault-s", default="4")
    p.add_argument("--push-every-s", default="2")
    a = p.parse_args()
    sim = os.path.join(a.build, "ps_sim")
    for s in a.servers:
        w = 10 * s
        cmd = [sim, "--cluster", "--servers", str(s), "--workers", str(w),
               "--keys", str(200 * s), "--push-every-s", a.push_every_s,
               "--step-every-s", "0", "--fault-s", a.fault_s, "--seed", a.seed,
               "--crash-every-s", "1", "--join-every-s", "1", "--leave-every-s", "2",
               "--pause-every-s", "0", "--hang-s", "600"]
        t0 = time.time()
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wall = time.time() - t0
        rows = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
        if not rows:
            print(out.stdout[-2000:], file=sys.stderr)
            return 1
        r = rows[-1]
        changes = max(1, r["epochs"] - 1)
        print(json.dumps({
            "bench": "cluster_scale", "servers": s, "workers": w, "ok": r["ok"],
            "wall_s": round(wall, 2), "events": r["events"], "events_per_s": r["events_per_s"],
            "virtual_s": r["virtual_s"], "membership_changes": changes,
            "scheduler_us_per_change":
                round(1e6 * (r["scheduler_s"] - r["scheduler_start_s"]) / changes, 1),
            "scheduler_start_s": round(r["scheduler_start_s"], 3),
            "scheduler_beats_s": round(r["scheduler_beats_s"], 3),
            "servers_ring_us_per_change": round(1e6 * r["ring_change_s"] / changes, 1),
            "range_copy_messages_per_change": round(r["refill_messages"] / changes, 1),
            "handover_messages_per_change": round(r["handover_messages"] / changes, 1),
            "messages": r["messages"], "copy_messages": r["copy_messages"],
            "command": " ".join(cmd)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
