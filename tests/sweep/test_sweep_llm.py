"""An LLM agent in a sweep, against the local OpenAI-compatible test server of tests/llm (loopback only),
then its transcript replayed offline by a second sweep on both backends: identical results."""

from __future__ import annotations

import json

import pytest

from quantgym.sweep.grid import parse_grid
from quantgym.sweep.runner import run_sweep

pytest.importorskip("openai")
try:  # the scripted server and answers of the LLM-agent tests (tests/llm)
    from llm import pb_script
    from llm.server import ScriptedServer
except ImportError:  # pragma: no cover - tests/llm absent
    pytest.skip("tests/llm scripted server not available", allow_module_level=True)

WINDOW = {"start": "2020-03-01", "end": "2020-03-31", "freq": "weekly"}


@pytest.fixture(scope="module")
def llm_sweep(tmp_path_factory, pb_data):
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "test-key")
    srv = ScriptedServer().start()
    srv.responder = pb_script.valid
    try:
        grid = parse_grid({"agents": [{"spec": "openai:test-model", "options": {"base_url": srv.base_url}},
                                      "equal_weight"],
                           "envs": ["PortBench-Conservative-v0"], "env_kwargs": {"period": WINDOW}})
        out = run_sweep(grid, tmp_path_factory.mktemp("llm_sweep"), workers=2, data=pb_data)
        n_requests = len(srv.requests)
    finally:
        srv.stop()
        mp.undo()
    return out, n_requests


def test_llm_agent_runs_in_a_sweep_with_its_transcript_under_out(llm_sweep):
    out, n_requests = llm_sweep
    assert out.failed == [] and n_requests > 0
    llm = next(r for r in out.records if r["spec"]["agent"] == "openai:test-model")
    assert set(llm["result"]["stage_scores"]) == {"S1", "S2", "S3", "S4", "S5"} and llm["result"]["ceps"] is not None
    path = out.out_dir / "transcripts" / f"portbench-test-model-{llm['run_id']}.jsonl"  # <task>-<model>-<run>
    assert llm["transcript"] == str(path.resolve())
    assert path.stat().st_size > 0


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_replaying_the_transcript_in_a_sweep_gives_the_same_results(llm_sweep, backend, tmp_path, pb_data, request):
    if backend == "ray":
        request.getfixturevalue("ray_session")
    out, _ = llm_sweep
    llm = next(r for r in out.records if r["spec"]["agent"] == "openai:test-model")
    grid = parse_grid({"agents": [f"replay:{llm['transcript']}"], "envs": ["PortBench-Conservative-v0"],
                       "env_kwargs": {"period": WINDOW}})
    again = run_sweep(grid, tmp_path, backend=backend, workers=1, data=pb_data)
    rec = again.records[0]
    assert rec["status"] == "ok", rec["error"]
    for key in ("metrics", "stage_scores", "ceps", "nav"):
        assert json.dumps(rec["result"][key], sort_keys=True) == json.dumps(llm["result"][key], sort_keys=True)
