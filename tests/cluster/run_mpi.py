#!/usr/bin/env python3
"""ps-launch --launcher mpi with the real mpirun of openmpi-bin on this host (and MPICH's
mpiexec when the mpich package is present: the -env dialect). As root, Open MPI refuses to
start without --allow-run-as-root; the test passes it explicitly (ps-launch never adds it), and
checks that without it the job fails with a message that says so. Checks: the exact-sum job,
a hostfile with slots and packed placement, a failing worker, Ctrl-C, --dry-run."""

import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fixtures import show, skip, tempdir  # noqa: E402
import scenarios  # noqa: E402
from scenarios import Checks  # noqa: E402


def main():
    a = scenarios.test_args()
    openmpi = shutil.which("mpirun.openmpi") or (
        shutil.which("mpirun") if shutil.which("ompi_info") else None)
    if openmpi is None:
        skip("Open MPI's mpirun is not installed (openmpi-bin)")
    rc = scenarios.reexec_in_loopback_namespace(sys.argv)
    if rc is not None:
        return rc
    c = Checks(a.seed)
    job = os.path.abspath(a.job)
    me = [sys.executable, os.path.abspath(a.launcher), "--launcher", "mpi"]
    root_args = ["--launcher-args=--allow-run-as-root --oversubscribe"] if os.geteuid() == 0 \
        else ["--launcher-args=--oversubscribe"]
    launch = me + ["--mpirun", openmpi] + root_args

    out = scenarios.exact_sum(c, launch, job)
    c.check(re.search(r"started \S*mpirun\S* \(pid \d+\) for scheduler 0", out) is not None,
            "one mpirun carried the whole job")

    root = tempdir("ps-mpi-test-")
    try:
        hosts = os.path.join(root, "hosts")
        with open(hosts, "w") as f:
            f.write("localhost slots=8\n")
        scenarios.exact_sum(c, launch + ["--hostfile", hosts, "--placement", "packed"], job,
                            servers=2, workers=2, label="hostfile: ")
    finally:
        shutil.rmtree(root, ignore_errors=True)

    scenarios.whole_lines(c, launch, job)
    scenarios.failing_worker(c, launch, job)
    scenarios.interrupt(c, launch, job)
    scenarios.dry_run(c, launch, job, expect_lines=1,
                      pattern=r"mpirun\S* --allow-run-as-root --oversubscribe -np 1 .*-x "
                              r"PS_ROLE=scheduler .* : -np 2 .*-x PS_RANK_BASE=1 -x "
                              r"PS_ROLE=server .* : -np 3 .*-x PS_RANK_BASE=3 -x PS_ROLE=worker"
                      if os.geteuid() == 0 else None)

    if os.geteuid() == 0:
        rc, out = scenarios.run(me + ["--mpirun", openmpi, "-s", "1", "-w", "1", "--timeout",
                                      "60", "--", job, "--scenario", "sum"] + scenarios.SMALL)
        show(out)
        c.check(rc == 1 and "needs --allow-run-as-root in --launcher-args" in out,
                "as root without --allow-run-as-root, the job fails and says what to add")

    mpich = shutil.which("mpiexec.mpich") or shutil.which("mpirun.mpich")
    if mpich:
        launch = me + ["--mpirun", mpich]
        scenarios.exact_sum(c, launch, job, label="MPICH: ")
        scenarios.dry_run(c, launch, job, expect_lines=1,
                          pattern=r"-n 1 .*-env PS_ROLE scheduler .* : -n 2 .*-env "
                                  r"PS_RANK_BASE 1 -env PS_ROLE server")
    else:
        print("note: MPICH (package mpich) not installed; its -env form is checked by "
              "tracker_unit_test.py only")
    return c.result()


if __name__ == "__main__":
    sys.exit(main())
