"""``quantgym report``: merge bench / eval / sweep output folders into one leaderboard.

Inputs are folders in the common results schema (:mod:`quantgym.results`): ``summary.csv`` and/or ``results.json``; a sweep folder whose
final files are missing (an interrupted sweep) is read from its ``runs/*.json``. Fields a
task does not write are skipped, never an error.

Outputs (``OUT``):

- ``leaderboard.md``: markdown tables (READMEs, PRs) linking ``img/*.png``;
- ``leaderboard.html``: one self-contained page (CSS inline, plots as base64 PNG, no
  script, no external asset);
- ``summary.csv``: every input row in the common columns plus a final ``source`` column;
- ``img/*.png``: the plots.

Contents: one section per task, from the ``report`` entry of its record in :mod:`quantgym.tasks`
(PortBench: :mod:`quantgym.envs.portbench.report`; Quant-Arena, Market-Bench: their ``report``
modules), then the rows of any other task. A row whose ``status`` is ``failed`` (no LLM call of the
run answered, or the run stopped, :mod:`quantgym.results`) is no result: it is left out of every
task section, ranking, mean and plot (with its run in ``results.json``) and listed under "Failed runs
(not ranked)"; ``partial`` rows are ranked and marked in "All rows". A folder written before the
``status`` column reads as ``ok``.
"""

from __future__ import annotations

import base64
import csv
import datetime as _dt
import html
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from quantgym.results import SUMMARY_COLUMNS
from quantgym.tasks import sharpe_notes



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
    r["status"] = str(r.get("status") or "ok")
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
    #: what could not be read or recomputed from this folder (shown in the report, never dropped silently)
    warnings: list[str] = field(default_factory=list)

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
        """``results.json``'s entry of ``task``, without the runs whose ``status`` is ``failed`` (never
        plotted or ranked beside real runs; :func:`failed_section` lists them); empty when the entry itself
        is marked failed (a stopped run, or a one-agent section whose every run failed)."""
        doc = ((self.doc.get("tasks") or {}).get(task)) or {}
        if doc.get("status") == "failed":
            return {}
        runs = doc.get("runs")
        if isinstance(runs, list) and any(isinstance(r, dict) and r.get("status") == "failed" for r in runs):
            doc = {**doc, "runs": [r for r in runs if not (isinstance(r, dict) and r.get("status") == "failed")]}
        return doc


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
        skipped = []
        for f in sorted((p / "runs").glob("*.json")):
            try:
                recs.append(json.loads(f.read_text()))
            except ValueError as exc:  # a torn or corrupt run file: skipped, and said so
                skipped.append(f"{label}: run file {f.name} is not valid JSON ({exc}); skipped")
        sections = sections_from_records(recs)
        from quantgym.results import to_jsonable

        doc = {"meta": {"command": "sweep (partial: read from runs/)"},
               "tasks": {s.task: {"runs": to_jsonable(s.runs), **to_jsonable(s.extra)} for s in sections}}
        rows = [_row(to_jsonable(r), label) for s in sections for r in s.rows]
    else:
        skipped = []
    if not doc and not rows:
        raise ReportError(f"{p}: no summary.csv, results.json or runs/ (not a quantgym results folder)")
    return Source(path=p, name=label, rows=rows, doc=doc, warnings=skipped)


def expand_repeats(paths: Sequence[Path]) -> list[tuple[Path, str | None]]:
    """Replace each ``quantgym eval --repeats R`` folder by its ``repeat-1`` .. ``repeat-R`` subfolders.

    Such a folder's own summary.csv holds the mean over the repeats; the report reads every repeat
    instead (each one is a row in its task's section) and groups them in "Repeated runs"
    (:func:`repeats_section`). Returns ``(folder, source name or None)`` pairs; other folders pass
    through unchanged (name None: :func:`_unique_names` names them).
    """
    out: list[tuple[Path, str | None]] = []
    for p in paths:
        reps = sorted((q for q in p.glob("repeat-*") if q.is_dir() and q.name[7:].isdigit()),
                      key=lambda q: int(q.name[7:]))
        if reps:
            out += [(q, f"{p.name}/{q.name}") for q in reps]
        else:
            out.append((p, None))
    return out


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


#: text columns (left-aligned); every other column is numeric (right-aligned)
TEXT_COLUMNS = {"agent", "source", "task", "profile", "period", "command", "created", "tasks", "gate", "strategy",
                "status", "reason"}


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

    @property
    def warnings(self) -> list[str]:
        """Every input's warnings (unreadable run files, tables that could not be recomputed)."""
        return [w for s in self.sources for w in s.warnings]


def _sources_table(sources: Sequence[Source]) -> Table:
    body = []
    for s in sources:
        tasks = sorted(set((s.doc.get("tasks") or {}).keys()) | {r["task"] for r in s.rows if r["task"]})
        body.append([s.name, s.command, s.created or "–", ", ".join(tasks) or "–", str(len(s.rows))])
    return Table("Inputs", ["source", "command", "created", "tasks", "rows"], body, anchor="inputs")


