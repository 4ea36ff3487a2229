#!/usr/bin/env python3
"""Sampling throughput of apps/lda: the whole job (ps-launch, S servers, W workers) and the
serial sampler, at each K given, as JSON lines; then one summary line per build with the cost
ratio per token of the largest K to the smallest (issue 16's bar: K = 1000 at most 1.5x K = 100).

Builds (--build, repeatable) and K values are run in alternation (--rounds), because this kind
of machine drifts by 2x within minutes; summaries use medians over rounds. A job's throughput
is the median over its iterations after --warmup of worker 0's "tokens/s" (all workers' tokens
over worker 0's iteration time), with the medians of its pull, sample and push times.

    ./scripts/fetch-lda-data.sh
    python3 bench/lda_bench.py [--build build] [--data data/sotu] [--topics 100 1000]
                               [--rounds 3] [--iterations 20] [--servers 1] [--workers 2]
"""
import argparse
import json
import os
import shlex
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LINE = re.compile(r"\[worker 0\] iteration (\d+) loglik/token \S+ changed \S+ tokens/s (\S+) "
                  r"nnz \d+ time \S+ s \(pull (\S+) sample (\S+) push (\S+) wait (\S+)\)")
SERIAL = re.compile(r"iteration (\d+) loglik/token \S+ changed \S+ tokens/s (\S+)")


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=3600)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-4000:])
        sys.exit("lda_bench: %s exited with %d" % (" ".join(cmd), p.returncode))
    return p.stdout


def corpus_flags(a, k):
    d = a.data
    return ["--train", os.path.join(d, "train.txt"), "--vocab", os.path.join(d, "vocab.txt"),
            "--topics", str(k), "--iterations", str(a.iterations), "--eval_every", "0",
            "--top_words", "0"] + shlex.split(a.job_flags)


def job(a, build, k):
    out = run([sys.executable, os.path.join(ROOT, "tracker", "ps-launch"), "-s", str(a.servers),
               "-w", str(a.workers), "--timeout", "3000", "--",
               os.path.join(build, "apps", "lda", "ps_lda")] + corpus_flags(a, k))
    rows = [m.groups() for m in LINE.finditer(out)]
    rows = [r for r in rows if int(r[0]) > a.warmup]
    if not rows:
        sys.exit("lda_bench: no progress lines after iteration %d" % a.warmup)
    med = lambda i: statistics.median(float(r[i]) for r in rows)  # noqa: E731
    return {"bench": "lda_job", "build": build, "topics": k, "servers": a.servers,
            "workers": a.workers, "iterations": len(rows), "tokens_per_s": med(1),
            "pull_s": med(2), "sample_s": med(3), "push_s": med(4), "wait_s": med(5)}


def serial(a, build, k):
    out = run([os.path.join(build, "apps", "lda", "ps_lda"), "--serial"] + corpus_flags(a, k))
    rows = [float(m.group(2)) for m in SERIAL.finditer(out) if int(m.group(1)) > a.warmup]
    return {"bench": "lda_serial", "build": build, "topics": k, "iterations": len(rows),
            "tokens_per_s": statistics.median(rows)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", action="append")
    p.add_argument("--data", default=os.path.join(ROOT, "data", "sotu"))
    p.add_argument("--topics", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--servers", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--no-serial", action="store_true")
    p.add_argument("--job-flags", default="", help="more ps_lda flags, as one string")
    a = p.parse_args()
    builds = a.build or [os.path.join(ROOT, "build")]
    if a.warmup >= a.iterations:
        sys.exit("lda_bench: --warmup must be below --iterations")
    for f in ("train.txt", "vocab.txt"):
        if not os.path.exists(os.path.join(a.data, f)):
            sys.exit("lda_bench: %s missing (run ./scripts/fetch-lda-data.sh)" %
                     os.path.join(a.data, f))
    seen = []
    for _ in range(a.rounds):
        for build in builds:
            for k in a.topics:
                rows = [job(a, build, k)]
                if not a.no_serial:
                    rows.append(serial(a, build, k))
                for r in rows:
                    print(json.dumps(r), flush=True)
                seen += rows
    lo, hi = min(a.topics), max(a.topics)
    for build in builds:
        for kind in ("lda_job", "lda_serial"):
            tps = {k: statistics.median(r["tokens_per_s"] for r in seen if r["build"] == build
                                        and r["bench"] == kind and r["topics"] == k)
                   for k in a.topics if any(r["bench"] == kind for r in seen)}
            if not tps:
                continue
            print(json.dumps({"bench": kind + "_summary", "build": build, "rounds": a.rounds,
                              "tokens_per_s": tps,
                              "cost_ratio_%d_to_%d" % (hi, lo): tps[lo] / tps[hi]}), flush=True)


if __name__ == "__main__":
    main()
