"""``quantgym qa`` end to end on a small n, incl. the QA–CEPS Spearman report (spec §10.5)."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from quantgym.cli import app

FAKE_FACTORY = f"{__name__}:make_fake_agent"  # importable under pytest's prepend import mode


class _Half:
    """Answers T1 with the oracle's truth and everything else with nothing usable (QA score 0.25 here)."""

    name = "fake"

    def __init__(self):
        from quantgym.envs.portbench.static_qa.policies import OraclePolicy

        self.oracle = OraclePolicy()

    def __call__(self, obs, info):
        return self.oracle(obs, info) if info["template"] == "T1" else "no idea"


def make_fake_agent(arg: str, task: str, **options):
    assert task == "portbench_qa"
    return _Half()


def _pipeline_summary(path, rows):
    with open(path / "summary.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["task", "agent", "profile", "period", "sharpe", "ret_pct", "maxdd_pct", "vol_pct", "ceps", "gate"])
        for agent, profile, period, ceps in rows:
            w.writerow(["portbench", agent, profile, period, "0.5", "5", "-3", "8", ceps, ""])


def test_cli_table_results_and_spearman(tmp_path, monkeypatch):
    from quantgym.agents import registry

    monkeypatch.setitem(registry.SCHEMES, "fake", FAKE_FACTORY)
    pipe = tmp_path / "pipe"
    pipe.mkdir()
    # QA: oracle 1.0 > naive > fake 0.25 (only T1 right); Balanced CEPS in the reverse
    # order (normal_2024 preferred over other periods, other profiles ignored) -> rho = -1
    _pipeline_summary(pipe, [("oracle", "balanced", "normal_2024", "0.30"), ("naive", "balanced", "normal_2024", "0.40"),
                             ("naive", "balanced", "covid_2020", "0.90"), ("oracle", "conservative", "normal_2024", "0.99"),
                             ("fake:x", "balanced", "normal_2024", "0.50")])
    out = tmp_path / "qa"
    res = CliRunner().invoke(app, ["qa", "--agent", "oracle", "--agent", "naive", "--agent", "fake:x", "--out", str(out),
                                   "--n", "3", "--templates", "T1,T2,T4,T5", "--pipeline-results", str(pipe), "-q"])
    assert res.exit_code == 0, res.output
    for col in ("T1", "Mean", "T4_r", "T5_r", "F", "J", "Bull", "Side."):
        assert col in res.output
    assert "Spearman" in res.output and "-1.0000" in res.output.replace("−", "-")
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert [r["agent"] for r in rows] == ["oracle", "naive", "fake:x"]
    assert all(r["task"] == "portbench_qa" and r["period"] == "test" and r["ceps"] == "" for r in rows)
    # the accuracies are summary.csv columns after the common ones (the metric registry's, then the run status)
    cols = list(rows[0])
    assert cols[:4] == ["task", "agent", "profile", "period"] and {r["status"] for r in rows} == {"ok"}
    assert cols[cols.index("status") + 1:] == ["qa_t1", "qa_t2", "qa_t3", "qa_t4", "qa_t5", "qa_t6", "qa_t7", "qa_mean", "qa_t4_r",
                                  "qa_t5_r", "qa_f", "qa_j", "qa_bull", "qa_bear", "qa_side"]
    assert rows[0]["qa_t1"] == "1" and rows[0]["qa_mean"] == "" and float(rows[2]["qa_t1"]) == 1.0
    doc = json.load(open(out / "results.json"))
    sec = doc["tasks"]["portbench_qa"]
    oracle = sec["runs"][0]
    assert oracle["metrics"]["T1"] == 1.0 and oracle["metrics"]["T4_r"] == 1.0
    assert oracle["metrics"]["Mean"] is None  # T3, T6, T7 not run -> NaN written as null
    assert len(oracle["records"]) == 3 * 4 + 3 * 2
    sp = sec["spearman_qa_ceps"]
    assert 1.0 > sp["qa_mean"]["naive"] > 0.25 == sp["qa_mean"]["fake:x"]  # precondition of the rank order
    assert sp["n"] == 3 and sp["rho"] == pytest.approx(-1.0)
    assert sp["notes"] == []  # every agent has a normal_2024 row


def test_pipeline_ceps_stand_ins_and_bad_cells_are_never_silent(tmp_path):
    # never silent: a missing period is not averaged over the others, a non-numeric cell not skipped
    from quantgym.envs.portbench.static_qa.cli import read_pipeline_ceps

    _pipeline_summary(tmp_path, [("naive", "balanced", "covid_2020", "0.90"), ("naive", "balanced", "china_2015", "0.10")])
    with pytest.warns(RuntimeWarning, match="'naive' has no normal_2024 run; its CEPS is the mean over china_2015, covid_2020"):
        assert read_pipeline_ceps([tmp_path]) == {"naive": pytest.approx(0.5)}
    _pipeline_summary(tmp_path, [("naive", "balanced", "normal_2024", "n/a")])
    with pytest.raises(ValueError, match="the ceps cell of 'naive' \\(normal_2024\\) is not a number: 'n/a'"):
        read_pipeline_ceps([tmp_path])


def test_cli_bad_agent_and_options(tmp_path):
    r = CliRunner().invoke(app, ["qa", "--agent", "nosuch:thing", "--out", str(tmp_path / "x"), "--n", "1", "-q"])
    assert r.exit_code != 0 and "nosuch" in r.output
    r = CliRunner().invoke(app, ["qa", "--agent", "oracle", "--out", str(tmp_path / "y"), "--split", "dev", "-q"])
    assert r.exit_code != 0
