"""Confine a process and all it starts: writes only beneath one folder and no TCP (Landlock),
and root dropped to another user while keeping the right to read.

This file is also run as source inside the sandboxed interpreter (`runner.py` embeds it in
the program's preamble, which runs under `python -I`), so it uses the standard library only
and defines names without side effects. Reads and execution are never restricted: only the
rights that change the filesystem are handled, and those are allowed beneath the folder.
See linux/landlock.h and Documentation/userspace-api/landlock.rst for the constants.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys

# New system calls share one number on every architecture.
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_KEEPCAPS = 8
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE = 47, 2
_CAP_DAC_READ_SEARCH = 2
_CAPABILITY_VERSION_3 = 0x20080522

# Filesystem rights that change something (bit 0 EXECUTE, 2 READ_FILE, 3 READ_DIR stay free).
_WRITE_FILE = 1 << 1
_WRITES_V1 = _WRITE_FILE | sum(1 << bit for bit in range(4, 13))  # remove, make dir/file/...
_REFER = 1 << 13  # ABI 2: link or rename across folders
_TRUNCATE = 1 << 14  # ABI 3
_IOCTL_DEV = 1 << 15  # ABI 5: ioctl on devices opened after this
# The only rights a rule on a file (rather than a folder) may hold.
_FILE_RIGHTS = _WRITE_FILE | _TRUNCATE | _IOCTL_DEV
_NET_TCP = 0b11  # ABI 4: BIND_TCP | CONNECT_TCP, handled with no rule: no TCP at all
_SCOPES = 0b11  # ABI 6: abstract unix sockets and signals of processes outside the domain


def _check(result: int) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _syscall(*args: int | bytes | None) -> int:
    if sys.platform != "linux":  # the numbers mean something else elsewhere
        raise OSError(errno.ENOSYS, "Landlock is Linux only")
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    return _check(libc.syscall(*(ctypes.c_long(a) if isinstance(a, int) else a for a in args)))


def abi() -> int:
    """The kernel's Landlock ABI version; OSError ENOSYS (none) or EOPNOTSUPP (disabled)."""
    return _syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)


def restrict_writes(folder: str) -> int:
    """Confine this process and its future children; returns the ABI version in force.

    Applies to the calling thread only, so call it while the process has a single thread.
    """
    version = abi()
    writes = _WRITES_V1
    writes |= (_REFER if version >= 2 else 0) | (_TRUNCATE if version >= 3 else 0)
    writes |= _IOCTL_DEV if version >= 5 else 0
    net = _NET_TCP if version >= 4 else 0
    scopes = _SCOPES if version >= 6 else 0
    # The struct grew with the ABI; an older kernel refuses a size it does not know.
    size = 8 if version < 4 else 16 if version < 6 else 24
    attr = struct.pack("=QQQ", writes, net, scopes)[:size]
    ruleset = _syscall(_CREATE_RULESET, attr, size, 0)
    try:
        _allow(ruleset, folder, writes)
        _allow(ruleset, os.devnull, writes & _FILE_RIGHTS)  # `> /dev/null` is common
        # Required for an unprivileged restrict_self; also stops setuid programs gaining root.
        _check(_libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        _syscall(_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return version


def _allow(ruleset: int, path: str, rights: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        # struct landlock_path_beneath_attr is packed: u64 allowed_access, s32 parent_fd.
        _syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, struct.pack("=Qi", rights, fd), 0)
    finally:
        os.close(fd)


def drop_root(uid: int, gid: int) -> None:
    """Become uid/gid but keep reading as root, for this process and what it starts.

    For root whose interpreter the other user may not read (one under /root): a real uid
    other than 0 makes RLIMIT_NPROC apply and file permissions refuse writes, while
    CAP_DAC_READ_SEARCH, raised as an ambient capability, survives exec so that the
    interpreter and its standard library still load.
    """
    libc = _libc()
    _check(libc.prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0))  # keep capabilities across setuid
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    keep = 1 << _CAP_DAC_READ_SEARCH
    header = struct.pack("=Ii", _CAPABILITY_VERSION_3, 0)
    # Two {effective, permitted, inheritable} sets: capabilities 0-31, then 32-63.
    _check(libc.capset(header, struct.pack("=6I", keep, keep, keep, 0, 0, 0)))
    _check(libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, _CAP_DAC_READ_SEARCH, 0, 0))
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))  # no setuid program brings root back
