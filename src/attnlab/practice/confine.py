"""What the worker process cannot do once it has imported NumPy: called by the worker on itself,
before it imports the learner's file, and impossible to undo from that file.

* Limits (soft and hard, so they cannot be raised): address space, file size, no core files.
* Linux seccomp filter (x86_64, aarch64): no new process (``fork``, ``vfork``, ``clone`` without
  ``CLONE_THREAD``; ``clone3`` answers ENOSYS so threads fall back to ``clone``), no signal to any
  process but itself (``kill`` and the like, and no file whose I/O signals another process:
  ``fcntl`` ``F_SETOWN``/``F_SETOWN_EX``/``F_SETSIG``, ``ioctl`` ``FIOSETOWN``/``SIOCSPGRP``), no
  ``ptrace`` or ``process_vm_*``, no ``setrlimit``/``prlimit`` that sets a limit, no change of the
  parent-death signal (:func:`die_with_parent` set it), no change of a file's mode, owner, times,
  extended attributes or inode flags anywhere (``chmod``, ``chown``, ``utime``, ``setxattr``
  families, ``FS_IOC_SETFLAGS``: Landlock's write rule does not cover them and seccomp cannot read
  a path, so the working folder is no exception), and no ``io_uring`` (its requests bypass the
  filter). Refused calls fail with EPERM, so they raise ``PermissionError`` in the learner's code.
* Linux Landlock (kernel 5.13+, unprivileged): nothing writable but the worker's own working
  directory and ``/dev/null``; nothing readable inside the attnlab package that grades (its
  reference, cases and mistakes) or inside PyTorch; the rest of the file system read-only.
* An import hook that refuses ``attnlab`` and ``torch`` with a message naming the rule (the kernel
  rules above also hold when the learner removes the hook).

Each part that the platform lacks is skipped; :func:`confine` returns what was applied.
"""

from __future__ import annotations

import ctypes
import importlib.abc
import importlib.util
import os
import platform
import resource
import sys

FORBIDDEN = ("attnlab", "torch")  # the grader's own code, and the library whose attention is the oracle
FILE_SIZE_MB = 64

# ------------------------------------------------------------------------------------- seccomp
_ARCH = {  # audit arch, then the syscall numbers of each architecture (aarch64 has no fork/vfork)
    "x86_64": (
        0xC000003E,
        dict(
            fork=57, vfork=58, clone=56, clone3=435, kill=62, tkill=200, tgkill=234, rt_sigqueueinfo=129,
            rt_tgsigqueueinfo=297, pidfd_send_signal=424, ptrace=101, process_vm_readv=310,
            process_vm_writev=311, setrlimit=160, prlimit64=302, fcntl=72, ioctl=16, prctl=157,
            io_uring_setup=425, chmod=90, fchmod=91, fchmodat=268, fchmodat2=452, chown=92, fchown=93,
            lchown=94, fchownat=260, utime=132, utimes=235, futimesat=261, utimensat=280, setxattr=188,
            lsetxattr=189, fsetxattr=190, removexattr=197, lremovexattr=198, fremovexattr=199,
            setxattrat=463, removexattrat=466,
        ),
    ),
    "aarch64": (
        0xC00000B7,
        dict(
            clone=220, clone3=435, kill=129, tkill=130, tgkill=131, rt_sigqueueinfo=138,
            rt_tgsigqueueinfo=240, pidfd_send_signal=424, ptrace=117, process_vm_readv=270,
            process_vm_writev=271, setrlimit=164, prlimit64=261, fcntl=25, ioctl=29, prctl=167,
            io_uring_setup=425, fchmod=52, fchmodat=53, fchmodat2=452, fchown=55, fchownat=54,
            utimensat=88, setxattr=5, lsetxattr=6, fsetxattr=7, removexattr=14, lremovexattr=15,
            fremovexattr=16, setxattrat=463, removexattrat=466,
        ),
    ),
}  # fmt: skip
_LD, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JSET|K, BPF_RET|K
_ALLOW, _KILL = 0x7FFF0000, 0x80000000
_EPERM, _ENOSYS = 0x00050000 | 1, 0x00050000 | 38  # SECCOMP_RET_ERRNO | errno
_CLONE_THREAD = 0x00010000
_F_SETOWN, _F_SETSIG, _F_SETOWN_EX = 8, 10, 15  # fcntl: who gets a file's I/O signal, and which one
_FIOSETOWN, _SIOCSPGRP = 0x8901, 0x8902  # ioctl: the same for a socket
_FS_IOC_SETFLAGS = (0x40086602, 0x40046602, 0x401C5820)  # ioctl: inode flags (chattr), 64/32-bit, fsxattr
_PR_SET_PDEATHSIG = 1
_ATTRIBUTES = (  # a file's mode, owner, times, extended attributes: refused wherever the file is
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
    "futimesat", "utimensat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
    "fremovexattr", "setxattrat", "removexattrat",
)  # fmt: skip


