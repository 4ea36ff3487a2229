#!/usr/bin/python3
"""Draws the figures of docs/consistency.md from the deterministic simulator.

    /usr/bin/python3 scripts/plot_consistency.py [--sim build/ps_sim] [--out docs/img] [--quick]

Every figure comes from ps_sim runs whose exact command lines are printed (and written to
OUT/consistency_commands.txt); the numbers quoted in docs/consistency.md are printed at the end
(and written to OUT/consistency_numbers.json). Needs Debian's python3-matplotlib
(scripts/consistency-plots.sh installs it and builds ps_sim first).
"""
import argparse
import json
import math
import os
import subprocess
import sys
from multiprocessing import Pool

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

P = 100
SERVERS = 4
LATENCY = "0.01"
STEP_TIME = "exp:1"
BETA_PCT = [1, 5, 10, 20, 40, 80]
SSP_S = 4


def run(args):
    sim, extra = args
    cmd = [sim, "--servers", str(SERVERS), "--latency", LATENCY, "--step-time", STEP_TIME] + extra
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return " ".join(cmd), [json.loads(l) for l in out.splitlines()]


def policies(p):
    """The five policies of the report, with pBSP/pSSP at beta = 10% of p."""
    b = max(1, p * 10 // 100)
    return [("BSP", "bsp"), ("SSP(%d)" % SSP_S, "ssp:%d" % SSP_S), ("ASP", "asp"),
            ("pBSP(β=%d)" % b, "psp:%d:0" % b), ("pSSP(β=%d,s=%d)" % (b, SSP_S),
                                                  "psp:%d:%d" % (b, SSP_S))]


def cdf(ax, steps, label, **kw):
    xs = sorted(steps)
    ys = [(i + 1) / len(xs) for i in range(len(xs))]
    ax.step(xs, ys, where="post", label=label, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default="build/ps_sim")
    ap.add_argument("--out", default="docs/img")
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--quick", action="store_true", help="fewer seeds and shorter runs")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    seeds = 3 if a.quick else a.seeds
    horizon = 10 if a.quick else 30
    pool = Pool(2)
    commands, numbers = [], {}

    def batch(jobs):
        res = pool.map(run, [(a.sim, j) for j in jobs])
        commands.extend(c for c, _ in res)
        return [r for _, r in res]

    def summary(lines):
        return next(l for l in lines if l["type"] == "summary")

    # 1. Step distributions at a fixed time.
    t_snap = horizon
    specs = [(n, p) for n, p in policies(P)[:3]]
    specs += [("pBSP β=%d%%" % b, "psp:%d:0" % max(1, P * b // 100)) for b in BETA_PCT]
    specs += [("pSSP β=%d%%" % b, "psp:%d:%d" % (max(1, P * b // 100), SSP_S)) for b in BETA_PCT]
    res = batch([["--workers", str(P), "--policy", p, "--until", str(t_snap), "--snapshots",
                  str(t_snap), "--seed", "1"] for _, p in specs])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    snap = {}
    for (name, p), lines in zip(specs, res):
        steps = next(l for l in lines if l["type"] == "steps")["steps"]
        snap[name] = {"min": min(steps), "median": sorted(steps)[len(steps) // 2],
                      "max": max(steps)}
        for ax, prefix in ((axes[0], "pBSP"), (axes[1], "pSSP")):
            if name.startswith(prefix) or not name.startswith("p"):
                style = {"linewidth": 2.2, "linestyle": "--"} if not name.startswith("p") else {}
                cdf(ax, steps, name, **style)
    for ax, title in zip(axes, ("BSP, SSP(4), ASP and pBSP", "BSP, SSP(4), ASP and pSSP (s=4)")):
        ax.set_title("%s: steps of P=%d workers at t=%g" % (title, P, t_snap))
        ax.set_xlabel("completed steps")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("fraction of workers")
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "consistency_step_cdf.png"), dpi=110)
    plt.close(fig)
    numbers["step_snapshot"] = snap

    # 2. SGD loss against time, bands over seeds.
    fig, ax = plt.subplots(figsize=(8, 5))
    loss_final = {}
    for name, p in policies(P):
        res = batch([["--workers", str(P), "--policy", p, "--until", str(horizon), "--lr", "1",
                      "--loss-every", "0.5", "--seed", str(s)] for s in range(1, seeds + 1)])
        curves = [[(l["t"], l["loss"]) for l in lines if l["type"] == "loss"] for lines in res]
        n = min(len(c) for c in curves)
        ts = [curves[0][i][0] for i in range(n)]
        lo, med, hi = [], [], []
        for i in range(n):
            v = sorted(c[i][1] for c in curves)
            lo.append(v[0])
            med.append(v[len(v) // 2])
            hi.append(v[-1])
        line, = ax.plot(ts, med, label=name)
        ax.fill_between(ts, lo, hi, alpha=0.2, color=line.get_color())
        loss_final[name] = {"t=5 median": med[min(10, n - 1)], "final median": med[-1]}
    ax.set_yscale("log")
    ax.set_xlabel("virtual time (mean step time = 1)")
    ax.set_ylabel("test loss (least squares)")
    ax.set_title("SGD, P=%d workers, %s step times: median and min-max over %d seeds"
                 % (P, STEP_TIME, seeds))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "consistency_loss.png"), dpi=110)
    plt.close(fig)
    numbers["loss"] = loss_final

    # 3. Beta sweep at P = 100, 200, 400: does pBSP need a fixed fraction or a fixed beta?
    sweep = {}
    betas_abs = [1, 2, 5, 10, 20, 40, 80]
    for p in (100, 200, 400):
        jobs = [["--workers", str(p), "--policy", "psp:%d:0" % b, "--until", str(horizon),
                 "--seed", "1"] for b in betas_abs]
        res = batch(jobs)
        rows = []
        for b, lines in zip(betas_abs, res):
            s = summary(lines)
            lag = {int(k): v for k, v in s["read_lag"].items()}
            total = sum(lag.values())
            acc, p95 = 0, 0
            for k in sorted(lag):
                acc += lag[k]
                if acc >= 0.95 * total:
                    p95 = k
                    break
            mean = sum(k * v for k, v in lag.items()) / total
            rows.append({"beta": b, "rate": s["steps_per_time"], "lag_p95": p95,
                         "lag_mean": mean, "lag_max": max(lag)})
        sweep[p] = rows
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for p, rows in sweep.items():
        bs = [r["beta"] for r in rows]
        fr = [r["beta"] / p for r in rows]
        axes[0][0].plot(bs, [r["lag_mean"] for r in rows], "o-", label="P=%d" % p)
        axes[0][1].plot(fr, [r["lag_mean"] for r in rows], "o-", label="P=%d" % p)
        axes[1][0].plot(bs, [r["rate"] for r in rows], "o-", label="P=%d" % p)
        axes[1][1].plot(fr, [r["rate"] for r in rows], "o-", label="P=%d" % p)
    for i, what in enumerate(("mean read lag (steps ahead of the slowest)",
                              "steps per unit time per worker")):
        axes[i][0].set_xlabel("β (sampled workers)")
        axes[i][1].set_xlabel("β / P")
        for ax in axes[i]:
            ax.set_xscale("log")
            ax.set_ylabel(what)
            ax.grid(alpha=0.3)
            ax.legend()
    axes[0][0].set_title("pBSP against absolute β")
    axes[0][1].set_title("pBSP against the fraction β/P")
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "consistency_beta_sweep.png"), dpi=110)
    plt.close(fig)
    numbers["beta_sweep"] = sweep

    # 4. Staleness tail against the geometric bound, and the sampling primitive in place.
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    tails = {}
    betas = [1, 2, 5, 10, 20, 40]
    res = batch([["--workers", str(P), "--policy", "psp:%d:0" % b, "--until", str(horizon),
                  "--seed", "1"] for b in betas])
    for b, lines in zip(betas, res):
        s = summary(lines)
        lag = {int(k): v for k, v in s["read_lag"].items()}
        peer = {int(k): v for k, v in s["peer_lag"].items()}
        f0 = peer.get(0, 0) / sum(peer.values())  # a sampled peer passes (lag <= 0)
        total = sum(lag.values())
        rs = list(range(0, max(lag) + 2))
        tail = [sum(v for k, v in lag.items() if k >= r) / total for r in rs]
        bound = [(f0 ** b) ** r for r in rs]
        tails[b] = {"F": f0, "reads": s["checks"], "first_pass": s["first_pass"],
                    "expected_first_pass": s["expected_first_pass"],
                    "f_beta_sum": s["f_beta_sum"], "checks_per_read":
                    s["gate_checks"] / max(1, s["checks"]),
                    "tail": dict(zip(rs, tail)), "bound": dict(zip(rs, bound))}
        if b <= 20:
            line, = axes[1].semilogy(rs, tail, "o-", label="measured, β=%d" % b)
            axes[1].semilogy(rs, bound, "--", color=line.get_color(),
                             label="(F^β)^r, F=%.2f" % f0)
    axes[1].set_ylim(1e-5, 1.5)
    axes[1].set_xlabel("r (steps the reader is ahead of the slowest worker)")
    axes[1].set_ylabel("P(read lag ≥ r)")
    axes[1].set_title("pBSP, P=%d: staleness tail against (F^β)^r" % P)
    axes[1].grid(alpha=0.3)
    axes[1].legend(fontsize=7, ncol=2)
    rate = [tails[b]["first_pass"] / tails[b]["reads"] for b in betas]
    exact = [tails[b]["expected_first_pass"] / tails[b]["reads"] for b in betas]
    approx = [tails[b]["f_beta_sum"] / tails[b]["reads"] for b in betas]
    axes[0].semilogy(betas, rate, "o-", label="measured: reads passing their first check")
    axes[0].semilogy(betas, exact, "s--", label="expected: hypergeometric on each check's table")
    axes[0].semilogy(betas, approx, "^:", label="F^β on each check's table")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("β")
    axes[0].set_ylabel("fraction of reads")
    axes[0].set_title("pBSP, P=%d: one check lets a read through with probability ≤ F^β" % P)
    axes[0].grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "consistency_staleness_tail.png"), dpi=110)
    plt.close(fig)
    numbers["staleness_tail"] = tails

    with open(os.path.join(a.out, "consistency_commands.txt"), "w") as f:
        f.write("\n".join(commands) + "\n")
    with open(os.path.join(a.out, "consistency_numbers.json"), "w") as f:
        json.dump(numbers, f, indent=1, sort_keys=True)
    print(json.dumps(numbers, indent=1, sort_keys=True))
    print("wrote %d figures and %d commands to %s" % (4, len(commands), a.out),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
