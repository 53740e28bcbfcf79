"""PortBench rows carry their uncertainty: bootstrap intervals and the LW test vs EqW."""

from __future__ import annotations

import json
import math
import re

import pytest
from typer.testing import CliRunner

from quantgym.cli import app
from quantgym.envs.portbench.bench import run_baselines
from quantgym.envs.portbench.uncertainty import COLUMNS, p_cell, run_uncertainty, sharpe_cell, summary_fields
from quantgym.results import SUMMARY_COLUMNS, read_summary_csv

#: interval column prefix -> its point column in summary.csv
POINT = {"sharpe": "sharpe", "ret": "ret_pct", "vol": "vol_pct", "mdd": "maxdd_pct"}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """One small bench: two profiles, covid_2020, Equal-Weight not among the agents (run anyway for the test)."""
    out = tmp_path_factory.mktemp("unc") / "b"
    r = CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--profiles", "conservative,balanced", "--periods",
                                 "covid_2020", "--agents", "risk_parity,sixty_forty", "--out", str(out),
                                 "--no-plots", "-q"], env={"COLUMNS": "80"}, terminal_width=80)
    assert r.exit_code == 0, r.output
    return out, r.output


def test_summary_csv_gains_the_columns_at_the_end(bench):
    out, _ = bench
    rows = read_summary_csv(out / "summary.csv")
    assert list(rows[0]) == [*SUMMARY_COLUMNS, *COLUMNS]
    assert len(rows) == 4
    for row in rows:
        vals = {c: float(row[c]) for c in COLUMNS}
        assert all(math.isfinite(v) for v in vals.values()), row
        for prefix, point in POINT.items():
            assert vals[f"{prefix}_lo"] <= float(row[point]) <= vals[f"{prefix}_hi"], (prefix, row)
        assert vals["dsharpe_eqw_lo"] <= vals["dsharpe_eqw"] <= vals["dsharpe_eqw_hi"]
        assert 0 < vals["dsharpe_eqw_p"] <= 1
        assert vals["mdd_hi"] <= 0 and vals["vol_lo"] > 0


def test_results_json_has_an_uncertainty_block_per_run(bench):
    out, _ = bench
    doc = json.loads((out / "results.json").read_text())
    runs = doc["tasks"]["portbench"]["runs"]
    assert doc["summary_columns"] == [*SUMMARY_COLUMNS, *COLUMNS]
    assert {r["agent"] for r in runs} == {"Risk Parity", "60/40"}
    for run in runs:
        u = run["uncertainty"]
        assert u["config"] == {"seed": 16, "n_boot": 2000, "confidence": 0.95, "block_rule": "politis-white-2004"}
        assert u["intervals"]["sharpe"]["est"] == pytest.approx(run["metrics"]["sharpe"], rel=1e-12)
        assert u["intervals"]["block"] >= 1
        t = u["vs_equal_weight"]
        assert t["n"] == t["n_common"] == len(run["nav"]["values"]) - 1
        assert t["method"].startswith("ledoit-wolf-2008")


def test_the_terminal_table_shows_intervals_and_p_and_fits_80_columns(bench):
    _, text = bench
    assert "PortBench — uncertainty" in text and "Sharpe [" in text and ("p vs EqW" in text or " p ┃" in text)
    assert re.search(r"-?\d+\.\d\d \[-?\d+\.\d\d,-?\d+\.\d\d\]", text)  # e.g. 0.85 [0.10,1.60]
    assert max(len(line) for line in text.splitlines()) <= 80


def test_equal_weight_against_itself_gives_zero_difference(tmp_path):
    res = run_baselines(["covid_2020"], ["equal_weight"])[("equal_weight", "covid_2020")]
    block = run_uncertainty(res, res)
    f = summary_fields(block)
    assert (f["dsharpe_eqw"], f["dsharpe_eqw_lo"], f["dsharpe_eqw_hi"], f["dsharpe_eqw_p"]) == (0.0, 0.0, 0.0, 1.0)
    assert f["sharpe_lo"] <= res.metrics["sharpe"] <= f["sharpe_hi"]
    assert p_cell(f["dsharpe_eqw_p"]) == "1.000" and p_cell(0.0004) == "<.001" and p_cell(None) == "–"
    assert sharpe_cell(0.853, {"sharpe_lo": 0.1, "sharpe_hi": 1.6}) == "0.85 [0.10,1.60]"
    block2 = run_uncertainty(res, res)
    assert block2 == block  # seeded: the same numbers every time


def test_bench_with_equal_weight_reports_it_as_p_one(tmp_path):
    r = CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--profiles", "balanced", "--periods", "covid_2020",
                                 "--agents", "equal_weight", "--out", str(tmp_path / "b"), "--no-plots", "-q"])
    assert r.exit_code == 0, r.output
    (row,) = read_summary_csv(tmp_path / "b" / "summary.csv")
    assert row["dsharpe_eqw"] == "0" and row["dsharpe_eqw_p"] == "1"


def test_the_report_has_the_uncertainty_table(bench):
    from quantgym.envs.portbench.report import section
    from quantgym.sweep.report import load_source

    out, _ = bench
    src = load_source(out)
    sec = section([src], src.rows)
    (t,) = [t for t in sec.tables if t.anchor == "pb-uncertainty"]
    assert t.columns[:4] == ["period", "agent", "profile", "Sharpe"] and "p" in t.columns
    assert len(t.rows) == 2 and {r[1] for r in t.rows} == {"Risk Parity", "60/40"}
    assert all(re.fullmatch(r"-?\d+\.\d\d \[-?\d+\.\d\d, -?\d+\.\d\d\]", r[3]) for r in t.rows)
    assert all(r[-1] in ("✓", "✗") for r in t.rows)  # the strict rule beside the test


def test_extra_agents_rows_and_runs_carry_the_uncertainty(tmp_path):
    """An extra agent (``--agent``) is run per profile; each of its runs gets the block and the columns."""
    r = CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--profiles", "balanced", "--periods", "covid_2020",
                                 "--agents", "risk_parity", "--agent", "min_variance", "--out", str(tmp_path / "b"),
                                 "--no-plots", "-q"])
    assert r.exit_code == 0, r.output
    rows = {row["agent"]: row for row in read_summary_csv(tmp_path / "b" / "summary.csv")}
    assert set(rows) == {"risk_parity", "min_variance"}  # the CLI keys
    assert all(rows["min_variance"][c] != "" for c in COLUMNS)
    runs = json.loads((tmp_path / "b" / "results.json").read_text())["tasks"]["portbench"]["runs"]
    extra = [run for run in runs if run["agent"] == "Min-Variance"]
    assert len(extra) == 1 and extra[0]["profile"] == "balanced"
    assert extra[0]["uncertainty"]["vs_equal_weight"]["delta"] == pytest.approx(float(rows["min_variance"]["dsharpe_eqw"]),
                                                                               rel=1e-5)
