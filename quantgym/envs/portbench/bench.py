"""PortBench section of ``quantgym bench``: the six classical baselines (spec §8) × three profiles ×
four periods on the bundled real data, paper-style tables, summary rows, NAV plots.

Baselines are profile-independent (§4.6, §10.1: they use no profile and bypass the pipeline), so
each (baseline, period) backtest runs once and is reported under every profile; what differs per
profile is the stress gate (§7.2): ``gate`` of a stress-window row = ``|MDD| ≤ tolerance``; of the
``normal_2024`` row = the (baseline, profile) passes all three stress windows (§7.2).
"""

from __future__ import annotations

from typing import Any, Sequence

from quantgym.costs import agent_model, check_capital, cost_columns, cost_record
from quantgym.evaluation import EvalResult, evaluate
from quantgym.tables import STATUS_NOTE, status_agent
from quantgym.tables import fmt as _fmt
from quantgym.envs.portbench.baselines import BASELINES, make_baseline
from quantgym.agents.registry import AgentSpec, make_agent
from quantgym.envs.portbench.config import (BENCH_PERIODS, NORMAL_PERIOD, PERIODS, SHARPE_NOTE, period_gate,
                                           resolve_period)
from quantgym.envs.portbench.optimize import single_thread_blas
from quantgym.envs.portbench.plots import plot_nav
from quantgym.envs.portbench.profiles import PROFILES, get_profile
from quantgym.envs.portbench.uncertainty import p_cell, run_uncertainty, sharpe_cell, summary_fields
from quantgym.results import SectionResult
from quantgym.tables import Col

ENV_IDS = {"conservative": "PortBench-Conservative-v0", "balanced": "PortBench-Balanced-v0",
           "aggressive": "PortBench-Aggressive-v0"}


def run_baselines(periods, agents, progress=None, task_id=None, data=None,
                  specs: dict | None = None) -> dict[tuple[str, str], EvalResult]:
    """Run each baseline once per period (profile-independent). Returns {(agent_key, period): EvalResult}.

    ``specs`` maps a period name to the period argument to pass (e.g. a ``START:END:FREQ`` string)."""
    out = {}
    for per in periods:
        for key in agents:
            kw: dict[str, Any] = {"period": (specs or {}).get(per, per)}
            if data is not None:
                kw["data"] = data
            with single_thread_blas():  # many small covariance solves (skfolio/cvxpy, eigh): speed only
                out[(key, per)] = evaluate(ENV_IDS["balanced"], make_baseline(key), **kw)
            if progress is not None:
                progress.advance(task_id)
    return out


def validate(options: dict) -> None:
    """Check the PortBench options before anything runs or is written (one clear ``ValueError``)."""
    for p in options.get("profiles") or ():
        get_profile(p)
    for p in options.get("periods") or ():
        resolve_period(p)
    for a in options.get("agents") or ():
        make_baseline(a)


def _baseline_key(name: str) -> str | None:
    """The :data:`BASELINES` key of a baseline key or display name; None for any other name."""
    try:
        return make_baseline(name).key
    except ValueError:
        return None


