#!/usr/bin/env python3
"""Worker groups in real processes (issue 22): groups_job through ps-launch over loopback.

  policy      train:3 under BSP with a straggler, eval:1 under ASP reading the same keys in
              slow steps of its own (a command line of its own: ps-launch --group-cmd). BSP's lockstep holds within the training group, the
              training group finishes without waiting for the evaluation worker's steps (with
              one group it would wait for them, and hang once that worker stopped stepping), and
              the evaluation worker's pulls are never held.
  kill_eval   train:2 (BSP) and eval:2 with a task pool each; eval worker 1 is SIGKILLed while
              it holds a task: only that task is redone, by eval worker 0; the training
              group's steps and tasks are untouched.
  kill_train  train:3 (BSP) and eval:2; train worker 1 is SIGKILLed at step 5: the training
              group goes on without it, and no eval task is redone.
  join_eval   train:2 (BSP) and eval:1 with task pools; once the eval worker has done a task, a
              second eval worker joins the running job (ps-launch --join -w eval:1): it gets
              the next rank in that group, takes eval tasks only, and every task is done once.
  join_group  a job launched with the training group alone (train:2, BSP); at step 5 an
              evaluation group the job did not have joins (ps-launch --join -w eval:1): its
              worker adds tasks to its group's pool (AddTasks from a worker) and does them,
              reads under the job's ASP, is never held, and the training group's lockstep never
              waits for it.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading

import kills

# name: (servers, -w, job arguments)
SCENARIOS = {
    # The evaluator runs its own command line (ps-launch --group-cmd): 3 steps, not 7.
    "policy": (2, "train:3,eval:1", ["--steps", "15", "--eval-steps", "7", "--eval-ms", "200",
                                     "--straggler-ms", "20"]),
    "kill_eval": (2, "train:2,eval:2", ["--steps", "20", "--straggler-ms", "20", "--tasks", "12",
                                        "--eval-ms", "30", "--stall-eval-rank", "1",
                                        "--stall-task", "2"]),
    "kill_train": (2, "train:3,eval:2", ["--steps", "20", "--straggler-ms", "20", "--tasks", "12",
                                         "--eval-ms", "30", "--stall-train-rank", "1",
                                         "--stall-step", "5"]),
    "join_eval": (2, "train:2,eval:1", ["--steps", "20", "--straggler-ms", "20", "--tasks", "40",
                                        "--eval-ms", "30"]),
    "join_group": (2, "train:2", ["--steps", "40", "--straggler-ms", "20", "--eval-steps", "5",
                                  "--eval-ms", "30"]),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    a = p.parse_args()
    s, w, job_args = SCENARIOS[a.scenario]
    kill = a.scenario.startswith("kill")
    cmd = [sys.executable, a.launcher, "-s", str(s), "-w", w, "--timeout", "120",
           "--env", "PS_CONSISTENCY=asp", "--env", "PS_GROUP_CONSISTENCY=train=bsp",
           "--env", "PS_HEARTBEAT_TIMEOUT_MS=5000"]
    if kill:
        cmd += ["--allow-dead-workers", "1"]
    if a.scenario == "policy":
        cmd += ["--group-cmd", "eval=%s %s" % (a.job, " ".join(
            "3" if i > 0 and job_args[i - 1] == "--eval-steps" else x
            for i, x in enumerate(job_args)))]
    cmd += ["--", a.job] + job_args
    print("running:", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, killed = [], []
    joiner = {"port": None, "thread": None, "rc": None, "out": ""}

    def join():
        extra = ["--self-tasks", "6"] if a.scenario == "join_group" else []  # fills its own pool
        joiner["rc"], joiner["out"] = kills.join(
            a.launcher, joiner["port"], ["-s", "0", "-w", "eval:1", "--timeout", "120", "--env",
                                         "PS_HEARTBEAT_TIMEOUT_MS=5000"], [a.job] + job_args + extra)

    def read():
        for line in proc.stdout:
            lines.append(line)
            sys.stdout.write(line)
            joiner["port"] = kills.scheduler_port(line) or joiner["port"]
            trigger = ("DID eval" in line if a.scenario == "join_eval" else
                       re.match(r"\[worker 0\] STEP 5$", line) is not None)
            if a.scenario.startswith("join") and trigger and joiner["thread"] is None:
                joiner["thread"] = threading.Thread(target=join)
                joiner["thread"].start()
            m = re.search(r"STALLED pid=(\d+)", line)
            if m and kill and not killed:
                pid = int(m.group(1))
                os.kill(pid, signal.SIGKILL)  # the worker process itself, by its PID
                killed.append(pid)
                print("run_groups: sent SIGKILL to worker pid %d" % pid, flush=True)

    t = threading.Thread(target=read)
    t.start()
    rc = proc.wait()
    t.join()
    if joiner["thread"]:
        joiner["thread"].join()
    out = "".join(lines) + joiner["out"]
    failures = []
    if rc != 0:
        failures.append("ps-launch exited with %d" % rc)
    if a.scenario.startswith("join") and joiner["rc"] != 0:
        failures.append("the joining eval worker's ps-launch exited with %s" % joiner["rc"])
    if "VIOLATION" in out:
        failures.append("a training worker's read broke BSP's lockstep within its group")
    rows = [json.loads(m.group(1)) for m in re.finditer(r"SUMMARY (\{.*\})$", out, re.M)]
    train = [r for r in rows if r["group"] == "train"]
    evals = [r for r in rows if r["group"] == "eval"]
    sizes = dict((g.split(":")[0], int(g.split(":")[1])) for g in w.split(","))
    want_train = sizes["train"] - (a.scenario == "kill_train")
    want_eval = sizes.get("eval", 0) - (a.scenario == "kill_eval") + a.scenario.startswith("join")
    if len(train) != want_train or len(evals) != want_eval:
        failures.append("expected %d train and %d eval summaries, got %d and %d"
                        % (want_train, want_eval, len(train), len(evals)))
    steps = int(job_args[job_args.index("--steps") + 1])
    for r in train:
        if r["steps"] != steps:
            failures.append("train worker %d finished %d of %d steps"
                            % (r["group_rank"], r["steps"], steps))
    if sorted(r["group_rank"] for r in train + evals) != sorted(
            [i for i in range(sizes["train"]) if not (a.scenario == "kill_train" and i == 1)] +
            [i for i in range(want_eval + (a.scenario == "kill_eval"))
             if not (a.scenario == "kill_eval" and i == 1)]):
        failures.append("group ranks are not 0.. within each group: %s" % rows)
    if any(r["barrier_wait_s"] > 0 for r in evals):
        failures.append("an ASP evaluation worker's pull was held: %s" % evals)
    if not any(r["barrier_wait_s"] > 0 for r in train):
        failures.append("no training pull was ever held: the straggler did not exercise BSP")
    if a.scenario == "join_group":
        if joiner["thread"] is None:
            failures.append("the training group never reached step 5")
        if [r["steps"] for r in evals] != [6] or sorted(evals[0]["tasks"]) != list(range(6)):
            failures.append("the joined evaluation worker did %s, want the 6 tasks it added" % evals)
    elif a.scenario == "policy":
        if [r["steps"] for r in evals] != [3]:
            failures.append("the evaluation worker did %s steps, want 3" % evals)
    else:
        if kill and not killed:
            failures.append("no worker stalled to be killed")
        n = int(job_args[job_args.index("--tasks") + 1])
        m = re.search(r"TASKS added (\d+) done (\d+) redone (\d+)", out)
        redone = 1 if a.scenario == "kill_eval" else 0
        if not m or [int(x) for x in m.groups()] != [2 * n, 2 * n, redone]:
            failures.append("scheduler's tasks: %s, want added %d done %d redone %d"
                            % (m.group(0) if m else None, 2 * n, 2 * n, redone))
        did = [int(x) for x in re.findall(r"\] DID eval (\d+)$", out, re.M)]
        if sorted(set(did)) != list(range(n)):
            failures.append("eval tasks done: %s, want 0..%d (the eval pool only)"
                            % (sorted(did), n - 1))
        train_tasks = sorted(x for r in train for x in r["tasks"])
        if train_tasks != list(range(n, 2 * n)):
            failures.append("train tasks done: %s, want %d..%d, each once"
                            % (train_tasks, n, 2 * n - 1))
        if a.scenario == "join_eval":
            joined = [r for r in evals if r["group_rank"] == 1]
            if not joined or not joined[0]["tasks"]:
                failures.append("the joining eval worker did no eval task: %s" % joined)
        if a.scenario != "kill_eval" and len(did) != n:
            failures.append("an eval task was done twice after a training worker died: %s"
                            % sorted(did))
    if failures:
        print("FAILED %s: %s" % (a.scenario, "; ".join(failures)))
        return 1
    print("PASSED %s: %s" % (a.scenario, json.dumps(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
