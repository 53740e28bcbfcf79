"""``quantgym report``: merge bench / eval / sweep output folders into one leaderboard.

Inputs are folders in the common results schema (:mod:`quantgym.results`,
``shared/design.md`` §6): ``summary.csv`` and/or ``results.json``; a sweep folder whose
final files are missing (an interrupted sweep) is read from its ``runs/*.json``. Fields a
task does not write are skipped, never an error.

Outputs (``OUT``):

- ``leaderboard.md``: markdown tables (READMEs, PRs) linking ``img/*.png``;
- ``leaderboard.html``: one self-contained page (CSS inline, plots as base64 PNG, no
  script, no external asset);
- ``summary.csv``: every input row in the common columns plus a final ``source`` column;
- ``img/*.png``: the plots.

Contents: PortBench leaderboard per profile (Sharpe per period, mean Sharpe, Sharpe minus
Equal-Weight's, worst stress drawdown, stress gate (spec portbench §7.2), CEPS); NAV per
period with the baselines and, when two or more stage-scored agents exist, their shaded
min–max band (the paper's LLM band); per-stage S1–S5 bars and CEPS; worst stress drawdown
against the Conservative gate; Sharpe relative to Equal-Weight per period; PortBench-QA
per-template accuracies (from ``results.json``: summary.csv carries no QA metric); Quant-Arena table,
quantile return curves and NAV vs market; Market-Bench pass@k / correct@k / MAE tables (from
``results.json``).
"""

from __future__ import annotations

import base64
import csv
import datetime as _dt
import html
import io
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from quantgym.results import SUMMARY_COLUMNS

#: ordering of PortBench periods and profiles in tables and plots (others follow, sorted)
PERIOD_ORDER = ("normal_2024", "china_2015", "covid_2020", "crypto_2022")
PROFILE_ORDER = ("conservative", "balanced", "aggressive")
EQW = "Equal-Weight"


class ReportError(ValueError):
    """An input folder without results (no summary.csv, results.json or runs/)."""


# --------------------------------------------------------------------------- loading


def _num(cell: Any) -> float | None:
    if cell is None or cell == "":
        return None
    try:
        v = float(cell)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _gate(cell: Any) -> bool | None:
    if isinstance(cell, bool):
        return cell
    if cell in ("true", "True", "1"):
        return True
    if cell in ("false", "False", "0"):
        return False
    return None


def _row(d: dict[str, Any], source: str) -> dict[str, Any]:
    r = {c: d.get(c) for c in SUMMARY_COLUMNS}
    for c in ("sharpe", "ret_pct", "maxdd_pct", "vol_pct", "ceps"):
        r[c] = _num(r[c])
    r["gate"] = _gate(r["gate"])
    for c in ("task", "agent", "profile", "period"):
        r[c] = None if r[c] in (None, "") else str(r[c])
    r["source"] = source
    return r


@dataclass
class Source:
    """One input folder: its summary rows and its ``results.json`` document (may be empty)."""

    path: Path
    name: str
    rows: list[dict[str, Any]]
    doc: dict[str, Any]

    @property
    def command(self) -> str:
        meta = self.doc.get("meta") or {}
        tokens = str(meta.get("command") or "").split()
        if not tokens:
            return "?"
        tokens[0] = Path(tokens[0]).name  # "/usr/local/bin/quantgym bench ..." -> "quantgym bench ..."
        cmd = " ".join(tokens)
        return cmd if len(cmd) <= 90 else cmd[:89] + "…"

    @property
    def created(self) -> str:
        return str(self.doc.get("created") or "")

    def task_doc(self, task: str) -> dict[str, Any]:
        return ((self.doc.get("tasks") or {}).get(task)) or {}


