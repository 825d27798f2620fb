#!/usr/bin/env python3
"""maxrss.py OUTFILE CMD... - runs CMD, writes its peak RSS in MiB to OUTFILE, exits with its code."""
import resource
import subprocess
import sys

rc = subprocess.run(sys.argv[2:]).returncode
with open(sys.argv[1], "w") as f:
    f.write(f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.1f}\n")
sys.exit(rc)
