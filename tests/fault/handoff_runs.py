"""Hand-off scenarios where a participant dies (tests/fault/run_fault.py runs them).

  join_dies_cutover: 4 servers (k=1), 4 workers pushing; a fifth server joins with
         `ps-launch --join` and is SIGKILLed the moment the scheduler cuts over to the ring
         with it, while the servers swap masters and the old masters hand over their last
         points. The scheduler must declare it dead and publish a newer ring; its ranges go
         back to their replicas (the old masters); the sums must be exact and every chain of
         the last ring must agree byte for byte.
  join_old_dies_cutover: as join_dies_cutover, but a seeded server of the old ring is
         SIGKILLed at the cut-over instead: the joiner waits for that server's last points in
         the ranges it takes from it, which never come; it must go on once the ring without the
         dead server arrives, and so must the job, with exact sums and identical chains.
  leave_and_kill: 5 servers (k=2), 4 workers pushing; one server is SIGSTOPped so that no
         preparation can end, a seeded server asks to leave (SIGUSR1 to the job, which calls
         Node::Leave), and once the ring without it is being prepared both the leaver and the
         stopped server are SIGKILLed: two failures in one preparation. The preparation must be
         dropped for a ring without both, no range may be reported lost (each chain kept a
         copy), and the sums must be exact.
  leave_survives_kill: as leave_and_kill, but only the stopped server is SIGKILLed: the
         scheduler must prepare the leave again over the servers left, the leaver must leave
         (exit 0, mastering nothing) and the sums must be exact.
"""
import os
import random
import re
import signal
import subprocess
import threading

from fault_checks import CAPTURED, check_exact, note_server_pid, stream

# The scheduler publishes a ring: after a failure ("ring epoch N: M servers") or at a cut-over.
PUBLISHED = re.compile(r"(?<!preparing )ring epoch (\d+)(?::| with) (\d+)")


def start_joiner(join_cmd, port, state):
    """Runs join_cmd against the scheduler at port in a thread; keeps its pid and exit code."""
    def run():
        full = join_cmd[:2] + ["--join", "127.0.0.1:%d" % port] + join_cmd[2:]
        p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in p.stdout:
            print("[joiner] " + line.rstrip(), flush=True)
            CAPTURED.append("[joiner] " + line)
            m = re.search(r"started server 0 pid (\d+)", line)
            if m:
                state["joiner_pid"] = int(m.group(1))
        state["joiner_rc"] = p.wait()

    t = threading.Thread(target=run)
    t.start()
    return t


def exact(rc, out, workers, failures):
    check_exact(rc, out, workers, failures)
    if "no copy left" in out:
        failures.append("the job reported a range lost although every chain kept a copy")


def join_dies_cutover(a, sc, cmd, join_cmd, old=False):
    state = {"port": None, "up": 0, "joiner_pid": None, "cut": None, "after": None,
             "thread": None, "pids": {}, "victim": None}
    rng = random.Random(int(a.seed))

    def on_line(line):
        note_server_pid(line, state["pids"])
        m = re.search(r"scheduler listens on [\d.]+:(\d+)", line)
        if m:
            state["port"] = int(m.group(1))
        if "PUSHING worker" in line:
            state["up"] += 1
            if state["up"] == sc["workers"]:
                state["thread"] = start_joiner(join_cmd, state["port"], state)
        m = re.search(r"cut-over to ring epoch (\d+) with (\d+)", line)
        if m and state["cut"] is None and int(m.group(2)) == sc["servers"] + 1:
            state["cut"] = int(m.group(1))
            if old:
                state["victim"] = rng.choice(sorted(state["pids"].values()))
                os.kill(state["victim"], signal.SIGKILL)
                print("run_fault: SIGKILL to old server pid %d at the cut-over to ring epoch %d"
                      % (state["victim"], state["cut"]), flush=True)
            elif state["joiner_pid"]:
                state["victim"] = state["joiner_pid"]
                os.kill(state["joiner_pid"], signal.SIGKILL)
                print("run_fault: SIGKILL to the joining server (pid %d) at the cut-over to "
                      "ring epoch %d" % (state["joiner_pid"], state["cut"]), flush=True)
        m = PUBLISHED.search(line)
        if m and state["cut"] is not None and int(m.group(1)) > state["cut"]:
            state["after"] = int(m.group(1))

    rc, out = stream(cmd, on_line)
    if state["thread"]:
        state["thread"].join()
    failures = []
    exact(rc, out, sc["workers"], failures)
    if state["cut"] is None:
        failures.append("no cut-over to a ring with the joiner")
    elif state["victim"] is None:
        failures.append("the pid to kill was not known at the cut-over")
    if state["after"] is None:
        failures.append("no ring after the one with the dead server")
    if old and state.get("joiner_rc") != 0:
        failures.append("the joiner's ps-launch exited with %s" % state.get("joiner_rc"))
    if failures:
        return failures, ""
    return failures, ("%s SIGKILLed at the cut-over to epoch %d, ring epoch %d without it, "
                      "sums exact" % ("an old server" if old else "the joiner", state["cut"],
                                      state["after"]))


