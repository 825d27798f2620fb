"""Unit tests of python/grit_client.py (docs/pytorch.md).

Run by ctest as `unit.pyclient` (tests/tests.cmake) with GRIT_HB_PARSE (grit's own heartbeat
parser as a filter: tests/python/hb_parse_tool.c), GRIT_BIN (grit, for a real `grit launch`),
GRIT_FAKE_NVML (tests/fake/fake_nvml.c, the stand-in NVML for the GPU signal) and
PYTHONPATH=python. Exit 77 (skipped) when a test had to be skipped because torch, mpirun
or those binaries are missing, said loudly; any failure is exit 1.

    GRIT_HB_PARSE=build/grit-hb-parse GRIT_BIN=build/grit PYTHONPATH=python \\
        /usr/bin/python3 test_grit_client.py     (in tests/python; or -m unittest -v test_grit_client)
"""
import importlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
from contextlib import redirect_stderr

import grit_client

SECRET = "0123456789abcdef" * 4
HB_PARSE = os.environ.get("GRIT_HB_PARSE", "")
GRIT = os.environ.get("GRIT_BIN", "")
try:
    import torch
except ImportError:
    torch = None

ENV_KEYS = ("GRIT_SUP_ADDR", "GRIT_SUP_SECRET", "GRIT_NODES", "GRIT_RANKS_PER_NODE", "RANK",
            "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "GRIT_FAULTS",
            "GRIT_HOST_ID", "SLURMD_NODENAME", "GRIT_NVML_LIB", "FAKE_NVML_GPUS",
            "FAKE_NVML_UTIL_FILE", "FAKE_NVML_CLOCK_FILE", "CUDA_VISIBLE_DEVICES", "LOCAL_RANK",
            "GRIT_SUP_LOCK", "GRIT_SUP_LOCK_TOKEN")


def fresh(env):
    """grit_client reloaded with exactly env set among the variables it reads."""
    grit_client.close()
    for k in ENV_KEYS:
        os.environ.pop(k, None)
    os.environ.update(env)
    return importlib.reload(grit_client)


class Receiver:
    """A UDP socket on loopback standing in for the supervisor: collects lines."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]

    def lines(self, wait=0.3, want=None):
        out, end = [], time.time() + wait
        while time.time() < end and (want is None or len(out) < want):
            try:
                out.append(self.sock.recv(4096).decode())
            except socket.timeout:
                pass
        return out

    def close(self):
        self.sock.close()


def hb_parse(lines, secret=SECRET):
    """Each line through grit's hb_parse: a list of dicts (or {"error": ...})."""
    r = subprocess.run([HB_PARSE, secret], input="".join(l if l.endswith("\n") else l + "\n"
                                                         for l in lines),
                       capture_output=True, text=True, timeout=30, check=True)
    return [json.loads(l) for l in r.stdout.splitlines()]


class Unsupervised(unittest.TestCase):
    def test_no_environment_is_a_cheap_no_op(self):
        g = fresh({})
        threads = threading.active_count()
        t = time.perf_counter()
        for i in range(100000):
            g.beat(i, loss=1.0, step_time=0.1)
        dt = time.perf_counter() - t
        g.event("x", 1)
        g.checkpoint_saved(1, "p")
        g.done()
        self.assertFalse(g.enabled())
        self.assertIsNone(g.rank())
        self.assertEqual(threading.active_count(), threads, "a thread was started")
        self.assertLess(dt / 100000, 20e-6, "beat() costs %.1f us unsupervised" % (dt * 10))

    def test_half_environment_is_not_supervised(self):
        g = fresh({"GRIT_SUP_ADDR": "127.0.0.1:9"})
        self.assertFalse(g.enabled())
        g = fresh({"GRIT_SUP_SECRET": SECRET})
        self.assertFalse(g.enabled())


