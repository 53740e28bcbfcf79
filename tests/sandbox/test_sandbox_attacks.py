"""Attack list of the sandbox (docs/security.md).

Every attack must end as a recorded failure with the right status and a clear one-line message,
the host process unharmed (no exception, no leftover process, bounded memory), and the next run
still working. Limits are small so that the whole file stays fast.
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

import quantgym
from quantgym.sandbox import SandboxLimits, SandboxResult, run_in_sandbox

CALL = "quantgym.sandbox.runners:call_function"
SCORE = "quantgym.sandbox.runners:score_series"
#: ``import quantgym`` loads neither socket nor gc (lazy start-up): the attacks on a *cached* module use a
#: trusted runner that imports them before lockdown, as a heavier runner would
CACHED = "tests.sandbox.sandbox_test_runners:modules_cached"
LIMITS = SandboxLimits(cpu_seconds=2.0, wall_seconds=20.0, memory_mb=2048, max_output_bytes=100_000)

# A helper the escape attacks paste into their source: walks object.__subclasses__() to a function
# whose __globals__ hold the real `sys`, then returns any cached module (os, subprocess, ...).
ESCAPE = textwrap.dedent(
    """
    def _mod(name):
        for c in ().__class__.__mro__[1].__subclasses__():
            g = getattr(getattr(c, "__init__", None), "__globals__", None)
            if isinstance(g, dict) and "sys" in g and hasattr(g["sys"], "modules"):
                return g["sys"].modules[name]
        raise LookupError("no escape route found")
    """
)


def run(source: str, *, function: str = "f", args=(), limits: SandboxLimits = LIMITS, runner: str = CALL,
        payload=None) -> SandboxResult:
    if payload is None:
        payload = {"function": function, "args": list(args)}
    r = run_in_sandbox(textwrap.dedent(source), runner, payload, limits)
    assert isinstance(r, SandboxResult)
    assert "\n" not in r.message and r.message.startswith(r.status if r.status != "ok" else "ok")
    assert r.value is None or r.ok
    _assert_group_gone(r)
    return r


def _assert_group_gone(r: SandboxResult) -> None:
    """No process of the child's process group survives the run."""
    with pytest.raises(ProcessLookupError):
        os.killpg(r.details["pid"], 0)


def _marker(tmp_path: Path) -> Path:
    return tmp_path / "pwned"


# --------------------------------------------------------------------------- file access
def test_open_package_source_file_is_forbidden():
    target = Path(quantgym.__file__).resolve()
    r = run(f"def f():\n    return open({str(target)!r}).read()\n")
    assert r.status == "forbidden"
    assert "open(" in r.message and str(target) in r.message


def test_open_bundled_data_file_is_forbidden():
    bundled = Path(quantgym.__file__).resolve().parent / "data" / "bundled"
    files = sorted(p for p in bundled.rglob("*") if p.is_file()) if bundled.exists() else []
    target = files[0] if files else Path(quantgym.__file__).resolve().parent / "metrics.py"
    r = run(f"import numpy as np\ndef f():\n    return len(np.fromfile({str(target)!r}, dtype=np.uint8))\n")
    assert r.status == "forbidden", r.message
    assert "is not allowed" in r.message


def test_open_host_data_file_outside_readable_paths_is_forbidden(tmp_path):
    data = tmp_path / "panel.csv"
    data.write_text("a,b\n1,2\n")
    allowed = tmp_path / "allowed.csv"
    allowed.write_text("x\n1\n")
    lim = SandboxLimits(cpu_seconds=2.0, wall_seconds=20.0, readable_paths=(str(allowed),))
    r = run(f"def f():\n    return open({str(data)!r}).read()\n", limits=lim)
    assert r.status == "forbidden"
    assert str(data) in r.message


