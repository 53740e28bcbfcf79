"""``quantgym eval --blind`` / ``--after`` and the ``recent_2025`` window (docs/blind.md "Running blind",
docs/llm-agents.md)."""

import csv
import json

from typer.testing import CliRunner

from quantgym.cli import app
from tests.test_cli_errors import run_bad

_EVAL = ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0", "--period", "covid_2020",
         "--no-plots", "-q", "--no-baseline"]


def _eval(tmp_path, name, *extra):
    out = tmp_path / name
    res = CliRunner().invoke(app, [*_EVAL, *extra, "--out", str(out)])
    assert res.exit_code == 0, res.output
    return res.output, json.loads((out / "results.json").read_text()), list(csv.DictReader(open(out / "summary.csv")))


def test_eval_blind_baseline_scores_as_named_and_the_results_say_blind(tmp_path):
    _, named, named_rows = _eval(tmp_path, "named")
    text, blind, blind_rows = _eval(tmp_path, "blind", "--blind")
    assert "(blind)" in text  # the table title
    assert [r["agent"] for r in blind_rows] == [f"{r['agent']} (blind)" for r in named_rows]
    for a, b in zip(named_rows, blind_rows):
        assert {k: v for k, v in a.items() if k != "agent"} == {k: v for k, v in b.items() if k != "agent"}
    assert blind["meta"]["plan"]["env_kwargs"] == {"blind": True}
    runs = blind["tasks"]["portbench"]["runs"]
    assert all(r["config"]["env_kwargs"].get("blind") is True for r in runs)
    assert '"blind": true' in json.dumps(blind)
    assert '"blind": true' not in json.dumps(named)


def test_eval_blind_refuses_market_bench_in_one_line(tmp_path):
    run_bad(tmp_path, ["eval", "--agent", "equal_weight", "--env", "MarketBench-Pairs-v0", "--blind",
                       "--out", str(tmp_path / "o")], "--blind", "MarketBench-Pairs-v0", "no blind mode")


def test_eval_after_keeps_the_decision_dates_after_the_cutoff_and_drops_earlier_periods(tmp_path):
    out = tmp_path / "after"
    res = CliRunner().invoke(app, ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0", "--period",
                                   "normal_2024,covid_2020,recent_2025", "--after", "2024-06-30", "--no-plots", "-q",
                                   "--no-baseline", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "--after 2024-06-30: normal_2024: 6 of 12 decision dates remain" in res.output
    assert "--after 2024-06-30: covid_2020: 0 of 17 decision dates remain; dropped" in res.output
    assert "--after 2024-06-30: recent_2025: 12 of 12 decision dates remain" in res.output
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert [r["period"] for r in rows] == ["normal_2024_after_2024-06-30", "recent_2025"]
    runs = json.loads((out / "results.json").read_text())["tasks"]["portbench"]["runs"]
    dates = {r["period"]: [st["date"] for st in r["steps"]] for r in runs}
    assert len(dates["normal_2024_after_2024-06-30"]) == 6 and len(dates["recent_2025"]) == 12
    assert dates["normal_2024_after_2024-06-30"][0] == "2024-07-01"
    assert min(d for ds in dates.values() for d in ds) > "2024-06-30"


def test_eval_after_the_data_is_one_line(tmp_path):
    run_bad(tmp_path, ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0", "--after", "2026-01-05",
                       "--out", str(tmp_path / "o")], "--after 2026-01-05", "2025-12-31")


def test_quant_arena_eval_section_labels_a_blind_run():
    from types import SimpleNamespace

    from quantgym.envs.quant_arena.eval import ADAPTER
    from quantgym.plan import EvalPlan

    run = {"env_id": "QuantArena-v0", "track": "research", "period": "sealed_2024", "final": {}, "feedback": [],
           "usage": None}
    agent = SimpleNamespace(name="openai:m", usage=lambda: {})
    ctx = SimpleNamespace(console=None)
    for kw, label in (({}, "openai:m"), ({"blind": True}, "openai:m (blind)")):
        sec = ADAPTER.section([dict(run)], agent, EvalPlan(env_ids=["QuantArena-v0"], env_kwargs=kw), ctx)
        assert [r.agent for r in sec.rows] == [label]


def test_qa_blind_references_score_as_named_and_are_labelled(tmp_path):
    rows = {}
    for name, extra in (("named", []), ("blind", ["--blind"])):
        out = tmp_path / name
        res = CliRunner().invoke(app, ["qa", "--agent", "oracle", "--agent", "naive", "--n", "2", "-q",
                                       "--out", str(out), *extra])
        assert res.exit_code == 0, res.output
        rows[name] = list(csv.DictReader(open(out / "summary.csv")))
        cfg = json.loads((out / "results.json").read_text())["tasks"]["portbench_qa"]["config"]
        assert cfg.get("blind") is (True if extra else None)
    assert "blind" in res.output  # the table title
    assert [r["agent"] for r in rows["blind"]] == ["oracle (blind)", "naive (blind)"]
    for a, b in zip(rows["named"], rows["blind"]):
        assert {k: v for k, v in a.items() if k != "agent"} == {k: v for k, v in b.items() if k != "agent"}
    assert rows["blind"][0]["qa_mean"] == "1"  # the oracle's answers, written in the question's aliases


def test_bench_blind_refuses_market_bench_in_one_line(tmp_path):
    run_bad(tmp_path, ["bench", "--blind", "--out", str(tmp_path / "o")], "--blind", "market_bench",
            "no blind mode", "--tasks")


def test_bench_blind_is_recorded_and_baselines_score_as_named(tmp_path):
    rows, meta = {}, {}
    for name, extra in (("named", []), ("blind", ["--blind"])):
        out = tmp_path / name
        res = CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--periods", "covid_2020", "--profiles",
                                       "balanced", "--agents", "equal_weight", "--no-plots", "-q",
                                       "--out", str(out), *extra])
        assert res.exit_code == 0, res.output
        rows[name] = list(csv.DictReader(open(out / "summary.csv")))
        meta[name] = json.loads((out / "results.json").read_text())["meta"]["options"]
    assert meta["blind"]["blind"] is True and not meta["named"].get("blind")
    assert rows["blind"] == rows["named"]  # a baseline reads no prompt


def test_eval_after_with_own_data_is_one_line(tmp_path):
    run_bad(tmp_path, ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0", "--after", "2024-06-30",
                       "--env-kwargs", json.dumps({"data": str(tmp_path / "mine")}), "--out", str(tmp_path / "o")],
            "--after", "--period START:END")
