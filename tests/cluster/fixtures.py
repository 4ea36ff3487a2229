"""Real launchers for the cluster tests, started and torn down by the tests themselves: an sshd
with its own keys and config in a temporary directory, a single-node Slurm cluster (munged,
slurmctld, slurmd) in a temporary directory, and simulated hosts made of network namespaces
joined by a bridge. Nothing in /etc/ssh, ~/.ssh, /etc/slurm or /etc/munge is read or changed;
every daemon is stopped by the PID it was started with."""

import getpass
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def say(msg):
    print("cluster-test: %s" % msg, flush=True)


def show(out):
    """Prints a job's output without its DIGEST lines (a server prints one per range): a
    failing check must still be in the part of a long CI log that is kept."""
    lines = out.splitlines()
    kept = [l for l in lines if " DIGEST " not in l]
    if len(kept) < len(lines):
        kept.append("cluster-test: (%d DIGEST lines not shown)" % (len(lines) - len(kept)))
    print("\n".join(kept), flush=True)


def skip(msg):
    """The machine cannot run this test: say why and exit with ctest's skip code."""
    say("SKIPPED: %s" % msg)
    sys.exit(77)


def free_port(host="127.0.0.1"):
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(host, port, timeout=20.0, netns=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if netns is None:
            try:
                socket.create_connection((host, port), timeout=1).close()
                return True
            except OSError:
                pass
        else:
            probe = "import socket; socket.create_connection((%r, %d), timeout=1).close()" % (
                host, port)
            if subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", probe],
                              stderr=subprocess.DEVNULL).returncode == 0:
                return True
        time.sleep(0.1)
    return False


def stop_pid(proc, name):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        say("%s (pid %d) ignored SIGTERM; SIGKILL" % (name, proc.pid))
        proc.kill()
        proc.wait()