def load_source(path: str | Path, name: str | None = None) -> Source:
    """Read one results folder (see module docstring).

    Raises
    ------
    ReportError
        The folder has no ``summary.csv``, ``results.json`` or ``runs/*.json``.
    """
    p = Path(path)
    label = name or p.name
    doc: dict[str, Any] = {}
    if (p / "results.json").is_file():
        doc = json.loads((p / "results.json").read_text())
    rows: list[dict[str, Any]] = []
    if (p / "summary.csv").is_file():
        with (p / "summary.csv").open(newline="") as fh:
            rows = [_row(d, label) for d in csv.DictReader(fh)]
    if not doc and not rows and (p / "runs").is_dir():
        from quantgym.sweep.runner import sections_from_records

        recs = []
        for f in sorted((p / "runs").glob("*.json")):
            try:
                recs.append(json.loads(f.read_text()))
            except ValueError:
                continue
        sections = sections_from_records(recs)
        from quantgym.results import to_jsonable

        doc = {"meta": {"command": "sweep (partial: read from runs/)"},
               "tasks": {s.task: {"runs": to_jsonable(s.runs), **to_jsonable(s.extra)} for s in sections}}
        rows = [_row(to_jsonable(r), label) for s in sections for r in s.rows]
    if not doc and not rows:
        raise ReportError(f"{p}: no summary.csv, results.json or runs/ (not a quantgym results folder)")
    return Source(path=p, name=label, rows=rows, doc=doc)


def _unique_names(paths: Sequence[Path]) -> list[str]:
    names = [p.name or str(p) for p in paths]
    out = []
    for i, (p, n) in enumerate(zip(paths, names)):
        out.append(n if names.count(n) == 1 else f"{p.parent.name}/{n}#{i + 1}")
    return out


# --------------------------------------------------------------------------- helpers


def _ordered(values: Iterable[str | None], order: Sequence[str]) -> list[str]:
    vals = {v for v in values if v}
    return [v for v in order if v in vals] + sorted(vals - set(order))


