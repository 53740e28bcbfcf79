"""Box spaces for PortBench: the allocation wrapper, a training-period sampler and a batched vector env.

Reinforcement-learning libraries (stable-baselines3 and friends) expect a flat ``Box`` observation
and a ``Box`` action. :class:`AllocationWrapper` turns the ``Dict`` spaces of
:class:`~quantgym.envs.portbench.env.PortBenchEnv` (spec ``portbench.md`` §11.2) into those, in
allocation mode (``stagewise=False``: one step = one rebalance date). :class:`RandomPeriod` draws
training episodes inside windows that do not overlap the evaluation periods, and
:class:`PortBenchVectorEnv` steps many allocation-mode episodes at once with numpy (the
``vector_entry_point`` of the PortBench ids; no S1–S5 scoring).

Action mapping (``action_mode``)
--------------------------------
``"logits"`` (default): ``a ∈ Box(−1, 1, (N,))``; with logits ``z = 5·a`` (:data:`LOGIT_SCALE`) the
target is the softmax over the available set ``A_d`` (§11.6),
``w_i = exp(z_i − max_A z) / Σ_{j∈A} exp(z_j − max_A z)`` for ``i ∈ A_d`` and 0 elsewhere.
A zero action is equal weight on ``A_d``; every action is a valid allocation.

``"weights"``: ``a ∈ Box(0, 1, (N,))``; entries of unavailable assets are dropped and the env
normalises the rest (§4.3, §11.4). An action with zero total on ``A_d`` is the spec's invalid S3
answer: fallback to the current weights, S3 score 0 (recorded in ``info["invalid"]``).

In both modes the env then rounds the normalised weights to 4 decimals (§4.3) and trades to them.

S1 / S2 answers (``s12``)
-------------------------
The Box action carries weights only. With scoring on, S1 views and S2 signals are still scored, so
the wrapper must answer them. ``s12="derived"`` (default) derives them from the target weights:
the view of an available asset is its tilt against equal weight, ``v_i = clip(n·w_i − 1, −1, 1)``
(``n = |A_d|``: −1 for a zero weight, 0 at ``1/n``, +1 at ``2/n`` and above), and the signal is the
§4.2 rule applied to that view (buy ``v > 0.2``, sell ``v < −0.2``, else hold). We chose this
because it makes all five stages describe one decision, so CEPS (and its drop penalty) measures
the consistency of the allocation with the momentum truth of S1/S2 instead of adding an
agent-independent constant. ``s12="neutral"`` answers all views 0 and all signals hold (the §4.0
fallback *values*, scored as answers — the spec's score 0 applies only to a refused or invalid
answer, which a Box policy cannot produce).

Observation (float32 ``Box``, length ``5N + 63`` for ``N`` assets; :func:`observation_layout`)
---------------------------------------------------------------------------------------------
Row features of the decision date (spec §1.6, from the snapshot, cached per dataset and row):
trailing 60-row return ``R_i`` clipped to [−1, 10]; annualised vol clipped to [0, 10]; each
asset's mean correlation with the other available assets (finite pairs only, 0 if none);
availability (0/1); the 6 intra-class average correlations and the 15 upper-triangle inter-class
averages (NaN → 0); the 17 macro values as ``sign(x)·log(1 + |x|)`` (0 where missing) and their
mask; the regime one-hot (bull, bear, sideways, crisis). Portfolio state: the drifted current
weights (N), ``log(NAV / NAV_0)`` clipped to [−10, 10], and the profile one-hot (conservative,
balanced, aggressive).

Rewards (``reward``)
--------------------
``"env"`` keeps the env's reward (``ceps`` or ``log_return``, §6.7/§11.3). ``"log_return"``:
``ln(NAV_pre(d_{k+1}) / NAV_pre(d_k))`` computed from ``info["nav"]`` (the same value as the env's
``log_return``). ``"ceps"``: the step's CEPS (needs scoring). ``"risk_adjusted"``
[project choice]: ``log_return − κ·max(DD_{k+1} − DD_k, 0)`` with ``DD_k = ln(peak_k / NAV_k)`` the
log drawdown of the decision-date NAV path from its running peak (``κ = risk_penalty``, default
1.0): a fall below the previous peak costs ``1 + κ`` times a gain, recoveries are not paid twice.
See docs/rl.md for what each teaches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
import pandas as pd
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from quantgym.data.portbench import MACRO_KEYS
from quantgym.envs.portbench.config import PERIODS, STRESS_PERIODS, Period, resolve_period
from quantgym.envs.portbench.market import ASSET_CLASSES, REGIMES, MarketView
from quantgym.envs.portbench.profiles import PROFILES
from quantgym.envs.portbench.simulator import rebalance_rows
from quantgym.envs.portbench.stages import s2_truth

#: profile one-hot order of the observation
PROFILE_ORDER: tuple[str, ...] = tuple(PROFILES)
ACTION_MODES = ("logits", "weights")
REWARDS = ("env", "log_return", "ceps", "risk_adjusted")
#: [project choice] logits = LOGIT_SCALE · action, action in [-1, 1] (SB3's recommended normalised range):
#: the largest weight ratio a policy can express is exp(2·5) ≈ 22,000
LOGIT_SCALE = 5.0
#: [project choice] default training split (issue 6): 2016-01-01..2023-12-31 minus the stress windows
TRAIN_START, TRAIN_END = "2016-01-01", "2023-12-31"
#: [project choice] calendar days cut after every excluded (evaluation) period before training may start again,
#: so no training decision's observation window holds evaluation returns: the clean snapshot looks back
#: L = 60 trading rows (about 84–88 calendar days; paper own-calendar windows: ``[d − 90, d]``, §1.6)
LOOKBACK_BUFFER_DAYS = 90
_K = len(ASSET_CLASSES)
_IU = np.triu_indices(_K, 1)


# --------------------------------------------------------------------------------------- features
def observation_layout(n_assets: int) -> dict[str, slice]:
    """Slices of the flat observation vector (see the module docstring).

    Parameters
    ----------
    n_assets : N, the universe size.

    Returns
    -------
    dict name -> slice into the observation of length ``5N + 63``.
    """
    n, m = n_assets, len(MACRO_KEYS)
    sizes = [("trailing_return", n), ("ann_vol", n), ("mean_corr", n), ("available", n),
             ("intra_corr", _K), ("inter_corr", len(_IU[0])), ("macro", m), ("macro_mask", m),
             ("regime", len(REGIMES)), ("weights", n), ("log_nav", 1), ("profile", len(PROFILE_ORDER))]
    out, pos = {}, 0
    for name, k in sizes:
        out[name] = slice(pos, pos + k)
        pos += k
    return out


def _bounds(n_assets: int) -> tuple[np.ndarray, np.ndarray]:
    lay = observation_layout(n_assets)
    size = lay["profile"].stop
    lo, hi = np.zeros(size, np.float32), np.ones(size, np.float32)
    lo[lay["trailing_return"]], hi[lay["trailing_return"]] = -1.0, 10.0
    hi[lay["ann_vol"]] = 10.0
    for k in ("mean_corr", "intra_corr", "inter_corr"):
        lo[lay[k]] = -1.0
    lo[lay["macro"]], hi[lay["macro"]] = -10.0, 10.0
    lo[lay["log_nav"]], hi[lay["log_nav"]] = -10.0, 10.0
    return lo, hi


def row_features(view: MarketView, t: int) -> np.ndarray:
    """Row part of the observation at decision row ``t`` (float64, read-only, cached per dataset and row).

    Parameters
    ----------
    view : the env's :class:`~quantgym.envs.portbench.market.MarketView`.
    t : decision row (as in ``MarketSnapshot.t``).

    Returns
    -------
    (4N + 59,) array: the observation up to and excluding ``weights`` (:func:`observation_layout`).
    """
    parts = view._row_parts(int(t))
    feat = parts.get("alloc_features")
    if feat is not None:
        return feat
    avail = parts["available"]
    corr = parts["corr"]
    n = avail.size
    use = np.isfinite(corr) & avail[None, :] & avail[:, None] & ~np.eye(n, dtype=bool)
    cnt = use.sum(axis=1)
    mean_corr = np.where(cnt > 0, np.where(use, corr, 0.0).sum(axis=1) / np.maximum(cnt, 1), 0.0)
    macro = parts["macro"]
    reg = np.zeros(len(REGIMES))
    reg[REGIMES.index(parts["regime"])] = 1.0
    feat = np.concatenate([
        np.clip(parts["trailing_return"], -1.0, 10.0),
        np.clip(parts["ann_vol"], 0.0, 10.0),
        np.clip(mean_corr, -1.0, 1.0),
        avail.astype(np.float64),
        np.clip(np.nan_to_num(parts["intra"], nan=0.0), -1.0, 1.0),
        np.clip(np.nan_to_num(parts["inter"][_IU], nan=0.0), -1.0, 1.0),
        np.clip(np.sign(macro) * np.log1p(np.abs(macro)), -10.0, 10.0),
        parts["macro_mask"].astype(np.float64),
        reg,
    ])
    feat.flags.writeable = False
    parts["alloc_features"] = feat
    return feat


def profile_onehot(name: str) -> np.ndarray:
    """One-hot (3,) of the profile in :data:`PROFILE_ORDER`."""
    v = np.zeros(len(PROFILE_ORDER))
    v[PROFILE_ORDER.index(name)] = 1.0
    return v


def masked_softmax(logits: np.ndarray, available: np.ndarray) -> np.ndarray:
    """Softmax of ``logits`` over ``available`` (last axis), 0 elsewhere; all-unavailable rows → 0.

    Parameters
    ----------
    logits : (..., N) finite floats (actions in [-1, 1], clipped, then scaled by :data:`LOGIT_SCALE`).
    available : (..., N) bool.
    """
    z = np.where(available, LOGIT_SCALE * np.clip(logits, -1.0, 1.0), -np.inf)
    zmax = np.max(z, axis=-1, keepdims=True)
    zmax = np.where(np.isfinite(zmax), zmax, 0.0)
    e = np.where(available, np.exp(z - zmax), 0.0)
    s = e.sum(axis=-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def derived_views(weights: np.ndarray, available: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """S1 views and S2 signals derived from target weights (``s12="derived"``, module docstring)."""
    n = int(available.sum())
    views = np.where(available, np.clip(n * weights - 1.0, -1.0, 1.0), 0.0) if n else np.zeros_like(weights)
    return views, s2_truth(views)


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
    """Rows of one allocation episode: initial row (EW at its close), decision rows, last row."""

    init_row: int
    decision_rows: np.ndarray
    last_row: int

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
        end = int(rows[i + self.episode_len]) - 1 if i + self.episode_len < rows.size else last
        return EpisodeSpec(int(dec[0]) - 1, dec, end)


# --------------------------------------------------------------------------------------- wrappers
class AllocationWrapper(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """PortBench in allocation mode with flat ``Box`` observation and action (module docstring).

    Parameters
    ----------
    env : a PortBench env (``gym.make("PortBench-Balanced-v0")`` or :class:`PortBenchEnv`) with
        ``stagewise=False``.
    action_mode : "logits" (softmax over the available set) | "weights" (drop unavailable, normalise).
    s12 : "derived" | "neutral": how S1 views / S2 signals are answered (module docstring).
    reward : "env" | "log_return" | "ceps" | "risk_adjusted".
    risk_penalty : κ of the ``risk_adjusted`` reward.

    Raises
    ------
    ValueError
        Stagewise env, unknown option, or ``reward="ceps"`` on an env built with ``scoring=False``.

    Notes
    -----
    ``info`` is the env's, plus ``"target_weights"`` (the mapped action, before the env's rounding)
    and ``"env_reward"``. Pickles; passes Gymnasium's and SB3's env checkers.
    """

    def __init__(self, env: gym.Env, action_mode: str = "logits", s12: str = "derived", reward: str = "env",
                 risk_penalty: float = 1.0):
        gym.utils.RecordConstructorArgs.__init__(self, action_mode=action_mode, s12=s12, reward=reward,
                                                 risk_penalty=risk_penalty)
        super().__init__(env)
        base = env.unwrapped
        if getattr(base, "stagewise", False):
            raise ValueError("AllocationWrapper needs stagewise=False (one step per rebalance date)")
        if action_mode not in ACTION_MODES:
            raise ValueError(f"action_mode must be one of {ACTION_MODES}, got {action_mode!r}")
        if s12 not in ("derived", "neutral"):
            raise ValueError(f"s12 must be 'derived' or 'neutral', got {s12!r}")
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        if reward == "ceps" and not base.scoring:
            raise ValueError("reward='ceps' needs the S1-S5 scoring (env built with scoring=True)")
        self.action_mode, self.s12, self.reward_kind = action_mode, s12, reward
        self.risk_penalty = float(risk_penalty)
        n = base.n_assets
        self.n_assets = n
        lo, hi = _bounds(n)
        self.observation_space = spaces.Box(lo, hi, dtype=np.float32)
        if action_mode == "logits":
            self.action_space = spaces.Box(-1.0, 1.0, (n,), np.float32)
        else:
            self.action_space = spaces.Box(0.0, 1.0, (n,), np.float32)
        self._profile = profile_onehot(base.profile.name)
        self._nav_prev = 1.0
        self._dd = 0.0
        self._peak = 1.0

    # -- observation
    def _flat(self, obs: dict) -> np.ndarray:
        base = self.env.unwrapped
        feat = row_features(base.view, base.snapshot.t)
        nav = float(np.asarray(obs["nav"]).reshape(-1)[0])
        lognav = np.clip(math.log(nav) if nav > 0 else -10.0, -10.0, 10.0)
        return np.concatenate([feat, np.asarray(obs["weights"], dtype=np.float64), [lognav], self._profile]
                              ).astype(np.float32)

    def target_weights(self, action: np.ndarray) -> np.ndarray:
        """Map a Box action to target weights on the current snapshot (module docstring)."""
        a = np.asarray(action, dtype=np.float64).reshape(-1)
        if a.shape != (self.n_assets,):
            raise ValueError(f"action must have shape ({self.n_assets},), got {np.shape(action)}")
        avail = self.env.unwrapped.snapshot.available
        if self.action_mode == "logits":
            if not np.all(np.isfinite(a)):
                raise ValueError("logit action contains NaN or inf")
            return masked_softmax(a, avail)
        return np.where(avail, a, 0.0)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._nav_prev = float(info["nav"])
        self._peak, self._dd = self._nav_prev, 0.0
        return self._flat(obs), info

    def step(self, action):
        base = self.env.unwrapped
        w = self.target_weights(action)
        avail = base.snapshot.available
        if self.s12 == "derived":
            tot = w.sum()
            views, signals = derived_views(w / tot if tot > 0 else w, avail)
        else:
            views, signals = np.zeros(self.n_assets), np.ones(self.n_assets, dtype=np.int64)
        obs, env_reward, terminated, truncated, info = self.env.step(
            {"views": views, "signals": signals, "weights": w, "status": 0})
        nav = float(info["nav"])
        if self.reward_kind == "env":
            reward = float(env_reward)
        elif self.reward_kind == "ceps":
            reward = float(info.get("ceps") or 0.0)
        else:
            lr = math.log(nav / self._nav_prev) if nav > 0 and self._nav_prev > 0 else 0.0
            reward = lr
            if self.reward_kind == "risk_adjusted":
                self._peak = max(self._peak, nav)
                dd = math.log(self._peak / nav) if nav > 0 else 0.0
                reward = lr - self.risk_penalty * max(dd - self._dd, 0.0)
                self._dd = dd
        self._nav_prev = nav
        info["target_weights"] = w
        info["env_reward"] = float(env_reward)
        return self._flat(obs), reward, terminated, truncated, info


class RandomPeriod(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Start every episode on a random window of the training split (seeded; wrap the raw env).

    Each ``reset`` draws an :class:`EpisodeSpec` with :class:`EpisodeSampler` (``reset(seed=s)``
    re-seeds the draw with ``s``; later resets continue that stream) and sets the env's ``period``
    to it before resetting, so nothing of the evaluation periods is seen in training.

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

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        base = self.env.unwrapped
        spec = self.sampler.sample(self._rng)
        base.period = spec.period(base.view.dates, self.freq)
        return self.env.reset(seed=seed, options=options)


# --------------------------------------------------------------------------------------- batched env
class _BatchCore:
    """Numpy state of ``B`` allocation-mode episodes (no S1–S5 scoring); see :class:`PortBenchVectorEnv`.

    Reproduces :class:`PortBenchEnv` (``scoring=False``) + :class:`AllocationWrapper` step by step:
    the same target mapping, the env's 4-decimal rounding and fallback, the §6.3 cost on
    ``τ = Σ|Δw|`` (``|Δw| ≥ 1e−6``), and the §6.2 day loop (per-day drift and renormalisation,
    in the same floating-point order), so observations are bit-identical and rewards equal to the last
    ulp (``np.log`` vs ``math.log``; tested).
    """

    def __init__(self, num_envs: int, profile: str, period: Any, reward: str, action_mode: str,
                 windows: Sequence[tuple[str, str]] | None, freq: str, episode_len: int, risk_penalty: float,
                 data: Any, config: Any):
        from quantgym.envs.portbench.env import PortBenchEnv

        if reward not in ("log_return", "risk_adjusted"):
            raise ValueError(f"the batched vector env has no S1-S5 scoring: reward must be 'log_return' or "
                             f"'risk_adjusted', got {reward!r} (use vectorization_mode='sync' for 'ceps')")
        if action_mode not in ACTION_MODES:
            raise ValueError(f"action_mode must be one of {ACTION_MODES}, got {action_mode!r}")
        # one template env validates the arguments and owns the data view (shared caches)
        self.template = PortBenchEnv(profile=profile, period=period, scoring=False, reward="log_return",
                                     data=data, config=config)
        self.view: MarketView = self.template.view
        self.cfg = self.template.config
        self.B, self.N = int(num_envs), self.view.n_assets
        self.reward_kind, self.action_mode, self.risk_penalty = reward, action_mode, float(risk_penalty)
        self.sampler = EpisodeSampler(self.view.dates, windows, freq, episode_len) if windows else None
        if self.sampler is None:
            sim = self.template._new_simulator()
            self.fixed = EpisodeSpec(sim.first_row - 1, np.asarray(sim.decision_rows), sim.last_row)
        self.r0 = self.view.returns0
        self.profile_vec = profile_onehot(self.template.profile.name)
        self.rate, self.min_trade = self.cfg.costs.rate, self.cfg.costs.min_trade
        self.nav0 = self.cfg.initial_nav
        self.lmax = episode_len if self.sampler else self.fixed.decision_rows.size
        self.dec = np.zeros((self.B, self.lmax), np.int64)
        self.n_dec = np.zeros(self.B, np.int64)
        self.last = np.zeros(self.B, np.int64)
        self.k = np.zeros(self.B, np.int64)
        self.t = np.zeros(self.B, np.int64)
        self.nav = np.full(self.B, self.nav0)
        self.w = np.zeros((self.B, self.N))
        self.peak = np.ones(self.B)
        self.dd = np.zeros(self.B)
        self.feat = np.zeros((self.B, observation_layout(self.N)["weights"].start))
        self.avail = np.zeros((self.B, self.N), bool)
        self.w_obs = np.zeros((self.B, self.N))
        self.nav_obs = np.full(self.B, self.nav0)
        self.rngs = [np.random.default_rng() for _ in range(self.B)]
        # dense tables of every decision row an episode can visit (features, availability), built once
        rows = (np.unique(np.concatenate([r for r, _, _ in self.sampler.starts])) if self.sampler
                else np.unique(self.fixed.decision_rows))
        self.rowmap = np.full(len(self.view.dates), -1, np.int64)
        self.rowmap[rows] = np.arange(rows.size)
        self.feat_table = np.stack([row_features(self.view, int(t)) for t in rows])
        self.avail_table = np.stack([self.view._row_parts(int(t))["available"] for t in rows])

    def _load_rows(self, idx: np.ndarray) -> None:
        j = self.rowmap[self.dec[idx, self.k[idx]]]
        self.feat[idx] = self.feat_table[j]
        self.avail[idx] = self.avail_table[j]
        # the observation shows the state at the decision (kept as is after the last one, like the env)
        self.w_obs[idx] = self.w[idx]
        self.nav_obs[idx] = self.nav[idx]

    def reset_one(self, i: int) -> None:
        spec = self.sampler.sample(self.rngs[i]) if self.sampler else self.fixed
        L = spec.decision_rows.size
        self.dec[i, :L] = spec.decision_rows
        self.n_dec[i], self.last[i], self.k[i] = L, spec.last_row, 0
        a = self.view.available_at(spec.init_row)
        w = np.zeros(self.N)
        if a.any():
            w[a] = 1.0 / a.sum()
        self.w[i], self.nav[i], self.t[i] = w, self.nav0, spec.init_row
        self._advance(np.array([i]), np.array([spec.decision_rows[0]]))
        self.peak[i], self.dd[i] = self.nav[i], 0.0
        self._load_rows(np.array([i]))

    def _advance(self, idx: np.ndarray | slice, target: np.ndarray) -> None:
        """§6.2 day loop for envs ``idx`` up to rows ``target`` (same arithmetic as the simulator)."""
        t = self.t[idx]
        gap = target - t
        steps = int(gap.max(initial=0))
        if steps == 1 and isinstance(idx, slice) and bool((gap == 1).all()):  # fast path: daily, all envs
            growth = self.w * (1.0 + self.r0[t + 1])
            g = growth.sum(axis=1)
            self.nav *= g
            ok = g > 0
            if ok.all():
                self.w = growth / g[:, None]
            else:
                self.w[ok] = growth[ok] / g[ok, None]
            self.t = t + 1
            return
        ids = np.arange(self.B)[idx]
        for j in range(1, steps + 1):
            act = gap >= j
            ii = ids[act]
            growth = self.w[ii] * (1.0 + self.r0[t[act] + j])
            g = growth.sum(axis=1)
            self.nav[ii] *= g
            ok = g > 0
            self.w[ii[ok]] = growth[ok] / g[ok, None]
        self.t[idx] = np.maximum(t, target)

    def obs(self) -> np.ndarray:
        rel = np.clip(self.nav_obs / self.nav0, 0.0, 1e3)
        with np.errstate(divide="ignore"):
            lognav = np.where(rel > 0, np.clip(np.log(rel), -10.0, 10.0), -10.0)
        out = np.empty((self.B, self.feat.shape[1] + self.N + 1 + self.profile_vec.size), np.float32)
        f = self.feat.shape[1]
        out[:, :f] = self.feat
        out[:, f : f + self.N] = np.clip(self.w_obs, 0.0, 1.0)
        out[:, f + self.N] = lognav
        out[:, f + self.N + 1 :] = self.profile_vec
        return out

    def step(self, actions: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Trade and advance envs ``idx``; returns (reward, terminated) for them."""
        sel = slice(None) if idx.size == self.B else idx  # views instead of copies when every env steps
        a = np.asarray(actions, dtype=np.float64)[sel]
        avail = self.avail[sel]
        w0 = self.w[sel].copy()
        if self.action_mode == "logits":
            if not np.isfinite(a).all():
                raise ValueError("logit action contains NaN or inf")
            raw = masked_softmax(a, avail)
            tot = raw.sum(axis=1)
            bad = ~(tot > 0)
        else:
            # env._process_weights: invalid (NaN, out of [0, 1], zero total) -> fallback current weights
            raw = np.where(avail, a, 0.0)
            tot = raw.sum(axis=1)
            bad = ~np.isfinite(raw).all(axis=1) | (raw < 0).any(axis=1) | (raw > 1).any(axis=1) | ~(tot > 0)
        if bad.any():
            target = np.round(np.divide(raw, tot[:, None], out=np.zeros_like(raw), where=~bad[:, None]), 4)
            fb = np.where(avail[bad], w0[bad], 0.0)
            sm = fb.sum(axis=1)
            fb = np.where((sm <= 0)[:, None], avail[bad].astype(np.float64), fb)
            sm = fb.sum(axis=1)
            target[bad] = np.divide(fb, sm[:, None], out=fb.copy(), where=sm[:, None] > 0)
        else:
            target = np.round(raw / tot[:, None], 4)
        # simulator.trade
        nav_pre = self.nav[sel].copy()
        delta = np.abs(target - w0)
        tau = np.where(delta >= self.min_trade, delta, 0.0).sum(axis=1)
        self.nav[sel] = nav_pre - self.rate * tau * nav_pre
        ts = target.sum(axis=1)
        self.w[sel] = np.where((ts > 0)[:, None], target / np.where(ts > 0, ts, 1.0)[:, None], w0)
        # advance to the next decision row or the episode's last row
        self.k[sel] += 1
        k = self.k[sel]
        term = k >= self.n_dec[sel]
        nxt = np.where(term, self.last[sel], self.dec[idx, np.minimum(k, self.lmax - 1)])
        self._advance(sel, nxt)
        nav = self.nav[sel]
        with np.errstate(divide="ignore", invalid="ignore"):
            lr = np.where((nav > 0) & (nav_pre > 0), np.log(nav / nav_pre), 0.0)
        if self.reward_kind == "risk_adjusted":
            self.peak[sel] = np.maximum(self.peak[sel], nav)
            with np.errstate(divide="ignore", invalid="ignore"):
                dd = np.where(nav > 0, np.log(self.peak[sel] / nav), 0.0)
            lr = lr - self.risk_penalty * np.maximum(dd - self.dd[sel], 0.0)
            self.dd[sel] = dd
        if not term.all():
            self._load_rows(idx[~term])
        return lr, term


