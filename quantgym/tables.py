"""Terminal tables that fit the terminal: never an elided number or name.

Every command prints its tables through :func:`print_table`. Given the console's width it

1. uses the full headers when every column fits;
2. else each column's short header (:attr:`Col.short`);
3. else splits the columns into as few parts as fit, repeating the key columns (the first ``keys``, e.g.
   period and agent) in every part, titled ``title (1/2)``, ``title (2/2)``: whole column groups per
   part (:attr:`Col.group`) when that takes no more parts, else parts of balanced widths.

Columns never shrink below their widest cell (``min_width``, ``no_wrap``), so rich has nothing to
cut: a number or an agent name is shown whole or, if a single column is wider than the terminal,
folded onto the next line, never replaced by ``…``.

Every cell of a terminal table and of the leaderboard (:mod:`quantgym.leaderboard`) is written by
:func:`fmt`; an agent cell carries its run's status (:func:`status_agent`, legend :data:`STATUS_NOTE`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Real
from typing import Any, Sequence

#: rich's default box: a left border, then per column 1 + width + 1 padding + 1 border
_EDGE, _PER_COL = 1, 3


@dataclass(frozen=True)
class Col:
    """One column: its header, justification, a shorter header for narrow terminals and whether it starts
    a group of columns (a split table breaks there when it can: ``group``)."""

    header: str
    justify: str = "right"
    short: str | None = None
    group: bool = False

    def head(self, short: bool) -> str:
        return (self.short or self.header) if short else self.header


def _len(text: str) -> int:
    from rich.text import Text

    return max((Text.from_markup(line).cell_len for line in str(text).split("\n")), default=0)


def _widths(cols: Sequence[Col], rows: Sequence[Sequence[str]], short: bool) -> list[int]:
    w = [_len(c.head(short)) for c in cols]
    for r in rows:
        for i, cell in enumerate(r):
            w[i] = max(w[i], _len(cell))
    return w


def _total(widths: Sequence[int]) -> int:
    return _EDGE + sum(x + _PER_COL for x in widths)


def layout(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int, keys: int = 1
           ) -> tuple[bool, list[list[int]]]:
    """(short headers?, column-index groups) so that each group's table fits ``width`` columns.

    The first ``keys`` columns are in every group. A group holds at least one non-key column, so a
    table whose key columns alone are too wide still prints (rich then folds its cells).
    """
    n = len(cols)
    for short in (False, True):
        if _total(_widths(cols, rows, short)) <= width:
            return short, [list(range(n))]
    w = _widths(cols, rows, True)
    n_parts = len(_split(w, keys, width))
    # whole column groups per part (Col.group starts one) when that needs no more parts than a plain split
    runs = [[i] for i in range(keys, n)]
    for i in range(len(runs) - 1, 0, -1):
        if not cols[runs[i][0]].group:
            runs[i - 1] += runs.pop(i)
    packed = _pack(w, keys, width, runs) if len(runs) > 1 else None
    if packed is not None and len(packed) == n_parts:
        return True, packed
    # else as many parts as a plain split, balanced: the smallest part width that still needs no more parts
    lo = max((_total(w[:keys] + [x]) for x in w[keys:]), default=_total(w[:keys]))
    hi = max(lo, width)
    while lo < hi:
        mid = (lo + hi) // 2
        if len(_split(w, keys, mid)) <= n_parts:
            hi = mid
        else:
            lo = mid + 1
    return True, _split(w, keys, lo)


def _pack(w: Sequence[int], keys: int, width: int, runs: list[list[int]]) -> list[list[int]] | None:
    """Whole runs of columns per part, greedily; None when a run alone does not fit ``width``."""
    parts: list[list[int]] = []
    cur: list[int] = []
    for run in runs:
        if cur and _total([*w[:keys], *(w[i] for i in cur + run)]) > width:
            parts.append(cur)
            cur = []
        cur = cur + run
        if _total([*w[:keys], *(w[i] for i in cur)]) > width:
            return None
    return [list(range(keys)) + p for p in [*parts, cur]]


def _split(w: Sequence[int], keys: int, width: int) -> list[list[int]]:
    """Greedy: the non-key columns in order, a new part when the next one would pass ``width``."""
    key_w = _total(w[:keys])
    groups: list[list[int]] = []
    cur: list[int] = []
    used = key_w
    for i in range(keys, len(w)):
        if cur and used + w[i] + _PER_COL > width:
            groups.append(list(range(keys)) + cur)
            cur, used = [], key_w
        cur.append(i)
        used += w[i] + _PER_COL
    if cur or not groups:
        groups.append(list(range(keys)) + cur)
    return groups


def print_table(console: Any, title: str | None, cols: Sequence[Col], rows: Sequence[Sequence[str]], *,
                keys: int = 1, caption: str | None = None, end_sections: Sequence[bool] | None = None,
                width: int | None = None) -> int:
    """Print ``rows`` under ``cols`` on ``console`` (a rich Console) so that it fits the terminal.

    Parameters
    ----------
    title : table title (a split table gets `` (k/K)``); caption : a legend printed under the last part,
        wrapped at ``width`` (rich markup allowed).
    cols : the columns; rows : cell strings (rich markup allowed), one list per row, ``len(cols)`` each.
    keys : number of leading columns repeated in every part of a split table.
    end_sections : per row, whether a section line follows it (``rich.table.Table.add_row``).
    width : the width to fit (default ``console.width``).

    Returns
    -------
    int
        The number of tables printed (1 unless the columns had to be split).
    """
    from rich.measure import Measurement
    from rich.table import Table
    from rich.text import Text

    width = int(width or console.width)
    short, groups = layout(cols, rows, width, keys)
    widths = _widths(cols, rows, short)
    for k, group in enumerate(groups, 1):
        part = title if len(groups) == 1 or title is None else f"{title} ({k}/{len(groups)})"
        t = Table(title=part, title_justify="left")
        for i in group:
            t.add_column(cols[i].head(short), justify=cols[i].justify, no_wrap=True, min_width=widths[i],
                         overflow="fold")
        for j, r in enumerate(rows):
            t.add_row(*[str(r[i]) for i in group], end_section=bool(end_sections and end_sections[j]))
        if part and Measurement.get(console, console.options, t).maximum < len(part) <= width:
            t.title = None  # wider than the table, not the terminal: one line of its own, not wrapped
            console.print(Text(part, style="table.title"), width=width)
        console.print(t)
    if caption:  # a legend under the last part, wrapped at the terminal's width (not the table's)
        console.print(Text.from_markup(caption), width=width)
    return len(groups)


#: the legend of a table whose rows carry a non-ok ``status`` (:func:`status_agent`)
STATUS_NOTE = ("(partial): some LLM calls failed after their retries and the agent fell back at those steps; "
               "(failed): no LLM call was answered: not a result, its numbers are the fallback's")


def status_agent(agent: str, status: str | None) -> str:
    """A table's agent cell: the name, with ``(partial)`` / ``(failed)`` after it when the run was not ``ok``."""
    return agent if status in (None, "ok") else f"{agent} ({status})"