def _mean(xs: Iterable[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return sum(v) / len(v) if v else None


def _fmt(x: Any, nd: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "✓" if x else "✗"
    if isinstance(x, (int, float)):
        return f"{x:.{nd}f}"
    return str(x)


def _baseline_names() -> set[str]:
    try:
        from quantgym.agents.baselines import BASELINES

        return {c.name for c in BASELINES.values()}
    except Exception:  # pragma: no cover - baselines module always present in the package
        return {EQW}


def _stress_periods() -> tuple[str, ...]:
    from quantgym.envs.portbench.config import STRESS_PERIODS

    return tuple(STRESS_PERIODS)


def _tolerance(profile: str) -> float | None:
    from quantgym.envs.portbench.profiles import PROFILES

    p = PROFILES.get(profile)
    return None if p is None else float(p.max_drawdown)


@dataclass
class Table:
    """A report table: title, column names, rows of cells (already formatted strings), note."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    anchor: str = ""


@dataclass
class Figure:
    """A report plot: name (file stem), caption, PNG bytes."""

    name: str
    caption: str
    png: bytes


@dataclass
class Section:
    title: str
    anchor: str
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
    periods = _ordered((r["period"] for r in pb), PERIOD_ORDER)
    tables = []
    for prof in _ordered((r["profile"] for r in pb), PROFILE_ORDER) + ([None] if any(
            r["profile"] is None for r in pb) else []):
        sub = [r for r in pb if r["profile"] == prof]
        by: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
        for r in sub:
            by[r["agent"]][r["period"]].append(r)
        eqw = {p: _mean(x["sharpe"] for x in by.get(EQW, {}).get(p, [])) for p in periods}
        entries = []
        for agent, per in by.items():
            sh = {p: _mean(x["sharpe"] for x in per.get(p, [])) for p in periods}
            mean_sh = _mean(sh.values())
            rel = _mean(sh[p] - eqw[p] for p in periods if sh[p] is not None and eqw[p] is not None)
            mdds = [x["maxdd_pct"] for p in periods if p in stress for x in per.get(p, [])]
            worst = min((m for m in mdds if m is not None), default=None)
            sgates = [x["gate"] for p in periods if p in stress for x in per.get(p, [])]
            ngates = [x["gate"] for x in per.get("normal_2024", []) if x["gate"] is not None]
            if sgates and stress <= set(per) and all(g is not None for g in sgates):
                gate = all(sgates)
            elif ngates:
                gate = all(ngates)
            elif any(g is False for g in sgates):
                gate = False
            else:
                gate = None
            ceps = _mean(x["ceps"] for p in per for x in per[p])
            n = sum(len(v) for v in per.values())
            entries.append((agent, sh, mean_sh, rel, worst, gate, ceps, n))
        entries.sort(key=lambda e: -math.inf if e[2] is None else e[2], reverse=True)
        tol = _tolerance(prof) if prof else None
        cols = ["#", "agent"] + [f"Sharpe {p}" for p in periods] + ["mean Sharpe", "Δ vs EqW", "worst stress MaxDD%",
                                                                   "gate", "CEPS", "runs"]
        body = [[str(i + 1), a, *[_fmt(sh[p], 3) for p in periods], _fmt(m, 3), _fmt(rel, 3), _fmt(w), _fmt(g),
                 _fmt(c, 3), str(n)] for i, (a, sh, m, rel, w, g, c, n) in enumerate(entries)]
        title = f"PortBench — {prof.capitalize() if prof else 'no profile'}" + (
            f" (drawdown tolerance {tol:.0%})" if tol is not None else "")
        tables.append(Table(title=title, columns=cols, rows=body, anchor=f"pb-{prof or 'none'}",
                            note="Sorted by mean Sharpe over the periods shown (rf 4%, 252 d). Δ vs EqW: mean of "
                                 "(Sharpe − Equal-Weight's Sharpe) over periods. gate: |MaxDD| ≤ the profile's "
                                 "tolerance in all three stress windows (spec §7.2); – when not all were run. "
                                 "Several runs of one cell (seeds, sources) are averaged."))
    return tables


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
    plt = _plt()
    base = _baseline_names()
    periods = _ordered((p for p, _, _ in navs), PERIOD_ORDER)
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
                  _png(fig))


def plot_stage_scores(runs: list[dict[str, Any]]) -> Figure | None:
    """Grouped bars: mean S1–S5 stage score and CEPS per stage-scored agent."""
    import numpy as np

    by: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        if isinstance(r.get("stage_scores"), dict):
            by[r["agent"]].append(r)
    if not by:
        return None
    plt = _plt()
    stages = ["S1", "S2", "S3", "S4", "S5", "CEPS"]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / len(by)
    for i, (agent, rs) in enumerate(sorted(by.items())):
        vals = [_mean(r["stage_scores"].get(s) for r in rs) for s in stages[:5]] + [_mean(r.get("ceps") for r in rs)]
        ax.bar(np.arange(len(stages)) + i * width, [np.nan if v is None else v for v in vals], width, label=agent)
    ax.set_xticks(np.arange(len(stages)) + 0.4 - width / 2, stages)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean score (0–1)")
    ax.set_title("PortBench per-stage scores and CEPS (mean over runs)")
    ax.legend(fontsize=7, ncol=3)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return Figure("portbench_stages", "Mean S1–S5 stage scores and CEPS per agent (spec §6–§7). Classical baselines "
                  "bypass the pipeline (§4.6) and have none.", _png(fig))


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
    plt = _plt()
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
                  _png(fig))


def plot_sharpe_vs_eqw(rows: list[dict[str, Any]]) -> Figure | None:
    """Grouped bars: Sharpe minus Equal-Weight's per period for every other agent."""
    import numpy as np

    pb = [r for r in rows if r["task"] == "portbench" and r["sharpe"] is not None and r["period"]]
    periods = _ordered((r["period"] for r in pb), PERIOD_ORDER)
    sh: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in pb:
        sh[(r["agent"], r["period"])].append(r["sharpe"])
    eqw = {p: _mean(sh.get((EQW, p), [])) for p in periods}
    agents = sorted({a for a, _ in sh if a != EQW})
    if not agents or all(v is None for v in eqw.values()):
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / len(agents)
    for i, a in enumerate(agents):
        vals = [(_mean(sh[(a, p)]) - eqw[p]) if sh.get((a, p)) and eqw[p] is not None else np.nan for p in periods]
        ax.bar(np.arange(len(periods)) + i * width, vals, width, label=a)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(np.arange(len(periods)) + 0.4 - width / 2, periods)
    ax.set_ylabel("Sharpe − Equal-Weight Sharpe")
    ax.set_title("Sharpe relative to Equal-Weight across periods")
    ax.legend(fontsize=7, ncol=3)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return Figure("portbench_sharpe_vs_eqw", "Sharpe minus Equal-Weight's Sharpe per period (mean over profiles, seeds "
                  "and sources); above zero beats EqW.", _png(fig))


def portbench_section(sources: Sequence[Source], rows: list[dict[str, Any]]) -> Section | None:
    runs = _pb_runs(sources)
    tables = portbench_tables(rows)
    if not tables and not runs:
        return None
    sec = Section("PortBench", "portbench", tables=tables)
    for f in (plot_nav_periods(runs), plot_stage_scores(runs), plot_stress_drawdown(rows), plot_sharpe_vs_eqw(rows)):
        if f is not None:
            sec.figures.append(f)
    if not any(isinstance(r.get("stage_scores"), dict) for r in runs):
        sec.notes.append("No stage-scored (S1–S5) runs in the inputs: only classical baselines, which bypass the "
                         "pipeline (spec §4.6), so no stage bars, CEPS or agents band.")
    return sec


# --------------------------------------------------------------------------- Quant-Arena


def quant_arena_section(sources: Sequence[Source], rows: list[dict[str, Any]]) -> Section | None:
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
        body.append([str(r.get("agent")), _fmt(pct(m.get("arr")), 1), _fmt(pct(m.get("excess_arr")), 1),
                     _fmt(m.get("sharpe")), _fmt(pct(m.get("max_drawdown")), 1), _fmt(m.get("rankic_mean"), 3),
                     _fmt(r.get("S_in"), 1), _fmt(r.get("S_out"), 1), _fmt(r.get("S"), 1)])
    if not body:
        body = [[r["agent"], "–", "–", _fmt(r["sharpe"]), _fmt(r["maxdd_pct"], 1), "–", "–", "–", "–"] for r in qrows]
    sec.tables.append(Table("Quant-Arena — sealed window", ["agent", "ARR%", "excess ARR%", "Sharpe", "MaxDD%",
                                                             "RankIC", "S_in", "S_out", "S"], body,
                            note="Sealed-window metrics net of costs (spec quant_arena §10); S = 0.5 S_in + 0.5 S_out.",
                            anchor="qa-table"))
    quant = {str(r.get("agent")): (r.get("sealed") or {}).get("quantile_returns_bp") for r in runs}
    quant = {a: q for a, q in quant.items() if q}
    plt = _plt()
    if quant:
        fig, ax = plt.subplots(figsize=(8, 3.6))
        for a, q in quant.items():
            ax.plot([f"Q{i + 1}" for i in range(len(q))], [np.nan if v is None else v for v in q], marker="o", label=a)
        ax.axhline(0, color="black", lw=0.6)
        ax.set_ylabel("mean next-day return (bp)")
        ax.set_title("Quant-Arena: next-day return by score quantile (Q1 = top)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        sec.figures.append(Figure("quant_arena_quantiles", "Quantile return curves of the sealed window: a useful "
                                  "score falls from Q1 to the last quantile.", _png(fig)))
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
                                  "market reference.", _png(fig)))
    return sec


