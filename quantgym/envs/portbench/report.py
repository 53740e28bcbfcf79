"""PortBench's sections of ``quantgym report`` (:mod:`quantgym.sweep.report`): the leaderboard per profile
(Sharpe per period, mean Sharpe, Sharpe minus Equal-Weight's, worst stress drawdown, stress gate (spec
portbench §7.2), CEPS); NAV per period with the baselines and, when two or more stage-scored agents exist,
their shaded min–max band (the paper's LLM band); per-stage S1–S5 bars and CEPS; worst stress drawdown
against the Conservative gate; Sharpe relative to Equal-Weight per period; each run's bootstrap intervals
and Ledoit–Wolf test against Equal-Weight (docs/uncertainty.md); and the static QA layer's
per-template accuracies (from ``results.json``: summary.csv carries no QA metric)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Sequence

from quantgym.envs.portbench.config import BENCH_PERIODS, NORMAL_PERIOD, SHARPE_NOTE, stress_verdict
from quantgym.leaderboard import MISSING, Figure, Section, Source, Table, fmt, mean, number, ordered, png, pyplot

#: ordering of PortBench profiles in tables and plots (periods: BENCH_PERIODS; others follow, sorted)
PROFILE_ORDER = ("conservative", "balanced", "aggressive")
EQW = "Equal-Weight"


def _baseline_names() -> set[str]:
    from quantgym.envs.portbench.baselines import BASELINES

    return {c.name for c in BASELINES.values()}


def _stress_periods() -> tuple[str, ...]:
    from quantgym.envs.portbench.config import STRESS_PERIODS

    return tuple(STRESS_PERIODS)


def _tolerance(profile: str) -> float | None:
    from quantgym.envs.portbench.profiles import PROFILES

    p = PROFILES.get(profile)
    return None if p is None else float(p.max_drawdown)


# --------------------------------------------------------------------------- PortBench


def _pb_runs(sources: Sequence[Source]) -> list[dict[str, Any]]:
    runs = []
    for s in sources:
        for r in s.task_doc("portbench").get("runs") or []:
            if isinstance(r, dict) and r.get("agent"):
                runs.append({**r, "_source": s.name})
    return runs


def portbench_tables(rows: list[dict[str, Any]]) -> list[Table]:
    """One leaderboard table per profile: Sharpe per period, mean, minus EqW, worst stress MaxDD, gate, CEPS."""
    pb = [r for r in rows if r["task"] == "portbench" and r["agent"]]
    if not pb:
        return []
    stress = set(_stress_periods())
    periods = ordered((r["period"] for r in pb), BENCH_PERIODS)
    tables = []
    for prof in ordered((r["profile"] for r in pb), PROFILE_ORDER) + ([None] if any(
            r["profile"] is None for r in pb) else []):
        sub = [r for r in pb if r["profile"] == prof]
        by: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
        for r in sub:
            by[r["agent"]][r["period"]].append(r)
        eqw = {p: mean(x["sharpe"] for x in by.get(EQW, {}).get(p, [])) for p in periods}
        entries = []
        for agent, per in by.items():
            sh = {p: mean(x["sharpe"] for x in per.get(p, [])) for p in periods}
            mean_sh = mean(sh.values())
            rel = mean(sh[p] - eqw[p] for p in periods if sh[p] is not None and eqw[p] is not None)
            mdds = [x["maxdd_pct"] for p in periods if p in stress for x in per.get(p, [])]
            worst = min((m for m in mdds if m is not None), default=None)
            # §7.2 (config.stress_verdict) over the stress windows' recorded gates (config.period_gate's,
            # every run of a window); without them, the normal_2024 rows' recorded gates
            passed = {p: all(g) for p in stress if (g := [x["gate"] for x in per.get(p, [])]) and None not in g}
            gate = stress_verdict(passed)
            ngates = [x["gate"] for x in per.get(NORMAL_PERIOD, []) if x["gate"] is not None]
            if gate is None and ngates:
                gate = all(ngates)
            ceps = mean(x["ceps"] for p in per for x in per[p])
            n = sum(len(v) for v in per.values())
            entries.append((agent, sh, mean_sh, rel, worst, gate, ceps, n))
        entries.sort(key=lambda e: -math.inf if e[2] is None else e[2], reverse=True)
        tol = _tolerance(prof) if prof else None
        cols = ["#", "agent"] + [f"Sharpe {p}" for p in periods] + ["mean Sharpe", "Δ vs EqW", "worst stress MaxDD%",
                                                                   "gate", "CEPS", "runs"]
        body = [[str(i + 1), a, *[fmt(sh[p], 3, missing=MISSING) for p in periods], fmt(m, 3, missing=MISSING),
                 fmt(rel, 3, missing=MISSING), fmt(w, missing=MISSING), fmt(g, missing=MISSING),
                 fmt(c, 3, missing=MISSING), str(n)] for i, (a, sh, m, rel, w, g, c, n) in enumerate(entries)]
        title = f"PortBench — {prof.capitalize() if prof else 'no profile'}" + (
            f" (drawdown tolerance {tol:.0%})" if tol is not None else "")
        tables.append(Table(title=title, columns=cols, rows=body, anchor=f"pb-{prof or 'none'}",
                            note=f"{SHARPE_NOTE}: it lowers each Sharpe by rf/volatility, most for "
                                 "low-volatility portfolios, also in windows whose T-bills paid near 0 (china_2015, "
                                 "covid_2020). Sorted by mean Sharpe over the periods shown. Δ vs EqW: mean of "
                                 "(Sharpe − Equal-Weight's Sharpe) over periods. gate: |MaxDD| ≤ the profile's "
                                 "tolerance in all three stress windows (spec §7.2); – when not all were run. "
                                 "Several runs of one cell (seeds, sources) are averaged."))
    return tables


def _interval(iv: dict[str, Any], stat: str, scale: float = 1.0, nd: int = 2) -> str:
    """``est [lo, hi]`` of one statistic of an uncertainty block (``scale`` 100 for percent)."""
    d = iv.get(stat) or {}

    def f(x: Any) -> str:
        return fmt(None if number(x) is None else number(x) * scale, nd, missing=MISSING)

    return f"{f(d.get('est'))} [{f(d.get('lo'))}, {f(d.get('hi'))}]"


def uncertainty_table(runs: list[dict[str, Any]]) -> Table | None:
    """Per run (agent × profile × period): the 95 % bootstrap intervals and the Ledoit–Wolf test vs EqW,
    beside the spec's strict beat-EqW rule (from results.json ``uncertainty``, written by the bench)."""
    from quantgym.envs.portbench.uncertainty import p_cell

    with_u = [r for r in runs if isinstance(r.get("uncertainty"), dict)]
    if not with_u:
        return None
    order = {p: i for i, p in enumerate(ordered((r.get("period") for r in with_u), BENCH_PERIODS))}
    multi = len({r.get("_source") for r in with_u}) > 1
    body = []
    for r in sorted(with_u, key=lambda r: (order.get(r.get("period"), 99), r.get("profile") or "", r["agent"])):
        u = r["uncertainty"]
        iv, t = u.get("intervals") or {}, u.get("vs_equal_weight") or {}
        beats = None if r["agent"] == EQW else t.get("beats_strict")
        p = number(t.get("p"))
        body.append([str(r.get("period") or "–"), r["agent"], str(r.get("profile") or "all"),
                     _interval(iv, "sharpe"), _interval(iv, "total_return", 100), _interval(iv, "volatility", 100),
                     _interval(iv, "max_drawdown", 100),
                     "{} [{}, {}]".format(*(fmt(number(t.get(k)), missing=MISSING) for k in ("delta", "lo", "hi"))),
                     p_cell(p), fmt(beats, missing=MISSING)]
                    + ([str(r.get("_source"))] if multi else []))
    boot = (with_u[0]["uncertainty"].get("config") or {})
    return Table("PortBench — uncertainty of each run (95 % intervals; Sharpe difference vs Equal-Weight)",
                 ["period", "agent", "profile", "Sharpe", "Ret%", "Vol%", "MaxDD%", "Δ Sharpe vs EqW", "p",
                  "beats EqW (strict)"] + (["source"] if multi else []), body, anchor="pb-uncertainty",
                 note=f"{SHARPE_NOTE}. est [lo, hi]: stationary block bootstrap (Politis & Romano 1994) of the run's daily returns, "
                      "percentile interval, block length by Politis & White (2004); Ret% is the period's total "
                      "return. Δ Sharpe vs EqW: paired with Equal-Weight's daily returns, Ledoit & Wolf (2008) "
                      "studentised circular block bootstrap interval and two-sided p-value. 'beats EqW (strict)' is "
                      "the spec's rule (Sharpe strictly greater, §7.3); p says whether that difference is "
                      "distinguishable from noise. Baselines (profile 'all') are profile-independent. "
                      f"Seed {boot.get('seed')}, B = {boot.get('n_boot')}. See docs/uncertainty.md.")


