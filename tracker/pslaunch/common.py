"""What every ps-launch backend shares: logging, the job's processes, the failure policy, the
hostfile and placement. Pure functions where possible (tests/tracker/tracker_unit_test.py)."""

import os
import re
import sys

EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130
EXIT_DATAERR = 65  # a program's bad input (sysexits.h): fatal whatever --allow-dead-* says


def name_of(role, rank):
    """How output lines and messages name a process: "worker 1"."""
    return "%s %d" % (role, rank)


def log(msg):
    sys.stderr.write("ps-launch: %s\n" % msg)
    sys.stderr.flush()


def process_names(num_servers, num_workers, scheduler=True):
    """The job's processes in launch order: the scheduler, the servers, the workers. MPI and
    Slurm ranks follow this order (world rank 0 is the scheduler)."""
    names = [("scheduler", 0)] if scheduler else []
    names += [("server", i) for i in range(num_servers)]
    names += [("worker", i) for i in range(num_workers)]
    return names


def parse_workers(spec):
    """-w: "4" (4 workers) or "train:4,eval:1" (worker groups and their sizes, PS_WORKER_GROUPS).
    Returns (total, [(name, size), ...]); the list is empty for a plain count. ValueError says
    what is wrong."""
    spec = spec.strip()
    if re.fullmatch(r"-?\d+", spec):
        return int(spec), []
    groups = []
    for item in spec.split(","):
        m = re.fullmatch(r"([A-Za-z0-9_-]+):(\d+)", item.strip())
        if not m or int(m.group(2)) < 1:
            raise ValueError("expected a count or NAME:SIZE[,NAME:SIZE...] with sizes of at least "
                             "1, got %r (at %r)" % (spec, item))
        if any(g[0] == m.group(1) for g in groups):
            raise ValueError("worker group %r is named twice in %r" % (m.group(1), spec))
        groups.append((m.group(1), int(m.group(2))))
    return sum(g[1] for g in groups), groups


def group_of(groups, rank):
    """The group of worker `rank` when ranks go to the groups in order, or None."""
    first = 0
    for name, size in groups:
        if rank < first + size:
            return name
        first += size
    return None


