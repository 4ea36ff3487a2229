"""Fault scenarios of the scheduler itself (tests/fault/run_fault.py).

  scheduler_loss: 2 servers, 2 workers (sitting in Finalize and in a long computation); the
         scheduler is SIGKILLed. Every other node must notice within the heartbeat timeout
         and exit with code 1 naming the lost scheduler; nothing may hang.
  stop_scheduler: 2 servers, 3 workers taking 240 shards from the scheduler's task pool; the
         scheduler is SIGSTOPped for three heartbeat timeouts (a hang of the one node that
         judges the others: swapped out, starved, stopped) and then gets SIGCONT. The beats
         the nodes sent meanwhile wait unread, so its first look after the pause must not
         declare them dead: no node may be lost, and every shard counts exactly once.
"""
import os
import re
import signal
import threading
import time

from fault_checks import check_task_pool, stream


def scheduler_pid(line, state):
    """Notes the scheduler's PID from ps-launch's line that starts it."""
    m = re.search(r"started scheduler 0 pid (\d+)", line)
    if m:
        state["pid"] = int(m.group(1))


def run_and_kill_scheduler(cmd, workers):
    """Runs cmd; once every worker is up, SIGKILLs the scheduler (by its PID)."""
    state = {"pid": None, "up": 0, "killed_at": None}

    def on_line(line):
        scheduler_pid(line, state)
        if "HANGING worker" in line:
            state["up"] += 1
            if state["up"] == workers and state["pid"]:
                os.kill(state["pid"], signal.SIGKILL)
                state["killed_at"] = time.time()
                print("run_fault: SIGKILL to scheduler pid %d" % state["pid"], flush=True)

    rc, out = stream(cmd, on_line)
    return rc, out, state["killed_at"], time.time()


def scheduler_loss(a, sc, cmd):
    failures = []
    rc, out, killed_at, ended = run_and_kill_scheduler(cmd, sc["workers"])
    if killed_at is None:
        return ["the workers never came up, so the scheduler was not killed"], ""
    if rc in (0, 124):
        failures.append("ps-launch exited with %d: want 1 (nodes failed, no hang)" % rc)
    lost = re.findall(r"^\[(server|worker) (\d+)\] .*lost the scheduler", out, re.M)
    who = sorted(set(lost))
    want = sorted([("server", str(i)) for i in range(sc["servers"])] +
                  [("worker", str(i)) for i in range(sc["workers"])])
    if who != want:
        failures.append("nodes that reported losing the scheduler: %s, want %s" % (who, want))
    codes = re.findall(r"(server|worker) \d+ \(pid \d+\) exited with code 1", out)
    if len(codes) != sc["servers"] + sc["workers"]:
        failures.append("expected every server and worker to exit with code 1, got %s" % codes)
    return failures, ("every node exited with the reason %.1f s after the SIGKILL"
                      % (ended - killed_at))


def stop_scheduler(a, sc, cmd):
    timeout_ms = [int(e.split("=")[1]) for e in sc["env"]
                  if e.startswith("PS_HEARTBEAT_TIMEOUT_MS=")][0]
    hold_s = 3 * timeout_ms / 1000.0
    state = {"pid": None, "taken": 0, "stopped_at": None, "resumed_at": None}

    lock = threading.Lock()  # the timer's SIGCONT against the end of the run

    def resume(held=True):
        with lock:
            if state["resumed_at"] is not None:
                return
            state["resumed_at"] = time.time()
            state["held"] = held
            try:
                os.kill(state["pid"], signal.SIGCONT)
            except ProcessLookupError:
                return  # the job ended without it
        print("run_fault: SIGCONT to the scheduler after %.1f s"
              % (state["resumed_at"] - state["stopped_at"]), flush=True)

    def on_line(line):
        scheduler_pid(line, state)
        if re.match(r"\[worker \d+\] TAKEN \d+$", line):
            state["taken"] += 1
            # Mid-job: every worker holds or waits for a shard, and beats go on unread.
            if state["taken"] == 30 and state["pid"]:
                os.kill(state["pid"], signal.SIGSTOP)
                state["stopped_at"] = time.time()
                print("run_fault: SIGSTOP to the scheduler pid %d for %.1f s"
                      % (state["pid"], hold_s), flush=True)
                state["timer"] = threading.Timer(hold_s, resume)
                state["timer"].start()

    rc, out = stream(cmd, on_line)
    if "timer" in state:
        # A job that ended while the scheduler was stopped: it is resumed now, not later.
        state["timer"].cancel()
        resume(held=False)
    if not state.get("held"):
        return ["the scheduler was never stopped and resumed (%d shards taken)"
                % state["taken"]], ""
    failures = []
    if rc != 0:
        failures.append("ps-launch exited with %d" % rc)
    dead = re.findall(r"node \d+ declared dead.*", out)
    if dead:
        failures.append("nodes were declared dead after the pause: %s" % dead[:3])
    if not re.search(r"^\[scheduler 0\] .*the scheduler did not run for \d+ ms", out, re.M):
        failures.append("the scheduler did not report its pause")
    shards = int(sc["job"][sc["job"].index("--shards") + 1])
    pool = check_task_pool(out, shards, failures)
    return failures, ("the scheduler stopped %.1f s (%d ms timeout), no node lost, %s"
                      % (state["resumed_at"] - state["stopped_at"], timeout_ms, pool))


RUNS = {"scheduler_loss": scheduler_loss, "stop_scheduler": stop_scheduler}
