"""`quantgym live` through the CLI plugin on a fresh typer app (bundled data, offline)."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from quantgym.envs.portbench.live.cli import register


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    register(app)
    return app


def test_cli_live_runs_resumes_and_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("QUANTGYM_DATA", str(tmp_path / "no-data-yet"))
    runner = CliRunner()
    r = runner.invoke(_app(), ["live", "--agent", "equal_weight", "--days", "3", "--as-of", "2025-12-30",
                               "--no-plots"])
    assert r.exit_code == 0, r.output
    assert "bundled data (no refreshed data in" in r.output  # falls back to the bundle, says so
    assert "decided 2025-12-26 (data through 2025-12-24)" in r.output and "3 new decision(s)" in r.output
    assert "CEPS" not in r.output  # baselines have no CEPS (§4.6): no empty "CEPS" label or column
    run = tmp_path / "results" / "live" / "equal_weight_balanced"
    assert len((run / "decisions.jsonl").read_text().splitlines()) == 3
    # next "day": only the missing date is decided
    r2 = runner.invoke(_app(), ["live", "--agent", "equal_weight", "--data", "bundled", "--no-plots"])
    assert r2.exit_code == 0, r2.output
    assert "decided 2025-12-31 (data through 2025-12-30)" in r2.output and "1 new decision(s)" in r2.output
    # same day again: nothing new
    r3 = runner.invoke(_app(), ["live", "--agent", "equal_weight", "--data", "bundled", "--quiet", "--no-plots"])
    assert r3.exit_code == 0 and "no new trading day" in r3.output
    recs = [json.loads(x) for x in (run / "decisions.jsonl").read_text().splitlines()]
    assert [x["date"] for x in recs] == ["2025-12-26", "2025-12-29", "2025-12-30", "2025-12-31"]
    assert (run / "summary.csv").read_text().splitlines()[1].startswith("portbench,equal_weight,balanced,live,")


def test_cli_live_errors_are_one_line(tmp_path):
    runner = CliRunner()
    # a bad profile is refused before anything is read or created: one line, exit 2 like every command
    r = runner.invoke(_app(), ["live", "--agent", "equal_weight", "--profile", "bogus", "--data", "bundled",
                               "--run-dir", str(tmp_path / "p")])
    assert r.exit_code == 2 and r.output.strip().splitlines() == [
        "error: --profile 'bogus': unknown profile; choose one of conservative, balanced, aggressive"]
    assert not (tmp_path / "p").exists()
    r = runner.invoke(_app(), ["live", "--agent", "no_such_agent", "--data", "bundled", "--run-dir",
                               str(tmp_path / "x"), "--quiet"])
    assert r.exit_code == 2 and r.output.startswith("error:") and len(r.output.strip().splitlines()) == 1
    r = runner.invoke(_app(), ["live", "--agent", "equal_weight", "--data", str(tmp_path / "missing"), "--quiet"])
    assert r.exit_code == 2 and "no PortBench data in" in r.output and len(r.output.strip().splitlines()) == 1
    run = tmp_path / "run"
    ok = runner.invoke(_app(), ["live", "-a", "equal_weight", "--data", "bundled", "--days", "2", "--run-dir",
                                str(run), "--no-plots", "-q"])
    assert ok.exit_code == 0, ok.output
    r = runner.invoke(_app(), ["live", "-a", "equal_weight", "--profile", "conservative", "--data", "bundled",
                               "--run-dir", str(run), "-q"])
    assert r.exit_code == 2 and "belongs to agent" in r.output and len(r.output.strip().splitlines()) == 1
