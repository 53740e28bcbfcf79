"""Without the extra ``llm-server`` the real-server tests skip in one line (no start-up traceback),
and fail under ``QUANTGYM_REQUIRE_LLM_SERVER=1`` (.ci/run). The missing module is simulated by a
plugin that sets ``sys.modules["llama_cpp"] = None``, which import machinery treats as absent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run_without_llama_cpp(tmp_path, required: bool) -> subprocess.CompletedProcess:
    (tmp_path / "no_llama_cpp.py").write_text('import sys\nsys.modules["llama_cpp"] = None\n')
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("QUANTGYM_REQUIRE_LLM_SERVER", None)
    if required:
        env["QUANTGYM_REQUIRE_LLM_SERVER"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-p", "no_llama_cpp",
                           "-m", "slow", "-q", "tests/llm_server"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("required", [False, True])
def test_missing_llama_cpp_skips_in_one_line_or_fails_when_required(tmp_path, required):
    r = _run_without_llama_cpp(tmp_path, required)
    out = r.stdout + r.stderr
    assert "Traceback" not in out
    if not required:
        assert r.returncode == 5, out  # pytest's "no tests collected": the module skipped before collection
        # one line per test module of tests/llm_server, each with the reason
        modules = sorted((ROOT / "tests" / "llm_server").glob("test_*.py"))
        skipped = [ln for ln in out.splitlines() if ln.startswith("SKIPPED")]
        assert len(skipped) == len(modules) and all("llama.cpp server not installed" in ln for ln in skipped)
        assert out.rstrip().splitlines()[-1].startswith(f"{len(modules)} skipped")
    else:
        assert r.returncode == 1, out
        assert "QUANTGYM_REQUIRE_LLM_SERVER=1 but llama.cpp server not installed" in out
        assert " 0 passed" not in out and "skipped" not in out.splitlines()[-1]
