#!/usr/bin/env python3
"""ps-launch --launcher ssh against a real sshd (openssh-server) that this test starts on
127.0.0.1 and 127.0.0.2 with its own host key, client key and config in a temporary directory
(nothing in /etc/ssh or ~/.ssh is read or changed). The hostfile names two hosts (ssh config
aliases for the two addresses). Checks: the exact-sum job, --sync-dst-dir (rsync a directory
holding the job and run the copy), --placement packed with slots, a failing worker, Ctrl-C,
a SIGKILLed ps-launch (every
ps-task stops its process), --join over ssh, an unreachable host, --dry-run."""

import os
import re
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fixtures import Sshd, free_port, show  # noqa: E402
import scenarios  # noqa: E402


def main():
    started = scenarios.begin("ps-ssh-test-")
    if isinstance(started, int):
        return started
    a, c, root = started
    sshd = Sshd(root, ["127.0.0.1", "127.0.0.2"])
    try:
        sshd.start()
        cfg = os.path.join(root, "ssh_config")
        sshd.client_config(cfg, ["host0", "host1"])
        hosts = os.path.join(root, "hosts")
        with open(hosts, "w") as f:
            f.write("# two hosts, both served by the test's sshd\nhost0\nhost1\n")
        launch = [sys.executable, os.path.abspath(a.launcher), "--launcher", "ssh",
                  "--hostfile", hosts, "--launcher-args=-F " + cfg]
        job = os.path.abspath(a.job)

        out = scenarios.exact_sum(c, launch, job)
        placed = re.findall(r"started ssh \(pid \d+\) for (\w+ \d+) on (host\d)", out)
        c.check(len(placed) == 8 and {h for _, h in placed} == {"host0", "host1"},
                "round-robin placement used both hosts: %s" % placed)

        # --sync-dst-dir: a directory holding only the job is copied and the copy runs.
        src = os.path.join(root, "src")
        dst = os.path.join(root, "dst")
        os.makedirs(src)
        shutil.copy(job, os.path.join(src, "kv_exact_job"))
        packed_hosts = os.path.join(root, "hosts_slots")
        with open(packed_hosts, "w") as f:
            f.write("host0 slots=3\nhost1:4\n")
        cmd = [sys.executable, os.path.abspath(a.launcher), "--launcher", "ssh", "--hostfile",
               packed_hosts, "--placement", "packed", "--launcher-args=-F " + cfg,
               "--sync-dst-dir", dst, "-s", "2", "-w", "3", "--timeout", "120", "--",
               "./kv_exact_job", "--scenario", "sum", "--seed", a.seed] + scenarios.SMALL
        # ps-launch runs in src, so the program path is relative to the synced copy.
        rc, out = scenarios.run(cmd, cwd=src)
        show(out)
        c.check(rc == 0 and len(re.findall(r"^\[worker \d\] OK", out, re.M)) == 3,
                "--sync-dst-dir: the synced copy ran and the sums are exact (rc=%d)" % rc)
        c.check(os.path.exists(os.path.join(dst, "kv_exact_job")),
                "--sync-dst-dir: rsync copied the job to the destination")
        placed = re.findall(r"started ssh \(pid \d+\) for (\w+ \d+) on (host\d)", out)
        c.check([h for _, h in placed] == ["host0"] * 3 + ["host1"] * 3,
                "--placement packed filled host0's 3 slots first: %s" % placed)

        # Worker groups over ssh, one with a command of its own (--group-cmd, which ps-task
        # takes from ps-launch's "go"): group b says so before it runs the job.
        own = "/bin/sh -c 'echo GROUP-B-CMD; exec \"$0\" \"$@\"' %s --scenario sum --seed %s %s" % (
            job, a.seed, " ".join(scenarios.SMALL))
        rc, out = scenarios.run(launch + ["-s", "1", "-w", "a:1,b:2", "--timeout", "120",
                                          "--group-cmd", "b=" + own, "--", job, "--scenario",
                                          "sum", "--seed", a.seed] + scenarios.SMALL)
        show(out)
        said = sorted(re.findall(r"^\[worker (\d)\] GROUP-B-CMD", out, re.M))
        ok = sorted(re.findall(r"^\[worker (\d)\] OK", out, re.M))
        c.check(rc == 0 and said == ["1", "2"] and ok == ["0", "1", "2"],
                "--group-cmd over ssh: group b's workers ran its command (%s), every worker's "
                "sums are exact (%s; rc=%d)" % (said, ok, rc))

        scenarios.whole_lines(c, launch, job)
        scenarios.failing_worker(c, launch, job)
        scenarios.interrupt(c, launch, job)
        scenarios.interrupt(c, launch, job, sig=signal.SIGKILL)

        join_over_ssh(c, a, hosts, cfg)

        bad = os.path.join(root, "hosts_bad")
        with open(bad, "w") as f:
            f.write("host0\nnowhere\n")
        with open(cfg, "a") as f:
            f.write("Host nowhere\n  HostName 127.0.0.1\n  Port %d\n  ConnectTimeout 5\n"
                    % free_port())
        rc, out = scenarios.run([sys.executable, os.path.abspath(a.launcher), "--launcher",
                                 "ssh", "--hostfile", bad, "--launcher-args=-F " + cfg, "-s",
                                 "1", "-w", "1", "--timeout", "120", "--", job,
                                 "--scenario", "sum"] + scenarios.SMALL)
        show(out)
        c.check(rc == 1 and re.search(r"ssh to nowhere exited with code 255 before server 0",
                                      out) is not None,
                "an unreachable host stops the job naming the host and the process (rc=%d)"
                % rc)
        left = scenarios.assert_dead(sum(scenarios.job_pids(out), []))
        c.check(not left, "no process is left after the unreachable host (%s)" % left)

        scenarios.dry_run(c, launch, job, expect_lines=6,
                          pattern=r"^ssh -o BatchMode=yes -F \S+ -n host[01] 'cd .* && exec "
                                  r"env .*PS_ROLE=(scheduler|server|worker) .*PS_TRACKER=ssh:PORT")
    finally:
        sshd.stop()
        shutil.rmtree(root, ignore_errors=True)
    return c.result()