@unittest.skipUnless(os.access(HB_PARSE, os.X_OK), "GRIT_HB_PARSE (grit-hb-parse) not built")
class Protocol(unittest.TestCase):
    def setUp(self):
        self.rx = Receiver()

    def tearDown(self):
        grit_client.close()
        self.rx.close()

    def test_beats_and_events_parse_with_grits_parser(self):
        g = fresh({"GRIT_SUP_ADDR": self.rx.addr, "GRIT_SUP_SECRET": SECRET, "RANK": "3",
                   "OMPI_COMM_WORLD_RANK": "0", "GRIT_NODES": "nodeA,nodeB",
                   "GRIT_RANKS_PER_NODE": "2", "GRIT_HOST_ID": "machine-7"})
        g.init(period=60)  # no liveness repeats in between
        g.beat(7, loss=2.5, tokens=4096, step_time=0.25, comm_time=0.05, gnorm=1.5)
        g.event("my kind", 7, "two words\tand a tab")
        g.checkpoint_saved(7, "/x/ckpt/step_00000007.pt")
        g.beat(8, loss=float("nan"))
        g.done()
        lines = [l for l in self.rx.lines(want=6) if " step=0 " not in l]
        for l in lines:
            self.assertNotIn("\n", l[:-1], "one line per datagram")
        p = hb_parse(lines)
        self.assertEqual(len(p), 6, lines)
        b = p[0]
        # torchrun's RANK wins over the launcher's rank; node = GRIT_NODES[3 // 2]
        self.assertEqual((b["event"], b["rank"], b["node"], b["step"]), (0, 3, "nodeB", 7))
        self.assertEqual((b["loss"], b["gnorm"], b["step_time"], b["comm_time"]),
                         (2.5, 1.5, 0.25, 0.05))
        self.assertEqual((b["pid"], b["host"]), (os.getpid(), "machine-7"))
        self.assertIn(" tokens=4096", lines[0])
        e = p[1]
        self.assertEqual((e["event"], e["kind"], e["step"], e["detail"]),
                         (1, "my_kind", 7, "two_words_and_a_tab"))
        self.assertEqual((p[2]["kind"], p[2]["detail"]), ("ckpt_saved", "step_00000007.pt"))
        self.assertEqual((p[3]["step"], p[3]["loss"]), (8, "nan"))  # the supervisor's NaN
        self.assertEqual((p[4]["event"], p[4]["step"]), (0, 8))  # done: a last beat, then
        self.assertEqual((p[5]["kind"], p[5]["step"]), ("done", 8))  # the event

    def test_wrong_secret_is_rejected_by_grits_parser(self):
        g = fresh({"GRIT_SUP_ADDR": self.rx.addr, "GRIT_SUP_SECRET": SECRET, "RANK": "0"})
        g.init(period=60)
        g.beat(1, loss=1.0)
        line = [l for l in self.rx.lines(want=2) if " step=1 " in l][0]
        self.assertEqual(hb_parse([line])[0]["rank"], 0)
        other = "f" * 64
        self.assertEqual(hb_parse([line], secret=other)[0].get("format"), 1)
        self.assertEqual(hb_parse([line.replace(SECRET, SECRET[:-1])])[0].get("format"), 1)

    def test_liveness_thread_repeats_the_last_beat(self):
        g = fresh({"GRIT_SUP_ADDR": self.rx.addr, "GRIT_SUP_SECRET": SECRET, "RANK": "1"})
        g.init(period=0.1)
        start = [l for l in self.rx.lines(wait=0.35)]
        self.assertGreaterEqual(len(start), 2, "no liveness beats before the first step")
        self.assertTrue(all(" step=0 " in l for l in start), start)
        g.beat(5, loss=1.0, step_time=0.2)
        time.sleep(0.05)
        lines = self.rx.lines(wait=0.5)
        self.assertGreaterEqual(len([l for l in lines if " step=5 " in l]), 3, lines)
        g.close()
        self.rx.lines(wait=0.15)
        self.assertEqual(self.rx.lines(wait=0.3), [], "beats after close()")

    def test_signals_util_and_net_parse_with_grits_parser(self):
        # util= near 0 while idle and clearly above it while this process spins; net_rx/tx
        # (local rank 0, GRIT_NET_IFACE=lo) see the bytes this test pushes through lo
        g = fresh({"GRIT_SUP_ADDR": self.rx.addr, "GRIT_SUP_SECRET": SECRET, "RANK": "0",
                   "LOCAL_RANK": "0", "GRIT_NET_IFACE": "lo"})
        g.init(period=0.3)
        idle = hb_parse(self.rx.lines(wait=1.0))
        end = time.monotonic() + 1.0
        x = 0
        while time.monotonic() < end:
            x += 1
        blast = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sink.bind(("127.0.0.1", 0))
        for _ in range(700):
            blast.sendto(b"x" * 60000, sink.getsockname())
        blast.close(), sink.close()
        busy = hb_parse(self.rx.lines(wait=0.8))
        num = lambda v: isinstance(v, (int, float))  # the tool writes an absent one as "nan"
        u_idle = [b["util"] for b in idle if num(b.get("util"))]
        u_busy = [b["util"] for b in busy if num(b.get("util"))]
        nets = [max(b["net_rx"], b["net_tx"]) for b in busy if num(b.get("net_rx"))]
        self.assertTrue(u_idle and u_busy and nets, (idle, busy))
        self.assertLess(min(u_idle), 0.1, u_idle)
        self.assertGreater(max(u_busy), max(0.1, 4 * min(u_idle)), u_busy)  # a loaded host shares
        self.assertGreater(max(nets), 2e7, nets)  # ~40 MB within a slice or two

    def test_no_net_on_other_local_ranks(self):
        g = fresh({"GRIT_SUP_ADDR": self.rx.addr, "GRIT_SUP_SECRET": SECRET, "RANK": "1",
                   "LOCAL_RANK": "1"})
        g.init(period=0.1)
        beats = hb_parse(self.rx.lines(wait=0.6))
        self.assertTrue(any(isinstance(b.get("util"), (int, float)) for b in beats), beats)
        self.assertTrue(all(b.get("net_rx") == "nan" for b in beats), beats)

    def test_gpu_signal_from_nvml(self):
        # local rank 0 samples the node's GPUs through NVML (the stand-in library): the
        # mean busy share and the lowest SM clock ratio, following values changed while
        # it runs; other local ranks and a machine without NVML send no GPU fields
        fake = os.environ.get("GRIT_FAKE_NVML", "")
        if not fake or not os.path.exists(fake):
            self.skipTest("GRIT_FAKE_NVML (grit-fake-nvml) not built")
        d = tempfile.mkdtemp(prefix="grit-pygpu-")
        self.addCleanup(shutil.rmtree, d, True)
        util, clock = os.path.join(d, "util"), os.path.join(d, "clock")
        put = lambda p, t: open(p, "w").write(t)
        put(util, "90,30,5\n")
        put(clock, "1980,1485,100\n")
        env = {"GRIT_SUP_ADDR": self.rx.addr, "GRIT_SUP_SECRET": SECRET, "RANK": "0",
               "LOCAL_RANK": "0", "GRIT_NVML_LIB": fake, "FAKE_NVML_GPUS": "3",
               "FAKE_NVML_UTIL_FILE": util, "FAKE_NVML_CLOCK_FILE": clock,
               "CUDA_VISIBLE_DEVICES": "0,1"}  # GPU 2 is another job's
        g = fresh(env)
        g.init(period=0.1)
        beats = [b for b in hb_parse(self.rx.lines(wait=0.6)) if b.get("gpu_util") != "nan"]
        self.assertTrue(beats, "no beat with gpu_util=")
        self.assertAlmostEqual(beats[-1]["gpu_util"], 0.6, places=4)
        self.assertAlmostEqual(beats[-1]["sm_clock"], 0.75, places=4)
        put(util, "35,35\n")
        put(clock, "990,1980\n")
        time.sleep(0.3)
        last = hb_parse(self.rx.lines(wait=0.4))[-1]
        self.assertAlmostEqual(last["gpu_util"], 0.35, places=4)
        self.assertAlmostEqual(last["sm_clock"], 0.5, places=4)
        for other in ({"LOCAL_RANK": "1"}, {"GRIT_NVML_LIB": "/nonexistent/libnvidia-ml.so.1"}):
            g = fresh(dict(env, **other))
            g.init(period=0.1)
            beats = hb_parse(self.rx.lines(wait=0.5))
            self.assertTrue(beats, other)
            self.assertTrue(all(b["gpu_util"] == "nan" and b["sm_clock"] == "nan" for b in beats),
                            (other, beats))
        fresh({})

    def test_secret_never_shown(self):
        g = fresh({"GRIT_SUP_ADDR": self.rx.addr, "GRIT_SUP_SECRET": SECRET, "RANK": "0"})
        g.init()
        self.assertNotIn(SECRET, repr(g._client))
        self.assertNotIn(SECRET, str(vars(g._client).get("_to")))
        err = io.StringIO()
        with redirect_stderr(err):
            g = fresh({"GRIT_SUP_ADDR": "not-an-address", "GRIT_SUP_SECRET": SECRET})
            self.assertFalse(g.enabled())
            g = fresh({"GRIT_SUP_ADDR": self.rx.addr, "GRIT_SUP_SECRET": SECRET + " x"})
            self.assertFalse(g.enabled())
        self.assertIn("not-an-address", err.getvalue())
        self.assertNotIn(SECRET, err.getvalue())

    def test_bad_values_never_raise(self):
        g = fresh({"GRIT_SUP_ADDR": self.rx.addr, "GRIT_SUP_SECRET": SECRET, "RANK": "0"})
        g.beat("x", loss="not a number")
        g.beat(1, loss=None)  # no loss: sent as 0, not as the NaN a missing loss= reads as
        g.event("k", None)
        g.beat(2, loss=float("inf"), step_time=1e300 * 10)
        p = hb_parse(self.rx.lines(want=2))
        self.assertEqual([(b["step"], b["loss"]) for b in p], [(1, 0), (2, "inf")])


