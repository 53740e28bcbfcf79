"""Blind mode of the batched PortBench vector env and of AllocationWrapper (docs/blind.md, allocation.py): the
macro slot holds window z-scores instead of levels, every other feature is the named one, and a classical
policy scores the same blind and named."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import quantgym  # noqa: F401 - registers the ids
from quantgym.envs.portbench.allocation import AllocationWrapper, observation_layout

ID = "PortBench-Balanced-v0"


def _vec(blind: bool, **kw):
    return gym.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", period="covid_2020",
                        action_mode="weights", blind=blind, **kw)


def _inverse_vol(obs: np.ndarray, lay: dict) -> np.ndarray:
    """A classical policy of the observation: weights ∝ 1 / annualised vol on the available assets."""
    vol, avail = obs[:, lay["ann_vol"]], obs[:, lay["available"]] > 0
    w = np.where(avail & (vol > 0), 1.0 / np.where(vol > 0, vol, 1.0), 0.0)
    return (w / w.sum(axis=1, keepdims=True)).astype(np.float32)


def _episode(env, lay):
    obs, _ = env.reset(seed=3)
    out = {"obs": [obs], "rew": []}
    for _ in range(200):
        obs, rew, term, _, _ = env.step(_inverse_vol(obs, lay))
        out["rew"].append(rew)
        if term.all():
            break
        out["obs"].append(obs)
    assert term.all()
    return {k: np.stack(v) for k, v in out.items()}


def test_vector_env_blind_scores_the_same_and_shows_no_macro_level():
    named_env, blind_env = _vec(False), _vec(True)
    lay = observation_layout(named_env.unwrapped.core.N)
    assert blind_env.unwrapped.blind is True
    named, blind = _episode(named_env, lay), _episode(blind_env, lay)
    np.testing.assert_array_equal(blind["rew"], named["rew"])  # the same trades, the same NAV
    macro = np.zeros(named["obs"].shape[-1], bool)
    macro[lay["macro"]] = macro[lay["macro_mask"]] = True
    np.testing.assert_array_equal(blind["obs"][..., ~macro], named["obs"][..., ~macro])
    # the named slot is sign(x)·log1p|x| of the level; the blind one of a z-score over the window: never the level
    core = named_env.unwrapped.core
    view = core.view
    zb = blind["obs"][..., lay["macro"]].astype(np.float64)
    xb = np.sign(zb) * np.expm1(np.abs(zb))
    window = view.row_cache(int(core.fixed.decision_rows[0]))["window"]
    assert np.abs(xb).max() <= np.sqrt(window[1] - window[0] - 1) + 1e-4  # |z| ≤ √(n − 1)
    levels = np.stack([view.row_cache(int(t))["macro"] for t in core.fixed.decision_rows])
    mask = np.stack([view.row_cache(int(t))["macro_mask"] for t in core.fixed.decision_rows])
    assert mask.any()
    lv = np.broadcast_to(levels[:, None, :], xb.shape)
    big = np.broadcast_to(mask[:, None, :], xb.shape) & (np.abs(lv) >= 1.0)
    assert big.any() and not np.isclose(xb[big], lv[big], rtol=1e-3, atol=0.0).any()
    xn = named["obs"][..., lay["macro"]].astype(np.float64)
    assert np.isclose(np.sign(xn) * np.expm1(np.abs(xn)), lv, rtol=1e-3)[big].all()  # named: the level


def test_allocation_wrapper_blind_matches_the_vector_env():
    """One sub-env of the blind vector env is AllocationWrapper over a blind PortBenchEnv, bit for bit."""
    vec = _vec(True)
    lay = observation_layout(vec.unwrapped.core.N)
    one = AllocationWrapper(gym.make(ID, period="covid_2020", scoring=False, reward="log_return", blind=True),
                            action_mode="weights", reward="log_return")
    obs, _ = vec.reset(seed=3)
    o1, _ = one.reset(seed=3)
    for _ in range(5):
        np.testing.assert_array_equal(obs[0], o1)
        a = _inverse_vol(obs, lay)
        obs, rew, *_ = vec.step(a)
        o1, r1, *_ = one.step(a[0])
        assert rew[0] == pytest.approx(r1, abs=1e-12)
    named = AllocationWrapper(gym.make(ID, period="covid_2020", scoring=False, reward="log_return"),
                              action_mode="weights")
    on, _ = named.reset(seed=3)
    o1, _ = one.reset(seed=3)
    assert not np.array_equal(on[lay["macro"]], o1[lay["macro"]])


def test_vector_env_blind_needs_asset_classes(tmp_path):
    """A data directory without the asset class column (the alias keeps the class): one line naming it."""
    import pandas as pd

    idx = pd.bdate_range("2023-01-02", periods=300)
    pd.DataFrame({"SPY": np.linspace(100, 130, 300)}, index=idx).to_parquet(tmp_path / "prices.parquet")
    pd.DataFrame({"ticker": ["SPY"]}).to_csv(tmp_path / "assets.csv", index=False)
    with pytest.raises(ValueError, match="column 'asset_class'") as e:
        gym.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", data=str(tmp_path),
                     period="2023-06-01:2023-12-31", blind=True)
    assert "\n" not in str(e.value)
