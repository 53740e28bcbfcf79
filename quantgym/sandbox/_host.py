"""Host side of the sandbox: spawn the child, feed it, watch it, read its result safely.

Longer than 500 lines as one job, one run's life on the host (start cold or from the zygote, timers,
limits, reading the result): the two starts share every check after the spawn.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickletools
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from typing import Any

from quantgym.sandbox import _codec, _payload
from quantgym.sandbox._types import SANDBOX_VERSION, SandboxLimits, SandboxResult

_BOOTSTRAP = (
    "import sys, json; sys.dont_write_bytecode = True; sys.path[:] = json.loads(sys.argv[2]); "
    "from quantgym.sandbox._child import main; main()"
)
_READ_CHUNK = 1 << 16
#: Bytes of the violation record kept by the host (only the first line is used).
_VIOLATION_CAP = 64_000
#: Bytes of the limit record kept by the host (only the first line is used).
_LIMIT_CAP = 4_000
#: Exit code of a child whose audit hook found its violation record closed or replaced.
_TAMPER_EXIT = 75
_UNSHARE: list[str] | None = None  # cached probe result
_UNSHARE_LOCK = threading.Lock()


def _unshare_prefix() -> list[str]:
    """``["unshare", "--net", "--"]`` when running as root and it works here, else ``[]``."""
    global _UNSHARE
    with _UNSHARE_LOCK:
        if _UNSHARE is None:
            _UNSHARE = []
            exe = shutil.which("unshare")
            if exe and hasattr(os, "geteuid") and os.geteuid() == 0:
                try:
                    r = subprocess.run([exe, "--net", "--", "true"], capture_output=True, timeout=10,
                                       env={"PATH": "/usr/bin:/bin"})
                    if r.returncode == 0:
                        _UNSHARE = [exe, "--net", "--"]
                except (OSError, subprocess.SubprocessError):
                    pass
        return list(_UNSHARE)


def _child_env(tmp: str) -> dict[str, str]:
    """A minimal environment: no inherited variables (so no API keys or tokens)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": tmp,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "VECLIB_MAXIMUM_THREADS": "1",
        "MPLBACKEND": "Agg",
    }


def _check_runner(runner: str) -> None:
    if not isinstance(runner, str) or runner.count(":") != 1:
        raise ValueError(f"runner must be 'package.module:function', got {runner!r}")
    mod, func = runner.split(":")
    if not mod or not func or not all(p.isidentifier() for p in mod.split(".") + func.split(".")):
        raise ValueError(f"runner must be 'package.module:function', got {runner!r}")
    try:
        spec = importlib.util.find_spec(mod)
    except (ImportError, ValueError) as exc:
        raise ValueError(f"runner module {mod!r} cannot be found: {exc}") from None
    if spec is None:
        raise ValueError(f"runner module {mod!r} cannot be found")


def _pickled_modules(data: bytes) -> set[str]:
    """Top-level module names the pickle ``data`` imports (GLOBAL / STACK_GLOBAL opcodes)."""
    mods: set[str] = set()
    memo: dict[int, Any] = {}
    recent: list[Any] = []  # values pushed by string / memo-get opcodes (None for anything else)
    str_ops = {"SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8", "STRING", "BINSTRING",
               "SHORT_BINSTRING"}
    for op, arg, _pos in pickletools.genops(data):
        name = op.name
        if name in str_ops:
            recent.append(arg if isinstance(arg, str) else None)
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            recent.append(memo.get(int(arg)))
        elif name == "MEMOIZE":
            memo[len(memo)] = recent[-1] if recent else None
            continue
        elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[int(arg)] = recent[-1] if recent else None
            continue
        elif name in ("GLOBAL", "INST"):
            mods.add(str(arg).split(" ")[0].partition(".")[0])
            recent.append(None)
        elif name == "STACK_GLOBAL":
            if len(recent) >= 2 and isinstance(recent[-2], str):
                mods.add(recent[-2].partition(".")[0])
            recent.append(None)
        else:
            recent.append(None)
        del recent[:-2]
    return mods


