"""Fault scenarios of the scheduler itself (tests/fault/run_fault.py).

  scheduler_loss: 2 servers, 2 workers (sitting in Finalize and in a long computation); the
         scheduler is SIGKILLed. Every other node must notice within the heartbeat timeout
         and exit with code 1 naming the lost scheduler; nothing may hang.
  stop_scheduler: 2 servers, 3 workers taking 240 shards from the scheduler's task pool; the
         scheduler is SIGSTOPped for three heartbeat timeouts (a hang of the one node that
         judges the others: swapped out, starved, stopped) and then gets SIGCONT. The beats
         the nodes sent meanwhile wait unread, so its first look after the pause must not
         declare them dead: no node may be lost, and every shard counts exactly once.
  sched_cut: 4 servers, 4 workers pushing (the sum job); once they push, a seeded server is cut
         from the scheduler alone (PS_FAULT_MUTE_SCHEDULER_FILE: its control messages to and
         from the scheduler are lost, its data links work) until the ring without it is out.
         The scheduler declares it dead by the heartbeat timeout; it must have stopped serving
         before that, by its read lease on the scheduler's echoes (the lease let its last
         request in before the declaration, on the host's steady clock), and be fenced when
         the link is back; the sums stay exact.
  worker_cut: 2 servers, 3 workers taking 240 shards from the task pool; worker 1 is cut from
         the scheduler alone when it takes its third shard (its beats and task requests are
         lost, its pushes reach the servers) until another worker took that shard again. The
         scheduler declares it dead and gives its shard to another worker; the servers refuse
         what it still sends (fencing) and it stops with code 1 (at a refusal, or at the
         scheduler's ABORT once the link is back). Every shard counts exactly once.
"""
import os
import random
import re
import shutil
import signal
import tempfile
import threading
import time

from fault_checks import check_exact, check_task_pool, note_server_pid, stream


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


class Mute:
    """Cuts one node's control link to the scheduler and heals it: PS_FAULT_MUTE_SCHEDULER_FILE
    (tests only) loses its control messages to and from the scheduler while a file named after
    its PID exists; its data links keep working."""

    def __init__(self, cmd, who):
        self.folder = tempfile.mkdtemp(prefix="ps_mute_")
        self.prefix = os.path.join(self.folder, "mute")
        at = cmd.index("--")
        self.cmd = cmd[:at] + ["--env", "PS_FAULT_MUTE_SCHEDULER_FILE=" + self.prefix] + cmd[at:]
        self.who = who
        self.file = self.cut_at = self.healed_at = None
        self.lock = threading.Lock()  # a timer's heal against the end of the run

    def cut(self, pid, what=""):
        self.file = "%s.%d" % (self.prefix, pid)
        open(self.file, "w").close()
        self.cut_at = time.time()
        print("run_fault: %s (pid %d) cut from the scheduler%s" % (self.who, pid, what),
              flush=True)

    def heal(self):
        with self.lock:
            if self.file is None or self.healed_at is not None:
                return
            os.unlink(self.file)
            self.healed_at = time.time()
        print("run_fault: %s's link to the scheduler is back after %.1f s"
              % (self.who, self.healed_at - self.cut_at), flush=True)

    def run(self, on_line):
        try:
            rc, out = stream(self.cmd, on_line)
            self.heal()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
        return rc, out


def sched_cut(a, sc, cmd):
    victim = random.Random(int(a.seed)).randrange(sc["servers"])
    mute = Mute(cmd, "server %d" % victim)
    state = {"pids": {}, "up": 0}

    def on_line(line):
        note_server_pid(line, state["pids"])
        if "PUSHING worker" in line:
            state["up"] += 1
            if state["up"] == sc["workers"] and victim in state["pids"]:
                mute.cut(state["pids"][victim])
        if "] ring epoch 2:" in line and mute.file and mute.healed_at is None:
            threading.Timer(0.3, mute.heal).start()  # once the ring without it is out

    rc, out = mute.run(on_line)
    if mute.cut_at is None:
        return ["the server was never cut from the scheduler"], ""
    failures = []
    check_exact(rc, out, sc["workers"], failures)
    if "ring epoch 2" not in out:
        failures.append("the scheduler never published a ring without the cut server")
    if not re.search(r"^\[server %d\] .*no echo of its heartbeats from the scheduler" % victim,
                     out, re.M):
        failures.append("the cut server's lease did not run out")
    fenced = re.search(r"^\[server %d\] .*node (\d+) was declared dead by the scheduler.*"
                       r"its lease let its last request in at steady clock (\d+) us" % victim,
                       out, re.M)
    if not fenced:
        failures.append("the cut server was not fenced when its link came back")
    else:
        node, served = int(fenced.group(1)), int(fenced.group(2))
        declared = re.search(r"node %d declared dead at steady clock (\d+) us" % node, out)
        if not declared:
            failures.append("the scheduler did not declare node %d dead" % node)
        elif served >= int(declared.group(1)):
            failures.append("the cut server's lease let a request in %.1f ms after it was "
                            "declared dead" % ((served - int(declared.group(1))) / 1000.0))
    if not re.search(r"server %d \(pid \d+\) exited with code 1" % victim, out):
        failures.append("the fenced server did not exit with code 1")
    return failures, ("server %d cut from the scheduler for %.1f s, stopped serving before it "
                      "was declared dead, fenced, sums exact"
                      % (victim, (mute.healed_at or time.time()) - mute.cut_at))


def worker_cut(a, sc, cmd):
    mute = Mute(cmd, "worker 1")
    state = {"pid": None, "taken": 0, "shard": None}

    def on_line(line):
        m = re.search(r"started worker 1 pid (\d+)", line)
        if m:
            state["pid"] = int(m.group(1))
        m = re.match(r"\[worker 1\] TAKEN (\d+)", line)
        if m and mute.file is None and state["pid"]:
            state["taken"] += 1
            if state["taken"] == 3:
                state["shard"] = int(m.group(1))
                mute.cut(state["pid"], " holding shard %d" % state["shard"])
        m = re.match(r"\[worker [02]\] TAKEN (\d+)", line)
        if m and state["shard"] is not None and int(m.group(1)) == state["shard"]:
            mute.heal()  # its shard was given to another worker: it was declared dead

    rc, out = mute.run(on_line)
    if mute.cut_at is None:
        return ["worker 1 was never cut from the scheduler"], ""
    failures = []
    if rc != 0:
        failures.append("ps-launch exited with %d" % rc)
    if not re.search(r"^\[scheduler 0\] .*node \d+ declared dead at steady clock", out, re.M):
        failures.append("the scheduler declared no node dead")
    if not re.search(r"^\[worker 1\] .*was declared dead", out, re.M):
        failures.append("the cut worker did not stop naming that it was declared dead")
    if not re.search(r"worker 1 \(pid \d+\) exited with code 1", out):
        failures.append("the cut worker did not exit with code 1")
    if mute.healed_at is None:
        failures.append("worker 1's shard %d was never taken again" % state["shard"])
    shards = int(sc["job"][sc["job"].index("--shards") + 1])
    pool = check_task_pool(out, shards, failures, redone=True)
    return failures, ("worker 1 cut from the scheduler holding shard %d, declared dead, fenced, "
                      "%s" % (state["shard"], pool))


RUNS = {"scheduler_loss": scheduler_loss, "stop_scheduler": stop_scheduler,
        "sched_cut": sched_cut, "worker_cut": worker_cut}
