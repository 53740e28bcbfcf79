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
        ("equal_weight", "conservative"), ("equal_weight", "aggressive"),
        ("risk_parity", "conservative"), ("risk_parity", "aggressive")]
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
    # the torn record is said, not silently re-run: one warning line and the results' meta (the lost one is not)
    assert [u["run_id"] for u in third.unreadable] == [ids[1]] and "not JSON" in third.unreadable[0]["error"]
    assert len(third.warnings) == 1 and "\n" not in third.warnings[0]
    assert f"{ids[1]}.json" in third.warnings[0] and "runs again" in third.warnings[0]
    meta = json.loads((tmp_path / "results.json").read_text())["meta"]
    assert [u["run_id"] for u in meta["unreadable_records"]] == [ids[1]] and meta["warnings"] == third.warnings
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


def _app():
    from quantgym.cli import app
    from quantgym.sweep.cli import register

    if "sweep" not in {c.name for c in app.registered_commands}:
        register(app)  # until the lead adds "quantgym.sweep.cli" to quantgym.cli.PLUGINS
    return app


def test_sweep_cli_with_a_grid_file_flags_strict_and_a_missing_ray(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    pytest.importorskip("yaml")
    app = _app()
    grid = tmp_path / "g.yaml"
    grid.write_text("agents: [sixty_forty]\nenvs: [PortBench-Balanced-v0]\nenv_kwargs: {period: covid_2020}\n")
    res = CliRunner().invoke(app, ["sweep", str(grid), "--out", str(tmp_path / "a"), "--workers", "1", "-q"])
    assert res.exit_code == 0, res.output
    assert "1 runs (1 run now, 0 already done, 0 failed)" in res.output
    assert len(read_summary_csv(tmp_path / "a" / "summary.csv")) == 1
    res = CliRunner().invoke(app, ["sweep", str(grid), "--out", str(tmp_path / "a"), "-q"])
    assert res.exit_code == 0 and "0 run now, 1 already done" in res.output
    # flags; a failing run is reported, and --strict turns it into exit code 1 (a period outside the data
    # fails in its run; a period typo is refused before the sweep: tests/test_cli_errors.py)
    res = CliRunner().invoke(app, ["sweep", "--agents", "sixty_forty", "--envs", "PortBench-Balanced-v0", "--set",
                                   "period=2030-01-01:2030-03-31", "--out", str(tmp_path / "b"), "--strict", "-q"])
    assert res.exit_code == 1 and "has no trading day in the data" in res.output
    # usage errors
    res = CliRunner().invoke(app, ["sweep", "--agents", "sixty_forty", "--out", str(tmp_path / "c")])
    assert res.exit_code == 2 and "--envs" in res.output
    res = CliRunner().invoke(app, ["sweep", str(grid), "--backend", "dask", "--out", str(tmp_path / "d")])
    assert res.exit_code == 2 and "unknown backend" in res.output
    # without Ray installed, --backend ray fails with one line naming the extra
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)
    res = CliRunner().invoke(app, ["sweep", str(grid), "--backend", "ray", "--out", str(tmp_path / "e"), "-q"])
    assert res.exit_code == 2 and "quantgym[distributed]" in res.output


def test_importing_the_plugin_does_not_import_ray_or_matplotlib():
    import subprocess
    import sys

    code = ("import sys, quantgym.sweep.cli, quantgym.sweep, quantgym.integrations.ray; "
            "print(any(m == 'ray' or m.startswith('ray.') for m in sys.modules), 'matplotlib.pyplot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
