"""Happy paths of the sandbox: libraries work, values and payloads round-trip, readable_paths."""

from __future__ import annotations

import dataclasses
import sys
import json
import textwrap

import numpy as np
import pandas as pd
import pytest

from quantgym.sandbox import (
    DEFAULT_ALLOWED_IMPORTS,
    SandboxLimits,
    SandboxOutputError,
    SandboxResult,
    run_in_sandbox,
)

CALL = "quantgym.sandbox.runners:call_function"
LIMITS = SandboxLimits(cpu_seconds=20.0, wall_seconds=60.0)


def run(source: str, *args, limits: SandboxLimits = LIMITS, function: str = "f", **kwargs) -> SandboxResult:
    payload = {"function": function, "args": list(args), "kwargs": kwargs}
    return run_in_sandbox(textwrap.dedent(source), CALL, payload, limits)


def test_numpy_pandas_scipy_work_inside_the_sandbox():
    r = run(
        """
        import math, statistics, collections, itertools, functools, dataclasses, typing, datetime
        import numpy as np
        import pandas as pd
        import scipy.stats
        from scipy import optimize, linalg

        def f(x):
            rng = np.random.default_rng(0)
            a = rng.standard_normal((50, 3))
            df = pd.DataFrame(a, columns=list("abc"), index=pd.date_range("2024-01-01", periods=50))
            roll = df.rolling(5).mean().iloc[-1].to_numpy()
            rank = df.rank(axis=1, pct=True).iloc[-1].to_numpy()
            opt = optimize.minimize_scalar(lambda t: (t - x) ** 2).x
            return {
                "cdf0": float(scipy.stats.norm.cdf(0.0)),
                "opt": round(float(opt), 6),
                "det": float(linalg.det(np.eye(3) * 2)),
                "median": statistics.median([3, 1, 2]),
                "roll_shape": list(roll.shape),
                "rank_max": float(rank.max()),
                "spearman": float(scipy.stats.spearmanr(a[:, 0], a[:, 0]).statistic),
            }
        """,
        1.5,
    )
    assert r.ok, r.message + "\n" + (r.traceback or "")
    assert r.value["cdf0"] == 0.5
    assert r.value["opt"] == 1.5
    assert r.value["det"] == pytest.approx(8.0)
    assert r.value["median"] == 2
    assert r.value["roll_shape"] == [3]
    assert r.value["rank_max"] == 1.0
    assert r.value["spearman"] == pytest.approx(1.0)


def test_pandas_series_round_trips():
    r = run(
        """
        import pandas as pd
        def f(symbols, values):
            return pd.Series(values, index=pd.Index(symbols, name="symbol"), name="score")
        """,
        ["600519", "000001", "300750"],
        [0.5, -1.0, float("nan")],
    )
    assert r.ok, r.message
    s = r.value
    assert isinstance(s, pd.Series) and s.name == "score" and s.index.name == "symbol"
    assert list(s.index) == ["600519", "000001", "300750"]
    np.testing.assert_array_equal(s.to_numpy(), np.array([0.5, -1.0, np.nan]))
    assert s.dtype == np.float64


def test_dataframe_multiindex_datetime_and_nested_values_round_trip():
    r = run(
        """
        import numpy as np
        import pandas as pd
        def f():
            idx = pd.MultiIndex.from_product([pd.date_range("2024-01-02", periods=2), ["A", "B"]],
                                             names=["date", "symbol"])
            df = pd.DataFrame({"x": np.arange(4.0), "n": np.arange(4), "flag": [True, False, True, True]}, index=idx)
            tz = pd.Series([1.0, 2.0], index=pd.date_range("2024-01-01", periods=2, tz="Asia/Shanghai"))
            return {"df": df, "tz": tz, "t": (1, "a", None, float("inf")), 3: np.float32(2.5),
                    "ts": pd.Timestamp("2024-05-01 09:30"), "i": np.int64(7), "b": np.bool_(True),
                    "arr": np.arange(6, dtype=np.int16).reshape(2, 3)}
        """
    )
    assert r.ok, r.message
    v = r.value
    df = v["df"]
    assert isinstance(df.index, pd.MultiIndex) and df.index.names == ["date", "symbol"]
    assert list(df.columns) == ["x", "n", "flag"]
    assert df["x"].tolist() == [0.0, 1.0, 2.0, 3.0] and df["n"].dtype == np.int64 and df["flag"].dtype == bool
    assert df.index.get_level_values(0)[0] == pd.Timestamp("2024-01-02")
    assert str(v["tz"].index.tz) == "Asia/Shanghai" and v["tz"].index[0] == pd.Timestamp("2024-01-01", tz="Asia/Shanghai")
    assert v["t"][:3] == [1, "a", None] and v["t"][3] == float("inf")
    assert v[3] == 2.5 and v["i"] == 7 and v["b"] is True
    assert v["ts"] == pd.Timestamp("2024-05-01 09:30")
    assert v["arr"].dtype == np.int16 and v["arr"].shape == (2, 3)


