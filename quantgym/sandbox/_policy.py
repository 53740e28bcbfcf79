"""Lockdown policy of the sandbox child: audit hook and guarded ``__import__``.

Longer than 500 lines as one job, the child's lockdown policy: the audit hook, the import guard and the frame
rules share one state and must be read together to audit them.

Only the child process imports this module. Everything the hook needs at run time is bound as
a default argument when the hook is built (default-argument tuples are immutable and replacing
``__defaults__``/``__code__`` raises an audited event the hook blocks), so agent code that reaches
a module object cannot patch ``os.path`` or builtins to change the policy's decisions.

One module on purpose: the hook's whole decision table (events, paths, modules, frames) is bound
into one closure; split across modules it could not be reviewed as the single policy it is.
"""

from __future__ import annotations

import builtins
import os
import sys
import types

#: Events blocked after lockdown: (prefix, category). A prefix ending in "." matches a family.
BLOCKED_EVENTS: tuple[tuple[str, str], ...] = (
    ("socket.", "network access"),
    ("urllib.Request", "network access"),
    ("http.client.", "network access"),
    ("ftplib.", "network access"),
    ("smtplib.", "network access"),
    ("poplib.", "network access"),
    ("imaplib.", "network access"),
    ("nntplib.", "network access"),
    ("telnetlib.", "network access"),
    ("webbrowser.open", "network access"),
    ("ctypes.", "ctypes / native code"),
    ("os.system", "process creation"),
    ("os.exec", "process creation"),
    ("os.fork", "process creation"),
    ("os.forkpty", "process creation"),
    ("os.posix_spawn", "process creation"),
    ("os.spawn", "process creation"),
    ("os.startfile", "process creation"),
    ("subprocess.Popen", "process creation"),
    ("pty.spawn", "process creation"),
    ("os.kill", "sending signals"),
    ("os.killpg", "sending signals"),
    ("signal.pthread_kill", "sending signals"),
    ("_thread.start_new_thread", "starting threads"),
    ("resource.setrlimit", "changing resource limits"),
    ("resource.prlimit", "changing resource limits"),
    ("sys.addaudithook", "interpreter introspection"),
    ("sys.settrace", "interpreter introspection"),
    ("sys.setprofile", "interpreter introspection"),
    ("sys._current_frames", "interpreter introspection"),
    ("sys._current_exceptions", "interpreter introspection"),
    ("gc.get_objects", "interpreter introspection"),
    ("gc.get_referrers", "interpreter introspection"),
    ("gc.get_referents", "interpreter introspection"),
    ("os.chdir", "changing the working directory"),
    ("os.putenv", "changing the environment"),
    ("os.unsetenv", "changing the environment"),
    ("os.remove", "file modification"),
    ("os.rename", "file modification"),
    ("os.rmdir", "file modification"),
    ("os.mkdir", "file modification"),
    ("os.symlink", "file modification"),
    ("os.link", "file modification"),
    ("os.truncate", "file modification"),
    ("os.chmod", "file modification"),
    ("os.chown", "file modification"),
    ("os.chflags", "file modification"),
    ("os.lchflags", "file modification"),
    ("os.utime", "file modification"),
    ("os.setxattr", "file modification"),
    ("os.removexattr", "file modification"),
    ("os.mkfifo", "file modification"),
    ("os.mknod", "file modification"),
    ("shutil.", "file modification"),
    ("os.getxattr", "file access"),
    ("os.listxattr", "file access"),
    ("mmap.__new__", "memory-mapping files"),
    ("winreg.", "registry access"),
)

#: Modules that may not be *loaded* after lockdown, by anyone: they offer native capabilities
#: that raise no audit event (cffi, the C-API test modules, unaudited fork_exec, native file and
#: network I/O). Other standard-library modules (socket, subprocess, ...) may load because every
#: dangerous call in them is audited (and refused by the kernel layers). The agent's own imports
#: are limited to ``allowed_imports`` by the guarded ``__import__`` anyway.
DENIED_MODULES = frozenset(
    {
        "ctypes", "_ctypes", "_ctypes_test", "cffi", "_cffi_backend", "_posixsubprocess",
        "_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase", "_testsinglephase",
        "_testimportmultiple", "_testclinic", "_xxsubinterpreters", "_xxinterpchannels", "_xxtestfuzz",
        "pyarrow", "fsspec", "numba", "llvmlite", "requests", "httpx", "aiohttp", "urllib3",
    }
)