def plot_nav_periods(runs: list[dict[str, Any]]) -> Figure | None:
    """NAV (start = 1) per period: baselines as lines, stage-scored agents as a shaded min–max band when ≥ 2."""
    import numpy as np
    import pandas as pd

    navs = []
    for r in runs:
        nav = r.get("nav") or {}
        dates, vals = nav.get("dates"), nav.get("values")
        if not dates or not vals or r.get("period") is None:
            continue
        s = pd.Series([np.nan if v is None else v for v in vals], index=pd.to_datetime(dates), dtype=float)
        if not np.isfinite(s.iloc[0]) or s.iloc[0] == 0:
            continue
        navs.append((r["period"], r["agent"], s / s.iloc[0]))
    if not navs:
        return None
    plt = pyplot()
    base = _baseline_names()
    periods = ordered((p for p, _, _ in navs), BENCH_PERIODS)
    ncol = 2 if len(periods) > 1 else 1
    nrow = math.ceil(len(periods) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(6.2 * ncol, 3.6 * nrow), squeeze=False)
    for ax, per in zip(axes.flat, periods):
        seen = set()
        agents = [(a, s) for p, a, s in navs if p == per]
        others = [(a, s) for a, s in agents if a not in base]
        for a, s in agents:
            if a in base and a not in seen:
                seen.add(a)
                style = {"lw": 2.0, "color": "black"} if a == EQW else {"lw": 1.1}
                ax.plot(s.index, s.values, label=a, **style)
        if len({a for a, _ in others}) >= 2:
            df = pd.concat([s for _, s in others], axis=1).sort_index().ffill()
            ax.fill_between(df.index, df.min(axis=1), df.max(axis=1), color="tab:cyan", alpha=0.28,
                            label=f"agents band ({len({a for a, _ in others})} agents, min–max)")
            ax.plot(df.index, df.median(axis=1), color="teal", lw=1.2, ls="--", label="agents median")
        else:
            for a, s in others:
                ax.plot(s.index, s.values, lw=1.6, ls="--", label=a)
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.set_title(per)
        ax.grid(alpha=0.3)
        ax.tick_params(axis="x", labelrotation=25, labelsize=7)
        ax.legend(fontsize=6.5, loc="best")
    for ax in list(axes.flat)[len(periods):]:
        ax.axis("off")
    fig.suptitle("PortBench NAV per period (start = 1): baselines and agents")
    fig.tight_layout()
    return Figure("portbench_nav", "NAV per period with the six baselines (Equal-Weight in black); when two or "
                  "more stage-scored agents exist their runs form the shaded min–max band (median dashed).",
                  png(fig))


