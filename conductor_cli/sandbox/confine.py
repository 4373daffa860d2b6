"""Confine a process and all it starts: what it may read, write, execute, connect to, own.

This file is also run as source inside the sandboxed interpreter (`runner.py` embeds it in
the program's preamble, which runs under `python -I`), so it uses the standard library only
and defines names without side effects. The preamble calls, in this order:

- `join_cgroup`: the memory bound for the program and everything it starts;
- `mount_view` (in the program's own mount namespace): a size-bounded tmpfs as its folder and
  as /dev/shm, and, for root whose interpreter lives where `nobody` may not enter (a pyenv
  under /root), that interpreter shown at its own path with the rest of the folder hidden;
- `drop_privileges`: `nobody` with no capability (nothing that reads past permissions);
- `restrict`: Landlock: reads and execution only beneath an allow-list, writes only beneath
  its folder, no TCP, no abstract sockets or signals outside;
- `block_sockets`: a seccomp filter: no socket() at all (pathname unix sockets are outside
  Landlock's reach), no io_uring (which could open them behind seccomp's back).

See linux/landlock.h, Documentation/userspace-api/landlock.rst and linux/seccomp.h.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import struct
import sys

# New system calls share one number on every architecture.
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CAPABILITY_VERSION_3 = 0x20080522
# NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE and their locks, and KEEP_CAPS' lock: uid 0
# (root in a user namespace) gets no capability back at the next exec.
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80

# Filesystem rights.
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_READS = _EXECUTE | _READ_FILE | _READ_DIR
_WRITES_V1 = _WRITE_FILE | sum(1 << bit for bit in range(4, 13))  # remove, make dir/file/...
_REFER = 1 << 13  # ABI 2: link or rename across folders
_TRUNCATE = 1 << 14  # ABI 3
_IOCTL_DEV = 1 << 15  # ABI 5: ioctl on devices opened after this
# The only rights a rule on a file (rather than a folder) may hold.
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
_NET_TCP = 0b11  # ABI 4: BIND_TCP | CONNECT_TCP, handled with no rule: no TCP at all
_SCOPES = 0b11  # ABI 6: abstract unix sockets and signals of processes outside the domain

# Mount flags.
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18

# seccomp: the system calls refused, per architecture (audit arch, numbers, x32 bit).
_SECCOMP_ARCHES = {
    # socket, io_uring_setup/enter/register, add_key, request_key, keyctl
    "x86_64": (0xC000003E, (41, 425, 426, 427, 248, 249, 250), True),
    "aarch64": (0xC00000B7, (198, 425, 426, 427, 217, 218, 219), False),
}
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | errno.EPERM
_LD_ABS_W, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06


def _check(result: int) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, arg: int | bytes = 0) -> None:
    # prctl is variadic: every argument as a full unsigned long, unused ones zero (some
    # options refuse anything else).
    value = arg if isinstance(arg, bytes) else ctypes.c_ulong(arg)
    zero = ctypes.c_ulong(0)
    _check(_libc().prctl(ctypes.c_int(option), value, zero, zero, zero))


def _syscall(*args: int | bytes | None) -> int:
    if sys.platform != "linux":  # the numbers mean something else elsewhere
        raise OSError(errno.ENOSYS, "Landlock is Linux only")
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    return _check(libc.syscall(*(ctypes.c_long(a) if isinstance(a, int) else a for a in args)))


def abi() -> int:
    """The kernel's Landlock ABI version; OSError ENOSYS (none) or EOPNOTSUPP (disabled)."""
    return _syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)


def seccomp_arch() -> str:
    """The machine name block_sockets knows, or '' where it has no filter for this one."""
    machine = os.uname().machine
    return machine if sys.platform == "linux" and machine in _SECCOMP_ARCHES else ""


def join_cgroup(procs: str) -> None:
    """Move this process (and so all it will start) into the cgroup of `procs`."""
    with open(procs, "w") as f:
        f.write("0")  # 0: the writing process, in v1 and v2


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str) -> None:
    def arg(text: str | None) -> bytes | None:
        return None if text is None else os.fsencode(text)

    _check(_libc().mount(arg(source), arg(target), arg(fstype), ctypes.c_ulong(flags), arg(data)))


def _enterable(path: str, uid: int, gid: int) -> bool:
    info = os.stat(path)
    bit = 0o100 if info.st_uid == uid else 0o010 if info.st_gid == gid else 0o001
    return bool(info.st_mode & bit)


def _closed_ancestor(path: str, uid: int, gid: int) -> str:
    """The outermost folder on the way to `path` that uid/gid may not enter; '' if none."""
    parts = path.strip("/").split("/")
    for depth in range(1, len(parts)):
        folder = "/" + "/".join(parts[:depth])
        if not _enterable(folder, uid, gid):
            return folder
    return ""


