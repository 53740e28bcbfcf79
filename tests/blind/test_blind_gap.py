"""``quantgym eval --blind both`` and the memorization gap (docs/blind.md "The memorization gap")."""

import csv
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from quantgym.cli import app
from quantgym.results import SummaryRow
from quantgym.stats.config import BootstrapConfig
from quantgym.stats.gap import GapSeries, columns, memorization_gap
from tests.quant_arena.conftest import SMALL_WINDOWS, bundled, small_real  # noqa: F401 (fixtures)
from tests.test_cli_errors import run_bad

_EVAL = ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0", "--period", "covid_2020",
         "--no-plots", "--no-baseline"]
#: three monthly decision dates, about 60 daily returns (enough for the bootstrap's min_obs)
_WINDOW = "2020-02-03:2020-04-30:monthly"


def _rows(out):
    return list(csv.DictReader(open(out / "summary.csv")))


def test_blind_both_with_a_classical_agent_gives_a_gap_of_exactly_zero(tmp_path):
    out = tmp_path / "both"
    res = CliRunner().invoke(app, [*_EVAL, "--blind", "both", "--out", str(out)])
    assert res.exit_code == 0, res.output
    named, blind = _rows(out)
    assert (named["agent"], blind["agent"]) == ("equal_weight", "equal_weight (blind)")
    assert {k: v for k, v in named.items() if k != "agent" and not k.startswith("gap_") and k != "likely_recall"} == \
        {k: v for k, v in blind.items() if k != "agent" and not k.startswith("gap_") and k != "likely_recall"}
    for c in ("gap_sharpe", "gap_sharpe_lo", "gap_sharpe_hi", "gap_ret_pct", "gap_ret_pct_lo", "gap_ret_pct_hi"):
        assert blind[c] == "0", c
    assert blind["gap_sharpe_p"] == "1" and blind["likely_recall"] == "false"
    assert all(named[c] == "" for c in columns(("sharpe", "ret_pct", "ceps")))
    doc = json.loads((out / "results.json").read_text())
    assert doc["meta"]["plan"]["blind_both"] is True
    [rec] = doc["tasks"]["portbench"]["memorization_gap"]
    assert rec["key"] == {"profile": "balanced", "period": "covid_2020"}
    assert rec["metrics"]["sharpe"]["test"]["delta"] == 0 and rec["metrics"]["sharpe"]["n"] > 50
    runs = doc["tasks"]["portbench"]["runs"]
    assert [r["config"]["env_kwargs"].get("blind") for r in runs] == [None, True]
    assert "Memorization gap" in res.output and "likely" not in res.output


def test_blind_both_with_a_quant_arena_example_gives_a_gap_of_exactly_zero(tmp_path, small_real):  # noqa: F811
    from quantgym.envs.quant_arena.bench import SubmitThenFreeze
    from quantgym.plan import EvalPlan, run_eval

    class Example:
        """A Quant-Arena example submission with what the eval adapter reads of an agent."""

        name = "momentum_20d"
        engine = SimpleNamespace(config=SimpleNamespace(model=None, to_dict=dict))
        current_episode = None
        logs: dict = {}

        def __init__(self):
            self.policy = SubmitThenFreeze(self.name)

        def reset(self, env):
            self.policy = SubmitThenFreeze(self.name)

        def act(self, obs, info):
            return self.policy.act(obs, info)

        def episode_usage(self, label=None):
            return None

        def usage(self):
            return {}

    plan = EvalPlan(env_ids=["QuantArena-OneShot-v0"], blind_both=True, plots=False,
                    env_kwargs=dict(data=small_real, executor="inprocess", **SMALL_WINDOWS))
    [sec] = run_eval(Example(), plan, tmp_path / "qa")
    named, blind = sec.rows
    assert (named.agent, blind.agent) == ("momentum_20d", "momentum_20d (blind)")
    assert named.extra["S"] == blind.extra["S"] and named.sharpe == blind.sharpe
    assert blind.extra["gap_S"] == 0 and blind.extra["gap_sharpe"] == 0
    assert (blind.extra["gap_sharpe_lo"], blind.extra["gap_sharpe_hi"]) == (0.0, 0.0)
    assert blind.extra["likely_recall"] is False
    rows = _rows(tmp_path / "qa")
    assert rows[1]["gap_S"] == "0" and rows[1]["likely_recall"] == "false"


