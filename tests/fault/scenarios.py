"""The fault scenarios tests/fault/run_fault.py runs: cluster sizes, environment and the job's
arguments (the docstring of run_fault.py says what each one does)."""

# Three update rules at once (Sum on app 0, Assign on app 2, AdaGrad on app 3), four pushes in
# flight per worker: after the job every member of every chain must hold the same bytes per
# segment and app (DIGEST lines), whatever order the copies travelled in (DESIGN §8, inv. 3).
RULES = ["--rules", "sum,assign,adagrad", "--window", "4"]

# Six servers with one ring position each (k=1): two share a chain only as ring neighbours.
SIX_ON_ONE_POSITION = {
    "servers": 6, "workers": 2,
    "env": ["PS_VNODES=1", "PS_REPLICAS=1", "PS_HEARTBEAT_INTERVAL_MS=100",
            "PS_HEARTBEAT_TIMEOUT_MS=1000"],
    "launch": ["--allow-dead-servers", "2"],
    "job": ["--scenario", "sum", "--universe", "100000", "--keys", "20000",
            "--rounds", "40", "--pace-ms", "20"] + RULES,
}

SCENARIOS = {
    "lossy": {
        "servers": 3, "workers": 3,
        "env": ["PS_FAULT_DROP=0.05", "PS_FAULT_DUPLICATE=0.05", "PS_FAULT_DELAY=0.05",
                "PS_FAULT_DELAY_MS=30", "PS_RESEND_TIMEOUT_MS=100",
                # Request identities cross 2^31 in the run (64-bit, never wrap).
                "PS_FIRST_TIMESTAMP=2147483630"],
        "job": ["--scenario", "sum", "--universe", "200000", "--keys", "20000",
                "--rounds", "30"] + RULES,
    },
    "lossy_agg": {
        "servers": 3, "workers": 3,
        "env": ["PS_FAULT_DROP=0.05", "PS_FAULT_DUPLICATE=0.05", "PS_FAULT_DELAY=0.05",
                "PS_FAULT_DELAY_MS=30", "PS_RESEND_TIMEOUT_MS=100",
                "PS_REPLICATION_WINDOW_MS=5",
                # ... and 2^32, inside aggregates (replicas dedupe by them).
                "PS_FIRST_TIMESTAMP=4294967280"],
        "job": ["--scenario", "sum", "--universe", "20000", "--keys", "20000",
                "--rounds", "30"] + RULES,
    },
    "kill_server": {
        "servers": 4, "workers": 4,
        "env": ["PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000",
                "PS_REPLICAS=1"],
        "launch": ["--allow-dead-servers", "1"],
        "job": ["--scenario", "sum", "--universe", "200000", "--keys", "20000",
                "--rounds", "40"] + RULES + ["--pace-ms", "15"],
    },
    "kill_server_agg": {
        "servers": 4, "workers": 4,
        "env": ["PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000",
                "PS_REPLICAS=1", "PS_REPLICATION_WINDOW_MS=5",
                "PS_FIRST_TIMESTAMP=4294967270"],
        "launch": ["--allow-dead-servers", "1"],
        "job": ["--scenario", "sum", "--universe", "20000", "--keys", "20000",
                "--rounds", "60"] + RULES + ["--pace-ms", "10"],
    },
    "stop_server": {
        "servers": 4, "workers": 4,
        "env": [],
        "launch": ["--allow-dead-servers", "1"],
        "job": ["--scenario", "sum", "--universe", "200000", "--keys", "20000",
                "--rounds", "40"],
    },
    "stop_resume": {
        "servers": 4, "workers": 4,
        "env": [],
        "launch": ["--allow-dead-servers", "1"],
        "job": ["--scenario", "sum", "--universe", "200000", "--keys", "20000",
                "--rounds", "40"] + RULES,
    },
    "slow_server": {
        "servers": 2, "workers": 2,
        # The scenario is about memory and back-pressure, not failure detection (stop_server
        # tests that). A server at a tenth of its speed on a busy 2-core machine sends beats
        # late: with UCX the scheduler heard the slowed server after up to 490 ms of silence
        # alone and 720 ms with a second such job running (ctest -j2 runs two tests at once),
        # and a CI run lost it at the default 800 ms.
        "env": ["PS_REPLICAS=1", "PS_HEARTBEAT_TIMEOUT_MS=3000"],
        "job": ["--scenario", "sum", "--universe", "20000", "--keys", "2000",
                "--rounds", "100000000", "--window", "0", "--seconds", "60"],
    },
    "kill_worker": {
        "servers": 2, "workers": 3,
        # Not the 800 ms default: CI machines have stalled every process for 0.7 s at once, and
        # a bystander worker declared dead then fails the run (the hang is still detected).
        "env": ["PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=2000"],
        "launch": ["--allow-dead-workers", "1"],
        "job": ["--shards", "60", "--work-ms", "20"],
    },
    "stop_worker": {
        "servers": 2, "workers": 3,
        # Not the 800 ms default: CI machines have stalled every process for 0.7 s at once, and
        # a bystander worker declared dead then fails the run (the hang is still detected).
        "env": ["PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=2000"],
        "launch": ["--allow-dead-workers", "1"],
        "job": ["--shards", "240", "--work-ms", "20"],
    },
    "kill_two_chains": SIX_ON_ONE_POSITION,
    "kill_one_chain": SIX_ON_ONE_POSITION,
    "kill_two": {
        "servers": 4, "workers": 4,
        "env": ["PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000",
                "PS_REPLICAS=1"],
        "launch": ["--allow-dead-servers", "2"],
        "job": ["--scenario", "sum", "--universe", "200000", "--keys", "20000",
                "--rounds", "80", "--pace-ms", "40"] + RULES,
    },
    "join_server": {
        "servers": 4, "workers": 4,
        "env": ["PS_REPLICAS=1"],
        "job": ["--scenario", "sum", "--universe", "200000", "--keys", "20000",
                "--rounds", "60", "--pace-ms", "50"] + RULES,
    },
    "join_dies": {
        "servers": 4, "workers": 4,
        "env": ["PS_REPLICAS=1"],
        "job": ["--scenario", "sum", "--universe", "200000", "--keys", "20000",
                "--rounds", "80", "--pace-ms", "50"] + RULES,
    },
    "join_dies_cutover": {
        "servers": 4, "workers": 4,
        "env": ["PS_REPLICAS=1", "PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000"],
        "launch": ["--allow-dead-servers", "1"],
        "job": ["--scenario", "sum", "--universe", "200000", "--keys", "20000",
                "--rounds", "80", "--pace-ms", "50"] + RULES,
    },
    "join_old_dies_cutover": {
        "servers": 4, "workers": 4,
        "env": ["PS_REPLICAS=1", "PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000"],
        "launch": ["--allow-dead-servers", "1"],
        "job": ["--scenario", "sum", "--universe", "200000", "--keys", "20000",
                "--rounds", "80", "--pace-ms", "50"] + RULES,
    },
    "leave_and_kill": {
        "servers": 5, "workers": 4,
        "env": ["PS_REPLICAS=2", "PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000"],
        "launch": ["--allow-dead-servers", "2"],
        "job": ["--scenario", "sum", "--universe", "200000", "--keys", "20000",
                "--rounds", "80", "--pace-ms", "50"] + RULES,
    },
    "leave_survives_kill": {
        "servers": 5, "workers": 4,
        "env": ["PS_REPLICAS=2", "PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000"],
        "launch": ["--allow-dead-servers", "2"],
        "job": ["--scenario", "sum", "--universe", "200000", "--keys", "20000",
                "--rounds", "80", "--pace-ms", "50"] + RULES,
    },
    "leave_server": {
        "servers": 4, "workers": 4,
        "env": ["PS_REPLICAS=1"],
        "job": ["--scenario", "sum", "--universe", "200000", "--keys", "20000",
                "--rounds", "60", "--pace-ms", "50"] + RULES,
    },
    "scheduler_loss": {
        "servers": 2, "workers": 2,
        "env": ["PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000"],
        "launch": ["--keep-going"],
        "job": ["--scenario", "hang"],
    },
    "sched_cut": {
        "servers": 4, "workers": 4,
        "env": [],
        "launch": ["--allow-dead-servers", "1"],
        "job": ["--scenario", "sum", "--universe", "200000", "--keys", "20000",
                "--rounds", "80"],
    },
    "stop_scheduler": {
        "servers": 2, "workers": 3,
        "env": ["PS_HEARTBEAT_INTERVAL_MS=100", "PS_HEARTBEAT_TIMEOUT_MS=1000"],
        "job": ["--shards", "240", "--work-ms", "20"],
    },
}
# Cut from the scheduler instead of stopped, on the same job and timeouts.
SCENARIOS["worker_cut"] = SCENARIOS["stop_worker"]
