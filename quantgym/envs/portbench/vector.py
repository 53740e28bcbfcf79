"""Batched allocation-mode PortBench: :class:`PortBenchVectorEnv`, the ``vector_entry_point`` of the PortBench ids.

``num_envs`` allocation-mode episodes stepped together (no S1–S5 scoring). Spaces, target mapping and
rewards are those of :class:`~quantgym.envs.portbench.allocation.AllocationWrapper` (module docstring
there); the trade is the batch rule of :func:`quantgym.envs.portbench.execution.execute_trade` and the
day loop that of the simulator (``advance_to``), written per env in the compiled kernel
:func:`_batch_step` (:mod:`quantgym.jit`) in numpy's floating-point order, so every value
equals the numpy form's (``tests/rl/test_vector_kernel.py``); training episodes come from
:mod:`quantgym.envs.portbench.training`.

Longer than 500 lines as one job, the batched allocation step: the compiled kernels, :class:`BatchCore` that holds
their state and :class:`PortBenchVectorEnv` that drives it share one state layout (the column and parameter
constants), so the kernel and the Python around it change together.
"""

from __future__ import annotations

import math
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
from quantgym.jit import njit, np_sum, prefetch

# --------------------------------------------------------------------------------------- kernels
#: per-env operation of a batched call (``BatchCore.ops``)
_IDLE, _STEP, _RESET = 0, 1, 2
#: per-env outcome of the targets phase (``BatchCore.flag``): a target, an invalid one (the S3 fallback), or a
#: softmax whose rounding the fast ``exp`` cannot decide (numpy's ``exp`` decides it: :meth:`BatchCore.run`)
_OK, _BAD, _EXACT = 0, 1, 2
#: columns of the integer state ``BatchCore.ist``: decision index k, current row t, decisions in the episode,
#: the episode's last row, and the row of the current decision in the dense tables (features, availability)
_K, _T, _NDEC, _LAST, _ROW = range(5)
#: columns of the float state ``BatchCore.fst``: NAV, running peak of the decision-date NAV, log drawdown, the
#: turnover ``τ`` of the env's last step (0 after a reset) and the episode's reward sum
_NAV, _PEAK, _DD, _TAU, _RET = range(5)
_FST_WIDTH = 5
#: entries of the parameter vector ``BatchCore.par`` (passed in: a global would be frozen into numba's cache)
_RATE, _MIN_TRADE, _NAV0, _KAPPA, _RISK, _SCALE, _EP_LEN, _INIT = range(8)

#: the fast ``exp`` of the softmax (:func:`_batch_step`): ``exp(z) = 2^k·p(r)``, ``k = rint(z/ln 2)``,
#: ``r = z − k·ln 2`` (ln 2 in fdlibm's two parts, so ``k·hi`` and ``z − k·hi`` are exact; ``|r| ≤ ln 2/2``),
#: ``p`` the degree-13 Taylor polynomial of ``exp`` (truncation below 1e−17) by Estrin's scheme, ``2^k`` built
#: in the exponent bits (``k`` read from ``k + 1.5·2^52``), for ``z ≥ _EXP_MIN`` (below: ``_EXACT``): relative
#: error a few ulp (at most 2 against numpy's ``exp`` on 4·10^6 arguments in [−700, 0]), vectorised by LLVM
#: (numba's ``exp`` is libm's, one call a value, about as slow as numpy's)
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.4426950408889634
_EXP_C = tuple(1.0 / math.factorial(j) for j in range(14))
_MAGIC = 6755399441055744.0  # 1.5·2^52: the low bits of k + _MAGIC are k
_MAGIC_BITS = int(np.float64(_MAGIC).view(np.int64))
_EXP_MIN = -700.0
#: a rounded softmax weight ``rint(y)/10^4`` is decided by the fast ``exp`` when ``y`` lies more than ``_GUARD``
#: from a rounding tie ``k + 1/2``: the kernel's ``y = x·(10^4/Σx)`` (``x`` the fast ``exp`` of ``v − scale``) and
#: the numpy form's ``y = 10^4·(e/Σe)/Σ(e/Σe)`` (``e`` numpy's ``exp`` of ``v − max v``: every term scaled by one
#: factor, which the normalisation removes) differ by a few ulp of ``exp`` and of the pairwise sums of positive
#: terms, under 1e−12 relative, so under 1e−8 for ``y ≤ 10^4``, and both round ``y`` to the same integer; a
#: softmax with a ``y`` closer to a tie (about 2e−7 of the weights) takes numpy's ``exp`` (``_EXACT``)
_GUARD = 1e-7


