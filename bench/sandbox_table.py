"""Issue 40's table: what a hostile program gets from conductor's sandbox on this machine.

Plants secrets where a program might look (a file only this user may read, a world-readable
file in /tmp, a conductor config), listens on a unix socket anyone may connect to, then runs
one program per row through `Sandbox` (the code path of the python tool and eval's scorer)
and prints a Markdown table. Run it as root and as an ordinary user:

    .venv/bin/python bench/sandbox_table.py
    sudo -u someone env PYTHONPATH=$PWD /usr/bin/python3 bench/sandbox_table.py

It cleans up what it planted. Nothing here is a simulation: real processes, real kernel.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
import threading
from pathlib import Path

from conductor_cli.sandbox import Limits, Sandbox

LIMITS = Limits(wall_s=20.0, cpu_s=20, memory_mb=512, file_mb=16, disk_mb=64, processes=64)

_ATTEMPT = """
import os
def attempt(act):
    try:
        got = act()
        print("GOT", repr(got)[:60])
    except OSError as e:
        print("refused:", type(e).__name__, e.strerror or e)
"""


def _rows(planted: dict[str, Path], unix: str, outside: Path) -> list[tuple[str, str]]:
    home = os.path.expanduser("~")
    read = "attempt(lambda: open({!r}).read())"
    child = (
        "import subprocess, sys\n"
        f'code = "import _socket; s = _socket.socket(_socket.AF_UNIX); s.connect({unix!r}); '
        "s.send(b'x')\"\n"
        "r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)\n"
        "print('child exit', r.returncode, r.stderr.strip().splitlines()[-1:])\n"
    )
    ctypes_unix = (
        "import ctypes, struct\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "fd = libc.socket(1, 1, 0)\n"
        "print('socket()', fd, 'errno', ctypes.get_errno())\n"
        "if fd >= 0:\n"
        f"    addr = struct.pack('H108s', 1, {unix!r}.encode())\n"
        "    print('connect()', libc.connect(fd, addr, len(addr)), ctypes.get_errno())\n"
    )
    writes = (
        "n = 0\n"
        "for t in [{!r}, '/dev/shm/conductor-escape', '/var/tmp/conductor-escape', 'link']:\n"
        "    try:\n"
        "        if t == 'link':\n"
        "            os.symlink({!r}, 'link')\n"
        "        open(t, 'w').write('x'); print('WROTE', t)\n"
        "    except OSError as e:\n"
        "        print('refused', t, type(e).__name__)\n"
    ).format(str(outside / "escaped"), str(outside / "via-link"))
    network = (
        "import _socket\n"
        "real = _socket.socket.__mro__[1]\n"
        "for kind in (_socket.SOCK_DGRAM, _socket.SOCK_STREAM):\n"
        "    try:\n"
        "        s = real(_socket.AF_INET, kind); s.settimeout(2)\n"
        "        s.connect(('127.0.0.1', 9)); s.send(b'x'); print('SENT', kind)\n"
        "    except OSError as e:\n"
        "        print('refused', kind, type(e).__name__)\n"
    )
    memory = (
        "import time\n"
        "kids = []\n"
        "for i in range(6):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        b = bytearray(400 * 2**20)\n"
        "        for j in range(0, len(b), 4096): b[j] = 1\n"
        "        time.sleep(2); os._exit(0)\n"
        "    kids.append(pid)\n"
        "print('children allocated 400 MB and exited 0:',\n"
        "      sum(os.waitpid(p, 0)[1] == 0 for p in kids), 'of 6')\n"
    )
    disk = (
        "n = 0\n"
        "try:\n"
        "    for i in range(40):\n"
        "        open(f'f{i}', 'wb').write(b'x' * 15 * 2**20); n += 1\n"
        "finally:\n"
        "    print(n * 15, 'MB written')\n"
    )
    return [
        ("read `/etc/shadow`", read.format("/etc/shadow")),
        ("read a file only its owner may read (0600)", read.format(str(planted["owner"]))),
        ("read a world-readable file elsewhere in /tmp", read.format(str(planted["world"]))),
        ("read a conductor config file", read.format(str(planted["config"]))),
        ("list the home folder", f"attempt(lambda: os.listdir({home!r}))"),
        ("connect to a unix socket anyone may use, from a child interpreter", child),
        ("the same through ctypes", ctypes_unix),
        ("write outside its folder, /dev/shm, /var/tmp, through a symlink", writes),
        ("UDP or TCP out", network),
        ("6 processes x 400 MB at once", memory),
        ("40 files x 15 MB in its folder", disk),
    ]


def main() -> None:
    sandbox = Sandbox(LIMITS)
    outside = Path(tempfile.mkdtemp(prefix="conductor-table-"))
    outside.chmod(0o777)
    owner_dir = Path(tempfile.mkdtemp(prefix="conductor-table-own-", dir=Path.home()))
    planted = {
        "owner": owner_dir / "id_ed25519",
        "world": outside / "notes.txt",
        "config": owner_dir / "config.toml",
    }
    for name, path in planted.items():
        path.write_text(f"SECRET-{secrets.token_hex(4)}")
        path.chmod(0o600 if name == "owner" else 0o644)
    unix = str(outside / "agent.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(unix)
    os.chmod(unix, 0o777)
    listener.listen(8)
    reached: list[bytes] = []

    def accept() -> None:
        listener.settimeout(1.0)
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            reached.append(conn.recv(16))

    threading.Thread(target=accept, daemon=True).start()
    user = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    print(f"As {user}. Sandbox: {sandbox.isolation.describe()}\n")
    print("| what the program did | result |\n| --- | --- |")
    try:
        for what, body in _rows(planted, unix, outside):
            before = len(reached)
            outcome = sandbox.run(_ATTEMPT + body)
            lines = outcome.output.strip().splitlines()
            said = " / ".join(  # tracebacks: their last line only
                line for line in lines if not line.startswith((" ", "Traceback"))
            )
            leaked = [p for p in planted.values() if p.read_text() in outcome.output]
            if len(reached) > before:
                said += " (THE LISTENER RECEIVED BYTES)"
            host_shm = Path("/dev/shm/conductor-escape")
            wrote = [*outside.glob("escaped*"), *outside.glob("via-link*")]
            if host_shm.exists():
                host_shm.unlink()
                wrote.append(host_shm)
            elif "WROTE /dev/shm" in said:
                said += " (its own /dev/shm: the machine's has nothing)"
            if leaked or wrote:
                said += " (LEAKED OR WROTE OUTSIDE)"
            print(f"| {what} | {outcome.status}: {said} |")
    finally:
        listener.close()
        shutil.rmtree(outside, ignore_errors=True)
        shutil.rmtree(owner_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