def join_over_ssh(c, a, hosts, cfg):
    """A running job (local backend, replicated) gets a third server through the ssh backend's
    --join: the new server copies its ranges, the ring cuts over, the sums stay exact."""
    job = [os.path.abspath(a.job), "--scenario", "sum", "--seed", a.seed, "--universe",
           "200000", "--keys", "20000", "--rounds", "60", "--pace-ms", "50", "--min-epoch", "2"]
    main = subprocess.Popen([sys.executable, os.path.abspath(a.launcher), "-s", "2", "-w", "2",
                             "--env", "PS_REPLICAS=1", "--timeout", "300", "--"] + job,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, port = [], None
    for line in main.stdout:
        lines.append(line)
        m = re.search(r"scheduler listens on \S+:(\d+)", line)
        if m:
            port = m.group(1)
            break
    rc, jout = scenarios.run([sys.executable, os.path.abspath(a.launcher), "--launcher", "ssh",
                              "--hostfile", hosts, "--launcher-args=-F " + cfg, "--join",
                              "127.0.0.1:%s" % port, "-s", "1", "-w", "0", "--timeout", "300",
                              "--"] + job)
    show(jout)
    out = "".join(lines) + main.communicate()[0]
    show(out)
    c.check(rc == 0 and re.search(r"started server 0 pid \d+ on ", jout) is not None,
            "--join over ssh: the new server ran and exited 0 (rc=%d)" % rc)
    c.check(main.returncode == 0 and "cut-over to ring epoch 2" in out,
            "--join over ssh: the ring cut over to the new server")
    c.check(len(re.findall(r"^\[worker \d\] OK", out, re.M)) == 2,
            "--join over ssh: both workers found the exact sums")


if __name__ == "__main__":
    sys.exit(main())