# --------------------------------------------------------------------------- PortBench-QA

#: per-template table of the static QA (spec portbench §9.5/§10.4): accuracy columns in the page's order
QA_COLUMNS = ("T1", "T2", "T3", "T4", "T5", "T6", "T7", "Mean", "T4_r", "T5_r", "F", "J")
QA_REGIMES = ("Bull", "Bear", "Side.", "Crisis")


def portbench_qa_section(sources: Sequence[Source], rows: list[dict[str, Any]]) -> Section | None:
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
    regimes = [c for c in QA_REGIMES if any(_num((r.get("metrics") or {}).get(c)) is not None for _, r in runs)]
    entries = []
    for s, r in runs:
        m = r.get("metrics") or {}
        n = r.get("n") or {}
        n_items = sum(int(v) for k, v in n.items() if k in QA_COLUMNS[:7] and isinstance(v, (int, float)))
        entries.append((_num(m.get("Mean")), [str(r["agent"]), *[_fmt(_num(m.get(c)), 3) for c in QA_COLUMNS],
                                               *[_fmt(_num(m.get(c)), 3) for c in regimes], str(n_items)]
                        + ([s.name] if multi else [])))
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
        if isinstance(sp, dict) and _num(sp.get("rho")) is not None:
            sec.notes.append(f"QA–CEPS (Balanced) Spearman ρ = {sp['rho']:.4f} over {sp.get('n')} agents "
                             "(paper: −0.47).")
    return sec