def _check_payload_pickle(data: bytes) -> None:
    """Refuse payloads that need pyarrow (or another never-loaded module) to unpickle."""
    from quantgym.sandbox._child import NEVER_LOAD

    if not any(name.encode() in data for name in NEVER_LOAD):
        return
    bad = sorted(_pickled_modules(data) & set(NEVER_LOAD))
    if bad:
        raise ValueError(
            f"payload needs module {bad[0]!r} to unpickle, which is not available in the sandbox; "
            "convert pyarrow-backed pandas columns (pd.ArrowDtype) with .astype(object) or pass numpy arrays"
        )


class _Reader(threading.Thread):
    """Drain a pipe into memory up to ``cap`` bytes; beyond that, keep draining and discard
    (``stop_at_cap=False``) or stop reading and close (``stop_at_cap=True``)."""

    def __init__(self, fd: int, cap: int, stop_at_cap: bool) -> None:
        super().__init__(daemon=True)
        self.fd, self.cap, self.stop_at_cap = fd, cap, stop_at_cap
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflow = False

    def run(self) -> None:
        try:
            while True:
                try:
                    b = os.read(self.fd, _READ_CHUNK)
                except InterruptedError:
                    continue
                except OSError:
                    break
                if not b:
                    break
                room = self.cap - self.size
                if len(b) > room:
                    self.overflow = True
                    if room > 0:
                        self.chunks.append(b[:room])
                        self.size += room
                    if self.stop_at_cap:
                        break
                else:
                    self.chunks.append(b)
                    self.size += len(b)
        finally:
            try:
                os.close(self.fd)
            except OSError:
                pass

    def data(self) -> bytes:
        return b"".join(self.chunks)


class _Writer(threading.Thread):
    def __init__(self, fd: int, data: bytes) -> None:
        super().__init__(daemon=True)
        self.fd, self.data = fd, data

    def run(self) -> None:
        view = memoryview(self.data)
        try:
            while view:
                try:
                    k = os.write(self.fd, view)
                except InterruptedError:
                    continue
                view = view[k:]
        except OSError:  # child died or closed stdin early: its exit status tells the story
            pass
        finally:
            try:
                os.close(self.fd)
            except OSError:
                pass


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _group_members(pgid: int) -> list[tuple[int, int]]:
    """(pid, ppid) of every process (zombies included) in process group ``pgid``, from ``/proc``."""
    out: list[tuple[int, int]] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        try:
            ppid, pgrp = int(fields[1]), int(fields[2])
        except (IndexError, ValueError):
            continue
        if pgrp == pgid:
            out.append((int(name), ppid))
    return out


def _reap_group(leader: int) -> None:
    """Reap the processes of the child's group that were re-parented to this process.

    A process the child forked (Quant-Arena's keeper) is re-parented when the child exits: to init,
    which reaps it, or to this process when it runs as PID 1 or under ``PR_SET_CHILD_SUBREAPER``
    (containers without an init). Called after ``killpg`` and before the leader is reaped, so the
    group id is still pinned by the zombie leader and cannot name an unrelated group.
    """
    me = os.getpid()
    deadline = time.monotonic() + 10.0
    while True:
        ours = [pid for pid, ppid in _group_members(leader) if ppid == me and pid != leader]
        if not ours:
            return
        for pid in ours:
            try:
                os.waitpid(pid, 0)  # already sent SIGKILL: returns as soon as it has died
            except ChildProcessError:
                pass
        if time.monotonic() > deadline:
            return
        _killpg(leader)  # a grandchild re-parented meanwhile


def _child_details(extra: dict) -> dict:
    """The child's diagnostics that enter ``SandboxResult.details``, type-checked (the child is untrusted):
    the kernel layers in force and their timings, and the one-line reason of a layer whose install failed."""
    out = {}
    for k in ("seccomp", "landlock", "frame_policy", "startup_seconds", "agent_cpu_seconds"):
        v = extra.get(k)
        if type(v) in (bool, int, float):
            out[k] = v
    for k in ("landlock_error", "seccomp_error"):
        v = extra.get(k)
        if isinstance(v, str):
            out[k] = " ".join(v.split())[:500]
    return out


