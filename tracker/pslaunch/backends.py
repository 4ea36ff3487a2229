"""The command lines of the cluster backends: ssh (one ssh per process), mpi (one mpirun MPMD
line, OpenMPI or MPICH) and slurm (one srun, or an sbatch script). Each backend only builds
commands; cluster.py runs them and talks to the ps-task on every node. Every builder is a pure
function of the arguments, so --dry-run prints exactly what a run starts."""

import os
import shlex
import socket
import subprocess

from .common import group_of, job_env, parse_hostfile, place, process_names, tracker_dir


class Launch:
    """One local command to start: argv, its environment (None = ours), and the processes of
    the job it carries (for messages: which ssh served which process)."""

    def __init__(self, argv, env=None, names=(), host=None):
        self.argv = argv
        self.env = env
        self.names = list(names)
        self.host = host

    def show(self):
        extra = ""
        if self.env is not None:
            changed = sorted(k for k, v in self.env.items() if os.environ.get(k) != v)
            extra = " ".join("%s=%s" % (k, shlex.quote(self.env[k])) for k in changed)
            removed = sorted(k for k in os.environ if k not in self.env)
            if removed:
                extra = "env " + " ".join("-u " + k for k in removed) + " " + extra
        cmd = " ".join(shlex.quote(x) for x in self.argv)
        return (extra + " " + cmd).strip()


def task_path():
    return os.path.join(tracker_dir(), "ps-task")


def remap(path, src, dst):
    """A path under the synced directory src, as it is on the hosts (under dst)."""
    if dst and os.path.isabs(path):
        rel = os.path.relpath(path, src)
        if not rel.startswith(".."):
            return os.path.join(dst, rel)
    return path


def ssh_base(args):
    return ["ssh", "-o", "BatchMode=yes"] + shlex.split(args.launcher_args or "")


class SshBackend:
    """ssh HOST 'cd DIR && exec env PS_...=... python3 .../ps-task PROGRAM ARGS' per process.
    The environment is on the command line (remote sshd's AcceptEnv is not needed); the
    working directory and the program's path are the same on every host (or, with
    --sync-dst-dir, the synced copy)."""

    def __init__(self, args):
        self.args = args
        self.hosts = parse_hostfile(args.hostfile)
        names = process_names(args.num_servers, args.num_workers, scheduler=not args.join)
        self.where = dict(zip(names, place(self.hosts, len(names), args.placement)))
        self.workdir = args.sync_dst_dir or os.getcwd()

    def default_tracker(self):
        # Listen on every address; each task connects back to the address its ssh session came
        # from (SSH_CONNECTION), which is how that host reaches this one.
        return "0.0.0.0", "ssh"

    def sync_commands(self):
        if not self.args.sync_dst_dir:
            return []
        rsh = " ".join(shlex.quote(x) for x in ssh_base(self.args))
        seen, out = set(), []
        for host, _ in self.hosts:
            if host in seen:
                continue
            seen.add(host)
            out.append(Launch(["rsync", "-a", "-e", rsh, os.getcwd() + "/",
                               "%s:%s/" % (host, self.args.sync_dst_dir)], host=host))
        return out

    def commands(self, tracker, token):
        a = self.args
        src = os.getcwd()
        program = [remap(a.program[0], src, a.sync_dst_dir)] + a.program[1:]
        task = remap(task_path(), src, a.sync_dst_dir)
        out = []
        for (role, rank), h in self.where.items():
            host = self.hosts[h][0]
            env = job_env(a)
            env.update({"PS_ROLE": role, "PS_RANK": str(rank), "PS_TRACKER": tracker,
                        "PS_TRACKER_TOKEN": token})
            if role == "worker" and getattr(a, "worker_groups", None):
                env["PS_WORKER_GROUP"] = group_of(a.worker_groups, rank)
            remote = "cd %s && exec env %s %s %s %s" % (
                shlex.quote(self.workdir),
                " ".join(shlex.quote("%s=%s" % kv) for kv in sorted(env.items())),
                shlex.quote(a.remote_python), shlex.quote(task),
                " ".join(shlex.quote(x) for x in program))
            out.append(Launch(ssh_base(a) + ["-n", host, remote], names=[(role, rank)],
                              host=host))
        return out


