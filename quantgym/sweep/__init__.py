"""Evaluation grids (agents × env ids × env kwargs × seeds) on a process pool or Ray, and the leaderboard report.

- :mod:`quantgym.sweep.grid`: grid files and stable run ids (:func:`load_grid`, :class:`RunSpec`);
- :mod:`quantgym.sweep.runner`: :func:`run_sweep` with the ``local`` and ``ray`` backends, resumable;
- :mod:`quantgym.sweep.report`: :func:`build_report` (markdown + self-contained HTML leaderboard);
- :mod:`quantgym.sweep.cli`: ``quantgym sweep`` and ``quantgym report``.

Ray is imported only inside the ``ray`` backend (extra ``distributed``). Docs: docs/sweeps.md.
"""

from typing import Any

#: public name -> submodule (imported on first use: ``quantgym --help`` loads neither)
_LAZY = {**dict.fromkeys(("Grid", "GridError", "RunSpec", "grid_from_flags", "load_grid", "parse_grid"), "grid"),
         **dict.fromkeys(("BACKENDS", "SweepError", "SweepOutcome", "execute_run", "run_sweep"), "runner"),
         "build_report": "report"}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
