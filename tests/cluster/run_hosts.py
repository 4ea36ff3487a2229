#!/usr/bin/env python3
"""Four simulated hosts: network namespaces joined by a bridge (iproute2), each with its own
address and its own sshd (port 22 of its namespace). ps-launch runs inside host 0's namespace
and spreads the scheduler, 3 servers and 4 workers over the four hosts with the ssh backend;
every node binds its host's address, so the job's traffic crosses the bridge.

Safety: the bridge lives in a namespace of its own, the root namespace is not attached, no
namespace has a default route, and `ip route get` from every host to every other host is
checked on-link before the first connection. Namespaces are deleted on exit, also on failure.

Checks: the exact-sum job; then the same with replication (PS_REPLICAS=1) while one host's
server is SIGKILLed mid-run (a seeded host and moment): the job goes on and every sum stays
exact; Ctrl-C stops the processes on every host; then the mpi backend across the same four
hosts (Open MPI, and MPICH when installed: mpirun starts its daemons over the hosts' sshds);
then the slurm backend on a four-node Slurm cluster with a slurmd in each host (cyclic and
block placement, the scheduler on the first task's node). And a job started by hand as ps-lite
users and the Kubernetes operators start one (issue 19): each process in its host's namespace
with only DMLC_* variables, the scheduler named by a host name that resolves to host 0 (an
/etc/netns/NAME/hosts entry, as a Service name would), no node address given."""

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fixtures import Hosts, Slurm, Sshd, assert_dead, say, tempdir  # noqa: E402
import scenarios  # noqa: E402
from scenarios import Checks  # noqa: E402


def main():
    a = scenarios.test_args()
    c = Checks(a.seed)
    rng = random.Random(int(a.seed))
    root = tempdir("ps-hosts-test-")
    hosts = Hosts(4)
    sshds = []
    try:
        hosts.start()
        cfg = os.path.join(root, "ssh_config")
        key = None
        for i, ns in enumerate(hosts.names):
            s = Sshd(root, [hosts.addr(i)], netns=ns)
            s.start(client_key=key)
            key = s.client_key
            s.client_config(cfg, ["host%d" % i])
            s.client_config(cfg, [hosts.addr(i)])  # MPI's hostfile names hosts by address
            sshds.append(s)
        hostfile = os.path.join(root, "hosts")
        with open(hostfile, "w") as f:
            f.write("".join("host%d\n" % i for i in range(4)))
        launch = ["ip", "netns", "exec", hosts.names[0], sys.executable,
                  os.path.abspath(a.launcher), "--launcher", "ssh", "--hostfile", hostfile,
                  "--launcher-args=-F " + cfg]
        job = os.path.abspath(a.job)

        out = scenarios.exact_sum(c, launch, job)
        addrs = set(re.findall(r"started \w+ \d+ pid \d+ on \S+ \((%s\.\d+)\)"
                               % re.escape(hosts.subnet), out))
        c.check(addrs == {hosts.addr(i) for i in range(4)},
                "the job's processes ran on all four hosts: %s" % sorted(addrs))
        m = re.search(r"scheduler listens on (\S+):\d+", out)
        c.check(m is not None and m.group(1) == hosts.addr(0),
                "the scheduler bound host 0's address (%s)" % (m.group(1) if m else None))

        dmlc_by_hand(c, hosts, job, a.seed)
        kill_server(c, launch, job, hosts, rng, a.seed)
        scenarios.interrupt(c, launch, job)
        mpi_over_hosts(c, root, cfg, hosts, a)
        slurm_over_hosts(c, root, hosts, a)
    finally:
        for s in sshds:
            s.stop()
        hosts.stop()
        shutil.rmtree(root, ignore_errors=True)
    left = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE,
                          text=True).stdout
    c.check(not any(n in left for n in hosts.names + [hosts.bridge_ns]),
            "every namespace was deleted")
    return c.result()


