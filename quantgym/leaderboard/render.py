"""The leaderboard's building blocks and its two renderings (markdown and one self-contained HTML page).

A task's report module (the ``report`` entry of its record in :mod:`quantgym.tasks`) builds a
:class:`Section` of :class:`Table` s (cells already formatted, :func:`quantgym.tables.fmt` with
``missing=MISSING``) and :class:`Figure` s (PNG bytes: :func:`pyplot`, then :func:`png`); the ``quantgym
report`` command (:mod:`quantgym.sweep.report`) collects the sections into a :class:`Report` and renders it
with :func:`render_markdown` and :func:`render_html`.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from quantgym.leaderboard.metrics import metrics
from quantgym.leaderboard.sources import Source
from quantgym.tables import fmt

#: the cell of a missing value in the leaderboard's tables
MISSING = "–"


def ordered(values: Iterable[str | None], order: Sequence[str]) -> list[str]:
    """The distinct non-empty ``values``: those named in ``order`` first, in that order, then the rest sorted."""
    vals = {v for v in values if v}
    return [v for v in order if v in vals] + sorted(vals - set(order))


def mean(xs: Iterable[float | None]) -> float | None:
    """The mean of the values that are not None (None when there is none)."""
    v = [x for x in xs if x is not None]
    return sum(v) / len(v) if v else None


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
    """A part of the page: a title, its anchor, tables, figures and notes (one line each)."""

    title: str
    anchor: str
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def png(fig: Any) -> bytes:
    """A matplotlib figure as PNG bytes (90 dpi); the figure is closed."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: text columns (left-aligned); every other column is numeric (right-aligned)
TEXT_COLUMNS = {"agent", "source", "task", "profile", "period", "command", "created", "tasks", "gate", "strategy",
                "status", "reason"}


def md_table(t: Table) -> str:
    """``t`` as a markdown table under a ``###`` title, its note in italics."""
    def esc(c: str) -> str:
        return c.replace("|", "\\|")

    lines = [f"### {t.title}", "", "| " + " | ".join(esc(c) for c in t.columns) + " |",
             "|" + "|".join(":---" if c in TEXT_COLUMNS else "---:" for c in t.columns) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in t.rows]
    if t.note:
        lines += ["", f"_{t.note}_"]
    return "\n".join(lines) + "\n"


def html_table(t: Table) -> str:
    """``t`` as an HTML table (escaped), scrolling sideways when wide."""
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


def sources_table(sources: Sequence[Source]) -> Table:
    """"Inputs": one row per folder (its command, creation time, tasks and row count)."""
    body = []
    for s in sources:
        tasks = sorted(set((s.doc.get("tasks") or {}).keys()) | {r["task"] for r in s.rows if r["task"]})
        body.append([s.name, s.command, s.created or MISSING, ", ".join(tasks) or MISSING, str(len(s.rows))])
    return Table("Inputs", ["source", "command", "created", "tasks", "rows"], body, anchor="inputs")


def all_rows_table(rows: list[dict[str, Any]]) -> Table:
    """"All summary rows": the common columns of every row, one column per registered metric that applies to a
    task of the rows or has a value (:mod:`quantgym.leaderboard.metrics`)."""
    from quantgym.tasks import sharpe_notes

    shown = [m for m in metrics() if any(m.applies_to(r["task"]) or r.get(m.name) is not None for r in rows)]
    cols = ["source", "task", "agent", "profile", "period", *[m.header for m in shown], "status"]
    body = [[r["source"], r["task"] or "", r["agent"] or "", r["profile"] or MISSING, r["period"] or MISSING,
             *[m.cell(r.get(m.name), MISSING) for m in shown], r["status"]] for r in rows]
    return Table("All summary rows", cols, body, anchor="all-rows",
                 note="Every row of every input summary.csv (the common schema of quantgym.results). status: ok; "
                      "partial (some LLM calls failed, the agent fell back at those steps); failed (no LLM call "
                      "answered, or the run stopped: not ranked). " + sharpe_notes(r["task"] for r in rows))


def render_markdown(rep: Report, img_dir: str = "img") -> str:
    """``leaderboard.md``: the inputs, the warnings, each section (plots linked from ``img_dir``), every row."""
    out = [f"# {rep.title}", "", f"_Generated {rep.generated} by `quantgym report` from {len(rep.sources)} "
           "folder(s)._", "", md_table(sources_table(rep.sources))]
    out += [f"> **warning:** {w}\n" for w in rep.warnings]
    for sec in rep.sections:
        out += [f"## {sec.title}", ""]
        out += [f"> {n}\n" for n in sec.notes]
        out += [md_table(t) for t in sec.tables]
        out += [f"![{f.name}]({img_dir}/{f.name}.png)\n\n_{f.caption}_\n" for f in sec.figures]
    out += ["## All rows", "", "<details><summary>Every summary row</summary>", "", md_table(all_rows_table(rep.rows)),
            "</details>", ""]
    return "\n".join(out)


def render_html(rep: Report) -> str:
    """``leaderboard.html``: the same content as one page (CSS inline, plots as base64 PNG, no script)."""
    sources = sources_table(rep.sources)
    sources.title = ""
    parts = [f"<h2 id=\"inputs-h\">Inputs</h2>{html_table(sources)}"]
    parts += [f'<p class="note"><b>warning:</b> {html.escape(w)}</p>' for w in rep.warnings]
    for sec in rep.sections:
        parts.append(f'<h2 id="{sec.anchor}">{html.escape(sec.title)}</h2>')
        parts += [f'<p class="note">{html.escape(n)}</p>' for n in sec.notes]
        parts += [html_table(t) for t in sec.tables]
        for f in sec.figures:
            b64 = base64.b64encode(f.png).decode("ascii")
            parts.append(f'<figure><img alt="{html.escape(f.name)}" src="data:image/png;base64,{b64}">'
                         f"<figcaption>{html.escape(f.caption)}</figcaption></figure>")
    parts.append(f"<h2 id=\"all\">All rows</h2><details><summary>Every summary row ({len(rep.rows)})</summary>"
                 f"{html_table(all_rows_table(rep.rows))}</details>")
    nav = " ".join(f'<a href="#{s.anchor}">{html.escape(s.title)}</a>' for s in rep.sections) + ' <a href="#all">All rows</a>'
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<link rel=\"icon\" href=\"data:,\">"
            f"<title>{html.escape(rep.title)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>{html.escape(rep.title)}</h1><p>Generated {html.escape(rep.generated)} by quantgym report "
            f"from {len(rep.sources)} folder(s): {html.escape(', '.join(s.name for s in rep.sources))}</p></header>"
            f"<main><nav>{nav}</nav>{''.join(parts)}</main></body></html>")


__all__ = ["MISSING", "fmt", "ordered", "mean", "Table", "Figure", "Section", "Report", "png", "pyplot",
           "TEXT_COLUMNS", "md_table", "html_table", "CSS", "sources_table", "all_rows_table", "render_markdown",
           "render_html"]