@unittest.skipUnless(os.access(HB_PARSE, os.X_OK), "GRIT_HB_PARSE (grit-hb-parse) not built")
class Faults(unittest.TestCase):
    """GRIT_FAULTS from grit launch --inject: kill and hang fire after the beat of their step
    on the named rank/node only, announced with fault_kill / fault_hang."""

    def _run(self, faults, rank, extra=None):
        rx = Receiver()
        code = "import grit_client as g\nfor s in range(1, 6):\n    g.beat(s, loss=1.0)\n"
        env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
        env.update(GRIT_SUP_ADDR=rx.addr, GRIT_SUP_SECRET=SECRET, GRIT_FAULTS=faults,
                   RANK=str(rank), GRIT_NODES="node0,node1",
                   PYTHONPATH=os.path.dirname(os.path.abspath(grit_client.__file__)))
        env.update(extra or {})
        p = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE)
        try:
            for _ in range(200):  # a stopped process does not exit: look at its state
                if p.poll() is not None:
                    break
                with open("/proc/%d/stat" % p.pid) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "T":
                        break
                time.sleep(0.05)
            state = p.poll()
        finally:
            if p.poll() is None:
                p.kill()  # SIGKILL works on a stopped process
            p.wait()
            err = p.stderr.read().decode()
            p.stderr.close()
        lines = rx.lines(wait=0.3)
        rx.close()
        return state, [m for m in hb_parse(lines) if m["step"] > 0], err

    def test_kill_on_the_named_node(self):
        state, msgs, err = self._run("kill:node=node1:step=3,hang:rank=0:step=2", rank=1)
        self.assertEqual(state, -signal.SIGKILL, err)
        self.assertEqual(max(m["step"] for m in msgs), 3)
        self.assertIn((1, "fault_kill", 3), [(m["event"], m["kind"], m["step"]) for m in msgs])
        self.assertIn("fault injection: kill after step 3", err)

    def test_node_kill_marks_the_node_down(self):
        # a node-wide kill leaves the node's down marker, which its health check then sees
        # (GRIT_FAULT_NODE_DOWN, as grit launch sets it); a rank-only kill does not
        with tempfile.TemporaryDirectory() as d:
            pattern = os.path.join(d, "{node}.down")
            state, _, err = self._run("kill:node=node1:step=3", rank=1,
                                      extra={"GRIT_FAULT_NODE_DOWN": pattern})
            self.assertEqual(state, -signal.SIGKILL, err)
            self.assertTrue(os.path.exists(os.path.join(d, "node1.down")), err)
            state, _, err = self._run("kill:rank=1:step=3", rank=1,
                                      extra={"GRIT_FAULT_NODE_DOWN": pattern.replace(d, d + "/r")})
            self.assertEqual(state, -signal.SIGKILL, err)
            self.assertFalse(os.path.exists(os.path.join(d, "r")), err)

    def test_hang_stops_the_rank(self):
        state, msgs, err = self._run("kill:node=node1:step=3,hang:rank=0:step=2", rank=0)
        self.assertIsNone(state, "the rank did not stop (state T)")
        self.assertIn((1, "fault_hang", 2), [(m["event"], m["kind"], m["step"]) for m in msgs])
        self.assertEqual(max(m["step"] for m in msgs), 2)

    def test_other_ranks_and_unsupported_kinds(self):
        state, msgs, err = self._run("kill:rank=1:step=2,slow:node=node0:factor=3", rank=0)
        self.assertEqual(state, 0, err)
        self.assertEqual(max(m["step"] for m in msgs), 5)
        self.assertIn("'slow:node=node0:factor=3' is not supported", err)


