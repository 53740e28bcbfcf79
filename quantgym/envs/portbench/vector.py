"""Batched allocation-mode PortBench: :class:`PortBenchVectorEnv`, the ``vector_entry_point`` of the PortBench ids.

``num_envs`` allocation-mode episodes stepped together (no S1–S5 scoring). Spaces, target mapping and
rewards are those of :class:`~quantgym.envs.portbench.allocation.AllocationWrapper` (module docstring
there); the trade is the batch rule of :func:`quantgym.envs.portbench.execution.execute_trade` and the
day loop that of the simulator (``advance_to``), written per env in the compiled kernel
:func:`_batch_step` (:mod:`quantgym.jit`) in numpy's floating-point order, so every value
equals the numpy form's (``tests/rl/test_vector_kernel.py``); training episodes come from
:mod:`quantgym.envs.portbench.training`."""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from quantgym._util import check_flag
from quantgym.envs.portbench.allocation import (
    ACTION_MODES, LOGIT_SCALE, blind_row_features, check_risk_penalty, observation_bounds, observation_layout,
    profile_onehot, row_features,
)
from quantgym.envs.portbench.config import PortBenchCostModel
from quantgym.envs.portbench.execution import fallback_weights
from quantgym.envs.portbench.market import MarketView
from quantgym.envs.portbench import training
from quantgym.envs.portbench.training import EpisodeSampler, EpisodeSpec
from quantgym.jit import njit, np_sum

# --------------------------------------------------------------------------------------- kernels
#: per-env operation of a batched call (``BatchCore.ops``)
_IDLE, _STEP, _RESET = 0, 1, 2
#: columns of the integer state ``BatchCore.ist``: decision index k, current row t, decisions in the episode,
#: the episode's last row, and the row of the current decision in the dense tables (features, availability)
_K, _T, _NDEC, _LAST, _ROW = range(5)
#: columns of the float state ``BatchCore.fst``: NAV, running peak of the decision-date NAV, log drawdown, the
#: turnover ``τ`` of the env's last step (0 after a reset) and the episode's reward sum
_NAV, _PEAK, _DD, _TAU, _RET = range(5)
_FST_WIDTH = 5
#: entries of the parameter vector ``BatchCore.par`` (passed in: a global would be frozen into numba's cache)
_RATE, _MIN_TRADE, _NAV0, _KAPPA, _RISK = range(5)


@njit(error_model="numpy")
def _logit_shift(a, ops, avail_table, ist, z, scale):  # pragma: no cover - compiled (QUANTGYM_JIT=0 runs it)
    """Shifted logits of the stepping envs (``ops == _STEP``), written into ``z`` (B, N) float64:
    ``scale·clip(a, −1, 1) − max_A`` on the available set ``A`` and −inf off it (``max_A`` = 0 if ``A`` is
    empty), i.e. :func:`~quantgym.envs.portbench.allocation.masked_softmax` before its ``exp`` (which numpy
    computes, so the softmax uses numpy's own ``exp`` on every platform). Returns 1, writing nothing
    more, at the first non-finite action of a stepping env, else 0."""
    B, N = a.shape
    for i in range(B):
        if ops[i] != _STEP:
            continue
        for n in range(N):
            if not np.isfinite(a[i, n]):
                return 1
    for i in range(B):
        if ops[i] != _STEP:
            continue
        row = ist[i, _ROW]
        zmax = -np.inf
        for n in range(N):
            if avail_table[row, n]:
                v = scale * min(max(a[i, n], -1.0), 1.0)
                z[i, n] = v
                if v > zmax:
                    zmax = v
        if not np.isfinite(zmax):
            zmax = 0.0
        for n in range(N):
            z[i, n] = z[i, n] - zmax if avail_table[row, n] else -np.inf
    return 0