def plot_stage_scores(runs: list[dict[str, Any]]) -> Figure | None:
    """Grouped bars: mean S1–S5 stage score and CEPS per stage-scored agent."""
    import numpy as np

    by: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        if isinstance(r.get("stage_scores"), dict):
            by[r["agent"]].append(r)
    if not by:
        return None
    plt = pyplot()
    stages = ["S1", "S2", "S3", "S4", "S5", "CEPS"]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / len(by)
    for i, (agent, rs) in enumerate(sorted(by.items())):
        vals = [mean(r["stage_scores"].get(s) for r in rs) for s in stages[:5]] + [mean(r.get("ceps") for r in rs)]
        ax.bar(np.arange(len(stages)) + i * width, [np.nan if v is None else v for v in vals], width, label=agent)
    ax.set_xticks(np.arange(len(stages)) + 0.4 - width / 2, stages)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean score (0–1)")
    ax.set_title("PortBench per-stage scores and CEPS (mean over runs)")
    ax.legend(fontsize=7, ncol=3)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return Figure("portbench_stages", "Mean S1–S5 stage scores and CEPS per agent (spec §6–§7). Classical baselines "
                  "bypass the pipeline (§4.6) and have none.", png(fig))


def plot_stress_drawdown(rows: list[dict[str, Any]]) -> Figure | None:
    """Horizontal bars: worst MaxDD over the stress windows per agent vs the Conservative gate."""
    stress = set(_stress_periods())
    pb = [r for r in rows if r["task"] == "portbench" and r["period"] in stress and r["maxdd_pct"] is not None]
    if not pb:
        return None
    cons = [r for r in pb if r["profile"] == "conservative"]
    use = cons or pb
    worst: dict[str, float] = {}
    for r in use:
        worst[r["agent"]] = min(worst.get(r["agent"], 0.0), r["maxdd_pct"])
    tol = 100 * (_tolerance("conservative") or 0.10)
    plt = pyplot()
    items = sorted(worst.items(), key=lambda kv: kv[1])
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(items) + 1.4))
    ax.barh([a for a, _ in items], [v for _, v in items],
            color=["tab:green" if v >= -tol else "tab:red" for _, v in items])
    ax.axvline(-tol, color="black", ls="--", lw=1.2, label=f"Conservative gate −{tol:.0f}%")
    ax.set_xlabel("worst max drawdown over the stress windows (%)")
    ax.set_title("Worst-case stress drawdown vs the Conservative gate"
                 + ("" if cons else " (all profiles)"))
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return Figure("portbench_stress_dd", f"Worst MaxDD over {', '.join(sorted(stress))} per agent "
                  f"({'Conservative profile' if cons else 'all profiles'}); green passes the −{tol:.0f}% gate.",
                  png(fig))


