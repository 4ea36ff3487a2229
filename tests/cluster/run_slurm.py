#!/usr/bin/env python3
"""ps-launch --launcher slurm on a real single-node Slurm cluster that this test starts:
munged, slurmctld and slurmd on 127.0.0.1 with config, state, spool and munge key in a
temporary directory (slurm-wlm and munge from Debian; /etc/slurm and /etc/munge untouched).
Checks: the exact-sum job with srun making its own allocation and inside an salloc
allocation, --submit (an sbatch script, waited for), a failing worker, Ctrl-C, --dry-run."""

import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fixtures import Slurm, say, show  # noqa: E402
import scenarios  # noqa: E402


def wait_job(env, job_id, timeout=300):
    deadline = time.time() + timeout
    state = "?"
    while time.time() < deadline:
        r = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        m = re.search(r"JobState=(\w+)", r.stdout)
        state = m.group(1) if m else r.stdout.strip()
        if state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            return state
        time.sleep(0.5)
    return "still %s after %d s" % (state, timeout)


def main():
    started = scenarios.begin("ps-slurm-test-")
    if isinstance(started, int):
        return started
    a, c, root = started
    slurm = Slurm(root)
    try:
        slurm.start()
        env = slurm.env()
        job = os.path.abspath(a.job)
        launch = [sys.executable, os.path.abspath(a.launcher), "--launcher", "slurm",
                  "--tracker-host", "127.0.0.1"]

        out = scenarios.exact_sum(c, launch, job, env=env)
        c.check(re.search(r"started srun \(pid \d+\) for scheduler 0", out) is not None,
                "one srun carried the whole job")

        # srun inside an existing allocation (salloc runs ps-launch with SLURM_JOB_ID set).
        salloc = ["salloc", "--ntasks=8", "--quiet"] + launch
        out = scenarios.exact_sum(c, salloc, job, env=env, label="inside salloc: ")

        # --submit: sbatch a script that runs the same ps-launch inside its allocation.
        work = os.path.join(root, "submit")
        os.makedirs(work)
        rc, out = scenarios.run(launch + ["--submit", "-s", "3", "-w", "4", "--timeout", "500",
                                          "--env", "PS_HEARTBEAT_TIMEOUT_MS=5000", "--", job,
                                          "--seed", a.seed] + scenarios.SUM_JOB,
                                env=env, cwd=work)
        show(out)
        m = re.search(r"^(\d+)$", out, re.M)
        c.check(rc == 0 and m is not None, "--submit prints the Slurm job id (rc=%d)" % rc)
        if m:
            state = wait_job(env, m.group(1))
            log_path = os.path.join(work, "slurm-%s.out" % m.group(1))
            text = open(log_path).read() if os.path.exists(log_path) else ""
            show(text)
            c.check(state == "COMPLETED", "the submitted job completed (%s)" % state)
            ok = re.findall(r"^\[worker (\d+)\] OK worker", text, re.M)
            c.check(sorted(set(ok)) == ["0", "1", "2", "3"],
                    "submitted job: every worker found the exact sums (%s)" % ok)
            procs, launchers = scenarios.job_pids(text)
            left = scenarios.assert_dead(procs + launchers)
            c.check(len(procs) == 8 and not left,
                    "submitted job: 8 processes ran (%d) and none is left (left: %s)"
                    % (len(procs), left))

        scenarios.whole_lines(c, launch, job, env=env)
        scenarios.failing_worker(c, launch, job, env=env)
        scenarios.interrupt(c, launch, job, env=env)
        scenarios.dry_run(c, launch, job, env=env, expect_lines=1,
                          pattern=r"PS_LAUNCH_SERVERS=2 .*srun --ntasks=6 --kill-on-bad-exit=1 "
                                  r"--export=ALL --distribution=cyclic python3 \S+/ps-task ")
        rc, out = scenarios.run(launch + ["--submit", "--dry-run", "-s", "1", "-w", "2", "--",
                                          job], env=env)
        show(out)
        exec_line = [l for l in out.splitlines() if l.startswith("exec ")]
        c.check(rc == 0 and "#SBATCH --ntasks=4" in out and len(exec_line) == 1 and
                "--launcher slurm" in exec_line[0] and "--submit" not in exec_line[0] and
                "--dry-run" not in exec_line[0],
                "--submit --dry-run prints the job script, which runs ps-launch without "
                "--submit")
    except RuntimeError as e:
        c.check(False, "the Slurm cluster runs: %s" % e)
    finally:
        slurm.stop()
        say("slurmctld log tail:\n" + slurm.log_tail("slurmctld", 5))
        shutil.rmtree(root, ignore_errors=True)
    return c.result()


if __name__ == "__main__":
    sys.exit(main())
