#!/usr/bin/env python3
"""integration.dmlc_launch (issue 19, item 2): a job started the way ps-lite users and the
Kubernetes operators start one: every process by hand, with only DMLC_* variables, the scheduler
named by a host name (DMLC_PS_ROOT_URI=localhost, as a service name would be), no node host
given (each node advertises its address on the route to the scheduler), workers ranked by
DMLC_WORKER_ID (started in reverse order, the scheduler last), and one variable ps does not
read, which is named.
Before: the scheduler failed with "cannot bind tcp://localhost:PORT: No such device" and the
other nodes waited 60 s in silence. Processes are stopped by PID."""
import argparse
import os
import re
import subprocess
import sys
import time

from ports import free_port  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--job", required=True)
    a = p.parse_args()
    port = free_port()
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("PS_") and not k.startswith("DMLC_")}
    base.update({"DMLC_PS_ROOT_URI": "localhost", "DMLC_PS_ROOT_PORT": str(port),
                 "DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": "2", "DMLC_ENABLE_RDMA": "0"})
    if os.environ.get("PS_VAN"):
        base["PS_VAN"] = os.environ["PS_VAN"]
    job = [a.job, "--universe", "2000", "--keys", "200", "--rounds", "3"]
    procs = []

    def start(name, extra):
        env = dict(base)
        env.update(extra)
        f = open(os.path.join(os.environ.get("TMPDIR", "/tmp"),
                              "dmlc_%d_%s.log" % (os.getpid(), name.replace(" ", "_"))), "w+")
        procs.append((name, subprocess.Popen(job, env=env, stdout=f, stderr=subprocess.STDOUT),
                      f))

    # Pods start in any order: here the scheduler last, a second after the others, whose
    # first connections to it are refused (the UCX van dropped such a connection for good).
    start("worker id 1", {"DMLC_ROLE": "worker", "DMLC_WORKER_ID": "1"})
    start("server", {"DMLC_ROLE": "server"})
    start("worker id 0", {"DMLC_ROLE": "worker", "DMLC_WORKER_ID": "0"})
    time.sleep(1.0)
    start("scheduler", {"DMLC_ROLE": "scheduler"})
    deadline = time.time() + 120
    failures = []
    while time.time() < deadline and any(p.poll() is None for _, p, _ in procs):
        time.sleep(0.1)
    outs = {}
    for name, p, f in procs:
        if p.poll() is None:
            p.kill()  # by PID: this test's own process
            p.wait()
            failures.append("%s still ran after 120 s" % name)
        elif p.returncode != 0:
            failures.append("%s exited with %d" % (name, p.returncode))
        f.seek(0)
        outs[name] = f.read()
        f.close()
        os.unlink(f.name)
    for rank in (0, 1):
        out = outs["worker id %d" % rank]
        if not re.search(r"^OK worker %d checked" % rank, out, re.M):
            failures.append("the worker started with DMLC_WORKER_ID=%d did not end as worker %d "
                            "with exact sums:\n%s" % (rank, rank, out[-1500:]))
    for name, out in outs.items():
        if "ps: ignoring DMLC_ENABLE_RDMA: not a variable ps reads" not in out:
            failures.append("%s did not name the variable it ignores:\n%s" % (name, out[-800:]))
        if "cannot bind" in out:
            failures.append("%s: %s" % (name, out[-800:]))
    if failures:
        print("FAILED dmlc launch:\n  " + "\n  ".join(failures))
        return 1
    print("PASSED dmlc launch: scheduler named 'localhost', nodes on their route's address, "
          "workers ranked by DMLC_WORKER_ID, unknown variables named")
    return 0


if __name__ == "__main__":
    sys.exit(main())