def plot_sharpe_vs_eqw(rows: list[dict[str, Any]]) -> Figure | None:
    """Grouped bars: Sharpe minus Equal-Weight's per period for every other agent."""
    import numpy as np

    pb = [r for r in rows if r["task"] == "portbench" and r["sharpe"] is not None and r["period"]]
    periods = ordered((r["period"] for r in pb), BENCH_PERIODS)
    sh: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in pb:
        sh[(r["agent"], r["period"])].append(r["sharpe"])
    eqw = {p: mean(sh.get((EQW, p), [])) for p in periods}
    agents = sorted({a for a, _ in sh if a != EQW})
    if not agents or all(v is None for v in eqw.values()):
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / len(agents)
    for i, a in enumerate(agents):
        vals = [(mean(sh[(a, p)]) - eqw[p]) if sh.get((a, p)) and eqw[p] is not None else np.nan for p in periods]
        ax.bar(np.arange(len(periods)) + i * width, vals, width, label=a)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(np.arange(len(periods)) + 0.4 - width / 2, periods)
    ax.set_ylabel("Sharpe − Equal-Weight Sharpe")
    ax.set_title("Sharpe relative to Equal-Weight across periods")
    ax.legend(fontsize=7, ncol=3)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return Figure("portbench_sharpe_vs_eqw", "Sharpe minus Equal-Weight's Sharpe per period (mean over profiles, seeds "
                  "and sources); above zero beats EqW.", png(fig))


def _display_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """PortBench summary rows with the display name in ``agent`` (summary.csv holds a baseline's CLI key,
    ``cov_risk_parity``; results.json's runs hold the display name the tables and plots use)."""
    from quantgym.envs.portbench.baselines import baseline_display_name

    return [{**r, "agent": baseline_display_name(r["agent"])} if r.get("task") == "portbench" and r.get("agent")
            else r for r in rows]


