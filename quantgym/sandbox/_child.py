"""Entry point of the sandbox child process (``python -m``-style bootstrap, see ``_host``).

One module on purpose: everything the child runs after lockdown must already be imported before
it, so the bootstrap, the request reader and the result writer stay in this one module.

Protocol
--------
* fd 0 (stdin): one pickled request ``{"source", "filename", "runner", "payload", "limits", ...}``
  from the trusted host (pickle is fine in the host -> child direction).
* fd 1/2: captured output (both go to the same pipe; capped here and in the host reader).
* fd ``RESULT_FD`` (argv[1]): the result frame of :mod:`quantgym.sandbox._codec` (never pickle).
* fd ``VIOLATION_FD`` (argv[3]): the violation record. The audit hook writes one line per refused
  operation; the host takes the first line as the run's status, whatever the result frame says.
* fd ``LIMIT_FD`` (argv[4], :func:`limit_fd`): the limit record. A trusted helper process that the
  runner forks before lockdown (Quant-Arena's keeper) writes one ``"timeout: ..."`` line there and
  kills the child when a deadline it measures from outside the child's process passes; the host
  then reports status ``"timeout"`` with that line.

Sequence: read the request -> import the runner's module, numpy, pandas, scipy, the allowed
modules and the allowed modules the agent's source imports -> lockdown (rlimits, Landlock
read-only allow-list, seccomp filter, stubs for unaudited primitives, lockdown import finder,
audit hook) -> exec the agent's source as a module -> ``runner(namespace, payload)`` -> encode and
send the value -> ``os._exit``. See docs/security.md.

Longer than 500 lines as one job, one child run from request to result frame: the paths gathered before lockdown
feed the audit hook, the Landlock rules and the pruned ``sys.path`` after it, so the sequence is audited in the
order it runs.
"""

from __future__ import annotations

import importlib
import io
import linecache
import os
import pickle
import resource
import signal
import sys
import time
import traceback as _tb

from quantgym.sandbox import _codec, _landlock, _policy, _seccomp
from quantgym.sandbox._types import SandboxOutputError

#: Modules imported before lockdown (the common ones, so that most runs need no lazy import).
PRELOAD = (
    "numpy",
    "numpy.linalg",
    "numpy.fft",
    "numpy.random",
    "pandas",
    "scipy",
    "statistics",
    "collections",
    "collections.abc",
    "itertools",
    "functools",
    "dataclasses",
    "typing",
    "datetime",
    "math",
    "zoneinfo",
)
#: scipy submodules pre-imported only when the agent's source mentions scipy (they cost ~1 s).
SCIPY_COMMON = (
    "scipy.stats",
    "scipy.optimize",
    "scipy.linalg",
    "scipy.special",
    "scipy.signal",
    "scipy.interpolate",
    "scipy.sparse",
    "scipy.integrate",
    "scipy.spatial",
    "scipy.ndimage",
    "scipy.cluster",
    "scipy.fft",
)
_MAX_SOURCE_PRELOADS = 64


def _source_imports(source: str, allowed: tuple[str, ...]) -> list[str]:
    """Allowed module names the agent's source imports (parsed with ``ast``, never executed).

    They are imported before lockdown so that agent imports rarely need lazy loading afterwards.
    Lazy loading still works (the package directories stay readable); this is for speed and
    robustness against libraries that probe the file system while importing.
    """
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names if a.name != "*"]
    if "scipy" in source:
        names += list(SCIPY_COMMON)
    out: list[str] = []
    for n in names:
        if n.partition(".")[0] in allowed and n not in out:
            out.append(n)
    return out[:_MAX_SOURCE_PRELOADS]

#: Third-party modules that must never be loaded in the child (they do file/network I/O in
#: native code that no audit hook sees); pandas falls back to its pure-numpy code paths.
NEVER_LOAD = ("pyarrow", "fsspec", "numexpr", "numba", "cffi", "_cffi_backend", "tables", "h5py",
              "sqlalchemy", "psycopg2", "s3fs", "gcsfs", "botocore", "boto3", "requests", "urllib3")