def load_data(path: str, options: dict) -> tuple[Any, list[str]]:
    """``quantgym bench --data portbench=DIR``: the directory through PortBench's own loader (the sweep hook's
    :meth:`~quantgym.envs.portbench.sweep.PortBenchSweep.load_data`; schema in docs/data.md §7), loaded once
    and checked against the options before anything runs. Returns ``(data, notes)``: the notes (tickers the
    data lacks, a 60/40 leg that trades fewer tickers) are printed in the header and kept in results.json.

    Raises
    ------
    ValueError
        One line naming what is missing and how to fix it: the §1.9 regime ticker; a period the data does not
        cover (every default period is a bundled window: give ``--periods START:END:FREQ`` inside the data);
        60/40 without any of its bond (or equity) tickers (add them, or leave it out with ``--agents``).
    FileNotFoundError
        No ``prices.parquet`` / ``assets.csv`` in ``path``.
    """
    import warnings

    import pandas as pd

    from quantgym.envs.portbench.baselines import (SIXTY_FORTY_BONDS, SIXTY_FORTY_EQUITY, SIXTY_FORTY_LEGS,
                                                   sixty_forty_gaps)
    from quantgym.envs.portbench.config import Period, PortBenchConfig
    from quantgym.envs.portbench.data import PortBenchDataWarning, not_traded_notes
    from quantgym.envs.portbench.market import check_regime_ticker
    from quantgym.envs.portbench.sweep import HOOKS
    from quantgym.envs.portbench.universe import CANONICAL_TICKERS

    with warnings.catch_warnings():  # the tickers it drops become one short note below
        warnings.simplefilter("ignore", PortBenchDataWarning)
        data = HOOKS.load_data(path)
    notes = []
    absent = [t for t in CANONICAL_TICKERS if t not in data.tickers]
    if absent:
        notes.append(f"{len(data.tickers)} tickers traded ({', '.join(data.tickers[:5])}"
                     f"{', ...' if len(data.tickers) > 5 else ''}); {len(absent)} of PortBench's "
                     f"{len(CANONICAL_TICKERS)} absent")
    notes += not_traded_notes(data, limit=6) + list(data.notes)
    config = PortBenchConfig()
    check_regime_ticker(config.regime_ticker, data.tickers, data.asset_class)
    dates = pd.DatetimeIndex(data.dates)
    lb = config.lookback
    first, last = dates[0].date(), dates[-1].date()
    uncovered = []
    for given in options.get("periods") or BENCH_PERIODS:
        per = resolve_period(given)
        if not isinstance(per, Period):  # 'live': resolved on the data's own calendar
            continue
        before = int(dates.searchsorted(pd.Timestamp(per.start)))
        if before < lb or dates[-1] < pd.Timestamp(per.end):
            uncovered.append(f"{per.name} ({per.start}..{per.end})" if per.name == given else given)
    if uncovered:
        start = dates[min(lb, len(dates) - 1)].date()
        hint = ("the default periods are the bundled windows; give yours inside the data with --periods "
                if not options.get("periods") else "give periods inside the data with --periods ")
        raise ValueError(f"the data ({first}..{last}) does not cover {', '.join(uncovered)} (a period needs its "
                         f"whole window in the data and {lb} trading days before it): {hint}START:END:FREQ, e.g. "
                         f"--periods {start}:{last}:weekly")
    keys = [_baseline_key(a) for a in (options.get("agents") or list(BASELINES))]
    extra = [a for a in options.get("extra_agents") or ()
             if AgentSpec.parse(a).scheme is None and _baseline_key(a) == "sixty_forty"]
    if "sixty_forty" in keys or extra:
        empty, short = sixty_forty_gaps(data.tickers)
        if empty:
            others = ",".join(k for k in keys if k != "sixty_forty")
            fix = (f"--agents {others}" if others else "--agents without sixty_forty") if "sixty_forty" in keys \
                else f"no --agent {extra[0]}"
            lacks = " and none of its ".join(f"{leg} tickers ({', '.join(SIXTY_FORTY_LEGS[leg])})" for leg in empty)
            raise ValueError(f"60/40 needs at least one ticker of each leg and the data has none of its {lacks}: "
                             f"add one to the data, or leave 60/40 out ({fix})")
        if short:
            notes.append(f"60/40 lacks {len(short)} of {len(SIXTY_FORTY_EQUITY) + len(SIXTY_FORTY_BONDS)} tickers "
                         f"({', '.join(short[:2])}{', ...' if len(short) > 2 else ''}); legs use the rest (§8.2)")
    return data, notes