def section(sources: Sequence[Source], rows: list[dict[str, Any]]) -> Section | None:
    runs = _pb_runs(sources)
    rows = _display_rows(rows)
    tables = portbench_tables(rows)
    if not tables and not runs:
        return None
    sec = Section("PortBench", "portbench", tables=tables)
    unc = uncertainty_table(runs)
    if unc is not None:
        sec.tables.append(unc)
    for f in (plot_nav_periods(runs), plot_stage_scores(runs), plot_stress_drawdown(rows), plot_sharpe_vs_eqw(rows)):
        if f is not None:
            sec.figures.append(f)
    if not any(isinstance(r.get("stage_scores"), dict) for r in runs):
        sec.notes.append("No stage-scored (S1–S5) runs in the inputs: only classical baselines, which bypass the "
                         "pipeline (spec §4.6), so no stage bars, CEPS or agents band.")
    return sec


# --------------------------------------------------------------------------- PortBench-QA

#: per-template table of the static QA (spec portbench §9.5/§10.4): accuracy columns in the page's order
QA_COLUMNS = ("T1", "T2", "T3", "T4", "T5", "T6", "T7", "Mean", "T4_r", "T5_r", "F", "J")
QA_REGIMES = ("Bull", "Bear", "Side.", "Crisis")


def static_qa_section(sources: Sequence[Source], rows: list[dict[str, Any]]) -> Section | None:
    """PortBench-QA accuracies per template from ``results.json`` (``tasks.portbench_qa.runs[*].metrics``).

    ``summary.csv`` holds only (agent, split) for QA — no accuracy fits its common columns — so the
    table is built from the runs written by ``quantgym qa`` (quantgym/envs/portbench/static_qa/cli.py):
    ``metrics`` maps T1..T7, Mean, T4_r, T5_r, F, J and the regime columns to accuracies in [0, 1]
    (null when a column had no item), ``n`` the items per template.
    """
    runs = [(s, r) for s in sources for r in (s.task_doc("portbench_qa").get("runs") or [])
            if isinstance(r, dict) and r.get("agent") is not None]
    qrows = [r for r in rows if r["task"] == "portbench_qa"]
    if not runs and not qrows:
        return None
    sec = Section("PortBench-QA", "portbench-qa")
    if not runs:
        sec.notes.append("PortBench-QA rows present but no per-template accuracies stored in results.json "
                         "(summary.csv carries no QA metric).")
        return sec
    multi = len({s.name for s, _ in runs}) > 1
    regimes = [c for c in QA_REGIMES if any(number((r.get("metrics") or {}).get(c)) is not None for _, r in runs)]
    entries = []
    for s, r in runs:
        m = r.get("metrics") or {}
        n = r.get("n") or {}
        n_items = sum(int(v) for k, v in n.items() if k in QA_COLUMNS[:7] and isinstance(v, (int, float)))
        cells = [fmt(number(m.get(c)), 3, missing=MISSING) for c in (*QA_COLUMNS, *regimes)]
        entries.append((number(m.get("Mean")), [str(r["agent"]), *cells, str(n_items)] + ([s.name] if multi else [])))
    entries.sort(key=lambda e: -math.inf if e[0] is None else e[0], reverse=True)
    body = [[str(i + 1), *cells] for i, (_, cells) in enumerate(entries)]
    cfgs = {s.name: s.task_doc("portbench_qa").get("config") or {} for s, _ in runs}
    desc = "; ".join(sorted({f"split {c.get('split', '?')}, {c.get('n_per_template', '?')} per template, "
                             f"fidelity {c.get('fidelity', '?')}" for c in cfgs.values()}))
    sec.tables.append(Table("PortBench-QA — accuracy per template", ["#", "agent", *QA_COLUMNS, *regimes, "items"]
                            + (["source"] if multi else []), body, anchor="pbqa-table",
                            note="Share of items answered correctly (score ≥ 0.99), spec portbench §9.5/§10.4: "
                                 "T1–T7 templates, Mean over T1–T7, T4_r/T5_r the restricted variants, F = formula "
                                 "templates, J = judgment templates, then per market regime. Sorted by Mean. "
                                 + (f"Settings: {desc}." if desc else "")))
    for s, _ in runs[:1]:
        sp = s.task_doc("portbench_qa").get("spearman_qa_ceps")
        if isinstance(sp, dict) and number(sp.get("rho")) is not None:
            sec.notes.append(f"QA–CEPS (Balanced) Spearman ρ = {sp['rho']:.4f} over {sp.get('n')} agents "
                             "(paper: −0.47).")
    return sec


