"""Runs a job through a cluster backend (ssh, mpi, slurm) and watches it.

ps-launch listens on a TCP port (the rendezvous) and starts the backend's commands; every
process of the job runs under tracker/ps-task, which connects back with the job's token, says
which process it is, and waits for "go". The scheduler's ps-task reports the port its
scheduler bound (any free port: no fixed ports to collide), and ps-launch sends that address
with "go" to the servers and workers. Each ps-task reports its process's PID and exit code;
ps-launch applies the same failure policy as the local backend and, to stop the job, tells
every ps-task to stop its process (or just closes the connection: a ps-task that loses
ps-launch stops its process too), then stops the ssh, mpirun or srun commands themselves.
"""

import hmac
import json
import os
import queue
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from .backends import remap
from .common import (EXIT_TIMEOUT, FailurePolicy, describe_exit, group_of, log, process_names,
                     signal_group)


class Conn:
    def __init__(self, sock, peer):
        self.sock = sock
        self.peer = peer
        self.name = None
        self.info = {}
        self.lock = threading.Lock()

    def send(self, **msg):
        data = (json.dumps(msg) + "\n").encode()
        with self.lock:
            try:
                self.sock.sendall(data)
                return True
            except OSError:
                return False

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


# Writes of tasks' output lines and of the launchers' own: TextIOWrapper is not thread-safe, and
# two threads' long lines came out interleaved mid-way.
OUT_LOCK = threading.Lock()


class Rendezvous:
    """The TCP port every ps-task connects to. Messages are JSON lines; each one read becomes
    an event (conn, message) on the queue, and a closed connection the event (conn, None)."""

    def __init__(self, bind_host, events):
        self.events = events
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((bind_host, 0))
        except OSError as e:
            raise ValueError("--tracker-host %s: cannot listen there (%s)" % (bind_host, e))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.readers = []
        self.closed = False
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while not self.closed:
            try:
                s, peer = self.sock.accept()
            except OSError:
                return
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c = Conn(s, peer[0])
            self.conns.append(c)
            t = threading.Thread(target=self.read_loop, args=(c,), daemon=True)
            self.readers.append(t)
            t.start()

    def read_loop(self, c):
        buf = b""
        while True:
            try:
                chunk = c.sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                self.events.put((c, None))
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = {"garbage": True}
                if not isinstance(msg, dict):
                    msg = {"garbage": True}
                if "out" in msg and c.name is not None:
                    # A line of a task's output, whole: written here, so that a chatty task
                    # is held back by this stream (through its connection) rather than queued.
                    out = msg["out"] if isinstance(msg["out"], dict) else {}
                    text = out.get("text")
                    if isinstance(text, str):
                        stream = sys.stderr if out.get("fd") == 2 else sys.stdout
                        with OUT_LOCK:
                            stream.write(text)
                            stream.flush()
                    continue
                self.events.put((c, msg))

    def drain(self, timeout):
        """Waits (up to timeout s) until every task closed its connection: the lines of output
        it sent last are written by then."""
        deadline = time.time() + timeout
        for t in list(self.readers):
            t.join(timeout=max(deadline - time.time(), 0.01))

    def close(self):
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
        for c in list(self.conns):
            c.close()


