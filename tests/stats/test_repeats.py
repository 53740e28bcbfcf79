"""Repeated runs: per-metric mean with a Student-t interval over the repeats, rankings
with ties where intervals overlap, and `quantgym eval --repeats R`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from quantgym.cli import app
from quantgym.evaluation import repeats_section
from quantgym.results import SectionResult, SummaryRow, read_summary_csv
from quantgym.stats.repeats import rank_with_ties, repeat_interval


def test_interval_matches_scipy_t_interval():
    x = np.random.default_rng(3).normal(0.8, 0.3, 7)
    r = repeat_interval(list(x) + [None, float("nan")])
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert r["n"] == 7 and r["n_missing"] == 2
    assert r["mean"] == pytest.approx(x.mean()) and r["sd"] == pytest.approx(x.std(ddof=1))
    assert (r["lo"], r["hi"]) == (pytest.approx(lo), pytest.approx(hi))
    one = repeat_interval([1.5])
    assert one["mean"] == 1.5 and one["lo"] is None and one["hi"] is None  # one run has no spread
    with pytest.raises(ValueError, match="level"):
        repeat_interval([1.0, 2.0], level=1.5)


def test_ranking_shows_ties_where_intervals_overlap():
    iv = {"a": {"mean": 1.0, "lo": 0.8, "hi": 1.2}, "b": {"mean": 0.9, "lo": 0.7, "hi": 1.1},
          "c": {"mean": 0.2, "lo": 0.1, "hi": 0.3}, "d": {"mean": 0.5}}
    r = rank_with_ties(iv)
    assert [x["agent"] for x in r] == ["a", "b", "d", "c"] and [x["rank"] for x in r] == [1, 2, 3, 4]
    by = {x["agent"]: x for x in r}
    assert by["a"]["tied_with"] == ["b"] and by["b"]["tied_with"] == ["a"] and by["c"]["tied_with"] == []
    assert by["a"]["rank_range"] == (1, 2) and by["b"]["rank_range"] == (1, 2) and by["c"]["rank_range"] == (4, 4)
    assert [x["agent"] for x in rank_with_ties(iv, higher_is_better=False)][0] == "c"


def test_repeats_section_summarises_every_numeric_column():
    reps = []
    for k, sharpe in enumerate((0.5, 0.7, 0.9)):
        row = SummaryRow(task="portbench", agent="openai:m", profile="balanced", period="covid_2020", sharpe=sharpe,
                         ret_pct=1.0 + k, maxdd_pct=-5.0, vol_pct=10.0, ceps=0.3, gate=k != 1,
                         extra={"s1_score": 0.1 * k, "label": "x"})
        reps.append([SectionResult(task="portbench", rows=[row])])
    sec = repeats_section(reps)
    (row,) = sec.rows
    lo, hi = stats.t.interval(0.95, 2, loc=0.7, scale=stats.sem([0.5, 0.7, 0.9]))
    assert row.sharpe == pytest.approx(0.7) and row.extra["sharpe_lo"] == pytest.approx(lo)
    assert row.extra["sharpe_hi"] == pytest.approx(hi) and row.extra["n_repeats"] == 3
    assert row.extra["gate_rate"] == pytest.approx(2 / 3) and row.extra["s1_score"] == pytest.approx(0.1)
    assert "label" not in row.extra  # only numbers are summarised
    assert sec.runs[0]["values"]["sharpe"] == [0.5, 0.7, 0.9]


def test_eval_repeats_writes_every_repeat_and_the_summary(tmp_path):
    out = tmp_path / "r"
    r = CliRunner().invoke(app, ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0", "--period",
                                 "covid_2020", "--repeats", "2", "--no-plots", "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    assert (out / "repeat-1" / "results.json").is_file() and (out / "repeat-2" / "summary.csv").is_file()
    rows = read_summary_csv(out / "summary.csv")
    assert rows and all(x["n_repeats"] == "2" for x in rows)
    ew = next(x for x in rows if x["agent"] == "equal_weight")
    assert ew["sharpe_lo"] == ew["sharpe"] == ew["sharpe_hi"]  # a deterministic baseline: zero spread
    doc = json.loads((out / "results.json").read_text())
    assert doc["meta"]["repeats"] == 2 and doc["tasks"]["repeats"]["runs"][0]["repeats"] == [1, 2]


def test_repeats_refuse_recorded_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    t = tmp_path / "t.jsonl"
    t.write_text('{"type": "header"}\n')
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--env",
                                 "PortBench-Balanced-v0", "--cache-from", str(t), "--repeats", "2", "--out",
                                 str(tmp_path / "x")])
    assert r.exit_code == 2 and "--repeats needs fresh answers" in r.output, r.output
    assert not (tmp_path / "x").exists()


def _repeat_folders(root, agent, sharpes):
    from quantgym.results import write_results

    for k, s in enumerate(sharpes, 1):
        row = SummaryRow(task="portbench", agent=agent, profile="balanced", period="covid_2020", sharpe=s,
                         ret_pct=2.0 * s, maxdd_pct=-4.0, vol_pct=9.0, ceps=0.3)
        write_results(root / f"repeat-{k}", [SectionResult(task="portbench", rows=[row])], meta={"command": "t"})


def test_report_groups_repeats_of_one_agent_with_ties(tmp_path):
    from quantgym.sweep.report import build_report

    _repeat_folders(tmp_path / "a", "openai:a", [1.0, 1.1, 1.2])
    _repeat_folders(tmp_path / "b", "openai:b", [0.9, 1.0, 1.15])  # overlaps a: tied
    _repeat_folders(tmp_path / "c", "openai:c", [0.1, 0.12, 0.14])  # far below: ranked alone
    rep = build_report([tmp_path / "a", tmp_path / "b", tmp_path / "c"], tmp_path / "out")
    assert [s.name for s in rep.sources][:3] == ["a/repeat-1", "a/repeat-2", "a/repeat-3"]
    (sec,) = [s for s in rep.sections if s.anchor == "repeats"]
    (t,) = sec.tables
    by = {r[t.columns.index("agent")]: dict(zip(t.columns, r)) for r in t.rows}
    assert set(by) == {"openai:a", "openai:b", "openai:c"}
    x = [1.0, 1.1, 1.2]
    lo, hi = stats.t.interval(0.95, 2, loc=np.mean(x), scale=stats.sem(x))
    assert by["openai:a"]["Sharpe"] == f"{np.mean(x):.3f} ± {(hi - lo) / 2:.3f}"
    assert by["openai:a"]["rank"] == "1–2" and by["openai:b"]["rank"] == "1–2" and by["openai:c"]["rank"] == "3"
    assert by["openai:a"]["tied with"] == "openai:b" and by["openai:c"]["tied with"] == "–"
    assert by["openai:a"]["n"] == "3"
    html = (tmp_path / "out" / "leaderboard.html").read_text()
    assert "Repeated runs" in html and "a/repeat-2" in html


def test_report_leaves_out_identical_repeats(tmp_path):
    """A deterministic baseline repeated carries no spread: no "Repeated runs" section for it."""
    from quantgym.sweep.report import build_report

    _repeat_folders(tmp_path / "a", "equal_weight", [0.5, 0.5])
    rep = build_report([tmp_path / "a"], tmp_path / "out")
    assert not [s for s in rep.sections if s.anchor == "repeats"] and len(rep.rows) == 2
