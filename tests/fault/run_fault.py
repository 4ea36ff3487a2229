#!/usr/bin/env python3
"""Fault scenarios with real processes over loopback (tests/fault). Each one runs a job that
checks its own results against an exact reference, and this script checks that the fault
really happened (so a pass is not vacuous).

  lossy: 3 servers, 3 workers; every node loses 5% of its data messages, sends 5% twice and
         holds 5% back 30 ms (so they arrive after later ones). Workers resend what gets no
         reply; servers apply every push exactly once. The sums must be exact.
  lossy_agg: lossy with replication after aggregation (5 ms windows, every worker pushing
         the same keys): lost and doubled aggregates, resends and duplicates together.
  kill_server: 4 servers (one replica per range, the default), 4 workers pushing; a server
         chosen by the seed is SIGKILLed a seeded 0-400 ms after the pushes start. Its
         replicas take over and every worker's final sums must be exact.
  kill_server_agg: as kill_server, with replication after aggregation (5 ms windows) and
         every worker pushing the same keys, so the replicas get sums of several pushes; no
         aggregate may arrive partly applied (conflicts=0).
  stop_server: as kill_server, but the server is SIGSTOPped (a hang, not a crash: its
         connections stay open) with the default heartbeat settings; the scheduler must declare
         it dead by heartbeat timeout. The stopped process is SIGKILLed at the end, by PID.
  kill_worker: 2 servers, 3 workers taking 60 data shards from the scheduler's task pool
         (task_job); worker 1 is SIGKILLed while it holds its third shard. Its shard must go
         back to the pool and be redone; every shard is marked exactly once and reported done
         exactly once, and the job finishes.
  stop_worker: as kill_worker, but worker 1 is SIGSTOPped (a hang) while it holds its third
         shard and gets SIGCONT once another worker has taken that shard again. Declared dead,
         it must stay dead: servers refuse what it sends (shards are marked by summing, so a
         shard done twice would read 2), it fails naming why, and every shard counts once.
  stop_resume: as stop_server, but once the stopped server has been declared dead it gets
         SIGCONT: it must be fenced (told it is dead, and exit naming why) instead of serving
         with its old view; the sums stay exact.
  kill_two: 4 servers (k=1), 4 workers pushing at a steady pace; a seeded server is
         SIGKILLed, and once the scheduler reports every range refilled to two copies a second
         seeded server is SIGKILLed. With k=1 the second loss is survivable only because the
         chains were refilled; the sums must be exact.
  join_server: 4 servers (k=1), 4 workers pushing; a seeded moment after the pushes started
         a fifth server is added with `ps-launch --join`. It copies its ranges while updates go
         on, takes over at a new ring epoch, and must end up mastering about 1/5 of the keys;
         the sums must be exact.
  join_dies: 4 servers (k=1), 4 workers pushing; a fifth server joins but is slow to serve
         (its pre-copy cannot end) and is SIGKILLed while the ring with it is prepared; then a
         sixth joins. The preparation must be dropped, the sixth must cut over at a new epoch
         (an epoch is never issued twice), and the sums must be exact.
  leave_server: 4 servers (k=1), 4 workers pushing; a seeded server calls Node::Leave at a
         seeded moment: the others copy its ranges while pushes go on and take over at a new
         ring epoch; it exits 0, and the sums must be exact.
  slow_server: 2 servers, 2 workers pushing as fast as they can for 60 s without waiting (the
         job keeps no window: only the library's PS_MAX_INFLIGHT holds a worker back); a seeded
         server runs at a tenth of its speed (SIGSTOP 90 ms, SIGCONT 10 ms, by PID) the whole
         time. Every process's memory (VmRSS, sampled every 0.5 s) must stay bounded: its peak
         under 512 MB and its growth over the last two thirds of the push phase under 64 MB.
         The sums must be exact.
  kill_two_chains: 6 servers with one ring position each (PS_VNODES=1, k=1), so two servers
         share a chain only when they are neighbours on the circle; two servers that are not
         are lost before any refill can end (one SIGSTOPped, the other SIGKILLed, then the first
         SIGKILLed once the ring without the second is out) while pushes go on. No range lost its copies: the job
         must go on with exact sums (before, any k+1 failures before a refill aborted).
  kill_one_chain: the same with two neighbours: the range whose chain was exactly those two
         has no copy left, and the job must stop naming exactly that range.
  join_dies_cutover, leave_and_kill, leave_survives_kill: a joiner killed at the cut-over; a
         leaver and another server killed in one preparation; another server killed while a
         leave is prepared (tests/fault/handoff_runs.py).
  scheduler_loss, stop_scheduler, sched_cut, worker_cut: the scheduler killed or stopped, or a
         server or a worker cut from it alone (tests/fault/scheduler_runs.py).
"""
import argparse
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