def dmlc_by_hand(c, hosts, job, seed):
    """Scheduler on host 0 (started last, as pods start in any order), a server on hosts 1
    and 2, workers on hosts 2 and 3 ranked by DMLC_WORKER_ID in reverse; DMLC_PS_ROOT_URI is
    the name ps-scheduler, in each namespace's own hosts file (ip netns exec mounts
    /etc/netns/NAME/hosts over /etc/hosts). Each node must find its own address (its route to
    the scheduler) for the others to reach it across the bridge."""
    made = []
    procs = []
    try:
        with open("/etc/hosts") as f:
            base_hosts = f.read()
        for ns in hosts.names:
            d = os.path.join("/etc/netns", ns)
            os.makedirs(d, exist_ok=True)
            made.append(d)
            with open(os.path.join(d, "hosts"), "w") as f:
                f.write(base_hosts + "\n%s ps-scheduler\n" % hosts.addr(0))
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PS_") and not k.startswith("DMLC_")}
        env.update({"DMLC_PS_ROOT_URI": "ps-scheduler", "DMLC_PS_ROOT_PORT": "9393",
                    "DMLC_NUM_SERVER": "2", "DMLC_NUM_WORKER": "2"})
        if os.environ.get("PS_VAN"):
            env["PS_VAN"] = os.environ["PS_VAN"]
        args = [job, "--seed", str(seed), "--scenario", "sum", "--universe", "20000",
                "--keys", "2000", "--rounds", "5"]
        root = tempdir("ps-dmlc-hosts-")

        def start(name, host, extra):
            e = dict(env)
            e.update(extra)
            f = open(os.path.join(root, name.replace(" ", "_") + ".log"), "w+")
            p = subprocess.Popen(["ip", "netns", "exec", hosts.names[host]] + args, env=e,
                                 stdout=f, stderr=subprocess.STDOUT)
            procs.append((name, p, f))

        start("worker 1", 3, {"DMLC_ROLE": "worker", "DMLC_WORKER_ID": "1"})
        start("worker 0", 2, {"DMLC_ROLE": "worker", "DMLC_WORKER_ID": "0"})
        start("server a", 1, {"DMLC_ROLE": "server"})
        start("server b", 2, {"DMLC_ROLE": "server"})
        time.sleep(1.0)
        start("scheduler", 0, {"DMLC_ROLE": "scheduler"})
        deadline = time.time() + 120
        while time.time() < deadline and any(p.poll() is None for _, p, _ in procs):
            time.sleep(0.1)
        outs = {}
        for name, p, f in procs:
            if p.poll() is None:
                p.kill()  # by PID: this test's own process
                p.wait()
            f.seek(0)
            outs[name] = f.read()
            f.close()
        for name, p, _ in procs:
            c.check(p.returncode == 0, "by hand with DMLC_* only: %s exits 0 (rc=%s)%s"
                    % (name, p.returncode, "" if p.returncode == 0 else
                       "\n" + outs[name][-1500:]))
        for rank in (0, 1):
            c.check(re.search(r"^OK worker %d checked" % rank, outs["worker %d" % rank], re.M)
                    is not None,
                    "by hand: the worker with DMLC_WORKER_ID=%d ended as worker %d with exact "
                    "sums across the hosts" % (rank, rank))
        shutil.rmtree(root, ignore_errors=True)
    finally:
        for _, p, f in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            f.close()
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


def kill_server(c, launch, job, hosts, rng, seed):
    """Replicated job; a seeded host's server gets SIGKILL a seeded 0-400 ms after every worker
    started pushing."""
    delay = rng.uniform(0.0, 0.4)
    cmd = launch + ["-s", "3", "-w", "4", "--timeout", "300", "--allow-dead-servers", "1",
                    "--env", "PS_REPLICAS=1", "--env", "PS_HEARTBEAT_INTERVAL_MS=100",
                    "--env", "PS_HEARTBEAT_TIMEOUT_MS=1000", "--", job, "--seed", seed,
                    "--scenario", "sum", "--universe", "200000", "--keys", "20000",
                    "--rounds", "40"]
    say("running: " + " ".join(cmd))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    servers = {}
    pushing = 0
    victim = None
    state = {}
    lines = []

    def kill_later(pid):
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        state["killed_at"] = len(lines)
        say("SIGKILL to the server on %s (pid %d) %.0f ms after the pushes started"
            % (victim[1], pid, delay * 1000))

    for line in proc.stdout:
        lines.append(line)
        sys.stdout.write(line)
        m = re.search(r"started server (\d+) pid (\d+) on \S+ \((\S+)\)", line)
        if m:
            servers[int(m.group(1))] = (int(m.group(2)), m.group(3))
        if re.match(r"\[worker \d+\] PUSHING", line):
            pushing += 1
            if pushing == 4 and victim is None and len(servers) == 3:
                rank = rng.randrange(3)
                victim = (servers[rank][0], servers[rank][1])
                threading.Thread(target=kill_later, args=(victim[0],), daemon=True).start()
    rc = proc.wait()
    out = "".join(lines)
    c.check(victim is not None and "killed_at" in state,
            "a server was SIGKILLed while the workers pushed (%s)" % (victim,))
    if "killed_at" in state:
        later = "".join(lines[state["killed_at"]:])
        c.check(len(re.findall(r"^\[worker \d+\] OK", later, re.M)) == 4,
                "every worker finished after the kill")
    c.check(re.search(r"server \d+ \(pid %d on .*\) exited with signal 9; the job goes on"
                      % (victim[0] if victim else -1), out) is not None,
            "ps-launch saw the server die and let the job go on")
    c.check(rc == 0, "the job with one host's server killed exits 0 (rc=%d)" % rc)
    ok = re.findall(r"^\[worker (\d+)\] OK worker", out, re.M)
    c.check(sorted(set(ok)) == ["0", "1", "2", "3"],
            "replicated job: every sum exact after losing a server (OK from %s)" % ok)
    procs, launchers = scenarios.job_pids(out)
    left = assert_dead(procs + launchers)
    c.check(not left, "no process is left after the fault job (left: %s)" % left)


