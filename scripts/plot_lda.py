#!/usr/bin/env python3
"""Log-likelihood per token (and held-out perplexity where present) against wall-clock time
from ps_lda's JSON logs (--log_json), one line per run. Needs matplotlib (Debian:
python3-matplotlib; run it with /usr/bin/python3 if another python3 comes first on PATH).

  plot_lda.py "BSP=bsp.json" "SSP(1)=ssp1.json" ... --out lda.png
"""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="LABEL=LOG.json")
    p.add_argument("--out", required=True)
    p.add_argument("--title", default="")
    a = p.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_lda: matplotlib is missing (Debian: apt-get install python3-matplotlib)")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for run in a.runs:
        label, _, path = run.partition("=")
        if not path:
            sys.exit("plot_lda: %r is not LABEL=LOG.json" % run)
        rows = []
        with open(path) as f:
            for n, line in enumerate(f, 1):
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    sys.exit("plot_lda: %s:%d: not JSON: %s" % (path, n, e))
        ll = [(r["elapsed_s"], r["loglik"]) for r in rows if r["loglik"] is not None]
        ax1.plot([x for x, _ in ll], [y for _, y in ll], label=label)
        pp = [(r["elapsed_s"], r["perplexity"]) for r in rows if r["perplexity"] > 0]
        if pp:
            ax2.plot([x for x, _ in pp], [y for _, y in pp], marker="o", label=label)
    ax1.set_xlabel("wall-clock s")
    ax1.set_ylabel("log-likelihood per token")
    ax2.set_xlabel("wall-clock s")
    ax2.set_ylabel("held-out perplexity (document completion)")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend()
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("plot_lda: wrote %s" % a.out)


if __name__ == "__main__":
    main()
