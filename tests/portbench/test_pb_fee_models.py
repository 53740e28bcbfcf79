"""A user-defined fee model in PortBench's NAV sandbox (quantgym.models; the built-in is spec §4.4, §6.3)."""

from __future__ import annotations

import numpy as np
import pytest

from quantgym.envs.portbench.baselines import make_baseline
from quantgym.envs.portbench.config import PortBenchConfig, PortBenchCostModel
from quantgym.envs.portbench.env import PortBenchEnv
from quantgym.evaluation import evaluate
from quantgym.models import ImportableModel

FLAT = ImportableModel("quantgym.models:FlatFee", {"per_order": 7.0})


class SpecCostsInPython:
    """The spec's 15 bps as a user model of this module (one order per traded asset)."""

    def order_fee(self, value, side, day):
        return PortBenchCostModel().order_fee(value, side, day)


def _run(costs, period="covid_2020"):
    env = PortBenchEnv(period=period, scoring=False, config=PortBenchConfig(costs=costs))
    pol = make_baseline("equal_weight")
    obs, info = env.reset(seed=0)
    pol.reset(env)
    term = False
    while not term:
        obs, _, term, _, info = env.step(pol.act(obs, info))
    return env.sim


def test_flat_fee_per_traded_asset_against_an_independent_replay():
    off, flat = _run(PortBenchCostModel.off()), _run(FLAT)
    # the costs never change the weights, so both runs trade the same assets on the same dates; replay the
    # cost-free NAV's daily growth and take 7 per traded asset off at each trade's close
    n_orders = {tr.date: len(tr.orders) for tr in off.trades}
    assert sum(n_orders.values()) > 0
    nav_off, v = off.nav_history, off.nav_history[0]
    expected = [v]
    for i in range(1, len(nav_off)):
        v *= nav_off[i] / nav_off[i - 1]
        v -= 7.0 * n_orders.get(off.nav_dates[i], 0)
        expected.append(v)
    assert flat.nav_dates == off.nav_dates
    np.testing.assert_allclose(flat.nav_history, expected, rtol=1e-12)
    assert flat.total_cost == pytest.approx(7.0 * sum(n_orders.values()), abs=1e-9)
    for tr in flat.trades:
        assert tr.orders.cost.tolist() == [7.0] * len(tr.orders) == [o["cost"] for o in tr.orders]


def test_the_spec_costs_as_a_python_model_match_the_compiled_trade():
    spec, python = _run(PortBenchCostModel()), _run(ImportableModel(f"{__name__}:SpecCostsInPython"))
    assert python.fee_model is not None and spec.fee_model is None
    np.testing.assert_allclose(python.nav_history, spec.nav_history, rtol=1e-12)
    assert python.total_cost == pytest.approx(spec.total_cost, rel=1e-12)


def test_the_result_and_the_prompt_name_the_user_model():
    res = evaluate("PortBench-Balanced-v0", make_baseline("equal_weight"), period="covid_2020",
                   config=PortBenchConfig(costs=FLAT))
    assert res.config["config"]["costs"] == {"class_path": "quantgym.models:FlatFee", "kwargs": {"per_order": 7.0}}
    assert PortBenchConfig.from_dict(res.config["config"]).costs == FLAT
    env = PortBenchEnv(period="covid_2020", stagewise=True, config=PortBenchConfig(costs=FLAT))
    obs, info = env.reset(seed=0)
    for _ in range(2):  # S1, S2 -> the S3 prompt states the cost rule
        obs, *_ = env.step(env.action_space.sample())
    assert "a flat fee of 7 per order" in obs["prompt"] and "15 bps" not in obs["prompt"]


def test_paper_mode_and_the_batched_env_refuse_a_user_fee_model():
    with pytest.raises(ValueError, match="paper mode charges the paper's proportional costs"):
        PortBenchEnv(period="covid_2020", fidelity="paper", config=PortBenchConfig(costs=FLAT))
    from quantgym.envs.portbench.vector import PortBenchVectorEnv

    with pytest.raises(ValueError, match="a user fee model .* runs in PortBenchEnv"):
        PortBenchVectorEnv(2, period="covid_2020", config=PortBenchConfig(costs=FLAT))
    with pytest.raises(ValueError, match="cannot import 'no_such_module_xyz'"):
        PortBenchEnv(period="covid_2020", config=PortBenchConfig(costs=ImportableModel("no_such_module_xyz:Fee")))


def test_config_given_as_a_dict_as_a_sweep_file_gives_it():
    import gymnasium as gym

    from quantgym.envs.portbench.config import PortBenchCostModel
    from quantgym.models import ImportableModel

    env = gym.make("PortBench-Balanced-v0", config={"costs": {"class_path": "quantgym.models:FlatFee",
                                                              "kwargs": {"per_order": 7.0}}})
    assert env.unwrapped.config.costs == ImportableModel("quantgym.models:FlatFee", {"per_order": 7.0})
    env = gym.make("PortBench-Balanced-v0", config={"costs": {"slippage_bps": 0.0, "commission_bps": 0.0}})
    assert env.unwrapped.config.costs == PortBenchCostModel.off()