class ClusterJob:
    def __init__(self, args, backend):
        self.args = args
        self.backend = backend
        self.token = secrets.token_hex(16)
        self.events = queue.Queue()
        self.rv = None
        self.procs = []  # (Launch, Popen)
        self.pumps = []
        self.conns = {}  # (role, rank) -> Conn
        self.done = {}  # (role, rank) -> exit code
        self.policy = FailurePolicy(args.allow_dead_workers, args.allow_dead_servers,
                                    args.keep_going)
        self.lock = threading.RLock()
        self.stopped = False
        self.tmp = None
        self.expected = process_names(args.num_servers, args.num_workers,
                                      scheduler=not args.join)

    # --- starting ---------------------------------------------------------------------------

    def pump(self, stream, out):
        # ps-task already prefixes its process's lines; the launcher's own (ssh's or mpirun's
        # complaints) pass through as they are.
        for line in iter(stream.readline, b""):
            text = line.decode("utf-8", "replace")
            with OUT_LOCK:
                out.write(text if text.endswith("\n") else text + "\n")
                out.flush()
        stream.close()

    def start(self, launch):
        try:
            p = subprocess.Popen(launch.argv, env=launch.env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True)
        except OSError as e:
            raise ValueError("cannot run %s: %s" % (launch.argv[0], e.strerror))
        with self.lock:
            self.procs.append((launch, p))
        for stream, out in ((p.stdout, sys.stdout), (p.stderr, sys.stderr)):
            t = threading.Thread(target=self.pump, args=(stream, out), daemon=True)
            t.start()
            self.pumps.append(t)
        return p

    def sync(self):
        for launch in self.backend.sync_commands():
            log("copying %s to %s:%s (--sync-dst-dir)" % (os.getcwd(), launch.host,
                                                           self.args.sync_dst_dir))
            r = subprocess.run(launch.argv, stdin=subprocess.DEVNULL)
            if r.returncode != 0:
                log("rsync to %s failed with %s; nothing was started"
                    % (launch.host, describe_exit(r.returncode)))
                return False
        return True

    def run(self):
        a = self.args
        bind, advertise = ((a.tracker_host, a.tracker_host) if a.tracker_host
                           else self.backend.default_tracker())
        self.rv = Rendezvous(bind, self.events)
        tracker = "%s:%d" % (advertise, self.rv.port)
        log("%s backend; tasks report to %s" % (a.launcher, tracker if advertise != "ssh" else
                                                "port %d (the address each ssh session "
                                                "came from)" % self.rv.port))
        if not self.sync():
            self.rv.close()
            return 1
        if hasattr(self.backend, "hostfile_text") and self.backend.hosts:
            self.tmp = tempfile.mkdtemp(prefix="ps-launch-")
            path = os.path.join(self.tmp, "hostfile")
            with open(path, "w") as f:
                f.write(self.backend.hostfile_text())
            launches = self.backend.commands(tracker, self.token, path)
        else:
            launches = self.backend.commands(tracker, self.token)
        start = time.time()
        for launch in launches:
            p = self.start(launch)
            what = ", ".join("%s %d" % n for n in launch.names[:3])
            if len(launch.names) > 3:
                what += ", ... (%d processes)" % len(launch.names)
            log("started %s (pid %d) for %s%s" % (launch.argv[0], p.pid, what,
                                                 " on " + launch.host if launch.host else ""))
        return self.watch(start)

    # --- watching ---------------------------------------------------------------------------

    def go_env(self, sched):
        env = {"PS_SCHEDULER_HOST": sched[0], "PS_SCHEDULER_PORT": str(sched[1]),
               "DMLC_PS_ROOT_URI": sched[0], "DMLC_PS_ROOT_PORT": str(sched[1])}
        if self.args.join:
            env["PS_JOIN"] = "1"
        return env

    def go(self, name, sched):
        """The "go" message to a server or worker: the scheduler's address, and the command of
        a worker whose group has one of its own (--group-cmd)."""
        msg = {"env": self.go_env(sched)}
        cmds = getattr(self.args, "group_cmds", {})
        if name[0] == "worker" and cmds:
            argv = cmds.get(group_of(self.args.worker_groups, name[1]))
            if argv:
                # As PROGRAM, a path under a --sync-dst-dir copy is the copy's on the hosts.
                dst = getattr(self.args, "sync_dst_dir", None)
                msg["argv"] = [remap(argv[0], os.getcwd(), dst)] + argv[1:]
        return msg

    def where(self, name):
        c = self.conns.get(name)
        if c is None:
            return ""
        return " on %s (%s)" % (c.info.get("hostname", "?"), c.info.get("addr", c.peer))

    def handle(self, conn, msg, state):
        """One rendezvous event. Returns None, or (when, message) for an event that fails the
        job: when is the moment the process ended, if it reported one."""
        if msg is None:
            if conn.name is not None and conn.name not in self.done and not self.stopped:
                return time.time(), "lost contact with %s %d%s (its ps-task, ssh or host died)" % (
                    conn.name + (self.where(conn.name),))
            return None
        if conn.name is None:
            hello = msg.get("hello")
            if not isinstance(hello, dict):
                log("dropped a connection from %s that did not say hello" % conn.peer)
                conn.close()
                return None
            token = str(hello.get("token", "")).encode("utf-8", "replace")
            if not hmac.compare_digest(token, self.token.encode()):
                log("refused a connection from %s: wrong job token" % conn.peer)
                conn.close()
                return None
            name = (hello.get("role"), hello.get("rank"))
            if not isinstance(name[0], str) or type(name[1]) is not int:
                log("refused a connection from %s: malformed hello" % conn.peer)
                conn.close()
                return None
            if name not in self.expected or name in self.conns:
                conn.send(stop="%s %s is not a process of this job or already ran" % name)
                conn.close()
                return time.time(), "a task said it is %s %s, which is %s" % (
                    name + ("already connected" if name in self.conns else "not in the job",))
            conn.name, conn.info = name, hello
            self.conns[name] = conn
            if name[0] == "scheduler":
                conn.send(go={})
            elif state["sched"] is not None:
                conn.send(go=self.go(name, state["sched"]))
            return None
        name = conn.name
        if "started" in msg:
            info = msg["started"]
            conn.info["child"] = info.get("pid")
            log("started %s %d pid %s%s" % (name + (info.get("pid"), self.where(name))))
        elif "listening" in msg and name[0] == "scheduler":
            info = msg["listening"]
            state["sched"] = (info["host"], int(info["port"]))
            log("scheduler listens on %s:%d (ps-launch --join %s:%d adds nodes)"
                % (state["sched"] + state["sched"]))
            for other, c in self.conns.items():
                if other[0] != "scheduler":
                    c.send(go=self.go(other, state["sched"]))
        elif "exit" in msg:
            rc = int(msg["exit"].get("code", 1))
            self.done[name] = rc
            verdict = self.policy.judge(name[0], name[1], rc)
            if conn.info.get("child") is None:
                what = "%s %d%s could not start the program (%s)" % (
                    name + (self.where(name), msg["exit"].get("error", describe_exit(rc))))
            else:
                what = "%s %d (pid %s%s) exited with %s" % (
                    name + (conn.info.get("child"), self.where(name), describe_exit(rc)))
            if verdict == "fatal":
                conn.send(exit_with=rc if rc > 0 else 128 - rc)
                try:
                    when = float(msg["exit"].get("at"))
                except (TypeError, ValueError):
                    when = time.time()
                return when, what
            conn.send(exit_with=0)
            if verdict == "tolerated":
                log("%s; the job goes on without it (--allow-dead-%ss %d)"
                    % (what, name[0], self.policy.allowed[name[0]]))
            elif verdict == "failed":
                log("%s; the others go on (--keep-going)" % what)
        return None

    def watch(self, start):
        a = self.args
        state = {"sched": (a.join_host, a.join_port) if a.join else None}
        expected = self.expected
        proc_gone = {}
        while True:
            try:
                conn, msg = self.events.get(timeout=0.05)
                fatal = self.handle(conn, msg, state)
            except queue.Empty:
                fatal = None
            now = time.time()
            if fatal is None:
                missing = [n for n in expected if n not in self.conns]
                if missing and now - start > a.start_timeout:
                    fatal = ("%d of %d processes did not report within %.0f s "
                             "(--start-timeout): %s" % (
                                 len(missing), len(expected), a.start_timeout,
                                 ", ".join("%s %d" % n for n in missing[:8])))
            if fatal is None:
                for launch, p in self.procs:
                    if p.poll() is None:
                        continue
                    left = [n for n in launch.names if n not in self.done]
                    if not left:
                        continue
                    # A ps-task's last words can trail its ssh's exit by a moment.
                    first = proc_gone.setdefault(p.pid, now)
                    if now - first > 2.0:
                        fatal = "%s%s exited with %s before %s finished" % (
                            launch.argv[0], " to " + launch.host if launch.host else "",
                            describe_exit(p.returncode), ", ".join("%s %d" % n for n in left))
                        if getattr(self.backend, "flavor", "") == "openmpi" and \
                                os.geteuid() == 0 and \
                                "--allow-run-as-root" not in (a.launcher_args or "") and \
                                not os.environ.get("OMPI_ALLOW_RUN_AS_ROOT"):
                            fatal += (" (as root, Open MPI needs --allow-run-as-root in "
                                      "--launcher-args)")
                        break
            if fatal is not None:
                if isinstance(fatal, str):
                    fatal = (now, fatal)
                text = "; ".join(t for _, t in self.cascade(fatal, state))
                log("%s; stopping the job" % text)
                self.stop_all("the job failed: " + text)
                return 1
            if all(n in self.done for n in expected):
                self.finish()
                if self.policy.failed:
                    log("all processes ended in %.1f s; failed: %s"
                        % (time.time() - start, ", ".join(sorted(self.policy.failed))))
                    return 1
                log("all %d processes finished in %.1f s" % (len(expected), time.time() - start))
                return 0
            if a.timeout and now - start > a.timeout:
                log("timeout after %.0f s (--timeout); stopping the job" % a.timeout)
                self.stop_all("timeout")
                return EXIT_TIMEOUT

    def cascade(self, first, state, window=0.5):
        """One failure often makes others follow within milliseconds (a worker dies, the next
        one finds its sums wrong), and their reports may arrive in either order. Everything
        that fails within the window is named, the earliest to end first."""
        fatals = [first]
        end = time.time() + window
        while True:
            left = end - time.time()
            if left <= 0:
                break
            try:
                conn, msg = self.events.get(timeout=left)
            except queue.Empty:
                break
            f = self.handle(conn, msg, state)
            # Connections that close now are mpirun or srun ending the others after the
            # failure: a consequence, not a cause to name.
            if f is not None and msg is not None:
                fatals.append(f)
        return sorted(fatals)

    # --- stopping ---------------------------------------------------------------------------

    def finish(self, wait=10.0):
        deadline = time.time() + wait
        for launch, p in self.procs:
            try:
                p.wait(timeout=max(deadline - time.time(), 0.01))
            except subprocess.TimeoutExpired:
                pass
        self.stop_all("finished")

    def stop_all(self, reason):
        with self.lock:
            first = not self.stopped
            self.stopped = True
            procs = list(self.procs)
        if first and self.rv is not None:
            for c in list(self.conns.values()):
                if c.name not in self.done:
                    c.send(stop=reason)
        # Each ps-task stops its process (SIGTERM, SIGKILL after its grace) and exits, and so
        # do the ssh, mpirun or srun that carried it; whatever is left after that is killed.
        grace = float(os.environ.get("PS_TASK_GRACE_S", "3")) + 3.0
        deadline = time.time() + grace
        for _, p in procs:
            try:
                p.wait(timeout=max(deadline - time.time(), 0.01))
            except subprocess.TimeoutExpired:
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for launch, p in procs:
                if p.poll() is None:
                    signal_group(p.pid, sig)
            for launch, p in procs:
                try:
                    p.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    pass
        if self.rv is not None:
            self.rv.drain(3.0)  # the launchers are gone: so are their tasks, or nearly
            self.rv.close()
        for t in self.pumps:
            t.join(timeout=5)
        if self.tmp:
            for f in os.listdir(self.tmp):
                os.unlink(os.path.join(self.tmp, f))
            os.rmdir(self.tmp)
            self.tmp = None
