#!/usr/bin/env python3
"""toy_trainer.py STATE STEPS - a non-grit program for grit launch's tests.

Counts steps (a running sum stands in for the weights), checkpoints STATE atomically after
every step, resumes from it, prints one line per step and sends no heartbeats: the
supervisor must cover it with exit and output-inactivity detection. GRIT_FAULTS
"kill:step=K" (the launch's fault, first attempt only) makes it SIGKILL itself after step K.
"""
import os
import signal
import sys
import time

state, steps = sys.argv[1], int(sys.argv[2])
step, acc = 0, 0
if os.path.exists(state):
    step, acc = map(int, open(state).read().split())
kill_at = -1
for f in os.environ.get("GRIT_FAULTS", "").split(","):
    if f.startswith("kill:") and "step=" in f:
        kill_at = int(f.split("step=")[1].split(":")[0])
while step < steps:
    step += 1
    acc = (acc * 31 + step) % 1000003
    tmp = state + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(f"{step} {acc}\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, state)
    print(f"step {step} acc {acc}", flush=True)
    time.sleep(0.05)
    if step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
print(f"done {acc}", flush=True)