class PortBenchVectorEnv(VectorEnv):
    """Batched allocation-mode PortBench: ``num_envs`` episodes stepped together with numpy.

    The ``vector_entry_point`` of the PortBench ids: ``gym.make_vec("PortBench-Balanced-v0", num_envs=8,
    vectorization_mode="vector_entry_point")``. Spaces are those of :class:`AllocationWrapper`
    (float32 Box); no S1–S5 scoring (the classical-baseline mode, §4.6), so rewards are
    ``log_return`` (default) or ``risk_adjusted``. Each sub-env equals
    ``AllocationWrapper(gym.make(id, scoring=False, reward="log_return"), reward=...)`` (tested
    observations bit for bit, rewards to 1e-12), and ``train_windows`` makes every sub-env a :class:`RandomPeriod` episode stream
    seeded with ``seed + i``. Autoreset: next-step (Gymnasium's default).

    Parameters
    ----------
    num_envs : number of sub-envs.
    profile, period, data, config : as :class:`PortBenchEnv`.
    reward : "log_return" | "risk_adjusted". action_mode : "logits" | "weights".
    train_windows : None (every sub-env runs ``period``) or a list of ``(start, end)``; ``True`` =
        :func:`train_windows` ().
    freq, episode_len : training episodes (with ``train_windows``).
    risk_penalty : κ of ``risk_adjusted``.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, profile: str = "balanced", period: Any = "normal_2024",
                 reward: str = "log_return", action_mode: str = "logits",
                 train_windows: Sequence[tuple[str, str]] | bool | None = None, freq: str = "weekly",
                 episode_len: int = 26, risk_penalty: float = 1.0, data: Any = None, config: Any = None,
                 render_mode: str | None = None, **ignored: Any):
        if render_mode is not None:
            raise ValueError("PortBenchVectorEnv does not render")
        unknown = set(ignored) - {"scoring", "stagewise", "fidelity", "oracle", "alpha", "lam", "text_obs"}
        if unknown:
            raise ValueError(f"unknown PortBenchVectorEnv argument(s) {sorted(unknown)}")
        if ignored.get("stagewise"):
            raise ValueError("PortBenchVectorEnv is allocation mode only (stagewise=False)")
        if ignored.get("fidelity", "clean") != "clean":
            raise ValueError("PortBenchVectorEnv implements fidelity='clean' only; use vectorization_mode='sync' "
                             "for the paper-fidelity mode")
        if ignored.get("scoring"):
            raise ValueError("PortBenchVectorEnv has no S1-S5 scoring; use vectorization_mode='sync' for scoring")
        wins = globals()["train_windows"]() if train_windows is True else train_windows
        self.core = _BatchCore(num_envs, profile, period, reward, action_mode, wins, freq, episode_len,
                               risk_penalty, data, config)
        n = self.core.N
        self.num_envs = int(num_envs)
        lo, hi = _bounds(n)
        self.single_observation_space = spaces.Box(lo, hi, dtype=np.float32)
        self.single_action_space = (spaces.Box(-1.0, 1.0, (n,), np.float32) if action_mode == "logits"
                                    else spaces.Box(0.0, 1.0, (n,), np.float32))
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._autoreset = np.zeros(self.num_envs, bool)
        self._all = np.arange(self.num_envs)

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"expected {self.num_envs} seeds, got {len(seeds)}")
            self.core.rngs = [np.random.default_rng(s) for s in seeds]
        for i in range(self.num_envs):
            self.core.reset_one(i)
        self._autoreset[:] = False
        return self.core.obs(), {}

    def step(self, actions):
        a = np.asarray(actions, dtype=np.float64)
        if a.shape != (self.num_envs, self.core.N):
            raise ValueError(f"actions must have shape ({self.num_envs}, {self.core.N}), got {a.shape}")
        rew = np.zeros(self.num_envs)
        term = np.zeros(self.num_envs, bool)
        run = self._all[~self._autoreset]
        if run.size:
            r, d = self.core.step(a, run)
            rew[run], term[run] = r, d
        for i in np.flatnonzero(self._autoreset):
            self.core.reset_one(int(i))
        self._autoreset = term.copy()
        return self.core.obs(), rew, term, np.zeros(self.num_envs, bool), {}


def make_portbench_vector_env(num_envs: int = 1, **kwargs: Any) -> PortBenchVectorEnv:
    """``vector_entry_point`` of the PortBench ids (see :class:`PortBenchVectorEnv`)."""
    return PortBenchVectorEnv(num_envs=num_envs, **kwargs)


__all__ = [
    "AllocationWrapper", "RandomPeriod", "PortBenchVectorEnv", "EpisodeSampler", "EpisodeSpec", "train_windows",
    "walk_forward_windows", "LOOKBACK_BUFFER_DAYS",
    "observation_layout", "row_features", "LOGIT_SCALE", "masked_softmax", "derived_views", "make_portbench_vector_env",
    "PERIODS",
]
