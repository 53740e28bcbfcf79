"""The metric registry: one registered metric is a column of summary.csv, of the report's tables and of the
repeats tables, ranked in its direction; the one table-cell formatter; the public leaderboard API."""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.console import Console
from scipy import stats

from quantgym.leaderboard import Metric, get_metric, metrics, register_metric, summary_columns, unregister_metric
from quantgym.results import SectionResult, SummaryRow, read_summary_csv, write_results
from quantgym.tables import fmt

CALMAR = Metric("calmar", "Calmar", "ratio", decimals=2, tasks=("toy_task",),
                description="annualised return over the maximum drawdown")


@pytest.fixture
def calmar():
    """The one entry: a metric registered for this test only."""
    register_metric(CALMAR)
    yield CALMAR
    unregister_metric("calmar")


def _folders(root, agent, values, sharpe=None):
    for k, v in enumerate(values, 1):
        row = SummaryRow(task="toy_task", agent=agent, period="p", sharpe=sharpe, extra={"calmar": v, "hits": 3})
        write_results(root / f"repeat-{k}", [SectionResult(task="toy_task", rows=[row])], meta={"command": "t"})


def test_builtin_registry_is_the_summary_schema():
    assert summary_columns() == ("task", "agent", "profile", "period", "sharpe", "ret_pct", "maxdd_pct", "vol_pct",
                                 "ceps", "gate", "cost_usd", "net_pnl_usd", "pnl_per_cost", "status")
    assert [m.header for m in metrics()] == ["Sharpe", "Ret%", "MaxDD%", "Vol%", "CEPS", "gate", "Cost$", "NetP&L$",
                                             "P&L/$"]
    assert get_metric("vol_pct").direction == "lower" and get_metric("maxdd_pct").direction == "higher"
    assert [m.name for m in metrics(["quant_arena"])] == ["sharpe", "ret_pct", "maxdd_pct", "vol_pct", "cost_usd",
                                                         "net_pnl_usd", "pnl_per_cost"]
    assert [m.name for m in metrics(["market_bench"])] == ["sharpe", "ret_pct", "maxdd_pct", "vol_pct", "cost_usd"]
    with pytest.raises(KeyError, match="no metric 'calmar'"):
        get_metric("calmar")
    with pytest.raises(ValueError, match="key column"):
        register_metric(Metric("agent", "agent", ""))


def test_one_registered_metric_is_a_summary_column(calmar, tmp_path):
    from quantgym import results

    row = SummaryRow(task="toy_task", agent="a", sharpe=1.0, extra={"calmar": 0.25, "hits": 3})
    write_results(tmp_path, [SectionResult(task="toy_task", rows=[row])])
    header = (tmp_path / "summary.csv").read_text().splitlines()[0].split(",")
    assert header == [*summary_columns(), "hits"] and header.index("calmar") == header.index("status") - 1
    assert results.SUMMARY_COLUMNS == summary_columns()  # read from the registry when asked for
    (got,) = read_summary_csv(tmp_path / "summary.csv")
    assert got["calmar"] == "0.25" and got["hits"] == "3"
    failed = SummaryRow(task="toy_task", agent="a", status="failed", extra={"calmar": 0.25})
    assert failed.as_csv_cells()[summary_columns().index("calmar")] == ""  # a failed row is no result
    unregister_metric("calmar")
    assert "calmar" not in summary_columns()