def mpi_over_hosts(c, root, cfg, hosts, a):
    """The mpi backend across the four hosts: mpirun (run in host 0) starts its daemons over
    ssh, the processes spread round-robin, and the exact-sum job passes; with Open MPI and,
    when installed, MPICH."""
    hostfile = os.path.join(root, "mpi_hosts")
    with open(hostfile, "w") as f:
        f.write("".join("%s slots=2\n" % hosts.addr(i) for i in range(4)))
    # MPICH's -launcher-exec takes a program, not a command line.
    wrapper = os.path.join(root, "ssh-wrapper")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec ssh -F %s \"$@\"\n" % cfg)
    os.chmod(wrapper, 0o755)
    flavors = []
    if shutil.which("mpirun.openmpi"):
        flavors.append(("Open MPI", "mpirun.openmpi",
                        "--allow-run-as-root --mca plm_rsh_agent %s" % wrapper))
    if shutil.which("mpiexec.mpich"):
        flavors.append(("MPICH", "mpiexec.mpich", "-launcher ssh -launcher-exec %s" % wrapper))
    if not flavors:
        print("note: no MPI installed; the mpi backend across hosts is not checked")
    for label, mpirun, extra in flavors:
        launch = ["ip", "netns", "exec", hosts.names[0], sys.executable,
                  os.path.abspath(a.launcher), "--launcher", "mpi", "--mpirun", mpirun,
                  "--hostfile", hostfile, "--launcher-args=" + extra]
        out = scenarios.exact_sum(c, launch, os.path.abspath(a.job), label=label + " on 4 hosts: ")
        addrs = set(re.findall(r"started \w+ \d+ pid \d+ on \S+ \((%s\.\d+)\)"
                               % re.escape(hosts.subnet), out))
        c.check(addrs == {hosts.addr(i) for i in range(4)},
                "%s on 4 hosts: the processes ran on all four hosts: %s" % (label, sorted(addrs)))


def slurm_over_hosts(c, root, hosts, a):
    """The slurm backend on a four-node Slurm cluster: a slurmd in each host's namespace (2
    CPUs each), slurmctld and ps-launch in host 0's. srun places the 8 tasks cyclically (one
    per node in turn) or in blocks; the scheduler is task 0, so it runs on the first node, and
    every other task learns its address from there."""
    if shutil.which("slurmctld") is None and not os.path.exists("/usr/sbin/slurmctld"):
        print("note: Slurm not installed; the slurm backend across hosts is not checked")
        return
    nodes = [("h%d" % i, hosts.addr(i), ns) for i, ns in enumerate(hosts.names)]
    slurm = Slurm(root, cpus=2, nodes=nodes)
    try:
        slurm.start()
        env = slurm.env()
        for placement, expect in (("roundrobin", [0, 1, 2, 3, 0, 1, 2, 3]),
                                  ("packed", [0, 0, 1, 1, 2, 2, 3, 3])):
            launch = ["ip", "netns", "exec", hosts.names[0], sys.executable,
                      os.path.abspath(a.launcher), "--launcher", "slurm", "--tracker-host",
                      hosts.addr(0), "--placement", placement]
            label = "Slurm on 4 nodes, %s: " % placement
            out = scenarios.exact_sum(c, launch, os.path.abspath(a.job), env=env, label=label)
            where = dict(re.findall(r"started (\w+ \d+) pid \d+ on \S+ \((\S+)\)", out))
            order = ["scheduler 0", "server 0", "server 1", "server 2", "worker 0", "worker 1",
                     "worker 2", "worker 3"]
            got = [where.get(n) for n in order]
            c.check(got == [hosts.addr(i) for i in expect],
                    "%seach process ran on the node srun's distribution puts it: %s"
                    % (label, got))
            m = re.search(r"scheduler listens on (\S+):\d+", out)
            c.check(m is not None and m.group(1) == hosts.addr(0),
                    "%sthe scheduler's address is the first task's node" % label)
    except RuntimeError as e:
        c.check(False, "the four-node Slurm cluster runs: %s" % e)
    finally:
        slurm.stop()


if __name__ == "__main__":
    sys.exit(main())
