"""The PortBench action decoder: an agent's answers checked and turned into views, signals and S3 weights
(spec §4.0, §4.3, §11.4, §11.6).

:class:`ActionDecoder` checks the structure of an action (a wrong key, shape or dtype raises
:class:`~quantgym.spaces.InvalidActionError`), then decodes each answer: an invalid or refused answer gets
its fallback and a message in the :class:`DecisionLog` (the env scores that stage 0); a weight on an
unavailable asset is dropped and weights not summing to 1 are normalised, both recorded as coercions.
:meth:`ActionDecoder.fast` decodes an allocation step's three answers in one compiled pass
(:func:`check_answers`) when they need no fallback and no message (speed only: the same results).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from gymnasium import spaces

from quantgym.envs.portbench.config import WEIGHT_SUM_TOLERANCE
from quantgym.envs.portbench.execution import fallback_weights, trade_into
from quantgym.envs.portbench.records import coerce_message
from quantgym.envs.portbench.stages import HOLD
from quantgym.jit import njit, np_sum
from quantgym.spaces import InvalidActionError

STAGES = ("S1", "S2", "S3")
STATUS_OK, STATUS_REFUSED, STATUS_UNPARSEABLE = 0, 1, 2
ACTION_KEYS = ("views", "signals", "weights", "status")
_ACTION_KEYSET = frozenset(ACTION_KEYS)
#: the kernels' "no output" arrays (never written: size 0)
_NO_F, _NO_I = np.empty(0), np.empty(0, dtype=np.int64)


def action_space(n: int) -> spaces.Dict:
    """The action space over ``n`` assets (see :class:`~quantgym.envs.portbench.env.PortBenchEnv`)."""
    f64 = np.float64
    return spaces.Dict({
        "views": spaces.Box(-1.0, 1.0, (n,), f64),
        "signals": spaces.MultiDiscrete([3] * n),
        "weights": spaces.Box(0.0, 1.0, (n,), f64),
        "status": spaces.Discrete(3),
    })


@njit
def check_answers(views, signals, weights, available, w_out, views_out, signals_out):
    """The three answers of an allocation step checked and processed in one compiled pass (a kernel,
    :mod:`quantgym.jit`; speed only): the fast checks of :meth:`ActionDecoder.views` / ``signals`` /
    ``weights`` and, where they pass, their results with the same arithmetic (``Σw`` is numpy's
    pairwise sum, ``round(4)`` is numpy's ``rint(x·1e4)/1e4``).

    ``w_out`` (2N,) receives ``w_hat = round4(w / tot)`` in ``[:N]`` and its positive entries, in order, from
    ``N`` on; ``views_out`` / ``signals_out`` ((N,) or empty) the processed echoes. Returns
    ``(ok, tot, dropped, n_pos)``: ``ok`` = views in [-1, 1], signals in {0, 1, 2} and weights in [0, 1] (NaN
    fails; nothing is written otherwise); ``tot`` = Σ of the weights on available assets (``w_out`` is valid
    where ``tot > 0``), ``dropped`` = Σ on unavailable ones, ``n_pos`` the count of positive ``w_hat``.
    """
    n = views.shape[0]
    for i in range(n):
        if not (abs(views[i]) <= 1.0 and 0 <= signals[i] <= 2 and weights[i] >= 0.0 and weights[i] <= 1.0):
            return False, 0.0, 0.0, 0
    for i in range(n):  # the weights on A_d, then those dropped (numpy: np.where(a, w, 0), np.where(a, 0, w))
        w_out[i] = weights[i] if available[i] else 0.0
        w_out[n + i] = 0.0 if available[i] else weights[i]
    tot = np_sum(w_out, 0, n)
    dropped = np_sum(w_out, n, n)
    n_pos = 0
    if tot > 0:
        for i in range(n):
            x = np.rint((w_out[i] / tot) * 10000.0) / 10000.0
            w_out[i] = x
            if x > 0:
                w_out[n + n_pos] = x
                n_pos += 1
    for i in range(views_out.shape[0]):
        views_out[i] = views[i] if available[i] else 0.0
        signals_out[i] = signals[i] if available[i] else 1  # HOLD
    return True, tot, dropped, n_pos


@njit
def allocate_and_trade(views, signals, weights, available, hist, h, returns0, t0, m, rate, min_trade, trades, j,
                       rec, k, obs, initial_nav):
    """An allocation step without scoring in one compiled call (a kernel, :mod:`quantgym.jit`; speed only): the
    checks and S3 weights of :func:`check_answers`, the trade and day loop of
    :func:`~quantgym.envs.portbench.execution.trade_into`, and the portfolio entries of the next observation,
    with the arithmetic of the code they replace.

    ``hist``, ``h``, ``returns0``, ``t0``, ``m``, ``rate``, ``min_trade``, ``trades``, ``j``: as
    :func:`~quantgym.envs.portbench.execution.trade_into`. ``rec`` (K, N + 5): row ``k`` receives ``w_hat`` (:N),
    Σ of the weights on ``A_d``, Σ on unavailable assets, τ, cost and the NAV after the trade. ``obs`` (2N + 1,)
    receives the observation's weights clipped to [0, 1] (:N), zero views (N:2N) and NAV / ``initial_nav``
    clipped to [0, 1000].

    Returns -1 when an answer fails the checks or the weights on ``A_d`` sum to 0 (nothing traded: decode the
    answers one by one), else the number of clipped weights, plus 2**20 when the NAV was clipped.
    """
    n = views.shape[0]
    for i in range(n):
        if not (abs(views[i]) <= 1.0 and 0 <= signals[i] <= 2 and weights[i] >= 0.0 and weights[i] <= 1.0):
            return -1
    w_out = rec[k]
    buf = hist[hist.shape[0] - 1]
    for i in range(n):  # the weights on A_d, then those dropped (numpy: np.where(a, w, 0), np.where(a, 0, w))
        w_out[i] = weights[i] if available[i] else 0.0
        buf[i] = 0.0 if available[i] else weights[i]
    tot = np_sum(w_out, 0, n)
    dropped = np_sum(buf, 0, n)
    if not tot > 0:
        return -1
    for i in range(n):
        w_out[i] = np.rint((w_out[i] / tot) * 10000.0) / 10000.0
    w_out[n] = tot
    w_out[n + 1] = dropped
    tau, cost = trade_into(hist, h, w_out[:n], rate, min_trade, returns0, t0, m, trades, j)
    w_out[n + 2] = tau
    w_out[n + 3] = cost
    w_out[n + 4] = hist[h - 1, n]
    last = hist[h - 1 + m]
    moved = 0
    for i in range(n):  # observation.clip_count
        v = last[i]
        if not np.isnan(v):
            if v < 0.0:
                v = 0.0
                moved += 1
            if v > 1.0:
                v = 1.0
                moved += 1
        obs[i] = v
        obs[n + i] = 0.0
    x = last[n] / initial_nav
    if x < 0.0 or x > 1e3:
        moved += 1 << 20
    x = 0.0 if 0.0 > x else x  # min(max(x, 0.0), 1e3)
    obs[2 * n] = 1e3 if 1e3 < x else x
    return moved


class DecisionLog:
    """What one decision date's answers left: ``scores`` (stage → score), ``invalid`` (stage → message of a
    fallback), ``coerced`` (stage → message of a recorded repair), ``status`` (stage → status code)."""

    __slots__ = ("scores", "invalid", "coerced", "status")

    def __init__(self):
        self.scores: dict[str, float | None] = {}
        self.invalid: dict[str, str] = {}
        self.coerced: dict[str, str] = {}
        self.status: dict[str, int] = {}

    def flag(self, stage: str, status: int, message: str | None) -> None:
        self.status[stage] = status
        if message:
            self.invalid[stage] = message

    def coerce_note(self, dropped: float, tot: float) -> None:
        """The recorded S3 coercions (not invalid; spec §4.3, §11.4): weight on unavailable assets dropped,
        weights renormalised to sum 1."""
        msg = coerce_message(dropped, tot, WEIGHT_SUM_TOLERANCE)
        if msg is not None:
            self.coerced["S3"] = msg


def _refusal(status: int) -> str:
    return "refused" if status == STATUS_REFUSED else "unparseable answer"


class ActionDecoder:
    """Checks and decodes the actions of a PortBench env over ``tickers``.

    ``all_zero_weights(available)``: the S3 weights of an answer whose weights on ``A_d`` are all zero, or
    None for the §11.6 fallback (:meth:`~quantgym.envs.portbench.paper.mode.CleanMode.all_zero_weights`).
    """

    def __init__(self, tickers, all_zero_weights: Callable[[np.ndarray], np.ndarray | None]):
        self.tickers = tuple(tickers)
        self.n_assets = len(self.tickers)
        self.all_zero_weights = all_zero_weights

    def check(self, action: Any, needed: tuple[str, ...], stage: str) -> dict[str, Any]:
        """Structural validation (§11.4) of the keys ``needed`` at ``stage``: wrong key, shape or dtype →
        :class:`InvalidActionError` naming the field. Returns the arrays (float64, integer signals kept) and
        ``status`` (int)."""
        if not isinstance(action, dict):
            raise InvalidActionError(
                f"action must be a dict with keys {ACTION_KEYS} (views (N,), signals (N,), weights (N,), status int); "
                f"got {type(action).__name__}. Text answers go through quantgym.envs.portbench.text_protocol.TextStageAction."
            )
        if not _ACTION_KEYSET.issuperset(action):
            extra = set(action) - _ACTION_KEYSET
            raise InvalidActionError(f"unknown action key(s) {sorted(extra)}; expected keys {ACTION_KEYS}")
        out: dict[str, Any] = {}
        n = self.n_assets
        for key in needed:
            if key not in action:
                raise InvalidActionError(f"action is missing key {key!r} (expected shape ({n},)) for stage {stage}")
            arr = np.asarray(action[key])
            if arr.dtype.kind not in "fiub":
                raise InvalidActionError(f"action[{key!r}] must be numeric with shape ({n},), got dtype {arr.dtype}")
            if arr.shape != (n,):
                raise InvalidActionError(f"action[{key!r}] must have shape ({n},), got {arr.shape}")
            # never stored or written (processing makes new arrays); integer signals stay integers (same values)
            out[key] = arr if key == "signals" and arr.dtype.kind in "iu" else arr.astype(np.float64, copy=False)
        status = action.get("status", 0)
        if type(status) is int and 0 <= status <= 2:  # fast path of the check below
            out["status"] = status
            return out
        st = np.asarray(status)
        if st.shape not in ((), (1,)) or st.dtype.kind not in "iub" or int(st.reshape(-1)[0]) not in (0, 1, 2):
            raise InvalidActionError(f"action['status'] must be an int in {{0 ok, 1 refused, 2 unparseable}}, got {status!r}")
        out["status"] = int(st.reshape(-1)[0])
        return out

    def views(self, views: np.ndarray, status: int, available: np.ndarray, log: DecisionLog) -> np.ndarray:
        """S1 views on ``A_d`` (0 elsewhere); fallback all 0 (§4.0)."""
        if status != STATUS_OK:
            log.flag("S1", status, _refusal(status))
            return np.zeros(self.n_assets)
        if np.abs(views).max() <= 1.0:  # fast path: every view finite and in [-1, 1] (NaN fails the test)
            log.status["S1"] = STATUS_OK
            return np.where(available, views, 0.0)
        if not np.isfinite(views).all():
            log.flag("S1", status, "views contain NaN or inf: fallback all views 0, S1 score 0")
            return np.zeros(self.n_assets)
        out_of_range = (np.abs(views) > 1.0) & available
        if out_of_range.any():
            bad = [self.tickers[i] for i in np.flatnonzero(out_of_range)][:5]
            log.flag("S1", status, f"views outside [-1, 1] for {bad}: fallback all views 0, S1 score 0")
            return np.zeros(self.n_assets)
        log.status["S1"] = STATUS_OK
        return np.where(available, views, 0.0)

    def signals(self, signals: np.ndarray, status: int, available: np.ndarray, log: DecisionLog) -> np.ndarray:
        """S2 signal codes on ``A_d`` (hold elsewhere); fallback all hold (§4.0)."""
        hold = np.full(self.n_assets, HOLD, dtype=np.int64)
        if status != STATUS_OK:
            log.flag("S2", status, _refusal(status))
            return hold
        if signals.dtype.kind in "iub" and signals.min() >= 0 and signals.max() <= 2:  # fast path: integer codes
            ok = True
        else:  # 0, 1 or 2 on every available asset (NaN fails every comparison)
            ok = ((signals == 0) | (signals == 1) | (signals == 2) | ~available).all()
        if not ok:
            log.flag("S2", status, "signals must be 0 (sell), 1 (hold) or 2 (buy): fallback all hold, S2 score 0")
            return hold
        log.status["S2"] = STATUS_OK
        return np.where(available, signals, HOLD).astype(np.int64)

    def weights(self, weights: np.ndarray, status: int, available: np.ndarray, current: np.ndarray,
                log: DecisionLog) -> tuple[np.ndarray, bool]:
        """S3 weights ``round4(w / Σw)`` over ``A_d`` and whether the answer was valid; fallback (§11.6): the
        ``current`` weights with the unavailable assets set to 0, renormalised."""
        a = available
        if status != STATUS_OK:
            log.flag("S3", status, _refusal(status))
            return fallback_weights(current, a), False
        if not (weights.min() >= 0.0 and weights.max() <= 1.0):  # NaN fails the test
            if not np.isfinite(weights).all():
                log.flag("S3", status, "weights contain NaN or inf: fallback current weights, S3 score 0")
            else:
                log.flag("S3", status, "weights outside [0, 1]: fallback current weights, S3 score 0")
            return fallback_weights(current, a), False
        w = np.where(a, weights, 0.0)  # weight on an unavailable asset is dropped (§11.4)
        tot = w.sum()
        if tot <= 0:
            w_zero = self.all_zero_weights(a)
            if w_zero is not None:
                log.status["S3"] = STATUS_OK
                return w_zero, True
            log.flag("S3", status, "all weights on the available assets are zero: fallback current weights, "
                                   "S3 score 0")
            return fallback_weights(current, a), False
        log.status["S3"] = STATUS_OK
        # weight on unavailable assets (0 when every asset is available)
        dropped = float(np.where(a, 0.0, weights).sum()) if not a.all() else 0.0
        log.coerce_note(dropped, tot)
        return (w / tot).round(4), True

    def fast(self, act: dict[str, Any], available: np.ndarray, log: DecisionLog, echo: bool):
        """An allocation step's three answers when all pass the fast checks (views in [-1, 1], integer signals
        in {0, 1, 2}, weights in [0, 1] not all zero on ``A_d``), in one kernel call (:func:`check_answers`):
        ``(w_hat, w_pos, views, signals)`` with the same log and results as :meth:`views`, :meth:`signals` and
        :meth:`weights` (``w_pos``: the positive entries of ``w_hat`` in order; ``views`` / ``signals`` empty
        unless ``echo``). None: decode them one by one (an answer needs a fallback or a message)."""
        n = self.n_assets
        w_out = np.empty(2 * n)
        views, signals = (np.empty(n), np.empty(n, dtype=np.int64)) if echo else (_NO_F, _NO_I)
        ok, tot, dropped, n_pos = check_answers(act["views"], act["signals"], act["weights"], available, w_out,
                                                views, signals)
        if not (ok and tot > 0):
            return None
        status = log.status
        status["S1"] = status["S2"] = status["S3"] = STATUS_OK
        if dropped > 0 or abs(tot - 1.0) > WEIGHT_SUM_TOLERANCE:
            log.coerce_note(dropped, tot)
        return w_out[:n], w_out[n : n + n_pos], views, signals


__all__ = ["ACTION_KEYS", "ActionDecoder", "DecisionLog", "STAGES", "STATUS_OK", "STATUS_REFUSED",
           "STATUS_UNPARSEABLE", "action_space", "allocate_and_trade", "check_answers"]
