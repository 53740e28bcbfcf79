"""``quantgym qa``: evaluate agents on the PortBench static QA layer (plugin, spec §9.3–§10.5).

Registered by :mod:`quantgym.cli` through ``register(app)``. Imports nothing heavy or optional at
import time; LLM/RL agents are resolved inside the command by
:func:`quantgym.agents.registry.make_agent` (``task="portbench_qa"``).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer

TASK = "portbench_qa"


def _split_list(values: Optional[list[str]]) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out += [x.strip() for x in str(v).split(",") if x.strip()]
    return out


def resolve_agent(spec: str, data=None, fidelity: str = "clean", out_dir: Path | None = None):
    """``oracle`` / ``naive`` -> reference policies; anything else -> ``make_agent(spec, task="portbench_qa")``.

    Raises
    ------
    ValueError
        Unknown spec, or a scheme whose optional extra is missing.
    """
    from quantgym.envs.portbench.static_qa.policies import make_reference_policy

    if spec in ("oracle", "naive"):
        return make_reference_policy(spec, data=data, fidelity=fidelity)
    from quantgym.agents.registry import AgentSpec, make_agent

    parsed = AgentSpec.parse(spec)
    options: dict[str, Any] = {}
    if parsed.scheme == "openai" and out_dir is not None:  # keep a replayable transcript beside the results
        from quantgym.agents.llm.transcript import transcript_path

        options["transcript"] = transcript_path(Path(out_dir) / "transcripts", TASK, parsed.argument)
    return make_agent(parsed, task=TASK, **options)


def read_pipeline_ceps(paths: list[Path], profile: str = "balanced", period: str = "normal_2024") -> dict[str, float]:
    """Balanced-profile CEPS per agent from pipeline ``summary.csv`` files (spec §10.5).

    Parameters
    ----------
    paths : list of Path
        Results folders (containing ``summary.csv``) or ``summary.csv`` files.
    profile : str
        Profile whose CEPS is used (the paper: Balanced).
    period : str
        Preferred period; if an agent has no row for it, the mean CEPS over its periods is used (with a
        ``RuntimeWarning`` naming them).

    Returns
    -------
    dict agent -> CEPS (later files override earlier ones for the same agent).

    Raises
    ------
    FileNotFoundError
        A path without ``summary.csv``.
    ValueError
        A ``ceps`` cell that is not a number.
    """
    from quantgym.results import read_summary_csv

    out: dict[str, float] = {}
    for p in paths:
        f = Path(p)
        if f.is_dir():
            f = f / "summary.csv"
        if not f.is_file():
            raise FileNotFoundError(f"no summary.csv at {p}")
        per: dict[str, dict[str, float]] = {}
        for row in read_summary_csv(f):
            if row.get("task") != "portbench" or (row.get("profile") or "").lower() != profile:
                continue
            try:
                c = float(row.get("ceps") or "nan")
            except ValueError:
                raise ValueError(f"{f}: the ceps cell of {row.get('agent')!r} ({row.get('period')}) is not a number: "
                                 f"{row.get('ceps')!r}") from None
            if math.isfinite(c):
                per.setdefault(row["agent"], {})[row.get("period") or ""] = c
        for agent, by_period in per.items():
            if period not in by_period:  # never a silent stand-in: say which periods the mean is over
                import warnings

                warnings.warn(f"{f}: {agent!r} has no {period} run; its CEPS is the mean over "
                              f"{', '.join(sorted(by_period))}", RuntimeWarning, stacklevel=2)
            out[agent] = by_period[period] if period in by_period else sum(by_period.values()) / len(by_period)
    return out


def _match_ceps(agent: str, ceps: dict[str, float]) -> float | None:
    """Exact agent label, else the part after ``scheme:`` (e.g. ``openai:gpt-4o`` vs ``gpt-4o``)."""
    if agent in ceps:
        return ceps[agent]
    from quantgym.agents.registry import AgentSpec

    tail = AgentSpec.parse(agent).argument
    for k, v in ceps.items():
        if AgentSpec.parse(k).argument == tail:
            return v
    return None


def _qa_score(run) -> float:
    """The agent's QA score for the rank correlation: §9.5 Mean, or (subset of templates) the mean of the
    full-information template accuracies that were run."""
    m = run.table.get("Mean", math.nan)
    if math.isfinite(m):
        return m
    from quantgym.envs.portbench.static_qa.config import TEMPLATES

    vals = [run.table[t] for t in TEMPLATES if math.isfinite(run.table.get(t, math.nan))]
    return sum(vals) / len(vals) if vals else math.nan


def print_qa_table(console, runs: list, title: str) -> None:
    """The paper's §10.4 table (one row per agent), split to fit the terminal (agent in every part)."""
    from quantgym.envs.portbench.static_qa.aggregate import TABLE_COLUMNS
    from quantgym.tables import Col, fmt, print_table

    cols = [Col("agent", "left"), *[Col(c) for c in TABLE_COLUMNS]]
    rows = [[r.agent, *[fmt(v if v is not None and math.isfinite(v) else None, 3, missing="—")
                        for v in (r.table.get(c) for c in TABLE_COLUMNS)]] for r in runs]
    print_table(console, title, cols, rows, keys=1)


