"""Training windows never let a training decision's lookback hold evaluation returns (docs/rl.md)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import quantgym  # noqa: F401 - registers the ids
from quantgym.envs.portbench.config import PERIODS, STRESS_PERIODS
from quantgym.envs.portbench.training import (
    LOOKBACK_BUFFER_DAYS,
    EpisodeSampler,
    RandomPeriod,
    train_windows,
    walk_forward_windows,
)

EVAL = ("normal_2024",) + STRESS_PERIODS


@pytest.fixture(scope="module")
def view():
    env = gym.make("PortBench-Balanced-v0", scoring=False)
    yield env.unwrapped.view, env.unwrapped.config.lookback
    env.close()


def _all_decision_rows(dates, wins, freq):
    smp = EpisodeSampler(dates, wins, freq, 1)
    return np.concatenate([r for r, _, _ in smp.starts])


@pytest.mark.parametrize("freq", ["weekly", "monthly", "daily"])
def test_no_training_decision_inside_or_within_90_days_after_an_evaluation_window(view, freq):
    v, lookback = view
    dates = v.dates
    rows = _all_decision_rows(dates, train_windows(), freq)
    assert rows.size > 50
    d = dates[rows]
    first_lb = dates[rows - lookback + 1]  # oldest row of the 60-row observation window
    for name in EVAL:
        a, b = pd.Timestamp(PERIODS[name].start), pd.Timestamp(PERIODS[name].end)
        assert not ((d >= a) & (d <= b)).any(), name
        after = d > b
        assert ((d[after] - b).days > LOOKBACK_BUFFER_DAYS).all(), name
        # the observation's actual window: no row of it lies inside the evaluation period
        assert not ((first_lb <= b) & (d >= a)).any(), name


def test_buffer_is_a_kwarg_and_zero_gives_the_bare_cut():
    assert train_windows(buffer_days=0) == [("2016-03-01", "2020-01-31"), ("2020-06-01", "2022-04-30"),
                                            ("2023-01-01", "2023-12-31")]
    assert train_windows(buffer_days=30)[1][0] == "2020-07-01"
    with pytest.raises(ValueError, match="buffer_days"):
        train_windows(buffer_days=-1)


def test_without_buffer_the_lookback_would_reach_into_the_windows(view):
    """The defect the buffer fixes: a decision right after covid_2020 looks back into it."""
    v, lookback = view
    rows = _all_decision_rows(v.dates, train_windows(buffer_days=0), "weekly")
    d, first_lb = v.dates[rows], v.dates[rows - lookback + 1]
    b = pd.Timestamp(PERIODS["covid_2020"].end)
    assert ((first_lb <= b) & (d > b)).any()


def test_random_period_episodes_respect_the_buffer(view):
    env = RandomPeriod(gym.make("PortBench-Balanced-v0", scoring=False), episode_len=4)
    ends = [pd.Timestamp(PERIODS[n].end) for n in EVAL]
    starts = [pd.Timestamp(PERIODS[n].start) for n in EVAL]
    for seed in range(30):
        env.reset(seed=seed)
        per = env.unwrapped.period  # first decision date .. episode end
        first, last = pd.Timestamp(per.start), pd.Timestamp(per.end)
        for a, b in zip(starts, ends):
            assert last < a or first > b + pd.Timedelta(days=LOOKBACK_BUFFER_DAYS), (seed, per)
    env.close()


def test_walk_forward_windows_end_before_the_evaluation_period():
    w = walk_forward_windows("covid_2020")
    assert w == [("2016-05-30", "2020-01-31")]
    assert walk_forward_windows("crypto_2022")[-1][1] == "2022-04-30"
    assert walk_forward_windows("normal_2024") == train_windows()
    with pytest.raises(ValueError, match="no training data before china_2015"):
        walk_forward_windows("china_2015")


def test_walk_forward_china_from_the_bundle_start(view):
    v, lookback = view
    w = walk_forward_windows("china_2015", start="2014-04-01")
    assert w == [("2014-04-01", "2015-07-31")]
    rows = _all_decision_rows(v.dates, w, "weekly")
    assert rows.min() - lookback + 1 >= 0  # every observation window lies inside the data
