#!/usr/bin/env python3
"""Named tables in real processes (issue 22, item 2): tables_job through ps-launch over loopback.
Three servers (one replica each), two workers; two tables over the same keys with different
rules, and a third created while the job runs. A server is SIGKILLed (by PID) when worker 0
starts step 10, a fourth server joins (ps-launch --join) at step 20, and server 2 leaves
(Node::Leave) a second after it started. Every value must be
exact at the end (the tables stay apart, nothing is lost or applied twice) and every table must
list its keys."""
import argparse
import os
import re
import signal
import subprocess
import sys
import threading

import kills


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--keys", type=int, default=200)
    a = p.parse_args()
    job = [a.job, "--steps", "60", "--keys", str(a.keys), "--step-ms", "20"]
    env = ["--env", "PS_REPLICAS=1", "--env", "PS_HEARTBEAT_TIMEOUT_MS=5000"]
    cmd = [sys.executable, a.launcher, "-s", "3", "-w", "2", "--timeout", "120",
           "--allow-dead-servers", "1"] + env + ["--"] + job + [
               "--leave-rank", "2", "--leave-after-ms", "1000"]
    print("running:", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    st = {"port": None, "pids": {}, "killed": None, "join": None}

    def join():
        st["join_rc"], _ = kills.join(a.launcher, st["port"],
                                      ["-s", "1", "-w", "0", "--timeout", "120"] + env, job)

    def read():
        for line in proc.stdout:
            lines.append(line)
            sys.stdout.write(line)
            st["port"] = kills.scheduler_port(line) or st["port"]
            m = re.search(r"started server (\d+) pid (\d+)", line)
            if m:
                st["pids"][int(m.group(1))] = int(m.group(2))
            if re.match(r"\[worker 0\] STEP 10$", line) and st["killed"] is None:
                st["killed"] = st["pids"][1]
                os.kill(st["killed"], signal.SIGKILL)
                print("run_tables: sent SIGKILL to server 1 (pid %d)" % st["killed"], flush=True)
            if re.match(r"\[worker 0\] STEP 20$", line) and st["join"] is None:
                st["join"] = threading.Thread(target=join)
                st["join"].start()

    t = threading.Thread(target=read)
    t.start()
    rc = proc.wait()
    t.join()
    if st["join"]:
        st["join"].join()
    out = "".join(lines)
    failures = []
    if rc != 0:
        failures.append("ps-launch exited with %d" % rc)
    if st["killed"] is None or st["join"] is None:
        failures.append("the run never reached the kill (step 10) and the join (step 20)")
    elif st.get("join_rc") != 0:
        failures.append("the joining server's ps-launch exited with %s" % st.get("join_rc"))
    m = re.search(r"CHECKED (\d+) keys, (\d+) wrong", out)
    if not m or int(m.group(2)) != 0:
        failures.append("values: %s" % (m.group(0) if m else "never checked"))
    tables = dict((n, (int(app), rule, int(width), int(keys))) for n, app, rule, width, keys in
                  re.findall(r"TABLE (\S+) app (\d+) rule (\S+) width (\d+) keys (\d+)", out))
    if sorted(tables) != ["late", "maxes", "sums"]:
        failures.append("tables listed: %s" % tables)
    elif any(v[3] != a.keys for v in tables.values()) or len(set(v[0] for v in tables.values())) != 3:
        failures.append("each table should hold %d keys under an app id of its own: %s"
                        % (a.keys, tables))
    if "ring epoch 2" not in out:
        failures.append("no ring without the dead server was published")
    if "LEFT server 2" not in out:
        failures.append("server 2 did not leave")
    if failures:
        print("FAILED tables: %s" % "; ".join(failures))
        return 1
    print("PASSED tables: %s" % tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
