"""Warm start of sandbox children: a zygote process that forks one fresh child per run.

Starting a child interpreter and importing numpy, pandas and scipy costs a second or more of CPU per
run. A *zygote* (the term of Android's app launcher) pays it once: a process started exactly like a
sandbox child (``python -s -P``, the minimal environment, its own session, an empty temporary cwd,
``unshare --net`` where the host uses it) imports :data:`~quantgym.sandbox._child.PRELOAD` and the
runner's module, with the never-loaded modules refused as in the child, then only ever ``fork()``\\ s.
The zygote never reads a payload and never runs agent code. Each run is a new fork of it; a child
that ran agent code is never reused. The forked child becomes a sandbox child as if started afresh
(new session, its own cwd, ``HOME`` and ``TMPDIR``, its descriptors only, numpy's global random state
reseeded from the OS) and runs :func:`quantgym.sandbox._child.main`, which reads the request and
locks down exactly as a freshly started child does (rlimits, Landlock, seccomp, import policy, audit
hook: docs/security.md).

The zygote is the child's parent: it waits for the child, kills what is left of its process group,
reaps the group (it is a child subreaper, so the processes the child forked come back to it) and
reports the exit status and the kernel's rusage to the host over a ``SOCK_SEQPACKET`` socket. The
host's wall-clock timer asks the zygote to kill the group (the zygote alone knows when the group id
is no longer pinned by an unreaped leader).

Protocol (one JSON object per packet; descriptors as ``SCM_RIGHTS``):

* zygote -> host ``{"op": "ready"}`` once warm;
* host -> zygote ``{"op": "spawn", "id", "tmp", "runner"}`` with the child's descriptors
  ``[stdin, output, result, violation, limit]``; reply ``{"op": "spawned", "id", "pid"}`` or
  ``{"op": "spawned", "id", "error"}``;
* host -> zygote ``{"op": "kill", "pid"}``;
* zygote -> host ``{"op": "exited", "pid", "code", "cpu", "maxrss_kb"}`` for every child.

The zygote exits when the host's end of the socket closes, killing its running children first: at the
host's exit or :func:`close_all`, and when the host dies (the kernel closes the host's descriptors; the
socket is not inherited by the host's other children). ``PR_SET_PDEATHSIG`` is not used: it fires when the
host *thread* that started the zygote ends, e.g. a worker of a thread pool.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
import threading

_PR_SET_CHILD_SUBREAPER = 36
_MSG = 65536
#: descriptors of one spawn request: stdin, output, result, violation record, limit record
N_FDS = 5


def _prctl(option: int, value: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except Exception:  # noqa: BLE001 - optional: without it, grandchildren are reaped by init
        pass


def _send(sock: socket.socket, msg: dict) -> None:
    try:
        sock.send(json.dumps(msg).encode())
    except OSError:
        pass


def _close_all_but(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _become_child(fds: list[int], tmp: str) -> None:
    """In the fork: turn into a fresh sandbox child and run its protocol (never returns)."""
    from quantgym.sandbox import _child

    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    stdin_fd, out_fd, res_fd, vio_fd, lim_fd = fds
    os.dup2(stdin_fd, 0)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    _close_all_but({res_fd, vio_fd, lim_fd})
    os.chdir(tmp)
    os.environ["HOME"] = os.environ["TMPDIR"] = tmp
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = None
    np = sys.modules.get("numpy")
    if np is not None:  # a fresh interpreter seeds numpy's global RandomState from the OS
        np.random.seed()
    sys.argv = ["-c", str(res_fd), sys.argv[2], str(vio_fd), str(lim_fd)]
    _child.main()


def serve() -> None:  # noqa: C901 - one event loop
    """Zygote entry point: ``argv = [-c, <socket fd>, <sys.path json>]``."""
    from quantgym.sandbox import _child
    from quantgym.sandbox._host import _killpg, _reap_group

    import importlib

    sys.dont_write_bytecode = True
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    sock = socket.socket(fileno=int(sys.argv[1]))
    sys.meta_path.insert(0, _child._NeverLoad())
    for m in _child.PRELOAD:
        try:
            importlib.import_module(m)
        except ImportError:
            pass
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: set[int] = set()
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    _send(sock, {"op": "ready"})

    def sweep() -> None:
        for pid in list(children):
            try:
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                children.discard(pid)
                continue
            if info is None:
                continue
            _killpg(pid)  # the group id is pinned by the unreaped leader
            _reap_group(pid)
            try:
                _pid, status, ru = os.wait4(pid, 0)
                msg = {"op": "exited", "pid": pid, "code": os.waitstatus_to_exitcode(status),
                       "cpu": ru.ru_utime + ru.ru_stime, "maxrss_kb": ru.ru_maxrss}
            except ChildProcessError:
                msg = {"op": "exited", "pid": pid, "code": -signal.SIGKILL, "cpu": None, "maxrss_kb": None}
            children.discard(pid)
            _send(sock, msg)

    def shutdown() -> None:
        for pid in children:
            _killpg(pid)
        for pid in list(children):
            _reap_group(pid)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        os._exit(0)

    while True:
        for key, _ in sel.select(timeout=1.0):
            if key.fileobj is sock:
                try:
                    data, fds, _flags, _addr = socket.recv_fds(sock, _MSG, N_FDS)
                except OSError:
                    shutdown()
                if not data:
                    shutdown()
                try:
                    req = json.loads(data)
                except ValueError:
                    req = {}
                if req.get("op") == "kill":
                    if req.get("pid") in children:
                        _killpg(int(req["pid"]))
                elif req.get("op") == "spawn" and len(fds) == N_FDS:
                    runner = str(req.get("runner") or "")
                    if runner and runner not in sys.modules:
                        try:  # trusted project code, imported pre-lockdown by every child anyway
                            importlib.import_module(runner)
                        except BaseException:  # noqa: BLE001 - the child reports it itself
                            pass
                    sys.stdout.flush()
                    sys.stderr.flush()
                    try:
                        pid = os.fork()
                    except OSError as exc:
                        _send(sock, {"op": "spawned", "id": req.get("id"), "error": f"fork: {exc}"})
                        pid = -1
                    if pid == 0:
                        try:
                            _become_child(fds, str(req["tmp"]))
                        finally:
                            os._exit(70)
                    if pid > 0:
                        children.add(pid)
                        _send(sock, {"op": "spawned", "id": req.get("id"), "pid": pid})
                for fd in fds:
                    os.close(fd)
            else:
                try:
                    while os.read(wake_r, 512):
                        pass
                except (BlockingIOError, OSError):
                    pass
        sweep()


# ---------------------------------------------------------------------------------------- host side
_BOOTSTRAP = (
    "import sys, json; sys.dont_write_bytecode = True; sys.path[:] = json.loads(sys.argv[2]); "
    "from quantgym.sandbox._zygote import serve; serve()"
)
#: seconds the host waits for a zygote to import its modules, and for a fork
READY_SECONDS = 120.0
SPAWN_SECONDS = 60.0


class ZygoteError(RuntimeError):
    """The zygote could not start, fork, or went away (the run falls back to a fresh interpreter)."""


class Zygote:
    """Host handle of one zygote process (one per runner module and network isolation)."""

    def __init__(self, prefix: list[str], env_for, runner_module: str) -> None:
        import subprocess
        import tempfile

        self.runner_module = runner_module
        self.owner = os.getpid()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._spawned: dict[int, dict] = {}
        self._exited: dict[int, dict] = {}
        self._next = 0
        self.dead: str | None = None
        self.tmp = tempfile.mkdtemp(prefix="qg-zygote-")
        host_end, zyg_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        paths = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
        try:
            self.proc = subprocess.Popen(
                prefix + [sys.executable, "-s", "-P", "-c", _BOOTSTRAP, str(zyg_end.fileno()), json.dumps(paths)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(zyg_end.fileno(),), cwd=self.tmp, env=env_for(self.tmp), start_new_session=True,
                close_fds=True)
        finally:
            zyg_end.close()
        self.sock = host_end
        self.sock.settimeout(READY_SECONDS)
        try:
            ready = json.loads(self.sock.recv(_MSG) or b"{}")
        except (OSError, ValueError) as exc:
            self.close()
            raise ZygoteError(f"zygote did not start: {exc}") from None
        if ready.get("op") != "ready":
            self.close()
            raise ZygoteError(f"zygote did not start (exit code {self.proc.poll()})")
        self.sock.settimeout(None)
        self._reader = threading.Thread(target=self._read, name="quantgym-sandbox-zygote", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(_MSG)
            except OSError:
                data = b""
            with self._cond:
                if not data:
                    self.dead = self.dead or f"zygote exited (code {self.proc.poll()})"
                    self._cond.notify_all()
                    return
                try:
                    msg = json.loads(data)
                except ValueError:
                    continue
                if msg.get("op") == "spawned":
                    self._spawned[int(msg.get("id", -1))] = msg
                elif msg.get("op") == "exited":
                    self._exited[int(msg["pid"])] = msg
                self._cond.notify_all()

    def spawn(self, fds: list[int], tmp: str) -> int:
        """Fork a child on ``fds`` (see :data:`N_FDS`) with cwd ``tmp``; its pid."""
        with self._cond:
            if self.dead:
                raise ZygoteError(self.dead)
            rid = self._next
            self._next += 1
            msg = json.dumps({"op": "spawn", "id": rid, "tmp": tmp, "runner": self.runner_module}).encode()
            try:
                socket.send_fds(self.sock, [msg], fds)
            except OSError as exc:
                self.dead = f"zygote unreachable: {exc}"
                raise ZygoteError(self.dead) from None
            if not self._cond.wait_for(lambda: rid in self._spawned or self.dead, SPAWN_SECONDS):
                raise ZygoteError("zygote did not fork within "
                                  f"{SPAWN_SECONDS:g} s")
            reply = self._spawned.pop(rid, None)
            if reply is None:
                raise ZygoteError(self.dead or "zygote gave no answer")
            if "pid" not in reply:
                raise ZygoteError(str(reply.get("error", "zygote could not fork")))
            return int(reply["pid"])

    def kill(self, pid: int) -> None:
        """Ask the zygote to kill the process group of its child ``pid`` (ignored once reaped)."""
        with self._lock:
            if self.dead:
                from quantgym.sandbox._host import _killpg

                _killpg(pid)  # best effort: the zygote that pinned the group is gone
                return
            try:
                self.sock.send(json.dumps({"op": "kill", "pid": pid}).encode())
            except OSError:
                pass

    def wait(self, pid: int) -> tuple[int, float | None, float | None]:
        """Block until child ``pid`` was reaped: (exit code as in ``subprocess``, CPU seconds, max RSS KiB)."""
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exited or self.dead)
            msg = self._exited.pop(pid, None)
        if msg is None:  # the zygote died without killing its children: kill the group here
            from quantgym.sandbox._host import _killpg

            _killpg(pid)
            return -signal.SIGKILL, None, None
        return int(msg["code"]), msg.get("cpu"), msg.get("maxrss_kb")

    def close(self) -> None:
        import shutil

        try:  # shutdown, not only close: it wakes the reader thread's recv and the zygote sees EOF
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - it saw EOF and exits on its own
            pass
        shutil.rmtree(self.tmp, ignore_errors=True)


_ZYGOTES: dict[tuple, Zygote] = {}
_ZYGOTES_LOCK = threading.Lock()


def get(prefix: list[str], env_for, runner_module: str) -> Zygote:
    """The zygote of ``runner_module`` (started on first use; restarted after it died or a fork of the host)."""
    import atexit

    if not _ZYGOTES:
        atexit.unregister(close_all)
        atexit.register(close_all)
    key = (tuple(prefix), sys.executable, runner_module)
    with _ZYGOTES_LOCK:
        z = _ZYGOTES.get(key)
        if z is not None and (z.dead or z.owner != os.getpid()):
            if z.owner == os.getpid():
                z.close()
            z = None
        if z is None:
            z = _ZYGOTES[key] = Zygote(prefix, env_for, runner_module)
        return z


def close_all() -> None:
    """Stop every zygote of this process (at exit; their running children are killed)."""
    for z in list(_ZYGOTES.values()):
        if z.owner == os.getpid():
            z.close()
    _ZYGOTES.clear()


def enabled() -> bool:
    """Runs fork from a zygote unless ``QUANTGYM_SANDBOX_ZYGOTE=0`` (each run then starts a fresh interpreter)."""
    return os.environ.get("QUANTGYM_SANDBOX_ZYGOTE", "1").strip().lower() not in ("0", "false", "no", "off")
