#!/usr/bin/env python3
"""apps/lda with real processes over loopback, on a corpus the test makes (seeded): 12 planted
topics over 600 words, 1500 training and 150 test documents.

  exact       one worker under BSP reproduces the serial run (ps_lda --serial, same seed) line
              for line: log-likelihood and changes of every iteration, and the final
              perplexity; once pulling the whole sparse table, once pulling its rows as key
              ranges with every word's row sparse; and training reached the planted topics'
              perplexity range.
  invariant   2 servers (one replica each) and 2 workers under SSP(1), BSP and ASP: every run
              ends with the count invariant (each topic total is its column's sum, the totals
              add up to the corpus) checked twice, by the app and here from its model file;
              the staleness each progress line reports is 0 under BSP and at most 1 under
              SSP(1).
  kill_server 3 servers with one replica, 2 workers: SIGKILL to a server mid-training;
              training goes on to the end with the invariant intact.
  kill_worker 2 servers, 3 workers under SSP(1), BSP and ASP: SIGKILL to worker 1 at a seeded
              moment mid-training; worker 0 takes its data parts over and rebuilds the counts
              from the saved assignments; every iteration runs and the counts equal those of
              the final assignments of every document (checked by the app), the invariant
              holds in the model file. Then the same with worker 0, the coordinator, killed:
              worker 1 takes over coordinating, worker 0's parts and the report; and worker 2
              killed, then worker 0 in the middle of the pause for it (as it takes worker 2's
              parts over): worker 1 calls a pause of its own and ends the job alone.
"""
import argparse
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile

from kills import killer, track_pid

K_PLANTED, V = 12, 600


def make_data(d, seed):
    rng = random.Random(seed)
    topics = []
    for k in range(K_PLANTED):
        weights = [(1.0 + rng.random()) if w % K_PLANTED == k else 0.002 for w in range(V)]
        s = sum(weights)
        topics.append([x / s for x in weights])
    freq = [0] * V

    def doc():
        theta = [-math.log(1.0 - rng.random()) for _ in range(K_PLANTED)]
        words = []
        for _ in range(rng.randint(40, 120)):
            k = rng.choices(range(K_PLANTED), weights=theta)[0]
            words.append(rng.choices(range(V), weights=topics[k])[0])
        return words

    train = [doc() for _ in range(1500)]
    test = [doc() for _ in range(150)]
    for dd in train:
        for w in dd:
            freq[w] += 1
    with open(os.path.join(d, "vocab.txt"), "w") as f:
        for w in range(V):
            f.write("w%d\t%d\n" % (w, freq[w]))
    for name, docs in (("train", train), ("test", test)):
        with open(os.path.join(d, name + ".txt"), "w") as f:
            for dd in docs:
                f.write(" ".join(map(str, dd)) + "\n")
    return sum(len(dd) for dd in train)


def flags(d, extra):
    return ["--train", os.path.join(d, "train.txt"), "--test", os.path.join(d, "test.txt"),
            "--vocab", os.path.join(d, "vocab.txt"), "--topics", str(K_PLANTED), "--alpha",
            "0.1", "--eval_every", "0", "--top_words", "3"] + extra


def run(cmd, on_line=None):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in p.stdout:
        lines.append(line)
        if on_line:
            on_line(line)
    p.wait()
    return p.returncode, "".join(lines)


def launch(a, d, servers, workers, extra, env=(), allow=(), on_line=None):
    cmd = [sys.executable, a.launcher, "-s", str(servers), "-w", str(workers), "--timeout", "240"]
    for e in env:
        cmd += ["--env", e]
    for flag in allow:  # a flag, or (flag, number)
        cmd += [flag, "1"] if isinstance(flag, str) else [flag[0], str(flag[1])]
    return run(cmd + ["--", a.job] + flags(d, extra), on_line)


def fail(why, out=""):
    sys.stdout.write(out[-6000:])
    print("FAILED: " + why, flush=True)
    sys.exit(1)


def iterations(out):
    """(iteration, loglik/token, changed) of every progress line."""
    return [(int(m.group(1)), m.group(2), m.group(3)) for m in
            re.finditer(r"iteration (\d+) loglik/token (\S+) changed (\S+)", out)]


def result(out):
    m = re.search(r"RESULT (?:serial tokens/s \S+ )?(?:loglik/token \S+ )?perplexity (\S+)", out)
    return float(m.group(1)) if m else None


def check_model(path, tokens):
    """The invariant from the model file alone."""
    with open(path) as f:
        head = f.readline().split()
        K = int(head[1])
        totals = [int(x) for x in f.readline().split()[1:]]
        columns = [0] * K
        for line in f:
            for cell in line.split()[1:]:
                t, n = cell.split(":")
                if int(n) < 0:
                    return "a negative count"
                columns[int(t)] += int(n)
    if columns != totals:
        return "topic totals %s differ from the column sums %s" % (totals, columns)
    if sum(totals) != tokens:
        return "the totals add up to %d, the corpus has %d tokens" % (sum(totals), tokens)
    return ""