#: Attributes whose read hands out a frame object (CPython 3.11 raises "object.__getattr__" for them).
FRAME_ATTRIBUTES: tuple[str, ...] = ("tb_frame", "gi_frame", "cr_frame", "ag_frame")

#: Standard-library files that read frames for their *own* use (module name of the caller) and never
#: hand a frame to their caller: ``collections.namedtuple``, ``typing._caller`` (TypeVar, NamedTuple),
#: the functional ``enum`` API. Every other standard-library frame is *transparent*: when it reads a
#: frame, the frame counts as read by whoever called into the standard library (``inspect``,
#: ``traceback``, ``logging``, ``types``, ``asyncio`` ... return frames to their callers).
STDLIB_FRAME_CONSUMERS: tuple[str, ...] = ("collections/__init__.py", "typing.py", "enum.py")

#: Standard-library functions that hand out the *whole* stack above them (their consumer gets the
#: frames above the submitted code too): refused whenever submitted code is on the stack.
WHOLE_STACK_FUNCTIONS = frozenset({"stack", "getouterframes", "walk_stack", "extract_stack", "format_stack",
                                   "print_stack"})


#: Frame-returning functions of the real modules, snapshot at lockdown. A frame read by library code
#: while any of them has been replaced is refused: a replaced entry point (e.g.
#: ``sys._getframe = defaultdict(sys._getframe).__getitem__``) would let agent code keep the frame that
#: the library asked for.
FRAME_API: tuple[tuple[str, str], ...] = (
    ("sys", "_getframe"),
    ("inspect", "currentframe"),
    ("inspect", "stack"),
    ("inspect", "getouterframes"),
    ("inspect", "getinnerframes"),
    ("inspect", "trace"),
    ("logging", "currentframe"),
    ("traceback", "walk_stack"),
    ("traceback", "walk_tb"),
)

#: Global names through which library code reaches the frame functions. In every frame between the
#: frame read and the library code that asked for it, such a global (when present) must still be the
#: real object; otherwise (``typing.sys = <fake>``, or a library function re-created with agent-made
#: globals) the read is refused.
FRAME_GLOBALS: tuple[tuple[str, str, str | None], ...] = (
    ("sys", "sys", None),
    ("_sys", "sys", None),
    ("inspect", "inspect", None),
    ("logging", "logging", None),
    ("traceback", "traceback", None),
    ("_getframe", "sys", "_getframe"),
    ("currentframe", "inspect", "currentframe"),
    ("currentframe", "logging", "currentframe"),
)


def frame_api_snapshot() -> tuple[tuple, tuple]:
    """Snapshot taken at lockdown: ``(module dict, name, value)`` for :data:`FRAME_API` and
    ``(global name, genuine values)`` for :data:`FRAME_GLOBALS` (modules loaded at that time)."""
    api = []
    for mod_name, attr in FRAME_API:
        d = getattr(sys.modules.get(mod_name), "__dict__", None)
        if isinstance(d, dict) and attr in d:
            api.append((d, attr, d[attr]))
    genuine: dict[str, list] = {}
    for name, mod_name, attr in FRAME_GLOBALS:
        mod = sys.modules.get(mod_name)
        if mod is None:
            continue
        val = mod if attr is None else getattr(mod, attr, None)
        if val is not None:
            genuine.setdefault(name, []).append(val)
    return tuple(api), tuple((k, tuple(v)) for k, v in genuine.items())


class SandboxViolation(BaseException):
    """Raised inside the child when agent code attempts a forbidden operation.

    Derives from ``BaseException`` so that ``except Exception`` in agent or library code does not
    swallow it; every violation is also recorded, so a run that caught one is still "forbidden".
    """


def _lexical_abs(path: str, cwd: str) -> str | None:
    """Absolute, lexically normalised path; None when it contains a '..' component."""
    if not path.startswith("/"):
        path = cwd + "/" + path
    parts = []
    for p in path.split("/"):
        if p == "" or p == ".":
            continue
        if p == "..":
            return None
        parts.append(p)
    return "/" + "/".join(parts)