from fault_checks import (CAPTURED, check_chains, check_exact, check_task_pool, note_server_pid,
                          stream)
from handoff_runs import RUNS as HANDOFF_RUNS
from scheduler_runs import RUNS as SCHEDULER_RUNS
from scenarios import SCENARIOS


def run_and_kill_server(cmd, servers, workers, seed, sig=signal.SIGKILL, resume=False):
    """Runs cmd; a seeded delay after every worker started pushing, sends sig to a seeded
    server. A stopped server is SIGKILLed once every worker has finished (or, with resume,
    gets SIGCONT once the ring without it is out)."""
    rng = random.Random(int(seed))
    victim, delay = rng.randrange(servers), rng.uniform(0.0, 0.4)
    state = {"pids": {}, "up": 0, "ok": 0, "killed": None, "resumed": False}

    def kill_later(pid):
        time.sleep(delay)
        os.kill(pid, sig)
        state["killed"] = pid
        print("run_fault: %s to server %d (pid %d) %.0f ms after the pushes started"
              % (signal.Signals(sig).name, victim, pid, delay * 1000), flush=True)

    def on_line(line):
        note_server_pid(line, state["pids"])
        if "PUSHING worker" in line:
            state["up"] += 1
            if state["up"] == workers:
                threading.Thread(target=kill_later, args=(state["pids"][victim],)).start()
        if resume and "] ring epoch 2:" in line and state["killed"] and not state["resumed"]:
            os.kill(state["killed"], signal.SIGCONT)  # the hang ends after it was replaced
            state["resumed"] = True
            print("run_fault: SIGCONT to the stopped server", flush=True)
        if "OK worker" in line:
            state["ok"] += 1
            if state["ok"] == workers and sig == signal.SIGSTOP and state["killed"] and not resume:
                os.kill(state["killed"], signal.SIGKILL)  # clean up the hung one

    rc, out = stream(cmd, on_line)
    return rc, out, victim, state["killed"], state["resumed"]


def run_and_kill_two(cmd, servers, workers, seed):
    """Runs cmd; kills a seeded server once every worker pushes, and a second one once the
    scheduler reports the refill done. Returns (rc, output, victims, ok lines seen before the
    second kill)."""
    rng = random.Random(int(seed))
    victims, delay = rng.sample(range(servers), 2), rng.uniform(0.0, 0.4)
    state = {"pids": {}, "up": 0, "killed": [], "ok_before": 0, "ok": 0}

    def kill(i):
        os.kill(state["pids"][victims[i]], signal.SIGKILL)
        state["killed"].append(victims[i])
        state["ok_before"] = state["ok"]
        print("run_fault: SIGKILL to server %d (pid %d)" % (victims[i], state["pids"][victims[i]]),
              flush=True)

    def first_later():
        time.sleep(delay)
        kill(0)

    def on_line(line):
        note_server_pid(line, state["pids"])
        if "PUSHING worker" in line:
            state["up"] += 1
            if state["up"] == workers:
                threading.Thread(target=first_later).start()
        if "OK worker" in line:
            state["ok"] += 1
        if "refill done" in line and len(state["killed"]) == 1:
            kill(1)

    rc, out = stream(cmd, on_line)
    return rc, out, state["killed"], state["ok_before"]


