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


def step_rates(env, duration: float, seed: int | None = None) -> dict[str, float]:
    """Steps per second of ``env`` by wall clock and by this process's CPU time (``time.process_time``), with
    the 1-minute load average at the end: the loop of ``gymnasium.utils.performance.benchmark_step`` (actions
    from ``env.action_space.sample()``, a reset after every episode end, counted in the time). On a shared
    machine the CPU rate is the figure that compares runs; the wall rate is what a user waits for."""
    import os

    env.reset(seed=seed)
    env.action_space.sample()
    steps = 0
    t0, c0 = time.perf_counter(), time.process_time()
    while True:
        steps += 1
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
        if time.perf_counter() - t0 > duration:
            break
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall": steps / wall, "cpu": steps / cpu if cpu > 0 else float("nan"), "steps": steps,
            "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")}


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


def marker(name: str) -> tuple[str, str]:
    """The begin / end markers of a generated block ``name`` in a markdown file."""
    return f"<!-- generated:{name} begin -->", f"<!-- generated:{name} end -->"


def splice(doc: str, name: str, body: str) -> str:
    """``doc`` with the text between the markers of block ``name`` replaced by ``body``.

    Raises
    ------
    ValueError
        If the markers are not in ``doc``.
    """
    begin, end = marker(name)
    if begin not in doc or end not in doc:
        raise ValueError(f"markers {begin} / {end} not found")
    a, b = doc.index(begin) + len(begin), doc.index(end)
    return doc[:a] + "\n" + body.rstrip("\n") + "\n" + doc[b:]


def write_or_check(path: str, name: str, body: str, check: bool) -> int:
    """Write block ``name`` of markdown file ``path`` (``check=False``), or return 1 (with a message)
    when the file's block differs from ``body`` (``check=True``); 0 otherwise."""
    from pathlib import Path

    p = Path(path)
    doc = p.read_text(encoding="utf-8")
    new = splice(doc, name, body)
    if check:
        if new != doc:
            print(f"{path}: block '{name}' is out of date; regenerate it with --write {path}")
            return 1
        print(f"{path}: block '{name}' up to date")
        return 0
    p.write_text(new, encoding="utf-8")
    print(f"wrote block '{name}' of {path}")
    return 0


def run_context() -> dict:
    """Versions and the 1-min load average of this run (for the figures written into docs/performance.md)."""
    import os
    import platform

    import gymnasium
    import numpy

    return {"python": platform.python_version(), "numpy": numpy.__version__, "gymnasium": gymnasium.__version__,
            "load_avg": os.getloadavg()[0]}


def append_performance(heading: str, command: str, setup: str, table: Sequence[str],
                       notes: Sequence[str] = ()) -> None:
    """Append a section to docs/performance.md: ``heading`` (dated), the command, ``setup`` (what was
    measured), versions and load average (:func:`run_context`), the markdown ``table`` and ``notes``."""
    from pathlib import Path

    ctx = run_context()
    lines = ["", f"### {heading} ({time.strftime('%Y-%m-%d %H:%M')} UTC)", "",
             f"Command: `{command}`. {setup} Python {ctx['python']}, numpy {ctx['numpy']}, gymnasium "
             f"{ctx['gymnasium']}; this 2-core machine shared with other jobs (1-min load average "
             f"{ctx['load_avg']:.1f} at the end of the run).", "", *table, "", *notes]
    with (Path(__file__).resolve().parents[1] / "docs" / "performance.md").open("a") as fh:
        fh.write("\n".join(lines) + "\n")
    print("appended to docs/performance.md")
