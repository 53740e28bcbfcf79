"""Trusted runner of agent submissions inside the sandbox child (spec quant_arena.md §3, §10.4, §10.13).

:func:`run_days` is imported by the sandbox child **before** lockdown (through
:mod:`~quantgym.envs.quant_arena.child.runner`) and called after it with the agent's
module namespace and the evaluation payload (built by
:func:`~quantgym.envs.quant_arena.handoff.build_payload` in the host). It replays the
decision dates of one window: for each date it appends that day's row to a private
:class:`~quantgym.envs.quant_arena.pit.ViewBuffer` (so the view the agent sees never
holds a later row), calls ``compute_features(view)`` and
``score(features, view)``, validates both (§10.4 output checks) and stores the
score vector; on diversity sample dates (§10.13) it also stores the feature matrix.

A failure on one date (exception, invalid output) is a *day error*: that date's
scores are all NaN and the error is listed; the evaluation continues. Nothing the
child returns is trusted by the host:
:func:`~quantgym.envs.quant_arena.handoff.validate_child_value` re-checks it.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import signal
import struct
import time
import traceback as _tb
from typing import Any

import numpy as np
import pandas as pd

from quantgym.blind import day_label

from ..pit import BLOCK_ARRAYS, ViewBuffer

#: Per-day arrays of a payload block (one row per panel day).
ROW_FIELDS = BLOCK_ARRAYS

_MAX_MSG = 500
_MAX_TB = 2000


class DayTimeout(BaseException):
    """Raised inside the child when one decision date exceeds its wall budget."""


# ---------------------------------------------------------------------- child side: checks
def _series_to_vec(obj: Any, what: str, pos: dict[str, int], n_view: int, reject_inf: bool = False) -> np.ndarray:
    """Validate one agent Series against ``view.symbols`` and return a float64 vector (§10.4).

    ±inf becomes NaN (§10.4), except with ``reject_inf`` (the score, [project choice]
    ``ArenaScoringConfig.inf_score_is_day_error``): then ±inf raises ``ValueError``, which the
    caller records as a day error with a clear message instead of silently treating the
    stock as not eligible.
    """
    if not isinstance(obj, pd.Series):
        raise TypeError(f"{what} must be a pandas.Series indexed by view.symbols, got {type(obj).__name__}")
    if not obj.index.is_unique:
        raise ValueError(f"{what} has a duplicated index")
    kind = obj.dtype.kind
    if kind not in "biuf":
        raise TypeError(f"{what} must have a numeric or bool dtype, got {obj.dtype}")
    idx = [pos.get(s, -1) if isinstance(s, str) else -1 for s in obj.index]
    idx = np.asarray(idx, dtype=np.int64)
    if idx.size and (idx < 0).any():
        bad = [s for s, i in zip(obj.index[:1000], idx[:1000]) if i < 0][:3]
        raise KeyError(f"{what} index has symbols outside view.symbols (e.g. {bad})")
    vals = obj.to_numpy(dtype=np.float64, copy=True)
    inf = np.isinf(vals)
    if reject_inf and inf.any():
        eg = [str(s) for s in obj.index[inf][:3]]
        raise ValueError(f"{what} has ±inf for {int(inf.sum())} symbol(s) (e.g. {eg}): ±inf is not a valid score; "
                         "return NaN for 'not eligible' and finite numbers otherwise (the date is a day error)")
    vals[~np.isfinite(vals)] = np.nan
    out = np.full(n_view, np.nan)
    out[idx] = vals
    return out


def _agent_tb(exc: BaseException, agent_file: str | None) -> str:
    """Traceback text from the agent's first frame on (docs/security.md); no frame of this harness.

    The agent's first frame is the first one in ``agent_file`` (the file name of the submission's
    code), else the first frame outside this module. Without one (the harness's own output checks
    raised), only the exception line is given.
    """
    frames = list(_tb.walk_tb(exc.__traceback__))
    first = None
    for i, (frame, _lineno) in enumerate(frames):
        fn = frame.f_code.co_filename
        if (fn == agent_file) if agent_file else (fn != __file__):
            first = i
            break
    tail = "".join(_tb.format_exception_only(type(exc), exc))
    if first is None:
        return tail
    summary = _tb.StackSummary.extract(iter(frames[first:]))
    return "Traceback (most recent call last):\n" + "".join(summary.format()) + tail


def _err(date: str, phase: str, exc: BaseException, agent_file: str | None = None) -> dict:
    tb = _agent_tb(exc, agent_file)
    return {"date": date, "phase": phase, "type": type(exc).__name__, "message": str(exc)[:_MAX_MSG],
            "traceback": tb[-_MAX_TB:]}


def _check_module(ns: dict, max_features: int) -> tuple[list[str] | None, str | None]:
    feats = ns.get("FEATURES")
    if not isinstance(feats, (list, tuple)):
        return None, "FEATURES must be a list of feature-name strings"
    feats = list(feats)
    if len(feats) > max_features:
        return None, f"FEATURES declares {len(feats)} names; at most {max_features} are allowed"
    if not all(isinstance(f, str) and f for f in feats):
        return None, "FEATURES must hold non-empty strings only"
    if len(set(feats)) != len(feats):
        return None, "FEATURES has duplicated names"
    for fn in ("compute_features", "score"):
        if not callable(ns.get(fn)):
            return None, f"the submission must define a function {fn}(...)"
    return feats, None


class LocalFeeder:
    """Feeds rows from the payload itself (in-process executor, or a payload without isolation).

    Trusted code only: the agent's process holds every row of the window.
    """

    isolation = "none"

    def __init__(self, payload: dict):
        self._blk = payload["block"]
        self._first = int(payload["first"])
        self._n = int(payload["n"])
        self._every = int(payload["sample_every"])
        self._intr = payload.get("intraday") or {}
        self._next = self._first + 1
        N = len(self._blk["symbols"])
        self._scores = np.full((self._n, N), np.nan)
        self._feats: np.ndarray | None = None
        self._flagged = 0

    def start(self, F: int) -> None:
        self._feats = np.full((len(range(0, self._n, self._every)), F, self._scores.shape[1]), np.nan,
                              dtype=np.float32)

    def commit(self, j: int, flag: int, vec: np.ndarray, fmat: np.ndarray | None) -> None:
        self._scores[j] = vec
        self._flagged += int(flag)
        if fmat is not None:
            self._feats[j // self._every] = fmat

    def reveal(self) -> dict:
        i = self._next
        self._next += 1
        d = self._blk["dates"][i]
        return {"row": {k: self._blk[k][i] for k in ROW_FIELDS}, "date": d, "intraday": self._intr.get(d)}

    def final(self) -> dict:
        return {"scores": self._scores, "features": self._feats, "n_flagged": self._flagged, "tag": None}


def run_days(agent: dict, payload: dict, feeder: Any) -> dict:
    """Run one window of decision dates on the agent's module (child side, §10.4).

    Parameters
    ----------
    agent : dict
        The submission module's namespace (``FEATURES``, ``compute_features``, ``score``).
    payload : dict
        From :func:`~quantgym.envs.quant_arena.handoff.build_payload` (in the sandbox: its public part, rows up to D_0).
    feeder : LocalFeeder or KeeperFeeder
        Source of the later rows; each date's scores are committed to it before the
        next row is revealed (:mod:`quantgym.envs.quant_arena.child.runner`).

    Returns
    -------
    dict
        ``status`` ("ok", "invalid", "timeout"), ``message``; when ok: ``scores`` (n, N)
        float64 (columns = payload symbols) and ``features`` (n_samples, F, N) float32 as
        committed, ``tag`` (HMAC from the keeper, or None), ``n_flagged`` (committed
        day-error count), ``sample_days``, ``errors`` (first 20 day errors, tracebacks of
        the first 3), ``n_errors``, ``extra_keys`` (undeclared feature names dropped),
        ``day_seconds_max``, ``isolation``.
    """
    feats, problem = _check_module(agent, int(payload["max_features"]))
    if problem:
        return {"status": "invalid", "message": problem}
    compute_features, score_fn = agent["compute_features"], agent["score"]
    try:  # the submission's file name, to start tracebacks at its first frame
        agent_file = compute_features.__code__.co_filename
        agent_file = agent_file if isinstance(agent_file, str) else None
    except Exception:  # noqa: BLE001 - a callable object without __code__: fall back to "not this module"
        agent_file = None
    blk = payload["block"]
    syms = blk["symbols"]
    N = len(syms)
    first, n = int(payload["first"]), int(payload["n"])
    every = int(payload["sample_every"])
    buf = ViewBuffer(syms, first + n, payload["info"], int(payload["max_lookback"]))
    intr = payload.get("intraday") or {}
    for i in range(first + 1):  # rows up to D_0
        buf.append(blk, i, intr.get(blk["dates"][i]))
    samples = list(range(0, n, every))
    F = len(feats)
    fpos = {f: i for i, f in enumerate(feats)}
    errors: list[dict] = []
    n_errors = 0
    extra: set[str] = set()
    day_budget = float(payload["day_seconds"])
    inf_error = bool(payload.get("inf_score_error", True))
    slowest = 0.0
    alarm = _Alarm(day_budget)
    random.seed(0)
    np.random.seed(0)
    feeder.start(F)
    for j in range(n):
        if j > 0:
            nxt = feeder.reveal()
            buf.append_row(nxt["row"], nxt["date"], nxt.get("intraday"))
        view = buf.view()
        date = day_label(view.date) if isinstance(view.date, int) else str(view.date.date())  # int: blind
        cols = view._cols
        pos = {s: k for k, s in enumerate(view.symbols)}
        phase = "compute_features"
        t0 = time.perf_counter()
        vecs: dict[str, np.ndarray] = {}
        ok = False
        try:
            with alarm:
                fv = compute_features(view)
                if not isinstance(fv, dict):
                    raise TypeError(f"compute_features must return a dict of pandas.Series, got {type(fv).__name__}")
                for k, v in fv.items():
                    if k not in fpos:
                        extra.add(str(k)[:100])
                        continue
                    vecs[k] = _series_to_vec(v, f"feature {k!r}", pos, len(cols))
                phase = "score"
                sc = score_fn(fv, view)
                vec = _series_to_vec(sc, "score", pos, len(cols), reject_inf=inf_error)
                ok = True
        except DayTimeout:
            return {"status": "timeout", "message": f"timeout: decision date {date} took more than "
                                                    f"{day_budget:g} s wall"}
        except MemoryError:
            raise  # an out-of-memory is the evaluation's status ("oom"), not a day error
        except Exception as exc:  # noqa: BLE001 - any agent error is a day error (§10.4)
            n_errors += 1
            if len(errors) < 20:
                errors.append(_err(date, phase, exc, agent_file))
        finally:
            slowest = max(slowest, time.perf_counter() - t0)
        full = np.full(N, np.nan)
        fmat = None
        if j % every == 0:
            fmat = np.full((F, N), np.nan, dtype=np.float32)
        if ok:
            full[cols] = vec
            if fmat is not None:
                for k, v in vecs.items():
                    fmat[fpos[k], cols] = v.astype(np.float32)
        feeder.commit(j, 0 if ok else 1, full, fmat)
    res = feeder.final()
    for e in errors[3:]:
        e.pop("traceback", None)
    return {"status": "ok", "message": "ok", "scores": res["scores"], "features": res["features"],
            "tag": res["tag"], "n_flagged": int(res["n_flagged"]), "feature_names": feats,
            "sample_days": np.asarray(samples, dtype=np.int64), "errors": errors, "n_errors": n_errors,
            "extra_keys": sorted(extra)[:50], "day_seconds_max": slowest, "isolation": feeder.isolation}


def score_days(agent: dict, payload: dict) -> dict:
    """In-process runner (trusted code): :func:`run_days` with a :class:`LocalFeeder`."""
    return run_days(agent, payload, LocalFeeder(payload))


class _Alarm:
    """Per-date wall budget with ``SIGALRM`` where available (child main thread), else a no-op."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._signal = signal
        self._ok = hasattr(signal, "setitimer")

    def _fire(self, *_: Any) -> None:
        raise DayTimeout()

    def __enter__(self) -> "_Alarm":
        if self._ok:
            try:
                self._old = self._signal.signal(self._signal.SIGALRM, self._fire)
                self._signal.setitimer(self._signal.ITIMER_REAL, self.seconds, 0.5)  # re-fires if caught
            except (ValueError, OSError):  # not the main thread
                self._ok = False
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._ok:
            self._signal.setitimer(self._signal.ITIMER_REAL, 0)
            self._signal.signal(self._signal.SIGALRM, self._old)


def result_tag(key: bytes, scores: np.ndarray, features: np.ndarray, n_flagged: int) -> str:
    """HMAC-SHA256 over committed scores, features and day-error count (keeper and host)."""
    h = hmac.new(key, digestmod=hashlib.sha256)
    h.update(np.ascontiguousarray(scores, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(features, dtype=np.float32).tobytes())
    h.update(struct.pack("<qqq", int(n_flagged), *scores.shape))
    return h.hexdigest()


__all__ = ["score_days", "run_days", "LocalFeeder", "result_tag", "DayTimeout", "ROW_FIELDS"]