@njit(error_model="numpy")
def _non_finite(a, ops):  # pragma: no cover - compiled (QUANTGYM_JIT=0 runs it)
    """True if a stepping env (``ops == _STEP``) has a non-finite action in ``a`` (B, N)."""
    B, N = a.shape
    for i in range(B):
        if ops[i] != _STEP:
            continue
        bad = 0
        for n in range(N):
            bad += not np.isfinite(a[i, n])
        if bad:
            return True
    return False


@njit(error_model="numpy")
def _logit_shift(a, ops, avail_table, ist, z, scale):  # pragma: no cover - compiled (QUANTGYM_JIT=0 runs it)
    """Shifted logits of the stepping envs (``ops == _STEP``), written into ``z`` (B, N) float64:
    ``scale·clip(a, −1, 1) − max_A`` on the available set ``A`` and −inf off it (``max_A`` = 0 if ``A`` is
    empty), i.e. :func:`~quantgym.envs.portbench.allocation.masked_softmax` before its ``exp`` (numpy's, in
    :meth:`BatchCore.run`, for the envs whose rounding the fast ``exp`` of :func:`_batch_step` leaves open).
    Returns 1, writing nothing more, at the first non-finite action of a stepping env, else 0."""
    if _non_finite(a, ops):
        return 1
    B, N = a.shape
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
def _softmax_targets(ops, e, target, flag):  # pragma: no cover - compiled (QUANTGYM_JIT=0 runs it)
    """The rounded softmax targets of the envs with ``ops == _STEP`` and ``flag == _EXACT`` from ``e`` (B, N) =
    numpy's ``exp`` of :func:`_logit_shift`: ``e/Σe``, then normalised and rounded to 4 decimals as in
    :func:`_batch_step`; ``flag`` becomes ``_OK`` or ``_BAD`` (nothing available)."""
    B, N = e.shape
    for i in range(B):
        if ops[i] != _STEP or flag[i] != _EXACT:
            continue
        s = np_sum(e[i], 0, N)
        for n in range(N):
            target[i, n] = e[i, n] / s if s > 0 else 0.0
        tot = np_sum(target[i], 0, N)
        if tot > 0:
            flag[i] = _OK
            for n in range(N):
                target[i, n] = np.rint(target[i, n] / tot * 10000.0) / 10000.0  # np.round(x, 4)
        else:
            flag[i] = _BAD


