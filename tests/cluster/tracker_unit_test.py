#!/usr/bin/env python3
"""Unit tests of ps-launch's pure parts: hostfile parsing (errors name file and line),
placement over hosts, the failure policy, the command lines of the ssh, mpi and slurm backends
(what --dry-run prints), the rendezvous protocol's decisions (garbage and strangers dropped),
and ps-task's role and rank from each launcher's variables."""

import importlib.machinery
import importlib.util
import os
import shlex
import shutil
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TRACKER = os.path.join(HERE, "..", "..", "tracker")
sys.path.insert(0, TRACKER)

from pslaunch.backends import MpiBackend, SlurmBackend, SshBackend  # noqa: E402
from pslaunch.cluster import ClusterJob  # noqa: E402
from pslaunch.common import (FailurePolicy, group_of, parse_hostfile, parse_workers, place,  # noqa: E402
                             process_names)


def load_task():
    loader = importlib.machinery.SourceFileLoader("ps_task", os.path.join(TRACKER, "ps-task"))
    spec = importlib.util.spec_from_loader("ps_task", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


TEMP = tempfile.mkdtemp(prefix="ps-tracker-unit-")


def hostfile(text):
    fd, path = tempfile.mkstemp(suffix=".hosts", dir=TEMP)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def tearDownModule():
    shutil.rmtree(TEMP, ignore_errors=True)


def args(**kw):
    base = dict(num_servers=2, num_workers=3, vnodes=None, env=[], join=None, hostfile=None,
                placement="roundrobin", launcher_args="", remote_python="python3",
                sync_dst_dir=None, mpirun="mpirun", mpi_flavor="openmpi", sbatch_args="",
                allow_dead_workers=0, allow_dead_servers=0, keep_going=False,
                program=["./job", "--x", "a b"], worker_groups=[])
    base.update(kw)
    return types.SimpleNamespace(**base)


class HostfileTest(unittest.TestCase):
    def test_forms(self):
        path = hostfile("# cluster\nnode1\nuser@node2 slots=4\nnode3:2  # two\n\n")
        self.assertEqual(parse_hostfile(path), [("node1", None), ("user@node2", 4), ("node3", 2)])

    def test_errors_name_file_and_line(self):
        path = hostfile("node1\nnode2 slots=x\n")
        with self.assertRaisesRegex(ValueError, r"\.hosts:2: expected"):
            parse_hostfile(path)
        with self.assertRaisesRegex(ValueError, r":1: slots must be at least 1"):
            parse_hostfile(hostfile("node1:0\n"))
        with self.assertRaisesRegex(ValueError, "no hosts"):
            parse_hostfile(hostfile("# nothing\n"))
        with self.assertRaisesRegex(ValueError, "No such file"):
            parse_hostfile("/nonexistent/hosts")


class PlacementTest(unittest.TestCase):
    def test_roundrobin_deals_one_per_host(self):
        self.assertEqual(place([("a", None), ("b", None), ("c", None)], 7, "roundrobin"),
                         [0, 1, 2, 0, 1, 2, 0])

    def test_roundrobin_skips_full_hosts(self):
        self.assertEqual(place([("a", 1), ("b", None)], 4, "roundrobin"), [0, 1, 1, 1])

    def test_packed_fills_slots_first(self):
        self.assertEqual(place([("a", 3), ("b", 4)], 6, "packed"), [0, 0, 0, 1, 1, 1])
        self.assertEqual(place([("a", None), ("b", 4)], 5, "packed"), [0] * 5)

    def test_too_few_slots_is_an_error_not_oversubscription(self):
        with self.assertRaisesRegex(ValueError, "2 slots for 3 processes"):
            place([("a", 1), ("b", 1)], 3, "packed")
        with self.assertRaisesRegex(ValueError, "2 slots for 3 processes"):
            place([("a", 1), ("b", 1)], 3, "roundrobin")

    def test_order_is_scheduler_servers_workers(self):
        self.assertEqual(process_names(2, 1), [("scheduler", 0), ("server", 0), ("server", 1),
                                               ("worker", 0)])


class FailurePolicyTest(unittest.TestCase):
    def test_verdicts(self):
        p = FailurePolicy(allow_dead_workers=1, allow_dead_servers=0)
        self.assertEqual(p.judge("worker", 0, 0), "ok")
        self.assertEqual(p.judge("worker", 1, -9), "tolerated")
        self.assertEqual(p.judge("worker", 2, 1), "fatal")
        self.assertEqual(p.judge("server", 0, 1), "fatal")
        self.assertEqual(p.judge("scheduler", 0, 1), "fatal")
        k = FailurePolicy(keep_going=True)
        self.assertEqual(k.judge("worker", 0, 3), "failed")
        self.assertEqual(k.failed, {"worker 0"})
        # Bad input (exit 65, EX_DATAERR) stops the job whatever the allowances: another
        # worker given the same part would fail the same way.
        b = FailurePolicy(allow_dead_workers=2, keep_going=True)
        self.assertEqual(b.judge("worker", 0, 65), "fatal")


class WorkerGroupsTest(unittest.TestCase):
    def test_w_takes_a_count_or_named_groups(self):
        self.assertEqual(parse_workers("4"), (4, []))
        self.assertEqual(parse_workers("train:4,eval:1"), (5, [("train", 4), ("eval", 1)]))
        for bad in ("train:0", "train", "a:1,a:2", "x y:1", "train:4,"):
            with self.assertRaises(ValueError):
                parse_workers(bad)
        groups = [("train", 2), ("eval", 1)]
        self.assertEqual([group_of(groups, r) for r in range(4)], ["train", "train", "eval", None])

    def test_ssh_names_each_workers_group(self):
        a = args(hostfile=hostfile("h0\n"), num_workers=3, worker_groups=[("train", 2), ("eval", 1)])
        groups = {}
        for c in SshBackend(a).commands("ssh:1", "T"):
            remote = shlex.split(c.argv[-1])
            env = dict(x.split("=", 1) for x in remote if "=" in x and x.split("=")[0].isupper())
            self.assertEqual(env["PS_WORKER_GROUPS"], "train:2,eval:1")
            if env["PS_ROLE"] == "worker":
                groups[int(env["PS_RANK"])] = env["PS_WORKER_GROUP"]
        self.assertEqual(groups, {0: "train", 1: "train", 2: "eval"})


class SummaryTest(unittest.TestCase):
    def test_steps_are_per_worker_group(self):
        from pslaunch.metrics import summary_line
        nodes = [{"id": 3, "role": "worker", "group": "train", "metrics": {"ps_worker_step": 9}},
                 {"id": 4, "role": "worker", "group": "train", "metrics": {"ps_worker_step": 7}},
                 {"id": 5, "role": "worker", "group": "eval", "metrics": {"ps_worker_step": 2}}]
        line = summary_line({"nodes": nodes}, None, 0)
        self.assertIn("eval steps 2 (node 5) .. 2 (node 5)", line)
        self.assertIn("train steps 7 (node 4) .. 9 (node 3)", line)
        for n in nodes:
            del n["group"]
        self.assertIn("job: steps 2 (node 5) .. 9 (node 3)", summary_line({"nodes": nodes}, None, 0))


class HugepagesTest(unittest.TestCase):
    H, A = "glibc.malloc.hugetlb", "glibc.malloc.arena_max"

    def test_added_to_what_the_environment_has(self):
        from pslaunch.common import hugepage_tunables
        self.assertEqual(hugepage_tunables("", {}), "%s=1:%s=1" % (self.H, self.A))
        self.assertEqual(hugepage_tunables("glibc.malloc.tcache_count=0", {}),
                         "glibc.malloc.tcache_count=0:%s=1:%s=1" % (self.H, self.A))

    def test_the_users_settings_win(self):
        from pslaunch.common import hugepage_tunables
        self.assertEqual(hugepage_tunables("%s=0" % self.H, {}), "%s=0:%s=1" % (self.H, self.A))
        self.assertEqual(hugepage_tunables("%s=4" % self.A, {}), "%s=4:%s=1" % (self.A, self.H))
        # glibc's older variable for the arena count counts as a setting of it.
        self.assertEqual(hugepage_tunables("", {"MALLOC_ARENA_MAX": "8"}), "%s=1" % self.H)

    def test_off_leaves_the_environment_alone(self):
        from pslaunch.common import job_env, with_hugepages
        self.assertNotIn("GLIBC_TUNABLES", with_hugepages({"PS_HUGEPAGES": "0"}))
        self.assertEqual(with_hugepages({"PS_HUGEPAGES": "0", "GLIBC_TUNABLES": "x=1"}),
                         {"PS_HUGEPAGES": "0", "GLIBC_TUNABLES": "x=1"})
        self.assertIn(self.H, with_hugepages({})["GLIBC_TUNABLES"])
        self.assertEqual(job_env(args(hugepages="off"))["PS_HUGEPAGES"], "0")
        self.assertEqual(job_env(args(hugepages="on"))["PS_HUGEPAGES"], "1")
        # A cluster job passes the switch; each host merges it with its own tunables (ps-task).
        env = job_env(args(hugepages="on"))
        self.assertNotIn("GLIBC_TUNABLES", env)

    def test_local_processes_get_them_and_dry_run_shows_them(self):
        import contextlib
        import io
        from pslaunch.local import Job, dry_run
        for flag, want in (("on", True), ("off", False)):
            a = args(hugepages=flag, host="127.0.0.1", join=None, num_servers=1, num_workers=1)
            env = Job(a).base_env()
            self.assertEqual(self.H + "=1" in env.get("GLIBC_TUNABLES", ""), want, flag)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                dry_run(a)
            self.assertEqual(self.H + "=1" in out.getvalue(), want, out.getvalue())


class BackendCommandTest(unittest.TestCase):
    def test_ssh_one_command_per_process_with_env_on_the_command_line(self):
        a = args(hostfile=hostfile("h0\nh1\n"), launcher_args="-F cfg", env=["A=x y"])
        cmds = SshBackend(a).commands("ssh:4000", "TOK")
        self.assertEqual(len(cmds), 6)
        first = cmds[0].argv
        self.assertEqual(first[:6], ["ssh", "-o", "BatchMode=yes", "-F", "cfg", "-n"])
        self.assertEqual(first[6], "h0")
        remote = shlex.split(first[7])
        self.assertEqual(remote[:3], ["cd", os.getcwd(), "&&"])
        self.assertIn("PS_ROLE=scheduler", remote)
        self.assertIn("PS_TRACKER=ssh:4000", remote)
        self.assertIn("A=x y", remote)
        self.assertEqual(remote[-3:], ["./job", "--x", "a b"])
        self.assertEqual([c.host for c in cmds], ["h0", "h1", "h0", "h1", "h0", "h1"])

    def test_ssh_sync_runs_the_copy(self):
        a = args(hostfile=hostfile("h0\nh0\nh1\n"), sync_dst_dir="/scratch/job",
                 program=[os.path.join(os.getcwd(), "bin", "job")])
        b = SshBackend(a)
        syncs = b.sync_commands()
        self.assertEqual([s.host for s in syncs], ["h0", "h1"])
        self.assertEqual(syncs[0].argv[-1], "h0:/scratch/job/")
        remote = shlex.split(b.commands("ssh:1", "T")[0].argv[-1])
        self.assertEqual(remote[1], "/scratch/job")
        self.assertEqual(remote[-1], "/scratch/job/bin/job")

    def test_openmpi_mpmd_contexts(self):
        argv = MpiBackend(args()).commands("10.0.0.1:5", "T")[0].argv
        text = " ".join(argv)
        contexts = text.split(" : ")
        self.assertEqual(len(contexts), 3)
        self.assertIn("-np 1 ", contexts[0])
        self.assertIn("-x PS_ROLE=scheduler", contexts[0])
        self.assertIn("-np 2 ", contexts[1])
        self.assertIn("-x PS_RANK_BASE=1", contexts[1])
        self.assertIn("-np 3 ", contexts[2])
        self.assertIn("-x PS_RANK_BASE=3", contexts[2])
        self.assertNotIn("--allow-run-as-root", text)
        self.assertNotIn("--oversubscribe", text)

    def test_mpich_env_form_and_hostfile(self):
        a = args(mpi_flavor="mpich", hostfile=hostfile("n1 slots=4\nn2\n"))
        b = MpiBackend(a)
        argv = b.commands("10.0.0.1:5", "T", "/tmp/h")[0].argv
        self.assertEqual(argv[:5], ["mpirun", "-f", "/tmp/h", "-ppn", "1"])
        i = argv.index("PS_ROLE")
        self.assertEqual(argv[i - 1:i + 2], ["-env", "PS_ROLE", "scheduler"])
        self.assertEqual(b.hostfile_text(), "n1:4\nn2\n")
        a.flavor = a.mpi_flavor = "openmpi"
        a.placement = "packed"
        b = MpiBackend(a)
        self.assertEqual(b.hostfile_text(), "n1 slots=4\nn2\n")
        argv = b.commands("10.0.0.1:5", "T", "/tmp/h")[0].argv
        self.assertEqual(argv[:5], ["mpirun", "--hostfile", "/tmp/h", "--map-by", "slot"])

    def test_slurm_one_srun_and_role_from_procid(self):
        launch = SlurmBackend(args()).commands("10.0.0.1:5", "T")[0]
        self.assertEqual(launch.argv[:5], ["srun", "--ntasks=6", "--kill-on-bad-exit=1",
                                           "--export=ALL", "--distribution=cyclic"])
        self.assertEqual(launch.env["PS_LAUNCH_SERVERS"], "2")
        self.assertNotIn("PS_ROLE", launch.env)

    def test_sbatch_script(self):
        script = SlurmBackend(args(sbatch_args="--time=10")).sbatch_script(["ps-launch", "x y"])
        self.assertIn("#SBATCH --ntasks=6\n", script)
        self.assertIn("#SBATCH --time=10\n", script)
        self.assertTrue(script.rstrip().endswith("exec ps-launch 'x y'"))


class FakeConn:
    def __init__(self):
        self.peer = "10.0.0.9"
        self.name = None
        self.info = {}
        self.sent = []
        self.closed = False

    def send(self, **msg):
        self.sent.append(msg)
        return True

    def close(self):
        self.closed = True


class RendezvousProtocolTest(unittest.TestCase):
    """What ps-launch does with each message a task (or anything else) sends its port."""

    def setUp(self):
        self.job = ClusterJob(args(num_servers=1, num_workers=1), backend=None)
        self.state = {"sched": None}

    def hello(self, **kw):
        h = {"token": self.job.token, "role": "server", "rank": 0, "hostname": "h", "addr": "a"}
        h.update(kw)
        c = FakeConn()
        return c, self.job.handle(c, {"hello": h}, self.state)

    def test_garbage_and_strangers_are_dropped_without_failing_the_job(self):
        for msg in ({"garbage": True}, {"hello": "x"}, {"started": {"pid": 1}}):
            c = FakeConn()
            self.assertIsNone(self.job.handle(c, msg, self.state))
            self.assertTrue(c.closed)
        for kw in ({"token": "wrong"}, {"token": "\u00e9\u4e2d"}, {"token": None},
                   {"rank": [1]}, {"rank": "0"}, {"role": 7}):
            c, fatal = self.hello(**kw)
            self.assertIsNone(fatal, kw)
            self.assertTrue(c.closed, kw)
        self.assertEqual(self.job.conns, {})

    def test_servers_wait_for_the_scheduler_address(self):
        srv, _ = self.hello()
        self.assertEqual(srv.sent, [])
        sch, _ = self.hello(role="scheduler")
        self.assertEqual(sch.sent, [{"go": {}}])
        self.job.handle(sch, {"listening": {"host": "10.1.1.1", "port": 4242}}, self.state)
        self.assertEqual(srv.sent[0]["go"]["env"]["PS_SCHEDULER_PORT"], "4242")
        wrk, _ = self.hello(role="worker")
        self.assertEqual(wrk.sent[0]["go"]["env"]["PS_SCHEDULER_HOST"], "10.1.1.1")

    def test_a_group_with_a_command_of_its_own_gets_it_with_go(self):
        self.job = ClusterJob(args(num_servers=1, num_workers=3,
                                   worker_groups=[("a", 1), ("b", 2)],
                                   group_cmds={"b": ["./other", "--x", "1"]}), backend=None)
        workers = [self.hello(role="worker", rank=r)[0] for r in range(3)]
        sch, _ = self.hello(role="scheduler")
        self.job.handle(sch, {"listening": {"host": "10.1.1.1", "port": 4242}}, self.state)
        srv, _ = self.hello()
        self.assertNotIn("argv", srv.sent[0]["go"])
        self.assertNotIn("argv", workers[0].sent[0]["go"])  # group a: the program after --
        for w in workers[1:]:
            self.assertEqual(w.sent[0]["go"]["argv"], ["./other", "--x", "1"])

    def test_a_second_task_with_the_same_name_fails_the_job(self):
        self.hello()
        c, fatal = self.hello()
        self.assertIn("already connected", fatal[1])
        self.assertTrue(c.closed)

    def test_exit_codes(self):
        srv, _ = self.hello()
        fatal = self.job.handle(srv, {"exit": {"code": 3, "at": 12.5}}, self.state)
        self.assertIn("server 0", fatal[1])
        self.assertEqual(fatal[0], 12.5)
        self.assertEqual(srv.sent[-1], {"exit_with": 3})
        wrk, _ = self.hello(role="worker")
        self.assertIsNone(self.job.handle(wrk, {"exit": {"code": 0}}, self.state))
        self.assertEqual(wrk.sent[-1], {"exit_with": 0})
        lost, _ = self.hello(role="scheduler")
        self.assertIn("lost contact with scheduler 0", self.job.handle(lost, None, self.state)[1])

    def test_failures_that_follow_each_other_are_named_earliest_first(self):
        # Worker 0's report arrives first, but worker 1 ended first: both named, 1 before 0.
        job = ClusterJob(args(num_servers=1, num_workers=2), backend=None)
        conns = {}
        for rank in (0, 1):
            c = FakeConn()
            job.handle(c, {"hello": {"token": job.token, "role": "worker", "rank": rank}},
                       self.state)
            conns[rank] = c
        first = job.handle(conns[0], {"exit": {"code": 1, "at": 100.2}}, self.state)
        job.events.put((conns[1], {"exit": {"code": 3, "at": 100.1}}))
        named = [t for _, t in job.cascade(first, self.state, window=0.2)]
        self.assertEqual(len(named), 2)
        self.assertIn("worker 1", named[0])
        self.assertIn("code 3", named[0])
        self.assertIn("worker 0", named[1])


class TaskRoleTest(unittest.TestCase):
    def setUp(self):
        self.task = load_task()
        self.saved = dict(os.environ)
        for k in list(os.environ):
            if k.startswith(("PS_", "OMPI_", "PMI_", "PMIX_", "SLURM_")):
                del os.environ[k]

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.saved)

    def test_explicit(self):
        os.environ.update(PS_ROLE="server", PS_RANK="2")
        self.assertEqual(self.task.role_and_rank(), ("server", 2))

    def test_mpi_context(self):
        os.environ.update(PS_ROLE="worker", PS_RANK_BASE="3", OMPI_COMM_WORLD_RANK="5")
        self.assertEqual(self.task.role_and_rank(), ("worker", 2))
        del os.environ["OMPI_COMM_WORLD_RANK"]
        os.environ["PMI_RANK"] = "4"
        self.assertEqual(self.task.role_and_rank(), ("worker", 1))

    def test_slurm_procid(self):
        os.environ.update(PS_LAUNCH_SERVERS="2")
        got = []
        for r in range(5):
            os.environ["SLURM_PROCID"] = str(r)
            got.append(self.task.role_and_rank())
        self.assertEqual(got, [("scheduler", 0), ("server", 0), ("server", 1), ("worker", 0),
                               ("worker", 1)])

    def test_ssh_tracker_address_from_ssh_connection(self):
        os.environ.update(PS_TRACKER="ssh:4000", SSH_CONNECTION="10.1.2.3 5555 10.1.2.9 22")
        self.assertEqual(self.task.tracker_address(), ("10.1.2.3", 4000))


if __name__ == "__main__":
    unittest.main(verbosity=2)
