"""A sandbox failure's error record names the status once: ``type`` = the sandbox status, ``message``
without the same leading ``"<status>: "`` (no "error: error: SyntaxError", "forbidden: forbidden: open")."""

from __future__ import annotations

import pytest

from quantgym.envs.quant_arena.executor import evaluate_submission

MODULE = "FEATURES = ['a']\ndef compute_features(view):\n{body}\ndef score(view, features):\n    return {{}}\n"


@pytest.mark.parametrize("executor", ["sandbox", "inprocess"])
def test_syntax_error_record_has_no_doubled_prefix(small_real, executor):
    r = evaluate_submission("syntax error here (", small_real, "2023-11-01", "2023-11-10", executor=executor)
    err = r.errors[0]
    assert r.status == "invalid" and err["type"] == "error"
    assert err["message"].startswith("SyntaxError") and not err["message"].startswith("error:")
    assert r.message.startswith("error: SyntaxError")  # the one-line result message keeps its status
    assert f"{err['type']}: {err['message']}" == r.message


def test_forbidden_record_has_no_doubled_prefix(small_real):
    src = MODULE.format(body="    open('/etc/passwd')\n    return {}")
    r = evaluate_submission(src, small_real, "2023-11-01", "2023-11-10")
    err = r.errors[0]
    assert r.status == "violation" and err["type"] == "forbidden"
    assert err["message"].startswith("open('/etc/passwd') is not allowed")
    assert r.message == f"forbidden: {err['message']}"