def test_a_gap_whose_interval_excludes_zero_is_flagged():
    rng = np.random.default_rng(0)
    days = pd.bdate_range("2024-01-01", periods=120)
    named = pd.Series(rng.normal(0.0, 0.01, days.size), index=days)
    blind = named - 0.004  # the same days, 0.4 % a day worse: the Sharpe and return gaps are clearly negative
    a, b = SummaryRow("t", "x", sharpe=1.0, ret_pct=5.0), SummaryRow("t", "x (blind)", sharpe=-2.0, ret_pct=-30.0)
    key = {"period": "p"}
    cfg = BootstrapConfig(n_boot=500)
    gap = memorization_gap(a, b, GapSeries(key, named), GapSeries(key, blind), ("sharpe", "ret_pct"), cfg)
    c = gap["cells"]
    assert c["gap_sharpe"] == -3.0 and c["gap_ret_pct"] == -35.0  # the rows' difference
    assert c["gap_sharpe_hi"] < 0 and c["gap_ret_pct_hi"] < 0 and c["gap_sharpe_p"] < 0.05
    assert c["likely_recall"] is True
    short = memorization_gap(a, b, GapSeries(key, named[:5]), GapSeries(key, blind[:5]), ("sharpe",), cfg)
    assert short["cells"]["gap_sharpe_lo"] is None and short["cells"]["likely_recall"] is None


def _reads_tickers(req):
    """A scripted model that behaves differently when it sees real tickers: named, it puts everything in
    SPY; blind (aliases only), it answers from the prompt's numbers."""
    from tests.llm import pb_script

    prompt = pb_script._user(req)
    if "[PORTBENCH S3" in prompt and "SPY" in prompt:
        return json.dumps({"weights": {"SPY": 1.0}, "expected_return": 0.1, "expected_vol": 0.2,
                           "sharpe_estimate": 0.5})
    return pb_script.valid(req)


def test_an_agent_that_reads_tickers_has_a_gap_and_the_replay_reproduces_both(tmp_path, monkeypatch):
    pytest.importorskip("openai")
    from tests.llm.server import ScriptedServer

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    srv = ScriptedServer().start()
    srv.responder = _reads_tickers
    out = tmp_path / "run"
    try:
        res = CliRunner().invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", srv.base_url,
                                       "--env", "PortBench-Balanced-v0", "--period", _WINDOW, "--blind", "both",
                                       "--no-baseline", "--no-plots", "--quiet", "--out", str(out)])
    finally:
        srv.stop()
    assert res.exit_code == 0, res.output
    named, blind = _rows(out)
    assert blind["agent"] == "openai:test-model (blind)" and named["sharpe"] != blind["sharpe"]
    assert float(blind["gap_sharpe"]) == pytest.approx(float(blind["sharpe"]) - float(named["sharpe"]), abs=1e-5)
    assert float(blind["gap_sharpe"]) != 0 and blind["gap_sharpe_lo"] and blind["gap_sharpe_hi"]
    assert blind["gap_sharpe_p"] and blind["likely_recall"] in ("true", "false")
    assert float(blind["gap_ceps"]) != 0 or float(blind["gap_ret_pct"]) != 0
    doc = json.loads((out / "results.json").read_text())
    transcript = doc["tasks"]["portbench"]["usage"]["transcript"]
    from quantgym.agents.llm.client import read_transcript

    header, calls = read_transcript(transcript)
    assert header["eval"]["blind_both"] is True
    episodes = {c["episode"] for c in calls}
    assert any("/blind#" in e for e in episodes) and any("/blind#" not in e for e in episodes)
    # the replay runs both views again from the transcript alone: the same numbers, bit for bit
    out2 = tmp_path / "replay"
    r2 = CliRunner().invoke(app, ["eval", "--agent", f"replay:{transcript}", "--out", str(out2), "--quiet"])
    assert r2.exit_code == 0, r2.output
    assert (out2 / "summary.csv").read_text() == (out / "summary.csv").read_text()