def signal_group(pid, sig):
    """Sends sig to the process group that pid leads (every process ps-launch starts leads its
    own); a group already gone is fine."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def describe_exit(rc):
    if rc < 0:
        return "signal %d" % -rc
    return "code %d%s" % (rc, " (bad input: the job stops)" if rc == EXIT_DATAERR else "")


class FailurePolicy:
    """Decides what a process's exit means for the job: "ok", "tolerated" (a lost server or
    worker the job was told it may lose), "failed" (--keep-going: noted, the others go on) or
    "fatal" (stop everything)."""

    def __init__(self, allow_dead_workers=0, allow_dead_servers=0, keep_going=False):
        self.allowed = {"worker": allow_dead_workers, "server": allow_dead_servers}
        self.keep_going = keep_going
        self.tolerated = set()
        self.failed = set()

    def judge(self, role, rank, rc):
        name = name_of(role, rank)
        if rc == 0:
            return "ok"
        if rc == EXIT_DATAERR:
            # Bad input (the bundled apps' EX_DATAERR): another process given the same part
            # would fail the same way, so no allowance (nor --keep-going) applies.
            return "fatal"
        if sum(1 for r, _ in self.tolerated if r == role) < self.allowed.get(role, 0):
            self.tolerated.add((role, rank))
            return "tolerated"
        if self.keep_going:
            self.failed.add(name)
            return "failed"
        return "fatal"


def parse_hostfile(path):
    """One host per line: "HOST", "HOST slots=N" (OpenMPI's form) or "HOST:N" (MPICH's);
    HOST may be user@host or an ssh config alias. '#' starts a comment. Returns a list of
    (host, slots or None). Errors name the file and line."""
    hosts = []
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ValueError("--hostfile %s: %s" % (path, e.strerror))
    for n, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"(\S+?)(?::(\d+))?(?:\s+slots\s*=\s*(\d+))?(?:\s+max_slots\s*=\s*\d+)?",
                         line)
        if not m or (m.group(2) and m.group(3)):
            raise ValueError("%s:%d: expected 'HOST', 'HOST slots=N' or 'HOST:N', got %r"
                             % (path, n, raw))
        slots = m.group(2) or m.group(3)
        if slots is not None and int(slots) < 1:
            raise ValueError("%s:%d: slots must be at least 1, got %r" % (path, n, raw))
        hosts.append((m.group(1), int(slots) if slots is not None else None))
    if not hosts:
        raise ValueError("--hostfile %s: no hosts in it" % path)
    return hosts


def place(hosts, count, mode):
    """Assigns processes 0..count-1 (in process_names order) to hosts. "roundrobin" deals them
    out one per host in turn; "packed" fills each host's slots before the next. A host without
    slots takes any number. Returns a list of host indices; raises ValueError when the slots
    are too few (never oversubscribes silently)."""
    left = [s for _, s in hosts]
    capacity = sum(left) if all(s is not None for s in left) else None
    if capacity is not None and capacity < count:
        raise ValueError("the hostfile has %d slots for %d processes (1 scheduler + servers + "
                         "workers); add hosts or slots" % (capacity, count))
    out = []
    if mode == "packed":
        h = 0
        for _ in range(count):
            while left[h] is not None and left[h] == 0:
                h += 1
            out.append(h)
            if left[h] is not None:
                left[h] -= 1
        return out
    if mode != "roundrobin":
        raise ValueError("placement %r: expected roundrobin or packed" % mode)
    h = 0
    for _ in range(count):
        while left[h] is not None and left[h] == 0:
            h = (h + 1) % len(hosts)
        out.append(h)
        if left[h] is not None:
            left[h] -= 1
        h = (h + 1) % len(hosts)
    return out


def job_env(args):
    """The PS_* (and DMLC_* alias) variables every process of the job gets, before its role:
    sizes, vnodes and the user's --env. Cluster backends pass exactly these to the remote
    side; addresses come from ps-task."""
    env = {
        "PS_NUM_SERVERS": str(max(1, args.num_servers)),
        "PS_NUM_WORKERS": str(max(1, args.num_workers)),
    }
    env["DMLC_NUM_SERVER"] = env["PS_NUM_SERVERS"]
    env["DMLC_NUM_WORKER"] = env["PS_NUM_WORKERS"]
    groups = getattr(args, "worker_groups", [])
    if groups and not getattr(args, "join", None):
        # A joining worker names only its group (role_env); it takes the job's from the scheduler.
        env["PS_WORKER_GROUPS"] = ",".join("%s:%d" % g for g in groups)
    # The library throws when a node cannot go on; a launched job's processes exit instead (a
    # thread busy computing would otherwise go on alone). --env PS_ON_SCHEDULER_LOSS=throw
    # leaves it to the program.
    env["PS_ON_SCHEDULER_LOSS"] = "exit"
    # Transparent huge pages for malloc (hugepage_tunables): each process gets them where it
    # starts, merged with that host's own GLIBC_TUNABLES. --hugepages, else PS_HUGEPAGES.
    flag = getattr(args, "hugepages", None) or (
        "off" if os.environ.get("PS_HUGEPAGES") == "0" else "on")
    env["PS_HUGEPAGES"] = "1" if flag == "on" else "0"
    if args.vnodes:
        env["PS_VNODES"] = str(args.vnodes)
    if getattr(args, "metrics_port", None):
        env["PS_METRICS_PORT"] = str(args.metrics_port)
        env.setdefault("PS_METRICS_HOST", getattr(args, "host", "127.0.0.1"))
    for e in args.env:
        k, v = e.split("=", 1)
        env[k] = v
    return env


# What --hugepages adds to GLIBC_TUNABLES (each unless the value, or the variable glibc reads
# for it, already says otherwise: the user's choice wins).
MALLOC_TUNABLES = (("glibc.malloc.hugetlb", "1", None),
                   ("glibc.malloc.arena_max", "1", "MALLOC_ARENA_MAX"))


def hugepage_tunables(tunables, environ):
    """GLIBC_TUNABLES for malloc in transparent huge pages: glibc.malloc.hugetlb=1 (malloc
    madvises its heap MADV_HUGEPAGE) and glibc.malloc.arena_max=1 (glibc 2.36 gives a
    thread's own arena no huge pages, and ZeroMQ's I/O thread allocates every received frame).
    With THP in madvise mode, as on Debian, a process otherwise pays a page fault per 4 KB of
    fresh memory: reading the spam words took 0.19 s against 0.05 s, a 2S/2W 1M-key push
    6.9 ms of CPU against 5.1-5.8 (docs/operations.md, "Memory"). Other glibc versions ignore
    tunables they do not know, other C libraries the variable. environ: the process's other
    variables."""
    parts = [t for t in tunables.split(":") if t]
    names = {t.split("=", 1)[0] for t in parts}
    for name, value, alias in MALLOC_TUNABLES:
        if name not in names and not (alias and environ.get(alias)):
            parts.append("%s=%s" % (name, value))
    return ":".join(parts)


def with_hugepages(env):
    """env with GLIBC_TUNABLES set by hugepage_tunables when PS_HUGEPAGES is 1 (the default)."""
    if env.get("PS_HUGEPAGES", "1") == "1":
        env["GLIBC_TUNABLES"] = hugepage_tunables(env.get("GLIBC_TUNABLES", ""), env)
    return env


def tracker_dir():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