def register(app: typer.Typer) -> None:
    """Add the ``qa`` command to ``app``."""

    @app.command("qa")
    def qa(
        agent: list[str] = typer.Option(
            ..., "--agent", "-a",
            help="Agent spec, repeatable: oracle, naive, openai:MODEL, replay:FILE (see docs/qa.md).",
        ),
        out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output folder: summary.csv, results.json "
                                           "(default results/qa-<UTC stamp>)."),
        split: str = typer.Option("test", "--split", help="QA split: test (2025, default), val, train."),
        n: int = typer.Option(50, "--n", help="First N pairs per template in file order (paper: 50)."),
        templates: Optional[list[str]] = typer.Option(
            None, "--templates", help="Templates, comma-separated or repeated (default T1..T7)."),
        restricted: bool = typer.Option(True, "--restricted/--no-restricted",
                                        help="Also run the restricted T4_r/T5_r variants (default on)."),
        fidelity: str = typer.Option("clean", "--fidelity",
                                     help="clean (default, no answer leak) or paper (repo prompt with the leak)."),
        pipeline_results: Optional[list[str]] = typer.Option(
            None, "--pipeline-results",
            help="Pipeline results folder(s) with summary.csv (repeatable or comma-separated): reports the "
                 "QA-vs-Balanced-CEPS Spearman rank correlation across agents."),
        data: Optional[Path] = typer.Option(None, "--data", help="User data directory (default: bundled data)."),
        workers: int = typer.Option(1, "--workers", "-j", help="Parallel policy calls (LLM agents); results do "
                                                              "not depend on it."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
        blind: bool = typer.Option(False, "--blind", help="Blind questions (docs/blind.md): tickers as aliases, "
                                   "levels rebased; same scoring. Clean fidelity."),
    ) -> None:
        """Evaluate agents on the PortBench static QA layer and print the paper-style per-template table."""
        from rich.console import Console

        console = Console()
        from quantgym.cli_errors import check_out_dir, fail
        from quantgym.cli_errors import out_dir as cli_out_dir

        # every input checked before anything runs or is written: one line, exit 2
        if fidelity not in ("clean", "paper"):
            fail(f"--fidelity must be clean or paper; got {fidelity!r}")
        if split not in ("train", "val", "test"):
            fail(f"--split must be train, val or test; got {split!r}")
        if n < 1:
            fail(f"--n must be >= 1; got {n}")
        if out is None:
            from quantgym.cli_errors import default_out

            out = default_out("qa")
        check_out_dir(out)
        for spec in agent:
            try:
                check_qa_agent(spec)
            except ValueError as exc:
                fail(f"--agent: {exc}")
        with cli_out_dir(out):  # a failed run removes the folder it created when nothing was written
            _run(console, agent, out, split, n, templates, restricted, fidelity, pipeline_results, data, workers,
                 quiet, blind)


def check_qa_agent(spec: str) -> None:
    """Refuse a ``--agent`` of ``quantgym qa`` that :func:`resolve_agent` would refuse (the agent is not built).

    Raises
    ------
    ValueError
        Names the spec and the valid ones: oracle, naive, openai:MODEL, replay:FILE.
    """
    from quantgym.agents.registry import check_agent, valid_agents

    if spec in ("oracle", "naive"):
        return
    try:
        check_agent(spec, task=TASK)
    except ValueError:
        raise ValueError(f"unknown agent {spec!r} for PortBench-QA; valid: oracle, naive, "
                         f"{valid_agents(TASK)}") from None


