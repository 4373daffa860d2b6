"""Confine a process and all it starts: what it may read, write, execute, connect to, own.

This file is also run as source inside the sandboxed interpreter (`runner.py` embeds it in
the program's preamble, which runs under `python -I`), so it uses the standard library only
and defines names without side effects. The preamble calls, in this order:

- `join_cgroup`: the memory bound for the program and everything it starts;
- `mount_view` (in the program's own mount and IPC namespaces): a minimal root of its own,
  as bubblewrap builds one: the interpreter and the system's libraries read-only, a private
  /tmp holding its folder and a /dev/shm, both size-bounded tmpfs; no other file, folder or
  socket of the machine exists there;
- `drop_privileges`: `nobody` with no capability (nothing that reads past permissions);
- `restrict`: Landlock: reads and execution only beneath an allow-list, writes only beneath
  its folder, no TCP, no abstract sockets or signals outside;
- `refuse_calls`: a seccomp filter: no socket() at all (pathname unix sockets are outside
  Landlock's reach), no datagram socketpair, no io_uring, SysV IPC, memfd, inotify,
  userfaultfd, perf_event_open or new namespaces (see _SECCOMP_ARCHES).

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
_PR_SET_PDEATHSIG = 1
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

# Mount flags, mount_setattr's attributes and flags.
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT = 1, 2, 4, 32
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_RDONLY, _NOSUID, _NODEV, _NOEXEC = 1, 2, 4, 8
_AT_FDCWD, _AT_RECURSIVE, _MNT_DETACH = -100, 0x8000, 2
_MOUNT_SETATTR = 442  # shared by every architecture, as Landlock's are
# The devices a program reads or writes; everything else of /dev is absent.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
INODES = 4096  # files a tmpfs of the run may hold: bounds the kernel memory they cost

# seccomp, per architecture: (audit arch, whether the x32 ABI exists, the calls refused with
# EPERM, the numbers of clone3, socketpair, sendto, setsockopt, clone and fcntl, decided
# by their arguments). Refused: socket() (pathname unix sockets are outside Landlock's reach),
# connect, bind, listen and accept; io_uring (it could do all of that behind seccomp's back);
# the kernel keyrings; SysV IPC and POSIX message queues; memfd_create and memfd_secret
# (memory no per-process limit counts); inotify and fanotify; userfaultfd; perf_event_open;
# unshare and setns; mounting, pivot_root and the new mount API; bpf.
_SECCOMP_ARCHES: dict[str, tuple[int, bool, tuple[int, ...], tuple[int, ...]]] = {
    "x86_64": (
        0xC000003E,
        True,
        (
            *(41, 42, 43, 49, 50, 288),  # socket, connect, accept, bind, listen, accept4
            *(425, 426, 427, 248, 249, 250),  # io_uring, keyrings
            *(29, 30, 31, 67, 64, 65, 66, 68, 69, 70, 71, 220),  # SysV shm, sem, msg
            *(240, 241, 242, 243, 244, 245),  # POSIX mq
            *(319, 447, 253, 254, 294, 300, 301),  # memfd, memfd_secret, inotify, fanotify
            *(323, 298, 272, 308),  # userfaultfd, perf_event_open, unshare, setns
            *(165, 166, 155, 428, 429, 430, 431, 432, 433, 442, 467, 321),  # mounts, bpf
        ),
        (435, 53, 44, 54, 56, 72),
    ),
    "aarch64": (
        0xC00000B7,
        False,
        (
            *(198, 203, 202, 200, 201, 242),
            *(425, 426, 427, 217, 218, 219),
            *(194, 195, 196, 197, 186, 187, 188, 189, 190, 191, 192, 193),
            *(180, 181, 182, 183, 184, 185),
            *(279, 447, 26, 27, 262, 263),
            *(282, 241, 97, 268),
            *(40, 39, 41, 428, 429, 430, 431, 432, 433, 442, 467, 280),
        ),
        (435, 199, 206, 208, 220, 25),
    ),
}
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine, -1)
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | errno.EPERM
_RET_ENOSYS = 0x00050000 | errno.ENOSYS
_LD_ABS_W, _JEQ_K, _JGE_K, _JSET_K, _AND_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x54, 0x06
_AF_UNIX, _SOCK_STREAM, _SOL_SOCKET = 1, 1, 1
_F_NOTIFY, _F_SETPIPE_SZ = 1026, 1031
# SO_SNDBUF, SO_RCVBUF and their FORCE forms: a socket's buffers stay at the default size.
_BUFFER_OPTIONS = (7, 8, 32, 33)
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
_CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000
_CLONE_NEW |= 0x40000000


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
    """The machine name refuse_calls knows, or '' where it has no filter for this one."""
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


def _bind(source: str, target: str, attrs: int) -> None:
    """`source` (and what is mounted beneath it) shown at `target`, with mount attributes
    `attrs` on all of it; a source that does not exist is skipped."""
    try:
        is_dir = stat.S_ISDIR(os.stat(source).st_mode)
    except OSError:  # missing, or this user may not reach it: stays out of the root
        return
    if is_dir:
        os.makedirs(target, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        if not os.path.lexists(target):
            open(target, "a").close()
    _mount(source, target, None, _MS_BIND | _MS_REC, "")
    _setattr(target, attrs)


def _setattr(target: str, attrs: int) -> None:
    """Mount attributes `attrs` on the mount at `target` and all beneath it."""
    # struct mount_attr: attr_set, attr_clr, propagation, userns_fd (u64 each)
    attr = struct.pack("=QQQQ", attrs, 0, 0, 0)
    _syscall(_MOUNT_SETATTR, _AT_FDCWD, os.fsencode(target), _AT_RECURSIVE, attr, len(attr))


def _outermost(paths: list[str]) -> list[str]:
    """`paths` less those beneath another of them (already shown by its bind)."""
    kept: list[str] = []
    for path in sorted({os.path.normpath(p) for p in paths}):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def mount_view(
    folder: str,
    size_mb: int,
    shm_mb: int,
    owner: tuple[int, int] | None,
    reads: list[str],
) -> None:
    """In this process's own mount and IPC namespaces, a minimal root of its own, as
    bubblewrap builds one: `reads` (the interpreter, the system's libraries, a few files of
    /etc) read-only at their own paths, the devices of DEVICES, its own /proc, a private /tmp
    of `size_mb` holding `folder` (its cwd, with the running script) and a /dev/shm of
    `shm_mb`, both owned by `owner` (None: the user of this namespace). Nothing else of the
    machine exists there: no socket to send to, no folder to watch, no file to chmod; the
    root itself is read-only. `folder` must be beneath /tmp."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE, "")  # nothing leaks to the host's mounts
    # This namespace's copy of the host's tree, read-only before it is left: what the
    # interpreter was started from stays reachable through /proc/self/exe.
    _setattr("/", _RDONLY | _NOSUID)  # not nodev: its devices are bound from it
    script = os.path.join(folder, "program.py")
    with open(script, "rb") as f:  # kept for tracebacks, which read the lines back
        source = f.read()
    # The new root is a small tmpfs over the run's own folder on the host: a mount point
    # that exists, that only this run uses, and that the old root's removal takes along.
    root = folder
    flags = _MS_NOSUID | _MS_NODEV
    _mount("tmpfs", root, "tmpfs", flags, "size=1m,nr_inodes=1024,mode=0755")
    ids = f",uid={owner[0]},gid={owner[1]}" if owner else ""
    for path, size in (("/tmp", size_mb), ("/dev/shm", shm_mb)):
        os.makedirs(root + path, 0o755, exist_ok=True)
        limits = f"size={size}m,nr_inodes={INODES},mode=1777{ids}"
        _mount("tmpfs", root + path, "tmpfs", flags, limits)
    # After /tmp, so that an interpreter in a venv under /tmp is shown on top of it.
    shown = _RDONLY | _NOSUID | _NODEV
    for path in _outermost(reads):
        _bind(path, root + path, shown)
    for device in DEVICES:
        _bind(device, root + device, _RDONLY | _NOSUID)
    _bind("/proc", root + "/proc", shown | _NOEXEC)  # its own PID namespace's
    os.mkdir(root + folder, 0o700)
    with open(root + script, "wb") as f:
        f.write(source)
    if owner:
        os.chown(root + folder, *owner)
        os.chown(root + script, *owner)
    os.chdir(root)
    _syscall(_PIVOT_ROOT, b".", b".")  # the old root now lies under the new one
    _check(_libc().umount2(b".", _MNT_DETACH))  # and is gone, with every host mount in it
    _mount(None, "/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags, "")
    os.chdir(folder)
    # Its stdin was the host's /dev/null, opened outside: its own now (utime on the host's
    # needs only write permission).
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


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
        # The change of user also cleared the parent-death signal unshare --kill-child gave
        # this process: without it, a program that leaves its process group outlives the run
        # (the host kills the namespace's first process too, for the moment in between).
        _prctl(_PR_SET_PDEATHSIG, 9)  # SIGKILL
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


def _arg(index: int, high: bool = False) -> int:
    """Offset of a system call argument's low (or high) 32 bits in struct seccomp_data."""
    return 16 + 8 * index + (4 if high else 0)


def _filter(machine: str) -> list[tuple[int, int, int, int]]:
    """The seccomp program for `machine`: (code, jump if true, jump if false, k) each, jumps
    counting the instructions they skip. Each block starts with the call's number loaded and
    either returns or leaves it loaded for the next."""
    arch, x32, refused, special = _SECCOMP_ARCHES[machine]
    clone3, socketpair, sendto, setsockopt, clone, fcntl = special
    eperm, allow = (_RET_K, 0, 0, _RET_EPERM), (_RET_K, 0, 0, _RET_ALLOW)
    program = [(_LD_ABS_W, 0, 0, 4), (_JEQ_K, 1, 0, arch), eperm, (_LD_ABS_W, 0, 0, 0)]
    if x32:  # another ABI's numbers on the same architecture
        program += [(_JGE_K, 0, 1, 0x40000000), eperm]
    for number in refused:
        program += [(_JEQ_K, 0, 1, number), eperm]
    # glibc falls back from clone3 (whose flags seccomp cannot read) to clone on ENOSYS.
    program += [(_JEQ_K, 0, 1, clone3), (_RET_K, 0, 0, _RET_ENOSYS)]
    # socketpair: AF_UNIX streams only (asyncio's and multiprocessing's); a datagram pair
    # could send to any datagram socket by its path.
    program += [
        (_JEQ_K, 0, 7, socketpair),
        (_LD_ABS_W, 0, 0, _arg(0)),
        (_JEQ_K, 0, 3, _AF_UNIX),
        (_LD_ABS_W, 0, 0, _arg(1)),
        (_AND_K, 0, 0, 0xF),  # the type, less SOCK_CLOEXEC and SOCK_NONBLOCK
        (_JEQ_K, 1, 0, _SOCK_STREAM),
        eperm,
        allow,
    ]
    # sendto: to the connected peer only (a NULL address), as send() is.
    program += [
        (_JEQ_K, 0, 6, sendto),
        (_LD_ABS_W, 0, 0, _arg(4)),
        (_JEQ_K, 0, 2, 0),
        (_LD_ABS_W, 0, 0, _arg(4, high=True)),
        (_JEQ_K, 1, 0, 0),
        eperm,
        allow,
    ]
    # setsockopt: no bigger socket buffers than the default (memory no limit counts).
    options = [(_JEQ_K, len(_BUFFER_OPTIONS) - i, 0, o) for i, o in enumerate(_BUFFER_OPTIONS)]
    program += [
        (_JEQ_K, 0, 5 + len(options), setsockopt),
        (_LD_ABS_W, 0, 0, _arg(1)),
        (_JEQ_K, 0, 1 + len(options), _SOL_SOCKET),
        (_LD_ABS_W, 0, 0, _arg(2)),
        *options,
        allow,
        eperm,
    ]
    # fcntl: no pipe bigger than the default 16 pages (F_SETPIPE_SZ), no dnotify (F_NOTIFY:
    # inotify by another name, on the folders bound into its root).
    program += [(_JEQ_K, 0, 5, fcntl), (_LD_ABS_W, 0, 0, _arg(1))]
    program += [(_JEQ_K, 1, 0, _F_SETPIPE_SZ), (_JEQ_K, 0, 1, _F_NOTIFY), eperm, allow]
    # clone: a new process or thread, never a new namespace.
    program += [(_JEQ_K, 0, 4, clone), (_LD_ABS_W, 0, 0, _arg(0)), (_JSET_K, 0, 1, _CLONE_NEW)]
    program += [eperm, allow, allow]
    return program


def refuse_calls() -> None:
    """A seccomp filter for this process and all it starts: the calls of _SECCOMP_ARCHES
    fail with EPERM, and so does every call of another architecture's ABI. Pipes, threads,
    processes and AF_UNIX stream socketpairs still work."""
    machine = seccomp_arch()
    if not machine:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {os.uname().machine}")
    program = _filter(machine)
    filters = b"".join(struct.pack("=HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(filters)
    fprog = struct.pack("=HxxxxxxQ", len(program), ctypes.addressof(buffer))
    libc = _libc()
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    zero = ctypes.c_ulong(0)
    mode = ctypes.c_ulong(_SECCOMP_MODE_FILTER)
    _check(libc.prctl(ctypes.c_int(_PR_SET_SECCOMP), mode, fprog, zero, zero))
