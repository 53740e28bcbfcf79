"""The memorization gap: blind − named scores of one agent on the same episodes (docs/blind.md).

``quantgym eval --blind both`` runs every episode of a plan twice with the same agent and the same seeds:
once named (dates, tickers, levels shown) and once blind (:mod:`quantgym.blind`). Both episodes are scored
on the same real data and the same dates, so their daily returns (and per-date scores) are paired day by
day. For each pair and each headline metric of the task this module gives:

- the point gap ``blind − named`` of the two summary rows' values (so it is the difference of the
  columns the user reads);
- a paired bootstrap interval of the gap: the stationary bootstrap of Politis & Romano (1994), mean block
  length of Politis & White (2004) on the two series side by side, one index matrix
  (:func:`quantgym.stats.bootstrap.resample_indices`) applied to both series, the statistic recomputed on
  each resample, and the percentile interval of the ``B`` differences (settings:
  :class:`~quantgym.stats.config.BootstrapConfig`); a return statistic (Sharpe, total return) resamples
  the daily returns, a score that is a mean over decision dates (PortBench's CEPS) the per-date scores;
- for the Sharpe ratio, the Ledoit & Wolf (2008) test of equal Sharpe ratios on the two daily return
  series (:func:`quantgym.stats.bootstrap.sharpe_difference_test`): its p-value.

A gap whose interval excludes 0 is flagged as likely recall (``likely_recall``). Identical episodes (a
classical agent, which reads no prompt) give the gap 0, the interval [0, 0] exactly and no flag. A metric
without a per-date series (Quant-Arena's 0-100 score S) gets its point gap only.

Generic: no task is named here. A task's eval adapter gives, per run, its :class:`GapSeries`
(``gap_series(run)``) and its headline metrics (``gap_metrics``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from quantgym.stats.bootstrap import (block_length, percentile_interval, resample_indices, return_stats,
                                      sharpe_difference_test)
from quantgym.stats.config import DEFAULT_BOOTSTRAP, BootstrapConfig

#: the metrics whose interval comes from the daily returns: column -> (statistic of return_stats, scale)
RETURN_METRICS: dict[str, tuple[str, float]] = {"sharpe": ("sharpe", 1.0), "ret_pct": ("total_return", 100.0)}
#: the summary.csv column of the likely-recall flag
FLAG = "likely_recall"


@dataclass
class GapSeries:
    """What a task gives the gap for one run.

    Attributes
    ----------
    key : the run's summary row key columns (``{"profile": ..., "period": ...}``; a task's own key column
        such as ``track`` too): identifies the run's row among the rows of its view.
    returns : daily simple returns (decimals) indexed by date, or None.
    scores : per-date scores by summary column whose value is their mean (``{"ceps": series}``).
    rf : annual risk-free rate of the task's Sharpe ratio; periods_per_year : its annualisation.
    include_start : the drawdown path starts at a peak of 1 (as the task's metrics).
    """

    key: dict[str, Any]
    returns: Any = None
    scores: dict[str, Any] = field(default_factory=dict)
    rf: float = 0.0
    periods_per_year: int = 252
    include_start: bool = True


def columns(metrics: Sequence[str]) -> tuple[str, ...]:
    """The gap columns of ``metrics`` in summary.csv order: per metric ``gap_<m>``, ``gap_<m>_lo``,
    ``gap_<m>_hi`` (Sharpe also ``gap_sharpe_p``), then :data:`FLAG`."""
    out: list[str] = []
    for m in metrics:
        out += [f"gap_{m}", f"gap_{m}_lo", f"gap_{m}_hi"] + (["gap_sharpe_p"] if m == "sharpe" else [])
    return (*out, FLAG)


def paired_interval(named: Any, blind: Any, stat: Callable[[np.ndarray], np.ndarray],
                    config: BootstrapConfig = DEFAULT_BOOTSTRAP) -> dict[str, Any]:
    """Paired stationary-bootstrap percentile interval of ``stat(blind) − stat(named)``.

    Parameters
    ----------
    named, blind : (n,) paired series (same dates, same order).
    stat : maps a (B, n) matrix to its (B,) statistics (row by row).
    config : seed, ``B``, confidence, block rule.

    Returns
    -------
    dict
        ``lo``, ``hi`` (None when ``n < config.min_obs``), ``n``, ``block``.
    """
    a = np.asarray(named, dtype=np.float64)
    b = np.asarray(blind, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired series must have equal length, got {a.size} and {b.size}")
    n = a.size
    if n < max(2, config.min_obs):
        return {"lo": None, "hi": None, "n": n, "block": None}
    blk = block_length(np.stack([a, b], axis=1), config, "stationary")
    idx = resample_indices(n, blk, config, "stationary")
    lo, hi = percentile_interval(stat(b[idx]) - stat(a[idx]), config.confidence)
    return {"lo": lo, "hi": hi, "n": n, "block": blk}


def _aligned(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """Two date-indexed series on their common dates (pandas), or as they are (arrays)."""
    if hasattr(x, "index") and hasattr(y, "index"):
        common = x.index.intersection(y.index)
        return x.loc[common].to_numpy(dtype=float), y.loc[common].to_numpy(dtype=float)
    return np.asarray(x, dtype=float), np.asarray(y, dtype=float)


def memorization_gap(named_row: Any, blind_row: Any, named: GapSeries | None, blind: GapSeries | None,
                     metrics: Sequence[str], config: BootstrapConfig = DEFAULT_BOOTSTRAP) -> dict[str, Any]:
    """The gap of one pair of runs (same agent, env id, period / track and seed; named and blind).

    Parameters
    ----------
    named_row, blind_row : the two summary rows (:class:`~quantgym.results.SummaryRow`).
    named, blind : their :class:`GapSeries` (None: point gaps only).
    metrics : the headline columns (``sharpe``, ``ret_pct``, a task's score column).
    config : bootstrap settings.

    Returns
    -------
    dict
        ``cells``: the summary.csv cells (:func:`columns`); ``metrics``: per metric ``named``, ``blind``,
        ``gap``, ``lo``, ``hi``, ``n``, ``block`` (Sharpe also ``test``: the whole
        :func:`~quantgym.stats.bootstrap.sharpe_difference_test` result, blind vs named); ``config``.
        A pair with a failed run has no gap (every cell None).
    """
    cells: dict[str, Any] = dict.fromkeys(columns(metrics))
    detail: dict[str, Any] = {}
    usable = "failed" not in (named_row.status, blind_row.status)
    rets = None
    if usable and named is not None and blind is not None and named.returns is not None and blind.returns is not None:
        rets = _aligned(named.returns, blind.returns)
    flags: list[bool] = []
    for m in metrics:
        a, b = named_row.get(m), blind_row.get(m)
        gap = None if not usable or a is None or b is None else float(b) - float(a)
        iv: dict[str, Any] = {"lo": None, "hi": None, "n": None, "block": None}
        if gap is not None and m in RETURN_METRICS and rets is not None:
            name, scale = RETURN_METRICS[m]
            s = named  # rf, annualisation and drawdown convention of the task (both runs share them)

            def stat(R: np.ndarray, name: str = name, scale: float = scale) -> np.ndarray:
                return scale * return_stats(R, s.rf, s.periods_per_year, s.include_start)[name]

            iv = paired_interval(*rets, stat, config)
        elif gap is not None and named is not None and blind is not None and m in named.scores and m in blind.scores:
            iv = paired_interval(*_aligned(named.scores[m], blind.scores[m]), lambda S: S.mean(axis=1), config)
        detail[m] = {"named": a, "blind": b, "gap": gap, **iv}
        cells[f"gap_{m}"], cells[f"gap_{m}_lo"], cells[f"gap_{m}_hi"] = gap, iv["lo"], iv["hi"]
        if iv["lo"] is not None:
            flags.append(iv["lo"] > 0 or iv["hi"] < 0)
        if m == "sharpe" and gap is not None and rets is not None:
            test = sharpe_difference_test(rets[1], rets[0], config, rf=named.rf,
                                          periods_per_year=named.periods_per_year)
            detail[m]["test"] = test
            cells["gap_sharpe_p"] = test["p"]
    cells[FLAG] = any(flags) if flags else None
    return {"cells": cells, "metrics": detail, "config": config.to_dict()}


__all__ = ["FLAG", "GapSeries", "RETURN_METRICS", "columns", "memorization_gap", "paired_interval"]
