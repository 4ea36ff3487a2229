#!/usr/bin/env python3
"""Objective (and test logloss) against time from ps_linear's JSON logs (--log_json), one line
per run, labelled by solver, barrier policy and tau. Needs matplotlib (Debian:
python3-matplotlib; run it with /usr/bin/python3 if another python3 comes first on PATH).

  plot_linear.py RUN.json [RUN.json ...] --out linear.png
"""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="+")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_linear: matplotlib is missing (Debian: apt-get install python3-matplotlib)")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for path in a.logs:
        rows = []
        with open(path) as f:
            for n, line in enumerate(f, 1):
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    sys.exit("plot_linear: %s:%d: not JSON: %s" % (path, n, e))
        if not rows:
            continue
        r = rows[0]
        label = "%s %s tau=%s (%d workers)" % (r["solver"], r["consistency"], r["tau"], r["workers"])
        t = [x["time_s"] for x in rows]
        ax1.plot(t, [x["objective"] for x in rows], marker=".", label=label)
        if "test_logloss" in r:
            ax2.plot(t, [x["test_logloss"] for x in rows], marker=".", label=label)
    for ax, what in ((ax1, "objective"), (ax2, "test logloss")):
        ax.set_xlabel("time (s)")
        ax.set_ylabel(what)
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("plot_linear: wrote %s" % a.out)


if __name__ == "__main__":
    main()
