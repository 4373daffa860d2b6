"""`conductor train ... --engine trl --processes N`: the same command in N processes under
accelerate's launcher (torchrun underneath: DDP over gloo on CPUs, NCCL on GPUs), with this
process as the one the user sees. It prints the main process's record and one copy of each
`conductor:` line the processes write; everything else they print (llama.cpp's, torch's,
accelerate's own traceback when a process fails) goes to a log file named on failure. The exit
code is the one the failing process chose (2 for a budget crossed by the processes together,
130 for Ctrl-C), and a failure ends in one line.

`accelerate launch -m conductor_cli train ...` works too (the documented way on a cluster,
with an accelerate config for DeepSpeed or FSDP); this is that command for one machine.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from conductor_cli.disk import paths
from conductor_cli.errors import EXIT_INTERRUPTED, EXIT_RUN_FAILED, ConductorError

# Set in each launched process: it trains its share and does not launch again; the value is
# the folder where a failing process leaves its exit code (status-RANK).
CHILD_ENV = "CONDUCTOR_TRAIN_LAUNCHED"


def is_launched() -> bool:
    return bool(os.environ.get(CHILD_ENV))


def note_exit(code: int) -> None:
    """In a launched process: leave the exit code it is about to end with for the launcher."""
    folder = os.environ.get(CHILD_ENV)
    if folder:
        rank = os.environ.get("RANK", "0")
        Path(folder, f"status-{rank}").write_text(str(code), encoding="utf-8")


def strip_processes(argv: Sequence[str]) -> list[str]:
    """The command line without --processes N (the launched processes train, not launch)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--processes":
            skip = True
            continue
        if arg.startswith("--processes="):
            continue
        out.append(arg)
    return out


def launch_processes(argv: Sequence[str], processes: int, device: str) -> int:
    """Run `conductor <argv>` in `processes` processes; the exit code to end with."""
    from conductor_cli.train.trl_engine import require_trl

    require_trl()
    logs = paths.private_dir(paths.cache_dir() / "train-logs")
    log = logs / f"launch-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    with tempfile.TemporaryDirectory(prefix="conductor-launch-") as status:
        env = dict(os.environ, **{CHILD_ENV: status})
        if device == "cpu" or device == "auto":
            env.setdefault("OMP_NUM_THREADS", "1")  # N processes share the cores
        command = [
            sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
            "--num_processes", str(processes), "--num_machines", "1",
            "--mixed_precision", "no", "--dynamo_backend", "no",
            "--main_process_port", str(_free_port()),
            "-m", "conductor_cli", *strip_processes(argv),
        ]  # fmt: skip
        with open(log, "w", encoding="utf-8") as out_log:
            proc = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,  # Ctrl-C reaches it through us, once
            )
            seen: set[str] = set()
            first_error: str | None = None
            try:
                assert proc.stderr is not None
                for line in proc.stderr:
                    out_log.write(line)
                    if not line.startswith("conductor: ") or line in seen:
                        continue
                    seen.add(line)
                    if line.startswith("conductor: error: "):
                        first_error = first_error or line  # printed once, at the end
                    elif "interrupted" not in line:  # the notes of processes stopped for
                        sys.stderr.write(line)  # another's failure would mislead
                        sys.stderr.flush()
                code = proc.wait()
            except KeyboardInterrupt:
                os.killpg(proc.pid, signal.SIGINT)
                _drain(proc, out_log, seen)
                return EXIT_INTERRUPTED
        codes = [int(p.read_text()) for p in Path(status).glob("status-*")]
    if code == 0:
        return 0
    failed = [c for c in codes if c != EXIT_INTERRUPTED]
    if first_error is not None:  # one process failed; the others were stopped for it
        sys.stderr.write(first_error)
        return max(failed) if failed else EXIT_RUN_FAILED
    # No Ctrl-C reached us (that ends above): a process died by a signal or a crash, and the
    # launcher stopped the others (their notes say "interrupted": not what happened).
    raise ConductorError(
        f"a process of the training's {processes} died without a conductor error (launcher "
        f"exit {code}) and the others were stopped; the checkpoints are kept, `conductor "
        f"train ... --resume` continues; the processes' output is in {log}"
    )


def _drain(proc: subprocess.Popen[str], out_log: object, seen: set[str]) -> None:
    """After Ctrl-C: the processes' notes (how to resume) once, until they are gone."""
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            out_log.write(line)  # type: ignore[attr-defined]
            if line.startswith("conductor: ") and line not in seen:
                seen.add(line)
                sys.stderr.write(line)
        proc.wait(timeout=120)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        os.killpg(proc.pid, signal.SIGKILL)


def _free_port() -> int:
    """A free TCP port on loopback for the processes' rendezvous (two trainings at once must
    not meet at accelerate's default 29500)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
