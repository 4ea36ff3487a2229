#!/usr/bin/env python3
"""ps over its two vans side by side: kv_bench (1S/1W and 2S/2W, replication on by default in
2S/2W) under PS_VAN=zmq, PS_VAN=ucx with UCX's own choice of transport (TCP over loopback: UCX 1.13
leaves shared memory out of an endpoint with peer error handling), PS_VAN=ucx with the shared
memory opt-in (UCX_MM_ERROR_HANDLING=y) and PS_VAN=ucx with UCX_TLS=tcp, and the round trip alone
with the busy-polling opt-in (PS_UCX_BUSY_POLL_US=200, over TCP and over shared memory), taken in
alternation (--rounds); then the floors of the same run (raw TCP, bare ZeroMQ, UCX over TCP and
shared memory). Prints every measurement as a JSON line, then one summary line per configuration
(medians over rounds), one line of ratios per configuration (the round trip over the raw TCP
ping-pong, throughput over issue 17's ps-lite figures, dense pushes over the stream floor of the
same transport: 2S/2W is the sum of both workers, with replication on) and the floors.

    python3 bench/van_bench.py [--build build] [--rounds 3] [--scale 0.5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from run_kv_bench import malloc_env, pick

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIGS = [("zmq", {"PS_VAN": "zmq"}),
           ("ucx", {"PS_VAN": "ucx"}),
           ("ucx_shm", {"PS_VAN": "ucx", "UCX_MM_ERROR_HANDLING": "y"}),
           ("ucx_tcp", {"PS_VAN": "ucx", "UCX_TLS": "tcp"})]
# The busy-polling opt-in (PS_UCX_BUSY_POLL_US): round trips only, 1S/1W.
BUSY = [("ucx_busy", {"PS_VAN": "ucx", "PS_UCX_BUSY_POLL_US": "200"}),
        ("ucx_shm_busy", {"PS_VAN": "ucx", "UCX_MM_ERROR_HANDLING": "y",
                          "PS_UCX_BUSY_POLL_US": "200"})]
# Issue 17's ps-lite figures (1S/1W and 2S/2W, same harness, medians of 3 rounds).
PSLITE = {"inflight64_req_per_s": 158000, "push_1000k_MBps_1S1W": 477,
          "push_1000k_MBps_2S2W": 547}


def rows_of(cmd, env=None):
    e = malloc_env(dict(os.environ, **(env or {})))
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         env=e, timeout=1800).stdout
    rows = []
    for line in out.splitlines():
        i = line.find("{")
        if i >= 0:
            try:
                rows.append(json.loads(line[i:]))
            except ValueError:
                pass
    return rows


def kv(a, s, w, env, only=None, extra=()):
    """kv_bench through ps-launch with s servers and w workers; extra: more kv_bench flags."""
    return rows_of([sys.executable, os.path.join(ROOT, "tracker", "ps-launch"), "-s", str(s),
                    "-w", str(w), "--timeout", "1200", "--",
                    os.path.join(a.build, "bench", "kv_bench"), "--scale", str(a.scale)] +
                   (["--only", only] if only else []) + list(extra), env)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scale", type=float, default=0.5)
    a = p.parse_args()
    got = {name: [] for name, _ in CONFIGS + BUSY}
    floors = []
    for rnd in range(a.rounds):
        floors += rows_of([os.path.join(a.build, "bench", "floor_bench")])
        for name, env in CONFIGS:
            one, two = kv(a, 1, 1, env), kv(a, 2, 2, env)
            m = {}
            rtt = pick(one, op="rtt_1key")
            if rtt:
                m["rtt_p50_us"] = rtt[0]["pushpull_p50_us"]
            for r in pick(one, op="sparse"):
                m["push_%dk_MBps_1S1W" % (r["keys"] // 1000)] = r["push_MBps"]
            for r in pick(two, op="sparse", worker=0):
                m["push_%dk_MBps_2S2W_w0" % (r["keys"] // 1000)] = r["push_MBps"]
            for r in pick(one, op="dense"):
                m["dense_%dMB_w%d_MBps" % (r["bytes"] >> 20, r["window"])] = r["push_MBps"]
            inf = pick(one, op="inflight_1key_push")
            if inf:
                m["inflight64_req_per_s"] = inf[0]["requests_per_s"]
            for r in pick(two, op="sparse"):
                key = "push_%dk_MBps_2S2W" % (r["keys"] // 1000)  # the sum of the workers
                m[key] = round(m.get(key, 0) + r["push_MBps"], 1)
            m.update({"bench": "van", "config": name, "round": rnd})
            print(json.dumps(m), flush=True)
            got[name].append(m)
        for name, env in BUSY:
            rtt = pick(kv(a, 1, 1, env, "rtt"), op="rtt_1key")
            m = {"bench": "van", "config": name, "round": rnd}
            if rtt:
                m["rtt_p50_us"] = rtt[0]["pushpull_p50_us"]
            print(json.dumps(m), flush=True)
            got[name].append(m)
    for f in floors:
        print(json.dumps(f))
    med = statistics.median
    for name, rows in got.items():
        keys = sorted({k for r in rows for k in r if k not in ("bench", "config", "round")})
        s = {"summary": "van", "config": name, "rounds": len(rows)}
        for k in keys:
            vals = [r[k] for r in rows if k in r]
            s[k] = round(med(vals), 1) if vals else None
        print(json.dumps(s), flush=True)

    def floor(op, **kw):
        vals = [r.get("p50_us", r.get("MBps")) for r in pick(floors, op=op, **kw)
                if "error" not in r]
        return med(vals) if vals else None
    summary = {}
    for name in got:
        summary[name] = {}
        for r in got[name]:
            for k, v in r.items():
                if k not in ("bench", "config", "round"):
                    summary[name].setdefault(k, []).append(v)
        summary[name] = {k: med(v) for k, v in summary[name].items()}
    tcp = floor("tcp_pingpong")
    ucx_tcp = floor("ucx_stream", tls="tcp", window=4)  # UCX's choice over loopback is TCP
    streams = {"zmq": floor("zmq_stream", window=4), "ucx": ucx_tcp, "ucx_tcp": ucx_tcp,
               "ucx_shm": floor("ucx_stream", tls="sm,self,tcp", window=4)}
    for name, m in summary.items():
        r = {"summary": "ratios", "config": name}
        if m.get("rtt_p50_us") and tcp:
            r["rtt_over_tcp_pingpong"] = round(m["rtt_p50_us"] / tcp, 3)
        for k, ref in PSLITE.items():
            if m.get(k):
                r[k + "_over_pslite"] = round(m[k] / ref, 2)
        if m.get("dense_4MB_w4_MBps") and streams.get(name):
            r["dense_4MB_over_stream_floor"] = round(m["dense_4MB_w4_MBps"] / streams[name], 2)
        if m.get("push_1000k_MBps_2S2W") and streams.get(name):
            # What the transport alone allows: per 1M-key push of each worker (12 bytes a key,
            # 4 of them the value), the servers receive 24 MB from the workers and, with one
            # copy, send each other 24 MB more; the stream floor (two processes, both cores)
            # moves bytes at most that fast, so the values go at most at floor * 8 / 48.
            ceiling = streams[name] * 8 / 48
            r["push_1000k_2S2W_transport_ceiling_MBps"] = round(ceiling, 1)
            r["push_1000k_2S2W_over_ceiling"] = round(m["push_1000k_MBps_2S2W"] / ceiling, 2)
        if m.get("dense_64MB_w1_MBps") and m.get("dense_4MB_w1_MBps"):
            r["dense_64MB_over_4MB"] = round(m["dense_64MB_w1_MBps"] / m["dense_4MB_w1_MBps"], 2)
        print(json.dumps(r), flush=True)
    print(json.dumps({"summary": "floors", "tcp_pingpong_p50_us": floor("tcp_pingpong"),
                      "zmq_pingpong_p50_us": floor("zmq_pingpong"),
                      "ucx_tcp_rtt_p50_us": floor("ucx_pingpong", tls="tcp"),
                      "ucx_shm_rtt_p50_us": floor("ucx_pingpong", tls="sm,self,tcp"),
                      "ucx_tcp_busy_rtt_p50_us": floor("ucx_pingpong_busy", tls="tcp"),
                      "ucx_tcp_stream4MB_w4_MBps": floor("ucx_stream", tls="tcp", window=4),
                      "ucx_shm_stream4MB_w4_MBps": floor("ucx_stream", tls="sm,self,tcp",
                                                         window=4)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
