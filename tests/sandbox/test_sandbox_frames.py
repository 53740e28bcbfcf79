"""Frame introspection by agent code is a violation (docs/security.md, "Frame introspection").

The agent's code runs in the same process as the trusted runner, so any frame object it gets hold
of leads (``f_back``, ``f_locals``) to the runner's locals and the whole payload. These attacks
must end as ``forbidden`` with a clear message, while library code that reads frames for its own
use (pandas warnings, ``collections.namedtuple``, ``typing``, ``enum``, pandas ``query``) keeps
working. Each run uses a payload holding a marker the agent must never read.
"""

from __future__ import annotations

import textwrap
from dataclasses import replace

import pytest

from quantgym.sandbox import SandboxLimits, SandboxResult, run_in_sandbox

CALL = "quantgym.sandbox.runners:call_function"
LIMITS = SandboxLimits(cpu_seconds=5.0, wall_seconds=30.0, memory_mb=2048, max_output_bytes=100_000)
SECRET = "S3CRET-FUTURE-ROW"
FRAME = "forbidden: frame introspection ("


def run(source: str, *, limits: SandboxLimits = LIMITS, runner: str = CALL, filename: str = "<agent>",
        args=()) -> SandboxResult:
    payload = {"function": "f", "args": list(args), "secret": SECRET}
    r = run_in_sandbox(textwrap.dedent(source), runner, payload, limits, filename=filename)
    assert isinstance(r, SandboxResult)
    assert "\n" not in r.message
    assert SECRET not in repr(r.value) and SECRET not in (r.stdout or "")
    return r


def forbidden(r: SandboxResult, needle: str) -> None:
    assert r.status == "forbidden", (r.status, r.message, r.value)
    assert r.message.startswith(FRAME) and needle in r.message, r.message
    assert r.value is None and r.details["frame_policy"] is True


# --------------------------------------------------------------------------- direct routes
def test_getframe_via_collections_sys_at_module_level():
    r = run("""
        import collections
        CALLER = collections._sys._getframe(1).f_locals
        def f():
            return str(CALLER)
    """)
    forbidden(r, "sys._getframe")


def test_getframe_via_collections_sys_inside_the_function():
    r = run("""
        import collections
        def f():
            fr = collections._sys._getframe(0)
            while fr is not None and 'payload' not in fr.f_locals:
                fr = fr.f_back
            return str(fr.f_locals['payload'])
    """)
    forbidden(r, "sys._getframe")


def test_traceback_tb_frame_f_back_f_locals():
    r = run("""
        def f():
            try:
                raise ValueError('x')
            except ValueError as e:
                return str(e.__traceback__.tb_frame.f_back.f_locals)
    """)
    forbidden(r, "tb_frame attribute")


def test_getattr_with_a_computed_name_is_still_audited():
    r = run("""
        def f():
            try:
                1 / 0
            except ZeroDivisionError as e:
                return str(getattr(e.__traceback__, 'tb_' + 'frame').f_back.f_locals)
    """)
    forbidden(r, "tb_frame attribute")


def test_generator_gi_frame_f_back():
    r = run("""
        def g():
            yield 1
        def f():
            gen = g()
            next(gen)
            return str(gen.gi_frame.f_back)
    """)
    forbidden(r, "gi_frame attribute")


def test_running_generator_reads_its_own_gi_frame():
    # a running generator's frame is linked to the caller's: f_back would reach the runner
    r = run("""
        def g():
            yield SELF[0].gi_frame.f_back.f_back.f_locals
        SELF = []
        def f():
            gen = g()
            SELF.append(gen)
            return str(next(gen))
    """)
    forbidden(r, "gi_frame attribute")


def test_coroutine_cr_frame_and_async_generator_ag_frame():
    r = run("""
        async def co():
            return 1
        def f():
            c = co()
            try:
                return str(c.cr_frame)
            finally:
                c.close()
    """)
    forbidden(r, "cr_frame attribute")
    r = run("""
        async def ag():
            yield 1
        def f():
            return str(ag().ag_frame)
    """)
    forbidden(r, "ag_frame attribute")


def test_violation_is_sticky_when_the_agent_catches_it():
    r = run("""
        import collections
        def f():
            try:
                collections._sys._getframe(1)
            except BaseException:
                pass
            return 'carried on'
    """)
    forbidden(r, "sys._getframe")


def test_code_compiled_from_a_string_counts_as_agent_code():
    r = run("""
        def f():
            g = {}
            exec('import collections\\nF = collections._sys._getframe(0)', g)
            return str(g['F'].f_back)
    """)
    forbidden(r, "sys._getframe")


