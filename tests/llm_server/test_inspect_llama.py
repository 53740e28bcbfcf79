"""quantgym's Inspect tasks (docs/inspect.md) on the real llama.cpp server with SmolLM2-135M, through Inspect's
OpenAI-compatible provider. Skips like the other real-server tests (conftest.py), and without the extra
``inspect``."""

import pytest

from ._helpers import PERIOD_1_CLI
from .conftest import MISSING, REQUIRED

if MISSING and not REQUIRED:
    pytest.skip(MISSING, allow_module_level=True)

pytestmark = pytest.mark.slow


def test_inspect_on_the_real_server_portbench_one_date_and_one_market_bench_attempt(llama4k, tmp_path, monkeypatch):
    """Inspect's OpenAI-compatible provider (``openai-api/<service>/<model>`` with ``<SERVICE>_BASE_URL``) on the
    real llama.cpp server: a one-date PortBench episode and one Market-Bench attempt, scored by the envs
    (docs/inspect.md); ``quantgym report`` reads the logs."""
    pytest.importorskip("inspect_ai", reason="the Inspect tests need the extra: pip install -e '.[inspect]'")
    from inspect_ai import eval as inspect_eval
    from inspect_ai._eval.registry import task_create

    from quantgym.leaderboard.sources import load_source

    monkeypatch.setenv("LLAMACPP_BASE_URL", llama4k.base_url)
    monkeypatch.setenv("LLAMACPP_API_KEY", "no-key-needed")
    # llama-cpp-python's grammar-constrained JSON ({"type": "json_object", "schema": ...}, sent as Inspect's
    # extra_body): every stage answer parses, so the decision date takes three calls
    pb = task_create("quantgym/portbench", profile="balanced", period=PERIOD_1_CLI, context_window=4096,
                     structured="json_object_schema")
    mb = task_create("quantgym/market_bench", strategy="scheduled", round=1, attempts=1, context_window=4096,
                     max_tokens=384)
    logs = inspect_eval([pb, mb], model="openai-api/llamacpp/smollm2", log_dir=str(tmp_path / "logs"),
                        display="none", max_retries=1, timeout=600)
    assert [log.status for log in logs] == ["success", "success"], [log.error for log in logs]
    (pb_sample,), (mb_sample,) = logs[0].samples, logs[1].samples
    pb_score, mb_score = (next(iter(s.scores.values())) for s in (pb_sample, mb_sample))
    run = pb_score.metadata["runs"][0]
    # one decision date, S1-S3: every call answered by the server through Inspect, every answer parsed
    assert [st["text"]["stage"] for st in run["steps"]] == ["S1", "S2", "S3"]
    assert all(st["text"]["status"] == "ok" for st in run["steps"])
    assert run["usage"]["failures"] == 0 and run["usage"]["calls"] == 3 and run["usage"]["completion_tokens"] > 0
    assert all(v == v for k, v in pb_score.value.items() if k in ("sharpe", "ret_pct", "maxdd_pct", "vol_pct"))
    (rec,) = mb_score.metadata["run"]["records"]  # one attempt, run in quantgym's sandbox
    assert (rec["round"], rec["attempt"]) == (1, 1) and rec["status"] in ("SUCCESS", "FAILED")
    assert mb_score.value["pass@1"] in (0.0, 1.0)
    rows = load_source(tmp_path / "logs").rows
    assert {(r["task"], r["agent"]) for r in rows} == {("portbench", "inspect:openai-api/llamacpp/smollm2"),
                                                         ("market_bench", "inspect:openai-api/llamacpp/smollm2")}
