"""Warm start of sandbox children (quantgym.sandbox._zygote, docs/security.md "Warm start"): every run is a
fresh fork of a zygote that never ran agent code, locked down exactly as a freshly started child."""

from __future__ import annotations

import pickle
import textwrap

import numpy as np
import pandas as pd
import pytest

from quantgym.sandbox import SandboxLimits, _host, _payload, _zygote, run_in_sandbox

CALL = "quantgym.sandbox.runners:call_function"
LIMITS = SandboxLimits(cpu_seconds=20.0, wall_seconds=60.0)


def run(source: str, *args, limits: SandboxLimits = LIMITS):
    return run_in_sandbox(textwrap.dedent(source), CALL, {"function": "f", "args": list(args)}, limits)


@pytest.fixture(autouse=True)
def _zygote_on(monkeypatch):
    monkeypatch.delenv("QUANTGYM_SANDBOX_ZYGOTE", raising=False)
    yield
    _zygote.close_all()


def test_runs_are_fresh_forks_that_carry_no_state_between_attempts():
    mark = """
        import numpy as np
        import pandas as pd

        def f():
            seen = getattr(np, "_agent_mark", None)
            np._agent_mark = "set by an earlier attempt"
            pd.set_option("display.max_rows", 3)
            return [seen, pd.get_option("display.max_rows"), float(np.random.random())]
        """
    a, b = run(mark), run(mark)
    assert a.ok and b.ok, (a.message, b.message)
    assert a.details["start"] == b.details["start"] == "zygote"
    assert a.details["pid"] != b.details["pid"]
    assert a.value[0] is None and b.value[0] is None  # the second fork never saw the first one's change
    assert a.value[2] != b.value[2]  # numpy's global random state is reseeded per child, as in a new interpreter
    assert a.details["seccomp"] is True or "seccomp_error" in a.details  # the same kernel layers are installed
    assert a.details["frame_policy"] is True


def test_a_forked_child_keeps_every_limit():
    r = run("import socket\ndef f():\n    return 1\n")
    assert r.status == "forbidden" and "socket" in r.message and r.details["start"] == "zygote"
    r = run("def f():\n    return open('/etc/passwd').read()\n")
    assert r.status == "forbidden" and r.details["start"] == "zygote"
    r = run("def f():\n    while True:\n        pass\n", limits=SandboxLimits(cpu_seconds=1.0, wall_seconds=60.0))
    assert r.status == "timeout" and "CPU-time" in r.message and r.cpu_seconds >= 1.0
    r = run("def f():\n    while True:\n        pass\n", limits=SandboxLimits(cpu_seconds=60.0, wall_seconds=2.0))
    assert r.status == "timeout" and "wall-clock" in r.message
    r = run("import numpy as np\ndef f():\n    return np.ones(10**10).sum()\n",
            limits=SandboxLimits(cpu_seconds=20.0, wall_seconds=60.0, memory_mb=1024))
    assert r.status == "memory"


def test_switched_off_every_run_starts_a_fresh_interpreter(monkeypatch):
    monkeypatch.setenv("QUANTGYM_SANDBOX_ZYGOTE", "0")
    r = run("def f():\n    return 2\n")
    assert r.ok and r.value == 2 and r.details["start"] == "fresh" and "zygote_error" not in r.details


def test_a_zygote_that_cannot_start_falls_back_to_a_fresh_interpreter_and_says_why(monkeypatch):
    def broken(*_a, **_k):
        raise _zygote.ZygoteError("zygote did not start: test")

    monkeypatch.setattr(_zygote, "get", broken)
    r = run("def f():\n    return 3\n")
    assert r.ok and r.value == 3
    assert r.details["start"] == "fresh" and r.details["zygote_error"] == "ZygoteError: zygote did not start: test"


def test_a_zygote_that_died_is_replaced():
    assert run("def f():\n    return 1\n").details["start"] == "zygote"
    (z,) = _zygote._ZYGOTES.values()
    z.proc.kill()
    z.proc.wait()
    r = run("def f():\n    return 4\n")
    if r.details["start"] == "fresh":  # the dead zygote was noticed by this run: recorded, then replaced
        assert "zygote" in r.details["zygote_error"]
        r = run("def f():\n    return 4\n")
    assert r.ok and r.value == 4 and r.details["start"] == "zygote"


def test_the_payload_scan_reads_the_skeleton_which_names_the_same_modules():
    payload = {"df": pd.DataFrame({"x": np.arange(200_000.0), "s": ["a", "b"] * 100_000}),
               "arr": np.random.default_rng(0).standard_normal(500_000)}
    full, skel = _payload.dumps(payload), _payload.skeleton(payload)
    assert _host._pickled_modules(skel) == _host._pickled_modules(full)
    assert len(skel) < len(full) - 5_000_000  # the array contents stay out of the scanned stream
    assert pickle.loads(full)["arr"].sum() == payload["arr"].sum()
