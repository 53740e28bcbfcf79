"""Quant-Arena's section of ``quantgym report`` (:mod:`quantgym.sweep.report`): the table, quantile return
curves and NAV vs market of the sealed window (spec quant_arena §10)."""

from __future__ import annotations

from typing import Any, Sequence

from quantgym.leaderboard import MISSING, Figure, Section, Source, Table, fmt, png, pyplot

from .config import SHARPE_NOTE


# --------------------------------------------------------------------------- Quant-Arena


def _label(r: dict[str, Any]) -> str:
    """The agent, with the track of an eval run (``QuantArena-v0`` and ``-OneShot-v0`` side by side)."""
    track = r.get("track")
    return f"{r.get('agent')} ({track})" if track else str(r.get("agent"))


def section(sources: Sequence[Source], rows: list[dict[str, Any]]) -> Section | None:
    import numpy as np
    import pandas as pd

    runs = [r for s in sources for r in (s.task_doc("quant_arena").get("runs") or []) if isinstance(r, dict)]
    qrows = [r for r in rows if r["task"] == "quant_arena"]
    if not runs and not qrows:
        return None
    sec = Section("Quant-Arena", "quant-arena")

    def pct(x):
        return None if x is None else 100 * x

    # bench runs carry the final scores at top level; eval runs under "final"
    runs = [{**(r.get("final") or {}), **{k: v for k, v in r.items() if k != "final"}} if isinstance(
        r.get("final"), dict) else r for r in runs]
    body = []
    for r in runs:
        m = r.get("sealed") or {}
        of = r.get("overfitting") or {}
        cells = [(pct(m.get("arr")), 1), (pct(m.get("excess_arr")), 1), (m.get("sharpe"), 2),
                 (pct(m.get("max_drawdown")), 1), (m.get("rankic_mean"), 3), (r.get("S_in"), 1), (r.get("S_out"), 1),
                 (r.get("S"), 1), (of.get("dsr"), 2), (of.get("pbo"), 2)]
        body.append([_label(r), *[fmt(x, nd, missing=MISSING) for x, nd in cells],
                     MISSING if not of else str(of.get("n_trials"))])
    if not body:
        body = [[_label(r), MISSING, MISSING, fmt(r["sharpe"], missing=MISSING),
                 fmt(r["maxdd_pct"], 1, missing=MISSING), *[MISSING] * 7] for r in qrows]
    sec.tables.append(Table("Quant-Arena — sealed window", ["agent", "ARR%", "excess ARR%", "Sharpe", "MaxDD%",
                                                             "RankIC", "S_in", "S_out", "S", "DSR", "PBO", "trials"],
                            body,
                            note="Sealed-window metrics net of costs (spec quant_arena §10); S = 0.5 S_in + 0.5 S_out. "
                                 f"{SHARPE_NOTE}. "
                                 "DSR (Deflated Sharpe Ratio of the frozen candidate's research returns) and PBO "
                                 "(probability of backtest overfitting, CSCV over the candidates' research returns) "
                                 "are diagnostics of the research loop, not part of S; both need 2 or more trials "
                                 "(docs/quant_arena.md).",
                            anchor="qa-table"))
    loops = [s.task_doc("quant_arena").get("classical_loop") for s in sources]
    loops = [lp for lp in loops if isinstance(lp, dict)]
    if loops:
        sec.tables.append(Table("Quant-Arena — the classical submissions as one research loop",
                                ["trials", "kept (best S_in)", "research Sharpe", "expected max Sharpe", "DSR", "PBO"],
                                [[str(lp.get("n_trials")), str(lp.get("frozen")),
                                  *[fmt(lp.get(k), missing=MISSING) for k in ("sharpe_research", "sharpe_benchmark",
                                                                              "dsr", "pbo")]]
                                 for lp in loops],
                                note="Annualised research-period (2022-2023) Sharpe ratios, no risk-free rate (spec "
                                     "quant_arena §10.11); the expected maximum is "
                                     "that of as many skill-less trials with the same dispersion (Bailey & López de "
                                     "Prado 2014).", anchor="qa-loop"))
    quant = {_label(r): r.get("sealed") for r in runs if (r.get("sealed") or {}).get("quantile_returns_bp")}
    plt = pyplot()
    if quant:
        from .plots import quantile_figure

        sec.figures.append(Figure("quant_arena_quantiles", "Mean next-day return by score quintile in the sealed "
                                  "window (Q1 = top scores): a useful score falls from Q1 to Q5. Each strategy's "
                                  "means are over the days it scored; one that scored on part of the days only "
                                  "(e.g. market timing, in cash otherwise) is in a panel of its own.",
                                  png(quantile_figure(quant, "Quant-Arena: next-day return by score quintile"))))
    navs = []
    for r in runs:
        nav = r.get("sealed_nav") or {}
        vals = nav.get("nav")
        if nav.get("dates") and vals:
            s = pd.Series([np.nan if v is None else v for v in vals], index=pd.to_datetime(nav["dates"]), dtype=float)
            if np.isfinite(s.iloc[0]) and s.iloc[0] != 0:
                navs.append((str(r.get("agent")), s / s.iloc[0]))
    if navs:
        fig, ax = plt.subplots(figsize=(8, 3.8))
        for a, s in navs:
            ref = a in ("market_reference", "market")
            ax.plot(s.index, s.values, label="market (EW, no costs)" if ref else a,
                    **({"color": "black", "ls": "--", "lw": 1.6} if ref else {"lw": 1.2}))
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.set_ylabel("NAV (start = 1)")
        ax.set_title("Quant-Arena: NAV vs market, sealed window")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        sec.figures.append(Figure("quant_arena_nav", "Sealed-window NAV of each submission against the equal-weight "
                                  "market reference.", png(fig)))
    return sec


