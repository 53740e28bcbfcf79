"""A baseline whose optimiser fails falls back to equal weight and says so: the step's
record carries ``fallback`` with the solver's error, ``quantgym bench`` lists it, results.json counts it."""

from collections.abc import Mapping

import numpy as np
import pytest

from quantgym.envs.portbench.baselines import _fit_skfolio, black_litterman_weights, make_baseline
from quantgym.evaluation import evaluate


class _Failing:
    def fit(self, x):
        raise RuntimeError("solver exploded")


def test_a_failing_solver_gives_equal_weight_and_a_note():
    notes: list[str] = []
    w = _fit_skfolio(_Failing(), np.zeros((30, 3)), np.array([0, 2, 3]), 4, notes)
    np.testing.assert_allclose(w, [1 / 3, 0, 1 / 3, 1 / 3], atol=1e-6)
    assert notes == ["solver failed (RuntimeError: solver exploded); equal weight"]


def test_black_litterman_records_a_portfolio_it_cannot_find(monkeypatch):
    import quantgym.envs.portbench.baselines as bl

    monkeypatch.setattr(bl, "max_sharpe", lambda mu, sigma: None)  # the solver finds nothing
    notes: list[str] = []
    x = np.random.default_rng(0).normal(0, 0.02, (40, 3))
    w = black_litterman_weights(x, notes)
    np.testing.assert_allclose(w, [1 / 3] * 3)
    assert notes == ["max-Sharpe on the posterior found no portfolio; equal weight"]


def test_cov_risk_parity_fallback_on_covid_2020_is_recorded_with_its_turnover():
    res = evaluate("PortBench-Balanced-v0", make_baseline("cov_risk_parity"), period="covid_2020")
    fell = [s for s in res.steps if s.get("fallback")]
    assert [s["date"] for s in fell] == ["2020-04-24"]
    assert fell[0]["fallback"].startswith("solver failed (ConvexOptimizationError")
    assert fell[0]["turnover"] > 1.6  # the jump to equal weight (and 2020-05-01 the way back), docs/portbench.md
    assert all("fallback" not in s for s in res.steps if s["date"] != "2020-04-24")


def test_bench_lists_the_fallbacks_and_results_json_counts_them(tmp_path):
    import json

    from typer.testing import CliRunner

    from quantgym.cli import app

    r = CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--profiles", "balanced", "--periods",
                                 "covid_2020", "--agents", "cov_risk_parity,equal_weight", "--out",
                                 str(tmp_path / "b"), "--no-plots", "-q"])
    assert r.exit_code == 0, r.output
    assert "baseline fallbacks (reason per step in results.json)" in r.output and "Cov. Risk Parity, covid_2020: 2020-04-24" in r.output
    runs = json.loads((tmp_path / "b" / "results.json").read_text())["tasks"]["portbench"]["runs"]
    fb = {run["agent"]: run["fallbacks"] for run in runs}
    assert fb["Equal-Weight"] == [] and [f["date"] for f in fb["Cov. Risk Parity"]] == ["2020-04-24"]


def _scaled_policy(scale: float, round_to: int):
    def act(obs, info):
        a = np.asarray(obs["available"], dtype=bool)
        w = np.where(a, 1.0 / max(a.sum(), 1), 0.0) * scale
        return {"views": np.zeros(a.size), "signals": np.ones(a.size, dtype=np.int64), "weights": np.round(w, round_to),
                "status": 0}
    return act


def test_rounding_is_not_recorded_as_a_coercion_but_a_real_rescale_is():
    """Weights that sum to 1 within WEIGHT_SUM_TOLERANCE (rounding) carry no note."""
    from quantgym.envs.portbench.config import WEIGHT_SUM_TOLERANCE

    assert WEIGHT_SUM_TOLERANCE == 1e-4
    rounded = evaluate("PortBench-Balanced-v0", _scaled_policy(1.0, 6), period="covid_2020")
    assert not any((st.get("coerced") or {}).get("S3") for st in rounded.steps)
    rescaled = evaluate("PortBench-Balanced-v0", _scaled_policy(0.98, 6), period="covid_2020")
    notes = [(st.get("coerced") or {}).get("S3") for st in rescaled.steps]
    assert all(n and "summed to 0.98" in n and "normalised to 1" in n for n in notes)


def test_results_keep_the_executed_weights_and_turnover_of_every_step():
    # results.json's step records carry the executed weights (non-zero, by ticker) and turnover
    res = evaluate("PortBench-Balanced-v0", make_baseline("sixty_forty"), period="covid_2020")
    assert res.steps and all(isinstance(s["weights"], Mapping) and s["weights"] for s in res.steps)
    for s in res.steps:
        assert sum(s["weights"].values()) == pytest.approx(1.0, abs=1e-3) and min(s["weights"].values()) > 0
        assert s["turnover"] >= 0
    assert set(res.to_dict()["steps"][0]) >= {"weights", "turnover", "cost", "date"}