def _all_rows_table(rows: list[dict[str, Any]]) -> Table:
    cols = ["source", "task", "agent", "profile", "period", "Sharpe", "Ret%", "MaxDD%", "Vol%", "CEPS", "gate",
            "status"]
    body = [[r["source"], r["task"] or "", r["agent"] or "", r["profile"] or "–", r["period"] or "–",
             _fmt(r["sharpe"], 3), _fmt(r["ret_pct"]), _fmt(r["maxdd_pct"]), _fmt(r["vol_pct"]), _fmt(r["ceps"], 3),
             _fmt(r["gate"]), r["status"]] for r in rows]
    return Table("All summary rows", cols, body, anchor="all-rows",
                 note="Every row of every input summary.csv (the common schema of quantgym.results). status: ok; "
                      "partial (some LLM calls failed, the agent fell back at those steps); failed (no LLM call "
                      "answered, or the run stopped: not ranked). " + sharpe_notes(r["task"] for r in rows))


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
    (:func:`quantgym.stats.repeats.repeat_interval`); agents are ranked per (task, profile, period) by
    mean Sharpe (CEPS where no Sharpe), ties where intervals overlap
    (:func:`quantgym.stats.repeats.rank_with_ties`). None when no group qualifies.
    """
    from quantgym.stats.repeats import SHOWN_METRICS as _REPEAT_SHOWN, format_mean_pm, rank_with_ties, repeat_interval

    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["task"], r["agent"], r["profile"], r["period"]), []).append(r)
    stats: dict[tuple, dict[str, Any]] = {}
    for key, g in groups.items():
        if len(g) < 2 or len({r["source"] for r in g}) < 2:
            continue
        if len({tuple(r[m] for m, _, _ in _REPEAT_SHOWN) for r in g}) == 1:
            continue
        stats[key] = {m: repeat_interval([r[m] for r in g], level) for m, _, _ in _REPEAT_SHOWN}
        stats[key]["n"] = len(g)
    if not stats:
        return None

    shown = [(m, h, nd) for m, h, nd in _REPEAT_SHOWN if any(st[m]["mean"] is not None for st in stats.values())]
    cells: dict[tuple, list[str]] = {}
    for (task, profile, period) in dict.fromkeys((k[0], k[2], k[3]) for k in stats):
        mine = {k[1]: st for k, st in stats.items() if (k[0], k[2], k[3]) == (task, profile, period)}
        by = "sharpe" if any(st["sharpe"]["mean"] is not None for st in mine.values()) else "ceps"
        for rk in rank_with_ties({a: st[by] for a, st in mine.items()}):
            st = mine[rk["agent"]]
            rank = str(rk["rank"]) if rk["rank_range"][0] == rk["rank_range"][1] else \
                f"{rk['rank_range'][0]}–{rk['rank_range'][1]}"
            cells[(task, rk["agent"], profile, period)] = [
                task or "", "/".join(x for x in (profile, period) if x) or "–", rank, rk["agent"], str(st["n"]),
                *[format_mean_pm(st[m], nd, missing="–") for m, _, nd in shown], ", ".join(rk["tied_with"]) or "–"]
    body = [cells[k] for k in stats if k in cells]
    table = Table("Repeated runs: mean ± half-width of the Student-t interval", ["task", "profile/period", "rank",
                  "agent", "n", *[h for _, h, _ in shown], "tied with"], body, anchor="repeats",
                  note=f"Runs of one agent on the same task, profile and period from several folders (eval --repeats "
                       f"R writes repeat-1 .. repeat-R). Interval: {level:.0%} Student-t over the repeats. Rank by mean "
                       "Sharpe (CEPS where there is none) within each task/profile/period, never across tasks; a rank "
                       "range and 'tied with' where intervals overlap (no difference test implied). "
                       + sharpe_notes(k[0] for k in stats))
    return Section("Repeated runs", "repeats", tables=[table])


def render_markdown(rep: Report, img_dir: str = "img") -> str:
    out = [f"# {rep.title}", "", f"_Generated {rep.generated} by `quantgym report` from {len(rep.sources)} "
           "folder(s)._", "", _md_table(_sources_table(rep.sources))]
    out += [f"> **warning:** {w}\n" for w in rep.warnings]
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
    parts += [f'<p class="note"><b>warning:</b> {html.escape(w)}</p>' for w in rep.warnings]
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
    expanded = expand_repeats(ps)
    names = _unique_names([p for p, _ in expanded])
    sources = [load_source(p, given or n) for (p, given), n in zip(expanded, names)]
    rows = [r for s in sources for r in s.rows]
    ranked = [r for r in rows if r["status"] != "failed"]  # a failed row is no result: never ranked
    from quantgym.tasks import iter_with, load_ref, task_names

    sections = [s for s in (load_ref(t.report)(sources, ranked) for t in iter_with("report")) if s is not None]
    rep_sec = repeats_section(ranked)
    if rep_sec is not None:
        sections.append(rep_sec)
    known = set(task_names())
    other = [r for r in ranked if r["task"] not in known]
    if other:
        sections.append(Section("Other tasks", "other", tables=[_all_rows_table(other)]))
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
        w.writerow([*SUMMARY_COLUMNS, "source"])
        for r in rows:
            w.writerow(["" if r[c] is None else ("true" if r[c] is True else "false" if r[c] is False else
                                                 (f"{r[c]:.6g}" if isinstance(r[c], float) else r[c]))
                        for c in SUMMARY_COLUMNS] + [r["source"]])
    return rep
