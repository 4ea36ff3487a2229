"""What every fault scenario shares: running a command with its output echoed and kept, and
the check that every chain ended alike (tests/fault/run_fault.py)."""
import re
import subprocess
import sys

CAPTURED = []  # every line of every command the scenario ran, in order


def check_chains(sc):
    """With --rules: every member of every chain reported the same bytes for each segment and
    app, every chain was whole (k+1 members), and the first server fault of the run landed while
    pushes were in flight (after every worker started pushing, before the last one finished).
    Returns the failures."""
    failures = []
    if "--rules" not in sc["job"]:
        return failures
    out = "".join(CAPTURED)
    k = 1
    for e in sc["env"]:
        if e.startswith("PS_REPLICAS="):
            k = int(e.split("=")[1])
    groups = {}
    for joiner, srv, app, b, e, h in re.findall(
            r"^(\[joiner\] )?\[server (\d+)\] DIGEST app=(\d+) range=(\d+)-(\d+) hash=(\d+)",
            out, re.M):
        groups.setdefault((int(app), int(b), int(e)), {})[joiner + srv] = h
    apps = sorted({g[0] for g in groups})
    if apps != [0, 2, 3]:
        failures.append("digests of apps %s, want [0, 2, 3]" % apps)
    differ = [g for g, m in groups.items() if len(set(m.values())) != 1]
    if differ:
        failures.append("%d chain segment(s) whose members hold different bytes, e.g. app %d "
                        "[%d, %d): %s" % ((len(differ),) + differ[0] + (groups[differ[0]],)))
    short = [g for g, m in groups.items() if len(m) != k + 1]
    if short:
        failures.append("%d chain segment(s) reported by other than %d servers, e.g. %s: %s"
                        % (len(short), k + 1, short[0], sorted(groups[short[0]])))
    lines = out.splitlines()
    fault = [i for i, l in enumerate(lines)
             if re.match(r"run_fault: (SIGKILL|SIGSTOP).* server", l)]
    if fault:
        pushing = [i for i, l in enumerate(lines) if re.search(r"\] PUSHING worker", l)]
        pushed = [i for i, l in enumerate(lines) if re.search(r"\] PUSHED worker", l)]
        if not pushing or not pushed or not (pushing[-1] < fault[0] < pushed[-1]):
            failures.append("the first server fault did not land while pushes were in flight")
    print("run_fault: %d chain segments x apps compared, %d with every member alike"
          % (len(groups), len(groups) - len(differ)), flush=True)
    return failures


def check_exact(rc, out, workers, failures):
    """The launcher ended well and every worker checked its sums against the reference."""
    if rc != 0:
        failures.append("ps-launch exited with %d" % rc)
    ok = re.findall(r"^\[worker (\d+)\] OK worker", out, re.M)
    if len(ok) != workers:
        failures.append("expected exact sums from %d workers, got %d" % (workers, len(ok)))


def check_task_pool(out, shards, failures, redone=False):
    """task_job's end: worker 0 found every shard marked exactly once, and the scheduler's pool
    added and finished each once (with redone, at least one shard was given out again).
    Returns the pool's TASKS line (or None)."""
    if not re.search(r"^\[worker 0\] SHARDS ok=%d of %d " % (shards, shards), out, re.M):
        failures.append("not every shard was marked exactly once")
    m = re.search(r"TASKS added=(\d+) done=(\d+) redone=(\d+)", out)
    if (not m or int(m.group(1)) != shards or int(m.group(2)) != shards or
            (redone and int(m.group(3)) < 1)):
        failures.append("scheduler's pool: %s; want %d added, %d done%s"
                        % (m.group(0) if m else "no TASKS line", shards, shards,
                           ", the stopped or killed worker's shard redone" if redone else ""))
    return m.group(0) if m else None


def note_server_pid(line, pids):
    """Notes a server's PID (pids[rank]) from ps-launch's line that starts it."""
    m = re.search(r"started server (\d+) pid (\d+)", line)
    if m:
        pids[int(m.group(1))] = int(m.group(2))


def stream(cmd, on_line):
    """Runs cmd, echoing its output; on_line(line) may act on each line (send a signal).
    Returns the exit code and the whole output."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        CAPTURED.append(line)
        sys.stdout.write(line)
        on_line(line)
    return proc.wait(), "".join(lines)