@njit(error_model="numpy")
def _batch_step(ops, logits, given, src, target, bad, rew, term, w, fst, ist, dec, avail_table, feat_table,
                rowmap, g0, obs, par):  # pragma: no cover - compiled (QUANTGYM_JIT=0 runs it)
    """One batched step of every env with ``ops[i]`` = ``_STEP`` (trade, advance, reward) or ``_RESET``
    (a new episode set up by :meth:`BatchCore.begin_episode`: advance to its first decision).

    The arithmetic of the simulator and :class:`AllocationWrapper` per env, in numpy's floating-point
    order: every sum over assets is numpy's pairwise summation of a contiguous row (:func:`quantgym.jit.np_sum`), so
    weights, NAV and observations are bit-identical to the numpy form of these formulas.

    Phase 1 (``given == 0``): the targets of the stepping envs into ``target`` (B, N), from
    ``src`` = ``exp`` of :func:`_logit_shift` (``logits``: softmax, then the env's normalisation) or
    the raw weight actions; 4-decimal rounding (§4.3). An invalid target (weights: non-finite, outside
    [0, 1] or zero total on the available set; logits: nothing available) sets ``bad[i]``; then the
    call returns −1 before changing any state, and the caller writes the S3 fallback into ``target`` and
    calls again with ``given == 1`` (phase 1 skipped). Phase 2: the §6.3 trade (``τ`` over ``|Δw| ≥
    min_trade``, ``K = rate·τ·NAV``), the §6.2 day loop to the next decision row (or the episode's last
    row: ``term``), the reward and the observation row (features, clipped weights, clipped
    ``log(NAV/NAV_0)``; a terminated env keeps its last observation, like the single env). Returns the
    number of envs that terminated.
    """
    B, N = w.shape
    F = feat_table.shape[1]

    tmp = np.empty((1, N))
    if given == 0:  # phase 1: targets
        anybad = False
        for i in range(B):
            if ops[i] != _STEP:
                continue
            row = ist[i, _ROW]
            ok = True
            if logits:
                s = np_sum(src[i], 0, N)
                if s > 0:
                    for n in range(N):
                        target[i, n] = src[i, n] / s
                else:
                    for n in range(N):
                        target[i, n] = 0.0
            else:
                for n in range(N):
                    v = src[i, n] if avail_table[row, n] else 0.0
                    if not (v >= 0.0 and v <= 1.0):  # NaN fails the test
                        ok = False
                    target[i, n] = v
            tot = np_sum(target[i], 0, N)
            bad[i] = not (ok and tot > 0)
            if bad[i]:
                anybad = True
            else:
                for n in range(N):
                    target[i, n] = np.rint(target[i, n] / tot * 10000.0) / 10000.0  # np.round(x, 4)
        if anybad:
            return -1
    n_term = 0
    rate, min_trade, nav0, kappa, risk = par[_RATE], par[_MIN_TRADE], par[_NAV0], par[_KAPPA], par[_RISK]
    for i in range(B):
        op = ops[i]
        if op == _IDLE:
            continue
        nav_pre = fst[i, _NAV]
        nav = nav_pre
        if op == _STEP:  # the trade (execution.execute_trade, batch rule)
            for n in range(N):
                d = abs(target[i, n] - w[i, n])
                tmp[0, n] = d if d >= min_trade else 0.0
            tau = np_sum(tmp[0], 0, N)
            fst[i, _TAU] = tau
            nav = nav_pre - rate * tau * nav_pre
            ts = np_sum(target[i], 0, N)
            if ts > 0:
                for n in range(N):
                    w[i, n] = target[i, n] / ts
            k = ist[i, _K] + 1
            ist[i, _K] = k
            done = k >= ist[i, _NDEC]
            nxt = ist[i, _LAST] if done else dec[i, min(k, dec.shape[1] - 1)]
        else:  # a new episode: EW at its initial row (set by the caller), advance to the first decision
            fst[i, _TAU] = 0.0
            done = False
            nxt = dec[i, 0]
        # the §6.2 day loop (simulator.advance_to): drift, renormalise
        t = ist[i, _T]
        for r in range(t + 1, nxt + 1):
            for n in range(N):
                tmp[0, n] = w[i, n] * g0[r, n]
            g = np_sum(tmp[0], 0, N)
            nav *= g
            if g > 0:
                for n in range(N):
                    w[i, n] = tmp[0, n] / g
        ist[i, _T] = max(t, nxt)
        fst[i, _NAV] = nav
        if op == _STEP:
            lr = np.log(nav / nav_pre) if nav > 0 and nav_pre > 0 else 0.0
            if risk:
                peak = max(fst[i, _PEAK], nav)
                fst[i, _PEAK] = peak
                ddn = np.log(peak / nav) if nav > 0 else 0.0
                lr = lr - kappa * max(ddn - fst[i, _DD], 0.0)
                fst[i, _DD] = ddn
            rew[i] = lr
            fst[i, _RET] += lr
        else:
            fst[i, _PEAK], fst[i, _DD], fst[i, _RET] = nav, 0.0, 0.0
            rew[i] = 0.0
            ops[i] = _STEP
        term[i] = done
        n_term += done
        if not done:  # the observation row at the new decision
            row = rowmap[dec[i, ist[i, _K]]]
            ist[i, _ROW] = row
            for c in range(F):
                obs[i, c] = feat_table[row, c]
            for n in range(N):
                obs[i, F + n] = min(max(w[i, n], 0.0), 1.0)
            rel = min(max(nav / nav0, 0.0), 1e3)
            obs[i, F + N] = min(max(np.log(rel), -10.0), 10.0) if rel > 0 else -10.0
    return n_term