def _run(console, agent, out, split, n, templates, restricted, fidelity, pipeline_results, data, workers,
         quiet, blind=False) -> None:
    """The body of ``quantgym qa`` once every input is checked."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from quantgym.cli_errors import fail
    from quantgym.envs.portbench.static_qa.aggregate import qa_ceps_spearman
    from quantgym.envs.portbench.static_qa.config import QAConfig
    from quantgym.envs.portbench.static_qa.env import PortBenchQAEnv
    from quantgym.envs.portbench.static_qa.runner import run_qa
    from quantgym.results import SectionResult, SummaryRow, write_results

    tmpl = _split_list(templates) or None
    t0 = time.perf_counter()
    try:
        env = PortBenchQAEnv(split=split, templates=tmpl, n_per_template=n,
                             restricted="both" if restricted else False, fidelity=fidelity,
                             data=None if data is None else str(data), **({"blind": True} if blind else {}))
    except (ValueError, FileNotFoundError) as exc:
        fail(exc)
    env_data = None if data is None else str(data)
    policies = []
    for spec in agent:
        try:
            from quantgym.envs.portbench.data import load_portbench_data

            pol = resolve_agent(spec, data=None if env_data is None else load_portbench_data(env_data),
                                fidelity=fidelity, out_dir=out)
        except (ValueError, FileNotFoundError) as exc:
            fail(f"--agent {spec}: {exc}")
        policies.append((spec, pol))

    runs = []
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, disable=quiet or not console.is_terminal, transient=True) as progress:
        for spec, pol in policies:
            tid = progress.add_task(f"QA {spec}", total=env.n_items)
            try:
                runs.append(run_qa(pol, agent=spec, env=env, workers=workers,
                                   on_item=lambda _r, tid=tid: progress.advance(tid)))
            except Exception as exc:  # the LLM agent's configuration errors stop the command
                console.print(f"[red]{spec}: {type(exc).__name__}: {exc}[/]")
                raise typer.Exit(1) from exc
    print_qa_table(console, runs, f"PortBench static QA — split {split}, first {n} per template, "
                                  f"fidelity {fidelity}" + (", blind" if blind else ""))

    spearman_info: dict[str, Any] | None = None
    pr = _split_list(pipeline_results)
    if pr:
        import warnings

        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                ceps = read_pipeline_ceps([Path(p) for p in pr])
        except (FileNotFoundError, ValueError) as exc:
            fail(f"--pipeline-results: {exc}")
        ceps_notes = [str(w.message) for w in caught]
        for note in ceps_notes:
            console.print(f"[yellow]{note}[/]")
        matched = {r.agent: _match_ceps(r.agent, ceps) for r in runs}
        qa_mean = {a: _qa_score(r) for a, r in zip(matched, runs) if matched[a] is not None}
        sp = qa_ceps_spearman(qa_mean, {a: c for a, c in matched.items() if c is not None})
        spearman_info = {**sp, "ceps_balanced": {a: c for a, c in matched.items() if c is not None},
                         "qa_mean": qa_mean, "sources": pr, "notes": ceps_notes}
        if sp["n"] >= 3:
            console.print(f"QA–CEPS (Balanced) Spearman rank correlation across {sp['n']} agents: "
                          f"[bold]ρ = {sp['rho']:.4f}[/] (paper: −0.47)")
        else:
            console.print(f"[yellow]QA–CEPS Spearman needs >= 3 agents with pipeline results; "
                          f"found {sp['n']} ({', '.join(sp['agents']) or 'none'})[/]")

    from quantgym.envs.portbench.static_qa.aggregate import TABLE_COLUMNS

    # the QA accuracies as summary.csv extra columns (qa_t1 ... qa_side), after the ten fixed ones
    label = (lambda a: f"{a} (blind)") if blind else (lambda a: a)  # docs/blind.md "Running blind"
    rows = [SummaryRow(task=TASK, agent=label(r.agent), period=split,
                       extra={"qa_" + c.lower().rstrip("."): r.table.get(c) for c in TABLE_COLUMNS}) for r in runs]
    section = SectionResult(
        task=TASK, rows=rows,
        runs=[{"agent": r.agent, "metrics": r.table, "n": r.summary["n"], "n_correct": r.summary["n_correct"],
               "n_regime": r.summary["n_regime"], "mean_pooled": r.summary["mean_pooled"],
               "records": r.records} for r in runs],
        extra={"config": {**QAConfig().to_dict(), "split": split, "n_per_template": n,
                          "templates": tmpl, "restricted": restricted, "fidelity": fidelity,
                          "data": env_data or "bundled", **({"blind": True} if blind else {})},
               "spearman_qa_ceps": spearman_info},
    )
    write_results(out, [section], meta={"command": " ".join(sys.argv), "elapsed_s": time.perf_counter() - t0})
    console.print(f"Wrote [bold]{out}[/] (summary.csv, results.json) in {time.perf_counter() - t0:.1f}s")
