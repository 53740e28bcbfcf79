"""Evaluation grids (agents × env ids × env kwargs × seeds) on a process pool or Ray, and the leaderboard report.

- :mod:`quantgym.sweep.grid`: grid files and stable run ids (:func:`load_grid`, :class:`RunSpec`);
- :mod:`quantgym.sweep.runner`: :func:`run_sweep` with the ``local`` and ``ray`` backends, resumable;
- :mod:`quantgym.sweep.report`: :func:`build_report` (markdown + self-contained HTML leaderboard);
- :mod:`quantgym.sweep.cli`: ``quantgym sweep`` and ``quantgym report``.

Ray is imported only inside the ``ray`` backend (extra ``distributed``). Docs: docs/sweeps.md.
"""

from quantgym.sweep.grid import Grid, GridError, RunSpec, grid_from_flags, load_grid, parse_grid
from quantgym.sweep.runner import BACKENDS, SweepError, SweepOutcome, execute_run, run_sweep

__all__ = ["Grid", "GridError", "RunSpec", "grid_from_flags", "load_grid", "parse_grid", "BACKENDS", "SweepError",
           "SweepOutcome", "execute_run", "run_sweep", "build_report"]


def __getattr__(name):  # lazy: the report pulls in matplotlib
    if name == "build_report":
        from quantgym.sweep.report import build_report

        return build_report
    raise AttributeError(name)