# --------------------------------------------------------------------------------------- batched env
def as_actions(actions: Any) -> np.ndarray:
    """A batch of actions as the kernels take it: a C-contiguous float32 or float64 array (float32, the
    action space's dtype, is passed as it is: the kernels widen each value exactly), else a float64 copy."""
    a = actions
    if type(a) is np.ndarray and a.dtype.char in "fd" and a.flags.c_contiguous:
        return a
    return np.ascontiguousarray(a, dtype=np.float64)


def check_num_envs(num_envs: Any, name: str = "num_envs") -> int:
    """``num_envs`` as an int >= 1; ValueError (one line, naming the argument ``name``) otherwise."""
    if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
        raise ValueError(f"{name} (parallel episodes) must be an integer >= 1, got {num_envs!r}")
    return int(num_envs)


class BatchCore:
    """State of ``B`` allocation-mode episodes (no S1–S5 scoring); see :class:`PortBenchVectorEnv`.

    Reproduces :class:`PortBenchEnv` (``scoring=False``) + :class:`AllocationWrapper` step by step:
    the same target mapping, the env's 4-decimal rounding and fallback, the §6.3 cost on
    ``τ = Σ|Δw|`` (``|Δw| ≥ 1e−6``), and the §6.2 day loop (per-day drift and renormalisation,
    in the same floating-point order), so observations are bit-identical and rewards equal to the last
    ulp (the batch trade sums ``τ`` over all assets, the single one over the traded ones; tested).
    One step is two compiled calls (:func:`_logit_shift`, :func:`_batch_step`) around numpy's ``exp``
    (one more :func:`_batch_step` after an S3 fallback), on preallocated state: ``ist`` (B, 5) int64 and
    ``fst`` (B, 5) float64 (the column constants above), weights ``w`` (B, N), the float32 observation
    ``obs_buf`` (B, 5N + 63), updated in place. :meth:`step` steps every env, :meth:`reset_envs` starts
    new episodes (SB3's same-step autoreset); :class:`PortBenchVectorEnv` interleaves :meth:`check`,
    :meth:`begin_episode` and :meth:`run` (next-step autoreset in the same kernel call).
    """

    def __init__(self, num_envs: int, profile: str, period: Any, reward: str, action_mode: str,
                 windows: Sequence[tuple[str, str]] | None, freq: str, episode_len: int, risk_penalty: float,
                 data: Any, config: Any, blind: bool = False):
        from quantgym.envs.portbench.env import PortBenchEnv

        if reward not in ("log_return", "risk_adjusted"):
            raise ValueError(f"the batched vector env has no S1-S5 scoring: reward must be 'log_return' or "
                             f"'risk_adjusted', got {reward!r} (use vectorization_mode='sync' for 'ceps')")
        if action_mode not in ACTION_MODES:
            raise ValueError(f"action_mode must be one of {ACTION_MODES}, got {action_mode!r}")
        check_num_envs(num_envs)
        risk_penalty = check_risk_penalty(risk_penalty)
        # one template env validates the arguments and owns the data view (shared caches)
        self.template = PortBenchEnv(profile=profile, period=period, scoring=False, reward="log_return",
                                     data=data, config=config, blind=blind)
        self.blind = check_flag("blind", blind)
        self.view: MarketView = self.template.view
        self.config = self.template.config
        if self.config.as_of != "close":
            raise ValueError("the batched env observes the book at the decision day's close; as_of="
                             f"{self.config.as_of!r} runs in PortBenchEnv (vectorization_mode='sync')")
        if not isinstance(self.config.costs, PortBenchCostModel):
            raise ValueError("the batched env charges the spec's proportional costs in one kernel; a user fee model "
                             "(config.costs) runs in PortBenchEnv (vectorization_mode='sync')")
        self.B, self.N = int(num_envs), self.view.n_assets
        self.reward_kind, self.action_mode, self.risk_penalty = reward, action_mode, float(risk_penalty)
        self.sampler = EpisodeSampler(self.view.dates, windows, freq, episode_len) if windows else None
        if self.sampler is None:
            sim = self.template._new_simulator()
            self.fixed = EpisodeSpec(sim.first_row - 1, np.asarray(sim.decision_rows), sim.last_row)
        self.g0 = np.ascontiguousarray(1.0 + self.view.returns0)  # gross daily returns (the day loop's 1 + r)
        self.profile_vec = profile_onehot(self.template.profile.name)
        self.nav0 = self.config.initial_nav
        self.par = np.array([self.config.costs.rate, self.config.costs.min_trade, self.nav0, self.risk_penalty,
                             float(reward == "risk_adjusted")])
        self.lmax = episode_len if self.sampler else self.fixed.decision_rows.size
        B, N = self.B, self.N
        self.dec = np.zeros((B, self.lmax), np.int64)
        self.ist = np.zeros((B, 5), np.int64)
        self.fst = np.zeros((B, _FST_WIDTH))
        self.w = np.zeros((B, N))
        self.ops = np.zeros(B, np.int8)
        self.z = np.zeros((B, N))  # shifted logits, then their exp (in place)
        self.target = np.zeros((B, N))
        self.bad = np.zeros(B, bool)
        self.rew = np.zeros(B)
        self.term = np.zeros(B, bool)
        self.cut = np.zeros(B, bool)  # the env's episode ends at episode_len inside its window (truncated)
        self.rngs = [np.random.default_rng() for _ in range(B)]
        # dense tables of every decision row an episode can visit (features, availability), built once
        rows = (np.unique(np.concatenate([r for r, _, _ in self.sampler.starts])) if self.sampler
                else np.unique(self.fixed.decision_rows))
        self.rowmap = np.full(len(self.view.dates), -1, np.int64)
        self.rowmap[rows] = np.arange(rows.size)
        # the observation is float32: the features are cast once here (the same values as a cast per step)
        features = blind_row_features if self.blind else row_features  # blind: macro z-scores (allocation.py)
        self.feat_table = np.stack([features(self.view, int(t)) for t in rows]).astype(np.float32)
        self.avail_table = np.stack([self.view.row_cache(int(t))["available"] for t in rows])
        # equal weight over A_d at every initial row an episode can start from (the reset's EW close)
        inits = (np.unique(np.concatenate([r[:k] for r, _, k in self.sampler.starts])) - 1 if self.sampler
                 else np.array([self.fixed.init_row]))
        self.initmap = np.full(len(self.view.dates), -1, np.int64)
        self.initmap[inits] = np.arange(inits.size)
        self.w_init = np.zeros((inits.size, self.N))
        for j, t in enumerate(inits):
            a = self.view.available_at(int(t))
            if a.any():
                self.w_init[j, a] = 1.0 / a.sum()
        # the float32 observation, kept between steps: row features, weights, log NAV, profile one-hot
        self.f = observation_layout(N)["weights"].start
        self.obs_buf = np.zeros((B, self.f + N + 1 + self.profile_vec.size), np.float32)
        self.obs_buf[:, self.f + N + 1 :] = self.profile_vec
        # the arguments of _batch_step (the state arrays are updated in place, never replaced)
        self._args = (self.ops, self.action_mode == "logits", 0, self.z, self.target, self.bad, self.rew, self.term,
                      self.w, self.fst, self.ist, self.dec, self.avail_table, self.feat_table, self.rowmap, self.g0,
                      self.obs_buf, self.par)

    def begin_episode(self, i: int) -> None:
        """Draw env ``i``'s next episode: equal weight at its initial row; the next :meth:`run` advances
        it to its first decision (``ops[i] = _RESET``)."""
        spec = self.sampler.sample(self.rngs[i]) if self.sampler else self.fixed
        L = spec.decision_rows.size
        self.dec[i, :L] = spec.decision_rows
        self.ist[i, :4] = 0, spec.init_row, L, spec.last_row
        self.w[i] = self.w_init[self.initmap[spec.init_row]]
        self.fst[i] = self.nav0, self.nav0, 0.0, 0.0, 0.0
        self.cut[i] = spec.truncated
        self.ops[i] = _RESET

    def step(self, actions: Any) -> int:
        """Step every env (none pending a reset) with ``actions`` (B, N); returns the number that terminated
        (rewards in ``rew``, terminations in ``term``, observations in ``obs_buf``)."""
        a = as_actions(actions)
        if a.shape != (self.B, self.N):
            raise ValueError(f"actions must have shape ({self.B}, {self.N}), got {a.shape}")
        self.check(a)
        return self.run(a)

    def reset_envs(self, idx: Sequence[int]) -> None:
        """Start the next episode of envs ``idx`` now (the other envs are left as they are)."""
        self.ops[:] = _IDLE
        for i in idx:
            self.begin_episode(int(i))
        self.run(None)
        self.ops[:] = _STEP

    def check(self, actions: np.ndarray) -> None:
        """Raise ValueError for a non-finite logit action of a stepping env (before any state changes)."""
        if self.action_mode == "logits" and _logit_shift(actions, self.ops, self.avail_table, self.ist, self.z,
                                                          LOGIT_SCALE):
            raise ValueError("logit action contains NaN or inf")

    def run(self, actions: np.ndarray | None) -> int:
        """Step the ``_STEP`` envs with ``actions`` (B, N) float32 or float64, C order (after :meth:`check`)
        and start the ``_RESET`` ones; rewards and terminations in ``rew`` and ``term``. Returns the number
        of envs that terminated."""
        if self.action_mode == "logits":
            if actions is not None:
                np.exp(self.z, out=self.z)  # z held the shifted logits of the stepping envs (check)
            args = self._args  # src = z
        else:
            args = self._args[:3] + (self.z if actions is None else actions,) + self._args[4:]
        n_term = _batch_step(*args)
        if n_term < 0:  # an invalid target: the S3 fallback (§11.6), then the step
            bad = self.bad & (self.ops == _STEP)
            self.target[bad] = fallback_weights(self.w[bad], self.avail_table[self.ist[bad, _ROW]])
            n_term = _batch_step(*args[:2], 1, *args[3:])
        return n_term

    def obs(self) -> np.ndarray:
        return self.obs_buf.copy()


