"""``quantgym eval``: evaluate an LLM agent (or a replayed transcript, or a classical agent) on the tasks' env ids.

Plugin of :mod:`quantgym.cli` (``register(app)``). Importing this module imports neither ``openai`` nor
any env: everything heavy is imported inside the command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer


#: the values of ``--blind``: alone it means the first (docs/blind.md)
BLIND_MODES = ("blind", "both", "named")


def _split(v: Optional[str]) -> list[str]:
    return [x.strip() for x in (v or "").split(",") if x.strip()]


def _run(agent, plan, out_dir, concurrency, options, console, err, quiet, log, fail):
    """``run_eval`` with its progress bar; configuration errors end as ``fail(message)``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from quantgym._util import MissingExtraError
    from quantgym.agents.llm.client import LLMConfigError, ReplayMismatchError
    from quantgym.agents.registry import make_eval_agents
    from quantgym.plan import run_eval

    import warnings

    try:
        # progress (a bar on a terminal; one line per episode and per failed LLM call) goes to stderr,
        # the result tables to stdout; data warnings are shown at the end unless the run fails (one line)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=err, disable=quiet or not err.is_terminal,
                          transient=True) as progress:
                agents, new_agent = make_eval_agents(agent, plan, out_dir, options)
                sections = run_eval(agents, plan, out_dir, concurrency=concurrency, new_agent=new_agent,
                                    own_agents=True, console=console, progress=progress,
                                    log=None if quiet else log, meta={"command": " ".join(sys.argv),
                                                                      "agent": str(agent)})
    except (LLMConfigError, ReplayMismatchError, ValueError, FileNotFoundError, FileExistsError,
            MissingExtraError) as exc:
        fail(str(exc))
    for w in {(str(w.message), w.category): w for w in caught}.values():
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return sections


def _run_repeats(agent, plan, out_dir, repeats, concurrency, options, seed, console, err, quiet, log, fail):
    """``--repeats R``: R independent runs into OUT/repeat-K/, then OUT/summary.csv and results.json with the
    mean and Student-t interval of every metric over the repeats (:mod:`quantgym.stats.repeats`)."""
    from dataclasses import replace

    from quantgym.evaluation import repeats_section
    from quantgym.results import write_results

    runs = []
    for k in range(repeats):
        plan_k = replace(plan, seed=plan.seed + k)
        opts = dict(options)
        if opts:  # options are built for openai: agents only: each repeat sends its own request seed
            opts["seed"] = (seed if seed is not None else 0) + k
        console.print(f"[bold]repeat {k + 1}/{repeats}[/] (env seed {plan_k.seed}"
                      + (f", request seed {opts['seed']}" if "seed" in opts else "") + ")")
        runs.append(_run(agent, plan_k, out_dir / f"repeat-{k + 1}", concurrency, opts, console, err, quiet, log,
                         fail))
    sec = repeats_section(runs, console=console)
    write_results(out_dir, [sec], meta={"command": " ".join(sys.argv), "agent": str(agent), "repeats": repeats})
    console.print(f"Wrote [bold]{out_dir}[/] (repeat-1 .. repeat-{repeats}, summary.csv and results.json with the "
                  "mean and interval over the repeats)")