def _reveal(paths: list[str], uid: int, gid: int) -> None:
    """Hide each folder uid/gid may not enter behind an empty tmpfs showing only `paths` (at
    their own paths, so that an interpreter's built-in prefix and library paths still hold)."""
    hidden: dict[str, list[str]] = {}
    for path in paths:
        if closed := _closed_ancestor(path, uid, gid):
            hidden.setdefault(closed, []).append(path)
    for closed, inside in sorted(hidden.items()):
        # Held open across the tmpfs that hides them, then bound back from the handles.
        handles = [(path, os.open(path, os.O_PATH | os.O_CLOEXEC)) for path in inside]
        _mount("tmpfs", closed, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=0755")
        for path, fd in handles:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.makedirs(path, 0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
                open(path, "a").close()
            _mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC, "")
            os.close(fd)


def mount_view(
    folder: str,
    size_mb: int,
    shm_mb: int,
    owner: tuple[int, int] | None,
    reveal: list[str],
) -> None:
    """In this process's own mount namespace: `folder` (its cwd) becomes an empty tmpfs of
    `size_mb` holding only the running script, /dev/shm one of `shm_mb`, both owned by `owner`
    (None: the user of this namespace); `reveal` as in _reveal, for `owner`."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE, "")  # nothing leaks to the host's mounts
    if owner and reveal:
        _reveal(reveal, *owner)
    script = os.path.join(folder, "program.py")
    with open(script, "rb") as f:  # kept for tracebacks, which read the lines back
        source = f.read()
    ids = f",uid={owner[0]},gid={owner[1]}" if owner else ""
    flags = _MS_NOSUID | _MS_NODEV
    _mount("tmpfs", folder, "tmpfs", flags, f"size={size_mb}m,mode=0700{ids}")
    _mount("tmpfs", "/dev/shm", "tmpfs", flags, f"size={shm_mb}m,mode=1777{ids}")
    os.chdir(folder)
    with open(script, "wb") as f:
        f.write(source)
    if owner:
        os.chown(script, *owner)


def _capabilities() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def drop_privileges(ids: tuple[int, int] | None) -> None:
    """Give up every capability for good, and root for uid/gid where given.

    Root in a user namespace of its own (ids None) stays uid 0 there, with securebits that
    give it no capability back at exec."""
    if _capabilities():
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
        for cap in range(last + 1):  # the bounding set: no exec can bring them back
            _prctl(_PR_CAPBSET_DROP, cap)
        _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
        if ids is None:
            _prctl(_PR_SET_SECUREBITS, _SECUREBITS)
    if ids is not None:
        os.setgroups([])
        os.setresgid(ids[1], ids[1], ids[1])
        os.setresuid(ids[0], ids[0], ids[0])  # clears every capability (no KEEP_CAPS)
    header = struct.pack("=Ii", _CAPABILITY_VERSION_3, 0)
    _check(_libc().capset(header, bytes(24)))  # nothing effective, permitted or inheritable
    if _capabilities():
        raise OSError(errno.EPERM, "capabilities remain after dropping them")
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)  # no setuid program brings root back


def restrict(folder: str, reads: list[str], writes: list[str]) -> int:
    """Landlock for this process and its future children; returns the ABI version in force.

    Reads and execution only beneath `reads`, `writes` and `folder`; writes only beneath
    `folder` and `writes`; no TCP (ABI 4+). A path that does not exist is skipped. Applies to
    the calling thread only, so call it while the process has a single thread.
    """
    version = abi()
    changes = _WRITES_V1
    changes |= (_REFER if version >= 2 else 0) | (_TRUNCATE if version >= 3 else 0)
    changes |= _IOCTL_DEV if version >= 5 else 0
    net = _NET_TCP if version >= 4 else 0
    scopes = _SCOPES if version >= 6 else 0
    # The struct grew with the ABI; an older kernel refuses a size it does not know.
    size = 8 if version < 4 else 16 if version < 6 else 24
    attr = struct.pack("=QQQ", _READS | changes, net, scopes)[:size]
    ruleset = _syscall(_CREATE_RULESET, attr, size, 0)
    try:
        for path in reads:
            _allow(ruleset, path, _READS)
        for path in [folder, *writes]:
            _allow(ruleset, path, _READS | changes)
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)  # for an unprivileged restrict
        _syscall(_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return version


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, PermissionError):  # what this user cannot reach stays shut
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        # struct landlock_path_beneath_attr is packed: u64 allowed_access, s32 parent_fd.
        _syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, struct.pack("=Qi", rights, fd), 0)
    finally:
        os.close(fd)


def block_sockets() -> None:
    """A seccomp filter for this process and all it starts: socket() (any family: pathname
    unix sockets included), io_uring and the kernel keyrings fail with EPERM, and so does
    every call of another architecture's ABI. socketpair() and pipes still work."""
    machine = seccomp_arch()
    if not machine:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {os.uname().machine}")
    arch, refused, x32 = _SECCOMP_ARCHES[machine]
    # (code, jump if true, jump if false, k); jumps count the instructions they skip.
    program = [(_LD_ABS_W, 0, 0, 4), (_JEQ_K, 1, 0, arch), (_RET_K, 0, 0, _RET_EPERM)]
    program.append((_LD_ABS_W, 0, 0, 0))
    if x32:
        program.append((_JGE_K, len(refused) + 1, 0, 0x40000000))
    for i, number in enumerate(refused):
        program.append((_JEQ_K, len(refused) - i, 0, number))
    program += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_EPERM)]
    filters = b"".join(struct.pack("=HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(filters)
    fprog = struct.pack("=HxxxxxxQ", len(program), ctypes.addressof(buffer))
    libc = _libc()
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    zero = ctypes.c_ulong(0)
    mode = ctypes.c_ulong(_SECCOMP_MODE_FILTER)
    _check(libc.prctl(ctypes.c_int(_PR_SET_SECCOMP), mode, fprog, zero, zero))