def build_audit_hook(
    *,
    allowed_imports: tuple[str, ...],
    readable_roots: tuple[str, ...],
    code_roots: tuple[str, ...],
    excluded_roots: tuple[str, ...],
    package_roots: tuple[str, ...],
    cwd: str,
    violations: list,
    agent_filename: str = "<agent>",
    forbid_frames: bool = True,
    stdlib_roots: tuple[str, ...] = (),
    frame_api: tuple = (),
    violation_fd: int = -1,
    stat_files: tuple[str, ...] = (),
):
    """Build the audit hook installed at lockdown.

    Parameters
    ----------
    allowed_imports : tuple of str
        Top-level names whose loading after lockdown is allowed (used only for messages).
    readable_roots : tuple of str
        Absolute normalised files/directories readable by anyone (the run's ``readable_paths``).
    code_roots : tuple of str
        Directories holding library code (stdlib, allowed packages, zoneinfo): readable so that
        lazy imports of library code keep working.
    excluded_roots : tuple of str
        Directories inside ``code_roots`` that stay unreadable (site-packages in general).
    package_roots : tuple of str
        Directories of the allowed third-party packages (numpy, pandas, scipy and their ``.libs``),
        readable even though they sit inside an excluded site-packages directory.
    cwd : str
        The child's working directory (relative paths are resolved against it; chdir is blocked).
    violations : list
        Receives one message per blocked operation (the first one becomes the run's message).
    agent_filename : str
        File name the agent's source was compiled under. Frames whose code has this file name, or
        a pseudo file name such as ``"<string>"`` (code compiled from a string after lockdown),
        are *agent frames*.
    forbid_frames : bool
        Refuse frame introspection by agent code (``sys._getframe``, the frame attributes
        :data:`FRAME_ATTRIBUTES`, whole-stack walks, compiling code under a library file name, and
        building code objects from bytes with ``marshal``; the import system loading a real file is
        exempt).
        See docs/security.md, "Frame introspection".
    stdlib_roots : tuple of str
        Standard-library directories (``sysconfig`` ``stdlib``/``platstdlib``); frames of files
        under them (site-packages excluded) are transparent unless listed in
        :data:`STDLIB_FRAME_CONSUMERS`.
    frame_api : tuple
        :func:`frame_api_snapshot` taken at lockdown (empty: no entry-point checks).
    violation_fd : int
        Write end of the host's violation pipe (-1: none). Every refusal is also written there, so
        agent code that empties ``violations`` cannot hide it. If the descriptor has been closed
        or replaced (checked with ``fstat``), the child exits with code 75 at the next refusal.
        Refused reads by ``linecache`` (source lines of trusted files while formatting tracebacks
        and warnings) are not written there.
    stat_files : tuple of str
        Files whose metadata (``os.stat`` through :func:`guard_stat`, never their content) stays
        available: the files of the modules loaded before lockdown (``inspect`` and ``linecache``
        stat them). Directories above any readable place or such a file are available too.
    """
    allowed_list = ", ".join(allowed_imports)
    blocked = BLOCKED_EVENTS
    # Directories above a readable place: their metadata is implied by it (os.path.realpath lstats each one)
    ancestors: set[str] = {"/"}
    for root in (*readable_roots, *code_roots, *excluded_roots, *package_roots, *stat_files, cwd):
        d = os.path.dirname(root.rstrip("/"))
        while d and d not in ancestors:
            ancestors.add(d)
            d = os.path.dirname(d)
    vio_id = None
    if violation_fd >= 0:
        st = os.fstat(violation_fd)
        vio_id = (st.st_dev, st.st_ino)
    import linecache
    from importlib import _bootstrap_external

    linecache_file = getattr(linecache.updatecache, "__code__", None)
    linecache_file = linecache_file.co_filename if linecache_file is not None else ""

    def hook(
        event,
        args,
        _type=type,
        _str=str,
        _bytes=bytes,
        _int=int,
        _len=len,
        _repr=repr,
        _tuple=tuple,
        _norm=_lexical_abs,
        _blocked=blocked,
        _readable=tuple(readable_roots),
        _code=tuple(code_roots),
        _excl=tuple(excluded_roots),
        _pkgs=tuple(package_roots),
        _cwd=cwd,
        _viol=violations,
        _V=SandboxViolation,
        _denied=DENIED_MODULES,
        _MNF=ModuleNotFoundError,
        _allowed=allowed_list,
        _O_WRITE=os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC,
        _O_PATH=getattr(os, "O_PATH", 0),
        _anc=frozenset(ancestors) | frozenset(stat_files),
        _getframe=sys._getframe,
        _FrameT=types.FrameType,
        _agent=agent_filename,
        _frames=bool(forbid_frames),
        _fattrs=FRAME_ATTRIBUTES,
        _stdlib=tuple(r.rstrip("/") + "/" for r in stdlib_roots),
        _consumers=tuple(r.rstrip("/") + "/" + c for r in stdlib_roots for c in STDLIB_FRAME_CONSUMERS),
        _whole=WHOLE_STACK_FUNCTIONS,
        _api=tuple(frame_api) or ((), ()),
        _dget=dict.get,
        _vfd=violation_fd,
        _vid=vio_id,
        _fstat=os.fstat,
        _write=os.write,
        _exit=os._exit,
        _OSE=OSError,
        _lc_file=linecache_file,
        _ext="<frozen importlib._bootstrap_external>",
        _boot="<frozen importlib._bootstrap>",
        _get_data=_bootstrap_external.FileLoader.get_data,
        _real_io=_bootstrap_external._io,
        _mro=type.__dict__["__mro__"].__get__,
        _cdict=type.__dict__["__dict__"].__get__,
        _hook_code=None,
    ):
        # Frame introspection (agent code only; see docs/security.md "Frame introspection").
        if event == "object.__getattr__":
            if _frames and _len(args) >= 2 and _type(args[1]) is _str and args[1] in _fattrs:
                what, target, named, compiling = args[1] + " attribute", None, args[1], False
            else:
                return
        elif event == "sys._getframe":
            if not _frames or not _len(args) or _type(args[0]) is not _FrameT:
                return
            if args[0].f_code is _hook_code:  # the hook's own look-up below
                return
            what, target, named, compiling = "sys._getframe", args[0], "_getframe", False
        elif event == "compile" or event == "code.__new__":
            if not _frames or _len(args) < 2 or _type(args[1]) is not _str:
                return
            fn = args[1]
            if fn == _agent or (fn[:1] == "<" and fn[:8] != "<frozen "):
                return
            what, target, named, compiling = event, None, None, True
        elif event == "marshal.loads" or event == "marshal.load":  # code objects from bytes (any file name)
            if not _frames:
                return
            what, target, named, compiling = event, None, None, True
        elif event == "exec" or event == "builtins.id":  # fast path: frequent and harmless
            return
        else:
            what = None

        def deny(msg, record=True):
            _viol.append(msg)
            if record and _vfd >= 0:
                try:
                    st = _fstat(_vfd)
                    if (st.st_dev, st.st_ino) != _vid:
                        _exit(75)
                    _write(_vfd, (msg + "\n").encode("utf-8", "replace")[:2000])
                except _OSE:
                    _exit(75)
            raise _V(msg)

        if event == "quantgym.sandbox.violation":  # raised by the guarded import and the stubs
            if _len(args) and _type(args[0]) is _str and args[0][:11] == "forbidden: ":
                deny(args[0])
            deny("forbidden: a blocked operation was recorded by the sandbox policy")

        if what is not None:
            def agentish(code):
                f_name = code.co_filename
                return f_name == _agent or (f_name[:1] == "<" and f_name[:8] != "<frozen ")

            def transparent(code):
                f_name = code.co_filename
                if f_name[:8] == "<frozen ":
                    return True
                for c in _consumers:
                    if f_name == c:
                        return False
                for r in _stdlib:
                    if f_name[:_len(r)] == r and "-packages/" not in f_name:
                        return True
                return False

            def by_import_system(fr):
                # The import system loading a module file on the submitted code's behalf (a lazy import
                # inside the standard library): only frozen importlib frames up to SourceLoader.get_code,
                # whose loader reads files with the real FileLoader.get_data through the real _io (each
                # read is an audited open of a readable file), so the bytes come from a library file.
                n = 0
                while fr is not None and n < 4:
                    c = fr.f_code
                    if c.co_filename != _ext and c.co_filename != _boot:
                        return False
                    if c.co_filename == _ext and c.co_name == "get_code":
                        if _dget(fr.f_globals, "_io") is not _real_io:
                            return False
                        for k in _mro(_type(_dget(fr.f_locals, "self"))):
                            d = _cdict(k)
                            if "get_data" in d:
                                return d["get_data"] is _get_data
                        return False
                    fr = fr.f_back
                    n += 1
                return False

            me = _getframe(0)  # raises a nested "sys._getframe" event that returns at once (see above)
            caller = me.f_back
            del me
            consumer = None  # the first frame that is neither agent code nor transparent
            inner = None  # the innermost agent frame on the stack
            whole = None
            fr = caller
            while fr is not None:
                code = fr.f_code
                if agentish(code) and fr.f_back is not None:  # the bottom frame is the child's "-c" bootstrap
                    inner = fr
                    break
                if transparent(code):
                    if consumer is None and code.co_name in _whole:
                        whole = code.co_name
                elif consumer is None:
                    consumer = fr
                fr = fr.f_back
            if inner is None:  # no submitted code on the stack: trusted code, allowed
                return
            if consumer is None:  # the submitted code itself, directly or through the standard library
                if compiling and by_import_system(caller):
                    return
                if compiling and what[:8] == "marshal.":
                    deny(f"forbidden: building code objects from bytes ({what}) is not allowed in the sandbox "
                         "(submitted code may run only code compiled from source)")
                if compiling:
                    deny(f"forbidden: compiling code under the file name {args[1]!r} is not allowed in the sandbox "
                         "(submitted code may only compile under its own file name or a '<...>' name)")
                deny(f"forbidden: frame introspection ({what}) is not allowed in the sandbox "
                     "(submitted code may not inspect interpreter frames)")
            if compiling:
                return
            for d, attr, val in _api[0]:
                if _dget(d, attr) is not val:
                    deny(f"forbidden: frame introspection ({what} after a frame function was replaced: {attr}) "
                         "is not allowed in the sandbox")
            fr = caller
            while fr is not None:
                g = fr.f_globals
                for name, vals in _api[1]:
                    v = _dget(g, name, _api)
                    if v is not _api:
                        for x in vals:
                            if v is x:
                                break
                        else:
                            deny(f"forbidden: frame introspection ({what} after a frame function was replaced: "
                                 f"{name}) is not allowed in the sandbox")
                if fr is consumer:
                    break
                fr = fr.f_back
            if whole is not None:
                deny(f"forbidden: frame introspection (a {whole}() walk over the whole stack while submitted code "
                     "runs) is not allowed in the sandbox")
            cc = caller.f_code
            if named not in cc.co_names and named not in cc.co_consts:
                deny(f"forbidden: frame introspection ({what} called through library code on behalf of the "
                     "submitted code) is not allowed in the sandbox")
            if target is not None:
                fr = inner.f_back
                while fr is not None:
                    if fr is target:
                        deny(f"forbidden: frame introspection ({what} reaching frames above the submitted code) "
                             "is not allowed in the sandbox")
                    fr = fr.f_back
            return

        def under(p, roots):
            for r in roots:
                if p == r or p.startswith(r + "/") or r == "/":
                    return True
            return False

        def readable(p):
            if under(p, _readable) or under(p, _pkgs):
                return True
            return under(p, _code) and not under(p, _excl)

        def as_path(raw, what):
            t = _type(raw)
            if t is _bytes:
                raw = raw.decode("utf-8", "surrogateescape")
            elif t is _int:
                deny(f"forbidden: {what} of file descriptor {raw} is not allowed")
            elif raw is None:
                raw = "."
            elif t is not _str:
                deny(f"forbidden: {what} with a path that is not a plain str/bytes is not allowed")
            p = _norm(raw, _cwd)
            if p is None:
                deny(f"forbidden: {what} of {raw!r} is not allowed (paths with '..' are refused)")
            return p, raw

        if event == "open":
            raw, mode, flags = args[0], args[1], args[2]
            p, raw = as_path(raw, "open()")
            write = False
            if _type(mode) is _str:
                for ch in mode:
                    if ch in "wax+":
                        write = True
            if _type(flags) is _int and flags & _O_WRITE:
                write = True
            if write:
                deny(f"forbidden: opening {raw!r} for writing is not allowed (the sandbox is read-only)")
            if _O_PATH and _type(flags) is _int and flags & _O_PATH and (p in _anc or under(p, _excl) or p.startswith(_cwd + "/")):
                return  # (the child's own empty cwd: inspect's look-ups of pseudo files such as '<agent>')  # metadata only (os.stat through guard_stat) of site-packages entries: import look-ups
            if not readable(p):
                # A source-line look-up by linecache (tracebacks, warnings) is refused but not
                # recorded out of process (the child drops it from its own list too). The same
                # holds for the parser's read of the agent's own (pseudo) file name on a SyntaxError.
                quiet = raw == _agent
                fr = None if quiet else _getframe(0)
                k = 0
                while fr is not None and k < 6:
                    code = fr.f_code
                    if code.co_filename == _lc_file and code.co_name in ("updatecache", "checkcache"):
                        quiet = True
                        break
                    fr = fr.f_back
                    k += 1
                del fr
                meta = _O_PATH and _type(flags) is _int and flags & _O_PATH
                deny(
                    f"forbidden: {'os.stat' if meta else 'open'}({raw!r}) is not allowed (file access is limited "
                    "to the readable_paths given by the environment)",
                    not quiet,
                )
            return
        if event in ("os.listdir", "os.scandir", "glob.glob", "glob.glob/2"):
            p, raw = as_path(args[0] if _len(args) else None, event)
            if not readable(p) and p not in _excl:  # names in site-packages: metadata look-ups
                deny(f"forbidden: listing directory {raw!r} is not allowed")
            return
        if event == "import":
            name = args[0]
            if _type(name) is _str:
                top = name.partition(".")[0]
                if top in _denied:
                    # ImportError (not a recorded violation): library code that probes an optional
                    # module falls back; agent code cannot get here without the guarded import.
                    raise _MNF(f"No module named {name!r} (not available in the quantgym sandbox)", name=name)
            return
        if event == "object.__setattr__":
            if _len(args) >= 2 and _type(args[1]) is _str:
                if args[1] == "__code__" and _type(args[0]) is _type(deny):
                    deny("forbidden: replacing __code__ of a function is not allowed")
                if args[1] in ("__defaults__", "__kwdefaults__") and _type(args[0]) is _type(deny):
                    if args[0].__code__ is _hook_code:
                        deny(f"forbidden: replacing {args[1]} of the sandbox policy is not allowed")
            return
        for prefix, category in _blocked:
            if event.startswith(prefix):
                deny(f"forbidden: {category} ({event}) is not allowed in the sandbox")

    # Rebuild the hook so that its immutable defaults hold its own code object (to refuse any
    # replacement of its defaults) and its globals are empty (no lookup an agent could patch).
    code = hook.__code__
    if code.co_freevars:  # pragma: no cover - guarded by the tests
        raise RuntimeError("the audit hook must not close over variables")
    return types.FunctionType(code, {"__builtins__": {}}, "quantgym_sandbox_audit_hook",
                              hook.__defaults__[:-1] + (code,), None)


