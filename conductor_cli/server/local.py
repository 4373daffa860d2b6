"""Where the local server for one user and config lives: socket, pid file, start lock, log.

One server per user, config file, data directories and run environment. A server writes traces
and cache entries where its own environment says, so two data dirs never share one; and it
calls workers with the provider keys and endpoints of the environment it started in, so a CLI
whose keys, tokens, endpoints or proxies differ (a key exported since) gets a server of its
own (the old one idles out). Only a hash of those variables is kept, never a value. The files
sit in a 0700 runtime directory; the socket is 0600, so only its owner can run anything
through it. Standard library only: the CLI reads these files before deciding whether to load
anything.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import socket
import stat
import time
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from conductor_cli.config.env_refs import mcp_server_vars
from conductor_cli.disk import paths
from conductor_cli.errors import InputError

# The environment that decides where a server writes: part of which server a CLI may use.
_PLACE_VARS = ("CONDUCTOR_DATA_DIR", "CONDUCTOR_CACHE_DIR", "CONDUCTOR_MODELS_DIR")
# Variables that can change what a run does (a provider's key, an endpoint, a proxy): litellm
# and the providers' SDKs read them from the server's environment. Matched on the upper-cased
# name; the config's own api_key_env names count too, whatever they are called.
_RUN_ENV_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "API_BASE", "BASE_URL", "ENDPOINT")
_RUN_ENV_PREFIXES = (
    "OPENAI_", "ANTHROPIC_", "AZURE_", "AWS_", "GEMINI_", "GOOGLE_", "VERTEX", "MISTRAL_",
    "GROQ_", "COHERE_", "HF_", "HUGGINGFACE", "OLLAMA_", "LITELLM_", "TOGETHER", "DEEPSEEK",
    "XAI_", "OPENROUTER",
)  # fmt: skip
_RUN_ENV_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
# CONDUCTOR_SANDBOX=unconfined lets the python tool run (and join the embedded pool).
_RUN_ENV_OWN = ("CONDUCTOR_SANDBOX",)
# The CLI's own client settings: they pick a server, they change nothing a server does.
_CLIENT_VARS = ("CONDUCTOR_SERVER", "CONDUCTOR_SERVER_KEY", "CONDUCTOR_SERVER_AUTO")
_ENV_ID = re.compile(r"[0-9a-f]{8}")
# sockaddr_un holds 108 bytes on Linux, 104 on macOS, the final NUL included.
_MAX_SOCKET_PATH = 103


@dataclass(frozen=True)
class ServerFiles:
    directory: Path
    key: str
    config: str  # the config file this server serves (it may not exist: the defaults)

    @property
    def socket(self) -> Path:
        return self.directory / f"server-{self.key}.sock"

    @property
    def pid(self) -> Path:
        return self.directory / f"server-{self.key}.json"

    @property
    def lock(self) -> Path:
        return self.directory / f"server-{self.key}.lock"

    @property
    def log(self) -> Path:
        return self.directory / f"server-{self.key}.log"


def files_for(config_path: Path | None, env_id: str | None = None) -> ServerFiles:
    """The files of the server for this config, data place and run environment. KEY is
    `<config and place>-<environment>`; `env_id` (a background server's, as its CLI computed
    it) replaces this process's environment hash."""
    target = str((config_path or paths.config_file()).expanduser().absolute())
    if env_id is None:
        env_id = environment_id(Path(target))
    elif not _ENV_ID.fullmatch(env_id):
        raise InputError(f"--env-id {env_id!r}: not 8 hexadecimal digits")
    return ServerFiles(paths.runtime_dir(), f"{_config_key(target)}-{env_id}", target)


def _config_key(target: str) -> str:
    place = [os.environ.get(name, "") for name in _PLACE_VARS]
    return hashlib.sha256("\0".join([target, *place]).encode()).hexdigest()[:12]


def servers_of_config(config_path: Path | None) -> list[ServerFiles]:
    """The files of every server of this config and data place, whatever its environment
    (what `serve --stop` stops), sorted by key."""
    target = str((config_path or paths.config_file()).expanduser().absolute())
    directory = paths.runtime_dir()
    prefix = f"server-{_config_key(target)}-"
    keys: set[str] = set()
    with contextlib.suppress(OSError):
        for entry in directory.iterdir():
            name = entry.name
            if name.startswith(prefix) and name.endswith((".json", ".sock")):
                env_id = name[len(prefix) :].rsplit(".", 1)[0]
                if _ENV_ID.fullmatch(env_id):
                    keys.add(f"{prefix[len('server-') :]}{env_id}")
    return [ServerFiles(directory, key, target) for key in sorted(keys)]


