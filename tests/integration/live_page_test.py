#!/usr/bin/env python3
"""integration.live_page (issue 19, item 5): the scheduler's live page in headless Chromium
(Debian chromium) during a job with a server SIGKILLed. A 3-server, 2-worker job (one replica)
pushes (20 ms between rounds) through ps-launch --metrics-port until the test is done: under
ctest -j2 a Chromium took more than 30 s to load the page, and a job of fixed length had ended
by then. Once both workers push, server 1 is SIGKILLed by PID. When the scheduler has declared it dead and published the new ring, Chromium loads the
page from the scheduler and runs its script, and
- the DOM it renders (--dump-dom) names the dead server, the new ring epoch and the failure in
  the event list, and draws a throughput line for every node and a row for every server;
- a screenshot (--screenshot, 1200x900) is written;
- the job is still running then (--allow-dead-servers 1), and stops on SIGINT to ps-launch.
Exit 77 when Chromium is not installed (scripts/test.sh installs it)."""
import argparse
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from ports import free_port  # noqa: E402


def fail(msg, out=""):
    print(out[-6000:])
    print("FAILED integration.live_page: " + msg)
    sys.exit(1)


def chromium(browser, profile, args, url):
    # A profile of its own per run: a second Chromium on a profile in use hands its work to the
    # first and exits without doing it.
    profile = tempfile.mkdtemp(dir=profile)
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--user-data-dir=" + profile, "--window-size=1200,900",
           "--virtual-time-budget=3000"] + args + [url]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=90)
    if r.returncode != 0:
        fail("chromium exited with %d: %s" % (r.returncode, r.stderr[-2000:]))
    if "--dump-dom" in args and "<html" not in r.stdout:
        fail("chromium rendered no page (%d bytes out); its errors: %s"
             % (len(r.stdout), r.stderr[-3000:]))
    return r.stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--screenshot",
                   default="live_page_%s.png" % (os.environ.get("PS_VAN") or "zmq"))
    a = p.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        print("integration.live_page: chromium is not installed (apt-get install chromium)")
        sys.exit(77)
    port = free_port()
    cmd = [sys.executable, a.launcher, "-s", "3", "-w", "2", "--timeout", "120",
           "--allow-dead-servers", "1", "--metrics-port", str(port), "--env", "PS_REPLICAS=1",
           "--", a.job, "--seed", "5", "--scenario", "sum", "--universe", "20000", "--keys",
           "2000", "--rounds", "100000000", "--seconds", "240", "--pace-ms", "20"]
    print("running: " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, state = [], {"pids": {}, "pushing": 0, "since": None}
    lock = threading.Lock()

    def read():
        for line in proc.stdout:
            with lock:
                lines.append(line)
                m = re.search(r"started (server|worker) (\d+) pid (\d+)", line)
                if m:
                    state["pids"][(m.group(1), int(m.group(2)))] = int(m.group(3))
                if "PUSHING worker" in line:
                    state["pushing"] += 1
                    if state["pushing"] == 2:
                        state["since"] = time.time()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out = lambda: "".join(lines)  # noqa: E731
    profile = tempfile.mkdtemp(prefix="ps-live-page-")
    try:
        # Two seconds of pushes first, so the chart has a history before the failure.
        t0 = time.time()
        while not (state["since"] and time.time() - state["since"] > 2):
            if proc.poll() is not None or time.time() - t0 > 60:
                fail("the workers did not start pushing", out())
            time.sleep(0.05)
        victim = state["pids"][("server", 1)]
        os.kill(victim, signal.SIGKILL)  # by PID, never by name
        print("live_page: SIGKILL to server 1 (pid %d)" % victim, flush=True)
        stats = None
        while time.time() - t0 < 60:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/stats" % port, timeout=5) as r:
                    stats = json.loads(r.read().decode())
            except (OSError, ValueError):
                stats = None
            whats = [e["what"] for e in (stats or {}).get("events", [])]
            if any("declared dead" in w for w in whats) and any("ring epoch 2" in w for w in whats):
                break
            time.sleep(0.2)
        else:
            fail("the scheduler's events never showed the failure: %s" % stats, out())
        dead = [n for n in stats["nodes"] if n["dead"]]
        if [(n["role"], n["rank"]) for n in dead] != [("server", 1)]:
            fail("dead nodes in /stats: %s" % dead, out())
        dead_id = dead[0]["id"]
        url = "http://127.0.0.1:%d/" % port
        shot = os.path.abspath(a.screenshot)
        if os.path.exists(shot):
            os.remove(shot)
        chromium(browser, profile, ["--screenshot=" + shot], url)
        with open(shot, "rb") as f:
            head = f.read(24)
        if head[:8] != b"\x89PNG\r\n\x1a\n" or struct.unpack(">II", head[16:24]) != (1200, 900):
            fail("%s is not a 1200x900 PNG" % shot)
        size = os.path.getsize(shot)
        dom = chromium(browser, profile, ["--dump-dom"], url)
        checks = [
            ("the dead server in the summary", "1 dead: server 1 (node %d)" % dead_id),
            ("the new ring in the summary", "ring epoch 2</span>"),
            ("the failure in the event list", "node %d declared dead: its connection broke"
             % dead_id),
            ("the new ring in the event list", "ring epoch 2: 2 servers"),
            ("the page's script ran against /stats", "live: /stats polled every second"),
        ]
        for what, text in checks:
            if text not in dom:
                m = re.search(r'<div id="summary">(.*?)</div>', dom)
                fail("the rendered page lacks %s (%r); its summary: %s"
                     % (what, text, m.group(1) if m else None), dom[-4000:])
        lines_drawn = re.findall(r'<polyline class="node-line" data-node="(\d+)"[^>]* points="([^"]+)"',
                                 dom)
        # The dead server sent its counters for two seconds only: one rate at least.
        if sorted(int(n) for n, pts in lines_drawn
                  if len(pts.split()) >= (1 if int(n) == dead_id else 2)) != \
                sorted(n["id"] for n in stats["nodes"]):
            fail("throughput lines for nodes %s, want one for each of %s"
                 % ([(n, len(pts.split())) for n, pts in lines_drawn],
                    [n["id"] for n in stats["nodes"]]), dom[-4000:])
        if not re.search(r'<line class="event-mark"[^>]*stroke="#b00020"', dom):
            fail("no failure marked on the throughput chart", dom[-4000:])
        rows = re.findall(r"<tr[^>]*><td>server (\d) \(node \d+\)", dom)
        if sorted(rows) != ["0", "1", "2"]:
            fail("server rows %s" % rows, dom[-4000:])
        if proc.poll() is not None:
            fail("the job ended before the page was checked (ps-launch exit %d)" % proc.returncode,
                 out())
        proc.send_signal(signal.SIGINT)  # ps-launch stops its processes by their PIDs
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        reader.join(timeout=10)
        if rc != 130:
            fail("ps-launch exited with %d on SIGINT, want 130" % rc, out())
        print("integration.live_page: the page named the dead server and ring epoch 2, drew %d "
              "throughput lines and 3 server rows; screenshot %s (%d bytes)"
              % (len(lines_drawn), shot, size))
    finally:
        if proc.poll() is None:
            proc.kill()  # ps-launch, by PID
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