class _NeverLoad:
    """Meta-path finder refusing :data:`NEVER_LOAD` (installed before any import)."""

    def find_spec(self, name, path=None, target=None):  # noqa: D401 - importlib protocol
        if name.partition(".")[0] in NEVER_LOAD:
            raise ImportError(f"{name} is not available inside the quantgym sandbox")
        return None


class _CappedWriter(io.TextIOBase):
    """Text stream writing UTF-8 to a file descriptor until ``cap`` bytes, then dropping."""

    def __init__(self, fd: int, cap: int) -> None:
        self._fd, self._cap, self._written, self.truncated = fd, cap, 0, False

    def writable(self) -> bool:
        return True

    def write(self, s) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s)
        if self._written >= self._cap:
            self.truncated = True
            return n
        room = self._cap - self._written
        if len(s) > room:  # every character takes at least one byte: never encode more than fits
            s, self.truncated = s[:room], True
        data = s.encode("utf-8", "replace")
        if len(data) > room:
            data, self.truncated = data[:room], True
        self._written += len(data)
        view = memoryview(data)
        while view:
            try:
                k = os.write(self._fd, view)
            except InterruptedError:
                continue
            except OSError:
                return n
            view = view[k:]
        return n

    def flush(self) -> None:
        return None

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def isatty(self) -> bool:
        return False


_LIMIT_FD = -1


def limit_fd() -> int:
    """The limit-record fd of this sandbox child (-1 outside one); for trusted pre-lockdown helpers.

    A helper forked by the runner's ``sandbox_prepare`` hook keeps it open, and on a deadline it
    enforces writes one line starting ``"timeout: "`` to it, then kills the child with SIGKILL.
    """
    return _LIMIT_FD


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            k = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[k:]


def _realpath_roots(paths) -> tuple[str, ...]:
    out: list[str] = []
    for p in paths:
        for q in (os.path.abspath(p), os.path.realpath(p)):
            q = os.path.normpath(q)
            if q not in out:
                out.append(q)
    return tuple(out)


