"""``quantgym reproduce portbench``: the §10 reproduction, the clean/paper ablation and docs-ready markdown.

Plugin of :mod:`quantgym.cli` (``register(app)``); imports no optional extra.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Optional

import typer


def _split(v: Optional[str]) -> list[str]:
    return [x.strip() for x in (v or "").split(",") if x.strip()]


def _print_table(console, title: str, head: list[str], rows: list[list[str]], section_ends=(), n_text: int = 2,
                 caption: str | None = None):
    """Text columns left (repeated in every part when the table is split to fit), numbers right; ``caption``
    under it."""
    from quantgym.tables import Col, print_table

    ends = set(section_ends)
    print_table(console, title, [Col(h, "left" if i < n_text else "right") for i, h in enumerate(head)], rows,
                keys=n_text, end_sections=[i in ends and i < len(rows) - 1 for i in range(len(rows))], caption=caption)


def register(app: typer.Typer) -> None:
    """Add the ``reproduce`` command to ``app``."""

    @app.command("reproduce")
    def reproduce_cmd(
        task: str = typer.Argument("portbench", help="Task to reproduce (only 'portbench')."),
        out: Path = typer.Option(Path("results/reproduce"), "--out", "-o",
                                 help="Output folder: portbench_reproduction.md and .json."),
        universe: str = typer.Option("89_no_crypto", "--universe",
                                     help="Paper universe (spec §11.1): 89_no_crypto | 81_crypto."),
        agents: Optional[str] = typer.Option(None, "--agents", help="Comma-separated baseline keys (default: all six)."),
        periods: Optional[str] = typer.Option(None, "--periods",
                                              help="Comma-separated periods (default: the four published ones)."),
        ablation: bool = typer.Option(True, "--ablation/--no-ablation", help="Run the one-flag-at-a-time ablation."),
        ablation_flags: Optional[str] = typer.Option(None, "--ablation-flags",
                                                     help="Comma-separated flags for the ablation (default: all)."),
        universes: bool = typer.Option(True, "--universes/--no-universes",
                                       help="Re-measure spec §11.1's universe evidence table."),
        stress_ablation: bool = typer.Option(True, "--stress-ablation/--no-stress-ablation",
                                             help="Also run the ablation on EqW covid_2020 (weekly)."),
        docs: Optional[Path] = typer.Option(None, "--docs", help="Also splice the markdown into this document "
                                            "between its '<!-- BEGIN/END quantgym reproduce portbench -->' markers."),
    ) -> None:
        """Reproduce the paper's baseline tables (paper and clean mode) and the ablation.

        Runs the six baselines in paper and clean mode on the published settings, compares them with the
        page's numbers (spec §10.2/§10.3), runs the ablation and writes docs-ready markdown."""
        from rich.console import Console
        from rich.progress import Progress

        from quantgym.envs.portbench.paper import reproduce as rp
        from quantgym.envs.portbench.paper.config import PAPER_FLAGS, UNIVERSES

        console = Console()
        if task != "portbench":
            raise typer.BadParameter(f"only 'portbench' can be reproduced, got {task!r}")
        if universe not in UNIVERSES:
            raise typer.BadParameter(f"--universe must be one of {UNIVERSES}")
        flags = _split(ablation_flags) or list(PAPER_FLAGS)
        bad = [f for f in flags if f not in PAPER_FLAGS]
        if bad:
            raise typer.BadParameter(f"unknown ablation flag(s) {bad}; choose from {list(PAPER_FLAGS)}")
        ag = _split(agents) or None
        per = _split(periods) or None
        from quantgym.envs.portbench.config import BENCH_PERIODS, resolve_period

        bad_ag = [a for a in (ag or []) if a not in rp.PAPER_BASELINES]
        if bad_ag:
            raise typer.BadParameter(f"no published figures for baseline(s) {bad_ag}; choose from "
                                     f"{list(rp.PAPER_BASELINES)}")
        for p in per or []:
            try:
                resolve_period(p)
            except ValueError as exc:
                raise typer.BadParameter(str(exc)) from None
        n_ag = len(ag or rp.PAPER_BASELINES)
        n_per = len(per or BENCH_PERIODS)
        total = 2 * n_ag * n_per + (len(flags) * (1 + stress_ablation) if ablation else 0) + (2 if universes else 0)
        opts = [f"--universe {universe}"] if universe != "89_no_crypto" else []
        opts += [f"--agents {','.join(ag)}"] if ag else []
        opts += [f"--periods {','.join(per)}"] if per else []
        opts += ["--no-ablation"] if not ablation else ([f"--ablation-flags {','.join(flags)}"] if ablation_flags else [])
        opts += ["--no-universes"] if not universes else []
        opts += ["--no-stress-ablation"] if not stress_ablation else []
        opts += [f"--docs {docs}"] if docs is not None else []
        command = " ".join(["quantgym reproduce portbench", *opts, f"--out {out}"])
        with Progress(console=console, transient=True) as progress:
            tid = progress.add_task("PortBench reproduction", total=total)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # nanstd of 1-observation columns (risk parity)
                rep = rp.reproduce(ag, per, universe=universe, ablation_flags=flags if ablation else None,
                                   universes=universes, stress_ablation=stress_ablation, command=command,
                                   progress=lambda s: progress.advance(tid))
        from quantgym.envs.portbench.config import SHARPE_NOTE

        tables = rp.terminal_tables(rep)
        for k, (title, head, rows, ends) in enumerate(tables):
            n_text = next((i for i, h in enumerate(head) if h in ("paper", "Sharpe", "Ret%")), 1)
            _print_table(console, title, head, rows, ends, n_text,
                         caption=f"{SHARPE_NOTE}." if k == len(tables) - 1 else None)
        paths = rp.write_outputs(rep, out)
        if docs is not None:
            try:
                rp.splice_into(docs, rp.to_markdown(rep))
            except (OSError, ValueError) as exc:
                raise typer.BadParameter(str(exc)) from None
            console.print(f"updated {docs}")
        console.print(f"wrote {paths['markdown']} and {paths['json']} ({rep.seconds:.0f} s)")
