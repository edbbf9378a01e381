"""The sandbox's first code in the child process, before any of the answer's.

Run as a script (`python -I confine.py PROGRAM CPU_S MEMORY FILE_BYTES PROCESSES`, in the
working folder, PROGRAM a path relative to it), standard
library only: it takes the network away (a new network namespace, else refused sockets),
sets the resource limits, becomes another user when it runs as root, and only then runs the
program, so nothing the answer does comes before its limits. PROGRAM "-" prints the isolation
it got and exits: the grader's probe.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 0x4000, 0x40000
# Folders every user may write in, each replaced by an empty one of its own (its size bounded too).
SHARED_FOLDERS = (b"/tmp", b"/var/tmp", b"/dev/shm")
PR_SET_KEEPCAPS = 8
PR_SET_NO_NEW_PRIVS = 38
CAP_DAC_READ_SEARCH = 2
LINUX_CAPABILITY_VERSION_3 = 0x20080522
NOBODY = 65534
# Audit events refused when no network namespace could be made: sockets, and the ways around an
# audit hook (a new program, which the hook does not follow; C functions called through ctypes).
REFUSED_EVENTS = frozenset((
    "socket.__new__", "socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo",
    "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "ctypes.dlopen", "ctypes.dlsym",
))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _no_network(libc: ctypes.CDLL) -> bool:
    """A new network namespace (only a loopback, and it is down); an unprivileged user gets one
    inside a new user namespace where the kernel allows it."""
    if libc.unshare(CLONE_NEWNET) == 0:
        return True
    return os.geteuid() != 0 and libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0


def _private_folders(libc: ctypes.CDLL) -> bool:
    """A mount namespace of its own, where the folders every user may write in are empty and
    bounded (root only): the working folder, already the process's cwd, stays reachable as ".".
    """
    if libc.unshare(CLONE_NEWNS) != 0 or libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return False
    options = b"size=16m,mode=1777"
    return all(libc.mount(b"tmpfs", folder, b"tmpfs", MS_NOSUID | MS_NODEV, options) == 0
               for folder in SHARED_FOLDERS if os.path.isdir(folder))


def _become_nobody(libc: ctypes.CDLL) -> None:
    """From root to user nobody, keeping only the right to read and search files (the interpreter
    may live in a folder only root can enter): no writing outside the working folder, no other
    process's environment, and the process limit counts (the kernel never counts root's)."""
    libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0)
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    data = (_CapData * 2)()
    data[0].effective = data[0].permitted = 1 << CAP_DAC_READ_SEARCH
    if libc.capset(ctypes.byref(_CapHeader(LINUX_CAPABILITY_VERSION_3, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _refuse(event: str, _args: tuple[object, ...]) -> None:
    if event in REFUSED_EVENTS:
        raise PermissionError(f"{event} refused: the grading sandbox has no network")


def main(argv: list[str]) -> int:
    program, cpu_s, memory, file_bytes, processes = argv[0], *map(int, argv[1:5])
    source = "" if program == "-" else open(program, encoding="utf-8").read()  # before the folders move
    libc = ctypes.CDLL(None, use_errno=True)
    namespace = _no_network(libc)
    user = "own user"
    if os.geteuid() == 0:
        private = _private_folders(libc)
        _become_nobody(libc)
        user = "user nobody" + (", private /tmp" if private else "")
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # a setuid program cannot give the rights back
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    if not namespace:
        sys.addaudithook(_refuse)
    if program == "-":
        print(f"{'network namespace' if namespace else 'sockets refused (no network namespace)'}, {user}")
        return 0
    sys.argv = [program]
    exec(compile(source, program, "exec"), {"__name__": "__main__", "__builtins__": __builtins__})  # noqa: S102
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