@pytest.mark.parametrize("call", [
    "os.path.exists('/etc/passwd')",
    "os.stat('/etc/shadow').st_size",
    "os.lstat('/etc/passwd').st_size",
    "collections._sys.modules['posix'].stat('/etc/passwd').st_size",
    "os.access('/etc/passwd', os.F_OK)",
    "pathlib.Path('/etc/passwd').exists()",
    "os.path.getsize(os.path.join(os.path.dirname(collections.__file__), '..', '..', 'etc', 'passwd'))",
    "os.readlink('/etc/localtime')",
    "os.statvfs('/etc/passwd').f_bfree",
    "os.pathconf('/etc/passwd', 'PC_NAME_MAX')",
])
def test_stat_outside_the_readable_set_is_forbidden(call):
    # metadata (existence, size, times) of paths outside the readable set is refused
    # like a read; os and pathlib reached through an object the agent is given (collections._sys)
    src = ("import collections\nos = collections._sys.modules['os']\npathlib = collections._sys.modules.get('pathlib')\n"
           f"def f():\n    return {call}\n")
    r = run(src)
    assert r.status == "forbidden" and r.value is None, (r.status, r.message)
    assert "/etc/" in r.message or "'..'" in r.message, r.message


def test_stat_inside_the_readable_set_and_lazy_imports_still_work(tmp_path):
    data = tmp_path / "in.csv"
    data.write_text("a\n1\n2\n")
    src = (f"import collections\nimport pandas as pd\nos = collections._sys.modules['os']\n"
           f"def f():\n    import scipy.optimize, statistics\n"
           f"    p = {str(data)!r}\n"
           f"    return [os.path.exists(p), os.stat(p).st_size, os.access(p, os.R_OK), int(pd.read_csv(p)['a'].sum()),"
           f" os.path.isdir(os.path.dirname(p)), os.statvfs(p).f_bsize > 0, os.pathconf(p, 'PC_NAME_MAX') > 0,"
           f" os.path.realpath(p) == p]\n")
    r = run_in_sandbox(src, "quantgym.sandbox.runners:call_function", {"function": "f"},
                       replace(LIMITS, cpu_seconds=20.0, readable_paths=(str(tmp_path),)))
    assert r.ok, (r.message, r.traceback)
    assert r.value == [True, 6, True, 3, True, True, True, True]


def test_open_etc_passwd_is_forbidden():
    r = run("def f():\n    return open('/etc/passwd').read()\n")
    assert r.status == "forbidden"
    assert r.message.startswith("forbidden: open('/etc/passwd') is not allowed")


def test_forbidden_even_when_agent_catches_the_exception():
    r = run(
        """
        def f():
            try:
                open('/etc/passwd').read()
            except BaseException:
                pass
            return 1
        """
    )
    assert r.status == "forbidden" and "/etc/passwd" in r.message and r.value is None


LAUNDER = """
    v = __builtins__['__import__'].__defaults__      # the child's own violation list, reachable
    [x for x in v if isinstance(x, list)][0].clear()  # without frames: empty it
    return 'laundered'
"""


@pytest.mark.parametrize("attempt,needle", [
    ("open('/etc/passwd')", "open('/etc/passwd')"),
    ("import socket", "import of 'socket'"),
    ("_mod('threading').Thread(target=print).start()", "starting threads"),
])
def test_emptying_the_violation_list_does_not_launder_a_violation(attempt, needle):
    # the audit hook also writes every refusal to a pipe the host reads (out of the agent's reach)
    r = run(ESCAPE + f"""
def f():
    try:
        {attempt}
    except BaseException:
        pass
""" + textwrap.indent(textwrap.dedent(LAUNDER), "    "))
    assert r.status == "forbidden" and needle in r.message and r.value is None


