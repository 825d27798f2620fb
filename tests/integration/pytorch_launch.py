#!/usr/bin/env python3
"""pytorch_launch.py GRIT - a PyTorch DDP job (examples/pytorch/train_ddp.py, one torchrun per
node slot through `python3 -m grit_client torchrun`) under `grit launch --nodes 2 --spares 1`
survives, in one supervised run:

  attempt 0  an injected dead node (GRIT_FAULTS kill:node=node1, fired by grit_client after a
             step): detected as a rank that died, node1 cordoned, the spare node2 takes its slot;
  attempt 1  rank 1 killed from outside (kill -9 by PID, read from the job's log);
  attempt 2  rank 1 frozen from outside (SIGSTOP by PID): detected as a hang from missing step
             progress in the heartbeats while the job's output keeps growing (the example's
             --chatter thread on rank 0 prints every 0.25 s), the stopped rank found in state T;
  attempt 3  runs to the end.

Every attempt after a failure resumes from the newest checkpoint written before it, and the
final model and optimiser state equal, bitwise (torch.equal on every tensor), those of a
fault-free run under the same supervisor. Exit 77 (skipped, said loudly) without torch,
torchrun's modules or mpirun. Every process this test starts is ended by PID.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HANG_TIMEOUT = 10  # s; above the ~6 s a finished torchrun job takes to exit on a loaded host
STEPS, EVERY = 50, 5
KILL_AFTER, STOP_AFTER = 20, 34  # steps seen in attempts 1 and 2 before the outside fault

try:
    import torch
    import torch.distributed.run  # noqa: F401  (torchrun's agent)
except ImportError as e:
    print("SKIP: PyTorch is missing (%s): apt-get install python3-torch" % e)
    sys.exit(77)
if not shutil.which("mpirun"):
    print("SKIP: mpirun not found (grit launch's local backend needs it)")
    sys.exit(77)

grit = os.path.abspath(sys.argv[1])
tmp = tempfile.mkdtemp(prefix="grit-pytorch-")
procs = []  # grit launch processes: each ends its job (and PDEATHSIG takes the job if killed)
stopped = []  # PIDs this test SIGSTOPped: continued at cleanup if still there
fails = []


def fail(msg):
    print("FAIL: " + msg, flush=True)
    fails.append(msg)


def descendants(pid):
    """PIDs below pid (from /proc), deepest first."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out[::-1]


def cleanup():
    for p in procs:
        if p.poll() is None:
            for pid in descendants(p.pid) + [p.pid]:
                try:
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait()
    for pid in stopped:  # still ours only if it is still the example (PIDs are reused)
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if b"train_ddp.py" in f.read():
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
    shutil.rmtree(tmp, ignore_errors=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(name, inject=None):
    run = os.path.join(tmp, name)
    cmd = [grit, "launch", "--nodes", "2", "--spares", "1", "--run", run,
           "--hang-timeout", str(HANG_TIMEOUT), "--backoff", "0.1", "--straggler-factor", "0",
           # the faults hit rank 1 wherever it runs: the second and third land on the spare
           # that replaced node1, which is not that node's fault (strikes would quarantine it)
           "--strikes", "0"]
    if inject:
        cmd += ["--inject", inject]
    cmd += ["--", sys.executable, "-m", "grit_client", "torchrun",
            "--master_port", str(free_port()),
            os.path.join(ROOT, "examples/pytorch/train_ddp.py"), "--steps", str(STEPS),
            "--ckpt-every", str(EVERY), "--ckpt-dir", os.path.join(run, "ckpt"),
            "--out", os.path.join(run, "final.pt"), "--step-sleep", "0.05", "--chatter", "0.25"]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = open(run + ".out", "w")
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    procs.append(p)
    return run, p


def log(run, attempt):
    try:
        with open(os.path.join(run, "logs", "attempt_%02d.log" % attempt), errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def wait_for(pred, what, timeout, p):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        if p.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


def last_step(text):
    m = re.findall(r"train_ddp: step (\d+) ", text)
    return int(m[-1]) if m else 0


def rank_pid(text, rank):
    m = re.search(r"train_ddp: rank %d/\d+ pid (\d+)" % rank, text)
    return int(m.group(1)) if m else None


def events(run):
    with open(os.path.join(run, "events.jsonl")) as f:
        return [json.loads(l) for l in f]


def final_state(run):
    return torch.load(os.path.join(run, "final.pt"), map_location="cpu")


def same(a, b, path="state"):
    """Bitwise equality of two nested checkpoint states; the first difference, or None."""
    if isinstance(a, torch.Tensor):
        return None if isinstance(b, torch.Tensor) and a.dtype == b.dtype and \
            a.shape == b.shape and torch.equal(a, b) else path
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return path + " (keys)"
        for k in a:
            d = same(a[k], b[k], "%s.%s" % (path, k))
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)):
        if not isinstance(b, (list, tuple)) or len(a) != len(b):
            return path + " (length)"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, "%s[%d]" % (path, i))
            if d:
                return d
        return None
    return None if a == b else path


