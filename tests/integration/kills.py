"""SIGKILL of a process the launcher started, at a moment the job's own output names (the
process tests' fault injection; kills go by PID, never by name), and nodes added to a running
job (ps-launch --join)."""
import os
import re
import signal
import subprocess
import sys


def track_pid(state, line):
    """Notes the PID of each process the launcher starts, from its "started ... pid" lines."""
    m = re.search(r"started (server|worker) (\d+) pid (\d+)", line)
    if m:
        state["pids"][(m.group(1), int(m.group(2)))] = int(m.group(3))


def killer(state, role, rank, at):
    """A launcher line handler that SIGKILLs (role, rank) once worker 0 reports iteration at;
    state (a dict with "pids" and "killed") records the PIDs and the iteration of the kill."""
    def on_line(line):
        track_pid(state, line)
        m = re.match(r"\[worker 0\] iteration (\d+) ", line)
        if m and state["killed"] is None and int(m.group(1)) >= at:
            os.kill(state["pids"][(role, rank)], signal.SIGKILL)  # by PID, never by name
            state["killed"] = int(m.group(1))
            print("SIGKILL to %s %d after iteration %s" % (role, rank, m.group(1)), flush=True)
    return on_line


def scheduler_port(line):
    """The port of the scheduler from the launcher's "scheduler listens on" line, or None."""
    m = re.search(r"scheduler listens on [\d.]+:(\d+)", line)
    return int(m.group(1)) if m else None


def join(launcher, port, args, program):
    """Runs `ps-launch --join 127.0.0.1:port ARGS -- PROGRAM` to its end, printing its lines as
    [joiner] ...; returns (exit code, output)."""
    cmd = [sys.executable, launcher, "--join", "127.0.0.1:%d" % port] + args + ["--"] + program
    print("joining: " + " ".join(cmd), flush=True)
    j = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in j.stdout.splitlines():
        print("[joiner] " + line, flush=True)
    return j.returncode, j.stdout