# --------------------------------------------------------------------------- Market-Bench


def _mb_scores(sources: Sequence[Source]) -> list[dict[str, Any]]:
    scores: list[dict[str, Any]] = []
    for s in sources:
        t = s.task_doc("market_bench")
        if t.get("scores"):
            scores += [dict(x, _source=s.name) for x in t["scores"] if isinstance(x, dict)]
        elif t.get("runs"):
            try:  # recompute from attempt records when the table was not stored
                from quantgym.envs.market_bench.bench import records_to_attempts
                from quantgym.envs.market_bench.scoring import score_table

                recs = [x for r in t["runs"] for x in (r.get("records") if isinstance(r.get("records"), list)
                                                          else [r])]
                df = score_table(records_to_attempts(recs))
                from quantgym.results import to_jsonable

                scores += [dict(x, _source=s.name) for x in to_jsonable(df.to_dict(orient="records"))]
            except Exception:
                continue
    return scores


def market_bench_section(sources: Sequence[Source], rows: list[dict[str, Any]]) -> Section | None:
    scores = _mb_scores(sources)
    if not scores and not any(r["task"] == "market_bench" for r in rows):
        return None
    sec = Section("Market-Bench", "market-bench")
    if not scores:
        sec.notes.append("Market-Bench rows present but no pass@k/MAE scores stored in results.json.")
        return sec
    pass_cols = sorted({k for x in scores for k in x if k.startswith("pass@")}, key=lambda k: -int(k[5:])
                       if k[5:].isdigit() else 0)
    # correct@k (every metric within tolerance of the reference) where stored: pass@k counts a stub as solved
    pass_cols += sorted({k for x in scores for k in x if k.startswith("correct@")},
                        key=lambda k: -int(k[8:]) if k[8:].isdigit() else 0)
    strategies = _ordered((x.get("strategy") for x in scores), ("overall",))
    multi = len({x["_source"] for x in scores}) > 1
    for strat in strategies:
        sub = sorted((x for x in scores if x.get("strategy") == strat),
                     key=lambda x: (x.get("rank") is None, x.get("rank") or 0))
        cols = ["#", "agent"] + pass_cols + ["mean MAE (solved)", "avg attempt"] + (["source"] if multi else [])
        body = []
        for x in sub:
            mae = x.get("mean_mae_solved")
            body.append([_fmt(x.get("rank"), 0) if isinstance(x.get("rank"), (int, float)) else "–",
                         str(x.get("agent")), *[_fmt(x.get(c)) for c in pass_cols],
                         "–" if mae is None else f"{mae:.3g}", _fmt(x.get("avg_attempt"))]
                        + ([x["_source"]] if multi else []))
        sec.tables.append(Table(f"Market-Bench — {strat}", cols, body, anchor=f"mb-{strat}",
                                note="pass@k: share of rounds solved within k attempts (ran and returned every "
                                     "metric); correct@k: within tolerance of the reference; MAE over solved rounds "
                                     "(spec market_bench §6). Read from results.json (summary.csv has no "
                                     "Market-Bench metric)." if strat == "overall" else ""))
    return sec


# --------------------------------------------------------------------------- rendering


#: text columns (left-aligned); every other column is numeric (right-aligned)
TEXT_COLUMNS = {"agent", "source", "task", "profile", "period", "command", "created", "tasks", "gate", "strategy"}


def _md_table(t: Table) -> str:
    def esc(c: str) -> str:
        return c.replace("|", "\\|")

    lines = [f"### {t.title}", "", "| " + " | ".join(esc(c) for c in t.columns) + " |",
             "|" + "|".join(":---" if c in TEXT_COLUMNS else "---:" for c in t.columns) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in t.rows]
    if t.note:
        lines += ["", f"_{t.note}_"]
    return "\n".join(lines) + "\n"


