"""Box spaces for PortBench: the allocation wrapper and its observation features.

Reinforcement-learning libraries (stable-baselines3 and friends) expect a flat ``Box`` observation
and a ``Box`` action. :class:`AllocationWrapper` turns the ``Dict`` spaces of
:class:`~quantgym.envs.portbench.env.PortBenchEnv` (spec ``portbench.md`` §11.2) into those, in
allocation mode (``stagewise=False``: one step = one rebalance date).
:class:`~quantgym.envs.portbench.training.RandomPeriod` draws training episodes inside windows that do
not overlap the evaluation periods, and :class:`~quantgym.envs.portbench.vector.PortBenchVectorEnv`
steps many allocation-mode episodes at once with numpy (the ``vector_entry_point`` of the PortBench
ids; no S1–S5 scoring).

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

Blind mode (an env built with ``blind=True``, docs/blind.md): the macro values are the only levels of the
observation (returns, volatilities, correlations, weights and the NAV ratio date nothing), so the macro slot
holds each series' z-score over the decision's window (the blind env's ``macro``, through the same
``sign(x)·log(1 + |x|)``) and the mask that of the finite z-scores (:func:`blind_row_features`). The asset
slots keep the universe order, as the blind env's ``Dict`` observation does: a slot is a position, its
ticker is never shown, and actions need no mapping.

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

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from quantgym.envs.portbench.market import ASSET_CLASSES, REGIMES, MarketView
from quantgym.envs.portbench.profiles import PROFILES
from quantgym.envs.portbench.stages import s2_truth
from quantgym.envs.portbench.universe import MACRO_KEYS

#: profile one-hot order of the observation
PROFILE_ORDER: tuple[str, ...] = tuple(PROFILES)
ACTION_MODES = ("logits", "weights")
REWARDS = ("env", "log_return", "ceps", "risk_adjusted")
#: [project choice] logits = LOGIT_SCALE · action, action in [-1, 1] (SB3's recommended normalised range):
#: the largest weight ratio a policy can express is exp(2·5) ≈ 22,000
LOGIT_SCALE = 5.0
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


def observation_bounds(n_assets: int) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of the allocation observation's Box for ``n_assets`` assets (:func:`observation_layout`)."""
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
    parts = view.row_cache(int(t))
    feat = parts.get("alloc_features")
    if feat is not None:
        return feat
    avail = parts["available"]
    corr = view.row_array(int(t), "corr")
    intra, inter = view.class_corr(int(t))
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
        np.clip(np.nan_to_num(intra, nan=0.0), -1.0, 1.0),
        np.clip(np.nan_to_num(inter[_IU], nan=0.0), -1.0, 1.0),
        np.clip(np.sign(macro) * np.log1p(np.abs(macro)), -10.0, 10.0),
        parts["macro_mask"].astype(np.float64),
        reg,
    ])
    return parts.put("alloc_features", feat)


def blind_row_features(view: MarketView, t: int) -> np.ndarray:
    """:func:`row_features` in blind mode (module docstring): the macro slot and its mask from the window
    z-scores of :class:`~quantgym.envs.portbench.blinding.BlindView` (the same cached values)."""
    from types import SimpleNamespace

    from quantgym.envs.portbench.blinding import _levels

    parts = view.row_cache(int(t))
    feat = parts.get("alloc_features_blind")
    if feat is not None:
        return feat
    snap = SimpleNamespace(**{k: v for k, v in parts.items() if isinstance(k, str)})  # the row's snapshot parts
    levels = parts.value(("blind_levels",), lambda: _levels(view, snap, parts))  # the blind env's, shared
    z, mask = levels[1], levels[2]
    lay = observation_layout(parts["available"].size)
    feat = row_features(view, t).copy()
    feat[lay["macro"]] = np.clip(np.sign(z) * np.log1p(np.abs(z)), -10.0, 10.0)
    feat[lay["macro_mask"]] = mask
    return parts.put("alloc_features_blind", feat)


def profile_onehot(name: str) -> np.ndarray:
    """One-hot (3,) of the profile in :data:`PROFILE_ORDER`."""
    v = np.zeros(len(PROFILE_ORDER))
    v[PROFILE_ORDER.index(name)] = 1.0
    return v


def check_risk_penalty(kappa: object) -> float:
    """κ of the ``risk_adjusted`` reward as a finite float >= 0; ValueError (one line) otherwise: a negative κ
    would pay the policy for falling below its peak."""
    try:
        k = float(kappa)
    except (TypeError, ValueError):
        k = float("nan")
    if not (np.isfinite(k) and k >= 0):
        raise ValueError(f"risk_penalty (κ of the risk_adjusted reward) must be a finite number >= 0, got {kappa!r}")
    return k


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
    risk_penalty : κ >= 0 of the ``risk_adjusted`` reward.

    Raises
    ------
    ValueError
        Stagewise env, unknown option, a negative ``risk_penalty``, or ``reward="ceps"`` on an env built
        with ``scoring=False``.

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
        self.risk_penalty = check_risk_penalty(risk_penalty)
        n = base.n_assets
        self.n_assets = n
        lo, hi = observation_bounds(n)
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
        feat = (blind_row_features if getattr(base, "blind", False) else row_features)(base.view, base.snapshot.t)
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


__all__ = [
    "check_risk_penalty", "AllocationWrapper", "observation_layout", "row_features", "blind_row_features", "LOGIT_SCALE", "masked_softmax", "derived_views",
    "profile_onehot", "PROFILE_ORDER", "ACTION_MODES", "REWARDS",
]