def _arg(i: int, high: bool = False) -> int:
    """Offset of argument ``i``'s low (or high) 32 bits in ``struct seccomp_data`` (little-endian)."""
    return 16 + 8 * i + (4 if high else 0)


def _only(offset: int, *values: int) -> list[tuple[int, int, int, int]]:
    """Allow the call when the 32-bit word at ``offset`` is one of ``values``; EPERM otherwise."""
    test = [(_JEQ, len(values) - j, 0, v) for j, v in enumerate(values)]  # jump to the ALLOW
    return [(_LD, 0, 0, offset), *test, (_RET, 0, 0, _EPERM), (_RET, 0, 0, _ALLOW)]


def _except(offset: int, *values: int) -> list[tuple[int, int, int, int]]:
    """EPERM when the 32-bit word at ``offset`` is one of ``values``; allow the call otherwise."""
    return [*_only(offset, *values)[:-2], (_RET, 0, 0, _ALLOW), (_RET, 0, 0, _EPERM)]


def _filter(pid: int, arch: str) -> list[tuple[int, int, int, int]]:
    """The BPF program: ``(code, jt, jf, k)`` instructions, one block per refused system call."""
    audit, nr = _ARCH[arch]
    deny = [(_RET, 0, 0, _EPERM)]
    threads_only = [(_LD, 0, 0, _arg(0)), (_JSET, 1, 0, _CLONE_THREAD), *deny, (_RET, 0, 0, _ALLOW)]
    query_only = [  # prlimit64 only reads when new_limit (argument 2) is NULL: both words zero
        (_LD, 0, 0, _arg(2)), (_JEQ, 0, 2, 0), *_only(_arg(2, high=True), 0)[:2], *deny, (_RET, 0, 0, _ALLOW),
    ]  # fmt: skip
    blocks = {
        "fork": deny,
        "vfork": deny,
        "clone3": [(_RET, 0, 0, _ENOSYS)],  # its flags are behind a pointer: threads fall back to clone
        "clone": threads_only,
        "kill": _only(_arg(0), pid, 0),  # itself, or its own process group
        "tkill": _only(_arg(0), pid),
        "tgkill": _only(_arg(0), pid),
        "rt_sigqueueinfo": _only(_arg(0), pid),
        "rt_tgsigqueueinfo": _only(_arg(0), pid),
        "pidfd_send_signal": deny,
        "ptrace": deny,
        "process_vm_readv": deny,
        "process_vm_writev": deny,
        "setrlimit": deny,
        "prlimit64": query_only,
        "fcntl": _except(_arg(1), _F_SETOWN, _F_SETSIG, _F_SETOWN_EX),  # cmd is an unsigned int
        "ioctl": _except(_arg(1), _FIOSETOWN, _SIOCSPGRP, *_FS_IOC_SETFLAGS),
        "prctl": _except(_arg(0), _PR_SET_PDEATHSIG),
        "io_uring_setup": deny,
        **dict.fromkeys(_ATTRIBUTES, deny),
    }
    prog = [(_LD, 0, 0, 4), (_JEQ, 1, 0, audit), (_RET, 0, 0, _KILL), (_LD, 0, 0, 0)]
    if arch == "x86_64":  # the x32 ABI's numbers (bit 30 set) are refused outright
        prog += [(0x35, 0, 1, 0x40000000), (_RET, 0, 0, _EPERM)]  # BPF_JMP|JGE|K
    for name, block in blocks.items():
        if name in nr:
            prog += [(_JEQ, 0, len(block), nr[name]), *block]  # every block ends in a return
    return prog + [(_RET, 0, 0, _ALLOW)]


