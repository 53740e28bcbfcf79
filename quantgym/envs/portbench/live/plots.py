"""Plots of a live run (matplotlib, Agg backend): per-decision lookback CEPS and mean stage scores
(the paper's real-time figure, spec §2.5), and the NAV over the live window."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

STAGE_KEYS = ("S1", "S2", "S3", "S4", "S5")


def plot_live_ceps(records: Sequence[dict[str, Any]], title: str, path: str | Path) -> Path:
    """Per-decision lookback CEPS over the live window (top) and mean stage scores S1–S5 (bottom).

    Parameters
    ----------
    records : per-decision env records (``date``, ``ceps``, ``stage_scores``), in date order. Records
        without scores (direct-allocation baselines, §4.6) give an annotated empty figure.
    title : figure title.
    path : PNG file to write.

    Returns
    -------
    pathlib.Path
    """
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 6.2), gridspec_kw={"height_ratios": [3, 2]})
    scored = [r for r in records if r.get("ceps") is not None]
    if scored:
        # one x position per decision (trading day), labelled with its date
        x = np.arange(len(scored))
        labels = [pd.Timestamp(r["date"]).strftime("%m-%d") for r in scored]
        ceps = np.array([r["ceps"] for r in scored], dtype=float)
        for s in STAGE_KEYS:
            ax.plot(x, [r["stage_scores"].get(s, np.nan) for r in scored], lw=0.9, alpha=0.6, marker=".", label=s)
        ax.plot(x, ceps, marker="o", lw=2.0, color="black", label="CEPS (lookback oracle)")
        ax.axhline(float(ceps.mean()), color="black", ls="--", lw=1.0, label=f"run CEPS {ceps.mean():.3f}")
        ax.set_ylim(-0.02, 1.05)
        step = max(1, len(x) // 14)
        ax.set_xticks(x[::step], labels[::step], fontsize=8)
        ax.set_xlabel("decision date (data through the previous close)")
        ax.legend(fontsize=7, ncol=4, loc="lower left")
        means = [float(np.mean([r["stage_scores"].get(s, 0.0) for r in scored])) for s in STAGE_KEYS]
        bars = ax2.bar(STAGE_KEYS, means, color="#4c72b0")
        for b, m in zip(bars, means):
            ax2.text(b.get_x() + b.get_width() / 2, m + 0.02, f"{m:.3f}", ha="center", fontsize=8)
        ax2.set_ylim(0, 1.1)
        ax2.set_ylabel("mean stage score")
    else:
        ax.text(0.5, 0.5, "no stage scores: direct-allocation baseline (spec §4.6)", ha="center",
                transform=ax.transAxes)
        ax2.axis("off")
    ax.set_ylabel("score")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax2.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_live_nav(nav: pd.Series, title: str, path: str | Path) -> Path:
    """NAV (start = 1) over the live window, one point per trading day plus the initial point."""
    fig, ax = plt.subplots(figsize=(9, 3.6))
    v = nav / nav.iloc[0]
    ax.plot(v.index, v.values, marker=".", lw=1.5)
    ax.axhline(1.0, color="grey", lw=0.6)
    ax.set_ylabel("NAV (start = 1)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d"))
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["plot_live_ceps", "plot_live_nav"]
