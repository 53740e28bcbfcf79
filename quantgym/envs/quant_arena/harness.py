"""Trusted runner of agent submissions inside the sandbox child (spec quant_arena.md §3, §10.4).

:func:`score_days` is imported by the sandbox child **before** lockdown and called
after it with the agent's module namespace and the evaluation payload (built by
:func:`build_payload` in the host). It replays the decision dates of one window:
for each date it appends that day's row to a private :class:`ViewBuffer` (so the
view the agent sees never holds a later row), calls ``compute_features(view)`` and
``score(features, view)``, validates both (§10.4 output checks) and stores the
score vector; on diversity sample dates (§10.13) it also stores the feature matrix.

A failure on one date (exception, invalid output) is a *day error*: that date's
scores are all NaN and the error is listed; the evaluation continues. Nothing the
child returns is trusted by the host: :func:`validate_child_value` re-checks it.
"""

from __future__ import annotations

import math
import random
import signal
import time
import traceback as _tb
from typing import Any

import numpy as np
import pandas as pd

from .data import LookAheadError, QADataset, ViewBuffer, build_buffer

#: Module path of the runner, as ``run_in_sandbox`` expects it.
RUNNER = "quantgym.envs.quant_arena.harness:score_days"

_MAX_MSG = 500
_MAX_TB = 2000


class DayTimeout(BaseException):
    """Raised inside the child when one decision date exceeds its wall budget."""


# ---------------------------------------------------------------------- host side: payload
def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """Copy of ``df`` whose string columns/index are numpy ``object`` (no pyarrow in the child)."""
    out = df.copy()
    for c in out.columns:
        dt = out[c].dtype
        if isinstance(dt, (pd.StringDtype, pd.ArrowDtype, pd.CategoricalDtype)) or dt.kind in "OUS":
            out[c] = pd.Series(out[c].to_numpy(dtype=object), index=out.index, dtype=object)
    if not isinstance(out.index, pd.DatetimeIndex) and out.index.dtype.kind not in "iuf":
        out.index = pd.Index(out.index.to_numpy(dtype=object), dtype=object, name=out.index.name)
    out.columns = pd.Index([str(c) for c in out.columns], dtype=object)
    return out


def build_payload(ds: QADataset, d0: int, n: int, *, max_lookback: int = 242, max_features: int = 300,
                  sample_every: int = 5, day_seconds: float = 10.0, max_output_bytes: int = 1 << 20) -> dict:
    """Everything the child needs for one window, and nothing after D_{n−1} (spec §10.4).

    Parameters
    ----------
    ds : QADataset
        The panel (already truncated at the research end for research runs).
    d0, n : int
        Row of D_0 and number of execution days; decision dates are rows
        ``d0 .. d0+n−1``.

    Returns
    -------
    dict
        ``block`` (rows ``max(0, d0−L_max+1) .. d0+n−1``, see
        :func:`~quantgym.envs.quant_arena.data.build_buffer`), ``first`` (index of D_0 in
        the block), ``n`` (decision dates), ``info``, ``intraday`` (tables of dates inside
        the block), and the checks' parameters.
    """
    lo = max(0, d0 - max_lookback + 1)
    hi = d0 + n - 1
    blk = build_buffer(ds, lo, hi)
    days = set(blk["dates"])
    intr = {d: {k: _plain(v) for k, v in t.items()} for d, t in ds.intraday().items() if d in days}
    return {
        "block": blk,
        "first": d0 - lo,
        "n": n,
        "info": _plain(ds.info),
        "intraday": intr,
        "max_lookback": int(max_lookback),
        "max_features": int(max_features),
        "sample_every": int(sample_every),
        "day_seconds": float(day_seconds),
        "max_output_bytes": int(max_output_bytes),
    }


# ---------------------------------------------------------------------- child side: checks
def _series_to_vec(obj: Any, what: str, pos: dict[str, int], n_view: int) -> np.ndarray:
    """Validate one agent Series against ``view.symbols`` and return a float64 vector (§10.4)."""
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
    vals[~np.isfinite(vals)] = np.nan
    out = np.full(n_view, np.nan)
    out[idx] = vals
    return out


def _err(date: str, phase: str, exc: BaseException) -> dict:
    tb = "".join(_tb.format_exception(type(exc), exc, exc.__traceback__))
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