def _html_table(t: Table) -> str:
    cls = ['' if c not in TEXT_COLUMNS else ' class="t"' for c in t.columns]
    head = "".join(f"<th{k}>{html.escape(c)}</th>" for c, k in zip(t.columns, cls))
    body = "".join("<tr>" + "".join(f"<td{k}>{html.escape(c)}</td>" for c, k in zip(row, cls)) + "</tr>"
                   for row in t.rows)
    note = f'<p class="note">{html.escape(t.note)}</p>' if t.note else ""
    anchor = f' id="{html.escape(t.anchor)}"' if t.anchor else ""
    title = f"<h3>{html.escape(t.title)}</h3>" if t.title else ""
    return (f'{title}<div class="scroll"><table class="lb"{anchor}><thead><tr>{head}</tr>'
            f"</thead><tbody>{body}</tbody></table></div>{note}")


CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:18px 32px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#c5cad3;font-size:13px}main{padding:8px 32px 40px;max-width:1280px}
nav a{margin-right:14px;font-size:14px}h2{border-bottom:2px solid #d0d5dd;padding-bottom:4px;margin-top:34px}
h3{margin:22px 0 6px;font-size:16px}.scroll{overflow-x:auto}
table.lb{border-collapse:collapse;font-size:13px;background:#fff;box-shadow:0 1px 2px rgba(0,0,0,.08)}
table.lb th,table.lb td{padding:4px 9px;border-bottom:1px solid #e4e7ec;text-align:right;white-space:nowrap}
table.lb th{background:#eef1f5;position:sticky;top:0}table.lb .t{text-align:left}
table.lb tbody tr:hover{background:#f2f6ff}.note{font-size:12px;color:#555;max-width:1000px}
figure{margin:18px 0;background:#fff;padding:10px;box-shadow:0 1px 2px rgba(0,0,0,.08);display:inline-block}
figure img{max-width:100%;height:auto}figcaption{font-size:12px;color:#444;max-width:900px}
details summary{cursor:pointer;font-weight:600;margin:10px 0}
"""


@dataclass
class Report:
    """The built report: its sections and the written files."""

    title: str
    sources: list[Source]
    rows: list[dict[str, Any]]
    sections: list[Section]
    markdown_path: Path | None = None
    html_path: Path | None = None
    csv_path: Path | None = None
    generated: str = ""


def _sources_table(sources: Sequence[Source]) -> Table:
    body = []
    for s in sources:
        tasks = sorted(set((s.doc.get("tasks") or {}).keys()) | {r["task"] for r in s.rows if r["task"]})
        body.append([s.name, s.command, s.created or "–", ", ".join(tasks) or "–", str(len(s.rows))])
    return Table("Inputs", ["source", "command", "created", "tasks", "rows"], body, anchor="inputs")


def _all_rows_table(rows: list[dict[str, Any]]) -> Table:
    cols = ["source", "task", "agent", "profile", "period", "Sharpe", "Ret%", "MaxDD%", "Vol%", "CEPS", "gate"]
    body = [[r["source"], r["task"] or "", r["agent"] or "", r["profile"] or "–", r["period"] or "–",
             _fmt(r["sharpe"], 3), _fmt(r["ret_pct"]), _fmt(r["maxdd_pct"]), _fmt(r["vol_pct"]), _fmt(r["ceps"], 3),
             _fmt(r["gate"])] for r in rows]
    return Table("All summary rows", cols, body, anchor="all-rows",
                 note="Every row of every input summary.csv (common schema, shared/design.md §6).")


def render_markdown(rep: Report, img_dir: str = "img") -> str:
    out = [f"# {rep.title}", "", f"_Generated {rep.generated} by `quantgym report` from {len(rep.sources)} "
           "folder(s)._", "", _md_table(_sources_table(rep.sources))]
    for sec in rep.sections:
        out += [f"## {sec.title}", ""]
        out += [f"> {n}\n" for n in sec.notes]
        out += [_md_table(t) for t in sec.tables]
        out += [f"![{f.name}]({img_dir}/{f.name}.png)\n\n_{f.caption}_\n" for f in sec.figures]
    out += ["## All rows", "", "<details><summary>Every summary row</summary>", "", _md_table(_all_rows_table(rep.rows)),
            "</details>", ""]
    return "\n".join(out)


def render_html(rep: Report) -> str:
    sources = _sources_table(rep.sources)
    sources.title = ""
    parts = [f"<h2 id=\"inputs-h\">Inputs</h2>{_html_table(sources)}"]
    for sec in rep.sections:
        parts.append(f'<h2 id="{sec.anchor}">{html.escape(sec.title)}</h2>')
        parts += [f'<p class="note">{html.escape(n)}</p>' for n in sec.notes]
        parts += [_html_table(t) for t in sec.tables]
        for f in sec.figures:
            b64 = base64.b64encode(f.png).decode("ascii")
            parts.append(f'<figure><img alt="{html.escape(f.name)}" src="data:image/png;base64,{b64}">'
                         f"<figcaption>{html.escape(f.caption)}</figcaption></figure>")
    parts.append(f"<h2 id=\"all\">All rows</h2><details><summary>Every summary row ({len(rep.rows)})</summary>"
                 f"{_html_table(_all_rows_table(rep.rows))}</details>")
    nav = " ".join(f'<a href="#{s.anchor}">{html.escape(s.title)}</a>' for s in rep.sections) + ' <a href="#all">All rows</a>'
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<link rel=\"icon\" href=\"data:,\">"
            f"<title>{html.escape(rep.title)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>{html.escape(rep.title)}</h1><p>Generated {html.escape(rep.generated)} by quantgym report "
            f"from {len(rep.sources)} folder(s): {html.escape(', '.join(s.name for s in rep.sources))}</p></header>"
            f"<main><nav>{nav}</nav>{''.join(parts)}</main></body></html>")


def build_report(paths: Sequence[str | Path], out_dir: str | Path, title: str = "quantgym leaderboard") -> Report:
    """Merge results folders into ``OUT/leaderboard.md``, ``OUT/leaderboard.html``, ``OUT/summary.csv``, ``OUT/img/``.

    Parameters
    ----------
    paths : results folders of ``quantgym bench`` / ``eval`` / ``sweep`` (any number, ≥ 1).
    out_dir : output folder (created).
    title : page title.

    Returns
    -------
    Report

    Raises
    ------
    ReportError
        No input, or an input that is not a results folder.
    """
    if not paths:
        raise ReportError("no results folder given")
    ps = [Path(p) for p in paths]
    for p in ps:
        if not p.is_dir():
            raise ReportError(f"{p}: not a folder")
    sources = [load_source(p, n) for p, n in zip(ps, _unique_names(ps))]
    rows = [r for s in sources for r in s.rows]
    sections = [s for s in (portbench_section(sources, rows), portbench_qa_section(sources, rows),
                            quant_arena_section(sources, rows), market_bench_section(sources, rows)) if s is not None]
    other = [r for r in rows if r["task"] not in ("portbench", "portbench_qa", "quant_arena", "market_bench")]
    if other:
        sections.append(Section("Other tasks", "other", tables=[_all_rows_table(other)]))
    rep = Report(title=title, sources=sources, rows=rows, sections=sections,
                 generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    out = Path(out_dir)
    img = out / "img"
    img.mkdir(parents=True, exist_ok=True)
    for sec in sections:
        for f in sec.figures:
            (img / f"{f.name}.png").write_bytes(f.png)
    rep.markdown_path = out / "leaderboard.md"
    rep.markdown_path.write_text(render_markdown(rep))
    rep.html_path = out / "leaderboard.html"
    rep.html_path.write_text(render_html(rep), encoding="utf-8")
    rep.csv_path = out / "summary.csv"
    with rep.csv_path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([*SUMMARY_COLUMNS, "source"])
        for r in rows:
            w.writerow(["" if r[c] is None else ("true" if r[c] is True else "false" if r[c] is False else
                                                 (f"{r[c]:.6g}" if isinstance(r[c], float) else r[c]))
                        for c in SUMMARY_COLUMNS] + [r["source"]])
    return rep
