#!/usr/bin/env python3
"""Runs the floor (bare ZeroMQ, TCP, memcpy) and kv_bench (1S/1W and 2S/2W) on this machine
and prints every measurement as a JSON line, then summary lines with the ratios that
docs/benchmarks.md quotes. Floors and ps numbers are taken in alternation (--rounds) because
this kind of machine drifts by 2x within minutes; the summary uses medians of the rounds.

    python3 bench/run_kv_bench.py [--build build] [--rounds 3] [--anchors PATH]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tracker"))
from pslaunch.common import with_hugepages  # noqa: E402


def malloc_env(env):
    """env for a floor or peer process: malloc set up as ps-launch sets it up for ps's
    processes (PS_HUGEPAGES, default on), so a ratio compares code, not allocators."""
    return with_hugepages(dict(env))


def lines_of(cmd):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         check=True, timeout=1800, env=malloc_env(os.environ)).stdout
    rows = []
    for line in out.splitlines():
        i = line.find("{")
        if i < 0:
            continue
        try:
            rows.append(json.loads(line[i:]))
        except ValueError:
            pass
    for r in rows:
        print(json.dumps(r), flush=True)
    return rows


def kv(build, s, w, only=None, env=()):
    cmd = [sys.executable, os.path.join(ROOT, "tracker", "ps-launch"), "-s", str(s), "-w", str(w),
           "--timeout", "1200"]
    for e in env:
        cmd += ["--env", e]
    cmd += ["--", os.path.join(build, "bench", "kv_bench")]
    if only:
        cmd += ["--only", only]
    return lines_of(cmd)


def pick(rows, **want):
    return [r for r in rows if all(r.get(k) == v for k, v in want.items())]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--anchors", default=os.path.join(ROOT, "..", "shared", "reference",
                                                     "anchors.json"))
    a = p.parse_args()
    floor_bin = os.path.join(a.build, "bench", "floor_bench")

    floor = lines_of([floor_bin])
    one = kv(a.build, 1, 1)
    two = kv(a.build, 2, 2)

    # Interleaved rounds for the throughput ratios.
    stream, stream_sum, dense4, dense4w, dense64, pull4, pull64 = [], [], [], [], [], [], []
    # 1M-key push and pull, 1S/1W, without and with key caching (filters: a key list sent
    # before travels as a 24-byte reference), interleaved.
    sparse = {"plain": [], "key_cache": []}
    rtt_ratio = [r["ratio_pushpull_to_bare_p50"] for r in pick(one, op="rtt_1key")]
    # What ZeroMQ alone costs for ps's layout and frames, against the one-connection floor.
    layouts = pick(floor, op="zmq_layouts")
    for _ in range(a.rounds):
        layouts += pick(lines_of([floor_bin, "--only", "zmq_layouts", "--iters", "10000"]),
                        op="zmq_layouts")
        f = lines_of([floor_bin, "--only", "zmq_stream"])
        stream += [r["MBps"] for r in pick(f, op="zmq_stream", window=4)]
        stream_sum += [r["MBps"] for r in pick(f, op="zmq_stream_sum", window=4)]
        d = kv(a.build, 1, 1, "dense")
        dense4 += [r["push_MBps"] for r in pick(d, op="dense", bytes=4 << 20, window=1)]
        pull4 += [r["pull_MBps"] for r in pick(d, op="dense", bytes=4 << 20, window=1)]
        dense4w += [r["push_MBps"] for r in pick(d, op="dense", bytes=4 << 20, window=4)]
        dense64 += [r["push_MBps"] for r in pick(d, op="dense", bytes=64 << 20, window=1)]
        pull64 += [r["pull_MBps"] for r in pick(d, op="dense", bytes=64 << 20, window=1)]
        for name, env in (("plain", ()), ("key_cache", ("PS_KEY_CACHE_MB=64",))):
            sparse[name] += pick(kv(a.build, 1, 1, "sparse", env), op="sparse", keys=1000000)
        rtt_ratio += [r["ratio_pushpull_to_bare_p50"]
                      for r in pick(kv(a.build, 1, 1, "rtt"), op="rtt_1key")]
    med = statistics.median
    summary = {
        "summary": "ratios",
        "rtt_pushpull_over_bare_zmq_p50": round(med(rtt_ratio), 3),
        "rtt_rounds": len(rtt_ratio),
        "zmq_two_connections_over_one_p50": round(med(r["ratio_two_to_one"] for r in layouts), 3),
        "zmq_ps_shape_over_one_p50": round(med(r["ratio_ps_shape_to_one"] for r in layouts), 3),
        "dense4MB_push_w4_over_zmq_stream_w4": round(med(dense4w) / med(stream), 3),
        "dense4MB_push_w4_over_zmq_stream_sum_w4": round(med(dense4w) / med(stream_sum), 3),
        "dense4MB_push_w1_over_zmq_stream_w4": round(med(dense4) / med(stream), 3),
        "dense64MB_over_4MB_push_per_byte": round(med(dense64) / med(dense4), 3),
        "dense64MB_over_4MB_pull_per_byte": round(med(pull64) / med(pull4), 3),
    }
    print(json.dumps(summary), flush=True)

    if os.path.exists(a.anchors):
        with open(a.anchors) as f:
            pl = json.load(f)["pslite_1server_1worker"]
        sp = {r["keys"]: r for r in pick(one, op="sparse")}
        rtt = pick(one, op="rtt_1key")[0]
        infl = pick(one, op="inflight_1key_push")[0]
        vs = {
            "summary": "over_pslite_1S1W",
            "rtt_p50": round(pl["pushpull_1key_round_trip_p50_us"] / rtt["pushpull_p50_us"], 2),
            "push_1M_keys": round(med(r["push_MBps"] for r in sparse["plain"])
                                  / pl["push_1M_keys_1float_values_MBps"], 2),
            "pull_1M_keys": round(med(r["pull_MBps"] for r in sparse["plain"])
                                  / pl["pull_1M_keys_1float_values_MBps"], 2),
            "push_1M_keys_key_cache": round(med(r["push_MBps"] for r in sparse["key_cache"])
                                            / pl["push_1M_keys_1float_values_MBps"], 2),
            "pull_1M_keys_key_cache": round(med(r["pull_MBps"] for r in sparse["key_cache"])
                                            / pl["pull_1M_keys_1float_values_MBps"], 2),
            "sparse_rounds": len(sparse["plain"]),
            "pushpull_1M_keys": round(sp[1000000]["pushpull_MBps"]
                                      / pl["pushpull_1M_keys_1float_values_MBps"], 2),
            "push_100K_keys": round(sp[100000]["push_MBps"] / pl["push_100K_keys_1float_values_MBps"], 2),
            "pull_100K_keys": round(sp[100000]["pull_MBps"] / pl["pull_100K_keys_1float_values_MBps"], 2),
            "push_1K_keys": round(sp[1000]["push_MBps"] / pl["push_1K_keys_1float_values_MBps"], 2),
            "push_4MB": round(med(dense4) / pl["push_4MB_dense_MBps"], 2),
            "push_64MB": round(med(dense64) / pl["push_64MB_dense_one_call_MBps"], 2),
            "inflight_64": round(infl["requests_per_s"]
                                 / pl["one_key_pushes_64_in_flight_requests_per_s"], 2),
        }
        print(json.dumps(vs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