def main():
    t0 = time.time()
    # --- the fault-free run ---------------------------------------------------------------
    ref, p = launch("ref")
    rc = p.wait(timeout=240)
    ev = events(ref)
    if rc != 0:
        fail("fault-free run: grit launch exited %d:\n%s" % (rc, open(ref + ".out").read()[-3000:]))
        return
    if any(e["event"] == "detected" for e in ev):
        fail("fault-free run: a failure was detected: %s" %
             [e.get("detail") for e in ev if e["event"] == "detected"])
        # what the job was doing: its output's end and the ranks' state and kernel stacks
        stacks = os.path.join(ref, "logs", "stacks_attempt_00.txt")
        print("--- attempt_00.log (last 40 lines)\n" + "\n".join(log(ref, 0).splitlines()[-40:]))
        if os.path.exists(stacks):
            print("--- stacks_attempt_00.txt\n" + open(stacks, errors="replace").read()[-4000:])
    print("ok   fault-free run: %d steps in %.1f s" % (STEPS, time.time() - t0), flush=True)

    # --- one run, three faults --------------------------------------------------------------
    t1 = time.time()
    run, p = launch("faults", inject="kill:node=node1:step=8")
    # attempt 1: kill -9 rank 1 from outside once rank 0 reports step KILL_AFTER
    wait_for(lambda: last_step(log(run, 1)) >= KILL_AFTER and rank_pid(log(run, 1), 1),
             "attempt 1 to reach step %d" % KILL_AFTER, 180, p)
    pid1 = rank_pid(log(run, 1), 1)
    os.kill(pid1, signal.SIGKILL)
    kill_step = last_step(log(run, 1))
    print("     attempt 1: kill -9 rank 1 (pid %d) after step %d" % (pid1, kill_step), flush=True)
    # attempt 2: SIGSTOP rank 1 once rank 0 reports step STOP_AFTER
    wait_for(lambda: last_step(log(run, 2)) >= STOP_AFTER and rank_pid(log(run, 2), 1),
             "attempt 2 to reach step %d" % STOP_AFTER, 180, p)
    pid2 = rank_pid(log(run, 2), 1)
    os.kill(pid2, signal.SIGSTOP)
    stopped.append(pid2)
    stop_ts = time.time()
    stop_step = last_step(log(run, 2))
    size_at_stop = len(log(run, 2))
    print("     attempt 2: SIGSTOP rank 1 (pid %d) after step %d" % (pid2, stop_step), flush=True)
    rc = p.wait(timeout=300)
    out = open(run + ".out").read()
    if rc != 0:
        fail("faulted run: grit launch exited %d:\n%s" % (rc, out[-3000:]))
        return
    ev = events(run)
    det = [e for e in ev if e["event"] == "detected"]
    kinds = [e["kind"] for e in det]
    if kinds != ["exit", "exit", "hang"]:
        fail("detections %s, expected exit (dead node), exit (killed rank), hang: %s" %
             (kinds, [e.get("detail") for e in det]))
    cordons = [e["node"] for e in ev if e["event"] == "cordon"]
    if cordons != ["node1"]:
        fail("cordoned %s, expected only node1 (the injected dead node)" % cordons)
    launches = [e for e in ev if e["event"] == "launch"]
    if len(launches) != 4 or launches[1]["nodes"] != "node0,node2":
        fail("launches %s, expected 4 with the spare node2 from attempt 1 on" %
             [l["nodes"] for l in launches])
    # each resume loads the newest checkpoint written before its failure
    saved, loaded, attempt = [], {}, -1
    for e in ev:
        if e["event"] == "launch":
            attempt = e["attempt"]
            loaded[attempt] = set()
        elif e["event"] == "worker_event" and e["kind"] == "ckpt_saved":
            saved.append((attempt, e["step"]))
        elif e["event"] == "worker_event" and e["kind"] == "ckpt_loaded":
            loaded[attempt].add(e["step"])
    for a in (1, 2, 3):
        newest = max([s for at, s in saved if at < a] or [0])
        if loaded.get(a) != {newest}:
            fail("attempt %d resumed from step(s) %s, expected the newest checkpoint, step %d" %
                 (a, sorted(loaded.get(a, [])), newest))
    if len([e for e in ev if e["event"] == "recovered"]) != 3:
        fail("expected 3 recovered events")
    # the hang: found from step progress, while the output kept growing
    hang = [e for e in det if e["kind"] == "hang"]
    if hang:
        h = hang[0]
        latency = h["ts"] - stop_ts
        text = log(run, 2)
        grew = len(text) - size_at_stop
        chatter_after = text[size_at_stop:].count("train_ddp: rank 0 alive")
        if "no progress" not in h["detail"] or h["step"] < stop_step:
            fail("hang detail %r at step %s" % (h["detail"], h["step"]))
        if not HANG_TIMEOUT - 0.5 <= latency <= HANG_TIMEOUT + 5:
            fail("hang detected %.1f s after the SIGSTOP (timeout %d s)" % (latency, HANG_TIMEOUT))
        if chatter_after < 4 * (HANG_TIMEOUT - 2):
            fail("the job's output did not keep growing during the hang (%d chatter lines, %d "
                 "bytes): the detection could have been output silence" % (chatter_after, grew))
        stacks = os.path.join(run, "logs", "stacks_attempt_02.txt")
        st = open(stacks).read() if os.path.exists(stacks) else ""
        if not re.search(r"rank 1 \(pid %d, node node2\): state T" % pid2, st):
            fail("the stopped rank (pid %d) is not in %s as state T:\n%s" % (pid2, stacks, st))
        print("ok   hang: detected %.1f s after the SIGSTOP (timeout %d s) from heartbeats, while "
              "the log grew by %d lines of output; %s" % (latency, HANG_TIMEOUT, chatter_after,
                                                          h["detail"]), flush=True)
    # bitwise equal to the fault-free run
    a, b = final_state(ref), final_state(run)
    d = same(a, b)
    n = sum(1 for _ in a["model"].values()) + sum(
        1 for s in a["optim"]["state"].values() for v in s.values() if isinstance(v, torch.Tensor))
    if d:
        fail("final state differs from the fault-free run at %s" % d)
    else:
        print("ok   final model and optimiser state bitwise equal to the fault-free run (%d "
              "tensors, step %d)" % (n, b["step"]), flush=True)
    print("ok   faulted run: %s; %.1f s" % (", ".join(
        "%s on %s at step %s" % (e["kind"], e["node"], e["step"]) for e in det),
        time.time() - t1), flush=True)


try:
    main()
except Exception as e:  # a timeout or a missing file: report it with the logs' tails
    fail("%s: %s" % (type(e).__name__, e))
    for f in sorted(os.listdir(tmp)) if os.path.isdir(tmp) else []:
        if f.endswith(".out"):
            print("--- %s\n%s" % (f, open(os.path.join(tmp, f)).read()[-2000:]))
finally:
    cleanup()
sys.exit(1 if fails else 0)
