#!/usr/bin/env python3
"""Bytes per DBPG iteration on the spam corpus with the filters on and off (docs/apps/linear.md):
2 servers, 2 workers, L1 = 1, 60 iterations each; one JSON line per configuration with the
bytes workers and servers sent per iteration and the final test logloss.

  python3 bench/run_linear_traffic.py [--build build] [--data data/spam] [--iterations 60]
"""
import argparse
import json
import re
import subprocess
import sys

CONFIGS = [
    ("none", ["PS_KEY_CACHE_MB=0"], ["--kkt=false"]),
    ("key cache", ["PS_KEY_CACHE_MB=256"], ["--kkt=false"]),
    ("key cache + snappy", ["PS_KEY_CACHE_MB=256", "PS_COMPRESS=snappy"], ["--kkt=false"]),
    ("key cache + auto", ["PS_KEY_CACHE_MB=256", "PS_COMPRESS=auto"], ["--kkt=false"]),
    ("KKT", ["PS_KEY_CACHE_MB=0"], ["--kkt=true"]),
    ("KKT + key cache + auto", ["PS_KEY_CACHE_MB=256", "PS_COMPRESS=auto"], ["--kkt=true"]),
    ("KKT + key cache + auto + significant 0", ["PS_KEY_CACHE_MB=256", "PS_COMPRESS=auto"],
     ["--kkt=true", "--significant", "0"]),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--data", default="data/spam")
    p.add_argument("--iterations", type=int, default=60)
    a = p.parse_args()
    for name, env, flags in CONFIGS:
        cmd = [sys.executable, "tracker/ps-launch", "-s", "2", "-w", "2", "--timeout", "600"]
        for e in env:
            cmd += ["--env", e]
        cmd += ["--", a.build + "/apps/linear/ps_linear", "--train", a.data + "/train.libsvm",
                "--test", a.data + "/test.libsvm", "--solver", "dbpg", "--l1", "1", "--l2", "0",
                "--iterations", str(a.iterations), "--eval_every", str(a.iterations),
                "--log_json", "/dev/stdout"] + flags
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True).stdout
        res = re.search(r"RESULT solver \S+ test_logloss (\S+)", out)
        servers = [int(x) for x in re.findall(r"SERVER_STATS rank \d+ bytes_sent (\d+)", out)]
        logs = [json.loads(m) for m in re.findall(r"^\[worker 0\] (\{.*\})$", out, re.M)]
        if not res or not logs or len(servers) != 2:
            sys.stdout.write(out[-3000:])
            sys.exit("run_linear_traffic: %s failed" % name)
        print(json.dumps({"bench": "linear_traffic", "config": name,
                          "worker0_bytes_per_iteration": logs[-1]["bytes_sent"] / a.iterations,
                          "servers_bytes_per_iteration": sum(servers) / a.iterations,
                          "test_logloss": float(res.group(1)), "env": env, "flags": flags}),
              flush=True)


if __name__ == "__main__":
    main()
