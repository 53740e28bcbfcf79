"""How sure each PortBench number is (docs/uncertainty.md): bootstrap intervals and the Sharpe test vs EqW.

For a run, its daily NAV returns give stationary-bootstrap percentile intervals of Sharpe, total
return, volatility and max drawdown (:func:`quantgym.stats.bootstrap.bootstrap_intervals`), and,
paired day by day with the Equal-Weight baseline's returns on the same period, the Ledoit–Wolf (2008)
test of the Sharpe difference (:func:`quantgym.stats.bootstrap.sharpe_difference_test`). Settings:
:data:`quantgym.stats.config.DEFAULT_BOOTSTRAP` (seed 16, B = 2000, 95 %, Politis–White blocks).

The strict beat-EqW rule of the spec (§7.3: Sharpe strictly greater) is unchanged; the test is
reported beside it. Summary columns (:data:`COLUMNS`, appended after the ten fixed ones of
summary.csv, in the same units as their point columns):

- ``sharpe_lo``, ``sharpe_hi``: 95 % interval of the annualised Sharpe ratio (rf 4 %, 252 d);
- ``ret_lo``, ``ret_hi``: of the period's total return, percent (as ``ret_pct``, not annualised);
- ``vol_lo``, ``vol_hi``: of the annualised volatility, percent (as ``vol_pct``);
- ``mdd_lo``, ``mdd_hi``: of the max drawdown, percent, negative (as ``maxdd_pct``; lo = deeper);
- ``dsharpe_eqw``: Sharpe − Equal-Weight's Sharpe on the same days; ``dsharpe_eqw_lo`` /
  ``dsharpe_eqw_hi`` its 95 % studentised-bootstrap interval; ``dsharpe_eqw_p`` the two-sided p-value
  of ``H0: equal Sharpe`` (1 for Equal-Weight itself).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from quantgym.metrics import RISK_FREE, TRADING_DAYS
from quantgym.stats.bootstrap import bootstrap_intervals, sharpe_difference_test
from quantgym.stats.config import DEFAULT_BOOTSTRAP, BootstrapConfig

#: extra summary.csv columns, in order (see the module docstring)
COLUMNS = ("sharpe_lo", "sharpe_hi", "ret_lo", "ret_hi", "vol_lo", "vol_hi", "mdd_lo", "mdd_hi",
           "dsharpe_eqw", "dsharpe_eqw_lo", "dsharpe_eqw_hi", "dsharpe_eqw_p")
#: (column prefix, statistic of bootstrap_intervals, scale to the point column's unit)
_INTERVALS = (("sharpe", "sharpe", 1.0), ("ret", "total_return", 100.0), ("vol", "volatility", 100.0),
              ("mdd", "max_drawdown", 100.0))


def daily_returns(nav: Any) -> "Any":
    """Daily simple returns of a NAV pandas Series, indexed by the day they end on."""
    return nav.astype(float).pct_change().iloc[1:]


def _settings(result: Any) -> tuple[float, bool]:
    """(rf, include_start) of a run, from its recorded PortBench config (defaults: 4 %, start peak)."""
    config = (getattr(result, "config", None) or {}).get("config") or {}
    paper = config.get("paper") or {}
    return float(config.get("rf", RISK_FREE)), not bool(paper.get("mdd_no_start_peak", False))


def run_uncertainty(result: Any, eqw: Any | None, config: BootstrapConfig = DEFAULT_BOOTSTRAP) -> dict[str, Any]:
    """The ``uncertainty`` block of one run's results.json record.

    Parameters
    ----------
    result : the run's :class:`quantgym.evaluation.EvalResult` (its ``nav`` by date).
    eqw : the Equal-Weight run on the same period (None: no test).
    config : bootstrap settings.

    Returns
    -------
    dict
        ``intervals``: :func:`bootstrap_intervals` of the run's daily returns (decimals);
        ``vs_equal_weight``: :func:`sharpe_difference_test` of (run, EqW) on their common days, with
        ``n_common``, ``eqw_sharpe`` and ``beats_strict`` (the spec's rule, §7.3: Sharpe strictly greater
        than EqW's; False for EqW itself) (None when ``eqw`` is None); ``config``: the settings.
    """
    rf, include_start = _settings(result)
    r = daily_returns(result.nav)
    out: dict[str, Any] = {"config": config.to_dict(), "rf": rf, "periods_per_year": TRADING_DAYS,
                           "intervals": bootstrap_intervals(r.to_numpy(), config, rf=rf, include_start=include_start,
                                                            periods_per_year=TRADING_DAYS),
                           "vs_equal_weight": None}
    if eqw is not None:
        e = daily_returns(eqw.nav)
        common = r.index.intersection(e.index)
        test = sharpe_difference_test(r.loc[common].to_numpy(), e.loc[common].to_numpy(), config, rf=rf,
                                      periods_per_year=TRADING_DAYS)
        sh, ref = result.metrics.get("sharpe"), eqw.metrics.get("sharpe")
        out["vs_equal_weight"] = {**test, "n_common": int(common.size), "eqw_sharpe": ref,
                                  "beats_strict": None if sh is None or ref is None else bool(sh > ref)}
    return out


def summary_fields(block: dict[str, Any]) -> dict[str, float | None]:
    """The :data:`COLUMNS` cells of a :func:`run_uncertainty` block (units of their point columns)."""
    iv = block["intervals"]
    out: dict[str, float | None] = {}
    for prefix, stat, scale in _INTERVALS:
        for end in ("lo", "hi"):
            v = iv[stat][end]
            out[f"{prefix}_{end}"] = None if v is None else float(v) * scale
    t = block.get("vs_equal_weight") or {}
    out.update({"dsharpe_eqw": t.get("delta"), "dsharpe_eqw_lo": t.get("lo"), "dsharpe_eqw_hi": t.get("hi"),
                "dsharpe_eqw_p": t.get("p")})
    return out


def sharpe_cell(point: float | None, fields: dict[str, Any], nd: int = 2) -> str:
    """Compact terminal cell ``0.85 [0.10,1.60]`` (point and 95 % interval), ``–`` parts when missing."""
    def f(x: Any) -> str:
        return "–" if x is None or not np.isfinite(x) else f"{x:.{nd}f}"

    return f"{f(point)} [{f(fields.get('sharpe_lo'))},{f(fields.get('sharpe_hi'))}]"


def p_cell(p: float | None) -> str:
    """Compact p-value: ``<.001``, else three decimals (``1.000`` for Equal-Weight itself)."""
    if p is None or not np.isfinite(p):
        return "–"
    return "<.001" if p < 0.001 else f"{p:.3f}"


__all__ = ["COLUMNS", "daily_returns", "p_cell", "run_uncertainty", "sharpe_cell", "summary_fields"]
