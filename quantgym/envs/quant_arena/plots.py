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


def plot_quantiles(runs: dict[str, Any], path: str | Path, title: str = "") -> Path:
    """Grouped bars of next-day return by score quintile for several strategies (bp)."""
    path = Path(path)
    fig, ax = plt.subplots(figsize=(9, 4))
    names = list(runs)
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        q = [np.nan if v is None else v for v in (runs[name] or [])]
        if not q:
            continue
        x = np.arange(len(q)) + i * width
        ax.bar(x, q, width=width, label=name)
    ax.set_xticks(np.arange(5) + 0.4 - width / 2)
    ax.set_xticklabels([f"Q{i + 1}" for i in range(5)])
    ax.axhline(0, color="k", lw=0.5)
    ax.set_ylabel("mean next-day return (bp)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


__all__ = ["plot_run", "plot_nav_comparison", "plot_quantiles"]
