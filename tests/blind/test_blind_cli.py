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