class _Insn(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Insn))]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent ``parent_pid`` (the grader) ends, however
    it ends; exit at once if it has ended already. The seccomp filter then refuses to change it.
    Linux only (elsewhere a no-op). The signal follows the parent *thread* that started this
    process, so a :class:`~attnlab.practice.sandbox.Sandbox` is used from one thread."""
    if sys.platform != "linux":
        return
    if _libc().prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0) != 0:  # SIGKILL
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent_pid:  # the grader ended before the line above: nobody to answer
        os._exit(1)


def _no_new_privs(libc) -> None:
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")


def _seccomp() -> str | None:
    arch = platform.machine()
    if sys.platform != "linux" or arch not in _ARCH:
        return None
    libc = _libc()
    insns = _filter(os.getpid(), arch)
    array = (_Insn * len(insns))(*insns)
    prog = _Prog(len(insns), array)
    _no_new_privs(libc)
    if libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        return None
    return "seccomp"


# ------------------------------------------------------------------------------------- landlock
_READ = 1 | 4 | 8  # EXECUTE, READ_FILE, READ_DIR
_FILE_ONLY = 1 | 2 | 4 | (1 << 14) | (1 << 15)  # rights a rule on a file (not a folder) may hold
_ABI_BITS = {1: 13, 2: 14, 3: 15, 4: 15, 5: 16}  # LANDLOCK_ACCESS_FS_* bits known to each ABI


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _readable(denied: list[str], roots: list[str]) -> list[str]:
    """The fewest paths that cover ``roots`` but ``denied``: a root or child that holds no denied
    path is allowed whole; only the ancestors of denied paths are listed. A folder that cannot be
    listed stays unreadable but for the roots inside it (the import path is among the roots)."""
    out: list[str] = []

    def visit(path: str) -> None:
        real = os.path.realpath(path)
        if any(_inside(real, d) for d in denied):
            return
        if not any(_inside(d, real) for d in denied):
            out.append(path)
        elif real == os.path.abspath(path) and os.path.isdir(path):
            try:
                names = sorted(os.listdir(path))
            except OSError:
                return
            for name in names:
                visit(os.path.join(path, name))

    for root in roots:
        if root and os.path.exists(root):
            visit(os.path.realpath(root))
    return out


def _landlock(workdir: str, learner_file: str, denied: list[str]) -> str | None:
    if sys.platform != "linux":
        return None
    libc = _libc()
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    abi = syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    if abi < 1:
        return None
    handled = (1 << _ABI_BITS.get(abi, 16)) - 1
    attr = ctypes.c_uint64(handled)
    ruleset = syscall(444, ctypes.byref(attr), 8, 0)
    if ruleset < 0:
        return None
    try:
        rules = [(p, _READ) for p in _readable(denied, ["/", *sys.path])]
        rules += [(workdir, handled), (learner_file, _READ), (os.devnull, _READ | 2)]
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # vanished or unreadable: stays unreadable
            try:
                if not os.path.isdir(path):
                    access &= _FILE_ONLY
                rule = _PathBeneath(access & handled, fd)
                if syscall(445, ruleset, 1, ctypes.byref(rule), 0) != 0:  # LANDLOCK_RULE_PATH_BENEATH
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule({path})")
            finally:
                os.close(fd)
        _no_new_privs(libc)
        if syscall(446, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return f"landlock-{abi}"


# ------------------------------------------------------------------------------------- imports
class _Refuse(importlib.abc.MetaPathFinder):
    """Refuses :data:`FORBIDDEN` packages with a message (the kernel rules also hold without it)."""

    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in FORBIDDEN:
            raise ImportError(
                f"{top} cannot be imported by your file: the exercise is NumPy only, "
                "and the grader's answers stay out of your reach"
            )
        return None


def _forbidden_dirs() -> list[str]:
    """Every copy of the :data:`FORBIDDEN` packages on the import path, and where they import from."""
    dirs = set()
    for name in FORBIDDEN:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        dirs.update(os.path.realpath(d) for d in ((spec.submodule_search_locations or []) if spec else []))
        for entry in sys.path:
            if os.path.isdir(os.path.join(entry or ".", name)):
                dirs.add(os.path.realpath(os.path.join(entry or ".", name)))
    return sorted(dirs)


def confine(limit_mb: int, workdir: str, learner_file: str) -> list[str]:
    """Apply every limit above to this process; the names of the parts the platform applied."""
    done = ["rlimits"]
    limit = limit_mb << 20
    for res, value in (
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_AS, limit),
        (resource.RLIMIT_FSIZE, FILE_SIZE_MB << 20),
    ):
        _, hard = resource.getrlimit(res)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(res, (value, value))
    denied = _forbidden_dirs()
    for name in [m for m in sys.modules if m.partition(".")[0] in FORBIDDEN]:
        del sys.modules[name]  # the worker's own: attnlab, .practice, .wire, .confine (no answers in them)
    for step in (lambda: _landlock(workdir, learner_file, denied), _seccomp):
        try:
            applied = step()
        except OSError:
            applied = None
        if applied:
            done.append(applied)
    sys.meta_path.insert(0, _Refuse())
    return done