def join_old_dies_cutover(a, sc, cmd, join_cmd):
    return join_dies_cutover(a, sc, cmd, join_cmd, old=True)


def leave_and_kill(a, sc, cmd, join_cmd, kill_leaver=True):
    rng = random.Random(int(a.seed))
    rank = rng.randrange(sc["servers"])
    cmd = cmd + ["--leave-rank", str(rank), "--leave-after-ms", "-1"]
    state = {"pids": {}, "up": 0, "leaver": None, "victim": None, "prepared": None,
             "killed": False, "after": None}

    def act():
        others = sorted(p for p in state["pids"].values() if p != state["leaver"])
        state["victim"] = rng.choice(others)
        os.kill(state["victim"], signal.SIGSTOP)
        print("run_fault: SIGSTOP to server pid %d, then SIGUSR1 to server %d (pid %d) to leave"
              % (state["victim"], rank, state["leaver"]), flush=True)
        os.kill(state["leaver"], signal.SIGUSR1)

    def on_line(line):
        note_server_pid(line, state["pids"])
        m = re.search(r"LEAVE-READY server \d+ pid (\d+)", line)
        if m:
            state["leaver"] = int(m.group(1))
        if "PUSHING worker" in line:
            state["up"] += 1
        if (state["up"] == sc["workers"] and state["leaver"] and state["victim"] is None and
                len(state["pids"]) == sc["servers"]):
            act()
        m = re.search(r"preparing ring epoch (\d+) with (\d+)", line)
        if (m and state["victim"] and not state["killed"] and
                int(m.group(2)) == sc["servers"] - 1):
            state["prepared"] = int(m.group(1))
            state["killed"] = True
            os.kill(state["victim"], signal.SIGKILL)
            if kill_leaver:
                os.kill(state["leaver"], signal.SIGKILL)
            print("run_fault: SIGKILL to server pid %d%s while ring epoch %d is prepared"
                  % (state["victim"], " and the leaving one (pid %d)" % state["leaver"]
                     if kill_leaver else "", state["prepared"]), flush=True)
        m = PUBLISHED.search(line)
        if m and state["killed"] and int(m.group(1)) > state["prepared"] and \
                int(m.group(2)) == sc["servers"] - 2:
            state["after"] = int(m.group(1))

    rc, out = stream(cmd, on_line)
    failures = []
    exact(rc, out, sc["workers"], failures)
    if not state["killed"]:
        failures.append("no preparation of a ring without the leaver while the other server "
                        "was stopped")
    if state["after"] is None:
        failures.append("no ring without both servers after epoch %s" % state["prepared"])
    left = re.search(r"^\[server \d+\] LEFT server %d .* mastered=0" % rank, out, re.M)
    if not kill_leaver and not left:
        failures.append("server %d did not leave (or still masters keys)" % rank)
    if failures:
        return failures, ""
    return failures, ("server pid %d SIGKILLed while epoch %d was prepared for server %d to "
                      "leave, which %s; ring epoch %d without both, sums exact"
                      % (state["victim"], state["prepared"], rank,
                         "was SIGKILLed too" if kill_leaver else "left", state["after"]))


def leave_survives_kill(a, sc, cmd, join_cmd):
    return leave_and_kill(a, sc, cmd, join_cmd, kill_leaver=False)


RUNS = {"join_dies_cutover": join_dies_cutover, "join_old_dies_cutover": join_old_dies_cutover, "leave_and_kill": leave_and_kill,
        "leave_survives_kill": leave_survives_kill}
