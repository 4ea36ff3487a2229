#!/usr/bin/env python3
"""fault.big_handoff (issue 15, item 10): servers holding GBs of values hand ranges off in
bounded pieces, with real processes over loopback (tests/fault/handoff_job.cc).

3 servers (k=1) and 2 workers fill 1.5 M keys x 256 int64 values (3 GB; each server holds
2 GB of it, master and replica parts). Then, while the workers go on pushing small updates:
  1. a fourth server joins (ps-launch --join) and pre-copies its ranges (1.5 GB);
  2. a server leaves (SIGUSR1 to it: Node::Leave) and its heirs copy its ranges;
  3. a server is SIGKILLed and the survivors refill its ranges (each ends with 3 GB).
Around each phase the test resets every live server's peak RSS (/proc/PID/clear_refs, 5) and
reads VmRSS before and VmHWM and VmRSS after: the peak beyond what the server holds before or
after (extra = HWM - max(before, after)) must stay under 256 MB per server. At the end the
workers check every value against the formula plus their own small pushes (exact sums).
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_checks import stream  # noqa: E402

LIMIT_MB = 256


def status(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def reset_peak(pid):
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
    except OSError:
        pass


class Run:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.servers = {}  # launcher index -> pid (the first launch)
        self.workers = {}
        self.joiner = None
        self.joiner_rc = None
        self.port = None
        self.filled = 0
        self.events = []  # (time, line) of the scheduler's ring changes
        self.left = None
        self.failures = []
        self.report = []
        self.cond = threading.Condition(self.lock)
        self.ended = False  # ps-launch has exited: nothing awaited can come any more
        self.threads = []

    def on_line(self, line):
        with self.cond:
            m = re.search(r"started (server|worker) (\d+) pid (\d+)", line)
            if m and not line.startswith("[joiner]"):
                (self.servers if m.group(1) == "server" else self.workers)[int(m.group(2))] = \
                    int(m.group(3))
            m = re.search(r"scheduler listens on [\d.]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if "FILLED worker" in line:
                self.filled += 1
            if re.search(r"cut-over to ring epoch|refill done|LEFT server", line):
                self.events.append(line)
            self.cond.notify_all()

    def wait_for(self, pred, what, timeout=300):
        end = time.time() + timeout
        with self.cond:
            while not pred():
                if self.ended:
                    raise RuntimeError("the job ended before " + what)
                left = end - time.time()
                if left <= 0:
                    raise RuntimeError("timed out waiting for " + what)
                self.cond.wait(min(left, 1.0))

    def measure(self, name, pids, act, done):
        """Resets the peaks of pids, runs act(), waits for done(), and checks the extra memory
        of every server that is still alive."""
        before = {}
        for p in pids:
            reset_peak(p)
            before[p] = status(p, "VmRSS")
        act()
        self.wait_for(done, name)
        time.sleep(1.0)  # the old holders drop what they gave up
        rows = []
        for p in pids + ([self.joiner] if self.joiner and self.joiner not in pids else []):
            hwm, after = status(p, "VmHWM"), status(p, "VmRSS")
            if hwm == 0:
                continue  # gone (left or killed)
            extra = hwm - max(before.get(p, 0.0), after)
            rows.append("pid %d %.0f -> %.0f MB, peak %.0f, extra %.0f" %
                        (p, before.get(p, 0.0), after, hwm, extra))
            if extra > LIMIT_MB:
                self.failures.append("%s: pid %d needed %.0f MB beyond its slots (limit %d)"
                                     % (name, p, extra, LIMIT_MB))
        line = "run_big_handoff: %s: %s" % (name, "; ".join(rows))
        print(line, flush=True)
        self.report.append(line)

    def start_joiner(self):
        a = self.a
        cmd = [sys.executable, a.launcher, "-s", "1", "-w", "0", "--timeout", "900",
               "--join", "127.0.0.1:%d" % self.port] + ENV + ["--", a.job] + JOB(a)

        def run():
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for line in p.stdout:
                print("[joiner] " + line.rstrip(), flush=True)
                m = re.search(r"started server 0 pid (\d+)", line)
                with self.cond:
                    if m:
                        self.joiner = int(m.group(1))
                    self.cond.notify_all()
                self.on_line("[joiner] " + line)
            self.joiner_rc = p.wait()
        t = threading.Thread(target=run)
        t.start()
        return t

    def control(self):
        try:
            self.wait_for(lambda: self.filled == 2 and len(self.servers) == 3, "the fill", 600)
            held = [status(p, "VmRSS") for p in self.servers.values()]
            line = "run_big_handoff: filled; server RSS %s MB" % ", ".join("%.0f" % x for x in held)
            print(line, flush=True)
            self.report.append(line)
            if min(held) < 2048:
                self.failures.append("a server holds only %.0f MB after the fill" % min(held))
            olds = sorted(self.servers.values())
            n = len(self.events)
            self.measure("join", olds, lambda: self.threads.append(self.start_joiner()),
                         lambda: any("cut-over" in e for e in self.events[n:]) and self.joiner)
            if self.joiner and status(self.joiner, "VmRSS") < 1024:
                self.failures.append("the joiner holds only %.0f MB"
                                     % status(self.joiner, "VmRSS"))
            live = olds + [self.joiner]
            leaver = olds[0]
            n = len(self.events)
            self.measure("leave", live, lambda: os.kill(leaver, signal.SIGUSR1),
                         lambda: any("LEFT" in e for e in self.events[n:]) and
                         any("cut-over" in e for e in self.events[n:]))
            live.remove(leaver)
            victim = live[0]
            n = len(self.events)
            self.measure("refill", live, lambda: os.kill(victim, signal.SIGKILL),
                         lambda: any("refill done" in e for e in self.events[n:]))
            live.remove(victim)
        except Exception as e:  # the job is stopped below; the failure is reported
            self.failures.append(str(e))
            live = list(self.servers.values()) + ([self.joiner] if self.joiner else [])
        # Workers end their pushes (SIGUSR1), servers their wait (SIGUSR2); a process that is
        # gone already (the job ended early) is skipped.
        signals = [(p, signal.SIGUSR1) for p in self.workers.values()] + \
            [(p, signal.SIGUSR2) for p in live]
        for p, sig in signals:
            try:
                os.kill(p, sig)
            except OSError:
                pass
        for t in self.threads:
            t.join()


ENV = []


def JOB(a):
    return ["--universe", str(a.universe), "--width", str(a.width)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--universe", type=int, default=1536 * 1024)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--env", action="append", default=[],
                   help="more NAME=VALUE for every process (PS_REFILL_PIECE_MB=100000: one "
                        "piece per range, to see what a whole-range copy costs)")
    a = p.parse_args()
    # Beats share the UCX progress thread with the fill's big messages: a worker was heard
    # after more than 1 s of silence and declared dead (the test is about memory, not detection;
    # a SIGKILL is seen at once by the broken connection).
    for e in ["PS_REPLICAS=1", "PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=3000"] + \
            a.env:
        ENV.extend(["--env", e])
    cmd = [sys.executable, a.launcher, "-s", "3", "-w", "2", "--timeout", "900",
           "--allow-dead-servers", "1"] + ENV + ["--", a.job] + JOB(a)
    print("running:", " ".join(cmd), flush=True)
    run = Run(a)
    ctl = threading.Thread(target=run.control)
    ctl.start()
    rc, out = stream(cmd, run.on_line)
    with run.cond:
        run.ended = True
        run.cond.notify_all()
    ctl.join()
    if rc != 0:
        run.failures.append("ps-launch exited with %d" % rc)
    if run.joiner_rc != 0:
        run.failures.append("the joiner's ps-launch exited with %s" % run.joiner_rc)
    ok = re.findall(r"^\[worker \d+\] OK worker", out, re.M)
    if len(ok) != 2:
        run.failures.append("expected exact values from 2 workers, got %d" % len(ok))
    for line in run.report:
        print(line)
    if run.failures:
        print("FAILED big_handoff: " + "; ".join(run.failures))
        return 1
    print("PASSED big_handoff: join, leave and refill of 2 GB servers, each within %d MB beyond "
          "its slots, values exact" % LIMIT_MB)
    return 0


if __name__ == "__main__":
    sys.exit(main())