class _FreshChild:
    """A child started as a new interpreter (``python -s -P -c <bootstrap>``); the host is its parent."""

    def __init__(self, prefix: list[str], tmp: str, paths: list[str], fds: list[int]) -> None:
        r_in, w_out, w_res, w_vio, w_lim = fds
        cmd = prefix + [sys.executable, "-s", "-P", "-c", _BOOTSTRAP, str(w_res), json.dumps(paths), str(w_vio),
                        str(w_lim)]
        self.proc = subprocess.Popen(cmd, stdin=r_in, stdout=w_out, stderr=w_out, pass_fds=(w_res, w_vio, w_lim),
                                     cwd=tmp, env=_child_env(tmp), start_new_session=True, close_fds=True)
        self.pid = self.proc.pid

    def kill(self) -> None:
        _killpg(self.pid)

    def wait(self) -> tuple[int, float | None, float | None]:
        """(exit code, CPU seconds, max RSS KiB) from the kernel's rusage.

        Waits without reaping, kills any leftover group members while the group id is still pinned
        by the zombie leader, then reaps with rusage."""
        proc = self.proc
        while True:
            try:
                os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                break
        _killpg(proc.pid)
        _reap_group(proc.pid)
        try:
            _pid, status, rusage = os.wait4(proc.pid, 0)
        except ChildProcessError:  # reaped by someone else (a SIGCHLD handler in the host)
            return (proc.returncode if proc.returncode is not None else -signal.SIGKILL), None, None
        proc.returncode = os.waitstatus_to_exitcode(status)
        return proc.returncode, rusage.ru_utime + rusage.ru_stime, rusage.ru_maxrss


class _ZygoteChild:
    """A child forked by the runner's zygote (:mod:`quantgym.sandbox._zygote`), which is its parent."""

    def __init__(self, zygote, tmp: str, fds: list[int]) -> None:
        self.zygote = zygote
        self.pid = zygote.spawn(fds, tmp)

    def kill(self) -> None:
        self.zygote.kill(self.pid)

    def wait(self) -> tuple[int, float | None, float | None]:
        return self.zygote.wait(self.pid)


def _start_child(prefix: list[str], runner: str, tmp: str, paths: list[str], fds: list[int]):
    """Start the child on ``fds`` (stdin, output, result, violation, limit): a fork of the runner's
    warm zygote, or a fresh interpreter when zygotes are switched off or the zygote failed.

    Returns (child, ``details`` entries): ``start`` is ``"zygote"`` or ``"fresh"``; a fresh start
    after a zygote failure carries the one-line reason in ``zygote_error``."""
    from quantgym.sandbox import _zygote

    if not _zygote.enabled():
        return _FreshChild(prefix, tmp, paths, fds), {"start": "fresh"}
    try:
        return _ZygoteChild(_zygote.get(prefix, _child_env, runner.partition(":")[0]), tmp, fds), {"start": "zygote"}
    except (_zygote.ZygoteError, OSError) as exc:
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        return _FreshChild(prefix, tmp, paths, fds), {"start": "fresh", "zygote_error": why}


