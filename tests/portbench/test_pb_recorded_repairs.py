"""What the env repairs is recorded where the user sees it: observation values clipped to their Box bounds
(``info["clipped"]``, spec §11.2) and the S3 oracle's equal-weight fallback on a solver failure (spec §4.3)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from quantgym.envs.portbench import stages
from quantgym.envs.portbench.data import load_portbench_data
from quantgym.envs.portbench.env import OBS_KEYS, PortBenchEnv
from quantgym.envs.portbench.stages import BUY, ORACLE_SOLVER_FALLBACK
from quantgym.evaluation import evaluate


def _fresh_data(**changes):
    """The bundled data as a new object (its own per-row caches), with ``changes`` applied."""
    return dataclasses.replace(load_portbench_data(), **changes)


def _equal_weights(env):
    n = env.unwrapped.n_assets
    return {"views": np.zeros(n), "signals": np.ones(n, dtype=np.int64), "weights": np.full(n, 1.0 / n)}


def test_bundled_data_observations_are_not_clipped():
    env = PortBenchEnv(period="covid_2020", scoring=False)
    _, info = env.reset(seed=0)
    assert "clipped" not in info
    for _ in range(3):
        *_, info = env.step(_equal_weights(env))
        assert "clipped" not in info


def test_a_macro_value_beyond_its_bound_is_clipped_and_counted_in_info():
    data = load_portbench_data()
    macro = np.array(data.macro)
    macro[:, 0] = 5000.0  # beyond the macro Box bound 1e3 on every day
    env = PortBenchEnv(period="covid_2020", scoring=False, data=_fresh_data(macro=macro))
    obs, info = env.reset(seed=0)
    assert info["clipped"] == {"macro": 1}
    assert obs["macro"][0] == 1e3 and env.observation_space.contains(obs)
    obs, _, terminated, _, info = env.step(_equal_weights(env))
    assert info["clipped"] == {"macro": 1} and obs["macro"][0] == 1e3
    # an entry left out of the observation is not reported
    env = PortBenchEnv(period="covid_2020", scoring=False, data=_fresh_data(macro=macro),
                       obs_keys=[k for k in OBS_KEYS if k != "macro"])
    _, info = env.reset(seed=0)
    assert "clipped" not in info


def test_the_oracle_fallback_on_a_solver_failure_is_recorded_in_info_records_and_results(monkeypatch):
    monkeypatch.setattr(stages, "max_sharpe_weights", lambda x: None)  # every SLSQP solve fails
    env = PortBenchEnv(profile="balanced", period="covid_2020", data=_fresh_data())
    res = evaluate(env, lambda obs, info: _equal_weights(env))
    flagged = [s for s in res.steps if "oracle_fallback" in s]
    assert flagged and all(s["oracle_fallback"] == ORACLE_SOLVER_FALLBACK for s in flagged)
    assert res.metrics["oracle_fallbacks"] == len(flagged)
    records = env.records
    assert [r["date"] for r in records if "oracle_fallback" in r] == [s["date"] for s in flagged]
    assert "oracle_fallbacks" in res.to_dict()["metrics"]


def test_the_fallback_weights_are_equal_weight_on_the_truth_buys(monkeypatch):
    monkeypatch.setattr(stages, "max_sharpe_weights", lambda x: None)
    env = PortBenchEnv(profile="balanced", period="covid_2020", data=_fresh_data())
    env.reset(seed=0)
    for _ in range(env.sim.decision_rows.size):
        truth = env.truth
        if truth.oracle_fallback is not None:
            b = env.snapshot.available & (truth.s_star == BUY)
            b = b if b.any() else env.snapshot.available  # no truth buy: B is every available asset
            assert np.all(truth.w_star[b] == round(1.0 / b.sum(), 4)) and np.all(truth.w_star[~b] == 0)
            return
        env.step(_equal_weights(env))
    pytest.fail("no decision reached the solver")


def test_without_a_solver_failure_nothing_is_recorded():
    env = PortBenchEnv(profile="balanced", period="covid_2020", data=_fresh_data())
    res = evaluate(env, lambda obs, info: _equal_weights(env))
    assert not any("oracle_fallback" in s for s in res.steps) and "oracle_fallbacks" not in res.metrics


def test_a_return_beyond_its_bound_is_clipped_and_counted_only_where_a_window_holds_it():
    """A 1,100 % daily return (a penny stock's day) inside the first decision's return window is clipped to the
    Box bound and counted; the same value on the last data row, outside every window of the period, is not."""
    data = load_portbench_data()
    env = PortBenchEnv(period="covid_2020", scoring=False, data=_fresh_data())
    env.reset(seed=0)
    t = int(env.sim.decision_rows[0])
    for row, counted in ((t - 3, True), (data.returns.shape[0] - 1, False)):
        returns = np.array(data.returns)
        returns[row, 5] = 11.0
        env = PortBenchEnv(period="covid_2020", scoring=False, data=_fresh_data(returns=returns))
        obs, info = env.reset(seed=0)
        if counted:
            assert info["clipped"] == {"returns": 1} and obs["returns"].max() == 10.0
            assert env.observation_space.contains(obs)
        else:
            assert "clipped" not in info
