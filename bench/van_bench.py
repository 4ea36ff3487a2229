#!/usr/bin/env python3
"""ps over its two vans side by side: kv_bench (1S/1W and 2S/2W, replication on by default in
2S/2W) under PS_VAN=zmq, PS_VAN=ucx with UCX's own choice of transport (TCP over loopback: UCX 1.13
leaves shared memory out of an endpoint with peer error handling), PS_VAN=ucx with the shared
memory opt-in (UCX_MM_ERROR_HANDLING=y) and PS_VAN=ucx with UCX_TLS=tcp, taken in alternation
(--rounds); then
the floors of the same run (raw TCP, bare ZeroMQ, UCX over TCP and shared memory). Prints every
measurement as a JSON line, then one summary line per configuration (medians over rounds) and
the ratios issue 17's bars name.

    python3 bench/van_bench.py [--build build] [--rounds 3] [--scale 0.5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from run_kv_bench import pick

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIGS = [("zmq", {"PS_VAN": "zmq"}),
           ("ucx", {"PS_VAN": "ucx"}),
           ("ucx_shm", {"PS_VAN": "ucx", "UCX_MM_ERROR_HANDLING": "y"}),
           ("ucx_tcp", {"PS_VAN": "ucx", "UCX_TLS": "tcp"})]


def rows_of(cmd, env=None):
    e = dict(os.environ)
    e.update(env or {})
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


def kv(a, s, w, env):
    return rows_of([sys.executable, os.path.join(ROOT, "tracker", "ps-launch"), "-s", str(s),
                    "-w", str(w), "--timeout", "1200", "--",
                    os.path.join(a.build, "bench", "kv_bench"), "--scale", str(a.scale)], env)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scale", type=float, default=0.5)
    a = p.parse_args()
    got = {name: [] for name, _ in CONFIGS}
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
            m.update({"bench": "van", "config": name, "round": rnd})
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