def test_custom_agent_filename():
    r = run("""
        import collections
        def f():
            return str(collections._sys._getframe(0))
    """, filename="strategy.py")
    forbidden(r, "sys._getframe")


# --------------------------------------------------------------------------- standard-library helpers
@pytest.mark.parametrize("expr,needle", [
    ("M['inspect'].currentframe().f_back.f_locals", "sys._getframe"),
    ("[fi.frame.f_locals for fi in M['inspect'].stack()]", "sys._getframe"),
    ("M['logging'].currentframe().f_back", "sys._getframe"),
    ("[fr.f_locals for fr, _ in M['traceback'].walk_stack(None)]", "sys._getframe"),
    ("M['traceback'].StackSummary.extract(M['traceback'].walk_stack(None), capture_locals=True).format()",
     "sys._getframe"),
    ("M['traceback'].format_stack()", "sys._getframe"),
])
def test_frame_returning_stdlib_helpers_reached_through_sys_modules(expr, needle):
    # inspect, logging and traceback are not importable by agents, but sys.modules holds them
    r = run(f"""
        import collections
        M = collections._sys.modules
        def f():
            return str({expr})
    """)
    forbidden(r, needle)


def test_traceback_walk_tb_on_a_caught_exception():
    r = run("""
        import collections
        def f():
            try:
                1 / 0
            except ZeroDivisionError as e:
                return str([fr.f_back for fr, _ in collections._sys.modules['traceback'].walk_tb(e.__traceback__)])
    """)
    forbidden(r, "tb_frame attribute")


# --------------------------------------------------------------------------- library code as a proxy
def test_getframe_called_by_a_pandas_map_on_the_agents_behalf():
    r = run("""
        import collections
        import pandas as pd
        def f():
            fr = pd.Series([0]).map(collections._sys._getframe).iloc[0]
            return str(fr.f_back.f_back)
    """)
    forbidden(r, "called through library code")


def test_attrgetter_tb_frame_applied_by_pandas():
    r = run("""
        import collections
        import pandas as pd
        def f():
            try:
                1 / 0
            except ZeroDivisionError as e:
                get = collections._sys.modules['operator'].attrgetter('tb_frame')
                return str(pd.Series([e.__traceback__], dtype=object).map(get).iloc[0].f_back)
    """)
    forbidden(r, "tb_frame attribute called through library code")


@pytest.mark.parametrize("patch,trigger,needle", [
    # replace the entry point a library reads frames through by a C object that keeps the result
    ("collections._sys._getframe = d.__getitem__", "collections.namedtuple('P', 'a')", "replaced: _getframe"),
    ("typing.sys = type('S', (), {'_getframe': staticmethod(d.__getitem__)})()", "typing.TypeVar('T')",
     "replaced: sys"),
    ("M['inspect'].currentframe = M['functools'].partial(d.__getitem__, 0)",
     "pd.to_datetime(['13/01/2024', '01/02/2024'])", "replaced: currentframe"),
    # a library function re-created with agent-made globals (typing._caller's code, a fake `sys`)
    ("c = type(f)(typing._caller.__code__, {'sys': type('S', (), {'_getframe': staticmethod(d.__getitem__)})()})",
     "c(0, None)", "replaced: sys"),
])
def test_replaced_frame_entry_points_cannot_capture_library_frames(patch, trigger, needle):
    r = run(f"""
        import collections
        import typing
        import pandas as pd
        M = collections._sys.modules
        def f():
            d = collections.defaultdict(collections._sys._getframe)
            {patch}
            try:
                {trigger}
            except BaseException:
                pass
            fr = list(d.values())[0]
            while fr is not None and 'payload' not in fr.f_locals:
                fr = fr.f_back
            return str(fr.f_locals['payload'])
    """)
    forbidden(r, needle)


def test_pandas_eval_level_reaching_the_runner_frame():
    r = run("""
        import pandas as pd
        def f():
            return str(pd.eval('payload', level=2))
    """)
    forbidden(r, "reaching frames above the submitted code")


def test_pandas_scope_whole_stack_walk():
    src = """
        import pandas as pd
        def f():
            sc = pd.core.computation.scope.Scope(level=0)
            sc.level = 50
            return str(pd.eval('payload', local_dict=sc))
    """
    forbidden(run(src), "stack() walk over the whole stack")
    # control: without the frame policy this route really does read the runner's payload
    r = run_in_sandbox(textwrap.dedent(src), CALL, {"function": "f", "secret": SECRET},
                       replace(LIMITS, allow_frame_introspection=True))
    assert r.status == "ok" and SECRET in r.value and r.details["frame_policy"] is False


