"""The local backend: every process a child of ps-launch on this machine."""

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque

from .common import (EXIT_TIMEOUT, FailurePolicy, describe_exit, group_of, job_env, log, name_of,
                     signal_group, with_hugepages)
from .metrics import Summary, free_port


TAIL_LINES = 5


class Job:
    def __init__(self, args):
        self.args = args
        self.procs = []  # (name, Popen)
        self.threads = []
        # Each process's last lines of error output, named beside it when it fails.
        self.tails = {}
        # Reentrant: the signal handler runs on the main thread, possibly while it holds the lock.
        self.lock = threading.RLock()
        self.stopping = False

    def base_env(self):
        env = dict(os.environ)
        env["PS_SCHEDULER_HOST"] = self.args.join_host if self.args.join else self.args.host
        env["PS_NODE_HOST"] = self.args.host
        # The ps-lite names too, so scripts written for ps-lite read the same job. PS_* wins
        # inside ps, so both always agree.
        env["DMLC_PS_ROOT_URI"] = env["PS_SCHEDULER_HOST"]
        env["DMLC_NODE_HOST"] = self.args.host
        env.update(job_env(self.args))
        return with_hugepages(env)

    def role_env(self, role, rank, extra):
        env = self.base_env()
        env["PS_ROLE"] = env["DMLC_ROLE"] = role
        env["PS_RANK"] = str(rank)
        if role == "worker" and getattr(self.args, "worker_groups", None):
            env["PS_WORKER_GROUP"] = group_of(self.args.worker_groups, rank)
        env.update(extra)
        if "PS_SCHEDULER_PORT" in extra:
            env["DMLC_PS_ROOT_PORT"] = extra["PS_SCHEDULER_PORT"]
        return env

    def pump(self, name, stream, out, tail=None):
        for line in iter(stream.readline, b""):
            text = line.decode("utf-8", "replace")
            if tail is not None and text.strip():
                tail.append(text.rstrip())
            out.write("[%s] %s" % (name, text))
            if not line.endswith(b"\n"):
                out.write("\n")
            out.flush()
        stream.close()

    def spawn_all(self, extra):
        # Every server and worker is started before any of their output pumps: starting a
        # thread waits for a core that the children starting beside it want too (up to 20 ms
        # each on two cores), and each such wait delayed the next child's start.
        started = [(role, i, self.spawn(role, i, extra, pump=False))
                   for role, count in (("server", self.args.num_servers),
                                       ("worker", self.args.num_workers))
                   for i in range(count)]
        for role, i, p in started:
            self.pump_output(name_of(role, i), p)

    def spawn(self, role, rank, extra, pump=True):
        name = name_of(role, rank)
        env = self.role_env(role, rank, extra)
        # Each child leads its own process group, so stopping it also stops what it started.
        program = self.args.program
        cmds = getattr(self.args, "group_cmds", {})
        if role == "worker" and env.get("PS_WORKER_GROUP") in cmds:
            program = cmds[env["PS_WORKER_GROUP"]]
        p = subprocess.Popen(program, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        with self.lock:
            self.procs.append((name, p))
        log("started %s pid %d" % (name, p.pid))
        self.tails[name] = deque(maxlen=TAIL_LINES)
        if pump:
            self.pump_output(name, p)
        return p

    def pump_output(self, name, p):
        for stream, out, tail in ((p.stdout, sys.stdout, None),
                                  (p.stderr, sys.stderr, self.tails[name])):
            t = threading.Thread(target=self.pump, args=(name, stream, out, tail), daemon=True)
            t.start()
            self.threads.append(t)

    def flush_output(self, timeout=5.0):
        # Every child has exited: its pipes close and the pump threads finish; wait for them so
        # the last lines (often the error that stopped the job) are printed before we exit.
        deadline = time.time() + timeout
        for t in list(self.threads):
            t.join(timeout=max(deadline - time.time(), 0.01))

    def report_tail(self, name, what):
        # After stop_all, whose flush read every pipe to its end.
        tail = list(self.tails.get(name, ()))
        if tail:
            log("%s; its last error output:\n%s" % (what, "\n".join("    " + t for t in tail)))
        else:
            log("%s; it wrote no error output" % what)

    def print_stacks(self):
        """Prints every thread's stack of each process still running (gdb), so that a hang
        is seen where it waits rather than only as a timeout."""
        gdb = shutil.which("gdb")
        if not gdb:
            log("--stacks-on-timeout: gdb not found; no stacks")
            return
        with self.lock:
            procs = [x for x in self.procs if x[1].poll() is None]
        # Freeze the whole job first: gdb holds one process for a second or more, and the
        # others would meanwhile act on its silence (the scheduler declares a server dead, the
        # job aborts, the workers exit) before their own stacks are taken.
        for _, p in procs:
            try:
                os.kill(p.pid, signal.SIGSTOP)
            except OSError:
                pass
        for name, p in procs:
            if p.poll() is not None:
                continue
            try:
                out = subprocess.run([gdb, "-batch", "-p", str(p.pid), "-ex",
                                      "thread apply all bt"], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, timeout=60).stdout
            except subprocess.TimeoutExpired:
                out = "gdb did not finish within 60 s"
            lines = [x for x in out.splitlines() if x.startswith(("Thread", "#"))]
            log("stacks of %s pid %d:\n%s" % (name, p.pid, "\n".join(lines) or out))
        for _, p in procs:  # a stopped process would hold its SIGTERM until continued
            try:
                os.kill(p.pid, signal.SIGCONT)
            except OSError:
                pass

    def stop_all(self, grace=3.0):
        with self.lock:
            self.stopping = True
            procs = list(self.procs)
        for _, p in procs:
            if p.poll() is None:
                signal_group(p.pid, signal.SIGTERM)
        deadline = time.time() + grace
        for _, p in procs:
            left = deadline - time.time()
            try:
                p.wait(timeout=max(left, 0.01))
            except subprocess.TimeoutExpired:
                pass
        for name, p in procs:
            if p.poll() is None:
                signal_group(p.pid, signal.SIGKILL)
                p.wait()
                log("killed %s pid %d" % (name, p.pid))
        self.flush_output()

    def run(self):
        a = self.args
        if a.join:
            extra = {"PS_SCHEDULER_PORT": str(a.join_port), "PS_JOIN": "1"}
            log("joining the job of the scheduler at %s:%d" % (a.join_host, a.join_port))
            self.spawn_all(extra)
            return self.watch(time.time())
        if a.summary and not a.metrics_port:
            a.metrics_port = free_port(a.host)
        if a.metrics_port:
            log("job metrics at http://%s:%d/metrics and /stats" % (a.host, a.metrics_port))
        summary = Summary(a.host, a.metrics_port, a.summary) if a.summary else None
        tmp = tempfile.mkdtemp(prefix="ps-launch-")
        port_file = os.path.join(tmp, "scheduler.port")
        start = time.time()
        sched = self.spawn("scheduler", 0, {"PS_SCHEDULER_PORT": "0",
                                            "PS_SCHEDULER_PORT_FILE": port_file})
        port = None
        while port is None:
            if sched.poll() is not None:
                log("scheduler 0 (pid %d) exited with code %d before binding its port"
                    % (sched.pid, sched.returncode))
                self.stop_all()
                return 1
            if time.time() - start > a.start_timeout:
                log("scheduler did not bind a port within %.0f s (--start-timeout)"
                    % a.start_timeout)
                self.stop_all()
                return 1
            try:
                with open(port_file) as f:
                    port = int(f.read().strip())
            except (OSError, ValueError):
                time.sleep(0.01)
        extra = {"PS_SCHEDULER_PORT": str(port)}
        log("scheduler listens on %s:%d (ps-launch --join %s:%d adds nodes)"
            % (a.host, port, a.host, port))
        self.spawn_all(extra)
        if summary:
            summary.start()
        try:
            return self.watch(start)
        finally:
            if summary:
                summary.stop()

    def watch(self, start):
        a = self.args
        policy = FailurePolicy(a.allow_dead_workers, a.allow_dead_servers, a.keep_going)
        judged = set()
        while True:
            with self.lock:
                procs = list(self.procs)
            running = 0
            fatal = []
            for name, p in procs:
                rc = p.poll()
                if rc is None:
                    running += 1
                    continue
                if name in judged:
                    continue
                judged.add(name)
                role, rank = name.split()
                verdict = policy.judge(role, int(rank), rc)
                what = "%s (pid %d) exited with %s" % (name, p.pid, describe_exit(rc))
                if verdict == "tolerated":
                    log("%s; the job goes on without it (--allow-dead-%ss %d)"
                        % (what, role, policy.allowed[role]))
                elif verdict == "failed":
                    log("%s; the others go on (--keep-going)" % what)
                elif verdict == "fatal":
                    fatal.append((name, what))
            if fatal:
                # Every process found failed in this round is named: when one failure makes
                # another follow within milliseconds, both are reported.
                log("%s; stopping the job" % "; ".join(w for _, w in fatal))
                self.stop_all()
                for name, what in fatal:
                    self.report_tail(name, what)
                return 1
            if running == 0:
                self.flush_output()
                if policy.failed:
                    log("all processes ended in %.1f s; failed: %s"
                        % (time.time() - start, ", ".join(sorted(policy.failed))))
                    return 1
                log("all %d processes finished in %.1f s" % (len(procs), time.time() - start))
                return 0
            if a.timeout and time.time() - start > a.timeout:
                log("timeout after %.0f s (--timeout); stopping the job" % a.timeout)
                if a.stacks_on_timeout:
                    self.print_stacks()
                self.stop_all()
                return EXIT_TIMEOUT
            time.sleep(0.05)


def dry_run(args):
    job = Job(args)
    cmd = " ".join(shlex.quote(x) for x in args.program)
    names = ["PS_NUM_SERVERS", "PS_NUM_WORKERS", "PS_WORKER_GROUPS", "PS_SCHEDULER_HOST",
             "PS_NODE_HOST", "PS_VNODES", "GLIBC_TUNABLES"]
    names += [k for k in (e.split("=", 1)[0] for e in args.env) if k not in names]
    base = job.base_env()
    common = " ".join("%s=%s" % (k, shlex.quote(base[k])) for k in names if k in base)

    def group(role, i):
        g = group_of(args.worker_groups, i) if role == "worker" else None
        return "PS_WORKER_GROUP=%s " % g if g else ""

    def cmd_of(role, i):
        g = group_of(args.worker_groups, i) if role == "worker" else None
        return " ".join(shlex.quote(x) for x in getattr(args, "group_cmds", {}).get(g, [])) or cmd

    if args.join:
        for role, n in (("server", args.num_servers), ("worker", args.num_workers)):
            for i in range(n):
                print("PS_ROLE=%s PS_RANK=%d %sPS_JOIN=1 PS_SCHEDULER_PORT=%d %s %s"
                      % (role, i, group(role, i), args.join_port, common, cmd_of(role, i)))
        return 0
    print("# the scheduler writes its port to PORT_FILE; the others get it as PS_SCHEDULER_PORT")
    print("PS_ROLE=scheduler PS_RANK=0 PS_SCHEDULER_PORT=0 PS_SCHEDULER_PORT_FILE=PORT_FILE "
          "%s %s" % (common, cmd))
    for role, n in (("server", args.num_servers), ("worker", args.num_workers)):
        for i in range(n):
            print("PS_ROLE=%s PS_RANK=%d %sPS_SCHEDULER_PORT=$PORT %s %s"
                  % (role, i, group(role, i), common, cmd_of(role, i)))
    return 0
