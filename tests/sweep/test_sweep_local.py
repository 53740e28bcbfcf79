"""Local backend: results files, resume, failing runs, gates."""

from __future__ import annotations

import json

import pytest

from quantgym.results import SUMMARY_COLUMNS, read_summary_csv
from quantgym.sweep.grid import parse_grid
from quantgym.sweep.runner import SweepError, execute_run, read_record, run_sweep


def test_local_sweep_writes_run_files_and_the_common_schema(local_sweep, small_grid):
    out = local_sweep.out_dir
    specs = small_grid.expand()
    assert local_sweep.n_runs == 4 and sorted(local_sweep.executed) == sorted(s.run_id for s in specs)
    assert local_sweep.failed == []
    for s in specs:
        rec = read_record(out, s.run_id)
        assert rec["status"] == "ok" and rec["spec"] == s.to_dict() and rec["task"] == "portbench"
        assert rec["result"]["period"] == "covid_2020"
        assert len(rec["result"]["nav"]["dates"]) == len(rec["result"]["nav"]["values"]) > 50
    rows = read_summary_csv(out / "summary.csv")
    assert list(rows[0]) == list(SUMMARY_COLUMNS)
    assert [(r["agent"], r["profile"]) for r in rows] == [
        ("Equal-Weight", "conservative"), ("Equal-Weight", "aggressive"),
        ("Risk Parity", "conservative"), ("Risk Parity", "aggressive")]
    doc = json.loads((out / "results.json").read_text())
    runs = doc["tasks"]["portbench"]["runs"]
    assert [r["run_id"] for r in runs] == [s.run_id for s in specs]
    assert doc["meta"]["n_runs"] == 4 and doc["meta"]["backend"] == "local"
    # a stress-window row's gate is |MaxDD| <= the profile's tolerance (spec §7.2)
    for row, r in zip(rows, runs):
        tol = {"conservative": 0.10, "aggressive": 0.35}[row["profile"]]
        assert row["gate"] == ("true" if abs(r["metrics"]["max_drawdown"]) <= tol else "false")
    # same backtest under two profiles: identical NAV (baselines are profile-independent)
    assert runs[0]["nav"] == runs[1]["nav"]


def test_resume_skips_finished_runs_and_reruns_only_missing_or_torn_ones(tmp_path, pb_data):
    grid = parse_grid({"agents": ["equal_weight", "sixty_forty"], "envs": ["PortBench-Conservative-v0"],
                       "env_kwargs": {"period": "covid_2020"}})
    first = run_sweep(grid, tmp_path, workers=1, data=pb_data)
    assert len(first.executed) == 2
    ids = [s.run_id for s in grid.expand()]
    before = {i: (tmp_path / "runs" / f"{i}.json").read_bytes() for i in ids}
    again = run_sweep(grid, tmp_path, workers=1, data=pb_data)
    assert again.executed == [] and sorted(again.skipped) == sorted(ids)
    assert {i: (tmp_path / "runs" / f"{i}.json").read_bytes() for i in ids} == before
    # one run lost, another torn mid-write: only those two run again, with the same results
    (tmp_path / "runs" / f"{ids[0]}.json").unlink()
    (tmp_path / "runs" / f"{ids[1]}.json").write_text('{"run_id": "trunc')
    third = run_sweep(grid, tmp_path, workers=1, data=pb_data)
    assert sorted(third.executed) == sorted(ids)
    for i in ids:
        a, b = json.loads(before[i]), read_record(tmp_path, i)
        a.pop("timing"), b.pop("timing")
        assert a == b
    # extending the grid runs only the new cell
    bigger = parse_grid({"agents": ["equal_weight", "sixty_forty", "risk_parity"],
                         "envs": ["PortBench-Conservative-v0"], "env_kwargs": {"period": "covid_2020"}})
    fourth = run_sweep(bigger, tmp_path, workers=1, data=pb_data)
    assert len(fourth.executed) == 1 and len(fourth.skipped) == 2


def test_a_failing_run_is_recorded_and_does_not_stop_the_grid(tmp_path, pb_data):
    grid = parse_grid({"agents": ["equal_weight", "no_such_agent"], "envs": ["PortBench-Conservative-v0"],
                       "env_kwargs": {"period": ["covid_2020", "no_such_period"]}})
    out = run_sweep(grid, tmp_path, workers=2, data=pb_data)
    assert out.n_runs == 4 and len(out.executed) == 4 and len(out.failed) == 3
    ok = [r for r in out.records if r["status"] == "ok"]
    assert [(r["spec"]["agent"], r["spec"]["env_kwargs"]["period"]) for r in ok] == [("equal_weight", "covid_2020")]
    bad = {(r["spec"]["agent"], r["spec"]["env_kwargs"]["period"]): r["error"] for r in out.records
           if r["status"] == "error"}
    assert "unknown period 'no_such_period'" in bad[("equal_weight", "no_such_period")]["message"]
    assert "unknown baseline 'no_such_agent'" in bad[("no_such_agent", "covid_2020")]["message"]
    assert all(e["type"] == "ValueError" and "Traceback" in e["traceback"] for e in bad.values())
    assert len(read_summary_csv(tmp_path / "summary.csv")) == 1
    doc = json.loads((tmp_path / "results.json").read_text())
    assert len(doc["tasks"]["portbench"]["failed"]) == 3 and doc["meta"]["n_failed"] == 3
    # --keep-failed: a rerun leaves the error records alone; the default retries them (and they fail again)
    kept = run_sweep(grid, tmp_path, workers=1, retry_failed=False, data=pb_data)
    assert kept.executed == [] and len(kept.failed) == 3
    retried = run_sweep(grid, tmp_path, workers=1, data=pb_data)
    assert sorted(retried.executed) == sorted(out.failed)


def test_execute_run_never_raises_and_normal_period_gate_uses_the_three_stress_windows(tmp_path, pb_data):
    rec = execute_run({"agent": "risk_parity", "env_id": "Not-An-Env-v0", "env_kwargs": {}, "seed": 0,
                       "agent_options": {}, "data": None}, data=pb_data)
    assert rec["status"] == "error" and rec["error"]["type"]
    grid = parse_grid({"agents": ["risk_parity"], "envs": ["PortBench-Conservative-v0"],
                       "env_kwargs": {"period": ["normal_2024", "china_2015", "covid_2020", "crypto_2022"]}})
    run_sweep(grid, tmp_path, workers=2, data=pb_data)
    rows = read_summary_csv(tmp_path / "summary.csv")
    stress = [r["gate"] for r in rows if r["period"] != "normal_2024"]
    normal = [r["gate"] for r in rows if r["period"] == "normal_2024"]
    assert normal == [("true" if all(g == "true" for g in stress) else "false")]


def test_unknown_backend_is_refused(tmp_path, small_grid):
    with pytest.raises(SweepError, match="unknown backend"):
        run_sweep(small_grid, tmp_path, backend="dask")
