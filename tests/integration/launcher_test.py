#!/usr/bin/env python3
"""Behaviour of tracker/ps-launch: failure propagation, timeout, Ctrl-C, dry run, bad config.
Every process the launcher starts must be gone afterwards (checked by PID)."""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def pids_of(text):
    return [int(p) for p in re.findall(r"started \w+ \d+ pid (\d+)", text)]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120, **kw)
    return r.returncode, r.stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--job", required=True)
    a = p.parse_args()
    L = [sys.executable, a.launcher]
    small = ["--universe", "1000", "--keys", "100", "--rounds", "2"]

    rc, out = run(L + ["-s", "1", "-w", "2", "--", a.job, "--scenario", "fail"] + small)
    check(rc != 0, "a failing worker makes ps-launch exit non-zero (rc=%d)" % rc)
    check(re.search(r"worker 1 \(pid \d+\) exited with code 3", out) is not None,
          "the message names the failed process and its exit code")
    pids = pids_of(out)
    check(len(pids) == 4, "four processes were started (%d)" % len(pids))
    check(not any(alive(x) for x in pids), "no process survives a failed job")
    check(re.search(r"worker 1 \(pid \d+\) exited with code 3; its last error output:\n"
                    r"(    .*\n)*    worker 1 fails on purpose$", out, re.M) is not None,
          "... and prints the failed process's last error lines beside its name")

    rc, out = run(L + ["-s", "1", "-w", "1", "--timeout", "-5", "--", a.job])
    check(rc == 2 and "--timeout must be at least 0" in out and "Traceback" not in out,
          "a negative --timeout is refused (rc=%d)" % rc)
    rc, out = run(L + ["-s", "1", "-w", "1", "--", a.job + ".missing"])
    check(rc == 2 and "cannot run %r: no such file" % (a.job + ".missing") in out and
          "Traceback" not in out and "started" not in out,
          "a program that does not exist is named before anything starts, without a "
          "traceback (rc=%d)" % rc)
    rc, out = run(L + ["-s", "1", "-w", "1", "--", "ps-no-such-program"])
    check(rc == 2 and "not found on PATH" in out and "Traceback" not in out,
          "... and one looked up on PATH too (rc=%d)" % rc)

    quiet = dict(os.environ)  # scripts/test.sh asks every launcher for stacks
    quiet.pop("PS_LAUNCH_STACKS_ON_TIMEOUT", None)
    rc, out = run(L + ["-s", "1", "-w", "1", "--timeout", "3", "--", a.job, "--scenario",
                       "hang"] + small, env=quiet)
    check(rc == 124, "--timeout stops a hanging job with exit code 124 (rc=%d)" % rc)
    check(not any(alive(x) for x in pids_of(out)), "no process survives a timeout")
    check("stacks of" not in out, "no stacks without --stacks-on-timeout")

    rc, out = run(L + ["-s", "1", "-w", "1", "--timeout", "3", "--stacks-on-timeout", "--",
                       a.job, "--scenario", "hang"] + small, env=quiet)
    if shutil.which("gdb"):
        # The worker sleeps in its main thread: its stack shows where (a sleep), beside the
        # node's own threads.
        worker = re.search(r"stacks of worker 0 pid \d+:\n((#|Thread).*\n)+", out)
        check(rc == 124 and worker is not None and "sleep" in worker.group(0) and
              "RecvLoop" in worker.group(0),
              "--stacks-on-timeout prints the hung worker's stacks before it stops the job")
    else:
        check(rc == 124 and "gdb not found" in out, "--stacks-on-timeout says gdb is missing")
    check(not any(alive(x) for x in pids_of(out)), "... and no process survives")

    proc = subprocess.Popen(L + ["-s", "1", "-w", "1", "--", a.job, "--scenario", "hang"] + small,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = ""
    deadline = time.time() + 30
    while len(pids_of(seen)) < 3 and time.time() < deadline:
        seen += proc.stdout.readline()
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    seen += rest
    check(proc.returncode == 130, "Ctrl-C stops the job with exit code 130 (rc=%s)"
          % proc.returncode)
    check(len(pids_of(seen)) == 3 and not any(alive(x) for x in pids_of(seen)),
          "no process survives Ctrl-C")

    # A worker beyond the job's count, started by hand, is told why it is refused (the REJECT
    # was dropped as malformed on real transports: it waited out its registration timeout).
    proc = subprocess.Popen(L + ["-s", "1", "-w", "1", "--timeout", "60", "--", a.job,
                                 "--scenario", "hang"] + small,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = ""
    deadline = time.time() + 30
    while "HANGING worker 0" not in seen and time.time() < deadline:
        seen += proc.stdout.readline()
    port = re.search(r"scheduler listens on [\d.]+:(\d+)", seen)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PS_", "DMLC_"))}
    env.update({"PS_ROLE": "worker", "PS_NUM_SERVERS": "1", "PS_NUM_WORKERS": "1",
                "PS_SCHEDULER_PORT": port.group(1) if port else "1",
                "PS_REGISTER_TIMEOUT_MS": "30000", "PS_VAN": os.environ.get("PS_VAN", "zmq")})
    t0 = time.time()
    rc, out = run([a.job] + small, env=env)
    took = time.time() - t0
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    check(rc != 0 and "registration rejected by the scheduler: the job already has its 1 "
          "workers" in out and took < 15,
          "an extra worker is told why it is refused, at once (rc=%d, %.1f s): %s"
          % (rc, took, out.strip().splitlines()[-1] if out.strip() else ""))
    check(not any(alive(x) for x in pids_of(seen + rest)), "no process survives")

    rc, out = run(L + ["-s", "2", "-w", "3", "--dry-run", "--", a.job, "--scenario", "sum"])
    lines = [l for l in out.splitlines() if l.startswith("PS_ROLE=")]
    check(rc == 0 and len(lines) == 6, "--dry-run prints one command per process")

    rc, out = run(L + ["-s", "1", "-w", "1", "--env", "PS_VNODES=zero", "--", a.job] + small)
    check(rc != 0 and "PS_VNODES='zero'" in out,
          "bad configuration fails the job with the option's name")

    rc, out = run(L + ["-s", "1", "-w", "1", "--env", "DMLC_NUM_WORKER=1", "--", a.job,
                       "--scenario", "sum"] + small)
    check(rc == 0 and re.search(r"^\[worker 0\] OK", out, re.M) is not None,
          "a small job passes and its lines carry the [role rank] prefix")

    # --join to an address where no scheduler listens fails at once, saying so.
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed = s.getsockname()[1]
    s.close()
    t0 = time.time()
    rc, out = run(L + ["--join", "127.0.0.1:%d" % closed, "-s", "1", "-w", "0", "--", a.job]
                  + small)
    took = time.time() - t0
    check(rc != 0 and "no scheduler listens at 127.0.0.1:%d" % closed in out,
          "--join to a closed port fails naming the address (rc=%d)" % rc)
    check(took < 20, "... within seconds, not the registration timeout (%.1f s)" % took)

    if failures:
        print("FAILED: %d checks" % len(failures))
        return 1
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
