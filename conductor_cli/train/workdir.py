"""A training's work dir (`DATA_DIR/conductors/.NAME.training/`): made fresh or resumed, the
trained files staged in it and moved into place at the end, and the one line for a full disk."""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from conductor_cli.disk import paths
from conductor_cli.disk.atomic import atomic_write
from conductor_cli.errors import ConductorError, InputError
from conductor_cli.policy import registry
from conductor_cli.train.shared import TrainOptions

SPLIT = "split.json"


def work_dir(name: str) -> Path:
    return registry.conductors_dir() / f".{name}.training"


def prepare(work: Path, options: TrainOptions, meta: dict[str, Any]) -> None:
    """A fresh or resumed work dir whose split matches this run's."""
    split_file = work / SPLIT
    if work.exists() and options.resume:
        try:
            old = json.loads(split_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = None
        if old != meta:
            raise InputError(
                f"--resume: the interrupted training in {work} used another dataset, split or "
                "pool; run without --resume to start over"
            )
        return
    if work.exists():
        shutil.rmtree(work)
    paths.private_dir(work)
    write_json(split_file, meta)  # whole or absent: a full disk leaves no torn split


def replace_dir(new: Path, target: Path) -> None:
    """`new` takes `target`'s place; the old one is removed only once the new one is in place."""
    old = target.with_name(f".{target.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if target.exists():
        os.replace(target, old)
    os.replace(new, target)
    if old.exists():
        shutil.rmtree(old)


def stage(work: Path) -> Path:
    """An empty `work/final`, where a method writes what `install` moves into place."""
    staged = work / "final"
    if staged.exists():
        shutil.rmtree(staged)
    paths.private_dir(staged)
    return staged


def install(work: Path, final: Path, force: bool) -> None:
    """Move the trained files into place; an older conductor of that name goes only now."""
    if final.exists() and not force:
        raise InputError(f"{final} exists; add --force to replace it")
    replace_dir(work / "final", final)


def target(options: TrainOptions) -> tuple[str, Path]:
    """(the checked name, its directory), refusing to overwrite without --force or --resume."""
    name = registry.check_name(options.name)
    final = registry.conductors_dir() / name
    if final.exists() and not (options.force or options.resume):
        raise InputError(f"a conductor named {name!r} exists ({final}); add --force to replace it")
    return name, final


def disk_full(error: BaseException, name: str, work: Path) -> ConductorError | None:
    """The one line for a full disk (or quota) met while training `name`, else None: what
    could not be written, that the checkpoint in `work` is kept, and how to continue."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            where = cause.filename or f"{paths.data_dir()} or {paths.cache_dir()}"
            reason = cause.strerror or os.strerror(cause.errno)
            break
        if isinstance(cause, sqlite3.OperationalError) and (
            getattr(cause, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
            or "disk is full" in str(cause)
        ):
            where, reason = f"the response cache in {paths.cache_dir()}", str(cause)
            break
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    else:
        return None
    return ConductorError(
        f"disk full: cannot write {where} ({reason}); the checkpoint in {work} keeps the work "
        f"done before: free space, then `conductor train ... --out {name} --resume` continues"
    )


def write_json(path: Path, data: dict[str, Any]) -> None:
    # A reader sees the old record or the new one, never half of one.
    atomic_write(path, json.dumps(data, indent=2).encode("utf-8"))
