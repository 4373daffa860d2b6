"""Fault injection: stands in for repack_check's child process (CONDUCTOR_REPACK_PROBE).

It behaves as llama.cpp does on a CPU that lists AMX but faults on it: with repacking on it
kills itself with SIGSEGV; with repacking off it succeeds. FAKE_PROBE_CRASH=always makes it
die either way, FAKE_PROBE_CRASH=sigterm makes it die as if stopped. Each run appends its
mode to the file named by FAKE_PROBE_RUNS, so tests can count the runs.
"""

import os
import signal
import sys

model, mode, log = sys.argv[1:4]
with open(os.environ["FAKE_PROBE_RUNS"], "a", encoding="utf-8") as runs:
    runs.write(mode + "\n")
how = os.environ.get("FAKE_PROBE_CRASH", "repack")
if how == "sigterm":
    os.kill(os.getpid(), signal.SIGTERM)
if mode == "on" or how == "always":
    with open(log, "a", encoding="utf-8") as out:
        out.write("Fatal Python error: Segmentation fault (fake probe)\n")
    os.kill(os.getpid(), signal.SIGSEGV)
