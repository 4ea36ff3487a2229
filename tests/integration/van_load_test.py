#!/usr/bin/env python3
"""integration.van_load: libps loads the UCX van (libps_ucx.so.0) from its own directory only
when a node asks for PS_VAN=ucx. With a copy of libps in a directory of its own (first on
LD_LIBRARY_PATH) and no libps_ucx beside it, a ZeroMQ job runs to its exact result, and a UCX
job stops at once with an error naming PS_VAN and the library. Processes are the launcher's
(stopped by ps-launch on its timeout)."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile


def run(a, d, van):
    cmd = [sys.executable, a.launcher, "-s", "1", "-w", "1", "--timeout", "60",
           "--env", "LD_LIBRARY_PATH=" + d, "--env", "PS_VAN=" + van, "--",
           a.job, "--seed", "5", "--scenario", "sum", "--universe", "2000", "--keys", "200",
           "--rounds", "3"]
    print("running: " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120)
    return r.returncode, r.stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--libps", required=True)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(a.libps, os.path.join(d, "libps.so.0"))
        rc, out = run(a, d, "zmq")
        if rc != 0:
            print(out[-4000:])
            sys.exit("FAILED integration.van_load: a ZeroMQ job without libps_ucx exited %d" % rc)
        rc, out = run(a, d, "ucx")
        want = "PS_VAN=ucx: cannot load %s" % os.path.join(d, "libps_ucx.so.0")
        if rc == 0 or want not in out:
            print(out[-4000:])
            sys.exit("FAILED integration.van_load: a UCX job without libps_ucx exited %d, "
                     "without '%s'" % (rc, want))
    print("integration.van_load: ZeroMQ job ran without libps_ucx; UCX job stopped naming it")


if __name__ == "__main__":
    main()
