#!/usr/bin/env python3
"""Issue 17's bars that compare ps with itself or with ps-lite, each beside the floor of the
same shape on bare ZeroMQ, measured in alternation (--rounds): what one replica copy costs
(2 servers, 2 workers: the one-key push round trip and the 1M-key push, with PS_REPLICAS=1 and
0, against bench/chain_floor's bare relay) and 64 one-key pushes in flight (1 server, 1
worker, against floor_bench's zmq_inflight). Prints every measurement as a JSON line, then one
summary line of medians and ratios: ps's copy/no-copy ratios beside the floor's, and ps's
requests in flight as a share of the floor's.

    python3 bench/floor_ratios.py [--build build] [--rounds 3] [--van zmq] [--key-cache-mb N]

--key-cache-mb N also measures each round's 1M-key pushes with key caching on
(PS_KEY_CACHE_MB=N: a repeated key list travels as a reference, docs/filters.md).
"""
import argparse
import json
import os
import statistics

from run_kv_bench import pick
from van_bench import kv, rows_of

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def launch(a, s, w, env, only, extra=()):
    return kv(a, s, w, dict(env, PS_VAN=a.van), only, extra)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scale", type=float, default=0.5)
    p.add_argument("--van", default="zmq")
    p.add_argument("--key-cache-mb", type=int, default=0)
    a = p.parse_args()
    got = {}

    def add(key, value):
        got.setdefault(key, []).append(value)
        print(json.dumps({"bench": "floor_ratios", "round": rnd, key: value}), flush=True)

    floor = os.path.join(a.build, "bench", "floor_bench")
    for rnd in range(a.rounds):
        for r in rows_of([floor, "--only", "zmq_chain", "--iters", "4000"]):
            print(json.dumps(r), flush=True)
            if r.get("op") == "zmq_chain_rtt":
                add("floor_rtt_none_us", r["no_copy_p50_us"])
                add("floor_rtt_copy_us", r["copy_p50_us"])
            if r.get("op") == "zmq_chain_stream":
                add("floor_push1m_none_MBps", r["no_copy_MBps"])
                add("floor_push1m_copy_MBps", r["copy_MBps"])
        for replicas in ("0", "1"):
            tag = "copy" if replicas == "1" else "none"
            env = {"PS_REPLICAS": replicas}
            rtt = [r["push_p50_us"] for r in pick(launch(a, 2, 2, env, "rtt"), op="rtt_1key")]
            if rtt:
                add("ps_rtt_%s_us" % tag, statistics.mean(rtt))
            caching = [("", env)]
            if a.key_cache_mb > 0:
                caching.append(("_keycache", dict(env, PS_KEY_CACHE_MB=str(a.key_cache_mb))))
            for suffix, e in caching:
                push = [r["push_MBps"] for r in
                        pick(launch(a, 2, 2, e, "sparse", ["--keys", "1000000"]), op="sparse")]
                if len(push) == 2:
                    add("ps_push1m_%s%s_MBps" % (tag, suffix), sum(push))
        for r in rows_of([floor, "--only", "zmq_inflight", "--iters", "40000"]):
            print(json.dumps(r), flush=True)
            add("floor_inflight_%s_req_per_s" % r["layout"], r["requests_per_s"])
        infl = pick(launch(a, 1, 1, {}, "inflight"), op="inflight_1key_push")
        if infl:
            add("ps_inflight_req_per_s", infl[0]["requests_per_s"])
    med = {k: statistics.median(v) for k, v in got.items()}

    def ratio(x, y):
        return round(med[x] / med[y], 3) if x in med and y in med and med[y] else None

    med.update({
        "ps_rtt_copy_to_none": ratio("ps_rtt_copy_us", "ps_rtt_none_us"),
        "floor_rtt_copy_to_none": ratio("floor_rtt_copy_us", "floor_rtt_none_us"),
        "ps_push1m_copy_to_none": ratio("ps_push1m_copy_MBps", "ps_push1m_none_MBps"),
        "floor_push1m_copy_to_none": ratio("floor_push1m_copy_MBps", "floor_push1m_none_MBps"),
        "ps_push1m_none_to_floor": ratio("ps_push1m_none_MBps", "floor_push1m_none_MBps"),
        "ps_push1m_copy_to_floor": ratio("ps_push1m_copy_MBps", "floor_push1m_copy_MBps"),
        "ps_inflight_to_floor_ps_layout": ratio("ps_inflight_req_per_s",
                                                "floor_inflight_ps_req_per_s"),
    })
    print(json.dumps(dict({"bench": "floor_ratios", "summary": True, "van": a.van,
                           "rounds": a.rounds}, **med)), flush=True)


if __name__ == "__main__":
    main()