def run_and_join(cmd, join_cmd, workers, seed):
    """Runs cmd; a seeded delay after every worker started pushing, runs join_cmd (with the
    scheduler's address) to add a server. Returns (rc, output, joiner rc, joiner output, ok lines
    seen before the cut-over)."""
    rng = random.Random(int(seed))
    delay = rng.uniform(0.1, 0.6)
    state = {"port": None, "up": 0, "join": None, "ok": 0, "ok_at_cut": None}

    def join_later():
        time.sleep(delay)
        full = join_cmd[:2] + ["--join", "127.0.0.1:%d" % state["port"]] + join_cmd[2:]
        print("run_fault: adding a server %.0f ms after the pushes started: %s"
              % (delay * 1000, " ".join(full)), flush=True)
        p = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in p.stdout.splitlines():
            print("[joiner] " + line, flush=True)
            CAPTURED.append("[joiner] " + line + "\n")
        state["join"] = (p.returncode, p.stdout)

    def on_line(line):
        m = re.search(r"scheduler listens on [\d.]+:(\d+)", line)
        if m:
            state["port"] = int(m.group(1))
        if "PUSHING worker" in line:
            state["up"] += 1
            if state["up"] == workers:
                state["thread"] = threading.Thread(target=join_later)
                state["thread"].start()
        if "OK worker" in line:
            state["ok"] += 1
        if "cut-over to ring epoch" in line:
            state["ok_at_cut"] = state["ok"]

    rc, out = stream(cmd, on_line)
    if "thread" in state:
        state["thread"].join()
    jrc, jout = state["join"] if state["join"] else (None, "")
    return rc, out, jrc, jout, state["ok_at_cut"]


def join_command(a, sc):
    """ps-launch adding one server to the running job. It gets the job's --env as a user would
    pass it: PS_REPLICAS=1 with one server in its own launch must not be refused (the job's
    ring decides)."""
    cmd = [sys.executable, a.launcher, "-s", "1", "-w", "0", "--timeout", "240"]
    for e in sc["env"]:
        cmd += ["--env", e]
    return cmd + ["--", a.job, "--seed", a.seed] + sc["job"]


def run_join_dies(cmd, join_cmd, workers):
    """Runs cmd; once every worker pushes, starts a joiner that delays serving, SIGKILLs it
    (by PID) once the ring with it is prepared, then starts a second joiner once the first is
    declared dead. Returns (rc, output, prepared epoch, cut-over epoch, second joiner's rc)."""
    state = {"port": None, "up": 0, "pid": None, "prepared": None, "cut": None,
             "killed": False, "second": None, "threads": []}

    def joiner(extra, key):
        full = join_cmd[:2] + ["--join", "127.0.0.1:%d" % state["port"]] + join_cmd[2:] + extra
        p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in p.stdout:
            print("[%s] %s" % (key, line.rstrip()), flush=True)
            CAPTURED.append("[joiner] " + line)
            m = re.search(r"started server 0 pid (\d+)", line)
            if m and key == "joiner1":
                state["pid"] = int(m.group(1))
        state[key] = p.wait()

    def start(extra, key):
        t = threading.Thread(target=joiner, args=(extra, key))
        state["threads"].append(t)
        t.start()

    def on_line(line):
        m = re.search(r"scheduler listens on [\d.]+:(\d+)", line)
        if m:
            state["port"] = int(m.group(1))
        if "PUSHING worker" in line:
            state["up"] += 1
            if state["up"] == workers:
                start(["--server-delay-ms", "30000"], "joiner1")
        m = re.search(r"preparing ring epoch (\d+)", line)
        if m and state["prepared"] is None:
            state["prepared"] = int(m.group(1))
            for _ in range(100):
                if state["pid"]:
                    break
                time.sleep(0.05)
            os.kill(state["pid"], signal.SIGKILL)
            state["killed"] = True
            print("run_fault: SIGKILL to the joining server (pid %d) while ring epoch %d is "
                  "prepared" % (state["pid"], state["prepared"]), flush=True)
        if state["killed"] and "declared dead" in line and state["second"] is None:
            state["second"] = "started"
            start([], "joiner2")
        m = re.search(r"cut-over to ring epoch (\d+)", line)
        if m:
            state["cut"] = int(m.group(1))

    rc, out = stream(cmd, on_line)
    for t in state["threads"]:
        t.join()
    return rc, out, state["prepared"], state["cut"], state.get("joiner2")