def test_compiling_under_a_library_file_name_is_forbidden():
    # code that pretends to be pandas would otherwise pass as library code
    r = run("""
        import pandas
        def f():
            code = compile('import collections\\nF = collections._sys._getframe(0)', pandas.__file__, 'exec')
            g = {}
            exec(code, g)
            return str(g['F'].f_back)
    """)
    assert r.status == "forbidden" and r.message.startswith("forbidden: compiling code under the file name")
    r = run("""
        import pandas
        def f():
            code = compile('x = 1', '<agent>', 'exec')
            return str(code.replace(co_filename=pandas.__file__))
    """)
    assert r.status == "forbidden" and r.message.startswith("forbidden: compiling code under the file name")


def _code_bytes(pyc: bool = False) -> bytes:
    """marshal bytes of a code object labelled with pandas' file name that reads its own frame."""
    import importlib.util
    import marshal

    import pandas

    data = marshal.dumps(compile("import collections\nF = collections._sys._getframe(0)\n", pandas.__file__, "exec"))
    # a hash-based pyc whose source is never checked (flags 0b01): no timestamp to forge
    return importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little") + bytes(8) + data if pyc else data


WALK = """
def walk(fr):
    n = 0
    while fr is not None:
        n += 1
        fr = fr.f_back
    return n
"""

MARSHAL = "forbidden: building code objects from bytes ("


@pytest.mark.parametrize("call", [
    "m.loads(B)",
    "m.load(collections._sys.modules['io'].BytesIO(B))",
    "collections._sys.modules['_frozen_importlib_external']._compile_bytecode(B)",
])
def test_code_objects_from_bytes_are_forbidden(call):
    # marshal builds a code object with any file name, so the code would pass as pandas' own
    r = run(textwrap.dedent(f"""
        import collections
        B = {_code_bytes()!r}
        m = collections._sys.modules['marshal']
        def f():
            g = {{}}
            exec({call}, g)
            return walk(g['F'])
    """) + WALK)
    assert r.status == "forbidden", (r.status, r.message, r.value)
    assert r.message.startswith(MARSHAL), r.message


_SOURCE = b"import collections\nF = collections._sys._getframe(0)\n"


@pytest.mark.parametrize("loader, data, path, needle", [
    ("SourcelessFileLoader", "pyc", "'/nonexistent/x.pyc'", MARSHAL),
    ("SourceFileLoader", "source", "pandas.__file__", "forbidden: compiling code under the file name"),
])
def test_a_loader_that_serves_its_own_bytes_is_forbidden(loader, data, path, needle):
    # the import system's own route (get_code), fed by a loader subclass whose get_data returns the
    # agent's bytes: a pyc (unmarshalled) or source (compiled under pandas' file name)
    b = _code_bytes(pyc=True) if data == "pyc" else _SOURCE
    r = run(textwrap.dedent(f"""
        import collections
        import pandas
        ext = collections._sys.modules['_frozen_importlib_external']
        B = {b!r}
        class L(ext.{loader}):
            def get_data(self, path):
                return B
        def f():
            g = {{}}
            exec(L('x', {path}).get_code('x'), g)
            return walk(g['F'])
    """) + WALK)
    assert r.status == "forbidden" and r.message.startswith(needle), (r.status, r.message)


def test_a_replaced_io_module_in_the_import_system_is_forbidden():
    # the real FileLoader.get_data, reading through an _io the agent put into importlib's globals
    r = run(textwrap.dedent(f"""
        import collections
        ext = collections._sys.modules['_frozen_importlib_external']
        B = {_code_bytes(pyc=True)!r}
        class F:
            def __enter__(self):
                return self
            def __exit__(self, *a):
                return False
            def read(self):
                return B
        class IO:
            FileIO = staticmethod(lambda *a, **k: F())
            open_code = staticmethod(lambda *a, **k: F())
        def f():
            ext._io = IO()
            g = {{}}
            exec(ext.SourcelessFileLoader('x', '/nonexistent/x.pyc').get_code('x'), g)
            return walk(g['F'])
    """) + WALK)
    assert r.status == "forbidden" and r.message.startswith(MARSHAL), (r.status, r.message)


def test_lazy_imports_inside_the_standard_library_still_work():
    # encodings imports a codec module on first use: the import system unmarshals a real .pyc while
    # only standard-library frames stand between it and the submitted code
    r = run("""
        import collections
        def f():
            before = 'encodings.koi8_u' in collections._sys.modules
            return [before, 'ж'.encode('koi8_u').hex(), 'encodings.koi8_u' in collections._sys.modules]
    """)
    assert r.status == "ok", r.message
    assert r.value == [False, 'ж'.encode('koi8_u').hex(), True]