@pytest.mark.parametrize("how", ["os.close(fd)", "os.dup2(1, fd)"])
def test_closing_or_replacing_the_violation_record_is_forbidden(how):
    r = run(ESCAPE + f"""
def f():
    os = _mod('os')
    for fd in range(3, 64):
        try:
            os.fstat(fd)
            {how}
        except OSError:
            pass
    try:
        open('/etc/passwd')
    except BaseException:
        pass
    return 'hidden?'
""")
    assert r.status == "forbidden" and r.message == "forbidden: the sandbox's violation record was tampered with"


def test_a_made_up_violation_event_counts_against_the_agent():
    r = run("import collections\ndef f():\n    collections._sys.audit('quantgym.sandbox.violation', 'x')\n"
            "    return 1\n")
    assert r.status == "forbidden" and r.message == "forbidden: a blocked operation was recorded by the sandbox policy"


def test_read_proc_self_environ_is_forbidden():
    r = run("def f():\n    return open('/proc/self/environ', 'rb').read()\n")
    assert r.status == "forbidden" and "/proc/self/environ" in r.message


def test_dotdot_path_is_forbidden():
    r = run("import numpy\ndef f():\n    return open(numpy.__file__ + '/../../../../../../etc/passwd').read()\n")
    assert r.status == "forbidden" and "'..'" in r.message


def test_write_a_file_is_forbidden(tmp_path):
    r = run("def f():\n    open('out.txt', 'w').write('x')\n")
    assert r.status == "forbidden" and "for writing" in r.message
    target = tmp_path / "written.txt"
    r = run(ESCAPE + f"\ndef f():\n    os = _mod('os')\n    fd = os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT)\n")
    assert r.status == "forbidden"
    assert not target.exists()


def test_listing_a_directory_is_forbidden():
    r = run(ESCAPE + "\ndef f():\n    return _mod('os').listdir('/work')\n")
    assert r.status == "forbidden" and "listing directory '/work'" in r.message


# --------------------------------------------------------------------------- imports and network
def test_import_socket_is_forbidden():
    r = run("import socket\ndef f():\n    return 1\n")
    assert r.status == "forbidden"
    assert r.message.startswith("forbidden: import of 'socket' is not allowed (allowed: numpy, pandas")


def test_dunder_import_socket_is_forbidden():
    r = run("def f():\n    return __import__('socket').socket()\n")
    assert r.status == "forbidden" and "'socket'" in r.message


def test_connect_via_importlib_reached_through_pandas_is_forbidden():
    # pandas.compat._optional holds a reference to importlib: an agent can reach it without importing it
    r = run(
        """
        import pandas
        def f():
            il = pandas.compat._optional.importlib
            s = il.import_module('socket')
            c = s.socket(s.AF_INET, s.SOCK_STREAM)
            c.connect(('127.0.0.1', 9))
        """
    )
    assert r.status == "forbidden" and "network access (socket." in r.message


def test_getaddrinfo_via_cached_socket_module_is_forbidden():
    r = run(ESCAPE + "\ndef f():\n    return _mod('socket').getaddrinfo('example.com', 80)\n", runner=CACHED)
    assert r.status == "forbidden" and "socket.getaddrinfo" in r.message


def test_import_os_sys_importlib_are_forbidden():
    for mod in ("os", "sys", "importlib", "subprocess", "ctypes", "builtins", "pickle"):
        r = run(f"import {mod}\ndef f():\n    return 1\n")
        assert r.status == "forbidden", mod
        assert f"import of '{mod}' is not allowed" in r.message


def test_importlib_import_module_os_is_forbidden():
    r = run("import importlib\ndef f():\n    return importlib.import_module('os').getcwd()\n")
    assert r.status == "forbidden" and "'importlib'" in r.message


def test_sys_modules_os_then_system_is_forbidden(tmp_path):
    marker = _marker(tmp_path)
    r = run(ESCAPE + f"\ndef f():\n    sys = _mod('sys')\n    return sys.modules['os'].system('touch {marker}')\n")
    assert r.status == "forbidden" and "os.system" in r.message
    assert not marker.exists()


