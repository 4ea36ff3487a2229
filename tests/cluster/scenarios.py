"""The checks every cluster backend must pass, given the ps-launch command prefix that selects
it: the core issue's exact-sum job, a failing process, Ctrl-C, and a dry run. Every process a
run started (backend commands and job processes, read from ps-launch's log) must be gone
afterwards, checked by PID."""

import argparse
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

from fixtures import assert_dead, reap_stale_namespaces, restore_cgroup_mounts, say, show

# The core issue's integration job (a): 3 servers, 4 workers, 10^5 random sparse int64 keys
# per worker (out of 10^6) with int64 values, 20 rounds, then every worker pulls all keys and
# compares with the exact sums.
SUM_JOB = ["--scenario", "sum", "--universe", "1000000", "--keys", "100000", "--rounds", "20"]
SMALL = ["--universe", "1000", "--keys", "100", "--rounds", "2"]


class Checks:
    def __init__(self, seed):
        self.seed = seed
        self.failures = []

    def check(self, cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            self.failures.append(what)
        return cond

    def result(self):
        if self.failures:
            print("FAILED (seed %s): %d checks: %s" % (self.seed, len(self.failures),
                                                      "; ".join(self.failures)))
            return 1
        print("PASSED")
        return 0


def job_pids(out):
    """PIDs of the job's processes and of the ssh/mpirun/srun commands ps-launch started."""
    procs = [int(p) for p in re.findall(r"started \w+ \d+ pid (\d+)", out)]
    launchers = [int(p) for p in re.findall(r"started [\w.\-]+ \(pid (\d+)\)", out)]
    return procs, launchers


def test_args():
    """The arguments every cluster test takes (CMake passes the launcher and the job)."""
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--seed", default="2026")
    return p.parse_args()


def begin(prefix):
    """The start every backend test shares: its arguments, the re-run inside a namespace of its
    own, the checks and a temporary directory. Returns (args, checks, root), or the exit code
    of the re-run to return with."""
    a = test_args()
    rc = reexec_in_loopback_namespace(sys.argv)
    if rc is not None:
        return rc
    return a, Checks(a.seed), tempfile.mkdtemp(prefix=prefix)


def run(cmd, env=None, timeout=600, cwd=None):
    say("running: " + " ".join(cmd))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=env, timeout=timeout, cwd=cwd)
    return r.returncode, r.stdout


def exact_sum(c, launch, job, env=None, servers=3, workers=4, label="", extra_env=()):
    cmd = launch + ["-s", str(servers), "-w", str(workers), "--timeout", "500",
                    "--env", "PS_HEARTBEAT_TIMEOUT_MS=5000"]
    for e in extra_env:
        cmd += ["--env", e]
    cmd += ["--", job, "--seed", str(c.seed)] + SUM_JOB
    t = time.time()
    rc, out = run(cmd, env)
    show(out)
    ok = re.findall(r"^\[worker (\d+)\] OK worker", out, re.M)
    stats = re.findall(r"^\[server \d+\] STATS", out, re.M)
    c.check(rc == 0, "%sexact-sum job (%d servers, %d workers) exits 0 (rc=%d, %.1f s)"
            % (label, servers, workers, rc, time.time() - t))
    c.check(sorted(set(ok)) == [str(i) for i in range(workers)],
            "%severy worker pulled every key and found the exact sums (OK from %s)"
            % (label, sorted(set(ok))))
    c.check(len(stats) == servers, "%severy server finished (%d STATS lines)"
            % (label, len(stats)))
    procs, launchers = job_pids(out)
    c.check(len(procs) == 1 + servers + workers, "%s%d job processes reported their PIDs"
            % (label, len(procs)))
    left = assert_dead(procs + launchers)
    c.check(not left, "%sno process is left after the job (left: %s)" % (label, left))
    return out


def whole_lines(c, launch, job, env=None, servers=2, workers=3, size=200000):
    """Every process prints three lines of `size` letters at once: each must reach ps-launch's
    output whole (mpirun's own forwarding split long lines of several ranks mid-way)."""
    rc, out = run(launch + ["-s", str(servers), "-w", str(workers), "--timeout", "120", "--",
                            job, "--shout", str(size)] + SMALL, env)
    lines = re.findall(r"^\[(?:server|worker) \d+\] SHOUT (\w) (\w*)$", out, re.M)
    whole = [1 for ch, body in lines if len(body) == size and body == ch * size]
    if len(whole) != 3 * (servers + workers):
        for line in out.splitlines():  # what came instead, shortened
            if "SHOUT" in line or len(line) > 1000:
                say("%d chars: %s ... %s" % (len(line), line[:60], line[-30:]))
    c.check(rc == 0 and len(whole) == 3 * (servers + workers),
            "every process's long lines arrive whole (%d of %d; rc=%d)"
            % (len(whole), 3 * (servers + workers), rc))


