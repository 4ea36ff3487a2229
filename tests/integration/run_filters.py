#!/usr/bin/env python3
"""Filters over real processes: the filter job (tests/integration/filter_job.cc) with
PS_COMPRESS=off, auto, delta, zero and snappy. Results must be exact in every mode, and the
workers' own byte counts (their stats line, bytes before and after each codec) must show the
savings the issue asks for: sorted keys with gaps below 1000 at least 3x smaller with
delta-varint, values with 90% zeros at least 5x smaller with zero suppression and 4x with Snappy.
Then key caching (>= 45% fewer bytes; the servers' replica copies refer to cached lists too) and the significantly-modified filter at threshold 0
(pulls after every round exact, most values left to the workers' copies).
"""
import argparse
import json
import re
import subprocess
import sys


def run(a, mode, extra_env=(), job_args=("--rounds", "6")):
    cmd = [sys.executable, a.launcher, "-s", "2", "-w", "2", "--timeout", "240",
           "--env", "PS_COMPRESS=" + mode, "--env", "PS_HEARTBEAT_TIMEOUT_MS=5000"]
    for e in extra_env:
        cmd += ["--env", e]
    cmd += ["--", a.job, "--keys", "200000"] + list(job_args)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ok = [json.loads(x) for x in
          re.findall(r"^\[worker \d+\] OK worker \d+ checked \d+ values (\{.*\})$", p.stdout, re.M)]
    a.last_stats = ok
    a.server_stats = [json.loads(x) for x in
                      re.findall(r"^\[server \d+\] STATS (\{.*\})$", p.stdout, re.M)]
    return p.returncode, p.stdout, [x["filters"]["sent"] for x in ok]


def ratio(sent, codec):
    t = [s[codec] for s in sent if codec in s]
    if not t:
        return 0.0
    return sum(x["raw"] for x in t) / float(sum(x["wire"] for x in t))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--job", required=True)
    a = p.parse_args()
    failures = []
    want = {"auto": [("keys:delta", 3.0), ("values:zero", 5.0)],
            "delta": [("keys:delta", 3.0)], "zero": [("values:zero", 5.0)],
            "snappy": [("values:snappy", 4.0)], "off": []}
    for mode, checks in want.items():
        rc, out, sent = run(a, mode)
        if rc != 0 or len(sent) != 2:
            sys.stdout.write(out)
            failures.append("%s: exit %d, %d exact workers of 2" % (mode, rc, len(sent)))
            continue
        got = {c: round(ratio(sent, c), 2) for c, _ in checks}
        print("PS_COMPRESS=%s: results exact; raw/wire per codec %s" % (mode, got), flush=True)
        for c, bar in checks:
            if got[c] < bar:
                failures.append("%s: %s shrank %.2fx, want >= %.1fx" % (mode, c, got[c], bar))
        if mode == "off" and any(not k.endswith(":none") for s in sent for k in s):
            failures.append("off: some frame was encoded: %s" % sent)
    # Key caching: the same key list pushed 20 times, 1 float per key; the workers' bytes on
    # the wire must drop by at least 45%.
    sent_bytes = {}
    for mb in ("0", "64"):
        rc, out, sent = run(a, "off", ["PS_KEY_CACHE_MB=" + mb], ("--rounds", "20", "--float", "1"))
        if rc != 0 or len(sent) != 2:
            sys.stdout.write(out)
            failures.append("key cache %s MB: exit %d, %d exact workers of 2" % (mb, rc, len(sent)))
            continue
        sent_bytes[mb] = sum(x["bytes_sent"] for x in a.last_stats)
        hits = sum(s.get("keys:keycache", {}).get("frames", 0) for s in sent)
        print("PS_KEY_CACHE_MB=%s: results exact; workers sent %d bytes; %d key lists sent as "
              "references" % (mb, sent_bytes[mb], hits), flush=True)
        if mb == "64" and hits == 0:
            failures.append("key cache on, but no key list was sent as a reference")
        # The servers' copies to their replicas (one copy each, the default with 2 servers)
        # refer to the lists too.
        copies = sum(s["filters"]["sent"].get("keys:keycache", {}).get("frames", 0)
                     for s in a.server_stats)
        print("PS_KEY_CACHE_MB=%s: servers sent %d bytes; %d key lists of replica copies sent "
              "as references" % (mb, sum(s["bytes_sent"] for s in a.server_stats), copies),
              flush=True)
        if len(a.server_stats) != 2:
            failures.append("key cache %s MB: %d server stats lines of 2" % (mb, len(a.server_stats)))
        elif mb == "64" and copies == 0:
            failures.append("key cache on, but no replica copy referred to a cached key list")
    if len(sent_bytes) == 2:
        saved = 1 - sent_bytes["64"] / float(sent_bytes["0"])
        print("key caching saved %.1f%% of the workers' bytes" % (100 * saved), flush=True)
        if saved < 0.45:
            failures.append("key caching saved only %.1f%%, want >= 45%%" % (100 * saved))
    # Significantly-modified filter at threshold 0: a pull of every key after each round, exact;
    # about 19% of the keys change per round (10% per worker), so most values stay home.
    rc, out, sent = run(a, "off", (), ("--rounds", "6", "--float", "1", "--significant", "0"))
    sig = [tuple(map(int, m)) for m in
           re.findall(r"^\[server \d+\] SIGNIFICANT sent (\d+) suppressed (\d+) epochs (\d+)$",
                      out, re.M)]
    if rc != 0 or len(sent) != 2 or len(sig) != 2:
        sys.stdout.write(out)
        failures.append("significant: exit %d, %d exact workers of 2, %d server lines"
                        % (rc, len(sent), len(sig)))
    else:
        s_sent, s_supp = sum(x[0] for x in sig), sum(x[1] for x in sig)
        print("significantly-modified filter at 0: every pull exact; servers sent %d values and "
              "left %d (%.1f%%) to the workers' copies" % (s_sent, s_supp,
                                                          100.0 * s_supp / max(1, s_sent + s_supp)),
              flush=True)
        if s_supp < 2 * s_sent:
            failures.append("significant: only %d of %d values suppressed" % (s_supp, s_sent + s_supp))
    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
