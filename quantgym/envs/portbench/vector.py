"""Batched allocation-mode PortBench: :class:`PortBenchVectorEnv`, the ``vector_entry_point`` of the PortBench ids.

``num_envs`` allocation-mode episodes stepped together with numpy (no S1–S5 scoring). Spaces, target
mapping and rewards are those of :class:`~quantgym.envs.portbench.allocation.AllocationWrapper`
(module docstring there); the trade is :func:`quantgym.envs.portbench.execution.execute_trade`, the
one the simulator uses; training episodes come from :mod:`quantgym.envs.portbench.training`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from quantgym.envs.portbench.allocation import (
    ACTION_MODES, LOGIT_SCALE, _bounds, masked_softmax, observation_layout, profile_onehot, row_features,
)
from quantgym.envs.portbench.execution import execute_trade, fallback_weights
from quantgym.envs.portbench.market import MarketView
from quantgym.envs.portbench import training
from quantgym.envs.portbench.training import EpisodeSampler, EpisodeSpec

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
        self.g0 = 1.0 + self.r0  # gross daily returns (the day loop's 1 + r, computed once)
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
        self.avail = np.zeros((self.B, self.N), bool)
        self.rngs = [np.random.default_rng() for _ in range(self.B)]
        # dense tables of every decision row an episode can visit (features, availability), built once
        rows = (np.unique(np.concatenate([r for r, _, _ in self.sampler.starts])) if self.sampler
                else np.unique(self.fixed.decision_rows))
        self.rowmap = np.full(len(self.view.dates), -1, np.int64)
        self.rowmap[rows] = np.arange(rows.size)
        # the observation is float32: the features are cast once here (the same values as a cast per step)
        self.feat_table = np.stack([row_features(self.view, int(t)) for t in rows]).astype(np.float32)
        self.avail_table = np.stack([self.view._row_parts(int(t))["available"] for t in rows])
        self.any_avail_table = self.avail_table.any(axis=1)
        self.all_rows = np.arange(self.B)
        # the float32 observation, kept between steps: row features, weights, log NAV, profile one-hot
        self.f = observation_layout(self.N)["weights"].start
        self.obs_buf = np.zeros((self.B, self.f + self.N + 1 + self.profile_vec.size), np.float32)
        self.obs_buf[:, self.f + self.N + 1 :] = self.profile_vec

    def _load_rows(self, idx: np.ndarray) -> None:
        """Availability and observation rows of envs ``idx`` at their current decision: the row features,
        the weights and log NAV at the decision (an env past its last decision keeps its last observation,
        like the single env)."""
        out, f, n = self.obs_buf, self.f, self.N
        if idx.size == self.B:  # every env (speed only: whole-array gathers, no scatter)
            j = self.rowmap[self.dec[self.all_rows, self.k]]
            self.avail = self.avail_table[j]
            self.all_avail = bool(self.any_avail_table[j].all())
            out[:, :f] = self.feat_table[j]
            out[:, f : f + n] = self.w.clip(0.0, 1.0)
            out[:, f + n] = self._log_nav(self.nav)
            return
        j = self.rowmap[self.dec[idx, self.k[idx]]]
        self.avail[idx] = self.avail_table[j]
        self.all_avail = bool(self.avail.any(axis=1).all())
        out[idx, :f] = self.feat_table[j]
        out[idx, f : f + n] = self.w[idx].clip(0.0, 1.0)
        out[idx, f + n] = self._log_nav(self.nav[idx])

    def _log_nav(self, nav: np.ndarray) -> np.ndarray:
        """``log(NAV / NAV_0)`` clipped to [-10, 10] (-10 for a NAV of 0) of the observation."""
        rel = np.clip(nav / self.nav0, 0.0, 1e3)
        if rel.min() > 0:  # fast path of the general rule below
            return np.log(rel).clip(-10.0, 10.0)
        with np.errstate(divide="ignore"):
            return np.where(rel > 0, np.clip(np.log(rel), -10.0, 10.0), -10.0)

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
            growth = self.w * self.g0[t + 1]
            g = growth.sum(axis=1)
            self.nav *= g
            if g.min() > 0:
                self.w = growth / g[:, None]
            else:
                ok = g > 0
                self.w[ok] = growth[ok] / g[ok, None]
            self.t = t + 1
            return
        ids = np.arange(self.B)[idx]
        for j in range(1, steps + 1):
            act = gap >= j
            ii = ids[act]
            growth = self.w[ii] * self.g0[t[act] + j]
            g = growth.sum(axis=1)
            self.nav[ii] *= g
            ok = g > 0
            self.w[ii[ok]] = growth[ok] / g[ok, None]
        self.t[idx] = np.maximum(t, target)

    def obs(self) -> np.ndarray:
        return self.obs_buf.copy()

    def step(self, actions: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Trade and advance envs ``idx``; returns (reward, terminated) for them."""
        every = idx.size == self.B
        sel = slice(None) if every else idx  # views instead of copies when every env steps
        a = np.asarray(actions, dtype=np.float64)[sel]
        avail = self.avail[sel]
        # every env: self.w is replaced below, never written in place, so it needs no copy
        w0 = self.w if every else self.w[sel].copy()
        if self.action_mode == "logits":
            if not np.isfinite(a).all():
                raise ValueError("logit action contains NaN or inf")
            if every and self.all_avail:  # masked_softmax when every row has an available asset (same values)
                z = np.where(avail, LOGIT_SCALE * a.clip(-1.0, 1.0), -np.inf)
                e = np.exp(z - z.max(axis=1, keepdims=True))  # exp(-inf) = 0 off the available set
                raw = e / e.sum(axis=1, keepdims=True)
            else:
                raw = masked_softmax(a, avail)
            tot = raw.sum(axis=1)
            # a softmax row has an entry 1/Σe > 0, so only the general path can give a zero total
            bad = None if every and self.all_avail else ~(tot > 0)
        else:
            # env._process_weights: invalid (NaN, out of [0, 1], zero total) -> fallback current weights
            raw = np.where(avail, a, 0.0)
            tot = raw.sum(axis=1)
            bad = ~np.isfinite(raw).all(axis=1) | (raw < 0).any(axis=1) | (raw > 1).any(axis=1) | ~(tot > 0)
        if bad is not None and bad.any():
            target = np.round(np.divide(raw, tot[:, None], out=np.zeros_like(raw), where=~bad[:, None]), 4)
            target[bad] = fallback_weights(w0[bad], avail[bad])
        else:
            target = np.round(raw / tot[:, None], 4)
        # the simulator's trade (execution.execute_trade, batched)
        nav_pre = self.nav[sel].copy()
        ex = execute_trade(w0, target, nav_pre, self.rate, self.min_trade)
        if every:
            self.nav, self.w = ex.nav, ex.weights
        else:
            self.nav[sel] = ex.nav
            self.w[sel] = ex.weights
        # advance to the next decision row or the episode's last row
        self.k[sel] += 1
        k = self.k[sel]
        term = k >= self.n_dec[sel]
        nxt = np.where(term, self.last[sel], self.dec[idx, np.minimum(k, self.lmax - 1)])
        self._advance(sel, nxt)
        nav = self.nav[sel]
        if nav.min() > 0 and nav_pre.min() > 0:  # fast path of the general rule below
            lr = np.log(nav / nav_pre)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                lr = np.where((nav > 0) & (nav_pre > 0), np.log(nav / nav_pre), 0.0)
        if self.reward_kind == "risk_adjusted":
            self.peak[sel] = np.maximum(self.peak[sel], nav)
            with np.errstate(divide="ignore", invalid="ignore"):
                dd = np.where(nav > 0, np.log(self.peak[sel] / nav), 0.0)
            lr = lr - self.risk_penalty * np.maximum(dd - self.dd[sel], 0.0)
            self.dd[sel] = dd
        if not term.any():
            self._load_rows(idx)
        elif not term.all():
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
        wins = training.train_windows() if train_windows is True else train_windows
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
        if not self._autoreset.any():  # fast path: every sub-env steps, none resets
            rew, term = self.core.step(a, self._all)
            self._autoreset = term.copy()
            return self.core.obs(), rew, term, np.zeros(self.num_envs, bool), {}
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


__all__ = ["PortBenchVectorEnv", "make_portbench_vector_env"]