def failing_worker(c, launch, job, env=None):
    rc, out = run(launch + ["-s", "1", "-w", "2", "--timeout", "120", "--", job, "--scenario",
                            "fail"] + SMALL, env)
    show(out)
    c.check(rc == 1, "a failing worker makes ps-launch exit 1 (rc=%d)" % rc)
    # Worker 0 may fail right after (its sums miss worker 1's pushes): then both are named,
    # the first to end first, and that can be worker 0: worker 1 finalizes its node before it
    # exits, while worker 0 exits as soon as it finds a wrong sum.
    c.check(re.search(r"ps-launch: ([^\n]*; )?worker 1 \(pid \d+ on [^;]*\) exited with code 3"
                      r"(; [^\n]*)?; stopping the job", out) is not None,
            "the message names the failed process, its host and its exit code")
    procs, launchers = job_pids(out)
    left = assert_dead(procs + launchers)
    c.check(not left, "no process survives the failed job (left: %s)" % left)


def interrupt(c, launch, job, env=None, sig=signal.SIGINT):
    """Ctrl-C while every process runs: ps-launch exits 130 and stops every process on every
    host, and the ssh/mpirun/srun commands. With sig=SIGKILL ps-launch cannot clean up: every
    ps-task sees its connection to ps-launch break and stops its process itself."""
    cmd = launch + ["-s", "1", "-w", "2", "--", job, "--scenario", "hang"] + SMALL
    say("running: " + " ".join(cmd))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    seen = ""
    deadline = time.time() + 120
    # select() bounds each read: a launcher that hangs silently must not hang the test.
    while len(job_pids(seen)[0]) < 4:
        left = deadline - time.time()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            break
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
    time.sleep(1.0)
    proc.send_signal(sig)
    try:
        rest, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        rest, _ = proc.communicate()
    seen += rest
    show(seen)
    procs, launchers = job_pids(seen)
    what = "Ctrl-C" if sig == signal.SIGINT else "SIGKILL of ps-launch"
    want = 130 if sig == signal.SIGINT else -sig
    c.check(proc.returncode == want, "%s: ps-launch exits with %d (rc=%s)"
            % (what, want, proc.returncode))
    c.check(len(procs) == 4, "all 4 processes had started before %s (%d)" % (what, len(procs)))
    left = assert_dead(procs + launchers, grace=20.0)
    c.check(not left, "no process survives %s, on any host (left: %s)" % (what, left))


def dry_run(c, launch, job, env=None, expect_lines=None, pattern=None):
    rc, out = run(launch + ["-s", "2", "-w", "3", "--dry-run", "--", job] + SMALL, env)
    show(out)
    lines = [l for l in out.splitlines() if l and not l.startswith("#")]
    c.check(rc == 0, "--dry-run exits 0")
    if expect_lines is not None:
        c.check(len(lines) == expect_lines, "--dry-run prints %d commands (%d)"
                % (expect_lines, len(lines)))
    if pattern is not None:
        c.check(all(re.search(pattern, l) for l in lines),
                "every printed command matches %r" % pattern)
    c.check("started" not in out, "--dry-run starts nothing")
    return out


def reexec_in_loopback_namespace(argv):
    """Runs this test again inside a new network namespace of its own, so that whatever
    address a launcher picks (a host name resolving to an outside address, say), no packet can
    leave this machine: it has loopback and one end of a veth pair whose other end is in the
    same namespace and down (an address on a non-loopback interface is there only because
    getaddrinfo(AI_ADDRCONFIG), which slurmctld uses, finds nothing without one). Returns the
    exit code, or None when the test should run here (already inside: then the cgroup mounts
    `ip netns exec` hid are put back for slurmd; or namespaces are not available: then it uses
    127.0.0.1 on this host)."""
    if os.environ.get("PS_TEST_NETNS"):
        restore_cgroup_mounts()
        return None
    if os.geteuid() != 0:
        return None
    reap_stale_namespaces()
    ns = "ps-lo-%d" % os.getpid()
    if subprocess.run(["ip", "netns", "add", ns], stderr=subprocess.DEVNULL).returncode != 0:
        say("no network namespaces here; running on this host's loopback")
        return None
    try:
        for cmd in (["link", "set", "lo", "up"],
                    ["link", "add", "ps0", "type", "veth", "peer", "name", "ps1"],
                    ["addr", "add", "10.213.99.1/32", "dev", "ps0"],
                    ["link", "set", "ps0", "up"]):
            subprocess.run(["ip", "-n", ns] + cmd, check=True)
        routes = subprocess.run(["ip", "-n", ns, "route", "show"], stdout=subprocess.PIPE,
                                text=True).stdout
        if "default" in routes or " via " in routes:
            raise RuntimeError("namespace %s has routes out: %s" % (ns, routes))
        say("running inside network namespace %s (no route out)" % ns)
        env = dict(os.environ, PS_TEST_NETNS=ns)
        return subprocess.run(["ip", "netns", "exec", ns, sys.executable] + argv,
                              env=env).returncode
    finally:
        subprocess.run(["ip", "netns", "del", ns])
