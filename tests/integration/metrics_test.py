#!/usr/bin/env python3
"""integration.metrics (issue 19, item 4): job-wide metrics. A 2-server, 2-worker job runs
through ps-launch with --metrics-port and --summary; while it pushes, /metrics is scraped and
parsed with the Prometheus client's own text parser (python3-prometheus-client), and /stats
as JSON. Checked:
- every scrape parses, names every node with its role, and has the job-wide gauges;
- counters never go back between scrapes, and the workers' bytes and finished requests grow;
- the request-latency histograms are well formed (cumulative buckets, +Inf = count);
- an unknown path answers 404; ps-launch prints its one-line summaries;
- at the end, the scheduler's final metrics (its "job metrics:" line, the counters each node
  sent ahead of the final barrier) agree with each node's own totals: a server's keys,
  mastered keys and copies exactly; message counts up to the few control messages of the
  final barrier.
Processes are the launcher's (stopped by ps-launch's PID on a timeout)."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from ports import free_port  # noqa: E402


def get(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
        return r.read().decode()


def parse(text):
    """{(name, sorted labels): value} and {family: type} of one scrape."""
    samples, types = {}, {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, types


def node_total(samples, name, node):
    return sum(v for (n, l), v in samples.items() if n == name and ("node", str(node)) in l)


def fail(msg, out):
    print(out[-6000:])
    print("FAILED integration.metrics: " + msg)
    sys.exit(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--job", required=True)
    a = p.parse_args()
    port = free_port()
    # No node fails here: a 5 s heartbeat timeout keeps a node that the loaded 2-core machine
    # starves for a second (another process test runs beside this one) from being declared
    # dead, as the default 800 ms did once in a clean-clone test.sh run.
    cmd = [sys.executable, a.launcher, "-s", "2", "-w", "2", "--timeout", "120",
           "--env", "PS_HEARTBEAT_TIMEOUT_MS=5000",
           "--metrics-port", str(port), "--summary", "1", "--",
           a.job, "--seed", "3", "--scenario", "sum", "--universe", "20000", "--keys", "2000",
           "--rounds", "100000000", "--seconds", "5"]
    print("running: " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    scrapes, stats, errors = [], [], []
    not_found = None
    t0 = time.time()
    while proc.poll() is None and time.time() - t0 < 120:
        try:
            text = get(port, "/metrics")
            scrapes.append(parse(text))
            stats.append(json.loads(get(port, "/stats")))
            if not_found is None:
                try:
                    get(port, "/nothing-here")
                    not_found = False
                except urllib.error.HTTPError as e:
                    not_found = e.code == 404
        except (OSError, ValueError) as e:
            errors.append(str(e))  # before the scheduler serves, or after it ended
        time.sleep(0.5)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()  # by PID: ps-launch stops its own processes
        rc = proc.wait()
    reader.join(timeout=10)
    out = "".join(lines)
    if rc != 0:
        fail("ps-launch exited with %d" % rc, out)

    # Scrapes taken while the workers pushed: those with worker samples.
    def has_workers(s):
        return any(n == "ps_bytes_sent_total" and ("role", "worker") in l for (n, l) in s[0])
    live = [s for s in scrapes if has_workers(s)]
    if len(live) < 3:
        fail("only %d scrapes with workers' metrics (%d in all; errors: %s)"
             % (len(live), len(scrapes), errors[-3:]), out)
    first, last = live[0][0], live[-1][0]
    types = live[-1][1]
    for fam, want in [("ps_bytes_sent", "counter"), ("ps_worker_request_seconds", "histogram"),
                      ("ps_server_keys", "gauge"), ("ps_job_nodes", "gauge"),
                      ("ps_job_dead_nodes", "gauge")]:
        if types.get(fam) != want:
            fail("family %s has type %r, want %s" % (fam, types.get(fam), want), out)
    roles = {dict(l).get("node"): dict(l).get("role") for (n, l) in last
             if n == "ps_messages_sent_total"}
    if sorted(roles.values()) != ["server", "server", "worker", "worker"]:
        fail("nodes in the scrape: %s" % roles, out)
    if last[("ps_job_nodes", (("role", "worker"),))] != 2 or \
            last[("ps_job_dead_nodes", ())] != 0:
        fail("job gauges: %s" % {k: v for k, v in last.items() if k[0].startswith("ps_job")}, out)
    # Counters never go back.
    for (prev, _), (cur, _) in zip(live, live[1:]):
        for key, v in prev.items():
            if (key[0].endswith("_total") or key[0].endswith("_count")) and key in cur and \
                    cur[key] < v:
                fail("counter %s went back from %g to %g" % (key, v, cur[key]), out)
    workers = [n for n, r in roles.items() if r == "worker"]
    for w in workers:
        for name in ["ps_bytes_sent_total", "ps_worker_request_seconds_count"]:
            b, e = node_total(first, name, w), node_total(last, name, w)
            if not e > b:
                fail("%s of worker node %s did not grow: %g then %g" % (name, w, b, e), out)
    # Messages per peer: some to every server (and the scheduler), summing to what the node
    # sent in all.
    for w in workers:
        per_peer = {dict(l)["peer"]: v for (n, l), v in last.items()
                    if n == "ps_peer_messages_sent_total" and ("node", w) in l}
        servers = sorted(n for n, r in roles.items() if r == "server")
        if sorted(p for p in per_peer if p != "0") != servers or \
                min(per_peer.values()) <= 0 or \
                sum(per_peer.values()) > node_total(last, "ps_messages_sent_total", w):
            fail("worker node %s: messages per peer %s (servers %s, %g sent in all)"
                 % (w, per_peer, servers, node_total(last, "ps_messages_sent_total", w)), out)
    # Histograms: buckets cumulative, +Inf equal to the count.
    for (n, l), v in last.items():
        if n != "ps_worker_request_seconds_count":
            continue
        buckets = sorted(((float(dict(l2)["le"]), v2) for (n2, l2), v2 in last.items()
                          if n2 == "ps_worker_request_seconds_bucket" and
                          [x for x in l2 if x[0] != "le"] == list(l)),
                         key=lambda x: x[0])
        counts = [c for _, c in buckets]
        if not buckets or counts != sorted(counts) or buckets[-1][0] != float("inf") or \
                counts[-1] != v:
            fail("histogram %s malformed: %s, count %g" % (dict(l), buckets, v), out)
    if not_found is not True:
        fail("an unknown path did not answer 404", out)
    if not stats or "nodes" not in stats[-1] or "job" not in stats[-1]:
        fail("/stats is not the documented JSON", out)
    summaries = [x for x in out.splitlines() if "ps-launch: job: " in x and "requests/s" in x]
    if not summaries:
        fail("ps-launch printed no job summary with rates", out)

    # The end: the scheduler's final table against each node's own totals.
    m = re.search(r"job metrics: (\{.*\})\s*$", out, re.M)
    if not m:
        fail("no final 'job metrics:' line from the scheduler", out)
    final = {n["id"]: n for n in json.loads(m.group(1))["nodes"]}
    checked = 0
    for line in out.splitlines():
        s = re.search(r"\[server \d+\] STATS (\{.*?\}) keys=(\d+) mastered=(\d+) copies=(\d+)",
                      line)
        w = re.search(r"\[worker \d+\] OK worker \d+ .* (\{.*\})\s*$", line)
        if s:
            own = json.loads(s.group(1))
            got = final[own["id"]]["metrics"]
            for key, want in [('ps_server_keys{app="0"}', int(s.group(2))),
                              ('ps_server_mastered_keys{app="0"}', int(s.group(3))),
                              ('ps_server_copies_total{app="0"}', int(s.group(4)))]:
                if got.get(key) != want:
                    fail("server node %d: final %s is %s, the server says %d"
                         % (own["id"], key, got.get(key), want), out)
            # The server's own count, read after Finalize, includes the final barrier's
            # messages and the heartbeats during it; the metrics were sent just before.
            for key in ["messages_sent", "messages_received"]:
                d = own[key] - got["ps_" + key + "_total"]
                if not 0 <= d <= 100:
                    fail("server node %d: %s %d, final metrics %g"
                         % (own["id"], key, own[key], got["ps_" + key + "_total"]), out)
            checked += 1
        elif w:
            own = json.loads(w.group(1))
            got = final[own["id"]]["metrics"]
            # Printed before Finalize, whose first act is to send the final metrics.
            for key in ["messages_sent", "bytes_sent", "messages_received"]:
                d = got["ps_" + key + "_total"] - own[key]
                if not 0 <= d <= 100 * (1 if key.startswith("messages") else 1000):
                    fail("worker node %d: %s %d, final metrics %g"
                         % (own["id"], key, own[key], got["ps_" + key + "_total"]), out)
            checked += 1
    if checked != 4:
        fail("compared %d of 4 nodes' totals" % checked, out)
    unloadable_library(a)
    print("integration.metrics: %d scrapes (%d with workers), %d samples in the last, "
          "%d summaries; final metrics agree with 4 nodes' totals; a libmicrohttpd that does "
          "not load stops the job naming PS_METRICS_PORT"
          % (len(scrapes), len(live), len(last), len(summaries)))


def unloadable_library(a):
    """libmicrohttpd is loaded when the scheduler starts serving metrics, not linked: one that
    does not load (an empty file first on LD_LIBRARY_PATH) stops the job at once with a clear
    error, and nodes that serve nothing do not care."""
    with tempfile.TemporaryDirectory() as d:
        for name in ("libmicrohttpd.so.12", "libmicrohttpd.so"):
            open(os.path.join(d, name), "w").close()
        cmd = [sys.executable, a.launcher, "-s", "1", "-w", "1", "--timeout", "60",
               "--env", "LD_LIBRARY_PATH=" + d, "--metrics-port", str(free_port()), "--",
               a.job, "--seed", "3", "--scenario", "sum", "--universe", "2000", "--keys", "200",
               "--rounds", "3"]
        print("running: " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120)
        if r.returncode == 0 or "PS_METRICS_PORT: cannot load libmicrohttpd.so" not in r.stdout:
            fail("an unloadable libmicrohttpd: exit code %d, no error naming PS_METRICS_PORT"
                 % r.returncode, r.stdout)


if __name__ == "__main__":
    main()
