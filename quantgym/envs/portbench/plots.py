"""PortBench plots: NAV curves with drawdowns (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_nav(results: Sequence, title: str, path: Path, dd_tolerance: float | None = None) -> Path:
    """NAV (rebased to 1) of several runs of one period, with the drawdown panel below.

    Parameters
    ----------
    results : EvalResult objects (``agent``, ``nav`` Series) of the same period.
    title : figure title.
    path : PNG file to write.
    dd_tolerance : the profile's drawdown tolerance (positive decimal), drawn as a dashed line.
    """
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    for res in results:
        nav = res.nav / res.nav.iloc[0]
        style = {"lw": 2.2, "color": "black"} if res.agent == "Equal-Weight" else {"lw": 1.4}
        ax.plot(nav.index, nav.values, label=res.agent, **style)
        dd = nav / np.maximum.accumulate(nav.values) - 1.0
        ax2.plot(dd.index, 100 * dd.values, **{k: v for k, v in style.items() if k != "lw"}, lw=1.0)
    ax.axhline(1.0, color="grey", lw=0.6)
    ax.set_ylabel("NAV (start = 1)")
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=3, loc="best")
    ax.grid(alpha=0.3)
    if dd_tolerance is not None:
        ax2.axhline(-100 * dd_tolerance, color="red", ls="--", lw=1.0, label=f"tolerance -{dd_tolerance:.0%}")
        ax2.legend(fontsize=8, loc="lower left")
    ax2.set_ylabel("drawdown %")
    ax2.grid(alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