class LockdownFinder:
    """Meta-path finder installed first at lockdown.

    Modules whose top-level package is neither allowed, nor in the standard library, nor already
    loaded are reported as missing (``ModuleNotFoundError``) without touching the file system, so
    optional imports inside libraries (``try: import x except ImportError``) fall back cleanly.
    """

    def __init__(self, allowed: tuple[str, ...], loaded: frozenset) -> None:
        self._ok = frozenset(allowed) | frozenset(sys.stdlib_module_names) | loaded

    def find_spec(self, name, path=None, target=None):  # noqa: D401 - importlib protocol
        top = name.partition(".")[0]
        if top in self._ok and top not in DENIED_MODULES:
            return None
        raise ModuleNotFoundError(f"No module named {name!r} (not available in the quantgym sandbox)", name=name)


def make_guarded_import(allowed_imports: tuple[str, ...], violations: list):
    """Return an ``__import__`` replacement for the agent namespace's builtins.

    Agent code may import only modules whose top-level name is in ``allowed_imports``; relative
    imports are refused. Imports performed by library code use the real ``__import__``.
    """
    real_import = builtins.__import__
    allowed = frozenset(allowed_imports)
    allowed_list = ", ".join(allowed_imports)

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0,
                       _real=real_import, _allowed=allowed, _viol=violations, _V=SandboxViolation,
                       _str=str, _type=type, _audit=sys.audit):
        if _type(name) is not _str or level != 0:
            msg = "forbidden: relative imports are not allowed"
            _audit("quantgym.sandbox.violation", msg)  # the audit hook records and raises
            _viol.append(msg)
            raise _V(msg)
        top = name.partition(".")[0]
        if top not in _allowed:
            msg = f"forbidden: import of {top!r} is not allowed (allowed: {allowed_list})"
            _audit("quantgym.sandbox.violation", msg)
            _viol.append(msg)
            raise _V(msg)
        return _real(name, globals, locals, fromlist, level)

    return guarded_import