def run_and_kill_worker(cmd, sig=signal.SIGKILL):
    """Runs cmd; sends sig to worker 1 (by its PID) when it takes its third shard. A stopped
    worker gets SIGCONT once another worker took that shard."""
    state = {"pid": None, "taken": 0, "killed": None, "resumed": False}

    def on_line(line):
        m = re.search(r"started worker 1 pid (\d+)", line)
        if m:
            state["pid"] = int(m.group(1))
        m = re.match(r"\[worker 1\] TAKEN (\d+)", line)
        if m and state["killed"] is None:
            state["taken"] += 1
            if state["taken"] == 3:
                os.kill(state["pid"], sig)
                state["killed"] = int(m.group(1))
                print("run_fault: %s to worker 1 holding shard %s"
                      % (signal.Signals(sig).name, m.group(1)), flush=True)
        m = re.match(r"\[worker [02]\] TAKEN (\d+)", line)
        if (m and sig == signal.SIGSTOP and state["killed"] is not None and
                int(m.group(1)) == state["killed"] and not state["resumed"]):
            # Another worker took the shard again: the hang ends while the job goes on.
            os.kill(state["pid"], signal.SIGCONT)
            state["resumed"] = True
            print("run_fault: SIGCONT to worker 1", flush=True)

    rc, out = stream(cmd, on_line)
    if sig == signal.SIGSTOP and state["pid"] and not state["resumed"]:
        os.kill(state["pid"], signal.SIGKILL)
    return rc, out, state["killed"], state["resumed"]


MASK = (1 << 64) - 1


def hash_key(x):
    """ps::HashKey (splitmix64's finalizer), to place servers on the ring like src/ring."""
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def ring_order(servers):
    """Server ids (1..servers) in key order of their one ring position (PS_VNODES=1), and the
    positions: Ring::Position(s, 0)."""
    pos = sorted((min(hash_key((s << 32) ^ 0x7073726E67), MASK - 1), s)
                 for s in range(1, servers + 1))
    return [s for _, s in pos], [p for p, _ in pos]


def run_kill_pair(cmd, servers, workers, neighbours):
    """Runs cmd; once every worker pushes, loses two servers before any refill can end: ring
    neighbours (sharing a chain) or not. The second is SIGSTOPped first (so nobody can copy a
    range from it), then the first is SIGKILLed, and the second once the ring without the first
    is out: two SIGKILLs at once reach the scheduler some ms apart, time enough for a refill.
    Returns (rc, output, the two server ids, the range whose chain was exactly those two, as
    16-digit hex begin and end)."""
    order, pos = ring_order(servers)
    n = len(order)
    if neighbours:
        a, b = order[1], order[2]  # b's segment [pos[2], pos[3]) has the chain {b, a}
        lost = ("%016x" % pos[2], "%016x" % pos[3])
    else:
        a, b = order[1], order[3]
        lost = None
    state = {"pids": {}, "up": 0}

    def on_line(line):
        m = re.search(r"started server (\d+) pid (\d+)", line)
        if m:
            state["pids"][int(m.group(1)) + 1] = int(m.group(2))  # server rank r is node r+1
        if "PUSHING worker" in line:
            state["up"] += 1
            if state["up"] == workers:
                time.sleep(0.1)
                os.kill(state["pids"][b], signal.SIGSTOP)
                os.kill(state["pids"][a], signal.SIGKILL)
                print("run_fault: SIGSTOP to server node %d, SIGKILL to server node %d (ring "
                      "order %s)" % (b, a, order), flush=True)
        if "] ring epoch 2:" in line and not state.get("second"):
            state["second"] = True
            os.kill(state["pids"][b], signal.SIGKILL)
            print("run_fault: SIGKILL to server node %d" % b, flush=True)

    assert n == servers
    rc, out = stream(cmd, on_line)
    return rc, out, (a, b), lost


