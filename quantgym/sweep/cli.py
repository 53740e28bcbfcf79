"""CLI plugin: ``quantgym sweep`` and ``quantgym report`` (``register(app)``; see quantgym/cli.py PLUGINS).

Ray is never imported here at import time; ``--backend ray`` imports it inside the command and fails
with a one-line message naming the ``distributed`` extra when it is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer


def _split(value: Optional[str]) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _sharpe_caption(env_ids) -> str:
    """How the Sharpe column is computed for the tasks of ``env_ids`` (:func:`quantgym.tasks.sharpe_notes`)."""
    from quantgym.tasks import sharpe_notes, task_of

    names = []
    for e in dict.fromkeys(env_ids):
        try:
            names.append(task_of(e).name)
        except ValueError:  # an env id of no registered task: its convention is unknown
            continue
    return sharpe_notes(names)


def results_table(name: str, outcome):
    """The end-of-sweep table, readable at 80–100 columns.

    One row per run: agent with the short run id below it, env id with its kwargs below it (one ``k=v``
    per line), seed,
    Sharpe, Ret%, MaxDD% ("failed" in the Sharpe column of a failed run, its error following the table, and
    of an LLM run whose calls were never answered, ``status`` failed; a partial one is marked); the
    caption says how each task computes its Sharpe.
    No vertical rules, and text cells fold instead of being cut with "…".
    """
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"Sweep{'' if name == 'sweep' else ' ' + name}: {outcome.n_runs} runs ({len(outcome.executed)} run now, "
                        f"{len(outcome.skipped)} already done, {len(outcome.failed)} failed)", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  caption=_sharpe_caption(r["spec"]["env_id"] for r in outcome.records) or None, caption_justify="left")
    env_width = max([len(r["spec"]["env_id"]) for r in outcome.records] + [12])
    for col in ("agent / run", "env / kwargs", "seed", "Sharpe", "Ret%", "MaxDD%"):
        num = col in ("Sharpe", "Ret%", "MaxDD%", "seed")
        table.add_column(col, justify="right" if num else "left", overflow="fold",
                         no_wrap=col in ("seed", "Sharpe", "Ret%", "MaxDD%"),
                         min_width=min(env_width, 30) if col == "env / kwargs" else None)

    def f(x, nd=2):
        return "" if x is None else f"{x:.{nd}f}"

    for rec in outcome.records:
        s = rec["spec"]
        row = rec.get("summary") or {}
        kw = "\n".join(f"  {k}={v}" for k, v in sorted(s["env_kwargs"].items()))
        ok = rec["status"] == "ok"
        # an LLM run whose calls were never answered ran to its end but is no result (summary.csv: status failed)
        answered = row.get("status") != "failed"
        name = (rec.get("result") or {}).get("agent") or row.get("agent") or s["agent"]  # the display name
        mark = "" if row.get("status") in (None, "ok") else f" ({row['status']})"
        table.add_row(escape(str(name) + mark) + f"\n  [dim]{rec['run_id'][:8]}[/]",
                      escape(s["env_id"] + ("\n" + kw if kw else "")), str(s["seed"]),
                      f(row.get("sharpe"), 3) if ok and answered else "[red]failed[/]",
                      f(row.get("ret_pct")) if answered else "", f(row.get("maxdd_pct")) if answered else "",
                      end_section=True)
    return table


def register(app: typer.Typer) -> None:
    """Add the ``sweep`` and ``report`` commands to ``app``."""

    @app.command("sweep")
    def sweep(
        config: Optional[Path] = typer.Argument(
            None, help="Grid file (YAML: agents, envs, env_kwargs, seeds; see docs/sweeps.md). Or use the flags."),
        backend: str = typer.Option("local", "--backend", "-b", help="local (process pool) or ray (Ray Core)."),
        address: Optional[str] = typer.Option(
            None, "--address", help="Ray: cluster address ('auto', 'ray://HOST:10001', 'HOST:6379'); "
            "default: start a local Ray."),
        out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output folder (default results/sweep-<UTC>/). "
                                           "Rerunning into the same folder skips finished runs."),
        workers: Optional[int] = typer.Option(
            None, "--workers", "-w", min=1, help="local: pool size (default: CPUs); ray: max runs in flight."),
        agents: Optional[str] = typer.Option(None, "--agents", help="Without CONFIG: comma-separated agent specs."),
        envs: Optional[str] = typer.Option(None, "--envs", help="Without CONFIG: comma-separated env ids."),
        sets: Optional[list[str]] = typer.Option(
            None, "--set", help="Without CONFIG: env kwarg NAME=V1[,V2...] (alternatives), repeatable."),
        seeds: Optional[str] = typer.Option(None, "--seeds", help="Without CONFIG: comma-separated seeds (default 0)."),
        data: Optional[str] = typer.Option(None, "--data", help="Without CONFIG: the data directory of the task whose sweep hooks load shared data (default: the bundled real data)."),
        blind: bool = typer.Option(False, "--blind", help="Without CONFIG: every run blind (docs/blind.md; "
                                   "PortBench and Quant-Arena ids). Named and blind: --set blind=false,true."),
        retries: int = typer.Option(
            2, "--retries", min=0, help="Ray: times a run is submitted again after its worker or node died "
            "(each failure is recorded in the run's record)."),
        retry_failed: bool = typer.Option(True, "--retry-failed/--keep-failed",
                                          help="On resume, run again the runs that failed before (default)."),
        strict: bool = typer.Option(False, "--strict", help="Exit with code 1 when a run failed."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    ) -> None:
        """Run a grid of agents × env ids × env kwargs × seeds on a local process pool or on Ray.

        Each finished run is written at once to OUT/runs/<run_id>.json (run id = hash of the run spec), so an
        interrupted sweep resumes where it stopped; a failing run is recorded with its error and the grid goes on.
        At the end OUT/summary.csv and OUT/results.json hold every run in the common results schema.
        """
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from quantgym.cli_errors import check_out_dir, default_out, fail
        from quantgym.cli_errors import out_dir as cli_out_dir
        from quantgym.sweep.grid import GridError, grid_from_flags, load_grid
        from quantgym.sweep.runner import BACKENDS, SweepError, check_runs, run_sweep

        console = Console()
        try:
            if config is not None:
                if agents or envs or sets or seeds or data or blind:
                    raise GridError("give either CONFIG or the grid flags (--agents/--envs/--set/--seeds/--data/"
                                    "--blind; in CONFIG: blind: [false, true])")
                grid = load_grid(config)
            else:
                if not agents or not envs:
                    raise GridError("give a grid file CONFIG, or at least --agents and --envs")
                grid = grid_from_flags(_split(agents), _split(envs), sets or [],
                                       [int(s) for s in _split(seeds)] or [0], data=data, blind=blind)
        except (GridError, OSError, ValueError) as exc:
            fail(exc)
        out_dir = Path(out) if out else default_out("sweep")
        check_out_dir(out_dir)
        if backend not in BACKENDS:
            fail(f"--backend: unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        specs = grid.expand()
        try:  # every env id, env kwarg, agent spec, the data and each run (e.g. its period): before the first run
            shared = check_runs(specs)
        except SweepError as exc:
            fail(exc)
        n = len(specs)
        with cli_out_dir(out_dir), Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, disable=quiet or not console.is_terminal) as progress:
            tid = progress.add_task(f"sweep{'' if grid.name == 'sweep' else ' ' + grid.name} ({backend})", total=n)
            failed_now: list[dict] = []

            def on_result(rec: dict) -> None:
                progress.advance(tid)
                if rec.get("status") != "ok":
                    failed_now.append(rec)

            try:
                outcome = run_sweep(grid, out_dir, backend=backend, address=address, workers=workers,
                                    retry_failed=retry_failed, on_result=on_result, data=shared, retries=retries,
                                    meta={"command": f"quantgym sweep {config or '(flags)'} --backend {backend}",
                                          "argv": " ".join(sys.argv)})
            except SweepError as exc:
                progress.stop()
                fail(exc)
        console.print(results_table(grid.name, outcome))
        for line in placement_lines(outcome):
            console.print(escape(line), soft_wrap=True)
        for w in outcome.warnings:  # e.g. a run record that could not be read: that run ran again
            console.print(f"[yellow]warning:[/] {escape(w)}", soft_wrap=True)
        for rec in outcome.records:
            if rec["status"] != "ok":
                err = rec.get("error") or {}
                console.print(f"[red]failed[/] {rec['run_id'][:8]} {rec['spec']['agent']} @ {rec['spec']['env_id']}: "
                              f"{err.get('type')}: {escape(str(err.get('message'))[:200])}", soft_wrap=True)
        console.print(f"Wrote [bold]{out_dir}[/] (runs/, summary.csv, results.json) in {outcome.elapsed_s:.1f}s")
        if strict and outcome.failed:
            raise typer.Exit(1)

    @app.command("report")
    def report(
        results_dirs: list[Path] = typer.Argument(..., metavar="RESULTS_DIR",
                                                  help="Results folders of bench / eval / sweep (any number)."),
        out: Path = typer.Option(..., "--out", "-o", help="Output folder for leaderboard.md/.html, summary.csv, img/."),
        title: str = typer.Option("quantgym leaderboard", "--title", help="Page title."),
    ) -> None:
        """Merge results folders into one leaderboard: markdown + a self-contained HTML page with the plots."""
        from rich.console import Console
        from rich.markup import escape

        from quantgym.cli_errors import check_out_dir, fail
        from quantgym.cli_errors import out_dir as cli_out_dir
        from quantgym.sweep.report import ReportError, build_report

        console = Console()
        check_out_dir(out)
        with cli_out_dir(out):  # a failed report removes the folder it created when nothing was written
            try:
                rep = build_report(results_dirs, out, title=title)
            except ReportError as exc:
                fail(exc)
        for w in rep.warnings:
            console.print(f"[yellow]warning:[/] {escape(w)}")
        console.print(f"Leaderboard from {len(rep.sources)} folder(s), {len(rep.rows)} rows: "
                      f"[bold]{rep.markdown_path}[/], [bold]{rep.html_path}[/]")


def placement_lines(outcome: Any) -> list[str]:
    """Where a Ray sweep's new runs ran (runs per node) and which runs were retried after a worker or node
    died; nothing for the local backend."""
    info = outcome.backend_info or {}
    if "nodes" not in info:
        return []
    new = set(outcome.executed)
    per: dict[str, int] = {}
    for rec in outcome.records:
        if rec["run_id"] in new:
            node = (rec.get("timing") or {}).get("node") or "?"
            per[node] = per.get(node, 0) + 1
    nodes = info["nodes"]
    dead = sorted(n[:8] for n, v in nodes.items() if not v.get("alive"))
    lines = [f"Ray: {len(new)} runs on {len(per)} of {len(nodes)} nodes ("
             + ", ".join(f"{n[:8]}: {k}" for n, k in sorted(per.items())) + ")"
             + (f"; dead nodes: {', '.join(dead)}" if dead else "")]
    retried = info.get("retried") or {}
    if retried:
        recs = {r["run_id"]: r for r in outcome.records}
        parts = []
        for run_id, k in sorted(retried.items()):
            why = (recs.get(run_id, {}).get("retries") or [{}])[-1].get("type", "?")
            ok = recs.get(run_id, {}).get("status") == "ok"
            parts.append(f"{run_id[:8]} ({k}× {why}, {'then ok' if ok else 'failed'})")
        lines.append(f"{len(retried)} run(s) retried after a worker or node died: " + ", ".join(parts))
    return lines


__all__ = ["register", "results_table", "placement_lines"]