def test_relative_import_is_forbidden():
    r = run("from . import x\ndef f():\n    return 1\n")
    assert r.status == "forbidden" and "relative imports" in r.message


# --------------------------------------------------------------------------- processes and native code
def test_os_system_via_subclasses_escape_is_forbidden(tmp_path):
    marker = _marker(tmp_path)
    r = run(ESCAPE + f"\ndef f():\n    return _mod('os').system('touch {marker}')\n")
    assert r.status == "forbidden"
    assert r.message == "forbidden: process creation (os.system) is not allowed in the sandbox"
    assert not marker.exists()


def test_real_import_from_library_globals_and_fileio_from_subclasses_are_forbidden(tmp_path):
    marker = _marker(tmp_path)
    # numpy's function globals hold the real builtins (not the agent's guarded copy)
    r = run(f"import numpy as np\ndef f():\n    os = np.load.__globals__['__builtins__']['__import__']('os')\n"
            f"    return os.system('touch {marker}')\n")
    assert r.status == "forbidden" and "os.system" in r.message
    assert not marker.exists()
    r = run(
        """
        def f():
            todo, seen = [().__class__.__mro__[1]], []
            while todo:
                c = todo.pop()
                if c not in seen:
                    seen.append(c)
                    todo.extend(type.__subclasses__(c))
            fio = [c for c in seen if c.__name__ == 'FileIO' and c.__module__ == '_io'][0]
            return fio('/etc/passwd').read()
        """
    )
    assert r.status == "forbidden" and "/etc/passwd" in r.message


def test_subprocess_popen_is_forbidden(tmp_path):
    marker = _marker(tmp_path)
    r = run(ESCAPE + f"\ndef f():\n    return _mod('subprocess').run(['touch', '{marker}'])\n")
    assert r.status == "forbidden" and "subprocess.Popen" in r.message
    assert not marker.exists()


def test_unaudited_fork_exec_is_forbidden(tmp_path):
    marker = _marker(tmp_path)
    r = run(
        ESCAPE
        + f"""
def f():
    ps = _mod('_posixsubprocess')
    return ps.fork_exec(['/usr/bin/touch', '{marker}'], [b'/usr/bin/touch'], True, (), None, None,
                        -1, -1, -1, -1, -1, -1, -1, -1, False, False, None, None, None, -1, None, False)
"""
    )
    assert r.status == "forbidden" and "fork_exec" in r.message
    assert not marker.exists()


def test_fork_bomb_is_forbidden():
    r = run(
        """
        import pandas as pd
        def f():
            os = pd.io.common.os
            while True:
                os.fork()
        """
    )
    assert r.status == "forbidden"
    assert r.message == "forbidden: process creation (os.fork) is not allowed in the sandbox"


def test_posix_spawn_and_kill_are_forbidden():
    r = run(ESCAPE + "\ndef f():\n    os = _mod('os')\n    return os.posix_spawn('/bin/true', ['true'], {})\n")
    assert r.status == "forbidden" and "os.posix_spawn" in r.message
    r = run(ESCAPE + "\ndef f():\n    return _mod('os').kill(1, 0)\n")
    assert r.status == "forbidden" and "sending signals (os.kill)" in r.message


def test_ctypes_is_forbidden():
    r = run(ESCAPE + "\ndef f():\n    ct = _mod('ctypes')\n    return ct.CDLL('libc.so.6').getpid()\n")
    assert r.status == "forbidden" and "ctypes / native code (ctypes.dlopen)" in r.message
    r = run("import numpy as np\ndef f():\n    return np.ctypeslib.ctypes.string_at(id(1), 8)\n")
    assert r.status == "forbidden" and "ctypes" in r.message


def test_raising_resource_limits_is_forbidden():
    r = run(ESCAPE + "\ndef f():\n    res = _mod('resource')\n    res.setrlimit(res.RLIMIT_CPU, (10**6, 10**6))\n")
    assert r.status == "forbidden" and "changing resource limits (resource.setrlimit)" in r.message