def fmt(x: Any, nd: int = 2, missing: str = "") -> str:
    """The one table cell formatter of the terminal tables and the leaderboard.

    Parameters
    ----------
    x : the value: None (``missing``), a bool (``✓`` / ``✗``, a gate), a number (fixed-point with
        ``nd`` decimals), a mean with its interval (a mapping with ``mean``, ``lo``, ``hi``, as
        :func:`quantgym.stats.repeats.repeat_interval` returns: ``"mean ± half-width"``, the mean alone
        without an interval, ``missing`` without a mean), anything else as ``str``.
    nd : decimals.
    missing : the cell of a missing value (``""`` in terminal tables, ``"–"`` in the leaderboard).
    """
    if x is None:
        return missing
    if isinstance(x, bool):
        return "✓" if x else "✗"
    if isinstance(x, Mapping):
        if x.get("mean") is None:
            return missing
        if x.get("lo") is None:
            return f"{x['mean']:.{nd}f}"
        return f"{x['mean']:.{nd}f} ± {(x['hi'] - x['lo']) / 2:.{nd}f}"
    if isinstance(x, Real):
        return f"{x:.{nd}f}"
    return str(x)


def print_warnings(console: Any, runs: list[dict]) -> None:
    """One line per distinct LLM warning of the runs (a truncated prompt is never silent)."""
    seen: dict[str, int] = {}
    for run in runs:
        for w in (run.get("llm") or {}).get("warnings") or []:
            seen[w] = seen.get(w, 0) + 1
    for w, n in seen.items():
        console.print(f"warning ({n} episode(s)): {w}", markup=False, highlight=False)


__all__ = ["Col", "layout", "print_table", "fmt", "STATUS_NOTE", "status_agent", "print_warnings"]