def mpi_flavor(mpirun):
    try:
        text = subprocess.run([mpirun, "--version"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ValueError("--mpirun %s: cannot run it (%s)" % (mpirun, e))
    if "Open MPI" in text or "OpenRTE" in text:
        return "openmpi"
    if "HYDRA" in text or "MPICH" in text or "Intel(R) MPI" in text:
        return "mpich"
    raise ValueError("--mpirun %s: neither Open MPI nor MPICH (its --version says %r); "
                     "give --mpi-flavor" % (mpirun, text.strip()[:80]))


def resolve_self():
    try:
        return socket.gethostbyname(socket.getfqdn())
    except OSError:
        return "127.0.0.1"


def route_source(hosts):
    """This machine's address on the route to the first resolvable host of the list (a UDP
    socket's connect sends nothing: it only picks the source address), else resolve_self()."""
    for host, _ in hosts:
        name = host.rpartition("@")[2]
        try:
            addr = socket.gethostbyname(name)
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                s.connect((addr, 9))
                return s.getsockname()[0]
            finally:
                s.close()
        except OSError:
            continue
    return resolve_self()


class MpiBackend:
    """One mpirun MPMD line: a context per role (scheduler, servers, workers) that sets
    PS_ROLE and PS_RANK_BASE, so a process's rank in its role is its world rank
    (OMPI_COMM_WORLD_RANK, or PMI_RANK under MPICH) minus the base. OpenMPI gets -x NAME=VALUE,
    MPICH -env NAME VALUE. Root and oversubscription flags are the user's to add with
    --launcher-args."""

    def __init__(self, args):
        self.args = args
        self.flavor = args.mpi_flavor
        if self.flavor == "auto":
            self.flavor = mpi_flavor(args.mpirun)
        self.hosts = parse_hostfile(args.hostfile) if args.hostfile else None
        if self.hosts:
            # mpirun places the processes; this only refuses too few slots up front, with the
            # same message as the ssh backend.
            place(self.hosts, 1 + args.num_servers + args.num_workers, args.placement)

    def default_tracker(self):
        addr = route_source(self.hosts) if self.hosts else "127.0.0.1"
        return addr, addr

    def sync_commands(self):
        return []

    def hostfile_text(self):
        # The slots as given; round robin is the mapper's option (--map-by node, -ppn 1).
        lines = []
        for host, n in self.hosts:
            if self.flavor == "openmpi":
                lines.append(host if n is None else "%s slots=%d" % (host, n))
            else:
                lines.append(host if n is None else "%s:%d" % (host, n))
        return "\n".join(lines) + "\n"

    def commands(self, tracker, token, hostfile_path="HOSTFILE"):
        a = self.args
        common = job_env(a)
        common.update({"PS_TRACKER": tracker, "PS_TRACKER_TOKEN": token})
        argv = [a.mpirun]
        if self.hosts:
            if self.flavor == "openmpi":
                argv += ["--hostfile", hostfile_path, "--map-by",
                         "node" if a.placement == "roundrobin" else "slot"]
            else:
                argv += ["-f", hostfile_path]
                if a.placement == "roundrobin":
                    argv += ["-ppn", "1"]
        argv += shlex.split(a.launcher_args or "")
        program = [a.remote_python, task_path()] + a.program
        names = process_names(a.num_servers, a.num_workers)
        contexts = [("scheduler", 1, 0), ("server", a.num_servers, 1),
                    ("worker", a.num_workers, 1 + a.num_servers)]
        first = True
        for role, n, base in contexts:
            if n == 0:
                continue
            if not first:
                argv.append(":")
            first = False
            env = dict(common, PS_ROLE=role, PS_RANK_BASE=str(base))
            argv += ["-np" if self.flavor == "openmpi" else "-n", str(n)]
            for k, v in sorted(env.items()):
                argv += ["-x", "%s=%s" % (k, v)] if self.flavor == "openmpi" else ["-env", k, v]
            argv += program
        return [Launch(argv, names=names)]


class SlurmBackend:
    """srun with one task per process inside the allocation (or one srun makes): world rank
    SLURM_PROCID 0 is the scheduler, 1..S the servers, the rest workers; the scheduler's node
    reports its address through ps-task. --kill-on-bad-exit ends the step when a task fails.
    With --submit, an sbatch script that runs this same ps-launch inside its allocation."""

    def __init__(self, args):
        self.args = args
        if args.hostfile:
            raise ValueError("--hostfile: Slurm places the tasks itself (use --launcher-args "
                             "for srun's --nodelist/--nodes)")

    def default_tracker(self):
        addr = resolve_self()
        return addr, addr

    def sync_commands(self):
        return []

    def env(self, tracker, token):
        env = dict(os.environ)
        for k in ("PS_ROLE", "DMLC_ROLE", "PS_RANK", "PS_RANK_BASE"):
            env.pop(k, None)
        env.update(job_env(self.args))
        env.update({"PS_TRACKER": tracker, "PS_TRACKER_TOKEN": token,
                    "PS_LAUNCH_SERVERS": str(self.args.num_servers)})
        return env

    def commands(self, tracker, token):
        a = self.args
        n = 1 + a.num_servers + a.num_workers
        argv = ["srun", "--ntasks=%d" % n, "--kill-on-bad-exit=1", "--export=ALL",
                "--distribution=%s" % ("cyclic" if a.placement == "roundrobin" else "block")]
        argv += shlex.split(a.launcher_args or "")
        argv += [a.remote_python, task_path()] + a.program
        return [Launch(argv, env=self.env(tracker, token),
                       names=process_names(a.num_servers, a.num_workers))]

    def sbatch_script(self, argv_without_submit):
        a = self.args
        n = 1 + a.num_servers + a.num_workers
        lines = ["#!/bin/sh", "#SBATCH --ntasks=%d" % n, "#SBATCH --job-name=ps"]
        lines += ["#SBATCH %s" % x for x in shlex.split(a.sbatch_args or "")]
        lines += ["# Written by ps-launch --submit: runs the job's srun inside this allocation.",
                  "cd %s || exit 1" % shlex.quote(os.getcwd()),
                  "exec %s" % " ".join(shlex.quote(x) for x in argv_without_submit)]
        return "\n".join(lines) + "\n"