def test_gc_introspection_is_forbidden():
    r = run(ESCAPE + "\ndef f():\n    return len(_mod('gc').get_objects())\n", runner=CACHED)
    assert r.status == "forbidden" and "interpreter introspection (gc.get_objects)" in r.message


HOOK_TAMPERING = ESCAPE + """
def f():
    fr = _mod('sys')._getframe()
    while fr is not None and 'hook' not in fr.f_locals:
        fr = fr.f_back
    hook = fr.f_locals['hook']
    d = list(hook.__defaults__)
    d = [('/',) if isinstance(x, tuple) and x and all(isinstance(p, str) and p.startswith('/') for p in x) else x
         for x in d]
    hook.__defaults__ = tuple(d)
    return open('/etc/passwd').read()
"""


def test_tampering_with_the_audit_hook_is_forbidden():
    # Walk up to the child's main() frame, take the installed hook and try to widen its read policy.
    # By default the frame walk itself is refused (tests/sandbox/test_sandbox_frames.py) ...
    r = run(HOOK_TAMPERING)
    assert r.status == "forbidden" and r.message.startswith("forbidden: frame introspection (sys._getframe)")
    # ... and with frame introspection allowed, the hook's immutable settings are the next layer.
    r = run(HOOK_TAMPERING, limits=replace(LIMITS, allow_frame_introspection=True))
    assert r.status == "forbidden"
    assert r.message == "forbidden: replacing __defaults__ of the sandbox policy is not allowed"
    r = run(ESCAPE + "\ndef f():\n    g = lambda: None\n    _mod('os').path.realpath.__code__ = g.__code__\n")
    assert r.status == "forbidden" and "replacing __code__" in r.message


def test_threads_are_forbidden():
    r = run(ESCAPE + "\ndef f():\n    t = _mod('threading').Thread(target=print)\n    t.start()\n")
    assert r.status == "forbidden" and "_thread.start_new_thread" in r.message


# --------------------------------------------------------------------------- resources
def test_infinite_loop_hits_the_cpu_limit():
    r = run("def f():\n    while True:\n        pass\n", limits=SandboxLimits(cpu_seconds=1.0, wall_seconds=30.0))
    assert r.status == "timeout"
    assert r.message == "timeout: CPU-time limit of 1 s exceeded"


def test_sleeping_forever_hits_the_wall_limit():
    lim = SandboxLimits(cpu_seconds=10.0, wall_seconds=3.0)
    r = run(ESCAPE + "\ndef f():\n    _mod('time').sleep(60)\n", limits=lim)
    assert r.status == "timeout"
    assert r.message == "timeout: wall-clock limit of 3 s exceeded"


def test_ten_gigabyte_allocation_is_a_memory_failure():
    r = run("import numpy as np\ndef f():\n    return float(np.ones(10 * 1024**3 // 8).sum())\n")
    assert r.status == "memory"
    assert r.message.startswith("memory: allocation failed under the 2048 MB limit")


def test_python_level_memory_blowup_is_a_memory_failure():
    r = run("def f():\n    x = [1.5] * (3 * 10**9)\n    return len(x)\n")
    assert r.status == "memory"


def test_printing_a_gigabyte_is_truncated_and_flagged():
    r = run("def f():\n    s = 'x' * (1 << 20)\n    for _ in range(1024):\n        print(s)\n    return 7\n")
    assert r.ok and r.value == 7
    assert r.output_truncated
    assert len(r.stdout.encode()) <= LIMITS.max_output_bytes


def test_raw_fd_writes_are_capped_by_the_host_reader():
    r = run(ESCAPE + "\ndef f():\n    os = _mod('os')\n    b = b'y' * (1 << 20)\n"
            "    for _ in range(300):\n        os.write(1, b)\n    return 1\n")
    assert r.ok and r.output_truncated
    assert len(r.stdout.encode()) == LIMITS.max_output_bytes