# --------------------------------------------------------------------------- library code keeps working
def test_pandas_and_numpy_warnings_still_work():
    # pandas' find_stack_level walks frames (inspect.currentframe) to point the warning at the caller
    r = run("""
        import numpy as np
        import pandas as pd
        def f():
            d = pd.to_datetime(['13/01/2024', '01/02/2024'])     # UserWarning via find_stack_level
            m = np.mean(np.array([]))                            # RuntimeWarning from numpy
            s = pd.Series([1.0, 2.0, 4.0], index=pd.date_range('2024-01-01', periods=3))
            return [len(d), bool(np.isnan(m)), float(s.resample('ME').mean().iloc[0])]
    """)
    assert r.status == "ok", r.message
    assert r.value == [2, True, pytest.approx(7 / 3)]
    assert "<agent>:5: UserWarning: Parsing dates" in r.stdout  # attributed to the agent line
    assert "RuntimeWarning: Mean of empty slice" in r.stdout


def test_library_frame_consumers_still_work():
    r = run("""
        import collections
        import dataclasses
        import typing
        import pandas as pd
        P = collections.namedtuple('P', 'a b')
        T = typing.TypeVar('T')
        N = typing.NamedTuple('N', [('a', int)])
        E = collections._sys.modules['enum'].Enum('E', 'red green')
        @dataclasses.dataclass
        class D:
            x: int = 1
        def f():
            Q = collections.namedtuple('Q', 'x')
            y = 3
            df = pd.DataFrame({'a': [1, 5, 7]})
            q = df.query('a > @y')
            rows = list(df.itertuples())
            g = {}
            exec('z = 40 + 2', g)
            return [P(1, 2).a, Q(3).x, N(4).a, E.green.value, D(5).x, int(q['a'].sum()), len(rows),
                    int(pd.eval('y + 1')), g['z'], P.__module__, T.__name__]
    """)
    assert r.status == "ok", r.message
    assert r.value == [1, 3, 4, 2, 5, 12, 3, 4, 42, "__agent__", "T"]


def test_errors_inside_agent_code_keep_their_trimmed_traceback():
    r = run("""
        import pandas as pd
        def helper(x):
            return pd.Series([1]).map(lambda v: v / x)
        def f():
            return helper(0).tolist() + [1 / 0]
    """)
    assert r.status == "error" and "ZeroDivisionError" in r.message
    assert 'File "<agent>"' in r.traceback and "in f" in r.traceback


@pytest.mark.parametrize("source, status", [
    ("import numpy as np\ndef f():\n    return np.linspace(0.0, 1.0, num=-1).tolist()\n", "error"),
    ("def f():\n    import sklearn\n    return 1\n", "forbidden"),
])
def test_the_agents_traceback_names_no_path_of_this_machine(source, status):
    """Feedback quotes the traceback to the agent (and an LLM prompt quotes the feedback): it shows
    the agent's frames and library files relative to their sys.path entry, never the sandbox's own
    frames or an absolute path, so a recorded prompt is the same in every checkout."""
    import os

    import quantgym

    r = run(source)
    assert r.status == status, (r.status, r.message)
    assert 'File "<agent>"' in r.traceback, r.traceback
    root = os.path.dirname(os.path.dirname(os.path.abspath(quantgym.__file__)))
    assert root not in r.traceback and 'File "/' not in r.traceback, r.traceback
    assert "quantgym/sandbox" not in r.traceback, r.traceback
    if status == "error":
        assert 'File "numpy/' in r.traceback, r.traceback


# --------------------------------------------------------------------------- switches
def test_runner_may_allow_frames_and_limits_override_it():
    from .sandbox_test_runners import frames_allowed

    runner = f"{frames_allowed.__module__}:frames_allowed"
    src = "import collections\ndef f():\n    return collections._sys._getframe(0).f_code.co_name\n"
    r = run_in_sandbox(src, runner, {"function": "f"}, LIMITS)
    assert r.status == "ok" and r.value == "f" and r.details["frame_policy"] is False
    r = run_in_sandbox(src, runner, {"function": "f"}, replace(LIMITS, allow_frame_introspection=False))
    forbidden(r, "sys._getframe")


def test_allow_frame_introspection_is_validated():
    with pytest.raises(ValueError, match="allow_frame_introspection"):
        SandboxLimits(allow_frame_introspection="yes")  # type: ignore[arg-type]