def is_run_env(name: str) -> bool:
    """Whether a variable may change what a run does (see _RUN_ENV_PARTS)."""
    upper = name.upper()
    if upper in _CLIENT_VARS:
        return False
    return (
        any(part in upper for part in _RUN_ENV_PARTS)
        or upper.startswith(_RUN_ENV_PREFIXES)
        or upper in _RUN_ENV_PROXIES
        or upper in _RUN_ENV_OWN
    )


def config_key_vars(config_file: Path) -> set[str]:
    """The api_key_env names the config file gives (its conductor's and workers'), and the
    ${VAR}s its [mcp_servers] refer to, read with tomllib alone; none when the file is missing
    or broken (the CLI reports a broken one)."""
    try:
        with config_file.open("rb") as f:
            doc = tomllib.load(f)
    except (OSError, ValueError):
        return set()
    tables = [doc.get("conductor")]
    workers = doc.get("workers")
    if isinstance(workers, list):
        tables.extend(workers)
    return {
        t["api_key_env"]
        for t in tables
        if isinstance(t, dict) and isinstance(t.get("api_key_env"), str) and t["api_key_env"]
    } | mcp_server_vars(doc)


def environment_id(config_file: Path, environ: Mapping[str, str] | None = None) -> str:
    """A hash of the variables that can change a run: the config's api_key_env names (set or
    not) and every credential-, endpoint- or proxy-like name set (sha256; no value is kept)."""
    env = os.environ if environ is None else environ
    names = sorted({n for n in env if is_run_env(n)} | config_key_vars(config_file))
    digest = hashlib.sha256()
    for name in names:
        value = env.get(name)
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(b"-" if value is None else b"=" + value.encode("utf-8", "surrogateescape"))
        digest.update(b"\0")
    return digest.hexdigest()[:8]


def prepare(files: ServerFiles) -> ServerFiles:
    """Create the runtime dir 0700 (tightening one that is looser) and check the socket fits."""
    try:
        paths.private_dir(files.directory)
    except FileExistsError:
        raise InputError(
            f"{files.directory}: not a directory; point CONDUCTOR_RUNTIME_DIR at a directory"
        ) from None
    mode = stat.S_IMODE(files.directory.stat().st_mode)
    if mode & 0o077:
        os.chmod(files.directory, 0o700)
    if len(os.fsencode(files.socket)) > _MAX_SOCKET_PATH:
        raise InputError(
            f"{files.socket}: the path is too long for a local socket; point "
            "CONDUCTOR_RUNTIME_DIR at a short directory"
        )
    return files


@dataclass(frozen=True)
class ServerInfo:
    """What the pid file says about a running server."""

    pid: int
    socket: str
    url: str | None  # its TCP address, None when it listens on the socket only
    config: str
    started: float
    detached: bool

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def write_info(files: ServerFiles, info: ServerInfo) -> None:
    tmp = files.pid.with_name(files.pid.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(info.to_json())
    os.replace(tmp, files.pid)  # a reader sees the old file or the whole new one


def read_info(files: ServerFiles) -> ServerInfo | None:
    try:
        raw = json.loads(files.pid.read_text(encoding="utf-8"))
        return ServerInfo(
            int(raw["pid"]),
            str(raw["socket"]),
            raw.get("url"),
            str(raw["config"]),
            float(raw["started"]),
            bool(raw.get("detached", False)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process holds that pid: not ours, but alive
    return not _exited(pid)


def _exited(pid: int) -> bool:
    """An exited process not yet collected by its parent (a zombie) still answers signal 0. A
    detached server's parent is the init process, which in containers and micro-VMs collects
    seconds later or never: `serve --stop` waited 2 s a stop here for a server gone in 1."""
    try:
        line = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False  # no /proc (macOS): signal 0 is all there is
    fields = line.rpartition(")")[2].split()
    return bool(fields) and fields[0] in ("Z", "X")


def socket_answers(path: Path, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on the socket."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
    except OSError:
        return False
    finally:
        s.close()
    return True


def remove_if_ours(files: ServerFiles, pid: int) -> None:
    """A server leaving removes its files, unless a newer server has taken them over."""
    info = read_info(files)
    if info is not None and info.pid != pid:
        return
    _remove(files)


def clean_stale(files: ServerFiles) -> bool:
    """Remove a socket and pid file no live server answers on; True if anything was removed."""
    info = read_info(files)
    if info is not None and pid_alive(info.pid) and socket_answers(files.socket):
        return False
    return _remove(files)


def _remove(files: ServerFiles) -> bool:
    """Remove the socket and pid file; whether either was there."""
    removed = False
    for path in (files.socket, files.pid):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed = True
    return removed


@contextlib.contextmanager
def start_lock(files: ServerFiles, timeout: float = 120.0) -> Iterator[None]:
    """Held while a CLI checks for a server and starts one: two starting at once share one."""
    prepare(files)
    fd = os.open(files.lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                    raise InputError(
                        f"{files.lock}: another conductor is starting the server and has not "
                        "finished; try again, or run with --no-server"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing releases the lock