def run_in_sandbox(
    source: str,
    runner: str,
    payload: Any = None,
    limits: SandboxLimits = SandboxLimits(),
    filename: str = "<agent>",
) -> SandboxResult:
    """Run untrusted ``source`` in a fresh, locked-down child process.

    The child (``python -s -P -c <bootstrap>``, started with ``start_new_session=True``, a clean
    environment, cwd = an empty temporary directory, and inside ``unshare --net`` when the host is
    root and that works) imports the runner's module and numpy/pandas/scipy, receives ``payload``
    once through its stdin (pickle, host -> child only), locks down (rlimits, Landlock and seccomp
    where the kernel supports them, audit hook, guarded ``__import__`` for agent code), executes
    ``source`` as a module
    namespace and calls ``runner(namespace, payload)``. The return value comes back as JSON plus
    ``.npy`` arrays (never pickle) and is rebuilt in the host.

    Parameters
    ----------
    source : str
        The agent's Python source code (untrusted).
    runner : str
        ``"package.module:function"`` naming TRUSTED project code with signature
        ``runner(namespace: dict, payload) -> value``. It may raise
        :class:`~quantgym.sandbox.SandboxOutputError` to flag malformed agent output.
    payload : Any
        Picklable data handed to the runner once (e.g. the data panel, a parameter dict).
    limits : SandboxLimits
        CPU / wall / memory / output limits, import allow-list and readable paths.
    filename : str
        Name under which the agent's source appears in tracebacks and messages.

    Returns
    -------
    SandboxResult
        Never raises for agent misbehaviour: every failure is a status plus a one-line message.

    Raises
    ------
    ValueError
        Host-side programming errors: malformed ``runner`` string, runner module not found,
        non-str ``source``, or a payload that cannot be pickled / needs pyarrow in the child.
    """
    if not isinstance(source, str):
        raise ValueError(f"source must be a str, got {type(source).__name__}")
    if not isinstance(limits, SandboxLimits):
        raise ValueError(f"limits must be a SandboxLimits, got {type(limits).__name__}")
    if not isinstance(filename, str) or not filename:
        raise ValueError("filename must be a non-empty str")
    _check_runner(runner)
    lim = asdict(limits)
    lim["readable_paths"] = [os.path.abspath(p) for p in limits.readable_paths]
    request = {"source": source, "filename": filename, "runner": runner, "payload": payload, "limits": lim}
    try:
        data = _payload.dumps(request)
        skeleton = _payload.skeleton(request)  # the same opcodes without the array contents
    except Exception as exc:  # noqa: BLE001 - anything unpicklable is a host error
        raise ValueError(f"payload cannot be pickled for the sandbox: {exc}") from None
    _check_payload_pickle(skeleton)  # one scan of a few kB instead of the whole payload
    del skeleton

    paths = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
    tmp = tempfile.mkdtemp(prefix="qg-sandbox-")
    r_in, w_in = os.pipe()  # the request (host -> child)
    r_out, w_out = os.pipe()  # the child's stdout + stderr
    r_res, w_res = os.pipe()
    r_vio, w_vio = os.pipe()  # violation record: written by the child's audit hook, read here
    # limit record: written by a trusted helper of the runner (e.g. Quant-Arena's keeper) that stopped
    # the child from outside its process (see _child.limit_fd and docs/security.md)
    r_lim, w_lim = os.pipe()
    prefix = _unshare_prefix() if limits.isolate_network else []
    t0 = time.monotonic()
    try:
        try:
            child, start = _start_child(prefix, runner, tmp, paths, [r_in, w_out, w_res, w_vio, w_lim])
        except BaseException:
            for fd in (w_in, r_out, r_res, r_vio, r_lim):
                os.close(fd)
            raise
        finally:
            for fd in (r_in, w_out, w_res, w_vio, w_lim):
                os.close(fd)
        vio_reader = _Reader(r_vio, _VIOLATION_CAP, stop_at_cap=False)
        lim_reader = _Reader(r_lim, _LIMIT_CAP, stop_at_cap=False)
        out_reader = _Reader(r_out, limits.max_output_bytes, stop_at_cap=False)
        res_reader = _Reader(r_res, limits.max_result_bytes, stop_at_cap=True)
        writer = _Writer(w_in, data)
        del data
        out_reader.start()
        res_reader.start()
        vio_reader.start()
        lim_reader.start()
        writer.start()

        timed_out = threading.Event()

        def on_wall() -> None:
            timed_out.set()
            child.kill()

        timer = threading.Timer(limits.wall_seconds, on_wall)
        timer.daemon = True
        timer.start()
        try:
            rc, cpu, maxrss_kb = child.wait()
        finally:
            timer.cancel()
        wall = time.monotonic() - t0
        writer.join(timeout=5)
        res_reader.join(timeout=5)
        out_reader.join(timeout=5)
        vio_reader.join(timeout=5)
        lim_reader.join(timeout=5)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    cpu = float(cpu) if cpu is not None else float("nan")
    maxrss_mb = maxrss_kb / 1024.0 if maxrss_kb is not None else float("nan")
    details: dict[str, Any] = {
        "exit_code": rc if rc >= 0 else None,
        "signal": signal.Signals(-rc).name if rc < 0 and -rc in signal.valid_signals() else None,
        "max_rss_mb": round(maxrss_mb, 1),
        "network_namespace": bool(prefix),
        "pid": child.pid,
        "sandbox_version": SANDBOX_VERSION,
        **start,
    }
    stdout = out_reader.data().decode("utf-8", "replace")
    truncated = out_reader.overflow

    # The first violation the child's audit hook wrote out of process. It overrides the child's own
    # report, which agent code can change (see docs/security.md, "Violations are sticky").
    vio = vio_reader.data().decode("utf-8", "replace").split("\n", 1)[0]
    vio = " ".join(vio.split())[:1000]
    if vio and not vio.startswith("forbidden: "):
        vio = "forbidden: a blocked operation was recorded by the sandbox policy"
    if not vio and rc == _TAMPER_EXIT and not res_reader.data():
        vio = "forbidden: the sandbox's violation record was tampered with"

    def result(status: str, message: str, tb: str | None = None, value: Any = None) -> SandboxResult:
        if vio and (status != "forbidden" or message != vio):
            status, message, value = "forbidden", vio, None
        return SandboxResult(status=status, value=value, message=message, traceback=tb, stdout=stdout,
                             wall_seconds=wall, cpu_seconds=cpu, output_truncated=truncated, details=details)

    lim = lim_reader.data().decode("utf-8", "replace").split("\n", 1)[0]
    lim = " ".join(lim.split())[:1000]
    if lim:  # a trusted helper outside the child's code stopped it (only the child can forge one: self-harm)
        if not lim.startswith("timeout: "):
            lim = "timeout: a time limit enforced outside the sandboxed code was exceeded"
        return result("timeout", lim)
    if timed_out.is_set():
        return result("timeout", f"timeout: wall-clock limit of {limits.wall_seconds:g} s exceeded")
    if res_reader.overflow:
        return result("bad_output", f"bad_output: result larger than max_result_bytes={limits.max_result_bytes}")
    sig = -rc if rc < 0 else None
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= limits.cpu_seconds):
        return result("timeout", f"timeout: CPU-time limit of {limits.cpu_seconds:g} s exceeded")
    frame = res_reader.data()
    if not frame:
        if sig is not None:
            name = details["signal"] or f"signal {sig}"
            if maxrss_mb >= 0.9 * limits.memory_mb:
                return result("memory", f"memory: child killed by {name} near the {limits.memory_mb} MB limit")
            return result("crashed", f"crashed: child process killed by {name} without a result")
        return result("crashed", f"crashed: child process exited with code {rc} without a result")
    try:
        env = _codec.decode_frame(frame)
    except _codec.FrameError as exc:
        return result("bad_output", f"bad_output: {exc}")
    except MemoryError:
        return result("bad_output", "bad_output: result too large to rebuild")
    status = env.get("status")
    message = env.get("message")
    tb = env.get("traceback")
    if status not in ("ok", "error", "forbidden", "memory", "bad_output", "crashed") or not isinstance(message, str):
        return result("bad_output", "bad_output: malformed result envelope from the child")
    if tb is not None and not isinstance(tb, str):
        tb = None
    message = " ".join(message.split())[:1000]
    if tb is not None and len(tb) > 20_000:
        tb = tb[:10_000] + "\n... (traceback truncated) ...\n" + tb[-10_000:]
    if env.get("output_truncated") is True:
        truncated = True
    extra = env.get("extra")
    if isinstance(extra, dict):
        details.update(_child_details(extra))
    if status == "ok":
        return result("ok", "ok", None, env.get("value"))
    return result(status, message, tb)
