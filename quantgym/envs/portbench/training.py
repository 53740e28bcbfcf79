"""PortBench training split for reinforcement learning: windows, episode sampler and :class:`RandomPeriod`.

Training episodes are drawn inside calendar windows that do not overlap the evaluation periods
(normal_2024 and the three stress windows, spec ``portbench.md`` §2.2–§2.3) nor the lookback
buffer after them (:func:`train_windows`, :func:`walk_forward_windows`); :class:`EpisodeSampler`
draws runs of consecutive decision rows and :class:`RandomPeriod` sets a PortBench env's period to
one at every reset. See docs/rl.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import gymnasium as gym
import numpy as np
import pandas as pd

from quantgym.envs.portbench.config import STRESS_PERIODS, Period, resolve_period
from quantgym.envs.portbench.simulator import rebalance_rows

#: [project choice] default training split: 2016-01-01..2023-12-31 minus the stress windows
TRAIN_START, TRAIN_END = "2016-01-01", "2023-12-31"
#: [project choice] calendar days cut after every excluded (evaluation) period before training may start again,
#: so no training decision's observation window holds evaluation returns: the clean snapshot looks back
#: L = 60 trading rows (about 84–88 calendar days; paper own-calendar windows: ``[d − 90, d]``, §1.6)
LOOKBACK_BUFFER_DAYS = 90


# --------------------------------------------------------------------------------------- training split
def train_windows(start: str = TRAIN_START, end: str = TRAIN_END,
                  exclude: Sequence[str | Period | dict] = ("normal_2024",) + STRESS_PERIODS,
                  buffer_days: int = LOOKBACK_BUFFER_DAYS) -> list[tuple[str, str]]:
    """Calendar windows of ``[start, end]`` that do not overlap any excluded period or its lookback buffer.

    Each excluded period ``[a, b]`` is cut out as ``[a, b + buffer_days]``: a training decision dated
    within ``buffer_days`` after an evaluation window would see that window's returns in its
    observation (the 60-row lookback, §1.6), so no training decision is made there. The days before
    ``a`` stay usable: an episode ends the day before its window ends and observations look back only.

    Parameters
    ----------
    start, end : ISO dates (inclusive).
    exclude : periods (names, dicts or :class:`Period`) to cut out; default = the evaluation
        periods of the bench (normal_2024 and the three stress windows, spec §2.2–§2.3).
    buffer_days : calendar days cut after each excluded period (default :data:`LOOKBACK_BUFFER_DAYS`
        = 90, which covers the 60-trading-row lookback; 0 = cut the periods only).

    Returns
    -------
    list of ``(start, end)`` ISO date pairs, ascending, non-empty.

    Raises
    ------
    ValueError
        If nothing is left.
    """
    if int(buffer_days) < 0:
        raise ValueError(f"buffer_days must be >= 0, got {buffer_days}")
    segs = [(pd.Timestamp(start), pd.Timestamp(end))]
    for p in exclude:
        per = resolve_period(p)
        a, b = pd.Timestamp(per.start), pd.Timestamp(per.end) + pd.Timedelta(days=int(buffer_days))
        out = []
        for s, e in segs:
            if b < s or a > e:
                out.append((s, e))
                continue
            if a > s:
                out.append((s, a - pd.Timedelta(days=1)))
            if b < e:
                out.append((b + pd.Timedelta(days=1), e))
        segs = out
    if not segs:
        raise ValueError(f"no training window left in {start}..{end} after excluding {list(exclude)}")
    return [(str(s.date()), str(e.date())) for s, e in segs]


def walk_forward_windows(period: str | Period | dict, start: str = TRAIN_START,
                         exclude: Sequence[str | Period | dict] = ("normal_2024",) + STRESS_PERIODS,
                         buffer_days: int = LOOKBACK_BUFFER_DAYS) -> list[tuple[str, str]]:
    """Training windows for a walk-forward evaluation on ``period``: only data before it.

    :func:`train_windows` from ``start`` to the day before ``period`` starts (the other excluded
    periods and their buffers still cut out), so the policy evaluated on ``period`` was trained on
    earlier data only. CLI equivalent: ``quantgym train --train-period START:<day before> --eval-periods
    <period>``.

    Raises
    ------
    ValueError
        If no training window is left before ``period`` (e.g. china_2015 with ``start`` 2016-01-01).
    """
    per = resolve_period(period)
    end = pd.Timestamp(per.start) - pd.Timedelta(days=1)
    if end < pd.Timestamp(start):
        raise ValueError(f"no training data before {per.name} (starts {per.start}) from {start}")
    return train_windows(start, str(end.date()), exclude, buffer_days)


@dataclass(frozen=True)
class EpisodeSpec:
    """Rows of one allocation episode: initial row (EW at its close), decision rows, last row.

    ``truncated``: the episode was cut at ``episode_len`` decisions while its window goes on (a time
    limit: its end is reported as Gymnasium's ``truncated``, so value-based learners bootstrap from
    the last observation); False when it runs to its window's last trading day (``terminated``).
    """

    init_row: int
    decision_rows: np.ndarray
    last_row: int
    truncated: bool = False

    def period(self, dates: pd.DatetimeIndex, freq: str) -> Period:
        """The equivalent :class:`Period` for :class:`PortBenchEnv` (same rows)."""
        return Period(f"train_{dates[self.decision_rows[0]].date()}", str(dates[self.init_row + 1].date()),
                      str(dates[self.last_row].date()), freq, "training window")


class EpisodeSampler:
    """Draw training episodes of ``episode_len`` decisions inside ``windows`` (seeded, reproducible).

    An episode is a run of consecutive decision rows (``freq`` calendar, §2.1) inside one window;
    it ends the day before the next decision date (or at the window's last trading day), so no
    return outside the window is ever seen or earned. Starts are uniform over all valid starts.

    Parameters
    ----------
    dates : the dataset's trading calendar.
    windows : ``[(start, end), ...]`` ISO dates (e.g. :func:`train_windows`).
    freq : "monthly" | "weekly" | "daily".
    episode_len : decisions per episode (a window with fewer gives one episode over all of it).

    Raises
    ------
    ValueError
        If no window holds a decision date with a trading day before it.
    """

    def __init__(self, dates: pd.DatetimeIndex, windows: Sequence[tuple[str, str]], freq: str, episode_len: int):
        self.freq = freq
        self.episode_len = int(episode_len)
        if self.episode_len < 1:
            raise ValueError(f"episode_len must be >= 1, got {episode_len}")
        self.starts: list[tuple[np.ndarray, int, int]] = []  # (decision rows, window last row, n starts)
        for s, e in windows:
            rows = rebalance_rows(dates, s, e, freq)
            inside = np.flatnonzero((dates >= pd.Timestamp(s)) & (dates <= pd.Timestamp(e)))
            # the first decision needs a previous trading day inside the window (its EW close)
            rows = rows[rows > (inside[0] if inside.size else 0)] if inside.size else rows[:0]
            if rows.size == 0:
                continue
            n_starts = max(rows.size - self.episode_len + 1, 1)
            self.starts.append((rows, int(inside[-1]), n_starts))
        if not self.starts:
            raise ValueError(f"no {freq} decision date inside the training windows {list(windows)}")
        self._cum = np.cumsum([k for _, _, k in self.starts])

    def sample(self, rng: np.random.Generator) -> EpisodeSpec:
        """One episode, uniformly over every valid start of every window."""
        j = int(rng.integers(int(self._cum[-1])))
        w = int(np.searchsorted(self._cum, j, side="right"))
        rows, last, _ = self.starts[w]
        i = j - (int(self._cum[w - 1]) if w else 0)
        dec = rows[i : i + self.episode_len]
        cut = i + self.episode_len < rows.size
        end = int(rows[i + self.episode_len]) - 1 if cut else last
        return EpisodeSpec(int(dec[0]) - 1, dec, end, truncated=bool(cut))


class RandomPeriod(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Start every episode on a random window of the training split (seeded; wrap the raw env).

    Each ``reset`` draws an :class:`EpisodeSpec` with :class:`EpisodeSampler` (``reset(seed=s)``
    re-seeds the draw with ``s``; later resets continue that stream) and sets the env's ``period``
    to it before resetting, so nothing of the evaluation periods is seen in training. An episode cut
    at ``episode_len`` decisions inside its window ends ``truncated`` (a time limit, not a terminal
    state: SB3 bootstraps the value of its last observation); one that reaches its window's last
    trading day ends ``terminated`` (:attr:`EpisodeSpec.truncated`).

    Parameters
    ----------
    env : a PortBench env (``gym.make(...)``) — wrap it before :class:`AllocationWrapper`.
    windows : training windows, default :func:`train_windows` ().
    freq : decision frequency of the training episodes ("weekly" default).
    episode_len : decisions per episode (26 weekly ≈ half a year).
    """

    def __init__(self, env: gym.Env, windows: Sequence[tuple[str, str]] | None = None, freq: str = "weekly",
                 episode_len: int = 26):
        gym.utils.RecordConstructorArgs.__init__(self, windows=windows, freq=freq, episode_len=episode_len)
        super().__init__(env)
        self.windows = list(windows) if windows is not None else train_windows()
        self.freq, self.episode_len = freq, int(episode_len)
        self.sampler = EpisodeSampler(env.unwrapped.view.dates, self.windows, freq, self.episode_len)
        self._rng = np.random.default_rng()
        self._truncates = False  # the current episode is cut at episode_len (EpisodeSpec.truncated)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        base = self.env.unwrapped
        spec = self.sampler.sample(self._rng)
        base.period = spec.period(base.view.dates, self.freq)
        self._truncates = spec.truncated
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated and self._truncates:  # the period ends at the time limit, not at the window's end
            terminated, truncated = False, True
        return obs, reward, terminated, truncated, info


__all__ = [
    "RandomPeriod", "EpisodeSampler", "EpisodeSpec", "train_windows", "walk_forward_windows", "LOOKBACK_BUFFER_DAYS",
    "TRAIN_START", "TRAIN_END",
]