def test_the_report_carries_the_gap_columns(tmp_path):
    from quantgym.sweep.report import build_report

    out = tmp_path / "both"
    res = CliRunner().invoke(app, [*_EVAL, "-q", "--blind", "both", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rep = build_report([out], tmp_path / "report")
    html = rep.html_path.read_text()
    assert "Memorization gap" in html and "likely_recall" in html and "[0.000, 0.000]" in html
    # the flag column says "no" where an interval was read (the Sharpe and return rows), "–" where none is
    # (CEPS has no interval over one window of one episode)
    import re

    flags = re.findall(r"<td>(no|yes|–)</td>\s*</tr>", html)
    assert "no" in flags and "yes" not in flags, flags
    merged = _rows(tmp_path / "report")
    assert merged[1]["gap_sharpe"] == "0" and merged[1]["likely_recall"] == "false"


@pytest.mark.parametrize("value", ["maybe", "--blind=sometimes"])
def test_a_bad_blind_value_is_one_line(tmp_path, value):
    args = ["--blind", value] if not value.startswith("--") else [value]
    run_bad(tmp_path, [*_EVAL, *args, "--out", str(tmp_path / "o")], "--blind", "both")


def test_blind_both_refuses_an_id_without_a_blind_mode(tmp_path):
    run_bad(tmp_path, ["eval", "--agent", "equal_weight", "--env", "MarketBench-Pairs-v0", "--blind", "both",
                       "--out", str(tmp_path / "o")], "--blind", "no blind mode")


def test_dry_run_of_blind_both_plans_every_episode_twice():
    pytest.importorskip("openai")
    from quantgym.agents.llm.dryrun import dry_run_plan
    from quantgym.plan import EvalPlan

    def plan(**kw):
        return EvalPlan(env_ids=["PortBench-Balanced-v0"], options={"periods": [_WINDOW]}, **kw)

    one = dry_run_plan("openai:test-model", plan(), agent_options={"context_window": 8192})["total"]
    both = dry_run_plan("openai:test-model", plan(blind_both=True), agent_options={"context_window": 8192})["total"]
    assert both["episodes"] == 2 * one["episodes"] and both["calls_max"] == 2 * one["calls_max"]


def test_the_ceps_gap_pairs_the_per_decision_ceps_of_both_views():
    """CEPS is a mean over decision dates: its gap is bootstrapped over the per-decision CEPS the trading steps
    carry (a stage-scored run has no env records), so a period of ten or more decisions gets an interval."""
    from quantgym.envs.portbench.eval import PortBenchEval
    from quantgym.stats.gap import memorization_gap

    dates = pd.bdate_range("2024-01-01", periods=260)
    rng = np.random.default_rng(0)

    def run(shift: float) -> dict:
        steps = [{"date": str(d.date()), "stage": "S3", "ceps": float(0.4 + shift + 0.05 * rng.standard_normal())}
                 for d in dates[::21]]
        steps += [{"date": steps[0]["date"], "stage": "S1"}]  # a step that trades nothing has no ceps
        nav = pd.Series(np.cumprod(1 + 0.01 * rng.standard_normal(len(dates))), index=dates)
        return {"result": SimpleNamespace(records=[], steps=steps, nav=nav, config={}, profile="balanced",
                                          period="normal_2024")}

    named, blind = (PortBenchEval().gap_series(run(s)) for s in (0.0, 0.2))
    assert len(named.scores["ceps"]) == 13 and named.scores["ceps"].index[0] == str(dates[0].date())
    rows = [SummaryRow("portbench", a, ceps=float(g.scores["ceps"].mean())) for a, g in (("x", named), ("x (blind)", blind))]
    gap = memorization_gap(*rows, named, blind, metrics=("ceps",))
    d = gap["metrics"]["ceps"]
    assert d["n"] == 13 and d["lo"] is not None and 0 < d["lo"] <= d["gap"] <= d["hi"]