class SupervisorDown(unittest.TestCase):
    """Nothing listening, nothing routable, a receiver that never reads: a beat returns at
    once and never raises."""

    def _time_beats(self, addr, n=20000):
        g = fresh({"GRIT_SUP_ADDR": addr, "GRIT_SUP_SECRET": SECRET, "RANK": "0"})
        self.assertTrue(g.enabled())
        worst, t0 = 0.0, time.perf_counter()
        for i in range(n):
            t = time.perf_counter()
            g.beat(i, loss=1.0, step_time=0.01)
            worst = max(worst, time.perf_counter() - t)
        total = time.perf_counter() - t0
        g.close()
        return total, worst

    def assert_fast(self, what, total, worst, n=20000):
        print("%s: %d beats in %.3f s (%.1f us each, worst %.2f ms)" % (
            what, n, total, total / n * 1e6, worst * 1e3), file=sys.stderr)
        # generous for a loaded shared machine; a blocking send would take seconds
        self.assertLess(total / n, 200e-6, what)
        self.assertLess(worst, 0.5, what)

    def test_closed_port(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        addr = "127.0.0.1:%d" % s.getsockname()[1]
        s.close()  # nothing listens: the kernel answers ICMP port unreachable
        self.assert_fast("closed port", *self._time_beats(addr))

    def test_receiver_that_never_reads(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))  # bound, buffer fills, never drained
        try:
            self.assert_fast("full receiver", *self._time_beats("127.0.0.1:%d" % s.getsockname()[1]))
        finally:
            s.close()

    def test_unroutable(self):
        self.assert_fast("unroutable 192.0.2.1", *self._time_beats("192.0.2.1:9", 2000), 2000)


