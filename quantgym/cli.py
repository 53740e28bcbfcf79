"""The ``quantgym`` command line (typer).

``quantgym bench`` is the main job: every task's section runs its classical
agents on the bundled real data, prints paper-style tables and writes the
results folder (:mod:`quantgym.results`). Each task contributes a section
through ``quantgym.envs.<task>.bench:run_section(ctx) -> SectionResult``; ``--data TASK=PATH`` runs a
section on the user's own data set instead, loaded once by that module's ``load_data(path, options)``
(:class:`quantgym.tasks.Task`).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from quantgym.results import SectionResult, write_results
from quantgym.cli_errors import ClickException, RootGroup, check_out_dir, default_out, fail, make_out_dir
from quantgym.cli_errors import out_dir as cli_out_dir
from quantgym.cli_options import TaskCommand
from quantgym._util import MissingExtraError


def _titles() -> list[str]:
    from quantgym.tasks import tasks

    return [t.title for t in tasks()]


app = typer.Typer(
    name="quantgym",
    help="quantgym: Gymnasium benchmarks of LLM agents and RL policies on real finance work "
    f"({', '.join(_titles())}).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=RootGroup,  # one-line usage errors, plain --help (quantgym.cli_errors)
)

def _version(value: bool) -> None:
    if value:
        from quantgym import __version__

        typer.echo(f"quantgym {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """quantgym: Gymnasium benchmarks of LLM agents and RL policies on real finance work."""


#: generic commands: modules exposing ``register(app: typer.Typer)`` (a task adds its own commands through
#: its record's ``commands``, :mod:`quantgym.tasks`); a missing module is skipped
PLUGINS: tuple[str, ...] = (
    "quantgym.agents.llm.cli",  # quantgym eval
    "quantgym.sweep.cli",  # quantgym sweep, quantgym report
)


@dataclass
class BenchContext:
    """What a bench section receives: where to write, how to report progress, its options."""

    out_dir: Path
    console: Console
    progress: Any  # rich.progress.Progress
    options: dict[str, Any] = field(default_factory=dict)
    #: the user's data set of ``--data TASK=PATH`` as the section's ``load_data`` returned it; None = bundled data
    data: Any = None


def _bench_tasks() -> list[str]:
    from quantgym.tasks import iter_with

    return [t.name for t in iter_with("bench")]


def _available_sections() -> dict[str, Any]:
    from quantgym.tasks import iter_with

    found = {}
    for t in iter_with("bench"):
        task, mod = t.name, t.bench
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name and mod.startswith(exc.name):  # the declared module itself is missing
                import warnings

                warnings.warn(f"task {task!r} declares the bench module {mod!r}, which does not exist; "
                              "`quantgym bench` skips the task", RuntimeWarning, stacklevel=2)
                continue
            raise
        found[task] = module
    return found


def _parse_data(values: Optional[list[str]], wanted: list[str], sections: dict[str, Any]) -> dict[str, Path]:
    """``--data TASK=PATH`` (repeatable, comma-separated) -> {task: resolved path}; one clear line (exit 2)
    for an unknown or unselected task, a missing ``=``, a task twice or a path that does not exist. A section
    takes ``--data`` when its module has ``load_data(path, options)``; ``DATA_REFUSAL`` says why one does not."""
    out: dict[str, Path] = {}
    for item in (v.strip() for value in values or () for v in value.split(",")):
        if not item:
            continue
        task, eq, path = (x.strip() for x in item.partition("="))
        if not eq or not task or not path:
            fail(f"--data {item!r}: expected TASK=PATH, e.g. --data {_bench_tasks()[0]}=~/my-data")
        if task not in _bench_tasks():
            from quantgym.tasks import task_names

            why = "has no bench section" if task in task_names() else "is not a task"
            fail(f"--data {item}: {task!r} {why}; choose from {', '.join(_bench_tasks())}")
        if task not in wanted:
            fail(f"--data {item}: {task} is not among the tasks run ({', '.join(wanted)}); add it to --tasks")
        if task in out:
            fail(f"--data {item}: a second data set for {task} (the first: {out[task]}); give one per task")
        module = sections.get(task)
        if not callable(getattr(module, "load_data", None)):
            fail(f"--data {item}: " + (getattr(module, "DATA_REFUSAL", None)
                                       or f"{task}'s bench section takes no user data; run it without --data"))
        p = Path(path).expanduser().resolve()
        if not p.exists():
            fail(f"--data {item}: {p} does not exist; give the folder or file of the data set (docs/data.md)")
        out[task] = p
    return out


def _load_data(paths: dict[str, Path], sections: dict[str, Any], options: dict) -> dict[str, tuple[Any, list[str]]]:
    """Each task's data set, loaded once by its section's ``load_data(path, options) -> (data, notes)`` (which
    also checks it against the options); a load or check failure is one line (exit 2)."""
    out = {}
    for task, p in paths.items():
        try:
            out[task] = sections[task].load_data(str(p), options)
        except (ValueError, FileNotFoundError, OSError) as exc:
            fail(f"--data {task}={p}: {exc}")
    return out


def _split(value: Optional[str]) -> Optional[list[str]]:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def bench(
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Output folder (default: results/bench-<UTC timestamp>/)."
    ),
    tasks: Optional[str] = typer.Option(
        None, "--tasks", help=f"Comma-separated tasks to run (default: all): {', '.join(_bench_tasks())}."
    ),
    data: Optional[list[str]] = typer.Option(
        None, "--data", metavar="TASK=PATH",
        help="Run a task on your own data set instead of the bundled one, repeatable or comma-separated: "
        f"TASK=PATH, e.g. {_bench_tasks()[0]}=DIR (docs/data.md). The path is printed and recorded in "
        "results.json.",
    ),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Write PNG plots."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar (tables are still printed)."),
    blind: bool = typer.Option(False, "--blind", help="Blind mode (docs/blind.md) for the PortBench --agent runs "
                               "and the Quant-Arena submissions; Market-Bench has none (give --tasks)."),
    capital: Optional[float] = typer.Option(None, "--capital", help="USD the policy manages (default 1,000,000): "
                                            "the P&L net of the inference cost is on it."),
    price_in: Optional[float] = typer.Option(None, "--price-in", help="USD per 1M prompt tokens of the --agent LLM "
                                             "(default: the bundled table, docs/llm-agents.md)."),
    price_out: Optional[float] = typer.Option(None, "--price-out", help="USD per 1M completion tokens."),
    **task_options: Any,
) -> None:
    """Run the benchmark's classical agents on the bundled real data (or --data) and print paper-style tables.

    Writes OUT/summary.csv: the columns task, agent, profile, period, sharpe,
    ret_pct, maxdd_pct, vol_pct, ceps, gate, cost_usd, net_pnl_usd, pnl_per_cost,
    status, then each task's own (PortBench's intervals: docs/uncertainty.md);
    OUT/results.json (everything, incl. NAV series) and PNG plots.
    """
    # the tasks' own options (--profiles, ...: their records' bench_options) arrive in task_options
    from quantgym.cli_options import collect, declared

    console = Console()
    out_dir = Path(out) if out else default_out("bench")
    sections = _available_sections()
    wanted = _split(tasks) or list(sections)
    unknown = [t for t in wanted if t not in _bench_tasks()]
    if unknown:
        from quantgym.tasks import task_names

        why = ", ".join(f"{t!r} has no bench section" if t in task_names() else f"unknown task {t!r}"
                        for t in unknown)
        fail(f"--tasks: {why}; choose from {', '.join(_bench_tasks())}")
    data_paths = _parse_data(data, wanted, sections)
    # every task's option key is in options (None when not given), then the values given
    options: dict[str, Any] = {d["option"].key: None for d in declared("bench_options", "bench").values()}
    try:
        options.update({o.key: v for o, v in collect("bench_options", "bench", task_options, wanted)})
    except ValueError as exc:
        fail(exc)
    options.update(plots=plots, data={t: str(p) for t, p in data_paths.items()})
    from quantgym.agents.llm.prices import check_price
    from quantgym.costs import check_capital

    try:  # the net-of-cost columns (quantgym.costs): every value checked before anything runs
        options.update(capital=check_capital(capital), price_in=check_price(price_in, "--price-in"),
                       price_out=check_price(price_out, "--price-out"))
    except ValueError as exc:
        fail(exc)
    if blind:
        from quantgym.plan import check_env_kwargs
        from quantgym.tasks import iter_with

        envs = {t.name: next(iter(t.envs)) for t in iter_with("bench") if t.name in wanted}
        no_blind = []
        for t, e in envs.items():
            try:
                check_env_kwargs(e, {"blind": True})
            except ValueError:
                no_blind.append(t)
        if no_blind:
            fail(f"--blind: {', '.join(no_blind)} has no blind mode; choose --tasks from the others")
        options["blind"] = True
    for task in wanted:  # validate every option before anything runs or is written
        check = getattr(sections.get(task), "validate", None)
        if check is not None:
            try:
                check(options)
            except ValueError as exc:
                fail(exc)
    check_out_dir(out_dir)
    loaded = _load_data(data_paths, sections, options)  # once per task, checked against the options
    for task, (_, notes) in loaded.items():  # once, before the tables: these are not the bundled benchmark's
        console.print(f"[bold yellow]{task}: your own data {data_paths[task]}[/] (not the bundled benchmark data)",
                      highlight=False, soft_wrap=True)
        for note in notes:
            console.print(f"  note: {note}", highlight=False, markup=False, soft_wrap=True)
    with cli_out_dir(out_dir):  # a failed run removes the folder it created when nothing was written
        lock = _claim_out_dir(out_dir, console)
        try:
            _run_bench(out_dir, wanted, sections, options, quiet, plots, console,
                       {t: d for t, (d, _) in loaded.items()},
                       {t: {"path": str(data_paths[t]), "notes": n} for t, (_, n) in loaded.items()})
        finally:
            lock.unlink(missing_ok=True)


app.command()(TaskCommand("bench", bench, "bench_options", "bench"))


def _claim_out_dir(out_dir: Path, console: Console) -> Path:
    """Create ``out_dir`` (:func:`quantgym.cli_errors.make_out_dir`) and take its lock file; one clear line
    (exit 2) when that is impossible."""
    make_out_dir(out_dir)
    lock = out_dir / ".quantgym.lock"
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        fail(f"another quantgym run is writing to {out_dir} (lock {out_dir / '.quantgym.lock'}); "
             "choose another --out or remove the lock if no run is active")
    except OSError as exc:
        fail(f"cannot write the results folder {out_dir}: {exc.strerror or exc}")
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    if (out_dir / "summary.csv").exists():
        console.print(f"[yellow]note:[/] {out_dir} already holds results; summary.csv and results.json are replaced")
    return lock


def _run_bench(out_dir: Path, wanted, sections, options, quiet: bool, plots: bool, console: Console,
               data: dict[str, Any] | None = None, provenance: dict[str, dict] | None = None) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    results: list[SectionResult] = []
    timings: dict[str, dict[str, float]] = {}  # task -> wall and process-tree CPU seconds
    from quantgym.jit import uncompiled

    # once per install, for the tasks whose job calls compiled kernels in this process
    if uncompiled([Path(sections[t].__file__).parent for t in wanted
                   if t in sections and getattr(sections[t], "COMPILES_KERNELS", True)]):
        console.print("First run: compiling the kernels (once; later runs load numba's cache)",
                      highlight=False, markup=False)
    t0, cpu0 = time.perf_counter(), _tree_cpu_seconds()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=quiet or not console.is_terminal,  # piped: no bar rendered once at the end
        transient=False,
    ) as progress:
        for task in wanted:
            if task not in sections:
                console.print(f"[yellow]{task}: no bench section installed yet, skipped[/]")
                continue
            ctx = BenchContext(out_dir=out_dir, console=console, progress=progress, options=options,
                               data=(data or {}).get(task))
            w0, c0 = time.perf_counter(), _tree_cpu_seconds()
            try:
                results.append(sections[task].run_section(ctx))
            except (ValueError, FileNotFoundError, MissingExtraError, ClickException) as exc:  # bad --agent, key…
                progress.stop()
                msg = exc.format_message() if isinstance(exc, ClickException) else str(exc)
                fail(f"{task}: {msg}")
            if "quantgym.sandbox" in sys.modules:  # the section's warm sandbox parents: reaped, so their CPU
                sys.modules["quantgym.sandbox"].close_warm_parents()  # counts in the task's time below
            timings[task] = {"wall_s": time.perf_counter() - w0, "cpu_s": _tree_cpu_seconds() - c0}
    for r in results:  # a section run on user data says so in its own block too (bundled data: no key)
        if (provenance or {}).get(r.task):
            r.extra["data"] = provenance[r.task]
    from quantgym.costs import DEFAULT_CAPITAL, cost_columns, cost_record, print_cost_table
    from quantgym.leaderboard.metrics import get_metric

    capital = options.get("capital") or DEFAULT_CAPITAL
    for row in (row for r in results for row in r.rows if "cost_usd" not in row.extra):
        # a section that sets no cost ran classical agents only (an LLM --agent's rows carry their own)
        row.extra.update(cost_columns(cost_record(None, row.ret_pct, capital,
                                                  pnl=get_metric("net_pnl_usd").applies_to(row.task))))
    if any((run.get("inference") or {}).get("price_source", "no LLM calls") != "no LLM calls"
           for r in results for run in r.runs):  # an --agent LLM: its cost beside the baselines' P&L
        print_cost_table(console, results, capital)
    write_results(out_dir, results, meta={"command": " ".join(sys.argv), "options": options,
                                          "data": {t: (provenance or {}).get(t) for t in wanted if t in sections},
                                          "elapsed_s": time.perf_counter() - t0, "timings": timings})
    files = "summary.csv, results.json" + (", plots" if plots else "")
    console.print(f"\nWrote [bold]{out_dir}[/] ({files}) in {time.perf_counter() - t0:.1f}s")
    timings["total"] = {"wall_s": time.perf_counter() - t0, "cpu_s": _tree_cpu_seconds() - cpu0}
    console.print(_timing_table(timings), highlight=False, markup=False)


def _tree_cpu_seconds() -> float:
    """User + system CPU seconds of this process and its reaped children (the sandboxed attempts)."""
    import resource

    return sum(sum(resource.getrusage(who)[:2]) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


def _timing_table(timings: dict[str, dict[str, float]]) -> str:
    """The time each task took: wall seconds and CPU seconds of the process tree (sandbox children
    included; CPU above wall means both cores worked), one line per task and the total."""
    lines = [f"{'time per task':<16}{'wall s':>10}{'CPU s':>10}"]
    lines += [f"{task:<16}{t['wall_s']:>10.1f}{t['cpu_s']:>10.1f}" for task, t in timings.items()]
    return "\n".join(lines)


def _register_plugins() -> None:
    from quantgym.tasks import tasks

    for mod in (*PLUGINS, *(m for t in tasks() for m in t.commands)):
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name and mod.startswith(exc.name):
                continue
            raise
        module.register(app)


_register_plugins()


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