class Sshd:
    """An sshd listening on `addrs` (one port), accepting one client key for the current user,
    with host aliases host0..hostN-1 -> addrs in a client config (ssh -F)."""

    def __init__(self, root, addrs, netns=None):
        self.dir = os.path.join(root, "ssh" if netns is None else "ssh-" + netns)
        os.makedirs(self.dir)
        self.addrs = list(addrs)
        self.netns = netns
        self.port = 22 if netns else free_port(self.addrs[0])
        self.proc = None

    def path(self, name):
        return os.path.join(self.dir, name)

    def start(self, client_key=None):
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        if not os.path.exists(sshd):
            skip("sshd not found (openssh-server is not installed)")
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                        self.path("host_key")], check=True)
        if client_key is None:
            client_key = self.path("client_key")
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", client_key],
                           check=True)
        self.client_key = client_key
        shutil.copy(client_key + ".pub", self.path("authorized_keys"))
        # sshd's privilege separation directory is compiled in; Debian's init script makes it.
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        listen = "\n".join("ListenAddress %s" % a for a in self.addrs)
        with open(self.path("sshd_config"), "w") as f:
            f.write("""Port {port}
{listen}
HostKey {d}/host_key
PidFile {d}/sshd.pid
AuthorizedKeysFile {d}/authorized_keys
AllowUsers {user}
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
PrintMotd no
LogLevel ERROR
MaxStartups 100:30:200
MaxSessions 100
""".format(port=self.port, listen=listen, d=self.dir, user=getpass.getuser()))
        cmd = [sshd, "-D", "-e", "-f", self.path("sshd_config")]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd
        self.log = open(self.path("sshd.log"), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        if not wait_port(self.addrs[0], self.port, netns=self.netns):
            self.stop()
            raise RuntimeError("sshd did not listen on %s:%d (log: %s)"
                               % (self.addrs[0], self.port, open(self.path("sshd.log")).read()))
        say("sshd pid %d on %s port %d%s" % (self.proc.pid, ",".join(self.addrs), self.port,
                                             " in netns " + self.netns if self.netns else ""))

    def client_config(self, path, names):
        """Writes an ssh client config: Host names[i] -> self.addrs[i]."""
        with open(self.path("host_key.pub")) as f:
            hostkey = " ".join(f.read().split()[:2])
        with open(path + ".known_hosts", "a") as f:
            for n in names:
                f.write("%s %s\n" % (n, hostkey))
        with open(path, "a") as f:
            for n, a in zip(names, self.addrs):
                f.write("""Host {n}
  HostName {a}
  Port {port}
  HostKeyAlias {n}
  User {user}
  IdentityFile {key}
  IdentitiesOnly yes
  UserKnownHostsFile {kh}
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel ERROR
""".format(n=n, a=a, port=self.port, user=getpass.getuser(), key=self.client_key,
                kh=path + ".known_hosts"))

    def stop(self):
        stop_pid(self.proc, "sshd")
        if getattr(self, "log", None):
            self.log.close()


class Slurm:
    """munged + slurmctld + one slurmd per node, one partition. By default one node ("pstest",
    `cpus` CPUs) on 127.0.0.1; or `nodes` = [(name, address, netns)], each slurmd inside its
    namespace, slurmctld in the first node's. Config, state, spool, munge key and socket all
    under `root` (munge talks over its socket file, which every namespace sees)."""

    def __init__(self, root, cpus=8, nodes=None):
        self.dir = os.path.join(root, "slurm")
        os.makedirs(self.dir)
        self.cpus = cpus
        self.nodes = nodes or [("pstest", "127.0.0.1", None)]
        self.procs = []

    def path(self, name):
        return os.path.join(self.dir, name)

    def env(self):
        env = dict(os.environ)
        env["SLURM_CONF"] = self.path("slurm.conf")
        for k in list(env):
            if k.startswith("SLURM_") and k != "SLURM_CONF":
                del env[k]
        return env

    def in_netns(self, ns, argv):
        # slurmd needs the cgroup mounts that `ip netns exec` hides: this file's __main__
        # puts them back in the namespace's private mount table, then execs argv.
        if ns is None:
            return argv
        return ["ip", "netns", "exec", ns, sys.executable, os.path.abspath(__file__),
                "--exec-with-cgroups"] + argv

    def start(self):
        for tool in ("munged", "slurmctld", "slurmd", "srun", "sbatch"):
            if shutil.which(tool) is None and not os.path.exists("/usr/sbin/" + tool):
                skip("%s not found (slurm-wlm and munge are not installed)" % tool)
        if os.geteuid() != 0:
            skip("slurmd must run as root to start tasks (not root here)")
        key = self.path("munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        sock = self.path("munge.socket")
        munged = subprocess.Popen(
            ["munged", "--foreground", "--force", "--key-file=" + key, "--socket=" + sock,
             "--pid-file=" + self.path("munged.pid"), "--seed-file=" + self.path("munged.seed"),
             "--log-file=" + self.path("munged.log")], stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT)
        self.procs.append(("munged", munged))
        deadline = time.time() + 10
        while not os.path.exists(sock) and time.time() < deadline:
            time.sleep(0.05)
        if not os.path.exists(sock):
            raise RuntimeError("munged did not create its socket: " + self.log_tail("munged"))
        ctld_addr, ctld_ns = self.nodes[0][1], self.nodes[0][2]
        ctld_port = free_port() if ctld_ns is None else 6817
        node_port = free_port() if ctld_ns is None else 6818
        host = socket.gethostname().split(".")[0]
        for d in ("state", "spool"):
            os.makedirs(self.path(d))
        node_lines = "".join(
            "NodeName={n} NodeHostname={h} NodeAddr={a} CPUs={c} State=UNKNOWN\n".format(
                n=n, h=host if ns is None else n, a=addr, c=self.cpus)
            for n, addr, ns in self.nodes)
        with open(self.path("slurm.conf"), "w") as f:
            f.write("""ClusterName=pstest
SlurmctldHost={host}({ctld_addr})
SlurmctldPort={ctld_port}
SlurmdPort={node_port}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
InactiveLimit=0
KillWait=5
MinJobAge=600
{node_lines}PartitionName=ps Nodes={names} Default=YES MaxTime=INFINITE State=UP
""".format(host=host, ctld_addr=ctld_addr, ctld_port=ctld_port, node_port=node_port,
                sock=sock, d=self.dir, node_lines=node_lines,
                names=",".join(n for n, _, _ in self.nodes)))
        env = self.env()
        ctld = subprocess.Popen(self.in_netns(ctld_ns, ["slurmctld", "-D", "-i", "-f",
                                                        self.path("slurm.conf")]),
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.procs.append(("slurmctld", ctld))
        if not wait_port(ctld_addr, ctld_port, netns=ctld_ns):
            raise RuntimeError("slurmctld did not listen: " + self.log_tail("slurmctld"))
        for n, addr, ns in self.nodes:
            os.makedirs(self.path("spool/" + n))
            slurmd = subprocess.Popen(self.in_netns(ns, ["slurmd", "-D", "-N", n, "-f",
                                                         self.path("slurm.conf")]),
                                      env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.STDOUT)
            self.procs.append(("slurmd " + n, slurmd))
        deadline = time.time() + 60
        states = ""
        while time.time() < deadline:
            r = subprocess.run(self.in_netns(ctld_ns, ["sinfo", "-h", "-N", "-o", "%T"]),
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
            states = r.stdout.split()
            if len(states) == len(self.nodes) and all(x in ("idle", "mixed") for x in states):
                say("slurm up: slurmctld pid %d on %s:%d, %d slurmd (%s), nodes %s"
                    % (ctld.pid, ctld_addr, ctld_port, len(self.nodes),
                       ", ".join("pid %d" % p.pid for name, p in self.procs[2:]),
                       " ".join(states)))
                return
            if any(p.poll() is not None for _, p in self.procs):
                break
            time.sleep(0.3)
        raise RuntimeError("the Slurm nodes did not come up (sinfo: %r)\nslurmctld: %s\n"
                           "slurmd: %s" % (states, self.log_tail("slurmctld"),
                                           self.log_tail("slurmd-" + self.nodes[0][0])))

    def log_tail(self, name, n=15):
        try:
            with open(self.path(name + ".log")) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self):
        for name, p in reversed(self.procs):
            stop_pid(p, name)


class Hosts:
    """`n` simulated hosts: network namespaces ps-hostI-TAG, each with a veth into a bridge
    that lives in its own namespace, addresses SUBNET.(I+1)/24. No namespace has a default
    route and the root namespace is not attached: every packet stays among them."""

    def __init__(self, n, subnet="10.213.77"):
        self.n = n
        self.subnet = subnet
        self.tag = "%d" % os.getpid()
        self.names = ["ps-host%d-%s" % (i, self.tag) for i in range(n)]
        self.bridge_ns = "ps-br-%s" % self.tag
        self.created = []

    def addr(self, i):
        return "%s.%d" % (self.subnet, i + 1)

    def ip(self, *args, check=True):
        r = subprocess.run(["ip"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        if check and r.returncode != 0:
            raise RuntimeError("ip %s: %s" % (" ".join(args), r.stderr.strip()))
        return r.stdout

    def start(self):
        if os.geteuid() != 0:
            skip("network namespaces need root")
        if shutil.which("ip") is None:
            skip("ip (iproute2) is not installed")
        reap_stale_namespaces()
        probe = "ps-probe-%s" % self.tag
        r = subprocess.run(["ip", "netns", "add", probe], stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            skip("cannot create network namespaces: %s" % r.stderr.strip())
        subprocess.run(["ip", "netns", "del", probe])
        self.ip("netns", "add", self.bridge_ns)
        self.created.append(self.bridge_ns)
        self.ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
        self.ip("-n", self.bridge_ns, "link", "set", "br0", "up")
        for i, ns in enumerate(self.names):
            self.ip("netns", "add", ns)
            self.created.append(ns)
            outer = ("v%d-%s" % (i, self.tag))[:15]
            self.ip("link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", outer,
                    "netns", self.bridge_ns)
            self.ip("-n", self.bridge_ns, "link", "set", outer, "master", "br0")
            self.ip("-n", self.bridge_ns, "link", "set", outer, "up")
            self.ip("-n", ns, "addr", "add", self.addr(i) + "/24", "dev", "eth0")
            self.ip("-n", ns, "link", "set", "eth0", "up")
            self.ip("-n", ns, "link", "set", "lo", "up")
        # The safety rule: from every host, every other host is on-link (no "via"), and
        # nothing else is reachable (no default route).
        for i, ns in enumerate(self.names):
            for j in range(self.n):
                route = self.ip("-n", ns, "route", "get", self.addr(j))
                if " via " in route or ("dev eth0" not in route and "dev lo" not in route):
                    raise RuntimeError("route from %s to %s is not on-link: %s"
                                       % (ns, self.addr(j), route.strip()))
            routes = self.ip("-n", ns, "route", "show")
            if "default" in routes:
                raise RuntimeError("%s has a default route: %s" % (ns, routes))
        say("%d hosts %s.1-%d in namespaces %s (bridge in %s); routes checked on-link"
            % (self.n, self.subnet, self.n, ", ".join(self.names), self.bridge_ns))

    def stop(self):
        # Deleting a namespace deletes its veth ends; processes still inside are the tests'
        # own and were stopped by PID before this.
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
        self.created = []


def reap_stale_namespaces():
    """Namespaces a killed earlier run of these tests left behind (ps-host*/ps-br/ps-lo with
    the PID of a test process that is gone): stop the processes still inside, by the PIDs
    `ip netns pids` lists, and delete the namespace. A live test's namespaces are left alone."""
    r = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True)
    for line in r.stdout.splitlines():
        m = re.match(r"(ps-(?:host\d+|br|lo|probe)-(\d+))\b", line)
        if not m or os.path.exists("/proc/%s" % m.group(2)):
            continue
        ns = m.group(1)
        pids = subprocess.run(["ip", "netns", "pids", ns], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
        say("removed namespace %s left by a run that was killed (%d processes stopped)"
            % (ns, len(pids)))


def restore_cgroup_mounts():
    # `ip netns exec` mounts a fresh /sys in a private mount namespace, without the cgroup
    # file systems; mount the same ones as the host's (init's view) again, here only.
    if not os.path.isdir("/sys/fs/cgroup") or os.listdir("/sys/fs/cgroup"):
        return
    try:
        with open("/proc/1/mounts") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return
    for dev, mp, fs, opts in (m[:4] for m in mounts):
        if mp == "/sys/fs/cgroup" or mp.startswith("/sys/fs/cgroup/"):
            os.makedirs(mp, exist_ok=True)
            subprocess.run(["mount", "-t", fs, "-o", opts, dev, mp], stderr=subprocess.DEVNULL)


def tempdir(prefix):
    return tempfile.mkdtemp(prefix=prefix)


def assert_dead(pids, grace=10.0):
    """The processes still alive after `grace` seconds, each as "PID (command, state S)" so
    that a failed check says what was left."""
    deadline = time.time() + grace
    left = list(pids)
    while left and time.time() < deadline:
        left = [p for p in left if os.path.exists("/proc/%d" % p) and not zombie(p)]
        if left:
            time.sleep(0.1)
    return [describe(p) for p in left]


def describe(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            m = re.search(r"\((.*)\) (\w)", f.read())
        return "%d (%s, state %s)" % (pid, m.group(1), m.group(2))
    except (OSError, AttributeError):
        return str(pid)


def zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return re.search(r"\) (\w)", f.read()).group(1) == "Z"
    except OSError:
        return False


if __name__ == "__main__":
    # fixtures.py --exec-with-cgroups PROGRAM ARGS: (inside `ip netns exec`) mount the host's
    # cgroup file systems again in this private mount table, then become PROGRAM.
    if len(sys.argv) > 2 and sys.argv[1] == "--exec-with-cgroups":
        restore_cgroup_mounts()
        os.execvp(sys.argv[2], sys.argv[2:])
    sys.exit("usage: fixtures.py --exec-with-cgroups PROGRAM [ARGS...]")