class Torchrun(unittest.TestCase):
    def test_one_torchrun_per_node_slot(self):
        env = {"GRIT_NODES": "node0,node2,node3", "GRIT_RANKS_PER_NODE": "2",
               "OMPI_COMM_WORLD_RANK": "4", "MASTER_PORT": "29777"}
        a = grit_client.torchrun_argv(["--master_addr", "10.0.0.1", "train.py", "--x"], env)
        self.assertEqual(a[0], "torchrun")
        self.assertEqual(a[a.index("--nnodes") + 1], "3")
        self.assertEqual(a[a.index("--node_rank") + 1], "2")
        self.assertEqual(a[a.index("--nproc_per_node") + 1], "2")
        self.assertEqual(a[a.index("--master_port") + 1], "29777")
        self.assertEqual(a.count("--master_addr"), 1)
        self.assertEqual(a[-3:], ["10.0.0.1", "train.py", "--x"][-3:])
        self.assertIsNone(grit_client.torchrun_argv([], dict(env, OMPI_COMM_WORLD_RANK="5")))
        with self.assertRaises(ValueError):
            grit_client.torchrun_argv([], {})


@unittest.skipUnless(torch is not None, "torch is missing")
class Checkpoints(unittest.TestCase):
    def setUp(self):
        fresh({})
        self.d = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.d, ignore_errors=True)

    def test_keep_last_k_and_newest(self):
        self.assertIsNone(grit_client.latest_checkpoint(os.path.join(self.d, "none")))
        for s in (5, 10, 15, 20):
            grit_client.save_checkpoint({"step": s, "w": torch.full((3,), float(s))}, self.d, s,
                                        keep=3)
        steps = [s for s, _ in grit_client.list_checkpoints(self.d)]
        self.assertEqual(steps, [10, 15, 20])
        s, p = grit_client.latest_checkpoint(self.d)
        self.assertEqual((s, torch.load(p)["step"]), (20, 20))
        self.assertEqual(sorted(os.listdir(self.d)),
                         ["step_00000010.pt", "step_00000015.pt", "step_00000020.pt"])

    def test_failed_save_leaves_the_previous_one(self):
        class Boom:
            def __reduce__(self):
                raise OSError(28, "No space left on device (simulated)")
        grit_client.save_checkpoint({"step": 5}, self.d, 5)
        with self.assertRaises(OSError):
            grit_client.save_checkpoint({"step": 10, "big": torch.zeros(1000), "x": Boom()},
                                        self.d, 10)
        self.assertEqual(grit_client.latest_checkpoint(self.d)[0], 5)
        self.assertEqual(os.listdir(self.d), ["step_00000005.pt"], "temp file left behind")

    def test_kill_during_save(self):
        """A writer SIGKILLed in the middle of torch.save: the newest complete checkpoint is
        still the previous one, and it loads; the next save clears the debris."""
        grit_client.save_checkpoint({"step": 5, "w": torch.ones(4)}, self.d, 5)
        code = textwrap.dedent("""
            import os, signal, sys, torch, grit_client
            class Slow:
                def __reduce__(self):
                    sys.stdout.write("writing\\n"); sys.stdout.flush()
                    os.kill(os.getpid(), signal.SIGKILL)
            grit_client.save_checkpoint({"step": 10, "w": torch.zeros(1 << 20), "s": Slow()},
                                        sys.argv[1], 10)
        """)
        r = subprocess.run([sys.executable, "-c", code, self.d], capture_output=True, text=True,
                           timeout=60, env=dict(os.environ, PYTHONPATH=os.path.dirname(
                               os.path.abspath(grit_client.__file__))))
        self.assertEqual(r.returncode, -signal.SIGKILL, r.stderr)
        self.assertIn("writing", r.stdout)
        debris = [n for n in os.listdir(self.d) if n.startswith(".step_")]
        self.assertEqual(len(debris), 1, os.listdir(self.d))  # the half-written temp file
        s, p = grit_client.latest_checkpoint(self.d)
        self.assertEqual((s, torch.load(p)["step"]), (5, 5))
        grit_client.save_checkpoint({"step": 10}, self.d, 10)
        self.assertEqual(sorted(os.listdir(self.d)), ["step_00000005.pt", "step_00000010.pt"])


    def test_no_commit_once_the_supervisor_is_gone(self):
        """The run lock as grit launch holds it (a real holder process, killed with SIGKILL):
        alive -> save commits; gone or superseded -> SupervisorGone, nothing committed, no
        temp file; a stale file of another run -> unknown, saves go on."""
        lock = os.path.join(self.d, "supervisor.lock")
        holder = textwrap.dedent("""
            import fcntl, os, sys, time
            fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.ftruncate(fd, 0)
            os.pwrite(fd, ("token=%s\\npid=%d\\nhost=h\\n" % (sys.argv[2], os.getpid())).encode(), 0)
            print("held", flush=True)
            time.sleep(60)
        """)
        ck = os.path.join(self.d, "ck")

        def hold(token):
            p = subprocess.Popen([sys.executable, "-c", holder, lock, token],
                                 stdout=subprocess.PIPE, text=True)
            self.assertEqual(p.stdout.readline().strip(), "held")
            return p

        fresh({"GRIT_SUP_LOCK": lock, "GRIT_SUP_LOCK_TOKEN": "a" * 32})
        self.assertEqual(grit_client.supervisor_state(), "unknown")  # no file yet
        p = hold("a" * 32)
        try:
            self.assertEqual(grit_client.supervisor_state(), "alive")
            grit_client.save_checkpoint({"step": 5}, ck, 5)
        finally:
            p.kill()
            p.wait()
            p.stdout.close()
        self.assertEqual(grit_client.supervisor_state(), "gone")
        with self.assertRaises(grit_client.SupervisorGone):
            grit_client.save_checkpoint({"step": 10}, ck, 10)
        self.assertEqual(os.listdir(ck), ["step_00000005.pt"])
        p = hold("b" * 32)
        try:
            self.assertEqual(grit_client.supervisor_state(), "superseded")
            with self.assertRaises(grit_client.SupervisorGone):
                grit_client.save_checkpoint({"step": 15}, ck, 15)
        finally:
            p.kill()
            p.wait()
            p.stdout.close()
        self.assertEqual(grit_client.supervisor_state(), "unknown")  # another run's stale file
        grit_client.save_checkpoint({"step": 20}, ck, 20)
        self.assertEqual(sorted(os.listdir(ck)), ["step_00000005.pt", "step_00000020.pt"])