def _code_roots(allowed: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(stdlib-like code dirs, excluded dirs, allowed package dirs) readable after lockdown."""
    import sysconfig

    roots: list[str] = []
    for key in ("stdlib", "platstdlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            roots.append(p)
    for tz in ("/usr/share/zoneinfo", "/usr/lib/zoneinfo", "/usr/share/lib/zoneinfo"):
        if os.path.isdir(tz):
            roots.append(tz)
    excluded: list[str] = []
    packages: list[str] = []
    for key in ("purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            excluded.append(p)
    for p in sys.path:
        if p and ("site-packages" in p or "dist-packages" in p):
            excluded.append(p)
    for name in allowed:
        mod = sys.modules.get(name)
        if mod is None:
            continue
        for d in list(getattr(mod, "__path__", []) or []) + [os.path.dirname(getattr(mod, "__file__", "") or "")]:
            if d and os.path.basename(os.path.normpath(d)) == name:
                packages.append(d)
                parent = os.path.dirname(os.path.normpath(d))
                libs = os.path.join(parent, name + ".libs")
                if os.path.isdir(libs):
                    packages.append(libs)
                try:  # package metadata (importlib.metadata look-ups made by the libraries)
                    for entry in os.listdir(parent):
                        if entry.lower().startswith(name.lower() + "-") and entry.endswith(".dist-info"):
                            packages.append(os.path.join(parent, entry))
                except OSError:
                    pass
    return (_realpath_roots(r for r in roots if r), _realpath_roots(e for e in excluded if e),
            _realpath_roots(p for p in packages if p))


def _module_files() -> tuple[str, ...]:
    """Absolute and real paths of the files of every loaded module (their metadata stays visible)."""
    out: set[str] = set()
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if isinstance(f, str) and f:
            out.add(os.path.normpath(os.path.abspath(f)))
            out.add(os.path.realpath(f))
    return tuple(sorted(out))


def _stdlib_roots() -> tuple[str, ...]:
    """The standard-library directories (frames of their files are transparent to the frame policy)."""
    import sysconfig

    paths = sysconfig.get_paths()
    return _realpath_roots(p for p in (paths.get("stdlib"), paths.get("platstdlib")) if p)


def _quiet_source_lookups(violations: list) -> None:
    """Make warnings and linecache lookups of unreadable source files harmless after lockdown.

    Library warnings and traceback formatting read source lines of trusted files (e.g. the runner
    module) that the agent may not read. Such lookups return no line instead of counting as a
    violation (the open itself is still refused by the audit hook).
    """
    import warnings

    orig = linecache.updatecache

    def updatecache(filename, module_globals=None, _orig=orig, _viol=violations, _V=_policy.SandboxViolation):
        n = len(_viol)
        try:
            return _orig(filename, module_globals)
        except _V:
            del _viol[n:]
            return []

    linecache.updatecache = updatecache

    orig_check = linecache.checkcache

    def checkcache(filename=None, _orig=orig_check, _viol=violations, _V=_policy.SandboxViolation, _lc=linecache):
        n = len(_viol)
        try:
            return _orig(filename)
        except _V:  # the os.stat of a cached, now unreadable file (see _policy.guard_stat)
            del _viol[n:]
            if filename is None:
                _lc.cache.clear()
            else:
                _lc.cache.pop(filename, None)

    linecache.checkcache = checkcache

    def formatwarning(message, category, filename, lineno, line=None):
        return f"{filename}:{lineno}: {category.__name__}: {message}\n"

    warnings.formatwarning = formatwarning


def _warm_up() -> None:
    """Trigger library caches that would otherwise read files lazily after lockdown."""
    import numpy as np

    np.random.default_rng(0).standard_normal(4)
    pd = sys.modules.get("pandas")
    if pd is None:
        return
    try:  # pandas >= 3 parses CSV with worker threads; threads are blocked in the sandbox
        pd.set_option("mode.max_threads", 1)
    except (KeyError, ValueError, AttributeError, pd.errors.OptionError):
        pass
    try:  # cgroup probing in /sys (cached for the process lifetime)
        from pandas.compat._cpu import available_cpu_count

        available_cpu_count()
    except Exception:  # noqa: BLE001 - older pandas has no such helper
        pass


def _disable_unaudited(violations: list) -> None:
    """Replace loaded primitives that raise no audit event with blocking stubs.

    ``_posixsubprocess.fork_exec`` (loaded by pandas via ``subprocess``) creates processes without
    an audit event; the seccomp filter would refuse the fork anyway, this makes it a clear
    "forbidden" instead of an OSError. Thread creation raises no audit event in Python 3.11.
    """

    def stub(what: str, category: str):
        msg = f"forbidden: {category} ({what}) is not allowed in the sandbox"

        def blocked(*args, _viol=violations, _V=_policy.SandboxViolation, _msg=msg, _audit=sys.audit, **kwargs):
            _audit("quantgym.sandbox.violation", _msg)  # the audit hook records and raises
            _viol.append(_msg)
            raise _V(_msg)

        return blocked

    mod = sys.modules.get("_posixsubprocess")
    if mod is not None:
        mod.fork_exec = stub("_posixsubprocess.fork_exec", "process creation")
    # Python 3.11 raises no audit event when a thread starts.
    import _thread
    import threading

    _thread.start_new_thread = _thread.start_new = stub("_thread.start_new_thread", "starting threads")
    threading._start_new_thread = _thread.start_new_thread


def _prune_sys_path(code_roots, excluded) -> None:
    """Keep only the stdlib and site-packages entries of ``sys.path`` for lazy imports after lockdown.

    Everything the runner needs is imported already; other entries (the host's cwd, the project
    checkout) would only make importlib scan directories the sandbox does not expose.
    """

    def keep(p: str) -> bool:
        if not p or not os.path.isdir(p):
            return False
        q = os.path.realpath(p)
        return q in excluded or p in excluded or any(q == r or q.startswith(r + "/") for r in code_roots)

    sys.path[:] = [p for p in sys.path if keep(p)]
    sys.path_importer_cache.clear()


def _install_kernel_layers(code_roots, excluded, package_roots, readable) -> dict:
    """Install the optional kernel layers (Landlock, seccomp); the run goes on without a refused one.

    Returns ``{"landlock": ABI version or 0, "seccomp": bool}`` plus ``"landlock_error"`` /
    ``"seccomp_error"`` (``"<ExceptionType>: <text>"``, one line) for a layer whose install raised, so
    the run's ``details`` say why the layer is missing.
    """
    out: dict = {"landlock": 0, "seccomp": False}
    try:
        ll_dirs, ll_files, ll_list = _landlock_paths(code_roots, excluded, package_roots, readable)
        out["landlock"] = int(_landlock.install(ll_dirs, ll_files, ll_list))
    except Exception as exc:  # noqa: BLE001 - optional hardening layer: recorded, not fatal
        out["landlock_error"] = _layer_error(exc)
    try:
        out["seccomp"] = bool(_seccomp.install())
    except Exception as exc:  # noqa: BLE001 - optional hardening layer: recorded, not fatal
        out["seccomp_error"] = _layer_error(exc)
    return out


def _layer_error(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:500]


def _landlock_paths(code_roots, excluded, package_roots, readable) -> tuple[list, list, list]:
    """(readable dirs, readable files, list-only dirs) for the Landlock layer.

    Mirrors the audit hook's read policy with allow-only kernel rules: a code root that contains
    an excluded directory (site-packages inside the stdlib dir) is granted entry by entry.
    """
    import sysconfig

    def contains_excluded(d: str) -> bool:
        return any(e == d or e.startswith(d.rstrip("/") + "/") for e in excluded)

    dirs: list[str] = list(package_roots)
    files: list[str] = ["/dev/null", "/dev/urandom"]
    listing: list[str] = [e for e in excluded if os.path.isdir(e)]
    for root in code_roots:
        if not contains_excluded(root):
            dirs.append(root)
            continue
        listing.append(root)
        try:
            entries = os.listdir(root)
        except OSError:
            continue
        for name in entries:
            p = os.path.join(root, name)
            if contains_excluded(p):
                continue
            (dirs if os.path.isdir(p) else files).append(p)
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for d in ("/lib", "/lib64", "/usr/lib", "/usr/lib64"):
        if not os.path.isdir(d):
            continue
        if not contains_excluded(d):
            dirs.append(d)
        elif multiarch and os.path.isdir(os.path.join(d, multiarch)):
            dirs.append(os.path.join(d, multiarch))
    try:  # shared libraries already mapped (libpython, OpenBLAS, ...) stay readable
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/") and ".so" in parts[5]:
                    f = parts[5].strip()
                    if f not in files:
                        files.append(f)
    except OSError:
        pass
    for p in readable:
        (dirs if os.path.isdir(p) else files).append(p)
    return dirs, files, listing


def _set_rlimits(limits: dict) -> None:
    cpu_now = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    cpu = int(cpu_now + float(limits["cpu_seconds"]) + 0.999)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    mem = int(limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    if os.geteuid() != 0:  # RLIMIT_NPROC is not enforced for root; seccomp/audit cover that case
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))


#: the installed ``quantgym`` package directory: its frames (the import guard, the runner) are the
#: sandbox's own and are left out of the agent's traceback
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _shown_path(path: str) -> str:
    """A library frame's file as the agent sees it: relative to its ``sys.path`` entry
    (``numpy/_core/fromnumeric.py``), else its base name. Never an absolute path of this machine, so
    feedback (and an LLM prompt quoting it) is the same on every machine and checkout."""
    roots = sorted({os.path.abspath(p) for p in sys.path if p}, key=len, reverse=True)
    for r in roots:
        if path.startswith(r + os.sep):
            return path[len(r) + 1:]
    return os.path.basename(path)


def _agent_traceback(exc: BaseException, filename: str) -> str | None:
    """Traceback text from the first agent frame on; only the exception line if there is none.

    Source lines are shown for agent frames only (from the in-memory source), so formatting never
    opens a file after lockdown. Frames of the sandbox itself (the ``quantgym`` package) are left
    out and library paths are shown relative to their ``sys.path`` entry (:func:`_shown_path`).
    """
    frames = _tb.StackSummary.extract(_tb.walk_tb(exc.__traceback__), lookup_lines=False)
    tail = "".join(_tb.format_exception_only(type(exc), exc))
    first = next((i for i, f in enumerate(frames) if f.filename == filename), None)
    if first is None:
        return tail
    lines = ["Traceback (most recent call last):\n"]
    for f in frames[first:]:
        if f.filename != filename and f.filename.startswith(_PKG_DIR + os.sep):
            continue
        shown = f.filename if f.filename == filename else _shown_path(f.filename)
        lines.append(f'  File "{shown}", line {f.lineno}, in {f.name}\n')
        if f.filename == filename:
            text = linecache.getline(filename, f.lineno or 0).strip()
            if text:
                lines.append(f"    {text}\n")
    return "".join(lines) + tail


def _where(exc: BaseException, filename: str) -> str:
    frames = _tb.StackSummary.extract(_tb.walk_tb(exc.__traceback__), lookup_lines=False)
    agent = [f for f in frames if f.filename == filename]
    if agent:
        f = agent[-1]
        return f" (line {f.lineno} of {filename}, in {f.name})"
    return ""


def _one_line(s: str, limit: int = 500) -> str:
    s = " ".join(str(s).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def main() -> None:  # noqa: C901 - one linear protocol
    result_fd = int(sys.argv[1])
    violation_fd = int(sys.argv[3]) if len(sys.argv) > 3 else -1
    global _LIMIT_FD
    _LIMIT_FD = int(sys.argv[4]) if len(sys.argv) > 4 else -1
    sys.dont_write_bytecode = True
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    sys.meta_path.insert(0, _NeverLoad())

    try:
        request = pickle.load(sys.stdin.buffer)
    except BaseException as exc:  # noqa: BLE001 - e.g. the payload needs a module the child lacks
        env = {"status": "crashed", "traceback": None, "output_truncated": False, "extra": {},
               "message": _one_line(f"crashed: the sandbox could not read its payload: {type(exc).__name__}: {exc}")}
        _write_all(result_fd, _codec.encode_frame(env, None))
        os._exit(0)
    try:
        os.close(0)
    except OSError:
        pass
    sys.stdin = None
    limits: dict = request["limits"]
    filename: str = request["filename"]
    source: str = request["source"]
    allowed = tuple(limits["allowed_imports"])
    t_child0 = time.monotonic()

    def send(status: str, message: str, tb: str | None = None, value=None, extra: dict | None = None) -> None:
        env = {"status": status, "message": _one_line(message), "traceback": tb,
               "output_truncated": bool(out.truncated), "extra": extra or {}}
        try:
            frame = _codec.encode_frame(env, value)
        except _codec.FrameError as exc:
            env.update(status="bad_output", message=_one_line(f"bad_output: {exc}"), traceback=None)
            frame = _codec.encode_frame(env, None)
        except MemoryError:
            env.update(status="memory", message="memory: out of memory while encoding the result", traceback=None)
            frame = _codec.encode_frame(env, None)
        try:
            _write_all(result_fd, frame)
        except OSError:
            pass
        os._exit(0)

    # Output capture (C-level writes to fd 1/2 are capped by the host reader).
    out = _CappedWriter(1, int(limits["max_output_bytes"]))
    sys.stdout = sys.stderr = out
    sys.__stdout__ = sys.__stderr__ = out  # type: ignore[misc]

    # ---- trusted phase: imports before lockdown
    modname, _, funcname = request["runner"].partition(":")
    try:
        runner_mod = importlib.import_module(modname)
        runner = runner_mod
        for part in funcname.split("."):
            runner = getattr(runner, part)
        for m in PRELOAD:
            try:
                importlib.import_module(m)
            except ImportError:
                pass
        for m in _source_imports(source, allowed):
            if m not in sys.modules:
                try:
                    importlib.import_module(m)
                except Exception:  # noqa: BLE001 - e.g. "from numpy import pi" names no module
                    pass
        for m in allowed:
            if m not in sys.modules:
                try:
                    importlib.import_module(m)
                except ImportError:
                    pass
        _warm_up()
        payload = request["payload"]
        del request
        prepare = getattr(runner, "sandbox_prepare", None)
        if callable(prepare):  # trusted pre-lockdown hook of the runner (see docs/security.md)
            payload = prepare(payload)
        allow_frames = limits.get("allow_frame_introspection")
        if allow_frames is None:  # the runner's choice (see docs/security.md "Frame introspection")
            allow_frames = getattr(runner, "sandbox_allow_frame_introspection", False) is True
        allow_frames = bool(allow_frames)
        code_roots, excluded, package_roots = _code_roots(allowed)
        readable = _realpath_roots(limits["readable_paths"])
    except BaseException as exc:  # noqa: BLE001 - setup failure is a host-side problem
        send("crashed", f"crashed: sandbox set-up failed: {type(exc).__name__}: {exc}",
             "".join(_tb.format_exception(type(exc), exc, exc.__traceback__)))
        return

    # ---- lockdown
    _prune_sys_path(code_roots, excluded)
    violations: list[str] = []
    cwd = os.getcwd()
    hook = _policy.build_audit_hook(
        allowed_imports=allowed,
        readable_roots=readable,
        code_roots=code_roots,
        excluded_roots=excluded,
        package_roots=package_roots,
        cwd=cwd,
        violations=violations,
        agent_filename=filename,
        forbid_frames=not allow_frames,
        stdlib_roots=_stdlib_roots(),
        frame_api=_policy.frame_api_snapshot(),
        violation_fd=violation_fd,
        stat_files=_module_files(),
    )
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    _quiet_source_lookups(violations)
    namespace = {"__name__": "__agent__", "__file__": filename, "__builtins__": _policy.agent_builtins(allowed, violations)}
    try:
        _set_rlimits(limits)
    except (OSError, ValueError) as exc:
        send("crashed", f"crashed: sandbox could not set resource limits: {exc}")
    extra = _install_kernel_layers(code_roots, excluded, package_roots, readable)
    _disable_unaudited(violations)
    _policy.guard_stat()
    _policy.install(hook, allowed)
    cpu0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    extra.update(frame_policy=not allow_frames, startup_seconds=round(time.monotonic() - t_child0, 4))

    # ---- untrusted phase
    value = None
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
        exec(code, namespace)
        value = runner(namespace, payload)
    except _policy.SandboxViolation as exc:
        send("forbidden", violations[0] if violations else str(exc), _agent_traceback(exc, filename), extra=extra)
    except SandboxOutputError as exc:
        if violations:
            send("forbidden", violations[0], None, extra=extra)
        send("bad_output", f"bad_output: {exc}", None, extra=extra)
    except MemoryError as exc:
        if violations:
            send("forbidden", violations[0], None, extra=extra)
        send("memory", f"memory: allocation failed under the {limits['memory_mb']} MB limit"
             + (f": {exc}" if str(exc) else ""), _agent_traceback(exc, filename), extra=extra)
    except SyntaxError as exc:
        send("error", f"error: SyntaxError: {exc.msg} (line {exc.lineno} of {filename})",
             _agent_traceback(exc, filename), extra=extra)
    except BaseException as exc:  # noqa: BLE001 - agent code may raise anything
        if violations:
            send("forbidden", violations[0], _agent_traceback(exc, filename), extra=extra)
        if isinstance(exc, SystemExit):
            msg = f"error: agent code called exit({exc.code!r})"
        elif isinstance(exc, KeyboardInterrupt):
            msg = "error: KeyboardInterrupt"
        else:
            msg = f"error: {type(exc).__name__}: {exc}{_where(exc, filename)}"
        send("error", msg, _agent_traceback(exc, filename), extra=extra)
    if violations:
        send("forbidden", violations[0], None, extra=extra)
    extra["agent_cpu_seconds"] = round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - cpu0, 4)
    send("ok", "ok", None, value=value, extra=extra)


if __name__ == "__main__":  # pragma: no cover - started by the host
    main()