def exact(a, d, tokens):
    it = ["--iterations", "30"]
    rc, serial = run([a.job, "--serial"] + flags(d, it))
    if rc != 0:
        fail("the serial run failed (exit %d)" % rc, serial)
    s = iterations(serial)
    ps = result(serial)
    # Both ways of pulling the sparse table (the whole table, the worker's rows as key ranges)
    # must give the sampler the same counts; the second run keeps every word's row in it.
    for pull, dense_min in (("table", "0"), ("rows", "1000000000")):
        rc, one = launch(a, d, 1, 1, it + ["--consistency", "bsp", "--sparse_pull", pull,
                                           "--dense_min", dense_min])
        if rc != 0:
            fail("the 1-worker run (--sparse_pull %s) failed (exit %d)" % (pull, rc), one)
        o = iterations(one)
        if len(s) != 30 or s != o:
            for x, y in zip(s, o):
                if x != y:
                    print("first difference: serial %s, 1 worker %s" % (x, y))
                    break
            fail("the 1-worker BSP run (--sparse_pull %s) does not reproduce the serial run "
                 "(%d and %d lines)" % (pull, len(s), len(o)), one)
        po = result(one)
        print("exact: --sparse_pull %s: 30 iterations alike, log-likelihood %s -> %s per token; "
              "perplexity serial %.3f, 1 worker %.3f" % (pull, s[0][1], s[-1][1], ps, po),
              flush=True)
        if abs(ps - po) > 1e-3 * ps:
            fail("perplexities differ: %.4f vs %.4f" % (ps, po), one)
    # Learned something: the log-likelihood rose by more than a nat per token, and held-out
    # documents score better than under a uniform model (perplexity V).
    if float(s[-1][1]) < float(s[0][1]) + 1.0 or not ps < 0.95 * V:
        fail("no learning: log-likelihood %s -> %s, perplexity %.1f" % (s[0][1], s[-1][1], ps),
             serial)


def invariant(a, d, tokens):
    for policy, pull in (("ssp:1", "rows"), ("bsp", "table"), ("asp", "auto")):
        model = os.path.join(d, "model_%s.txt" % policy.replace(":", ""))
        rc, out = launch(a, d, 2, 2, ["--iterations", "15", "--consistency", policy,
                                      "--sparse_pull", pull, "--model_out", model] +
                         (["--dense_min", "1000000000"] if pull == "rows" else []),
                         env=("PS_REPLICAS=1",))
        if rc != 0 or "INVARIANT ok" not in out:
            fail("%s: exit %d, the app's invariant check: %s" % (
                policy, rc, re.findall(r"INVARIANT.*", out)), out)
        why = check_model(model, tokens)
        if why:
            fail("%s: %s" % (policy, why), out)
        # The staleness each line reports (the mean over the workers of the steps between the
        # iteration and the server clock its pull read) is what the policy allows.
        stale = [float(x) for x in re.findall(r"iteration \d+ .* stale (\S+)", out)]
        bound = {"bsp": 0.0, "ssp:1": 1.0}.get(policy)
        if len(stale) != 15 or (bound is not None and max(stale) > bound):
            fail("%s: staleness per line %s (at most %s)" % (policy, stale, bound), out)
        print("invariant: %s, 2 servers and 2 workers: counts exact (%d tokens), perplexity %.2f, "
              "staleness at most %.2f" % (policy, tokens, result(out), max(stale)), flush=True)


def kill_server(a, d, tokens):
    state = {"pids": {}, "killed": None}
    on_line = killer(state, "server", 1, 5)

    model = os.path.join(d, "model_kill.txt")
    # Slow enough (one iteration takes a few ms here) that the kill lands mid-training.
    rc, out = launch(a, d, 3, 2, ["--iterations", "400", "--consistency", "ssp:1",
                                  "--model_out", model],
                     env=("PS_REPLICAS=1", "PS_HEARTBEAT_INTERVAL_MS=100",
                          "PS_HEARTBEAT_TIMEOUT_MS=1000"),
                     allow=("--allow-dead-servers",), on_line=on_line)
    if state["killed"] is None:
        fail("nothing was killed", out)
    last = iterations(out)
    if rc != 0 or "INVARIANT ok" not in out or not last or last[-1][0] != 400:
        fail("exit %d after the kill; last iteration %s; %s" % (
            rc, last[-1][0] if last else None, re.findall(r"INVARIANT.*", out)), out)
    why = check_model(model, tokens)
    if why:
        fail(why, out)
    print("kill_server: server 1 killed after iteration %d; all 400 iterations ran, counts exact"
          % state["killed"], flush=True)