class PortBenchVectorEnv(VectorEnv):
    """Batched allocation-mode PortBench: ``num_envs`` episodes stepped together (compiled kernels).

    The ``vector_entry_point`` of the PortBench ids: ``gym.make_vec("PortBench-Balanced-v0", num_envs=8,
    vectorization_mode="vector_entry_point")``. Spaces are those of :class:`AllocationWrapper`
    (float32 Box); no S1–S5 scoring (the classical-baseline mode, §4.6), so rewards are
    ``log_return`` (default) or ``risk_adjusted``. Each sub-env equals
    ``AllocationWrapper(gym.make(id, scoring=False, reward="log_return"), reward=...)`` (tested
    observations bit for bit, rewards to 1e-12), and ``train_windows`` makes every sub-env a :class:`RandomPeriod` episode stream
    seeded with ``seed + i`` (an episode cut at ``episode_len`` inside its window ends ``truncated``, one
    that reaches its window's end ``terminated``). Autoreset: next-step (Gymnasium's default).
    ``info`` in Gymnasium's vector convention (``info[key]`` over the envs, ``info["_" + key]`` the mask of
    the envs that set it): ``nav``, ``turnover`` and, at episode ends, ``episode`` ``{r, l, t}`` as
    :class:`gymnasium.wrappers.vector.RecordEpisodeStatistics` records it (:meth:`_info`).

    Parameters
    ----------
    num_envs : number of sub-envs.
    profile, period, data, config : as :class:`PortBenchEnv`.
    reward : "log_return" | "risk_adjusted". action_mode : "logits" | "weights".
    train_windows : None (every sub-env runs ``period``) or a list of ``(start, end)``; ``True`` =
        :func:`train_windows` ().
    freq, episode_len : training episodes (with ``train_windows``).
    risk_penalty : κ of ``risk_adjusted``.
    blind : blind mode (docs/blind.md; the module docstring of :mod:`~quantgym.envs.portbench.allocation`):
        the macro slot holds window z-scores instead of levels; the other features carry no level. Scores
        are those of named mode; data without an asset class per ticker is refused in one line.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, profile: str = "balanced", period: Any = "normal_2024",
                 reward: str = "log_return", action_mode: str = "logits",
                 train_windows: Sequence[tuple[str, str]] | bool | None = None, freq: str = "weekly",
                 episode_len: int = 26, risk_penalty: float = 1.0, data: Any = None, config: Any = None,
                 render_mode: str | None = None, blind: bool = False, **ignored: Any):
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
        wins = training.train_windows() if train_windows is True else train_windows
        self.core = BatchCore(num_envs, profile, period, reward, action_mode, wins, freq, episode_len,
                               risk_penalty, data, config, blind=blind)
        self.blind = self.core.blind
        n = self.core.N
        self.num_envs = int(num_envs)
        lo, hi = observation_bounds(n)
        self.single_observation_space = spaces.Box(lo, hi, dtype=np.float32)
        self.single_action_space = (spaces.Box(-1.0, 1.0, (n,), np.float32) if action_mode == "logits"
                                    else spaces.Box(0.0, 1.0, (n,), np.float32))
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._autoreset = np.zeros(self.num_envs, bool)  # sub-envs that start a new episode at the next step
        self._n_reset = 0
        self._all = np.arange(self.num_envs)
        self._ep_start = np.zeros(self.num_envs)  # perf_counter at each env's episode start (info["episode"]["t"])
        self._every = np.ones(self.num_envs, bool)  # the all-envs mask, copied into info

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"expected {self.num_envs} seeds, got {len(seeds)}")
            self.core.rngs = [np.random.default_rng(s) for s in seeds]
        core = self.core
        core.reset_envs(range(self.num_envs))
        self._autoreset[:] = False
        self._n_reset = 0
        self._ep_start[:] = time.perf_counter()
        return core.obs(), {"nav": core.fst[:, _NAV].copy(), "_nav": self._every.copy()}

    def step(self, actions):
        core = self.core
        a = as_actions(actions)
        if a.shape != (self.num_envs, core.N):
            raise ValueError(f"actions must have shape ({self.num_envs}, {core.N}), got {a.shape}")
        # next-step autoreset: a sub-env that terminated last step starts its next episode now (its action
        # is ignored; reward 0, not terminated)
        if self._n_reset:
            resets = np.flatnonzero(self._autoreset)
            core.ops[resets] = _IDLE  # neither checked nor stepped
            core.check(a)
            for i in resets:
                core.begin_episode(int(i))
            stepped = ~self._autoreset
            self._ep_start[resets] = time.perf_counter()
        else:
            core.check(a)
            stepped = self._every.copy()
        self._n_reset = n = core.run(a)
        info = self._info(stepped, n)
        term = core.term.copy()
        if n:
            self._autoreset = term.copy()
        # an episode cut at episode_len inside its window is a time limit: truncated, not terminated
        trunc = term & core.cut
        return core.obs(), core.rew.copy(), term & ~trunc, trunc, info

    def _info(self, stepped: np.ndarray, n_done: int) -> dict[str, Any]:
        """The step's info in Gymnasium's vector convention (``info[key]`` an array over the envs, ``info["_" +
        key]`` the mask of the envs that set it): ``nav`` (every env), ``turnover`` ``τ = Σ|Δw|`` of the §6.3
        trade (the envs that stepped, not those starting their next episode), and at episode ends ``episode``
        ``{"r": return, "l": length, "t": seconds}`` as :class:`gymnasium.wrappers.vector.RecordEpisodeStatistics`
        records it (``_episode``: the envs whose episode ended, terminated or truncated)."""
        core = self.core  # the kernel keeps the reward sum (fst _RET) and the decisions taken (ist _K)
        info = {"nav": core.fst[:, _NAV].copy(), "_nav": self._every.copy(),
                "turnover": core.fst[:, _TAU].copy(), "_turnover": stepped}
        if n_done:
            done = core.term.copy()
            seconds = np.round(time.perf_counter() - self._ep_start, 6)
            info["episode"] = {"r": np.where(done, core.fst[:, _RET], 0.0), "l": np.where(done, core.ist[:, _K], 0),
                               "t": np.where(done, seconds, 0.0)}
            info["_episode"] = done
        return info


def make_portbench_vector_env(num_envs: int = 1, **kwargs: Any) -> PortBenchVectorEnv:
    """``vector_entry_point`` of the PortBench ids (see :class:`PortBenchVectorEnv`)."""
    return PortBenchVectorEnv(num_envs=num_envs, **kwargs)


__all__ = ["PortBenchVectorEnv", "make_portbench_vector_env"]
