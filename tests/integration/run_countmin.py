#!/usr/bin/env python3
"""apps/countmin with real processes over loopback, on streams the test makes (seeded).

  exact        a text stream (Zipf-distributed words) counted by 2 servers and 2 workers in
               many small parts and batches ends with cells byte-identical to the same stream
               counted in one process (--local); every estimate is at least the exact count
               (a Python dict), at most delta of the items err by more than epsilon * N, and
               the top 20 heavy hitters are the exact top 20; heavy hitters printed while the
               stream goes on (LIVE lines) see a growing count. The same for a stream of u64
               ids.
  kill_server  3 servers with one replica, 2 workers replaying a u64 stream at a fixed rate:
               SIGKILL to server 1 mid-stream (by PID); the job ends and its cells are
               byte-identical to the local count.
  kill_worker  2 servers, 3 workers replaying a u64 stream: SIGKILL to worker 1 mid-stream,
               then (another run) to worker 0, which reports: the dead worker's parts are
               counted again by the others (PushForTask: nothing lands twice) and the cells
               are byte-identical to the local count.
"""
import argparse
import collections
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

WIDTH, DEPTH = 1500, 4


def make_text(d, seed):
    rng = random.Random(seed)
    vocab = sorted({"".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
                    for _ in range(6000)})
    rng.shuffle(vocab)
    weights = [1.0 / (k + 1) ** 1.1 for k in range(len(vocab))]
    tokens = rng.choices(vocab, weights=weights, k=300000)
    path = os.path.join(d, "tokens.txt")
    with open(path, "w") as f:
        for i in range(0, len(tokens), 17):
            f.write(" ".join(tokens[i:i + 17]) + ("\n" if i % 3 else "  \r\n"))
    with open(os.path.join(d, "queries.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    return path, collections.Counter(tokens), vocab


def run(cmd, on_line=None, feed=None):
    """Runs cmd to its end; feed(pipe), if given, writes its stdin (on a thread of its own)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         stdin=subprocess.PIPE if feed else subprocess.DEVNULL)
    writer = None
    if feed:
        def write():
            try:
                feed(p.stdin.buffer)
            except BrokenPipeError:
                pass
            finally:
                try:
                    p.stdin.close()
                except BrokenPipeError:
                    pass
        writer = threading.Thread(target=write, daemon=True)
        writer.start()
    lines = []
    for line in p.stdout:
        lines.append(line)
        if on_line:
            on_line(line)
    p.wait()
    if writer:
        writer.join(60)
    return p.returncode, "".join(lines)


def fail(why, out=""):
    sys.stdout.write(out[-6000:])
    print("FAILED: " + why, flush=True)
    sys.exit(1)


def local(a, flags):
    rc, out = run([a.job, "--local"] + flags)
    if rc != 0:
        fail("the local count exited %d" % rc, out)
    return out


def launch(a, servers, workers, flags, env=(), allow=(), on_line=None, feed=None):
    cmd = [sys.executable, a.launcher, "-s", str(servers), "-w", str(workers), "--timeout", "240"]
    for e in env:
        cmd += ["--env", e]
    for flag in allow:
        cmd += [flag, "1"]
    return run(cmd + ["--", a.job] + flags, on_line, feed)


def same_file(x, y):
    with open(x, "rb") as f, open(y, "rb") as g:
        return f.read() == g.read()


def estimates(out):
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"ESTIMATE (\S+) (-?\d+)", out)}


def top(out):
    return [m.group(1) for m in re.finditer(r"TOP \d+ (\S+) \d+", out)]


def check_accuracy(out, counts, n, what):
    est = estimates(out)
    if len(est) < len(counts):
        fail("%s: %d estimates for %d items" % (what, len(est), len(counts)), out)
    eps, delta = math.e / WIDTH, math.exp(-DEPTH)
    over = 0
    for item, c in counts.items():
        if est[item] < c:
            fail("%s: estimate %d of %r below its count %d" % (what, est[item], item, c), out)
        over += est[item] - c > eps * n
    if over > delta * len(counts):
        fail("%s: %d of %d items err by more than eps*N (delta %.4f)" % (
            what, over, len(counts), delta), out)
    want = [w for w, _ in counts.most_common(20)]
    got = top(out)
    if set(got) != set(want):
        fail("%s: top 20 %s, exact %s" % (what, got, want), out)
    return over


def exact(a, d):
    path, counts, vocab = make_text(d, 7)
    n = sum(counts.values())
    shape = ["--width", str(WIDTH), "--depth", str(DEPTH), "--top_k", "20",
             "--query", os.path.join(d, "queries.txt")]
    ref = os.path.join(d, "local.bin")
    out = local(a, ["--input", path, "--sketch_out", ref] + shape)
    check_accuracy(out, counts, n, "local")
    dist = os.path.join(d, "dist.bin")
    # Parts of 20 KB and batches of 3000 items: many tasks, many pushes per worker.
    rc, out = launch(a, 2, 2, ["--input", path, "--sketch_out", dist, "--part_mb", "0.02",
                               "--batch", "3000", "--progress_s", "0.05", "--top_every",
                               "0.01"] + shape)
    if rc != 0:
        fail("the job exited %d" % rc, out)
    # Queries while the stream goes on: the items counted so far only grow, up to N.
    live = [int(m.group(1)) for m in re.finditer(r"LIVE items (\d+) top \S+", out)]
    if not live or live != sorted(live) or live[-1] > n:
        fail("LIVE lines during the stream: %s" % live[:20], out)
    if not same_file(ref, dist):
        fail("the distributed cells differ from the local count", out)
    if "RESULT items %d " % n not in out:
        fail("the job did not count %d items" % n, out)
    over = check_accuracy(out, counts, n, "distributed")
    print("exact: %d tokens, %d distinct: cells identical to the local count; %d items over "
          "eps*N; top 20 exact" % (n, len(counts), over), flush=True)

    ids = os.path.join(d, "ids.bin")
    rc, out = run([a.job, "--zipf_out", ids, "--zipf_items", "400000", "--zipf_distinct",
                   "50000", "--seed", "3"])
    if rc != 0:
        fail("--zipf_out exited %d" % rc, out)
    u64 = ["--input", ids, "--format", "u64", "--width", str(WIDTH), "--depth", str(DEPTH)]
    local(a, u64 + ["--sketch_out", ref])
    rc, out = launch(a, 2, 2, u64 + ["--sketch_out", dist, "--part_mb", "0.1", "--batch", "7000"])
    if rc != 0 or not same_file(ref, dist):
        fail("u64 stream: exit %d, cells identical %s" % (rc, rc == 0 and same_file(ref, dist)),
             out)
    print("exact: 400000 u64 ids: cells identical to the local count", flush=True)
    # 32-bit cells on the servers: the same cells (no count comes near 2^32), fewer bytes.
    rc32, out32 = launch(a, 2, 2, u64 + ["--sketch_out", dist, "--part_mb", "0.1", "--batch",
                                         "7000", "--counter_bits", "32"])
    if rc32 != 0 or not same_file(ref, dist) or "counter_bits 32 saturated_cells 0" not in out32:
        fail("u64 stream, --counter_bits 32: exit %d, cells identical %s"
             % (rc32, rc32 == 0 and same_file(ref, dist)), out32)

    def received(text):
        return sum(float(m.group(1)) for m in re.finditer(r"SERVER rank \d+ .*MB received (\S+)",
                                                          text))
    if not received(out32) < 0.9 * received(out):
        fail("--counter_bits 32: the servers received %.2f MB against %.2f with 64 bits"
             % (received(out32), received(out)), out32)
    print("exact: --counter_bits 32: cells identical; servers received %.2f MB against %.2f"
          % (received(out32), received(out)), flush=True)


def zipf_stream(a, d, items, distinct, seed):
    """A u64 stream and its cells counted locally: (the job's stream flags, the local cells)."""
    ids = os.path.join(d, "ids.bin")
    rc, out = run([a.job, "--zipf_out", ids, "--zipf_items", str(items), "--zipf_distinct",
                   str(distinct), "--seed", str(seed)])
    if rc != 0:
        fail("--zipf_out exited %d" % rc, out)
    u64 = ["--input", ids, "--format", "u64", "--width", str(WIDTH), "--depth", str(DEPTH)]
    ref = os.path.join(d, "local.bin")
    local(a, u64 + ["--sketch_out", ref])
    return u64, ref


def killer(state, role, rank, watch, after):
    """A launcher line handler that SIGKILLs (role, rank), by PID, at worker watch's after-th
    progress line."""
    def on_line(line):
        m = re.search(r"started (server|worker) (\d+) pid (\d+)", line)
        if m:
            state["pids"][(m.group(1), int(m.group(2)))] = int(m.group(3))
        if line.startswith("[worker %d] progress" % watch):
            state["progress"] += 1
            if state["progress"] == after and state["killed"] is None:
                os.kill(state["pids"][(role, rank)], signal.SIGKILL)  # by PID, never by name
                state["killed"] = line.strip()
                print("SIGKILL to %s %d at: %s" % (role, rank, line.strip()), flush=True)
    return on_line


def killed_run(a, d, ref, servers, workers, flags, env, allow, role, rank, watch, after,
               feed=None):
    """Runs the job, kills (role, rank) mid-stream and checks the cells against ref."""
    state = {"pids": {}, "killed": None, "progress": 0}
    dist = os.path.join(d, "dist.bin")
    rc, out = launch(a, servers, workers, flags + ["--sketch_out", dist], env=env, allow=allow,
                     on_line=killer(state, role, rank, watch, after), feed=feed)
    what = "%s %d" % (role, rank)
    if state["killed"] is None:
        fail("%s: nothing was killed" % what, out)
    if rc != 0:
        fail("exit %d after %s was killed" % (rc, what), out)
    if not same_file(ref, dist):
        fail("after %s was killed the cells differ from the local count" % what, out)
    return out


def kill_server(a, d):
    u64, ref = zipf_stream(a, d, 1200000, 200000, 5)
    for bits in ("64", "32"):
        # 600 000 items per worker at 400 000 a second: the kill lands in the first half.
        killed_run(a, d, ref, 3, 2, u64 + ["--part_mb", "0.2", "--batch", "5000", "--rate",
                                           "400000", "--progress_s", "0.1", "--counter_bits",
                                           bits],
                   ("PS_REPLICAS=1", "PS_HEARTBEAT_INTERVAL_MS=100",
                    "PS_HEARTBEAT_TIMEOUT_MS=1000"),
                   ("--allow-dead-servers",), "server", 1, 0, 4)
        print("kill_server: %s-bit cells: server 1 killed mid-stream; cells identical to the "
              "local count" % bits, flush=True)


def kill_worker(a, d):
    u64, ref = zipf_stream(a, d, 1200000, 200000, 9)
    for victim, after in ((1, 3), (0, 5)):
        # 400 000 items per worker at 300 000 a second, parts of 8 000 ids and batches of 3 000:
        # the victim dies with a part half pushed and pushes in flight.
        out = killed_run(a, d, ref, 2, 3, u64 + ["--part_mb", "0.0625", "--batch", "3000",
                                                 "--rate", "300000", "--progress_s", "0.1"],
                         ("PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000"),
                         ("--allow-dead-workers",), "worker", victim, victim, after)
        if "RESULT items 1200000 " not in out:
            fail("the job did not report 1200000 items", out)
        print("kill_worker: worker %d killed mid-stream; its parts were counted again by the "
              "others; cells identical to the local count" % victim, flush=True)


def stdin(a, d):
    """The stream on the job's stdin: the scheduler cuts it into parts that travel as tasks."""
    path, counts, _ = make_text(d, 11)
    shape = ["--width", str(WIDTH), "--depth", str(DEPTH)]
    ref = os.path.join(d, "local.bin")
    local(a, ["--input", path, "--sketch_out", ref] + shape)
    with open(path, "rb") as f:
        text = f.read()
    n = sum(counts.values())

    # A live stream that pauses longer than the barrier timeout: the parts come as the text
    # does (--part_s), and the workers wait through the pause (the scheduler answers their
    # held requests with "ask again").
    def slow(pipe):
        half = text.rfind(b"\n", 0, len(text) // 2) + 1
        pipe.write(text[:half])
        pipe.flush()
        time.sleep(2.5)
        pipe.write(text[half:])

    dist = os.path.join(d, "dist.bin")
    rc, out = launch(a, 2, 2, ["--input", "-", "--sketch_out", dist, "--part_s", "0.3",
                               "--batch", "5000"] + shape,
                     env=("PS_BARRIER_TIMEOUT_MS=1500",), feed=slow)
    m = re.search(r"STREAM parts (\d+) bytes (\d+)", out)
    if rc != 0 or not m or int(m.group(2)) != len(text):
        fail("a paused text stream on stdin: exit %d, %s" % (rc, m and m.group(0)), out)
    if int(m.group(1)) < 2:
        fail("the paused stream made %s part(s): a part did not end at the pause" % m.group(1),
             out)
    if not same_file(ref, dist) or "RESULT items %d " % n not in out:
        fail("a paused text stream on stdin: the cells differ from the local count", out)
    print("stdin: %d tokens in %s parts, paused 2.5 s against a barrier timeout of 1.5 s: cells "
          "identical to the local count" % (n, m.group(1)), flush=True)

    # A worker killed mid-stream: its parts are the scheduler's copies, given to the others.
    ids = os.path.join(d, "ids.bin")
    rc, out = run([a.job, "--zipf_out", ids, "--zipf_items", "1200000", "--zipf_distinct",
                   "200000", "--seed", "13"])
    if rc != 0:
        fail("--zipf_out exited %d" % rc, out)
    u64 = ["--format", "u64"] + shape
    local(a, ["--input", ids, "--sketch_out", ref] + u64)
    with open(ids, "rb") as f:
        stream = f.read()

    def feed(pipe):
        pipe.write(stream)

    out = killed_run(a, d, ref, 2, 3, ["--input", "-", "--part_mb", "0.0625", "--batch", "3000",
                                       "--rate", "300000", "--progress_s", "0.1"] + u64,
                     ("PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000"),
                     ("--allow-dead-workers",), "worker", 1, 1, 3, feed=feed)
    if "RESULT items 1200000 " not in out:
        fail("the job did not report 1200000 items", out)
    print("stdin: worker 1 killed mid-stream; its parts were counted again from the "
          "scheduler's copies; cells identical to the local count", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--scenario", choices=["exact", "kill_server", "kill_worker", "stdin"],
                   required=True)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        {"exact": exact, "kill_server": kill_server, "kill_worker": kill_worker,
         "stdin": stdin}[a.scenario](a, d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