@unittest.skipUnless(os.access(GRIT, os.X_OK) and shutil.which("mpirun"),
                     "GRIT_BIN (grit) or mpirun missing")
class RealSupervisor(unittest.TestCase):
    """The client under a real `grit launch`: its beats drive the supervisor (worker events,
    done), a forged line is rejected and logged, and the secret is in no log."""

    def test_grit_launch(self):
        d = tempfile.mkdtemp()
        try:
            job = os.path.join(d, "job.py")
            with open(job, "w") as f:
                f.write(textwrap.dedent("""
                    import os, socket, sys, time
                    import grit_client as grit
                    r = grit.rank()
                    open(sys.argv[1] + "/secret.%d" % r, "w").write(os.environ["GRIT_SUP_SECRET"])
                    for s in range(1, 6):
                        grit.beat(s, loss=1.0 / s, step_time=0.01)
                        time.sleep(0.05)
                    grit.event("hello from python", 5, "a detail")
                    if r == 1:  # a forged line: wrong secret
                        host, port = os.environ["GRIT_SUP_ADDR"].split(":")
                        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(
                            b"HB1 " + b"e" * 64 + b" rank=0 step=99\\n", (host, int(port)))
                    time.sleep(0.3)
                    grit.done()
                    print("job rank %d node %s done" % (r, grit.node()), flush=True)
                """))
            run = os.path.join(d, "run")
            env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.abspath(grit_client.__file__)))
            for k in ENV_KEYS:
                env.pop(k, None)
            r = subprocess.run([GRIT, "launch", "--nodes", "2", "--spares", "0", "--run", run,
                                "--hang-timeout", "20", "--straggler-factor", "0", "--",
                                sys.executable, job, d], capture_output=True, text=True,
                               timeout=90, env=env)
            out = r.stdout + r.stderr
            self.assertEqual(r.returncode, 0, out)
            events = [json.loads(l) for l in open(os.path.join(run, "events.jsonl"))]
            wev = [(e["kind"], e["rank"], e["node"], e["step"]) for e in events
                   if e["event"] == "worker_event"]
            for rank, node in ((0, "node0"), (1, "node1")):
                self.assertIn(("hello_from_python", rank, node, 5), wev)
                self.assertIn(("done", rank, node, 5), wev)
            self.assertTrue(any(e["event"] == "heartbeat_rejected" for e in events), events)
            self.assertFalse(any(e["event"] == "detected" for e in events), events)
            secret = open(os.path.join(d, "secret.0")).read()
            self.assertEqual(len(secret), 64)
            logs = out + open(os.path.join(run, "events.jsonl")).read()
            for n in os.listdir(os.path.join(run, "logs")):
                logs += open(os.path.join(run, "logs", n), errors="replace").read()
            self.assertIn("job rank 1 node node1 done", logs)
            self.assertNotIn(secret, logs, "the job secret was written to a log")
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.skipped:
        print("SKIP: %d test(s) could not run here: %s" % (
            len(result.skipped), "; ".join(sorted({why for _, why in result.skipped}))))
        sys.exit(77)
