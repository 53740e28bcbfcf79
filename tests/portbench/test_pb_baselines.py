"""Baselines on the bundled real data, and the bench command end to end."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from quantgym.envs.portbench.baselines import BASELINES, make_baseline
from quantgym.evaluation import evaluate
from quantgym.cli import app
from quantgym.envs.portbench.env import PortBenchEnv
from quantgym.results import SUMMARY_COLUMNS, read_summary_csv


def test_min_variance_less_volatile_than_equal_weight_2024():
    ew = evaluate("PortBench-Balanced-v0", make_baseline("equal_weight"), period="normal_2024")
    mv = evaluate("PortBench-Balanced-v0", make_baseline("min_variance"), period="normal_2024")
    assert mv.metrics["volatility"] < ew.metrics["volatility"]
    assert ew.stage_scores is None and ew.ceps is None  # baselines bypass the pipeline (§4.6)
    assert len(ew.nav) == 253  # initial point + 252 trading days of 2024


@pytest.mark.parametrize("key", list(BASELINES))
def test_baseline_weights_sum_to_one_on_available_assets(key):
    env = PortBenchEnv(profile="balanced", period="covid_2020", scoring=False)
    pol = make_baseline(key)
    obs, info = env.reset(seed=0)
    pol.reset(env)
    term = False
    while not term:
        act = pol.act(obs, info)
        w = act["weights"]
        assert np.all(w >= 0)
        assert w.sum() == pytest.approx(1.0, abs=1e-4)  # 6-decimal rounding (§8); the env renormalises
        assert np.all(w[obs["available"] == 0] == 0)
        obs, r, term, trunc, info = env.step(act)
        assert info["invalid"] == {}


def test_sixty_forty_weights():
    env = PortBenchEnv(period="normal_2024", scoring=False)
    obs, info = env.reset(seed=0)
    pol = make_baseline("60/40")
    pol.reset(env)
    w = dict(zip(env.view.tickers, pol.act(obs, info)["weights"]))
    assert all(w[t] == pytest.approx(0.1) for t in ("SPY", "QQQ", "IWM", "VTI", "EEM", "ACWI"))
    assert all(w[t] == pytest.approx(0.08) for t in ("TLT", "IEF", "BIL", "LQD", "HYG"))


def test_bench_cli_writes_results(tmp_path):
    out = tmp_path / "bench"
    res = CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--out", str(out), "--profiles",
                                   "conservative", "--periods", "covid_2020", "--agents", "equal_weight,risk_parity",
                                   "--quiet"])
    assert res.exit_code == 0, res.output
    assert "PortBench — covid_2020" in res.output and "gate conservative" in res.output and "Equal-Weight" in res.output
    rows = read_summary_csv(out / "summary.csv")
    assert list(rows[0].keys())[:len(SUMMARY_COLUMNS)] == list(SUMMARY_COLUMNS)  # then the uncertainty columns
    # summary.csv: the CLI key a user passes back; results.json: the display name beside it
    assert [r["agent"] for r in rows] == ["equal_weight", "risk_parity"]
    assert all(r["task"] == "portbench" and r["ceps"] == "" and r["gate"] in ("true", "false") for r in rows)
    doc = json.loads((out / "results.json").read_text())
    run = doc["tasks"]["portbench"]["runs"][0]
    assert [(r["agent"], r["agent_key"]) for r in doc["tasks"]["portbench"]["runs"]] == [
        ("Equal-Weight", "equal_weight"), ("Risk Parity", "risk_parity")]
    assert len(run["nav"]["values"]) == len(run["nav"]["dates"]) > 50
    assert (out / "portbench_nav_conservative_covid_2020.png").stat().st_size > 10_000


def test_bench_cli_rejects_unknown_task(tmp_path):
    res = CliRunner().invoke(app, ["bench", "--tasks", "nope", "--out", str(tmp_path)])
    assert res.exit_code != 0 and "unknown task" in res.output


@pytest.mark.parametrize("args, needle", [
    (["--profiles", "yolo"], "unknown profile"),
    (["--periods", "1999"], "unknown period"),
    (["--agents", "foo"], "unknown baseline"),
    (["--agent", "replay:/nonexistent.jsonl", "--agents", "equal_weight", "--periods", "covid_2020"], "does not exist"),
])
def test_bench_bad_options_are_one_line_errors(tmp_path, args, needle):
    out = tmp_path / "o"
    res = CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--out", str(out), "--quiet", "--no-plots",
                                   "--profiles", "balanced", *args])
    assert res.exit_code == 2, res.output
    assert needle in res.output and "Traceback" not in res.output
    assert not (out / "summary.csv").exists()


def test_bench_out_dir_errors_and_lock(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    res = CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--out", str(f), "--quiet"])
    assert res.exit_code == 2 and "not a folder" in res.output
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / ".quantgym.lock").write_text("123")
    res = CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--out", str(busy), "--quiet"])
    assert res.exit_code == 2 and "another quantgym run" in res.output


def test_erc_polish_reaches_equal_risk_contributions_from_any_nearby_start():
    """The ERC baseline's weights do not depend on where the conic solver stopped (issue: Cov. Risk
    Parity's Sharpe moved in the 4th digit between two CPUs): Newton reaches the exact optimum."""
    from skfolio import RiskMeasure
    from skfolio.optimization import RiskBudgeting

    from quantgym.envs.portbench.baselines import RIDGE, _shrunk_prior, erc_polish

    rng = np.random.default_rng(7)
    x = rng.normal(0, 0.01, (60, 12)) @ rng.normal(0, 1, (12, 12)) * 0.3 + rng.normal(0, 0.004, (60, 12))
    w_solver = RiskBudgeting(risk_measure=RiskMeasure.VARIANCE, prior_estimator=_shrunk_prior()).fit(x).weights_
    w, why = erc_polish(x, w_solver)
    assert why is None and w.sum() == pytest.approx(1.0, abs=1e-15) and (w > 0).all()
    cov = np.cov(x, rowvar=False)
    sigma = cov + RIDGE * np.mean(np.diag(cov)) * np.eye(12)
    rc = w * (sigma @ w)
    assert np.ptp(rc / rc.mean()) < 1e-12  # equal risk contributions (the solver's: about 1e-6)
    assert np.abs(w - w_solver).max() < 1e-4  # the same solution, only more precise
    for shift in (1e-5, -3e-5):  # another machine's solver stopping elsewhere: the same weights
        w2, _ = erc_polish(x, w_solver * (1 + shift * rng.normal(size=12)))
        assert np.abs(w2 - w).max() < 1e-14
    w3, _ = erc_polish(x, np.full(12, 1 / 12))  # even from 1/n
    assert np.abs(w3 - w).max() < 1e-14


def test_summary_agent_is_the_cli_key_and_round_trips():
    """summary.csv's ``agent`` is what a user passes back: every baseline's key builds that
    baseline again; a policy without a key (a user's subclass, an LLM agent) is written under its name."""
    from quantgym.envs.portbench.baselines import BASELINES, _Baseline, baseline_display_name, make_baseline
    from quantgym.evaluation import policy_key, policy_name

    for key, cls in BASELINES.items():
        b = make_baseline(key)
        assert policy_key(b) == key and type(make_baseline(policy_key(b))) is cls
        assert policy_name(b) == cls.name == baseline_display_name(key) != key
    assert baseline_display_name("openai:m") == "openai:m"

    class Mine(_Baseline):
        name = "My-Weights"

    assert policy_key(Mine()) == "My-Weights"
