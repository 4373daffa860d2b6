"""Shared bench plumbing: isolated directories, timed subprocesses, medians, result rows.

Every bench compares a figure with a reference measured in the same run, because these
machines are noisy; the ratio is what is reported and checked against the issue's target.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CONDUCTOR = str(BIN / "conductor")


@dataclass(frozen=True)
class Timed:
    seconds: float
    max_rss_kb: int
    returncode: int
    stdout: str
    stderr: str


# SmolLM2-135M alone, planned untrained: the embedded default until issue 41, which the benches
# measured before it (their README and docs numbers) keep as their pool. Config() of then, so
# their response caches and trained heads still match it.
SMOLLM2_ALONE = (
    '[[workers]]\nname = "local"\nmodel = "gguf:smollm2-135m-instruct"\n'
    'description = "SmolLM2 135M, a tiny local model: instant and free, but weak; short answers"\n'
)


def isolated_env(root: Path, config: str | None = SMOLLM2_ALONE) -> dict[str, str]:
    """Fresh config, cache and data dirs under `root`; the user's models dir (no re-download).
    `config` None: no config file, the embedded default (the trained team since issue 41)."""
    from conductor_cli.disk import paths

    env = dict(os.environ)
    env["CONDUCTOR_MODELS_DIR"] = str(paths.models_dir())
    env["CONDUCTOR_CACHE_DIR"] = str(root / "cache")
    env["CONDUCTOR_DATA_DIR"] = str(root / "data")
    env.pop("CONDUCTOR_CONFIG", None)
    env["XDG_CONFIG_HOME"] = str(root / "xdg-config")  # no config file there
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's install has .pyc files
    # In-process, as these benches measure, and no background server left behind (server.auto
    # is on by default); bench/serve_speed.py's default-config rows unset it.
    env["CONDUCTOR_SERVER_AUTO"] = "0"
    if config is not None:
        env["CONDUCTOR_CONFIG"] = str(root / "config.toml")
        (root / "config.toml").write_text(config, encoding="utf-8")
    return env


def team_config(conductor: str) -> str:
    """The embedded default team word for word (each worker's description too: a head reads
    them), planned by the conductor `conductor` (a catalog model or a trained conductor)."""
    from conductor_cli.config.settings import TEAM, WorkerConfig

    def worker(w: WorkerConfig) -> str:
        said = f'description = "{w.description}"\n' if w.description else ""
        return f'[[workers]]\nname = "{w.name}"\nmodel = "{w.model}"\n{said}'

    return f'[conductor]\nmodel = "{conductor}"\n\n' + "\n".join(map(worker, TEAM.workers))


def temp_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="conductor-bench-"))


def timed(cmd: Sequence[str], env: dict[str, str] | None = None) -> Timed:
    """Run `cmd` with no stdin; its wall time and its own peak RSS (reaped with os.wait4)."""
    with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd), env=env, stdin=subprocess.DEVNULL, stdout=out_f, stderr=err_f
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        return Timed(seconds, int(usage.ru_maxrss), proc.returncode, out_f.read(), err_f.read())


def must(result: Timed, what: str) -> Timed:
    if result.returncode != 0:
        sys.exit(f"{what} failed ({result.returncode}): {result.stderr.strip()[-800:]}")
    return result


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def compile_sources() -> None:
    """Byte-compile the package once, as a wheel install does, before timing start-up."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(REPO / "conductor_cli")], check=True
    )


def report(rows: list[dict[str, object]], as_json: bool) -> None:
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    sys.stdout.flush()
    for r in rows:
        verdict = "meets" if r["ok"] else "MISSES"
        print(f"{r['what']}: {r['figure']} | reference: {r['reference']} | {verdict} {r['target']}")


# --- proofs of learning (prove_learning.py, prove_embedded.py) ---

Z_95 = 1.959964


