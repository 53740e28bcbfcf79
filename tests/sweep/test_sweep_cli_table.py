"""The end-of-sweep table is readable at 80 columns: nothing cut with "…", agent/env/kwargs whole."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from quantgym.sweep.cli import register


def _app():
    app = typer.Typer()
    register(app)

    @app.callback()
    def _root():
        pass

    return app


def test_sweep_table_fits_80_columns_without_ellipsis(tmp_path):
    res = CliRunner().invoke(_app(), [
        "sweep", "--agents", "cov_risk_parity", "--envs", "PortBench-Conservative-v0",
        # a valid period outside the data: refused by the run, not by the checks before the sweep
        "--set", "period=covid_2020,2030-01-01:2030-03-31", "--out", str(tmp_path / "s"), "--workers", "1", "-q"],
        env={"COLUMNS": "80"}, terminal_width=80)
    assert res.exit_code == 0, res.output
    table = res.output.split("\nfailed ")[0]  # the error lines after the table are soft-wrapped on purpose
    assert "…" not in table
    assert max(len(x) for x in table.splitlines()) <= 80
    for text in ("Cov. Risk Parity", "PortBench-Conservative-v0", "period=covid_2020", "2030-01-01", "failed",
                 "MaxDD%", "Sharpe"):
        assert text in table, text
    assert "-0.189" in table  # Cov. Risk Parity, covid_2020, the bench's clean number
