"""The leaderboard: the metric registry, the inputs and the page that ``quantgym report`` writes.

- :mod:`quantgym.leaderboard.metrics`: the metric registry (one entry per common column of
  ``summary.csv``, the report's tables and the repeats tables);
- :mod:`quantgym.leaderboard.sources`: results folders read back (:class:`Source`, :func:`load_source`);
- :mod:`quantgym.leaderboard.render`: tables, figures, sections and the markdown / HTML renderings.

A task's report module uses this public API only (``from quantgym.leaderboard import Section, Table, …``);
the command that merges folders into a leaderboard is :func:`quantgym.sweep.report.build_report`.
"""

from quantgym.leaderboard.metrics import (Metric, get_metric, metrics, number, register_metric, summary_columns,
                                          unregister_metric)
from quantgym.leaderboard.render import (MISSING, Figure, Report, Section, Table, all_rows_table, fmt, mean,
                                         ordered, png, pyplot, render_html, render_markdown)
from quantgym.leaderboard.sources import ReportError, Source, expand_repeats, load_source, unique_names

__all__ = ["Metric", "get_metric", "metrics", "number", "register_metric", "summary_columns", "unregister_metric",
           "MISSING", "Figure", "Report", "Section", "Table", "all_rows_table", "fmt", "mean", "ordered", "png",
           "pyplot", "render_html", "render_markdown", "ReportError", "Source", "expand_repeats", "load_source",
           "unique_names"]