# --------------------------------------------------------------------------- bad output and errors
def test_nan_score_is_bad_output():
    r = run(
        "import pandas as pd\ndef score(symbols):\n    return pd.Series(float('nan'), index=symbols)\n",
        runner=SCORE,
        payload={"function": "score", "args": [["A", "B"]], "index": ["A", "B"]},
    )
    assert r.status == "bad_output"
    assert r.message == "bad_output: scores contain 2 NaN/inf values"


def test_wrong_type_score_is_bad_output():
    r = run("def score(symbols):\n    return [1.0, 2.0]\n", runner=SCORE,
            payload={"function": "score", "args": [["A", "B"]], "index": ["A", "B"]})
    assert r.status == "bad_output" and "must return a pandas Series, got list" in r.message


def test_wrong_index_score_is_bad_output():
    r = run("import pandas as pd\ndef score(symbols):\n    return pd.Series([1.0], index=['Z'])\n", runner=SCORE,
            payload={"function": "score", "args": [["A", "B"]], "index": ["A", "B"]})
    assert r.status == "bad_output" and "index" in r.message


def test_unsendable_return_value_is_bad_output():
    r = run("def f():\n    return object()\n")
    assert r.status == "bad_output" and "builtins.object cannot be sent back" in r.message


def test_result_larger_than_cap_is_bad_output():
    lim = SandboxLimits(cpu_seconds=5.0, wall_seconds=20.0, max_result_bytes=100_000)
    r = run("import numpy as np\ndef f():\n    return np.zeros(1_000_000)\n", limits=lim)
    assert r.status == "bad_output" and "max_result_bytes" in r.message


def test_raising_inside_the_agent_function_is_an_error_with_its_traceback():
    r = run("def helper(x):\n    return 1 / x\n\ndef f():\n    return helper(0)\n")
    assert r.status == "error"
    assert r.message == "error: ZeroDivisionError: division by zero (line 2 of <agent>, in helper)"
    assert r.traceback.startswith("Traceback (most recent call last):\n  File \"<agent>\", line 5, in f")
    assert "return 1 / x" in r.traceback
    assert "_child.py" not in r.traceback and "runners.py" not in r.traceback


def test_missing_function_is_an_error():
    r = run("def g():\n    return 1\n")
    assert r.status == "error" and "does not define a function 'f'" in r.message


def test_syntax_error_names_the_line():
    r = run("x = 1\ndef f(:\n    return 1\n")
    assert r.status == "error"
    assert r.message == "error: SyntaxError: invalid syntax (line 2 of <agent>)"
    assert "def f(:" in r.traceback


def test_exit_is_an_error_and_hard_exit_is_a_crash():
    r = run("def f():\n    raise SystemExit(3)\n")
    assert r.status == "error" and "exit(3)" in r.message
    r = run(ESCAPE + "\ndef f():\n    _mod('os')._exit(0)\n")
    assert r.status == "crashed" and "without a result" in r.message


def test_secrets_do_not_reach_the_child(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    r = run(ESCAPE + "\ndef f():\n    return dict(_mod('os').environ)\n")
    assert r.ok
    assert "OPENAI_API_KEY" not in r.value and "sk-test-secret" not in repr(r.value)
    assert r.value["HOME"].startswith(os.path.realpath(os.environ.get("TMPDIR", "/tmp"))) or "qg-sandbox-" in r.value["HOME"]


def test_host_is_unharmed_and_next_run_works():
    bad = run("def f():\n    while True:\n        pass\n", limits=SandboxLimits(cpu_seconds=1.0, wall_seconds=30.0))
    assert bad.status == "timeout"
    good = run("import numpy as np\ndef f():\n    return float(np.arange(5).sum())\n")
    assert good.ok and good.value == 10.0