def conductor(args: list[str], env: dict[str, str], what: str) -> subprocess.CompletedProcess:
    start = time.monotonic()
    proc = subprocess.run(
        [CONDUCTOR, *args], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    if proc.returncode != 0:
        sys.exit(f"{what} failed ({proc.returncode}): {proc.stderr.strip()[-1500:]}")
    print(f"{what}: {time.monotonic() - start:.0f} s", file=sys.stderr)
    return proc


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (0.0, 0.0)
    p = k / n
    denom = 1 + Z_95**2 / n
    centre = (p + Z_95**2 / (2 * n)) / denom
    half = Z_95 * math.sqrt(p * (1 - p) / n + Z_95**2 / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def accuracy(ok: list[bool], kinds: list[str]) -> dict[str, object]:
    """Accuracy with its Wilson 95 % interval, and per kind (`kinds[i]` is question i's)."""
    low, high = wilson(sum(ok), len(ok))
    by_kind: dict[str, list[bool]] = {}
    for kind, v in zip(kinds, ok, strict=True):
        by_kind.setdefault(kind, []).append(v)
    return {
        "accuracy": round(sum(ok) / len(ok), 4),
        "low": round(low, 4),
        "high": round(high, 4),
        "by_kind": {k: round(sum(v) / len(v), 3) for k, v in sorted(by_kind.items())},
    }


def paired(a: list[bool], b: list[bool]) -> dict[str, float]:
    """Mean of a - b over the same questions, with the normal 95 % interval of paired
    differences (each difference is -1, 0 or 1)."""
    d = [int(x) - int(y) for x, y in zip(a, b, strict=True)]
    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
    half = Z_95 * math.sqrt(var / n)
    low, high = round(mean - half, 4), round(mean + half, 4)
    return {"difference": round(mean, 4), "low": low, "high": high}


def read_jsonl(path: Path) -> list[dict]:
    """The rows of a JSON-lines file (none if it is absent); a line torn by Ctrl-C is skipped,
    so what it held is measured again."""
    rows: list[dict] = []
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else ():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def stored_results(data_dir: Path) -> list[dict]:
    paths = sorted((data_dir / "evals").glob("*.jsonl"))
    return [row for path in paths for row in read_jsonl(path)]


def split_by_kind(
    rows: list[dict], kinds: Sequence[str], kind_of: Callable[[dict], str], rng: random.Random
) -> tuple[list[dict], list[dict]]:
    """Half of each kind trains, the other half is held out (a seeded shuffle per kind)."""
    train, held = [], []
    for kind in kinds:
        of_kind = [r for r in rows if kind_of(r) == kind]
        rng.shuffle(of_kind)
        half = len(of_kind) // 2
        train += of_kind[:half]
        held += of_kind[half:]
    return train, held


def drawn_outside(problems: Sequence, n: int, seed: int, left_out: int) -> list:
    """`n` of `problems` drawn with `seed` among those that `--sample left_out --seed 0` did not
    draw: the items that chose something, or that the README reports, stay out."""
    from conductor_cli.evals import select

    kept = {p.id for p in select(problems, sample=left_out, seed=0)}
    drawn = select(problems, sample=n + left_out, seed=seed)
    return [p for p in drawn if p.id not in kept][:n]


def write_rows(rows: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def train_heads(
    trained: dict[str, str],
    train_file: Path,
    count: int,
    env: dict[str, str],
    root: Path,
    seed: int,
    repeats: int,
) -> dict[str, float]:
    """`conductor train mixed` once per name (its --tasks the value), skipping names already
    trained in this root; minutes per training kept in root/timings.json across resumes."""
    data_dir = Path(env["CONDUCTOR_DATA_DIR"])
    timings_file = root / "timings.json"
    timings = json.loads(timings_file.read_text()) if timings_file.exists() else {}
    for name, tasks in trained.items():
        if (data_dir / "conductors" / name / "record.json").exists():
            continue
        start = time.monotonic()
        conductor(
            ["train", "mixed", str(train_file), "--holdout", "0", "--seed", str(seed),
             "--repeats", str(repeats), "--out", name, "--tasks", tasks,
             "--concurrency", "1"],
            env,
            f"train {name} on {count}",
        )  # fmt: skip
        timings[f"train_minutes_{tasks}"] = round((time.monotonic() - start) / 60, 1)
        timings_file.write_text(json.dumps(timings))
    return timings
