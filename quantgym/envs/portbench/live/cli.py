"""CLI plugin: ``quantgym data refresh`` and ``quantgym live`` (register with :func:`register`).

No optional extra is imported at module import time: the refresh extra (yfinance, requests) is
imported inside the refresh call, agent extras (openai, stable-baselines3) inside ``make_agent``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from quantgym.cli_errors import fail as _fail
from quantgym.envs.portbench.live.config import default_portbench_dir
from quantgym.tables import fmt


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "agent"


def register(app: typer.Typer) -> None:
    """Add ``data refresh`` and ``live`` to the ``quantgym`` app."""
    data_app = typer.Typer(help="Market data for live evaluation (user data directory, never the package).",
                           no_args_is_help=True)

    @data_app.command("refresh")
    def refresh(
        dest: Optional[Path] = typer.Argument(
            None, help="Data directory (default: $QUANTGYM_DATA/portbench or ~/.local/share/quantgym/portbench)."),
        since: Optional[str] = typer.Option(
            None, "--since", help="First day to download (YYYY-MM-DD); older history is kept and spliced. Default: "
            "incremental from the existing last date minus 14 days, or the full history for a new directory."),
        full: bool = typer.Option(False, "--full", help="Download the full history (2014 on) again."),
        end: Optional[str] = typer.Option(None, "--end", help="Last day to download (default: yesterday UTC)."),
        timeout: float = typer.Option(10.0, "--timeout", help="Seconds per HTTP request (probe: at most 5)."),
    ) -> None:
        r"""Download the latest PortBench prices (Yahoo Finance) and macro series (FRED), validate, record the vintage.

        Needs pip install "quantgym\[refresh]" and network access; offline it fails at once.

        The existing data are replaced only by a complete, validated download (atomic swap).
        """
        from quantgym.envs.portbench.live.data import RefreshError, refresh_live_data

        console = Console(highlight=False, soft_wrap=True)
        target = dest if dest is not None else default_portbench_dir()
        try:
            rec = refresh_live_data(target, since=since, full=full, timeout=timeout, end=end)
        except RefreshError as exc:
            _fail(str(exc))
        mode = "full history" if rec["full"] else f"from {rec['since']}"
        console.print(f"Refreshed [bold]{rec['dest']}[/]: data through {rec['last_date']} ({mode}; vintage "
                      f"{rec['vintage_utc']}; {len(rec['prices_last_date'])} price series, "
                      f"{len(rec['macro_last_date'])} FRED series)")
        for w in rec["warnings"]:
            console.print(f"[yellow]warning:[/] {escape(w)}")
        console.print(f"Vintage recorded in {Path(rec['dest']) / 'vintages.jsonl'}")

    app.add_typer(data_app, name="data")

    @app.command("live")
    def live(
        agent: str = typer.Option(..., "--agent", "-a", help="Agent spec: a baseline (equal_weight, 60/40, ...), "
                                  "openai:MODEL, replay:FILE or sb3:PATH."),
        profile: str = typer.Option("balanced", "--profile", "-p", help="conservative | balanced | aggressive."),
        data: Optional[str] = typer.Option(
            None, "--data", help="Data directory from `quantgym data refresh`, or 'bundled'. Default: the user data "
            "directory if it holds data, else the bundled data (ends 2025-12-31)."),
        days: int = typer.Option(12, "--days", help="Trading days of the first window (paper: 12); later calls "
                                 "append the days after the last recorded decision."),
        as_of: Optional[str] = typer.Option(None, "--as-of", help="Last decision date (default: the data's last day)."),
        run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="Run folder (default: "
                                               "results/live/<agent>_<profile>/)."),
        plots: bool = typer.Option(True, "--plots/--no-plots", help="Write live_ceps.png and live_nav.png."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the summary line."),
    ) -> None:
        """Run today's PortBench decision (or every missing day since the last run) and append it to a run folder.

        Each decision sees data through the previous close only (spec §2.5).

        Safe to call daily from cron: re-running the same day changes nothing, a crash loses nothing already recorded.
        """
        from quantgym.envs.portbench.live.data import resolve_data_source
        from quantgym.envs.portbench.live.runner import ENV_IDS, LiveError, run_live

        if profile.lower() not in ENV_IDS:  # refused before anything is read, printed or created
            _fail(f"--profile {profile!r}: unknown profile; choose one of {', '.join(ENV_IDS)}")
        console = Console(highlight=False, soft_wrap=True)
        try:
            path, desc = resolve_data_source(data)
        except FileNotFoundError as exc:
            _fail(str(exc))
        folder = run_dir if run_dir is not None else Path("results") / "live" / f"{_slug(agent)}_{profile.lower()}"
        if not quiet:
            console.print(f"data: {desc}")
            console.print(f"run folder: {folder}")

        def show(rec: dict) -> None:
            if quiet:
                return
            sc = rec.get("stage_scores") or {}
            stages = " ".join(f"{k}={sc[k]:.2f}" for k in ("S1", "S2", "S3", "S4", "S5") if k in sc)
            err = f"  [yellow]{escape(rec['agent_error'])}[/]" if rec.get("agent_error") else ""
            fb = "; ".join(str(io["fallback"]) for io in rec.get("agent_io") or () if io.get("fallback"))
            err += f"  [yellow]fallback: {escape(fb)}[/]" if fb else ""
            ceps = f"CEPS {fmt(rec['ceps'], 3)} {stages}  " if rec.get("ceps") is not None else ""  # baselines: none
            console.print(f"  decided {rec['date']} (data through {rec['data_through']}): {ceps}"
                          f"NAV {rec['nav']:,.0f}  turnover {rec['turnover']:.3f}{err}")

        try:
            res = run_live(agent, folder, profile=profile, data=path, days=days, as_of=as_of, plots=plots,
                           on_decision=show)
        except (LiveError, ValueError, FileNotFoundError) as exc:
            _fail(str(exc))
        m = res.metrics
        if not quiet:
            from quantgym.envs.portbench.config import SHARPE_NOTE
            from quantgym.tables import Col, print_table

            stages = ("S1", "S2", "S3", "S4", "S5") if res.stage_scores else ()
            ceps = ("CEPS",) if res.ceps is not None else ()  # baselines get no CEPS (§2.5, §4.6): no column
            cols = [Col("decisions", short="dec."), Col("new"), Col("Sharpe"), Col("Ret%"), Col("MaxDD%", short="MDD%"),
                    Col("Vol%"), *[Col(c) for c in (*ceps, *stages)]]
            ss = res.stage_scores or {}
            print_table(console, f"PortBench live — {res.agent}, {res.profile}, {res.start} → {res.as_of}", cols,
                        [[str(len(res.records)), str(len(res.new_dates)), fmt(m.get("sharpe"), 3), fmt(m.get("ret_pct"), 2),
                          fmt(m.get("maxdd_pct"), 2), fmt(m.get("vol_pct"), 2), *[fmt(res.ceps, 4) for _ in ceps],
                          *[fmt(ss.get(k), 3) for k in stages]]], keys=0, caption=f"{SHARPE_NOTE}.")
            if res.replay_check.get("note"):
                console.print(f"[yellow]note:[/] {escape(res.replay_check['note'])}")
        console.print(f"{'no new trading day' if not res.new_dates else f'{len(res.new_dates)} new decision(s)'}; "
                      f"run folder {res.run_dir} (decisions.jsonl, summary.csv, results.json"
                      f"{', plots' if plots else ''})")


__all__ = ["register"]