def rss_mb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def run_slow_server(cmd, servers, workers, seed, push_s):
    """Runs cmd; once every worker pushes, a seeded server gets SIGSTOP for 90 ms and SIGCONT
    for 10 ms in a loop (by PID) until the job ends, while every process's RSS is sampled.
    Returns (rc, output, victim, throttle cycles, {name: [(seconds since pushes began, MB)]})."""
    rng = random.Random(int(seed))
    victim = rng.randrange(servers)
    state = {"pids": {}, "up": 0, "cycles": 0, "t0": None}
    samples = {}
    done = threading.Event()

    def throttle(pid):
        while not done.is_set():
            try:
                os.kill(pid, signal.SIGSTOP)
                time.sleep(0.09)
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                return
            state["cycles"] += 1
            time.sleep(0.01)

    def sample():
        while not done.is_set():
            t = time.time() - state["t0"]
            for name, pid in list(state["pids"].items()):
                mb = rss_mb(pid)
                if mb is not None:
                    samples.setdefault(name, []).append((t, mb))
            done.wait(0.5)

    def on_line(line):
        m = re.search(r"started (server|worker) (\d+) pid (\d+)", line)
        if m:
            state["pids"]["%s %s" % (m.group(1), m.group(2))] = int(m.group(3))
        if "PUSHING worker" in line:
            state["up"] += 1
            if state["up"] == workers:
                state["t0"] = time.time()
                pid = state["pids"]["server %d" % victim]
                print("run_fault: server %d (pid %d) runs at a tenth of its speed from now"
                      % (victim, pid), flush=True)
                threading.Thread(target=throttle, args=(pid,), daemon=True).start()
                threading.Thread(target=sample, daemon=True).start()

    try:
        rc, out = stream(cmd, on_line)
    finally:
        done.set()
        if "server %d" % victim in state["pids"]:
            try:
                os.kill(state["pids"]["server %d" % victim], signal.SIGCONT)
            except ProcessLookupError:
                pass
    return rc, out, victim, state["cycles"], samples


def main():
    rc = run_scenario()
    if rc != 0:
        return rc
    scenario = sys.argv[sys.argv.index("--scenario") + 1]
    if scenario == "kill_one_chain":
        return 0  # the job stops by design (a range lost every copy): no chains to compare
    failures = check_chains(SCENARIOS[scenario])
    if failures:
        print("FAILED: %s" % "; ".join(failures))
        return 1
    return 0