def kill_worker(a, d, tokens):
    rng = random.Random(a.seed)
    # The last case kills worker 1 as worker 0 ends: worker 1 is in its last iterations or
    # already done (then its counts are final and nothing is taken over).
    for policy, late, victim in (("ssp:1", False, 1), ("bsp", False, 1), ("asp", False, 1),
                                 ("ssp:1", True, 1), ("ssp:1", False, 0)):
        at = rng.randint(296, 300) if late else rng.randint(5, 60)
        state = {"pids": {}, "killed": None}
        on_line = killer(state, "worker", victim, at)

        model = os.path.join(d, "model_kill_worker.txt")
        # Under SSP every row is sparse and pulled as a key range: the worker that takes parts
        # over pulls the rows of its new words.
        rows = ["--sparse_pull", "rows", "--dense_min", "1000000000"] if policy == "ssp:1" else []
        rc, out = launch(a, d, 2, 3, ["--iterations", "300", "--consistency", policy,
                                      "--checkpoint_every", "7", "--model_out", model] + rows,
                         env=("PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000"),
                         allow=("--allow-dead-workers",), on_line=on_line)
        if state["killed"] is None:
            fail("%s: nothing was killed" % policy, out)
        last = iterations(out)
        inv = re.findall(r"INVARIANT.*", out)
        if rc != 0 or not inv or "INVARIANT ok" not in inv[0] or \
                "= the counts of the final assignments" not in inv[0]:
            fail("%s: exit %d after worker %d was killed (seed %d); %s" % (
                policy, rc, victim, a.seed, inv), out)
        if not last or last[-1][0] != 300:
            fail("%s: the last iteration printed is %s" % (policy, last[-1][0] if last else None),
                 out)
        heir = 1 if victim == 0 else 0
        taken = ("worker %d takes over data part" % heir) in out and "counts rebuilt" in out
        if not taken and not late:
            fail("%s: worker %d's parts were not taken over" % (policy, victim), out)
        if victim == 0 and "worker 1 coordinates from now on" not in out:
            fail("%s: no worker took over coordinating" % policy, out)
        why = check_model(model, tokens)
        if why:
            fail("%s: %s" % (policy, why), out)
        print("kill_worker: %s, worker %d killed after iteration %d (seed %d): parts %s, "
              "counts = those of the final assignments" % (
                  policy, victim, state["killed"], a.seed,
                  "taken over" if taken else "were done"), flush=True)


def kill_coordinator_in_pause(a, d, tokens):
    rng = random.Random(a.seed * 7 + 1)
    at = rng.randint(5, 60)
    state = {"pids": {}, "killed": []}

    def on_line(line):
        track_pid(state, line)
        m = re.match(r"\[worker 0\] iteration (\d+) ", line)
        if m and not state["killed"] and int(m.group(1)) >= at:
            os.kill(state["pids"][("worker", 2)], signal.SIGKILL)  # by PID, never by name
            state["killed"].append(("worker 2", int(m.group(1))))
            print("SIGKILL to worker 2 after iteration %s" % m.group(1), flush=True)
        if "[worker 0] worker 0 takes over data part" in line and len(state["killed"]) == 1:
            os.kill(state["pids"][("worker", 0)], signal.SIGKILL)
            state["killed"].append(("worker 0", "in the pause"))
            print("SIGKILL to worker 0 as it takes worker 2's parts over", flush=True)

    model = os.path.join(d, "model_kill_coordinator.txt")
    rc, out = launch(a, d, 2, 3, ["--iterations", "300", "--consistency", "ssp:1",
                                  "--checkpoint_every", "7", "--model_out", model],
                     env=("PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000"),
                     allow=(("--allow-dead-workers", 2),), on_line=on_line)
    if len(state["killed"]) != 2:
        fail("killed %s, not worker 2 and then worker 0 in the pause" % state["killed"], out)
    inv = re.findall(r"INVARIANT.*", out)
    last = iterations(out)
    if rc != 0 or not inv or "INVARIANT ok" not in inv[0] or \
            "= the counts of the final assignments" not in inv[0]:
        fail("exit %d (seed %d); %s" % (rc, a.seed, inv), out)
    if not last or last[-1][0] != 300:
        fail("the last iteration printed is %s" % (last[-1][0] if last else None), out)
    if "worker 1 coordinates from now on" not in out or \
            "worker 1 takes over data part" not in out:
        fail("worker 1 did not take over coordinating and the parts", out)
    why = check_model(model, tokens)
    if why:
        fail(why, out)
    print("kill_worker: worker 2 killed after iteration %d, worker 0 in the pause for it "
          "(seed %d): worker 1 ended the job alone, counts = those of the final assignments"
          % (state["killed"][0][1], a.seed), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--scenario", required=True, choices=["exact", "invariant", "kill_server", "kill_worker"])
    p.add_argument("--seed", type=int, default=5)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tokens = make_data(d, a.seed)
        print("data: seed %d, %d training tokens" % (a.seed, tokens), flush=True)
        {"exact": exact, "invariant": invariant, "kill_server": kill_server,
         "kill_worker": kill_worker}[a.scenario](a, d, tokens)
        if a.scenario == "kill_worker":
            kill_coordinator_in_pause(a, d, tokens)
    print("PASSED %s" % a.scenario)
    return 0


if __name__ == "__main__":
    sys.exit(main())