def score_days(agent: dict, payload: dict) -> dict:
    """Run one window of decision dates on the agent's module (child side, §10.4).

    Parameters
    ----------
    agent : dict
        The submission module's namespace (``FEATURES``, ``compute_features``, ``score``).
    payload : dict
        From :func:`build_payload`.

    Returns
    -------
    dict
        ``status`` ("ok" or "invalid"), ``message``; when ok: ``scores`` (n, N) float64
        (columns = payload symbols), ``features`` (n_samples, F, N) float32,
        ``sample_days`` (indices j of the sampled decision dates), ``errors`` (first 20
        day errors, tracebacks of the first 3), ``n_errors``, ``extra_keys`` (undeclared
        feature names that were dropped), ``day_seconds_max``.
    """
    feats, problem = _check_module(agent, int(payload["max_features"]))
    if problem:
        return {"status": "invalid", "message": problem}
    compute_features, score_fn = agent["compute_features"], agent["score"]
    blk = payload["block"]
    syms = blk["symbols"]
    N = len(syms)
    first, n = int(payload["first"]), int(payload["n"])
    every = int(payload["sample_every"])
    buf = ViewBuffer(syms, first + n, payload["info"], int(payload["max_lookback"]))
    intr = payload.get("intraday") or {}
    for i in range(first):
        buf.append(blk, i, intr.get(blk["dates"][i]))
    scores = np.full((n, N), np.nan)
    samples = list(range(0, n, every))
    F = len(feats)
    fpos = {f: i for i, f in enumerate(feats)}
    fmat = np.full((len(samples), F, N), np.nan, dtype=np.float32)
    errors: list[dict] = []
    n_errors = 0
    extra: set[str] = set()
    day_budget = float(payload["day_seconds"])
    slowest = 0.0
    alarm = _Alarm(day_budget)
    random.seed(0)
    np.random.seed(0)
    for j in range(n):
        row = first + j
        buf.append(blk, row, intr.get(blk["dates"][row]))
        view = buf.view()
        date = blk["dates"][row]
        cols = view._cols
        pos = {s: k for k, s in enumerate(view.symbols)}
        phase = "compute_features"
        t0 = time.perf_counter()
        try:
            with alarm:
                fv = compute_features(view)
                if not isinstance(fv, dict):
                    raise TypeError(f"compute_features must return a dict of pandas.Series, got {type(fv).__name__}")
                vecs = {}
                for k, v in fv.items():
                    if k not in fpos:
                        extra.add(str(k)[:100])
                        continue
                    vecs[k] = _series_to_vec(v, f"feature {k!r}", pos, len(cols))
                phase = "score"
                sc = score_fn(fv, view)
                vec = _series_to_vec(sc, "score", pos, len(cols))
        except DayTimeout:
            return {"status": "timeout", "message": f"timeout: decision date {date} took more than "
                                                    f"{day_budget:g} s wall"}
        except MemoryError:
            raise  # an out-of-memory is the evaluation's status ("oom"), not a day error
        except Exception as exc:  # noqa: BLE001 - any agent error is a day error (§10.4)
            n_errors += 1
            if len(errors) < 20:
                errors.append(_err(date, phase, exc))
            continue
        finally:
            slowest = max(slowest, time.perf_counter() - t0)
        scores[j, cols] = vec
        if j % every == 0:
            s = j // every
            for k, v in vecs.items():
                fmat[s, fpos[k], cols] = v.astype(np.float32)
    for e in errors[3:]:
        e.pop("traceback", None)
    return {"status": "ok", "message": "ok", "scores": scores, "features": fmat, "feature_names": feats,
            "sample_days": np.asarray(samples, dtype=np.int64), "errors": errors, "n_errors": n_errors,
            "extra_keys": sorted(extra)[:50], "day_seconds_max": slowest}


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


# ---------------------------------------------------------------------- host side: re-validation
class ChildOutputError(ValueError):
    """The child's return value is malformed (treated as a ``violation``)."""


def validate_child_value(value: Any, n: int, N: int, in_view: np.ndarray, F: int, n_samples: int
                         ) -> tuple[dict, list[int]]:
    """Re-validate the child's return value in the host (never trust the child).

    Parameters
    ----------
    value : Any
        Decoded value returned by the sandbox.
    n, N : int
        Expected score matrix shape.
    in_view : ndarray (n, N) bool
        ``view.symbols`` membership per decision date (host truth).
    F, n_samples : int
        Expected feature-matrix shape ``(n_samples, F, N)``.

    Returns
    -------
    clean : dict
        The value with ``scores`` float64 (n, N) and ``features`` float32.
    bad_days : list[int]
        Decision dates whose rows carried values outside ``view.symbols`` or ±inf; their
        scores are set to NaN and they count as day errors.

    Raises
    ------
    ChildOutputError
        Wrong types or shapes.
    """
    if not isinstance(value, dict) or "status" not in value:
        raise ChildOutputError("the child returned no result dict")
    if value["status"] != "ok":
        return value, []
    sc = value.get("scores")
    if not isinstance(sc, np.ndarray) or sc.shape != (n, N) or sc.dtype.kind not in "fiub":
        raise ChildOutputError(f"scores must be a float array of shape {(n, N)}, got "
                               f"{getattr(sc, 'shape', type(sc).__name__)}")
    sc = sc.astype(np.float64)
    bad = np.isinf(sc) | (np.isfinite(sc) & ~in_view)
    bad_days = np.flatnonzero(bad.any(axis=1)).tolist()
    sc[bad_days] = np.nan
    fm = value.get("features")
    if F == 0:
        fm = np.zeros((n_samples, 0, N), dtype=np.float32)
    elif not isinstance(fm, np.ndarray) or fm.shape != (n_samples, F, N) or fm.dtype.kind not in "fiub":
        raise ChildOutputError(f"features must be a float array of shape {(n_samples, F, N)}")
    fm = np.where(np.isfinite(fm), fm, np.nan).astype(np.float32)
    ne = value.get("n_errors")
    errs = value.get("errors")
    if not isinstance(ne, (int, np.integer)) or not isinstance(errs, list):
        raise ChildOutputError("malformed error list")
    clean = dict(value)
    clean["scores"], clean["features"] = sc, fm
    clean["n_errors"] = int(ne) + len(bad_days)
    return clean, bad_days


def format_score_matrix_check(sc: np.ndarray) -> str:  # pragma: no cover - debug helper
    """One line describing a score matrix (for logs)."""
    fin = np.isfinite(sc)
    return f"{sc.shape} finite={fin.mean():.3f} max={np.nanmax(sc) if fin.any() else math.nan}"


__all__ = ["RUNNER", "score_days", "build_payload", "validate_child_value", "ChildOutputError", "DayTimeout"]
