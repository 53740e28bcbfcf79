"""Kernel-level seccomp-BPF filter for the sandbox child (Linux x86-64 only; best effort).

Installed by the trusted child code just before the audit hook, through ``ctypes`` (which is
blocked for agent code afterwards). It is a second, kernel-enforced layer under the audit hook:
even agent code that escapes the Python-level policy (e.g. through a native-code trick) cannot

* create processes (``fork``/``vfork``/``execve``/``execveat``; ``clone`` only with ``CLONE_THREAD``),
* create sockets (``socket``/``socketpair``) -> no network, no Unix sockets,
* open files for writing (``open``/``openat`` with write/create/truncate/append flags, ``creat``),
  or rename/delete/link/chmod/chown/mknod anything,
* signal other processes (``kill``/``tgkill`` only to itself), ``ptrace`` or read/write other
  processes' memory, raise resource limits (``setrlimit``, ``prlimit64`` with a new limit),
* use ``io_uring``, ``bpf``, ``perf_event_open``, ``userfaultfd``, namespaces, mounts, module
  loading, ``chroot``, uid/gid changes, ``keyctl``.

Read-only file access is NOT restricted by this filter (seccomp cannot inspect path strings);
the audit hook restricts it. Denied calls fail with ``EPERM`` (``ENOSYS`` for ``clone3`` and
``openat2`` so that libc falls back to the inspectable variants). Syscalls from a foreign ABI
(i386 ``int 0x80``, x32) are denied outright.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
_CLONE_THREAD = 0x00010000
_O_WRITE_MASK = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

# x86-64 syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl).
_X86_64_DENY = {
    "socket": 41, "socketpair": 53, "fork": 57, "vfork": 58, "execve": 59, "execveat": 322,
    "tkill": 200, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "setrlimit": 160, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166,
    "pivot_root": 155, "chroot": 161, "creat": 85, "unlink": 87, "unlinkat": 263, "rename": 82,
    "renameat": 264, "renameat2": 316, "mkdir": 83, "mkdirat": 258, "rmdir": 84, "link": 86,
    "linkat": 265, "symlink": 88, "symlinkat": 266, "chmod": 90, "fchmodat": 268, "chown": 92,
    "lchown": 94, "fchownat": 260, "truncate": 76, "mknod": 133, "mknodat": 259,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 321,
    "perf_event_open": 298, "userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
    "kexec_file_load": 320, "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163,
    "setuid": 105, "setgid": 106, "setreuid": 113, "setregid": 114, "setresuid": 117,
    "setresgid": 119, "setgroups": 116, "setfsuid": 122, "setfsgid": 123, "capset": 126,
    "personality": 135, "iopl": 172, "ioperm": 173, "settimeofday": 164, "clock_settime": 227,
    "adjtimex": 159, "sethostname": 170, "setdomainname": 171, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "fanotify_init": 300, "pidfd_open": 434, "pidfd_send_signal": 424,
    "pidfd_getfd": 438, "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsmount": 432,
}
_X86_64_ENOSYS = {"clone3": 435, "openat2": 437}
_X86_64 = {"clone": 56, "kill": 62, "tgkill": 234, "prlimit64": 302, "open": 2, "openat": 257, "seccomp": 317}


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _ret(v: int) -> bytes:
    return _ins(_BPF_RET_K, v)


def _arg_lo(i: int) -> bytes:
    return _ins(_BPF_LD_W_ABS, 16 + 8 * i)


def _arg_hi(i: int) -> bytes:
    return _ins(_BPF_LD_W_ABS, 20 + 8 * i)


def build_program(pid: int) -> bytes:
    """The BPF program (x86-64) as raw ``sock_filter`` bytes; ``pid`` = the child's own pid."""
    eperm = _RET_ERRNO | errno.EPERM
    enosys = _RET_ERRNO | errno.ENOSYS
    p = [
        _ins(_BPF_LD_W_ABS, 4),  # arch
        _ins(_BPF_JEQ_K, _AUDIT_ARCH_X86_64, 1, 0),
        _ret(eperm),
        _ins(_BPF_LD_W_ABS, 0),  # nr
        _ins(_BPF_JGE_K, _X32_BIT, 0, 1),
        _ret(eperm),
    ]
    for nr in _X86_64_DENY.values():
        p += [_ins(_BPF_JEQ_K, nr, 0, 1), _ret(eperm)]
    for nr in _X86_64_ENOSYS.values():
        p += [_ins(_BPF_JEQ_K, nr, 0, 1), _ret(enosys)]
    s = _X86_64
    # clone: threads only
    p += [_ins(_BPF_JEQ_K, s["clone"], 0, 4), _arg_lo(0), _ins(_BPF_JSET_K, _CLONE_THREAD, 0, 1),
          _ret(_RET_ALLOW), _ret(eperm)]
    # kill / tgkill: only to itself
    for name in ("kill", "tgkill"):
        p += [_ins(_BPF_JEQ_K, s[name], 0, 4), _arg_lo(0), _ins(_BPF_JEQ_K, pid, 0, 1),
              _ret(_RET_ALLOW), _ret(eperm)]
    # prlimit64: reading is fine, setting (new_limit != NULL) is not
    p += [_ins(_BPF_JEQ_K, s["prlimit64"], 0, 6), _arg_lo(2), _ins(_BPF_JEQ_K, 0, 0, 3), _arg_hi(2),
          _ins(_BPF_JEQ_K, 0, 0, 1), _ret(_RET_ALLOW), _ret(eperm)]
    # open(path, flags) / openat(dirfd, path, flags): read-only only
    for name, argi in (("open", 1), ("openat", 2)):
        p += [_ins(_BPF_JEQ_K, s[name], 0, 4), _arg_lo(argi), _ins(_BPF_JSET_K, _O_WRITE_MASK, 0, 1),
              _ret(eperm), _ret(_RET_ALLOW)]
    # no further filters may be stacked by agent code
    p += [_ins(_BPF_JEQ_K, s["seccomp"], 0, 1), _ret(eperm)]
    p.append(_ret(_RET_ALLOW))
    return b"".join(p)


def supported() -> bool:
    """True on Linux x86-64 (the only architecture whose syscall table is encoded here)."""
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def install() -> bool:
    """Install the filter on every thread of this process; True when installed.

    Returns False (and changes nothing) on unsupported platforms. Raises ``OSError`` (the refused
    call and its errno) when the kernel refuses ``no_new_privs`` or the filter.
    """
    if not supported():
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    prog_bytes = build_program(os.getpid())
    n = len(prog_bytes) // 8
    buf = ctypes.create_string_buffer(prog_bytes, len(prog_bytes))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(n, ctypes.cast(buf, ctypes.c_void_p))
    pr_set_no_new_privs = 38
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS) refused: {os.strerror(err)}")
    seccomp_set_mode_filter, filter_flag_tsync = 1, 1
    rc = libc.syscall(ctypes.c_long(_X86_64["seccomp"]), ctypes.c_uint(seccomp_set_mode_filter),
                      ctypes.c_uint(filter_flag_tsync), ctypes.byref(fprog))
    if rc != 0:  # with TSYNC a positive rc is the id of a thread that could not be synchronised
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp(SECCOMP_SET_MODE_FILTER) refused (rc {rc}): {os.strerror(err)}")
    return True
