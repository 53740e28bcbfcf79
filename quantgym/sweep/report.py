"""``quantgym report``: merge bench / eval / sweep output folders into one leaderboard.

Inputs are folders in the common results schema (:mod:`quantgym.results`): ``summary.csv`` and/or ``results.json``; a sweep folder whose
final files are missing (an interrupted sweep) is read from its ``runs/*.json``. Fields a
task does not write are skipped, never an error.

Outputs (``OUT``):

- ``leaderboard.md``: markdown tables (READMEs, PRs) linking ``img/*.png``;
- ``leaderboard.html``: one self-contained page (CSS inline, plots as base64 PNG, no
  script, no external asset);
- ``summary.csv``: every input row in the common columns plus a ``source`` column (then the memorization
  gap's columns when an input has them, ``quantgym eval --blind both``);
- ``img/*.png``: the plots.

Contents: one section per task, from the ``report`` entry of its record in :mod:`quantgym.tasks`
(PortBench: :mod:`quantgym.envs.portbench.report`; Quant-Arena, Market-Bench: their ``report``
modules), then "Memorization gap" (the blind rows of ``--blind both`` runs: named, blind, gap, interval,
p-value, flag; :func:`quantgym.memorization.report_section`), "Repeated runs", the rows of any other task and "Failed runs". A row whose ``status`` is
``failed`` (no LLM call of the run answered, or the run stopped, :mod:`quantgym.results`) is no result:
it is left out of every task section, ranking, mean and plot (with its run in ``results.json``) and
listed under "Failed runs (not ranked)"; ``partial`` rows are ranked and marked in "All rows". A folder
without a ``status`` column reads as ``ok``.

This module is the command; its building blocks are the public :mod:`quantgym.leaderboard` (inputs,
tables, figures, the markdown / HTML page) and its columns come from the metric registry
(:mod:`quantgym.leaderboard.metrics`).
"""

from __future__ import annotations

import csv
import datetime as _dt
from pathlib import Path
from typing import Any, Sequence

from quantgym.leaderboard import (MISSING, Report, ReportError, Section, Source, Table, all_rows_table, expand_repeats,
                                  load_source, render_html, render_markdown, unique_names)
from quantgym.leaderboard.metrics import repeat_metrics, summary_columns
from quantgym.results import csv_cell
from quantgym.tasks import sharpe_notes


def failed_section(sources: Sequence[Source], rows: Sequence[dict[str, Any]]) -> Section | None:
    """"Failed runs (not ranked)": the rows whose ``status`` is ``failed``, with the error their folder
    recorded (a run stopped by its endpoint) or the LLM failures of the run. None when there is none."""
    failed = [r for r in rows if r["status"] == "failed"]
    if not failed:
        return None
    by_name = {s.name: s for s in sources}
    body = []
    for r in failed:
        src = by_name.get(r["source"])
        doc = src.doc if src is not None else {}
        why = str((doc.get("meta") or {}).get("error") or "")
        if not why:
            runs = (((doc.get("tasks") or {}).get(r["task"]) or {}).get("runs")) or []
            kinds: dict[str, int] = {}
            for run in runs:
                if isinstance(run, dict) and run.get("status") == "failed" and run.get("period") in (None, r["period"]):
                    for k, n in ((run.get("usage") or {}).get("failures_by_kind") or {}).items():
                        kinds[k] = kinds.get(k, 0) + int(n)
            why = ("every LLM call failed (" + ", ".join(f"{n} {k}" for k, n in kinds.items()) + ")" if kinds
                   else "every LLM call failed")
        body.append([r["source"], r["task"] or "", r["agent"] or "", r["profile"] or "–", r["period"] or "–",
                     why if len(why) <= 160 else why[:159] + "…"])
    return Section("Failed runs (not ranked)", "failed", tables=[Table(
        "Failed runs", ["source", "task", "agent", "profile", "period", "reason"], body, anchor="failed-runs",
        note="Runs whose model never answered (or whose endpoint stopped mid-run): their numbers are the "
             "agent's fallback decisions, not the model's, so they are in no ranking, mean or plot above.")])


