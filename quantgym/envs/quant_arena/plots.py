"""Diagnostics plots of Quant-Arena (issue §3): NAV vs market, exposure, return by score quantile.

All functions take the ``daily`` dict of a :class:`~quantgym.envs.quant_arena.executor.WindowResult`
(``dates, nav, reference, exposure``) and/or its metrics (``quantile_returns_bp``) and
write a PNG with matplotlib's Agg backend. They never show a window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def plot_run(daily: dict, metrics: dict | None, path: str | Path, title: str = "") -> Path:
    """One run's diagnostics: NAV vs market, exposure over time, next-day return by score quintile.

    Parameters
    ----------
    daily : dict
        ``dates`` (ISO strings, D_0..D_n), ``nav`` (CNY), ``reference`` (from 1), ``exposure``.
    metrics : dict or None
        Window metrics with ``quantile_returns_bp`` (5 values, group 1 = highest scores).
    path : path
        Output PNG.

    Returns
    -------
    Path
    """
    path = Path(path)
    d = pd.to_datetime(daily["dates"])
    nav = np.asarray(daily["nav"], dtype=float)
    ref = np.asarray(daily["reference"], dtype=float)
    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    ax[0].plot(d, nav / nav[0], label="strategy (net of costs)")
    ax[0].plot(d, ref / ref[0], label="market EW (no costs)", color="grey")
    ax[0].set_title("NAV vs market")
    ax[0].legend(fontsize=8)
    ax[1].plot(d, np.asarray(daily["exposure"], dtype=float) * 100)
    ax[1].set_ylim(0, 105)
    ax[1].set_title("Exposure (% of NAV invested)")
    q = (metrics or {}).get("quantile_returns_bp")
    if q:
        ax[2].bar([f"Q{i + 1}" for i in range(len(q))], [np.nan if v is None else v for v in q])
    ax[2].axhline(0, color="k", lw=0.5)
    ax[2].set_title("Next-day return by score quintile (bp; Q1 = top)")
    for a in ax[:2]:
        a.tick_params(axis="x", labelrotation=30, labelsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_nav_comparison(runs: dict[str, dict], reference: dict, path: str | Path, title: str = "") -> Path:
    """NAV paths of several strategies and the market reference on one window.

    Parameters
    ----------
    runs : dict name -> daily dict (``dates``, ``nav``)
    reference : dict with ``dates`` and ``path`` (from 1)
    """
    path = Path(path)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for name, daily in runs.items():
        nav = np.asarray(daily["nav"], dtype=float)
        ax.plot(pd.to_datetime(daily["dates"]), nav / nav[0], label=name)
    ax.plot(pd.to_datetime(reference["dates"]), reference["path"], label="market EW (no costs)", color="k", lw=1.5,
            ls="--")
    ax.axhline(1.0, color="grey", lw=0.5)
    ax.set_ylabel("NAV (start = 1)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


#: a strategy whose quintile means cover fewer than this share of the most-covered strategy's days goes to
#: the chart's second panel [project choice]
PARTIAL_DAYS_SHARE = 0.9


def quantile_figure(metrics: dict[str, dict | None], title: str = "") -> Any:
    """Grouped bars of the mean next-day return by score quintile (bp, Q1 = top scores) per strategy.

    Parameters
    ----------
    metrics : dict
        Strategy name -> its window metrics (``quantile_returns_bp``, ``n_ic_days``: the days the means
        cover); None or no quintiles: left out.

    Returns
    -------
    matplotlib Figure
        One panel; a second one, titled as such, for the strategies that scored on fewer than
        :data:`PARTIAL_DAYS_SHARE` of the days of the best-covered one (a market-timing rule scores only when
        it is invested): their means hold only for those days and are not comparable bar for bar with the
        others'. Legends give each strategy's days when the strategies differ.
    """
    q = {n: (m or {}).get("quantile_returns_bp") for n, m in metrics.items()}
    q = {n: [np.nan if v is None else v for v in x] for n, x in q.items() if x}
    days = {n: (metrics[n] or {}).get("n_ic_days") for n in q}
    most = max((d for d in days.values() if d), default=0)
    part = [n for n in q if days[n] is not None and most and days[n] < PARTIAL_DAYS_SHARE * most]
    groups = [[n for n in q if n not in part], part] if part and len(part) < len(q) else [list(q)]
    label_days = len({days[n] for n in q}) > 1
    fig, axes = plt.subplots(1, len(groups), figsize=(9 if len(groups) == 1 else 12, 4.4 if part else 4),
                             squeeze=False, gridspec_kw={"width_ratios": [max(1, len(g)) + 1 for g in groups]})
    for k, (ax, names) in enumerate(zip(axes[0], groups)):
        width = 0.8 / max(1, len(names))
        n_q = max((len(q[n]) for n in names), default=5)
        for i, name in enumerate(names):
            lab = f"{name} ({days[name]} days)" if label_days and days[name] is not None else name
            ax.bar(np.arange(len(q[name])) + i * width, q[name], width=width, label=lab,
                   color=f"C{list(q).index(name)}")
        ax.set_xticks(np.arange(n_q) + 0.4 - width / 2)
        ax.set_xticklabels([f"Q{i + 1}" for i in range(n_q)])
        ax.axhline(0, color="k", lw=0.5)
        ax.set_ylabel("mean next-day return (bp)")
        ax.set_title(title if k == 0 else "scored on part of the days only", fontsize=10 if k else None)
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi + 0.35 * (hi - lo))  # headroom for the legend above the bars
        ax.legend(fontsize=8, loc="upper right")
    if part:
        fig.text(0.01, 0.01, f"Right: {', '.join(part)} scored on fewer than {PARTIAL_DAYS_SHARE:.0%} of the days "
                 f"(holding cash on the others), so its means are over those days only: not comparable with the "
                 f"left panel's.", fontsize=8, ha="left", va="bottom", wrap=True)
        fig.tight_layout(rect=(0, 0.06, 1, 1))
    else:
        fig.tight_layout()
    return fig


def plot_quantiles(metrics: dict[str, dict | None], path: str | Path, title: str = "") -> Path:
    """Write :func:`quantile_figure` of ``metrics`` (strategy name -> window metrics) to the PNG ``path``."""
    path = Path(path)
    fig = quantile_figure(metrics, title)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


__all__ = ["plot_run", "plot_nav_comparison", "plot_quantiles", "quantile_figure", "PARTIAL_DAYS_SHARE"]
