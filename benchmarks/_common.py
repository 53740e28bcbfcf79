"""Helpers shared by the benchmark scripts (run as ``python benchmarks/<script>.py``)."""

from __future__ import annotations

import time
from typing import Callable, Sequence


def best_time(fn: Callable[[], object], repeat: int) -> float:
    """Best wall time of ``repeat`` calls of ``fn``, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def print_table(title: str, rows: Sequence[Sequence[str]],
                columns: Sequence[str] = ("measurement", "result", "note")) -> None:
    """Print ``rows`` as a rich table (plain ``a | b | c`` lines without rich)."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover
        for r in rows:
            print(" | ".join(r))
        return
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*r)
    Console().print(t)