def agent_builtins(allowed_imports: tuple[str, ...], violations: list) -> dict:
    """A copy of the builtins dict for the agent namespace, with the guarded ``__import__``."""
    b = dict(builtins.__dict__)
    b["__import__"] = make_guarded_import(allowed_imports, violations)
    for name in ("breakpoint", "help", "copyright", "credits", "license", "exit", "quit"):
        b.pop(name, None)
    return b


def guard_stat() -> None:
    """Route ``os.stat``, ``os.lstat``, ``os.access``, ``os.readlink``, ``os.statvfs`` and ``os.pathconf``
    (and ``posix.*``) through the read policy.

    They raise no audit event in CPython 3.11, so paths outside the readable set would leak their
    existence, size and times. Each guarded function opens the path with ``O_PATH`` (an ``open``
    audit event: refused like a read outside the readable set, site-packages entries excepted for
    import look-ups) and ``fstat``s the descriptor. The original functions are removed from the
    modules, so no reference to them is left for agent code. ``os.access`` answers from the
    ``fstat`` mode bits. Installed at lockdown, after every import of the trusted phase.
    """
    import posix

    o_path = getattr(os, "O_PATH", 0)
    if not o_path:  # not Linux: leave stat alone (documented)
        return

    def stat(path, *, dir_fd=None, follow_symlinks=True, _open=os.open, _fstat=os.fstat, _close=os.close,
             _flags=o_path | os.O_CLOEXEC, _nofollow=os.O_NOFOLLOW, _int=int, _type=type):
        if _type(path) is _int:
            return _fstat(path)
        fd = _open(path, _flags if follow_symlinks else _flags | _nofollow, dir_fd=dir_fd)
        try:
            return _fstat(fd)
        finally:
            _close(fd)

    def lstat(path, *, dir_fd=None, _stat=stat):
        return _stat(path, dir_fd=dir_fd, follow_symlinks=False)

    def access(path, mode, *, dir_fd=None, effective_ids=False, follow_symlinks=True, _stat=stat,
               _geteuid=os.geteuid, _OSE=OSError):
        try:
            st = _stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        except _OSE:
            return False
        if mode == 0:
            return True
        bits = st.st_mode
        if _geteuid() == 0:
            return not (mode & 1) or bool(bits & 0o111)
        ok = (bits >> 6) & 7 if st.st_uid == _geteuid() else bits & 7
        return (mode & ok) == mode

    def readlink(path, *, dir_fd=None, _open=os.open, _close=os.close, _rl=os.readlink,
                 _flags=o_path | os.O_CLOEXEC | os.O_NOFOLLOW):
        _close(_open(path, _flags, dir_fd=dir_fd))  # the read policy's check (the link itself, not its target)
        return _rl(path, dir_fd=dir_fd)

    def statvfs(path, _open=os.open, _close=os.close, _fsv=os.fstatvfs, _flags=o_path | os.O_CLOEXEC, _int=int,
                _type=type):
        if _type(path) is _int:
            return _fsv(path)
        fd = _open(path, _flags)
        try:
            return _fsv(fd)
        finally:
            _close(fd)

    def pathconf(path, name, _open=os.open, _close=os.close, _fpc=os.fpathconf, _flags=o_path | os.O_CLOEXEC,
                 _int=int, _type=type):
        if _type(path) is _int:
            return _fpc(path, name)
        fd = _open(path, _flags)
        try:
            return _fpc(fd, name)
        finally:
            _close(fd)

    for name, fn in (("stat", stat), ("lstat", lstat), ("access", access), ("readlink", readlink),
                     ("statvfs", statvfs), ("pathconf", pathconf)):
        fn.__name__ = fn.__qualname__ = name
        setattr(os, name, fn)
        setattr(posix, name, fn)


def install(hook, allowed_imports: tuple[str, ...] = ()) -> None:
    """Install the lockdown finder and ``hook`` (the hook cannot be removed for the rest of the process)."""
    loaded = frozenset(m.partition(".")[0] for m in list(sys.modules))
    sys.meta_path.insert(0, LockdownFinder(tuple(allowed_imports), loaded))
    sys.addaudithook(hook)