def repeats_section(rows: Sequence[dict[str, Any]], level: float = 0.95) -> Section | None:
    """"Repeated runs": one agent's runs of the same (task, profile, period) from several sources.

    Rows group by (task, agent, profile, period); a group of two or more rows from distinct sources is a
    set of repeats (``quantgym eval --repeats R`` folders, expanded by :func:`expand_repeats`, or the
    same agent's folders given side by side). Groups whose runs are all identical (a deterministic
    baseline given twice) are left out: they carry no spread. Each metric is shown as the mean ± the
    half-width of its Student-t interval over the repeats
    (:func:`quantgym.stats.repeats.repeat_interval`) for each metric of
    :func:`quantgym.leaderboard.metrics.repeat_metrics`; agents are ranked per (task, profile, period) in
    the direction of the first ranking metric (:attr:`~quantgym.leaderboard.metrics.Metric.rank`: mean
    Sharpe, CEPS where no Sharpe) with a value, ties where intervals overlap
    (:func:`quantgym.stats.repeats.rank_with_ties`). None when no group qualifies.
    """
    from quantgym.stats.repeats import rank_with_ties, repeat_interval

    shown_metrics = repeat_metrics()

    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["task"], r["agent"], r["profile"], r["period"]), []).append(r)
    stats: dict[tuple, dict[str, Any]] = {}
    for key, g in groups.items():
        if len(g) < 2 or len({r["source"] for r in g}) < 2:
            continue
        if len({tuple(r[m.name] for m in shown_metrics) for r in g}) == 1:
            continue
        stats[key] = {m.name: repeat_interval([r[m.name] for r in g], level) for m in shown_metrics}
        stats[key]["n"] = len(g)
    if not stats:
        return None

    shown = [m for m in shown_metrics if any(st[m.name]["mean"] is not None for st in stats.values())]
    rankers = [m for m in shown_metrics if m.rank]
    cells: dict[tuple, list[str]] = {}
    for (task, profile, period) in dict.fromkeys((k[0], k[2], k[3]) for k in stats):
        mine = {k[1]: st for k, st in stats.items() if (k[0], k[2], k[3]) == (task, profile, period)}
        by = next((m for m in rankers if any(st[m.name]["mean"] is not None for st in mine.values())),
                  rankers[-1] if rankers else shown_metrics[0])
        for rk in rank_with_ties({a: st[by.name] for a, st in mine.items()}, higher_is_better=by.higher_is_better):
            st = mine[rk["agent"]]
            rank = str(rk["rank"]) if rk["rank_range"][0] == rk["rank_range"][1] else \
                f"{rk['rank_range'][0]}–{rk['rank_range'][1]}"
            cells[(task, rk["agent"], profile, period)] = [
                task or "", "/".join(x for x in (profile, period) if x) or MISSING, rank, rk["agent"], str(st["n"]),
                *[m.cell(st[m.name], MISSING) for m in shown], ", ".join(rk["tied_with"]) or MISSING]
    body = [cells[k] for k in stats if k in cells]
    table = Table("Repeated runs: mean ± half-width of the Student-t interval", ["task", "profile/period", "rank",
                  "agent", "n", *[m.header for m in shown], "tied with"], body, anchor="repeats",
                  note=f"Runs of one agent on the same task, profile and period from several folders (eval --repeats "
                       f"R writes repeat-1 .. repeat-R). Interval: {level:.0%} Student-t over the repeats. Rank by mean "
                       f"{_ranking_text(rankers)} within each task/profile/period, never across tasks; a rank "
                       "range and 'tied with' where intervals overlap (no difference test implied). "
                       + sharpe_notes(k[0] for k in stats))
    return Section("Repeated runs", "repeats", tables=[table])


def _ranking_text(rankers: Sequence[Any]) -> str:
    """``"Sharpe (CEPS where there is none)"``: the ranking metrics' headers in their order of precedence."""
    heads = [m.header for m in rankers]
    if not heads:
        return "value"
    return heads[0] + (f" ({', then '.join(heads[1:])} where there is none)" if heads[1:] else "")


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
    expanded = expand_repeats(ps)
    names = unique_names([p for p, _ in expanded])
    sources = [load_source(p, given or n) for (p, given), n in zip(expanded, names)]
    rows = [r for s in sources for r in s.rows]
    ranked = [r for r in rows if r["status"] != "failed"]  # a failed row is no result: never ranked
    from quantgym.tasks import iter_with, load_ref, task_names

    sections = [s for s in (load_ref(t.report)(sources, ranked) for t in iter_with("report")) if s is not None]
    from quantgym.memorization import report_section as gap_report_section

    gap_sec = gap_report_section(ranked)
    if gap_sec is not None:
        sections.append(gap_sec)
    rep_sec = repeats_section(ranked)
    if rep_sec is not None:
        sections.append(rep_sec)
    known = set(task_names())
    other = [r for r in ranked if r["task"] not in known]
    if other:
        sections.append(Section("Other tasks", "other", tables=[all_rows_table(other)]))
    fail_sec = failed_section(sources, rows)
    if fail_sec is not None:
        sections.append(fail_sec)
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
        columns = summary_columns()
        gaps = list(dict.fromkeys(k for r in rows for k in r if k.startswith("gap_") or k == "likely_recall"))
        w.writerow([*columns, "source", *gaps])
        for r in rows:
            w.writerow([csv_cell(r[c]) for c in columns] + [r["source"]] + [csv_cell(r.get(c)) for c in gaps])
    return rep
