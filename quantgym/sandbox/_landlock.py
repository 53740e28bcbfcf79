"""Kernel-level Landlock file-system (and TCP) allow-list for the sandbox child (Linux >= 5.13).

Installed by the trusted child code at lockdown, before the seccomp filter and the audit hook.
Once installed, the process (and anything it could start) can only *read* files beneath the
directories/files given here; every write, create, remove, rename, link or device access is denied
by the kernel, whatever Python-level trick the agent code finds. With Landlock ABI >= 4 all TCP
``bind``/``connect`` are denied too; with ABI >= 6 signals and abstract Unix sockets are scoped to
the sandbox. Unsupported kernels: :func:`install` returns 0 and changes nothing (the audit hook
and the seccomp filter still apply).
"""

from __future__ import annotations

import ctypes
import os
import platform

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # same on x86-64 and arm64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_ABI1_ALL = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _refused(libc, step: str):
    """Raise the OSError of a refused kernel call (its errno, read right after the call)."""
    err = ctypes.get_errno()
    raise OSError(err, f"{step} refused: {os.strerror(err)}")


def abi_version() -> int:
    """Landlock ABI version of the running kernel (0 when unavailable)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64", "aarch64", "arm64"):
        return 0
    libc = _libc()
    v = libc.syscall(ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                     ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(v), 0)


def install(read_dirs: list[str], read_files: list[str], list_dirs: list[str] = ()) -> int:
    """Restrict this process to reading beneath ``read_dirs`` and the files ``read_files``.

    Parameters
    ----------
    read_dirs : list of str
        Directories whose whole subtree becomes readable (files and listings). Missing ones are skipped.
    read_files : list of str
        Single files that become readable. Missing ones are skipped.
    list_dirs : list of str
        Directories whose subtree may be listed (names only, no file contents).

    Returns
    -------
    int
        The Landlock ABI version enforced, or 0 when Landlock is unavailable.

    Raises
    ------
    OSError
        The kernel refused a step (ruleset creation, ``no_new_privs`` or ``landlock_restrict_self``):
        the error names the step and carries its errno.
    """
    abi = abi_version()
    if abi <= 0:
        return 0
    libc = _libc()
    fs = _ABI1_ALL
    if abi >= 2:
        fs |= _REFER
    if abi >= 3:
        fs |= _TRUNCATE
    if abi >= 5:
        fs |= _IOCTL_DEV
    attr = _RulesetAttr(fs, _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0,
                        _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL if abi >= 6 else 0)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    rfd = libc.syscall(ctypes.c_long(_SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                       ctypes.c_uint32(0))
    if rfd < 0:
        _refused(libc, "landlock_create_ruleset")
    try:
        for paths, access in ((read_dirs, _READ_FILE | _READ_DIR), (read_files, _READ_FILE), (list_dirs, _READ_DIR)):
            for p in paths:
                try:
                    fd = os.open(p, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    rule = _PathBeneathAttr(access, fd)
                    rc = libc.syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(rfd),
                                      ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0))
                    if rc != 0 and access == _READ_FILE | _READ_DIR:
                        # a file given as a directory: retry with file rights only
                        rule = _PathBeneathAttr(_READ_FILE, fd)
                        libc.syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(rfd),
                                     ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0))
                finally:
                    os.close(fd)
        pr_set_no_new_privs = 38
        if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
            _refused(libc, "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(rfd), ctypes.c_uint32(0)) != 0:
            _refused(libc, "landlock_restrict_self")
        return abi
    finally:
        os.close(rfd)