def test_one_registered_metric_is_in_the_report_and_its_repeats_ranked_by_direction(calmar, tmp_path):
    from quantgym.sweep.report import build_report

    register_metric(Metric("calmar", "Calmar", "ratio", higher_is_better=False, rank=True, tasks=("toy_task",)))
    _folders(tmp_path / "a", "a", [0.5, 0.6, 0.7])
    _folders(tmp_path / "b", "b", [2.0, 2.1, 2.2])
    rep = build_report([tmp_path / "a", tmp_path / "b"], tmp_path / "out")
    md = (tmp_path / "out" / "leaderboard.md").read_text()
    assert "| Sharpe | Ret% | MaxDD% | Vol% | Calmar | status |" in md  # All rows: CEPS/gate are PortBench's
    (sec,) = [s for s in rep.sections if s.anchor == "repeats"]
    (t,) = sec.tables
    assert t.columns == ["task", "profile/period", "rank", "agent", "n", "Calmar", "tied with"]
    by = {r[3]: dict(zip(t.columns, r)) for r in t.rows}
    x = [0.5, 0.6, 0.7]
    lo, hi = stats.t.interval(0.95, 2, loc=np.mean(x), scale=stats.sem(x))
    assert by["a"]["Calmar"] == f"{np.mean(x):.2f} ± {(hi - lo) / 2:.2f}"
    assert by["a"]["rank"] == "1" and by["b"]["rank"] == "2"  # lower is better: the smaller mean ranks first
    assert "Rank by mean Sharpe (CEPS, then Calmar where there is none)" in t.note
    merged = read_summary_csv(tmp_path / "out" / "summary.csv")
    assert list(merged[0]) == [*summary_columns(), "source"] and merged[0]["calmar"] == "0.5"


def test_one_registered_metric_is_in_eval_repeats(calmar):
    from quantgym.stats.repeats import repeats_section

    reps = [[SectionResult(task="toy_task", rows=[SummaryRow(task="toy_task", agent="a", period="p",
                                                            extra={"calmar": v})])] for v in (1.0, 2.0)]
    buf = io.StringIO()
    out = repeats_section(reps, console=Console(file=buf, width=100))
    (row,) = out.rows
    assert row.get("calmar") == 1.5 and row.extra["calmar_lo"] < 1.5 < row.extra["calmar_hi"]
    assert row.as_csv_cells()[summary_columns().index("calmar")] == "1.5"
    assert "Calmar" in buf.getvalue() and "1.50 ±" in buf.getvalue()


def test_one_cell_formatter():
    assert fmt(None) == "" and fmt(None, missing="–") == "–"
    assert fmt(True) == "✓" and fmt(False) == "✗"
    assert fmt(1.23456, 3) == "1.235" and fmt(np.float64(2.0)) == "2.00" and fmt(7, 0) == "7"
    assert fmt("x") == "x"
    assert fmt({"mean": 1.0, "lo": 0.5, "hi": 1.5}) == "1.00 ± 0.50"
    assert fmt({"mean": 1.0, "lo": None}) == "1.00" and fmt({"mean": None}, missing="–") == "–"
    assert get_metric("sharpe").cell(0.12345) == "0.123" and get_metric("gate").cell(None, "–") == "–"


def test_metric_parses_its_cells():
    assert get_metric("sharpe").parse("0.5") == 0.5 and get_metric("sharpe").parse("") is None
    assert get_metric("sharpe").parse("nan") is None and get_metric("sharpe").parse("x") is None
    assert get_metric("gate").parse("true") is True and get_metric("gate").parse("false") is False
    assert get_metric("gate").parse("") is None
    with pytest.raises(ValueError, match="kind"):
        Metric("x", "x", "", kind="text")


def test_docs_table_of_metrics_is_the_registry():
    """docs/sweeps.md's table of the built-in metrics names each one with its header, direction and decimals."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "sweeps.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0].startswith("`") and cells[0].strip("`") in summary_columns():
            rows[cells[0].strip("`")] = cells
    assert list(rows) == [m.name for m in metrics()]
    for m in metrics():
        name, header, _, better, decimals, tasks, _ = rows[m.name]
        assert header == m.header
        assert better == ("pass" if m.kind == "flag" else m.direction)
        assert decimals == ("–" if m.kind == "flag" else str(m.decimals))
        assert tasks == ("all" if m.tasks is None else ", ".join(m.tasks))