def run_section(ctx) -> SectionResult:
    opts = ctx.options
    data = getattr(ctx, "data", None)  # the user's PortBenchData of --data portbench=DIR; None = bundled
    dkw: dict[str, Any] = {} if data is None else {"data": data}
    profiles = [get_profile(p).name for p in (opts.get("profiles") or list(PROFILES))]
    specs = {resolve_period(p).name: p for p in (opts.get("periods") or BENCH_PERIODS)}  # name -> as given
    periods = list(specs)
    agents = [make_baseline(a) for a in (opts.get("agents") or list(BASELINES))]
    keys = [a.key for a in agents]
    extra_specs = [AgentSpec.parse(s) for s in opts.get("extra_agents") or []]  # --agent, parsed once
    extra = [make_agent(spec, task="portbench", **_agent_options(spec, ctx.out_dir, opts)) for spec in extra_specs]
    total = len(keys) * len(periods) + len(extra) * len(profiles) * len(periods)
    tid = ctx.progress.add_task("PortBench", total=total)
    base = run_baselines(periods, keys, ctx.progress, tid, data=data, specs=specs)
    # (label, profile, period) -> EvalResult; baselines are shared across profiles
    res: dict[tuple[str, str, str], EvalResult] = {}
    labels = [a.name for a in agents]
    inference: dict[tuple[str, str, str], tuple[Any, Any]] = {}  # an --agent's episode usage and model
    for key, agent in zip(keys, agents):
        for prof in profiles:
            for per in periods:
                res[(agent.name, prof, per)] = base[(key, per)]
    try:
        for spec, agent in zip(extra_specs, extra):
            label = getattr(agent, "name", None) or str(spec)
            if opts.get("blind"):  # the baselines read no prompt: they score the same blind (docs/blind.md)
                label = f"{label} (blind)"
            labels.append(label)
            for prof in profiles:
                for per in periods:
                    res[(label, prof, per)] = evaluate(ENV_IDS[prof], agent, period=specs[per], **dkw,
                                                       **({"blind": True} if opts.get("blind") else {}))
                    inference[(label, prof, per)] = (agent.episode_usage(agent.current_episode)
                                                     if hasattr(agent, "episode_usage") else None, agent_model(agent))
                    ctx.progress.advance(tid)
    except Exception as exc:  # an LLM endpoint that stopped the run (docs/llm-agents.md §4, stop rules)
        from quantgym.agents.llm.client import LLMConfigError
        from quantgym.evaluation import release_stopped_agents

        if not isinstance(exc, LLMConfigError):
            raise
        answered, kept = release_stopped_agents(extra)  # a transcript without an answer is removed
        if kept:
            raise LLMConfigError(f"{exc}; {answered} answered call(s) kept in "
                                 f"{', '.join(map(str, kept))}") from None
        raise
    unc = _uncertainty(res, base, periods, specs, data)  # id(EvalResult) -> uncertainty block
    section = SectionResult(task="portbench")
    gates: dict[tuple[str, str, str], bool | None] = {}
    for prof in profiles:
        tol = PROFILES[prof].max_drawdown
        mdds = {lab: {per: res[(lab, prof, per)].metrics["max_drawdown"] for per in periods} for lab in labels}
        for per in periods:
            for lab in labels:
                r = res[(lab, prof, per)]
                fields = summary_fields(unc[id(r)])
                gates[(lab, prof, per)] = row_gate = period_gate(per, mdds[lab], tol)
                row = r.summary_row(gate=row_gate)
                row.profile = prof
                if opts.get("blind") and lab in labels[len(agents):]:
                    row.agent = lab  # "<agent> (blind)"
                row.extra.update(fields)
                usage, model = inference.get((lab, prof, per), (None, None))  # a baseline: no LLM calls
                row.extra.update(cost_columns(cost_record(usage, row.ret_pct, check_capital(opts.get("capital")),
                                                          model=model)))
                section.rows.append(row)
        if opts.get("plots", True):
            for per in periods:
                plot_nav([res[(lab, prof, per)] for lab in labels], f"PortBench {per} — {prof} "
                         f"(drawdown tolerance {tol:.0%})", ctx.out_dir / f"portbench_nav_{prof}_{per}.png", tol)
    print_period_tables(ctx.console, periods, profiles, [a.name for a in agents], labels[len(agents):], res, gates)
    print_uncertainty_table(ctx.console, periods, profiles, [a.name for a in agents], labels[len(agents):], res, unc)
    fallbacks = {(key, per): [{"date": st.get("date"), "reason": st["fallback"]} for st in r.steps if st.get("fallback")]
                 for (key, per), r in base.items()}
    lines = [f"  {base[(key, per)].agent}, {per}: {', '.join(str(f['date']) for f in fb)} "
             f"({len(fb)} of {len(base[(key, per)].steps)} dates)" for (key, per), fb in fallbacks.items() if fb]
    if lines:  # never silent: which baseline fell back (solver failure, a 60/40 leg unavailable), when
        ctx.console.print("baseline fallbacks (reason per step in results.json):\n"
                          + "\n".join(lines), highlight=False, markup=False)
    for (key, per), r in base.items():
        d = r.to_dict()
        d["fallbacks"] = fallbacks[(key, per)]
        d["profile"] = None
        d["note"] = "baseline run once per period; profile-independent (spec §4.6)"
        d["uncertainty"] = unc[id(r)]
        d["gate_by_profile"] = {p: period_gate(NORMAL_PERIOD, {q: base[(key, q)].metrics["max_drawdown"]
                                                               for q in periods}, PROFILES[p].max_drawdown)
                                for p in profiles}
        section.runs.append(d)
    for (lab, prof, per), r in res.items():
        if lab not in [a.name for a in agents]:
            usage, model = inference.get((lab, prof, per), (None, None))
            section.runs.append({**r.to_dict(), "uncertainty": unc[id(r)], "usage": usage,
                                 "inference": cost_record(usage, r.metrics.get("ret_pct"),
                                                          check_capital(opts.get("capital")), model=model)})
    section.extra["periods"] = {p: PERIODS[p].__dict__ if p in PERIODS else p for p in periods}
    usage = {getattr(a, "name", None) or str(spec): a.usage() for spec, a in zip(extra_specs, extra)
             if hasattr(a, "usage")}
    if usage:
        section.extra["agent_usage"] = usage  # tokens, calls and cost of LLM agents
    for a in extra:
        if hasattr(a, "close"):
            a.close()
    return section


