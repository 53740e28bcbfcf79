"""Host side of the sandbox hand-off of Quant-Arena (spec quant_arena.md §10.4).

:func:`build_payload` packs everything the sandbox child needs for one window, and
nothing after D_{n−1}; the child runs it with
:mod:`~quantgym.envs.quant_arena.child.runner` (module path :data:`RUNNER`);
:func:`validate_child_value` re-checks what comes back (never trust the child), including
the commit-reveal keeper's HMAC tag (:func:`~quantgym.envs.quant_arena.child.harness.result_tag`).
"""

from __future__ import annotations

import hmac
from typing import Any

import numpy as np
import pandas as pd

from .child.harness import result_tag
from .data import ArenaDataset
from .pit import build_buffer

#: Module path of the runner, as ``run_in_sandbox`` expects it.
RUNNER = "quantgym.envs.quant_arena.child.runner:score_days"


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


def build_payload(ds: ArenaDataset, d0: int, n: int, *, max_lookback: int = 242, max_features: int = 300,
                  sample_every: int = 5, day_seconds: float = 10.0, import_seconds: float = 30.0,
                  max_output_bytes: int = 1 << 20,
                  key: bytes | None = None, warmup_start: Any = None, inf_score_error: bool = True) -> dict:
    """Everything the child needs for one window, and nothing after D_{n−1} (spec §10.4).

    Parameters
    ----------
    ds : ArenaDataset
        The panel (already truncated at the research end for research runs).
    d0, n : int
        Row of D_0 and number of execution days; decision dates are rows
        ``d0 .. d0+n−1``.
    key : bytes, optional
        Per-evaluation HMAC key; when given the sandbox runner isolates later rows
        in its commit-reveal keeper (:mod:`~quantgym.envs.quant_arena.child.runner`).
    warmup_start : date-like, optional
        First day the agent may see (the declared warm-up history, spec §2).
    day_seconds, import_seconds : float
        Wall limits of one decision date and of the submission's module-level code; the sandbox
        runner's keeper enforces both from outside the agent's process.
    inf_score_error : bool
        ±inf in a score Series is a day error (True, ``ArenaScoringConfig.inf_score_is_day_error``)
        instead of NaN.

    Returns
    -------
    dict
        ``block`` (rows ``max(0, d0−L_max+1) .. d0+n−1``, see
        :func:`~quantgym.envs.quant_arena.data.build_buffer`), ``first`` (index of D_0 in
        the block), ``n`` (decision dates), ``info``, ``intraday`` (tables of dates inside
        the block), and the checks' parameters.
    """
    lo = max(0, d0 - max_lookback + 1)
    if warmup_start is not None:  # no row before the declared warm-up start
        lo = max(lo, min(d0, int(np.searchsorted(ds.dates, np.datetime64(pd.Timestamp(warmup_start).date(), "D")))))
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
        "import_seconds": float(import_seconds),
        "max_output_bytes": int(max_output_bytes),
        "inf_score_error": bool(inf_score_error),
        "isolate": key is not None,
        "key": key or b"",
        # padding last: the child's stdin buffer may keep the tail of the pickle stream
        "_pad": b"\0" * 65536,
    }


# ---------------------------------------------------------------------- host side: re-validation
class ChildOutputError(ValueError):
    """The child's return value is malformed (treated as a ``violation``)."""


def validate_child_value(value: Any, n: int, N: int, in_view: np.ndarray, F: int, n_samples: int,
                         key: bytes | None = None) -> tuple[dict, list[int]]:
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
    key : bytes, optional
        The evaluation's HMAC key: the committed scores must carry the keeper's tag.

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
    nf = value.get("n_flagged")
    if not isinstance(nf, (int, np.integer)) or isinstance(nf, bool):
        raise ChildOutputError("malformed committed day-error count")
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
    if key is not None:
        tag = value.get("tag")
        want = result_tag(key, value["scores"], fm if F else np.zeros((n_samples, 0, N), np.float32), int(nf))
        if not isinstance(tag, str) or not hmac.compare_digest(tag, want):
            raise ChildOutputError("the scores do not match the ones committed day by day (tag mismatch)")
    fm = np.where(np.isfinite(fm), fm, np.nan).astype(np.float32)
    ne = value.get("n_errors")
    errs = value.get("errors")
    if not isinstance(ne, (int, np.integer)) or not isinstance(errs, list):
        raise ChildOutputError("malformed error list")
    clean = dict(value)
    clean["scores"], clean["features"] = sc, fm
    clean["n_errors"] = max(int(nf), 0) + len(bad_days)
    return clean, bad_days


__all__ = ["RUNNER", "build_payload", "validate_child_value", "ChildOutputError"]