@njit(error_model="numpy")
def _batch_step(ops, logits, given, a, target, flag, rew, term, w, fst, ist, dec, avail_table, feat_table,
                rowmap, g0, tail, draw, cut, ep_rows, ep_win, w_init, initmap, out, par):  # pragma: no cover - compiled
    """One batched step of every env with ``ops[i]`` = ``_STEP`` (trade, advance, reward) or ``_RESET``
    (a new episode, drawn by :meth:`BatchCore.begin_episode`: set up, then advanced to its first decision),
    and the observation of every env.

    The arithmetic of the simulator and :class:`AllocationWrapper` per env, in numpy's floating-point
    order: every sum over assets is numpy's pairwise summation of a contiguous row (:func:`quantgym.jit.np_sum`), so
    weights, NAV and observations are bit-identical to the numpy form of these formulas.

    Phase 1 (``given == 0``): the targets of the stepping envs into ``target`` (B, N) from the actions ``a``
    (B, N) float32 or float64: logits (:func:`~quantgym.envs.portbench.allocation.masked_softmax` with the
    fast ``exp`` above into a scratch row, then the env's normalisation) or weights (zero off the
    available set); 4-decimal rounding (§4.3). Returns −2 at a non-finite logit (nothing written but
    scratch). An invalid target (weights: non-finite, outside [0, 1] or zero total on the available set;
    logits: nothing available) sets ``flag[i] = _BAD``, a softmax with a weight within ``_GUARD`` of a
    rounding boundary ``flag[i] = _EXACT``; then the call returns −1 before changing any state, and the
    caller writes those targets (numpy's ``exp``, :func:`_softmax_targets`; the S3 fallback) and calls again
    with ``given == 1`` (phase 1 skipped). Phase 2: the §6.3 trade (``τ`` over ``|Δw| ≥ min_trade``,
    ``K = rate·τ·NAV``), the §6.2 day loop to the next decision row (or the episode's last row: ``term``),
    the reward and the observation: ``out`` (B, F + N + 1 + P) float32 is every env's current observation,
    the feature row of its decision followed by ``tail`` (B, N + 1 + P) float32, the clipped weights and
    ``log(NAV/NAV_0)`` at that decision (written here) and the profile one-hot; a terminated env keeps its
    last observation, like the single env. Returns the number of envs that terminated.

    A new episode (:class:`~quantgym.envs.portbench.training.EpisodeSampler`'s ``sample``): ``draw[i]`` is the
    start drawn among all valid starts, ``ep_win`` (W, 4) int64 the windows (offset of their decision rows in
    ``ep_rows``, number of rows, last row, cumulative count of starts); the episode takes up to ``episode_len``
    rows from the start, ends the day before the next row (``cut[i]``, truncated) or at the window's last row;
    its initial row is the day before its first decision (``par[_INIT]`` ≥ 0: that row, a fixed period),
    where it holds ``w_init[initmap[row]]`` (equal weight over the available set) at ``NAV_0``.
    """
    B, N = w.shape
    F = feat_table.shape[1]
    rate, min_trade, nav0, kappa, risk = par[_RATE], par[_MIN_TRADE], par[_NAV0], par[_KAPPA], par[_RISK]
    scale, ep_len, init_fixed = par[_SCALE], int(par[_EP_LEN]), int(par[_INIT])
    tmp = np.empty(N)  # scratch row: the softmax's exp, then |Δw| of the trade, then the day's drifted weights

    if given == 0:  # phase 1: targets
        anyflag = False
        for i in range(B):
            if ops[i] != _STEP:
                continue
            row = ist[i, _ROW]
            valid = True
            far = 0  # softmax values the fast exp cannot decide
            if logits:
                x = tmp
                nonfin = 0
                c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13 = _EXP_C
                for n in range(N):
                    v = np.float64(a[i, n])
                    nonfin += not np.isfinite(v)
                    z = scale * min(max(v, -1.0), 1.0) - scale  # the fast exp below, inline (vectorised)
                    far += z < _EXP_MIN
                    kf = np.rint(z * _INV_LN2)
                    r = (z - kf * _LN2_HI) - kf * _LN2_LO
                    r2 = r * r
                    r4 = r2 * r2
                    p = (((c0 + c1 * r) + r2 * (c2 + c3 * r)) + r4 * ((c4 + c5 * r) + r2 * (c6 + c7 * r))
                         + (r4 * r4) * (((c8 + c9 * r) + r2 * (c10 + c11 * r)) + r4 * (c12 + c13 * r)))
                    ki = np.float64(kf + _MAGIC).view(np.int64) - _MAGIC_BITS
                    p = p * np.int64((ki + 1023) << 52).view(np.float64)
                    x[n] = p if avail_table[row, n] else 0.0
                if nonfin:
                    return -2
                s = np_sum(x, 0, N)
                if not s > 0:  # nothing available
                    flag[i] = _BAD
                    anyflag = True
                    continue
                # y = 10^4·x/Σx: numpy's y = 10^4·(e/Σe)/Σ(e/Σe) within _GUARD (module constants)
                c = 10000.0 / s
                for n in range(N):
                    y = x[n] * c
                    k = np.rint(y)
                    far += abs(y - k) > 0.5 - _GUARD
                    target[i, n] = k / 10000.0
            else:
                for n in range(N):
                    v = a[i, n] if avail_table[row, n] else 0.0
                    if not (v >= 0.0 and v <= 1.0):  # NaN fails the test
                        valid = False
                    target[i, n] = v
                tot = np_sum(target[i], 0, N)
                if not (valid and tot > 0):
                    flag[i] = _BAD
                    anyflag = True
                    continue
                for n in range(N):
                    target[i, n] = np.rint(target[i, n] / tot * 10000.0) / 10000.0  # np.round(x, 4)
            if logits and far:
                flag[i] = _EXACT
                anyflag = True
            else:
                flag[i] = _OK
        if anyflag:
            return -1
    n_term = 0
    for i in range(B):
        op = ops[i]
        # the table rows the next env reads (its day loop's first day, the features of its next decision: random
        # rows of tables larger than L2) are fetched while this env computes (64-byte lines: 8 float64, 16 float32)
        i1 = i + 1
        if i1 < B and ops[i1] == _STEP:
            t1 = ist[i1, _T] + 1
            if t1 < g0.shape[0]:
                for c in range(0, N + 7, 8):
                    prefetch(g0, t1 * N + min(c, N - 1))
            k1 = ist[i1, _K] + 1
            if k1 < ist[i1, _NDEC]:
                r1 = rowmap[dec[i1, k1]]
                if r1 >= 0:
                    for c in range(0, F + 15, 16):
                        prefetch(feat_table, r1 * F + min(c, F - 1))
        if op == _RESET:  # the new episode (EpisodeSampler.sample)
            j = draw[i]
            wi = 0
            while j >= ep_win[wi, 3]:
                wi += 1
            off, cnt = ep_win[wi, 0], ep_win[wi, 1]
            i0 = j - (ep_win[wi - 1, 3] if wi else 0)
            L = min(ep_len, cnt - i0)
            for k in range(L):
                dec[i, k] = ep_rows[off + i0 + k]
            c = i0 + ep_len < cnt
            cut[i] = c
            init = ep_rows[off + i0] - 1 if init_fixed < 0 else init_fixed
            ist[i, _K], ist[i, _T], ist[i, _NDEC] = 0, init, L
            ist[i, _LAST] = ep_rows[off + i0 + ep_len] - 1 if c else ep_win[wi, 2]
            wrow = initmap[init]
            for n in range(N):
                w[i, n] = w_init[wrow, n]
            fst[i, _NAV] = nav0
        if op != _IDLE:
            nav_pre = fst[i, _NAV]
            nav = nav_pre
            if op == _STEP:  # the trade (execution.execute_trade, batch rule)
                for n in range(N):
                    d = abs(target[i, n] - w[i, n])
                    tmp[n] = d if d >= min_trade else 0.0
                tau = np_sum(tmp, 0, N)
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
                    tmp[n] = w[i, n] * g0[r, n]
                g = np_sum(tmp, 0, N)
                nav *= g
                if g > 0:
                    for n in range(N):
                        w[i, n] = tmp[n] / g
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
            if not done:  # the observation at the new decision
                ist[i, _ROW] = rowmap[dec[i, ist[i, _K]]]
                for n in range(N):
                    tail[i, n] = min(max(w[i, n], 0.0), 1.0)
                rel = min(max(nav / nav0, 0.0), 1e3)
                tail[i, N] = min(max(np.log(rel), -10.0), 10.0) if rel > 0 else -10.0
        row = ist[i, _ROW]
        for c in range(F):
            out[i, c] = feat_table[row, c]
        for c in range(tail.shape[1]):
            out[i, F + c] = tail[i, c]
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
    One step is one compiled call (:func:`_batch_step`; one more after targets it leaves to the caller:
    an S3 fallback, or numpy's ``exp`` where the fast one cannot decide a rounding) on preallocated
    state: ``ist`` (B, 5) int64 and ``fst`` (B, 5) float64 (the column constants above), weights ``w``
    (B, N), the float32 ``tail`` (B, N + 4) (the weights, log NAV and profile of each env's current
    observation), updated in place; the observation itself is written into a new array (:meth:`obs`).
    :meth:`step` steps every env, :meth:`reset_envs` starts new episodes (SB3's same-step autoreset);
    :class:`PortBenchVectorEnv` interleaves :meth:`check`, :meth:`begin_episode` (a start drawn from the
    env's generator) and :meth:`run` (next-step autoreset: the episode is set up in the same kernel call).
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
        self.lmax = episode_len if self.sampler else self.fixed.decision_rows.size
        # the episode starts (the kernel sets a new episode up from a start drawn here: begin_episode)
        wins = self.sampler.starts if self.sampler else [(self.fixed.decision_rows, self.fixed.last_row, 1)]
        self.ep_rows = np.concatenate([r for r, _, _ in wins]).astype(np.int64)
        sizes = [r.size for r, _, _ in wins]
        self.ep_win = np.array([[o, s, last, c] for o, s, (_, last, _), c in
                                zip(np.cumsum([0] + sizes[:-1]), sizes, wins, np.cumsum([k for _, _, k in wins]))],
                               np.int64)
        self.n_starts = int(self.ep_win[-1, 3])
        self.draw = np.zeros(num_envs, np.int64)
        self.par = np.array([self.config.costs.rate, self.config.costs.min_trade, self.nav0, self.risk_penalty,
                             float(reward == "risk_adjusted"), LOGIT_SCALE, self.lmax,
                             -1 if self.sampler else self.fixed.init_row], np.float64)
        B, N = self.B, self.N
        self.dec = np.zeros((B, self.lmax), np.int64)
        self.ist = np.zeros((B, 5), np.int64)
        self.fst = np.zeros((B, _FST_WIDTH))
        self.w = np.zeros((B, N))
        self.ops = np.zeros(B, np.int8)
        self.e = np.zeros((B, N))  # scratch of _targets: shifted logits, then their exp
        self.target = np.zeros((B, N))
        self.flag = np.zeros(B, np.int8)  # _OK, _BAD, _EXACT per env after the targets phase
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
        # the float32 observation: the row features (feat_table) of each env's current decision, then ``tail``:
        # weights and log NAV at that decision (kept between steps), profile one-hot
        self.f = observation_layout(N)["weights"].start
        self.obs_shape = (B, self.f + N + 1 + self.profile_vec.size)
        self.tail = np.zeros((B, N + 1 + self.profile_vec.size), np.float32)
        self.tail[:, N + 1 :] = self.profile_vec
        self.last_obs = np.zeros(self.obs_shape, np.float32)  # the observation of the last run
        self._handed = False  # last_obs was returned by obs()
        # the arguments of _batch_step after the actions (the state arrays are updated in place, never replaced)
        self._args = (self.target, self.flag, self.rew, self.term, self.w, self.fst, self.ist, self.dec,
                      self.avail_table, self.feat_table, self.rowmap, self.g0, self.tail, self.draw, self.cut,
                      self.ep_rows, self.ep_win, self.w_init, self.initmap)
        self._logits = self.action_mode == "logits"
        self._step = None  # _batch_step's dispatcher (run)

    def begin_episode(self, i: int) -> None:
        """Draw env ``i``'s next episode (:class:`EpisodeSampler`: one ``integers`` of its generator); the next
        :meth:`run` sets it up (equal weight at its initial row) and advances it to its first decision
        (``ops[i] = _RESET``)."""
        self.draw[i] = self.rngs[i].integers(self.n_starts) if self.sampler else 0
        self.ops[i] = _RESET

    def step(self, actions: Any) -> int:
        """Step every env (none pending a reset) with ``actions`` (B, N); returns the number that terminated
        (rewards in ``rew``, terminations in ``term``, observations from :meth:`obs`). ValueError, before any
        state changes, for a non-finite logit action."""
        a = as_actions(actions)
        if a.shape != (self.B, self.N):
            raise ValueError(f"actions must have shape ({self.B}, {self.N}), got {a.shape}")
        return self.run(a)

    def reset_envs(self, idx: Sequence[int]) -> None:
        """Start the next episode of envs ``idx`` now (the other envs are left as they are)."""
        self.ops[:] = _IDLE
        for i in idx:
            self.begin_episode(int(i))
        self.run(None)
        self.ops[:] = _STEP

    def check(self, actions: np.ndarray) -> None:
        """Raise ValueError for a non-finite logit action of a stepping env (:meth:`run` checks it too;
        this is for a caller that changes state before :meth:`run`)."""
        if self._logits and _non_finite(actions, self.ops):
            raise ValueError("logit action contains NaN or inf")

    def run(self, actions: np.ndarray | None, out: np.ndarray | None = None) -> int:
        """Step the ``_STEP`` envs with ``actions`` (B, N) float32 or float64, C order, and start the ``_RESET``
        ones; rewards and terminations in ``rew`` and ``term``, every env's observation in ``out`` (a new
        ``obs_shape`` float32 array if None; :meth:`obs`). Returns the number of envs that terminated.
        ValueError, before any state changes, for a non-finite logit action of a stepping env."""
        if out is None:
            out = np.empty(self.obs_shape, np.float32)
        a = self.e if actions is None else actions  # no env steps without actions
        step = self._step or _batch_step._quantgym_dispatcher()  # numba's dispatcher: one Python call less
        self._step = step
        n_term = step(self.ops, self._logits, 0, a, *self._args, out, self.par)
        if n_term < 0:
            if n_term == -2:
                raise ValueError("logit action contains NaN or inf")
            self._targets(a)
            n_term = step(self.ops, self._logits, 1, a, *self._args, out, self.par)
        self.last_obs, self._handed = out, False
        return n_term

    def _targets(self, actions: np.ndarray) -> None:
        """The targets :func:`_batch_step` left to the caller: numpy's ``exp`` for the softmaxes flagged
        ``_EXACT`` (:func:`_logit_shift`, ``np.exp``, :func:`_softmax_targets`), then the S3 fallback (§11.6)
        for the invalid ones (``_BAD``)."""
        step = self.ops == _STEP
        exact = step & (self.flag == _EXACT)
        if exact.any():
            sel = np.where(exact, _STEP, _IDLE).astype(np.int8)
            _logit_shift(actions, sel, self.avail_table, self.ist, self.e, LOGIT_SCALE)
            rows = np.flatnonzero(exact)
            self.e[rows] = np.exp(self.e[rows])
            _softmax_targets(sel, self.e, self.target, self.flag)
        bad = step & (self.flag == _BAD)
        if bad.any():
            self.target[bad] = fallback_weights(self.w[bad], self.avail_table[self.ist[bad, _ROW]])

    def obs(self) -> np.ndarray:
        """The observation of every env after the last :meth:`run` (B, 5N + 63) float32, a new array."""
        if self._handed:
            return self.last_obs.copy()
        self._handed = True
        return self.last_obs


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
    the envs that set it): ``nav``, ``turnover`` and, at episode ends, ``episode_stats`` ``{r, l, t}``, the
    statistics :class:`gymnasium.wrappers.vector.RecordEpisodeStatistics` records under ``episode`` (a
    different key, so that wrapper can be applied: it refuses a key already there) (:meth:`_info`).

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
        self._ep_start = np.zeros(self.num_envs)  # perf_counter at each env's episode start (episode_stats "t")
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
            stepped = self._every.copy()
        obs = np.empty(core.obs_shape, np.float32)
        self._n_reset = n = core.run(a, obs)  # checks the logits before any state changes
        info = self._info(stepped, n)
        if not n:
            return obs, core.rew.copy(), np.zeros(self.num_envs, bool), np.zeros(self.num_envs, bool), info
        term = self._autoreset = core.term.copy()
        # an episode cut at episode_len inside its window is a time limit: truncated, not terminated
        trunc = term & core.cut
        return obs, core.rew.copy(), term ^ trunc, trunc, info

    def _info(self, stepped: np.ndarray, n_done: int) -> dict[str, Any]:
        """The step's info in Gymnasium's vector convention (``info[key]`` an array over the envs, ``info["_" +
        key]`` the mask of the envs that set it): ``nav`` (every env), ``turnover`` ``τ = Σ|Δw|`` of the §6.3
        trade (the envs that stepped, not those starting their next episode), and at episode ends
        ``episode_stats`` ``{"r": return, "l": length, "t": seconds}`` as
        :class:`gymnasium.wrappers.vector.RecordEpisodeStatistics` records them under ``episode``
        (``_episode_stats``: the envs whose episode ended, terminated or truncated)."""
        core = self.core  # the kernel keeps the reward sum (fst _RET) and the decisions taken (ist _K)
        info = {"nav": core.fst[:, _NAV].copy(), "_nav": self._every.copy(),
                "turnover": core.fst[:, _TAU].copy(), "_turnover": stepped}
        if n_done:
            done = core.term.copy()
            seconds = np.round(time.perf_counter() - self._ep_start, 6)
            info["episode_stats"] = {"r": np.where(done, core.fst[:, _RET], 0.0),
                                     "l": np.where(done, core.ist[:, _K], 0), "t": np.where(done, seconds, 0.0)}
            info["_episode_stats"] = done
        return info


def make_portbench_vector_env(num_envs: int = 1, **kwargs: Any) -> PortBenchVectorEnv:
    """``vector_entry_point`` of the PortBench ids (see :class:`PortBenchVectorEnv`)."""
    return PortBenchVectorEnv(num_envs=num_envs, **kwargs)


__all__ = ["PortBenchVectorEnv", "make_portbench_vector_env"]
