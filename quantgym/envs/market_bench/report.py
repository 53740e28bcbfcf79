"""Market-Bench's section of ``quantgym report`` (:mod:`quantgym.sweep.report`): pass@k / correct@k / MAE
tables (from ``results.json``, spec market_bench §6)."""

from __future__ import annotations

from typing import Any, Sequence

from quantgym.leaderboard import MISSING, Figure, Section, Source, Table, fmt, ordered, png, pyplot


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
            except Exception as exc:  # never silent: the report names the folder and why
                s.warnings.append(f"{s.name}: Market-Bench scores could not be recomputed from its attempt records "
                                  f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); its pass@k / MAE "
                                  "are missing from the leaderboard")
    return scores


def section(sources: Sequence[Source], rows: list[dict[str, Any]]) -> Section | None:
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
    strategies = ordered((x.get("strategy") for x in scores), ("overall",))
    multi = len({x["_source"] for x in scores}) > 1
    for strat in strategies:
        sub = sorted((x for x in scores if x.get("strategy") == strat),
                     key=lambda x: (x.get("rank") is None, x.get("rank") or 0))
        cols = ["#", "agent"] + pass_cols + ["mean MAE (solved)", "avg attempt"] + (["source"] if multi else [])
        body = []
        for x in sub:
            mae = x.get("mean_mae_solved")
            body.append([fmt(x.get("rank"), 0, missing=MISSING) if isinstance(x.get("rank"), (int, float)) else "–",
                         str(x.get("agent")), *[fmt(x.get(c), missing=MISSING) for c in pass_cols],
                         "–" if mae is None else f"{mae:.3g}", fmt(x.get("avg_attempt"), missing=MISSING)]
                        + ([x["_source"]] if multi else []))
        sec.tables.append(Table(f"Market-Bench — {strat}", cols, body, anchor=f"mb-{strat}",
                                note="pass@k: share of rounds solved within k attempts (ran and returned every "
                                     "metric); correct@k: within tolerance of the reference; MAE over solved rounds "
                                     "(spec market_bench §6). Read from results.json (summary.csv holds each agent's "
                                     "overall figures as extra columns)." if strat == "overall" else ""))
    fig = _plot_overall(scores, pass_cols, multi)
    if fig is not None:
        sec.figures.append(fig)
    unb = [dict(x, _source=s.name) for s in sources for x in (s.task_doc("market_bench").get("unbiased") or [])
           if isinstance(x, dict)]
    defined = [x for x in unb if x.get("pass@1_unbiased") is not None]
    if defined:
        from quantgym.envs.market_bench.eval import interval_cell
        from quantgym.envs.market_bench.scoring import UNBIASED_KS

        names = [f"{m}@{k}" for k in UNBIASED_KS for m in ("pass", "correct")]
        sec.tables.append(Table(
            "Market-Bench — unbiased pass@k / correct@k", ["agent", "strategy", "rounds", "n (fewest)",
                                                          *[f"{c} [95 % CI]" for c in names]]
            + (["source"] if multi else []),
            [[str(x.get("agent")), str(x.get("strategy")), str(x.get("n_rounds")), str(x.get("n_min")),
              *[interval_cell(x, c) for c in names]] + ([x["_source"]] if multi else []) for x in defined],
            anchor="mb-unbiased",
            note="1 − C(n−c, k)/C(n, k) per round (Chen et al. 2021; c = attempts that ran / were correct out of n "
                 "independent attempts, quantgym eval --attempts n), mean over rounds and a Student-t interval "
                 "over the rounds clipped to [0, 1]. Beside, not instead of, the paper's sequential pass@k above."))
    elif unb:
        notes = {s.task_doc("market_bench").get("unbiased_note") for s in sources} - {None}
        sec.notes.append("Unbiased pass@k not estimated: " + "; ".join(sorted(map(str, notes))) + ".")
    return sec


def _plot_overall(scores: list[dict[str, Any]], cols: list[str], multi: bool) -> Figure | None:
    """Grouped bars of the overall pass@k / correct@k per agent (the Market-Bench leaderboard at a
    glance: a stub that "solves" every round by pass@k shows its correct@k of 0 beside it)."""
    rows = [x for x in scores if x.get("strategy") == "overall"]
    cols = [c for c in cols if any(isinstance(x.get(c), (int, float)) for x in rows)]
    if not rows or not cols:
        return None
    plt = pyplot()
    rows = sorted(rows, key=lambda x: (x.get("rank") is None, x.get("rank") or 0))
    labels = [f"{x.get('agent')}" + (f" ({x['_source']})" if multi else "") for x in rows]
    fig, ax = plt.subplots(figsize=(min(11.0, max(6.0, 1.1 * len(rows) + 2)), 3.8))
    width = 0.8 / len(cols)
    for j, c in enumerate(cols):
        vals = [x.get(c) if isinstance(x.get(c), (int, float)) else 0.0 for x in rows]
        ax.bar([i + (j - (len(cols) - 1) / 2) * width for i in range(len(rows))], vals, width, label=c,
               hatch="//" if c.startswith("correct@") else None, edgecolor="black", linewidth=0.4)
    ax.set_xticks(range(len(rows)), labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylim(0, 1.25)  # room for the legend above the bars
    ax.set_ylabel("share of rounds")
    ax.set_title("Market-Bench, all strategies: pass@k (ran and returned every metric) vs correct@k (within "
                 "tolerance)", fontsize=9)
    ax.legend(fontsize=7, ncol=len(cols))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return Figure("market_bench_passk", "Overall pass@k and correct@k per agent (hatched: correct@k). pass@k "
                  "counts any attempt that ran and returned every metric; correct@k needs every metric within "
                  "tolerance of the reference (spec market_bench §6).", png(fig))


# --------------------------------------------------------------------------- rendering