def _uncertainty(res: dict, base: dict, periods: list[str], specs: dict, data: Any = None) -> dict[int, dict]:
    """The uncertainty block (:func:`~quantgym.envs.portbench.uncertainty.run_uncertainty`) of every
    distinct run, keyed by ``id``: a baseline is run once and shared by the profiles, so once here.
    Equal-Weight, the paired reference, is run for the test when it is not among the agents."""
    eqw = {per: base[("equal_weight", per)] for per in periods if ("equal_weight", per) in base}
    missing = [per for per in periods if per not in eqw]
    if missing:
        eqw.update({per: r for (_, per), r in run_baselines(missing, ["equal_weight"], data=data,
                                                                        specs=specs).items()})
    out: dict[int, dict] = {}
    for (_, _, per), r in res.items():
        if id(r) not in out:
            out[id(r)] = run_uncertainty(r, eqw[per])
    return out


def _gate_cell(gate: bool | None) -> str:
    return "" if gate is None else ("✓" if gate else "✗")


#: the metric columns of a per-period table (fits 80 columns); a gate column per profile follows
PERIOD_COLS = (Col("agent", "left"), Col("Sharpe"), Col("Ret%"), Col("MaxDD%", short="MDD%"), Col("Vol%"),
               Col("CEPS"))
_SHORT_PROFILE = {"conservative": "cons", "balanced": "bal", "aggressive": "aggr"}