def register(app: typer.Typer) -> None:
    """Add the ``eval`` command to ``app``."""

    from quantgym.cli_options import TaskCommand, optional_value_command
    from quantgym.tasks import iter_with

    def eval_cmd(  # noqa: PLR0913 - a CLI
        agent: str = typer.Option(..., "--agent", "-a", help="openai:MODEL | replay:TRANSCRIPT.jsonl, or a "
                                  "classical agent of a task that has them: a baseline name or a scheme such as "
                                  "sb3:PATH (several baselines at once: quantgym bench --agents)."),
        env: Optional[str] = typer.Option(None, "--env", "-e", help="Env id(s), comma-separated: "
                                          + ", ".join(e for t in iter_with("eval") for e in t.envs)
                                          + " (replay: default = the recorded ones)."),
        base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (default "
                                               "$OPENAI_BASE_URL or https://api.openai.com/v1)."),
        api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Environment variable holding the key."),
        out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output folder (default results/eval-<UTC stamp>)."),
        concurrency: int = typer.Option(4, "--concurrency", "-j", min=1, metavar="N",
                                        help="Episodes in flight (>= 1)."),
        temperature: float = typer.Option(0.0, "--temperature"),
        max_tokens: str = typer.Option("auto", "--max-tokens", help="Completion cap per call: auto (derived from "
                                       "each answer's schema and the universe), N, or none (not sent)."),
        context_window: Optional[int] = typer.Option(None, "--context-window", help="Context window in tokens "
                                                     "(>= 256; default: server metadata or its first error)."),
        prompt_style: str = typer.Option("auto", "--prompt-style", help="auto (richest that fits) or full, "
                                         "compact, minimal."),
        timeout: float = typer.Option(300.0, "--timeout", help="Seconds per HTTP request."),
        retries: int = typer.Option(5, "--retries", help="Retries on 429/5xx/timeouts (backoff with jitter)."),
        structured: str = typer.Option("auto", "--structured", help="auto (climb down as the server accepts) "
                                       "or one rung: json_schema, json_object_schema, json_object, off."),
        seed: Optional[int] = typer.Option(None, "--seed", help="Request seed (only sent when given)."),
        max_calls: Optional[int] = typer.Option(None, "--max-calls", help="Budget: HTTP calls per run."),
        max_total_tokens: Optional[int] = typer.Option(None, "--max-total-tokens", help="Budget: tokens per run."),
        price_in: Optional[float] = typer.Option(None, "--price-in", help="USD per 1M prompt tokens (cost column)."),
        price_out: Optional[float] = typer.Option(None, "--price-out", help="USD per 1M completion tokens."),
        prices: Optional[Path] = typer.Option(None, "--prices", help='Price table JSON {"model": {"input": USD/1M, '
                                              '"output": USD/1M}} (used when --price-in/--price-out are not given).'),
        capital: Optional[float] = typer.Option(None, "--capital", help="USD the policy manages (default "
                                                "1,000,000): the P&L net of the inference cost is on it."),
        cache_from: Optional[list[Path]] = typer.Option(None, "--cache-from", metavar="FILE",
                                                        help="Transcript(s) whose answers "
                                                        "are reused for identical requests (resume a run)."),
        no_cache: bool = typer.Option(False, "--no-cache", help="Send repeated identical requests again."),
        env_kwargs: Optional[str] = typer.Option(None, "--env-kwargs", help="JSON object of extra env kwargs."),
        blind: Optional[str] = typer.Option(None, "--blind", metavar="[both]", help="Blind mode (docs/blind.md): "
                                            "no date, ticker or level in what the agent sees; scores unchanged. "
                                            "PortBench and Quant-Arena ids. --blind both: every episode named and "
                                            "blind (same seeds) and the memorization gap with its interval."),
        tools: bool = typer.Option(False, "--tools", help="Tool mode (docs/llm-agents.md): the envs give a "
                                   "short brief and the agent fetches data and runs drafts through tool calls. "
                                   "LLM agents only."),
        tool_calls: str = typer.Option("auto", "--tool-calls", help="--tools: auto (native tool calls, else a "
                                       "JSON action protocol, else plain text, as the server answers) or one "
                                       "rung: native, json, text."),
        repeats: int = typer.Option(1, "--repeats", min=1, metavar="R", help="Run the evaluation R times (env seed and LLM "
                                    "request seed +0, +1, ...; no answer shared): OUT/repeat-K/ each, and the "
                                    "mean with its interval per metric in OUT."),
        plots: bool = typer.Option(True, "--plots/--no-plots"),
        quiet: bool = typer.Option(False, "--quiet", "-q"),
        dry_run: bool = typer.Option(False, "--dry-run", help="Plan only: calls, estimated tokens, cost and wall "
                                     "time; no call is sent, nothing is written."),
        tokens_per_s: float = typer.Option(50.0, "--tokens-per-s", help="--dry-run: completion tokens/s of "
                                           "the endpoint."),
        prefill_per_s: float = typer.Option(1000.0, "--prefill-per-s", help="--dry-run: prompt tokens/s "
                                            "(prefill) of the endpoint."),
        **task_options: Any,
    ) -> None:
        """Evaluate AGENT on ENV(s); write OUT/summary.csv, OUT/results.json, transcripts and plots.

        Example: quantgym eval --agent openai:gpt-4o-mini --env PortBench-Balanced-v0 --period covid_2020
        """
        import os

        from rich.console import Console

        console = Console()
        err = Console(stderr=True)

        def fail(msg: str) -> None:  # one line on stderr (no rich markup, no wrapping), exit code 2
            err.print(f"error: {' '.join(str(msg).split())}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(2)

        def log(line: str) -> None:
            err.print(line, markup=False, highlight=False, soft_wrap=True)

        from quantgym.agents.registry import AgentSpec

        spec = AgentSpec.parse(agent)  # the one parse of --agent: everything below takes `spec`
        scheme = spec.scheme
        if spec.is_llm:
            try:
                import openai  # noqa: F401
            except ImportError:
                fail("LLM agents need the 'openai' package: pip install 'quantgym[llm]'")
        from quantgym.agents.llm.client import LLMConfigError
        from quantgym.evaluation import EvalPlan

        try:
            extra_kw = json.loads(env_kwargs) if env_kwargs else {}
            if not isinstance(extra_kw, dict):
                raise ValueError("--env-kwargs must be a JSON object")
        except ValueError as exc:
            fail(f"--env-kwargs: {exc}")
        if blind is not None and blind not in BLIND_MODES:
            fail(f"--blind takes no value (blind) or one of {', '.join(BLIND_MODES)}; got {blind!r}")
        if blind == "blind":
            extra_kw["blind"] = True
        if tools:
            if not spec.is_llm:
                fail(f"--tools: agent {agent!r} cannot call tools; tool mode needs an LLM agent (openai:MODEL)")
            extra_kw["tools"] = True
        from quantgym.agents.llm.client import TOOL_MODES

        if tool_calls not in TOOL_MODES:
            fail(f"--tool-calls must be {', '.join(TOOL_MODES)}; got {tool_calls!r}")
        plan_kw: dict = {}
        if scheme == "replay":
            from quantgym.agents.llm.client import read_transcript

            try:
                header, _ = read_transcript(spec.argument)
            except (FileNotFoundError, ValueError) as exc:
                fail(str(exc))
            plan_kw = dict(header.get("eval") or {})
        envs = _split(env) or list(plan_kw.get("env_ids") or [])
        if not envs:
            fail(f"give --env (e.g. --env {next(e for t in iter_with('eval') for e in t.envs)})")
        from quantgym.tasks import task_of

        from quantgym.evaluation import check_env_kwargs

        for e in envs:
            try:
                task_of(e)
            except ValueError as exc:
                fail(f"--env: {exc}")
            try:
                check_env_kwargs(e, {**extra_kw, **({"blind": True} if blind == "both" else {})})
            except ValueError as exc:
                if extra_kw.get("tools"):
                    try:
                        check_env_kwargs(e, {"tools": True})
                    except ValueError:
                        fail(f"--tools: {e} has no tool mode")
                if extra_kw.get("blind") or blind == "both":
                    try:
                        check_env_kwargs(e, {"blind": True})
                    except ValueError:  # Market-Bench: its tasks are synthetic, no blind mode (docs/blind.md)
                        fail(f"--blind: {e} has no blind mode (PortBench and Quant-Arena ids have one)")
                fail(f"--env-kwargs: {exc}")
        # the tasks' own options (--period, --round, ...: their records' eval_options) arrive in task_options:
        # plan options update the recorded ones (replay), agent options go to the LLM agent
        from quantgym.cli_options import collect

        try:
            given = collect("eval_options", "eval", task_options, sorted({task_of(e).name for e in envs}),
                            chosen_by="--env")
        except ValueError as exc:
            fail(str(exc))
        recorded = EvalPlan.from_dict({**plan_kw, "env_ids": envs})  # replay: the recorded plan (or defaults)
        plan_opts, agent_task_opts = dict(recorded.options), {}
        for o, value in given:
            if o.agent:
                agent_task_opts[o.key] = value
            else:
                plan_opts.update({o.key: value, **o.implies})
        kw = extra_kw if env_kwargs else {**recorded.env_kwargs, **extra_kw}
        # --blind both (or a replay of one): the plan runs named and blind; --blind / --blind named: one view
        both = blind == "both" or (blind is None and recorded.blind_both)
        if blind in ("both", "named"):
            kw.pop("blind", None)
        plan = EvalPlan(env_ids=envs, options=plan_opts, seed=recorded.seed, env_kwargs=kw, plots=plots,
                        blind_both=both)
        from dataclasses import replace

        from quantgym.agents.llm.prices import check_price
        from quantgym.costs import check_capital

        try:  # the prices and the capital of the net-of-cost columns (quantgym.costs)
            check_price(price_in, "--price-in")
            check_price(price_out, "--price-out")
            plan = replace(plan, capital=check_capital(capital) if capital is not None else recorded.capital)
        except ValueError as exc:
            fail(str(exc))
        if scheme == "replay" and (price_in is not None or price_out is not None or prices):
            log("note: a replay prices its calls as the recorded run did: --price-in/--price-out/--prices not applied")
        from quantgym.evaluation import validate_plan

        try:
            plan = validate_plan(plan)  # the tasks' checks of their options, also before a --dry-run
        except ValueError as exc:
            fail(str(exc))
        # every option checked here, before anything runs or is written (one line naming the flag, exit 2)
        from quantgym.agents.llm.client import STRUCTURED_MODES
        from quantgym.spaces import PROMPT_STYLES

        if prompt_style not in ("auto",) + PROMPT_STYLES:
            fail(f"--prompt-style must be auto, {', '.join(PROMPT_STYLES)}; got {prompt_style!r}")
        if structured not in STRUCTURED_MODES or structured == "text":
            fail(f"--structured must be auto, json_schema, json_object_schema, json_object or off (on = json_schema); "
                 f"got {structured!r}")
        if context_window is not None and context_window < 256:
            fail(f"--context-window must be at least 256 tokens, got {context_window}")
        if tokens_per_s <= 0 or prefill_per_s <= 0:
            fail("--tokens-per-s and --prefill-per-s must be > 0")
        mt = max_tokens.strip().lower()
        if mt in ("auto", "none"):
            max_tokens_v: object = "auto" if mt == "auto" else None
        else:
            try:
                max_tokens_v = int(mt)
                if max_tokens_v <= 0:
                    raise ValueError
            except ValueError:
                fail(f"--max-tokens must be auto, none or a positive integer, got {max_tokens!r}")
        options: dict = {}
        if scheme == "openai":
            options = dict(base_url=base_url, api_key=os.environ.get(api_key_env), temperature=temperature,
                           max_tokens=max_tokens_v, context_window=context_window, prompt_style=prompt_style,
                           timeout=timeout, retries=retries, structured=structured, seed=seed,
                           max_calls=max_calls, max_total_tokens=max_total_tokens, price_in=price_in,
                           price_out=price_out, cache=not no_cache, **agent_task_opts,
                           tool_calls=tool_calls if tool_calls != "auto" else None,
                           prices=str(prices) if prices else None,
                           cache_from=[str(p) for p in cache_from] if cache_from else None)
            options = {k: v for k, v in options.items() if v is not None or k == "max_tokens"}
        if dry_run:
            from quantgym.agents.llm.dryrun import dry_run_plan, render_plan

            try:
                report = dry_run_plan(spec, plan, agent_options=options, tokens_per_s=tokens_per_s,
                                      prompt_tokens_per_s=prefill_per_s)
            except (LLMConfigError, ValueError, FileNotFoundError) as exc:
                fail(str(exc))
            render_plan(report, console)
            return
        from quantgym.cli_errors import check_out_dir, default_out

        out_dir = Path(out) if out else default_out("eval")
        from quantgym.cli_errors import out_dir as cli_out_dir

        if repeats > 1 and (scheme == "replay" or cache_from):
            fail("--repeats needs fresh answers: not with a replay: agent or --cache-from (they return the "
                 "recorded answers)")
        check_out_dir(out_dir)
        if repeats > 1:
            with cli_out_dir(out_dir):
                _run_repeats(spec, plan, out_dir, repeats, concurrency, options, seed, console, err, quiet, log,
                             fail)
            return
        with cli_out_dir(out_dir, results_only=True):  # a run that is no result leaves no folder it created
            sections = _run(spec, plan, out_dir, concurrency, options, console, err, quiet, log, fail)
        episodes = [r for s in sections for r in s.runs if r.get("episode") is not None]
        failed = [r["episode"] for r in episodes if r.get("status") == "failed"]
        if failed:  # never silent: a run whose model never answered is no result
            log(f"warning: {len(failed)} of {len(episodes)} episode(s) failed: no LLM call was answered "
                f"({', '.join(failed[:3])}{', ...' if len(failed) > 3 else ''}); summary.csv marks them failed "
                "(no numbers) and quantgym report ranks none of them")
        for s in sections:
            u = s.extra.get("usage") or {}
            if not u:  # a baseline / sb3 agent: no LLM calls
                continue
            cost = u.get("cost_usd")
            console.print(f"{s.task}: {u.get('calls', 0)} calls, {u.get('total_tokens', 0)} tokens"
                          + (f", ${cost:.4f}" if cost is not None else "")
                          + (f"; transcript {u['transcript']}" if u.get("transcript") else ""))
        from quantgym.costs import print_cost_table

        print_cost_table(console, sections, plan.capital)
        console.print(f"Wrote [bold]{out_dir}[/] (summary.csv, results.json"
                      + (", plots" if plots else "") + ")")

    app.command("eval", cls=optional_value_command({"--blind": BLIND_MODES}))(
        TaskCommand("eval", eval_cmd, "eval_options", "eval"))


__all__ = ["register"]
