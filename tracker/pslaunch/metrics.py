"""ps-launch --summary: a one-line view of the job from the scheduler's /stats (PS_METRICS_PORT)."""

import json
import socket
import threading
import time

from .common import log


def free_port(host):
    """A port nobody listens on right now (the scheduler binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def fetch_stats(host, port, timeout=2.0):
    # Imported here: urllib.request costs every launch about 13 ms of start-up, and only
    # --summary asks for the stats.
    import urllib.request
    with urllib.request.urlopen("http://%s:%d/stats" % (host, port), timeout=timeout) as r:
        return json.loads(r.read().decode())


def _per_node(stats, role, name, combine=lambda a, b: a + b):
    """{node id: value} of a sample over a role's nodes, its labels (apps, ops) combined by
    `combine` (summed by default)."""
    out = {}
    for n in stats.get("nodes", []):
        if n.get("role") != role:
            continue
        for key, v in n.get("metrics", {}).items():
            if key == name or key.startswith(name + "{"):
                out[n["id"]] = combine(out[n["id"]], v) if n["id"] in out else v
    return out


def totals(stats):
    """The job's cumulative counts: requests finished by workers and bytes sent by all nodes."""
    requests = sum(_per_node(stats, "worker", "ps_worker_request_seconds_count").values())
    sent = sum(_per_node(stats, "server", "ps_bytes_sent_total").values()) + \
        sum(_per_node(stats, "worker", "ps_bytes_sent_total").values())
    return requests, sent


def summary_line(stats, prev, dt):
    """One line: worker steps (slowest and fastest), requests/s and MB/s since `prev`
    (an earlier totals() or None), live and dead nodes."""
    job = stats.get("job", {})
    steps = _per_node(stats, "worker", "ps_worker_step", max)
    group = dict((n["id"], n.get("group", "")) for n in stats.get("nodes", []))
    parts = []
    # Per worker group (each has steps of its own), or all workers without groups.
    for g in sorted(set(group.get(k, "") for k in steps)):
        mine = dict((k, v) for k, v in steps.items() if group.get(k, "") == g)
        slow = min(mine, key=lambda k: (mine[k], k))
        fast = max(mine, key=lambda k: (mine[k], -k))
        parts.append("%ssteps %d (node %d) .. %d (node %d)"
                     % (g + " " if g else "", mine[slow], slow, mine[fast], fast))
    req, sent = totals(stats)
    if prev is not None and dt > 0:
        parts.append("%.0f requests/s" % ((req - prev[0]) / dt))
        parts.append("%.1f MB/s" % ((sent - prev[1]) / dt / 1e6))
    parts.append("%d servers, %d workers, %d dead"
                 % (job.get('ps_job_nodes{role="server"}', 0),
                    job.get('ps_job_nodes{role="worker"}', 0), job.get("ps_job_dead_nodes", 0)))
    parts.append("ring epoch %d" % job.get("ps_job_ring_epoch", 0))
    return "job: " + ", ".join(parts)


class Summary:
    """Prints summary_line every `every` seconds until stop() (a daemon thread)."""

    def __init__(self, host, port, every):
        self.host, self.port, self.every = host, port, every
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def start(self):
        self.thread.start()

    def stop(self):
        self.done.set()

    def loop(self):
        prev, prev_t = None, None
        while not self.done.wait(self.every):
            try:
                stats = fetch_stats(self.host, self.port)
            except (OSError, ValueError):
                continue  # not serving yet, or gone at the end
            now = time.time()
            log(summary_line(stats, prev, now - prev_t if prev_t else 0))
            prev, prev_t = totals(stats), now