def print_period_tables(console: Any, periods: Sequence[str], profiles: Sequence[str], baselines: Sequence[str],
                        others: Sequence[str], res: dict[tuple[str, str, str], Any],
                        gates: dict[tuple[str, str, str], bool | None], width: int | None = None) -> None:
    """One table per period: a baseline's run is profile-independent, so it is one row
    with a gate column per profile; another agent ran once per profile, so it has a row per profile
    (``name · profile``) with that profile's gate only. ``res`` / ``gates`` are keyed (label, profile, period)."""
    from quantgym.tables import print_table

    cols = [*PERIOD_COLS, *[Col(f"gate {p}", "center", short=_SHORT_PROFILE.get(p, p[:4]), group=i == 0)
                            for i, p in enumerate(profiles)]]
    show_ceps = any(r.ceps is not None for r in res.values())
    if not show_ceps:
        cols = [c for c in cols if c.header != "CEPS"]
    # (shown name, label, the profile whose run is shown, the profiles gated on that row)
    entries = [(lab, lab, profiles[0], list(profiles)) for lab in baselines]
    entries += [(f"{lab} · {p}", lab, p, [p]) for lab in others for p in profiles]
    tols = ", ".join(f"{p} {PROFILES[p].max_drawdown:.0%}" for p in profiles)
    caption = (f"{SHARPE_NOTE}. gate per profile (§7.2; drawdown tolerance {tols}): a stress window's row passes "
               "when |MaxDD| ≤ "
               "the tolerance, normal_2024's when all three stress windows pass. A baseline is profile-independent: "
               "one run, gated under every profile" + (", no CEPS" if not show_ceps else "")
               + ("; another agent has a row per profile, with that profile's gate." if others else "."))
    if any(r.status != "ok" for r in res.values()):  # an LLM agent whose calls failed: marked, explained
        caption += f" {STATUS_NOTE}."
    for i, per in enumerate(periods):
        rows, ends = [], []
        for shown, lab, prof, gated in entries:
            r = res[(lab, prof, per)]
            m = r.metrics if r.status != "failed" else {}  # a failed run is no result: no number shown
            rows.append([status_agent(shown, r.status), _fmt(m.get("sharpe"), 3), _fmt(m.get("ret_pct")),
                         _fmt(m.get("maxdd_pct")), _fmt(m.get("vol_pct")), *([_fmt(r.ceps if m else None, 3)]
                                                                              if show_ceps else []),
                         *[_gate_cell(gates[(lab, p, per)]) if p in gated else "" for p in profiles]])
            ends.append(bool(others) and lab == baselines[-1] if baselines else False)
        print_table(console, f"PortBench — {per}", cols, rows, keys=1, end_sections=ends,
                    caption=caption if i == len(periods) - 1 else None, width=width)


def print_uncertainty_table(console: Any, periods: Sequence[str], profiles: Sequence[str], baselines: Sequence[str],
                            others: Sequence[str], res: dict[tuple[str, str, str], Any], unc: dict[int, dict],
                            width: int | None = None) -> None:
    """Compact uncertainty table (docs/uncertainty.md): per period, each run's Sharpe with its 95 % stationary-bootstrap
    interval, Δ Sharpe vs Equal-Weight and the Ledoit–Wolf p-value (a baseline once, another agent per profile)."""
    from quantgym.tables import print_table

    cols = [Col("period", "left"), Col("agent", "left"), Col("Sharpe [95% CI]", short="Sharpe [CI]"),
            Col("ΔSh vs EqW", short="ΔSh"), Col("p vs EqW", short="p")]
    entries = [(lab, lab, profiles[0]) for lab in baselines] + [(f"{lab} · {p}", lab, p) for lab in others
                                                                 for p in profiles]
    rows, ends = [], []
    for pi, per in enumerate(periods):
        for ei, (shown, lab, prof) in enumerate(entries):
            r = res[(lab, prof, per)]
            f = summary_fields(unc[id(r)])
            rows.append([per if ei == 0 else "", shown, sharpe_cell(r.metrics["sharpe"], f), _fmt(f["dsharpe_eqw"]),
                         p_cell(f["dsharpe_eqw_p"])])
            ends.append(ei == len(entries) - 1 and pi < len(periods) - 1)
    print_table(console, "PortBench — uncertainty (95 %)", cols, rows, keys=2, end_sections=ends, width=width,
                caption=f"{SHARPE_NOTE}. [95% CI]: stationary block bootstrap of daily returns; ΔSh, p: Ledoit–Wolf "
                        "test of equal "
                        "Sharpe with Equal-Weight on the same days. 'Beats EqW' still means a strictly greater Sharpe (§7.3); "
                        "docs/uncertainty.md.")


def _agent_options(spec: Any, out_dir, opts: dict | None = None) -> dict:
    """Per-scheme options: an ``openai:`` agent writes its transcript beside the results and is priced by
    ``--price-in`` / ``--price-out`` (``opts``) when given."""
    from quantgym.agents.llm.transcript import transcript_path
    from quantgym.agents.registry import AgentSpec

    parsed = AgentSpec.parse(spec)
    if parsed.scheme == "openai":
        prices = {k: (opts or {}).get(k) for k in ("price_in", "price_out") if (opts or {}).get(k) is not None}
        return {"transcript": transcript_path(out_dir / "transcripts", "portbench", parsed.argument), **prices}
    return {}