def test_payload_arrives_intact():
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(rng.standard_normal((30, 4)), columns=["a", "b", "c", "d"],
                         index=pd.date_range("2023-01-02", periods=30, freq="B"))
    r = run(
        """
        import numpy as np
        def f(frame, meta):
            return {"sum": float(frame.to_numpy().sum()), "cols": list(frame.columns),
                    "first": str(frame.index[0].date()), "meta": meta}
        """,
        frame,
        {"k": [1, 2, {"z": None}], "s": "ü"},
    )
    assert r.ok, r.message
    assert r.value["sum"] == float(frame.to_numpy().sum())
    assert r.value["cols"] == ["a", "b", "c", "d"] and r.value["first"] == "2023-01-02"
    assert r.value["meta"] == {"k": [1, 2, {"z": None}], "s": "ü"}


def test_fifty_megabyte_numpy_payload_and_result():
    big = np.random.default_rng(1).standard_normal(50 * 1024 * 1024 // 8)
    r = run("def f(a):\n    return a * 2.0\n", big)
    assert r.ok, r.message
    assert r.value.shape == big.shape
    np.testing.assert_array_equal(r.value, big * 2.0)


def test_readable_paths_allow_exactly_the_listed_file(tmp_path):
    allowed = tmp_path / "allowed.csv"
    allowed.write_text("symbol,px\nA,1.5\nB,2.5\n")
    sibling = tmp_path / "secret.csv"
    sibling.write_text("symbol,px\nZ,9\n")
    lim = SandboxLimits(cpu_seconds=20.0, wall_seconds=60.0, readable_paths=(str(allowed),))
    ok = run("import pandas as pd\ndef f(p):\n    return float(pd.read_csv(p)['px'].sum())\n", str(allowed), limits=lim)
    assert ok.ok and ok.value == 4.0
    bad = run("def f(p):\n    return open(p).read()\n", str(sibling), limits=lim)
    assert bad.status == "forbidden" and "secret.csv" in bad.message
    write = run("def f(p):\n    open(p, 'a').write('x')\n", str(allowed), limits=lim)
    assert write.status == "forbidden" and "for writing" in write.message
    assert allowed.read_text() == "symbol,px\nA,1.5\nB,2.5\n"


def test_readable_directory_allows_files_inside(tmp_path):
    d = tmp_path / "books"
    d.mkdir()
    (d / "one.json").write_text(json.dumps({"v": 1}))
    lim = SandboxLimits(cpu_seconds=20.0, wall_seconds=60.0, readable_paths=(str(d),))
    r = run("import json\ndef f(p):\n    return json.load(open(p))['v']\n", str(d / "one.json"),
            limits=dataclasses.replace(lim, allowed_imports=DEFAULT_ALLOWED_IMPORTS + ("json",)))
    assert r.ok and r.value == 1


def test_agent_print_is_captured():
    r = run("def f():\n    print('hello from the agent')\n    return None\n")
    assert r.ok and r.value is None and r.stdout == "hello from the agent\n" and not r.output_truncated


def test_lazy_stdlib_import_by_library_code_works():
    # pandas' to_string / describe pull in modules lazily after lockdown; they must still load.
    r = run("import pandas as pd\ndef f():\n    s = pd.Series([1.0, 2.0, 3.0])\n    return s.describe().to_string()\n")
    assert r.ok, r.message
    assert "mean" in r.value


def test_to_record_is_json_able():
    r = run("import numpy as np\ndef f():\n    return {'a': np.array([1.0, np.nan])}\n")
    rec = r.to_record()
    json.dumps(rec, allow_nan=False)
    assert rec["status"] == "ok" and rec["value"] == {"a": [1.0, None]} and rec["sandbox_version"]


def test_runner_string_errors_are_value_errors():
    with pytest.raises(ValueError, match="package.module:function"):
        run_in_sandbox("x = 1", "no_colon_here")
    with pytest.raises(ValueError, match="cannot be found"):
        run_in_sandbox("x = 1", "quantgym.no_such_module_xyz:f")
    with pytest.raises(ValueError, match="source must be a str"):
        run_in_sandbox(b"x = 1", CALL)  # type: ignore[arg-type]


def test_pyarrow_payload_is_refused_with_a_clear_error():
    pa = pytest.importorskip("pyarrow")
    s = pd.Series(["a", "b"], dtype=pd.ArrowDtype(pa.string()))
    with pytest.raises(ValueError, match="pyarrow"):
        run_in_sandbox("x = 1", CALL, {"function": "f", "args": [s]})
    # strings that merely look like module names are data, not imports
    r = run("def f(d):\n    return d\n", {"tables": "pyarrow.lib", "requests": 1})
    assert r.ok and r.value == {"tables": "pyarrow.lib", "requests": 1}
    # pandas >= 3 default string dtype (pyarrow-backed when pyarrow is installed) is converted
    r = run("def f(s):\n    return s.str.upper()\n", pd.Series(["a", "b"], index=["x", "y"]))
    assert r.ok and r.value.tolist() == ["A", "B"] and list(r.value.index) == ["x", "y"]


def test_limits_are_validated():
    with pytest.raises(ValueError):
        SandboxLimits(cpu_seconds=0)
    with pytest.raises(ValueError):
        SandboxLimits(memory_mb=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        SandboxLimits(allowed_imports="numpy")  # type: ignore[arg-type]
    assert SandboxLimits().allowed_imports == DEFAULT_ALLOWED_IMPORTS
    assert issubclass(SandboxOutputError, Exception)


class _FailsToUnpickle:
    """Pickles fine in the host, raises when the child unpickles it (int('not a number'))."""

    def __reduce__(self):
        return (int, ("not a number",))


def test_payload_that_fails_to_unpickle_in_the_child_is_a_clear_crash():
    r = run_in_sandbox("def f(x):\n    return 1\n", CALL, {"function": "f", "args": [_FailsToUnpickle()]})
    assert r.status == "crashed"
    assert r.message.startswith("crashed: the sandbox could not read its payload: ValueError")


def test_runner_sandbox_prepare_hook_runs_before_lockdown():
    from .sandbox_test_runners import prepared_echo

    runner = f"{prepared_echo.__module__}:prepared_echo"
    r = run_in_sandbox("def f():\n    return 'agent ran'\n", runner, {"secret": "hidden", "x": 1})
    assert r.ok, r.message
    assert r.value["agent"] == "agent ran"
    assert r.value["payload"]["secret"] is None and r.value["payload"]["x"] == 1
    assert r.value["payload"]["prepared_pid"] == r.details["pid"]


_SUBREAPER_SCRIPT = r"""
import ctypes, json, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER: orphans of the sandbox come to us
from quantgym.sandbox import SandboxLimits, run_in_sandbox
runner = "tests.sandbox.sandbox_test_runners:forked_helper"
statuses = []
for sleep, body in [(0, "return 1"), (30, "return 1"), (0, "return 1"), (30, "while True:\n        pass")]:
    r = run_in_sandbox("def f():\n    " + body + "\n", runner, {"helper_sleep": sleep},
                       SandboxLimits(cpu_seconds=1 if "while" in body else 20, wall_seconds=30))
    statuses.append(r.status)
from quantgym.sandbox import close_warm_parents
close_warm_parents()  # the warm zygote is a child of the host until closed (docs/security.md)
time.sleep(0.5)  # let any unreaped helper die
me, zombies, alive = os.getpid(), [], []
for name in os.listdir("/proc"):
    if not name.isdigit():
        continue
    try:
        stat = open(f"/proc/{name}/stat", "rb").read()
    except OSError:
        continue
    fields = stat[stat.rfind(b")") + 2:].split()
    if int(fields[1]) == me:
        (zombies if fields[0] == b"Z" else alive).append(int(name))
print(json.dumps({"statuses": statuses, "zombies": zombies, "alive": alive}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux-only")
def test_no_zombies_under_a_subreaper():
    # as PID 1 or a subreaper (a container without an init), every process the sandbox
    # child forked (a keeper, here a helper forked by sandbox_prepare) is re-parented to us: the sandbox
    # must reap it. Before the fix: one zombie per evaluation.
    import os
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", _SUBREAPER_SCRIPT], capture_output=True, text=True, cwd=root,
                         env={**os.environ, "PYTHONPATH": root}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    assert rec["statuses"] == ["ok", "ok", "ok", "timeout"], rec
    assert rec["zombies"] == [] and rec["alive"] == [], rec
