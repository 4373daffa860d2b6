"""Where the local server for one user and config lives: socket, pid file, start lock, log.

One server per user, config file and data directories (a server writes traces and cache
entries where its own environment says, so two data dirs never share one). The files sit in a
0700 runtime directory; the socket is 0600, so only its owner can run anything through it.
Standard library only: the CLI reads these files before deciding whether to load anything.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import socket
import stat
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from conductor_cli.errors import InputError
from conductor_cli.storage import paths

# The environment that decides where a server writes: part of which server a CLI may use.
_PLACE_VARS = ("CONDUCTOR_DATA_DIR", "CONDUCTOR_CACHE_DIR", "CONDUCTOR_MODELS_DIR")
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


def files_for(config_path: Path | None) -> ServerFiles:
    target = str((config_path or paths.config_file()).expanduser().absolute())
    place = [os.environ.get(name, "") for name in _PLACE_VARS]
    key = hashlib.sha256("\0".join([target, *place]).encode()).hexdigest()[:12]
    return ServerFiles(paths.runtime_dir(), key, target)


def prepare(files: ServerFiles) -> ServerFiles:
    """Create the runtime dir 0700 (tightening one that is looser) and check the socket fits."""
    paths.private_dir(files.directory)
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
    return True


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