def run_scenario():
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    p.add_argument("--seed", default="7")
    a = p.parse_args()
    sc = SCENARIOS[a.scenario]
    cmd = [sys.executable, a.launcher, "-s", str(sc["servers"]), "-w", str(sc["workers"]),
           "--timeout", "240", "--env", "PS_SEED=" + a.seed] + sc.get("launch", [])
    for e in sc["env"]:
        cmd += ["--env", e]
    cmd += ["--", a.job, "--seed", a.seed] + sc["job"]
    print("running:", " ".join(cmd), flush=True)
    failures = []
    if a.scenario in HANDOFF_RUNS or a.scenario in SCHEDULER_RUNS:
        if a.scenario in HANDOFF_RUNS:
            failures, passed = HANDOFF_RUNS[a.scenario](a, sc, cmd, join_command(a, sc))
        else:
            failures, passed = SCHEDULER_RUNS[a.scenario](a, sc, cmd)
        if failures:
            print("FAILED %s (seed %s): %s" % (a.scenario, a.seed, "; ".join(failures)))
            return 1
        print("PASSED %s (seed %s): %s" % (a.scenario, a.seed, passed))
        return 0
    if a.scenario in ("kill_two_chains", "kill_one_chain"):
        neighbours = a.scenario == "kill_one_chain"
        rc, out, pair, lost = run_kill_pair(cmd, sc["servers"], sc["workers"], neighbours)
        ok = re.findall(r"^\[worker (\d+)\] OK worker", out, re.M)
        if neighbours:
            if rc == 0:
                failures.append("the job went on although a range lost both its copies")
            m = re.search(r"have no copy left: (.*)$", out, re.M)
            want = "[%s, %s)" % lost
            if not m:
                failures.append("no abort naming the ranges with no copy left")
            elif not m.group(1).startswith(want + " ") or "more" in m.group(1):
                failures.append("the abort names %s, want exactly %s" % (m.group(1), want))
        else:
            if rc != 0:
                failures.append("ps-launch exited with %d" % rc)
            if len(ok) != sc["workers"]:
                failures.append("expected exact sums from %d workers, got %d"
                                % (sc["workers"], len(ok)))
            if "no copy left" in out:
                failures.append("the job aborted although every range kept a copy")
            if "ring epoch 3" not in out:
                failures.append("the scheduler did not publish rings without both servers")
        if failures:
            print("FAILED %s (seed %s): %s" % (a.scenario, a.seed, "; ".join(failures)))
            return 1
        print("PASSED %s: servers %s lost before a refill; %s" % (
            a.scenario, pair, "stopped naming [%s, %s)" % lost if lost else "sums exact"))
        return 0
    if a.scenario == "slow_server":
        push_s = float(sc["job"][sc["job"].index("--seconds") + 1])
        rc, out, victim, cycles, samples = run_slow_server(cmd, sc["servers"], sc["workers"],
                                                           a.seed, push_s)
        if rc != 0:
            failures.append("ps-launch exited with %d" % rc)
        ok = re.findall(r"^\[worker (\d+)\] OK worker", out, re.M)
        if len(ok) != sc["workers"]:
            failures.append("expected exact sums from %d workers, got %d"
                            % (sc["workers"], len(ok)))
        if cycles < 0.5 * push_s / 0.1:
            failures.append("the server was slowed only %d times" % cycles)
        rounds = [int(x) for x in re.findall(r"PUSHED worker \d+ rounds=(\d+)", out)]
        if len(rounds) != sc["workers"] or min(rounds) < 100:
            failures.append("the workers pushed too little to matter: rounds %s" % rounds)
        report = []
        for name, pts in sorted(samples.items()):
            push = [mb for t, mb in pts if t <= push_s]
            if len(push) < 10:
                failures.append("too few memory samples of %s" % name)
                continue
            peak = max(mb for _, mb in pts)
            early = max(mb for t, mb in pts if t <= push_s / 3.0)
            growth = max(push) - early
            report.append("%s peak %.0f MB, growth %.0f MB" % (name, peak, growth))
            if peak > 512:
                failures.append("%s reached %.0f MB" % (name, peak))
            if growth > 64:
                failures.append("%s grew %.0f MB after the first third of the pushes "
                                "(%.0f -> %.0f MB)" % (name, growth, early, max(push)))
        print("run_fault: memory: " + "; ".join(report), flush=True)
        if failures:
            print("FAILED %s (seed %s): %s" % (a.scenario, a.seed, "; ".join(failures)))
            return 1
        print("PASSED %s (seed %s): server %d slowed %d times, rounds %s, memory bounded, "
              "sums exact" % (a.scenario, a.seed, victim, cycles, rounds))
        return 0
    if a.scenario == "kill_two":
        rc, out, killed, ok_before = run_and_kill_two(cmd, sc["servers"], sc["workers"], a.seed)
        if len(killed) != 2:
            failures.append("%d server(s) killed, want 2 (was the refill reported?)" % len(killed))
        elif ok_before:
            failures.append("the second kill came after %d worker(s) had finished" % ok_before)
        if rc != 0:
            failures.append("ps-launch exited with %d" % rc)
        ok = re.findall(r"^\[worker (\d+)\] OK worker", out, re.M)
        if len(ok) != sc["workers"]:
            failures.append("expected exact sums from %d workers, got %d"
                            % (sc["workers"], len(ok)))
        if len(re.findall(r"refill done", out)) < 2:
            failures.append("the scheduler did not report both refills")
        if failures:
            print("FAILED %s (seed %s): %s" % (a.scenario, a.seed, "; ".join(failures)))
            return 1
        print("PASSED %s (seed %s): servers %s SIGKILLed one after the other, sums exact"
              % (a.scenario, a.seed, killed))
        return 0
    if a.scenario == "leave_server":
        rng = random.Random(int(a.seed))
        rank, after = rng.randrange(sc["servers"]), rng.randint(300, 900)
        cmd += ["--leave-rank", str(rank), "--leave-after-ms", str(after)]
        state = {"ok": 0, "ok_at_cut": None}

        def on_line(line):
            if "OK worker" in line:
                state["ok"] += 1
            if "cut-over to ring epoch" in line:
                state["ok_at_cut"] = state["ok"]

        rc, out = stream(cmd, on_line)
        if rc != 0:
            failures.append("ps-launch exited with %d" % rc)
        ok = re.findall(r"^\[worker (\d+)\] OK worker", out, re.M)
        if len(ok) != sc["workers"]:
            failures.append("expected exact sums from %d workers, got %d"
                            % (sc["workers"], len(ok)))
        if state["ok_at_cut"] is None:
            failures.append("no cut-over to a ring without the leaving server")
        elif state["ok_at_cut"]:
            failures.append("the cut-over came after %d worker(s) had finished"
                            % state["ok_at_cut"])
        if not re.search(r"^\[server %d\] LEFT server %d .* mastered=0" % (rank, rank), out, re.M):
            failures.append("server %d did not leave (or still masters keys)" % rank)
        if not re.search(r"server %d \(pid \d+\) exited|all \d+ processes finished" % rank, out):
            failures.append("no clean end")
        if failures:
            print("FAILED %s (seed %s): %s" % (a.scenario, a.seed, "; ".join(failures)))
            return 1
        print("PASSED %s (seed %s): server %d left after %d ms, sums exact"
              % (a.scenario, a.seed, rank, after))
        return 0
    if a.scenario == "join_dies":
        rc, out, prepared, cut, second = run_join_dies(cmd, join_command(a, sc), sc["workers"])
        check_exact(rc, out, sc["workers"], failures)
        if prepared is None:
            failures.append("no ring with the first joiner was prepared")
        if cut is None:
            failures.append("the second joiner never cut over")
        elif prepared is not None and cut <= prepared:
            failures.append("the cut-over reused or went below epoch %d of the dropped "
                            "preparation: %d" % (prepared, cut))
        if second != 0:
            failures.append("the second joiner's ps-launch exited with %s" % second)
        if failures:
            print("FAILED %s (seed %s): %s" % (a.scenario, a.seed, "; ".join(failures)))
            return 1
        print("PASSED %s (seed %s): preparation of epoch %d dropped, cut-over at epoch %d, "
              "sums exact" % (a.scenario, a.seed, prepared, cut))
        return 0
    if a.scenario == "join_server":
        rc, out, jrc, jout, ok_at_cut = run_and_join(cmd, join_command(a, sc), sc["workers"],
                                                     a.seed)
        check_exact(rc, out, sc["workers"], failures)
        if jrc != 0:
            failures.append("the joining ps-launch exited with %s" % jrc)
        if ok_at_cut is None:
            failures.append("no cut-over to a ring with the new server")
        elif ok_at_cut:
            failures.append("the cut-over came after %d worker(s) had finished" % ok_at_cut)
        old = [int(x) for x in re.findall(r"^\[server \d+\] STATS .* mastered=(\d+)", out, re.M)]
        new = [int(x) for x in re.findall(r"^\[server \d+\] STATS .* mastered=(\d+)", jout, re.M)]
        share = None
        if len(old) != sc["servers"] or len(new) != 1:
            failures.append("missing server STATS lines (%d old, %d new)" % (len(old), len(new)))
        else:
            share = new[0] / float(sum(old) + new[0])
            if not 0.12 <= share <= 0.28:
                failures.append("the new server masters %.3f of the keys, want about 1/5" % share)
        if failures:
            print("FAILED %s (seed %s): %s" % (a.scenario, a.seed, "; ".join(failures)))
            return 1
        print("PASSED %s (seed %s): the fifth server masters %.3f of the keys, sums exact"
              % (a.scenario, a.seed, share))
        return 0
    if a.scenario in ("kill_worker", "stop_worker"):
        stop = a.scenario == "stop_worker"
        rc, out, shard, resumed = run_and_kill_worker(
            cmd, signal.SIGSTOP if stop else signal.SIGKILL)
        shards = int(sc["job"][sc["job"].index("--shards") + 1])
        if stop:
            if not re.search(r"^\[worker 1\] .*was declared dead", out, re.M):
                failures.append("the resumed worker did not fail naming that it was declared dead")
            if not resumed:
                failures.append("the stopped worker was never resumed")
            if not re.search(r"worker 1 \(pid \d+\) exited with code 1", out):
                failures.append("the resumed worker did not exit with code 1")
        if shard is None:
            failures.append("worker 1 was never killed")
        if rc != 0:
            failures.append("ps-launch exited with %d" % rc)
        pool = check_task_pool(out, shards, failures, redone=True)
        if shard is not None and len(re.findall(r"TAKEN %d$" % shard, out, re.M)) < 2:
            failures.append("shard %d was not taken again" % shard)
        if failures:
            print("FAILED %s: %s" % (a.scenario, "; ".join(failures)))
            return 1
        print("PASSED %s: shard %d redone, %s" % (a.scenario, shard, pool))
        return 0
    if a.scenario in ("kill_server", "kill_server_agg", "stop_server", "stop_resume"):
        sig = signal.SIGKILL if a.scenario.startswith("kill") else signal.SIGSTOP
        resume = a.scenario == "stop_resume"
        rc, out, victim, killed, resumed = run_and_kill_server(
            cmd, sc["servers"], sc["workers"], a.seed, sig, resume)
        if resume:
            if not resumed:
                failures.append("the stopped server was never resumed")
            if not re.search(r"^\[server %d\] .*was declared dead by the scheduler" % victim,
                             out, re.M):
                failures.append("the resumed server was not fenced")
            if not re.search(r"server %d \(pid \d+\) exited with code 1" % victim, out):
                failures.append("the fenced server did not exit with code 1")
            # Read lease: after SIGCONT the server confirms with the scheduler before it serves
            # anything; it was declared dead meanwhile, so it serves nothing more (messages its
            # transport had queued before the stop may still leave: they are not new answers).
            served = re.search(r"^\[server %d\] .*requests served since it stalled: (\d+)"
                               % victim, out, re.M)
            if not served:
                failures.append("the resumed server did not notice its stall")
            elif int(served.group(1)) != 0:
                failures.append("the resumed server served %s request(s) after its stall, "
                                "declared dead" % served.group(1))
        if killed is None:
            failures.append("the server was never killed")
        if rc != 0:
            failures.append("ps-launch exited with %d" % rc)
        ok = re.findall(r"^\[worker (\d+)\] OK worker", out, re.M)
        if len(ok) != sc["workers"]:
            failures.append("expected exact sums from %d workers, got %d"
                            % (sc["workers"], len(ok)))
        if "ring epoch 2" not in out:
            failures.append("the scheduler never published a ring without the dead server")
        if a.scenario == "kill_server_agg":
            agg = re.findall(r"aggregated=(\d+) conflicts=(\d+)", out)
            if not agg or sum(int(x[0]) for x in agg) == 0:
                failures.append("no push travelled in an aggregate")
            if any(int(x[1]) for x in agg):
                failures.append("aggregates arrived partly applied: %s" % agg)
        if sig == signal.SIGSTOP and "declared dead: silent for more than" not in out:
            failures.append("the hung server was not declared dead by heartbeat timeout")
        if failures:
            print("FAILED %s (seed %s): %s" % (a.scenario, a.seed, "; ".join(failures)))
            return 1
        print("PASSED %s (seed %s): server %d got %s, sums exact"
              % (a.scenario, a.seed, victim, signal.Signals(sig).name))
        return 0
    rc, out = stream(cmd, lambda line: None)
    if rc != 0:
        failures.append("ps-launch exited with %d" % rc)
    ok = re.findall(r"^\[worker (\d+)\] OK worker .*resends=(\d+)", out, re.M)
    if len(ok) != sc["workers"]:
        failures.append("expected an exact-result OK line from %d workers, got %d"
                        % (sc["workers"], len(ok)))
    resends = sum(int(x[1]) for x in ok)
    dups = sum(int(x) for x in re.findall(r"^\[server \d+\] STATS .* duplicates=(\d+)", out, re.M))
    drops = sum(int(x) for x in re.findall(r'"injected_drops":(\d+)', out))
    doubled = sum(int(x) for x in re.findall(r'"injected_duplicates":(\d+)', out))
    delayed = sum(int(x) for x in re.findall(r'"injected_delays":(\d+)', out))
    if a.scenario == "lossy_agg":
        agg = re.findall(r"aggregated=(\d+) conflicts=(\d+)", out)
        if not agg or sum(int(x[0]) for x in agg) == 0:
            failures.append("no push travelled in an aggregate")
        if any(int(x[1]) for x in agg):
            failures.append("aggregates arrived partly applied: %s" % agg)
    if a.scenario in ("lossy", "lossy_agg"):
        if drops == 0 or doubled == 0 or delayed == 0:
            failures.append("faults were not injected (drops %d, duplicates %d, delays %d)"
                            % (drops, doubled, delayed))
        if resends == 0:
            failures.append("no worker resent anything: lost messages were not recovered")
        if dups == 0:
            failures.append("no server saw a duplicate push: exactly-once was not exercised")
    if failures:
        print("FAILED %s (seed %s): %s" % (a.scenario, a.seed, "; ".join(failures)))
        return 1
    print("PASSED %s: sums exact with %d messages dropped, %d duplicated, %d delayed; "
          "%d resends, %d duplicate pushes recognised" % (a.scenario, drops, doubled, delayed,
                                                          resends, dups))
    return 0


if __name__ == "__main__":
    sys.exit(main())
