"""Quant-Arena section of ``quantgym bench`` (issue §5).

The four classical submissions of spec §10.15 (20-day momentum, 5-day reversal, low
volatility, market timing) each play one episode of ``QuantArena-v0`` on the bundled
universe and default windows: one research candidate (feedback on 2022–2023), then
freeze (sealed evaluation on 2024), through the same sandbox as agent code. The
cost-free equal-weight market reference is reported alongside. Prints the table
(ARR, excess ARR, Sharpe, MaxDD, RankIC, score), returns summary rows
(``task=quant_arena, period=sealed_2024``) and the per-run details, and writes PNGs.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

from quantgym.results import SectionResult, SummaryRow
from quantgym.tables import Col

from .config import ARENA_VERSION, SHARPE_NOTE, ArenaConfig, Windows
from .data import load_dataset
from .examples import EXAMPLES, example_source
from .executor import reference_only
from .metrics import summary_extra

#: the result rows' period: the default sealed window's label (:attr:`Windows.period_label`, as every path writes it)
PERIOD = ArenaConfig().windows.period_label
SURVIVORSHIP_NOTE = ("Survivorship: the bundled panel holds no stock delisted before 2026 (bias mostly upward, "
                     "for strategies and the reference); the 800-stock universe is frozen with 2021 data.")


class SubmitThenFreeze:
    """The bench's policy: submit one example's source, then freeze it (candidate 1)."""

    def __init__(self, name: str):
        self.name = self.key = name
        self._steps = 0

    def act(self, observation: Any, info: dict) -> Any:
        self._steps += 1
        if self._steps == 1:
            return example_source(self.name)
        if self._steps == 2:
            return {"freeze": 1}
        raise RuntimeError(f"Quant-Arena did not end the episode after the freeze of {self.name}")


def run_example(name: str, record_dir: Path | None = None, executor: str = "sandbox", data: Any = None,
                **env_kwargs: Any) -> dict:
    """One episode of ``QuantArena-v0`` with one example through :func:`quantgym.evaluation.evaluate`:
    submit, then freeze.

    Returns
    -------
    dict
        ``agent``, ``S``, ``S_in``, ``S_out``, ``research`` / ``sealed`` (metrics dicts),
        ``feedback`` (what the agent saw), ``status_*``, ``record_path``, ``wall_s`` and the
        daily paths (``research_daily``, ``sealed_daily``) for plots.
    """
    from quantgym.evaluation import evaluate

    t0 = time.perf_counter()
    env = gym.make("QuantArena-v0", record_dir=record_dir if record_dir is not None else False, executor=executor,
                   agent=name, model="classical", framework="quantgym.bench", data=data, **env_kwargs)
    res = evaluate(env, SubmitThenFreeze(name), seed=0)
    fin, info1 = res.info, res.steps[0]
    u = env.unwrapped
    res_in = u.candidates[0]["research"]
    res_out = u.sealed_result
    return {"agent": name, "S": fin["S"], "S_in": fin["S_in"], "S_out": fin["S_out"],
            "status_research": fin["status_research"], "status_sealed": fin["status_sealed"],
            "message_sealed": fin.get("message_sealed"), "research": fin["research"], "sealed": fin["sealed"],
            "research_years": fin["research_years"], "sealed_years": fin["sealed_years"],
            "feedback": info1["feedback"], "record_path": None if u.record_path is None else str(u.record_path),
            "overfitting": fin["overfitting"],
            "wall_s": time.perf_counter() - t0, "research_daily": res_in.daily, "sealed_daily": res_out.daily,
            "timings": {"research": res_in.timings, "sealed": res_out.timings}}


def classical_loop(runs: dict[str, dict], scoring: Any = None) -> dict[str, Any]:
    """DSR and PBO of the research loop "try the classical submissions, keep the best S_in".

    Each bench episode has one candidate (DSR and PBO need two); taken together the submissions form a
    research loop of ``len(runs)`` trials, which is what the bench prints. ``scoring``:
    the :class:`~quantgym.envs.quant_arena.config.ArenaScoringConfig` (default: the default one).
    """
    from types import SimpleNamespace

    from .metrics import research_overfitting

    names = list(runs)
    cands = [{"index": i + 1, "research": SimpleNamespace(status=runs[n]["status_research"],
                                                          daily=runs[n]["research_daily"])}
             for i, n in enumerate(names)]
    ok = [i for i, n in enumerate(names) if runs[n]["status_research"] == "ok"]
    best = max(ok, key=lambda i: runs[names[i]]["S_in"]) if ok else None
    out = research_overfitting(cands, None if best is None else best + 1, scoring)
    return {"trials": names, "frozen": None if best is None else names[best], "rule": "highest S_in", **out}


def load_data(path: str, options: dict) -> tuple[Any, list[str]]:
    """``quantgym bench --data quant_arena=PATH``: the panel through Quant-Arena's own loader
    (:func:`~quantgym.envs.quant_arena.data.load_dataset`: a long-panel ``.parquet``, a folder of
    ``daily*.parquet`` [+ ``symbols.csv``, ``market_reference.csv``] or a qlib folder; docs/quant_arena.md),
    loaded once. Returns ``(data, notes)``.

    Raises
    ------
    ValueError
        One line when the panel does not cover the bench's default windows (research 2022-2023 with a day
        before it, sealed 2024 to within a week of its end): the bench runs those windows only.
    FileNotFoundError
        Nothing readable at ``path``.
    """
    import pandas as pd

    from .account import window_rows

    ds = load_dataset(path)
    w = Windows()
    first, last = pd.Timestamp(ds.dates[0]).date(), pd.Timestamp(ds.dates[-1]).date()
    covered = (first < pd.Timestamp(w.research_start).date()
               and last >= (pd.Timestamp(w.sealed_end) - pd.Timedelta(days=7)).date())
    try:
        window_rows(ds, w.research_start, w.research_end)
        window_rows(ds, w.sealed_start, w.sealed_end)
    except ValueError:
        covered = False
    if not covered:
        raise ValueError(f"the panel ({first}..{last}) does not cover the bench's windows (research "
                         f"{w.research_start}..{w.research_end} with a day before it, sealed {w.sealed_start}.."
                         f"{w.sealed_end}); the bench runs these windows only: give a panel that covers them "
                         "(other windows: the env's research_start/sealed_end keywords, docs/quant_arena.md)")
    return ds, [f"{ds.N} stocks, {first}..{last} ({ds.name})"]


def _pct(x: Any, nd: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{nd}f}%"


def _num(x: Any, nd: int = 2) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def run_section(ctx) -> SectionResult:
    """Run the section (see module docstring); ``ctx`` is the CLI's BenchContext."""
    t0 = time.perf_counter()
    names = list(EXAMPLES)
    tid = ctx.progress.add_task("Quant-Arena", total=len(names) + 1)
    own = getattr(ctx, "data", None)  # the user's panel of --data quant_arena=PATH; None = bundled
    ds = own if own is not None else load_dataset()
    w = Windows()
    rec_dir = Path(ctx.out_dir) / "quant_arena_records"
    # warm the shared truncation cache once (threads then reuse it)
    from .env import dataset_until

    dataset_until(ds, w.research_end)
    dataset_until(ds, w.sealed_end)
    ref_sealed = reference_only(ds, w.sealed_start, w.sealed_end)
    ref_research = reference_only(ds.truncate(w.research_end), w.research_start, w.research_end)
    ctx.progress.advance(tid)
    runs: dict[str, dict] = {}
    with cf.ThreadPoolExecutor(max_workers=2) as pool:  # each episode's work is in its sandbox child
        blind = {"blind": True} if ctx.options.get("blind") else {}  # quantgym bench --blind (docs/blind.md)
        futs = {pool.submit(run_example, n, rec_dir, data=own, **blind): n for n in names}
        for f in cf.as_completed(futs):
            runs[futs[f]] = f.result()
            ctx.progress.advance(tid)
    rows: list[SummaryRow] = []
    sealed_rows, research_rows = [], []
    for name in names:
        r = runs[name]
        m, mr = r["sealed"] or {}, r["research"] or {}
        label = f"{name} (blind)" if blind else name
        sealed_rows.append([label, _pct(m.get("arr")), _pct(m.get("excess_arr")), _num(m.get("sharpe")),
                            _pct(m.get("max_drawdown")), _num(m.get("rankic_mean"), 3), _num(r["S_out"], 1),
                            _num(r["S"], 1)])
        research_rows.append([label, _pct(mr.get("arr")), _pct(mr.get("excess_arr")), _num(mr.get("rankic_mean"), 3),
                              _num(mr.get("rankic_ir")), _num(mr.get("ls_sharpe")), _num(mr.get("turnover")),
                              _num((r.get("overfitting") or {}).get("psr0")), _num(r["S_in"], 1)])
        rows.append(SummaryRow(task="quant_arena", agent=label, profile=None, period=PERIOD,
                               sharpe=m.get("sharpe"), ret_pct=None if m.get("total_return") is None else
                               100 * m["total_return"], maxdd_pct=None if m.get("max_drawdown") is None else
                               100 * m["max_drawdown"], vol_pct=None if m.get("volatility") is None else
                               100 * m["volatility"], ceps=None, gate=None,
                               extra=summary_extra(r)))
    sealed_rows.append(["market (EW)", _pct(ref_sealed["arr"]), _pct(0.0), _num(ref_sealed["sharpe"]),
                        _pct(ref_sealed["max_drawdown"]), "–", "–", "–"])
    research_rows.append(["market (EW)", _pct(ref_research["arr"]), _pct(0.0), "–", "–", "–", "–", "–", "–"])
    loop = classical_loop({n: runs[n] for n in names})  # EXAMPLES order, not the threads' completion order
    rows.append(SummaryRow(task="quant_arena", agent="market_reference", profile=None, period=PERIOD,
                           sharpe=ref_sealed["sharpe"], ret_pct=100 * ref_sealed["total_return"],
                           maxdd_pct=100 * ref_sealed["max_drawdown"], vol_pct=100 * ref_sealed["volatility"],
                           ceps=None, gate=None, extra={"xarr_pct": 0.0}))  # the market's excess over itself
    print_tables(ctx.console, ds.N, sealed_rows, research_rows, own_data=None if own is None else ds.name,
                 note=f"Overfitting diagnostics (not scored; docs/quant_arena.md): PSR = P(true research Sharpe > 0). "
                      f"The {len(names)} submissions as one research loop keeping the best S_in ({loop['frozen']}): "
                      f"DSR {_num(loop['dsr'])}, PBO {_num(loop['pbo'])} (CSCV, {loop['pbo_blocks']} blocks, "
                      f"{loop['pbo_splits'] or 0} splits).")
    plots: list[str] = []
    if ctx.options.get("plots", True):
        from .plots import plot_nav_comparison, plot_quantiles, plot_run

        out = Path(ctx.out_dir)
        plots.append(str(plot_nav_comparison({n: runs[n]["sealed_daily"] for n in names if runs[n]["sealed_daily"]},
                                             ref_sealed, out / "quant_arena_nav_2024.png",
                                             "Quant-Arena sealed 2024: classical submissions vs market")))
        plots.append(str(plot_quantiles({n: runs[n]["sealed"] for n in names},
                                        out / "quant_arena_quantiles_2024.png",
                                        "Next-day return by score quintile, 2024")))
        for n in names:
            if runs[n]["sealed_daily"]:
                plots.append(str(plot_run(runs[n]["sealed_daily"], runs[n]["sealed"],
                                          out / f"quant_arena_{n}_2024.png", f"{n} — sealed 2024")))
    details = []
    for n in names:
        r = dict(runs[n])
        for k in ("research_daily", "sealed_daily"):
            daily = r.pop(k)
            r[k.replace("_daily", "_nav")] = {"dates": daily.get("dates"), "nav": daily.get("nav"),
                                              "exposure": daily.get("exposure")} if daily else None
        details.append({"task": "quant_arena", "agent": n, "period": PERIOD, **r})
    details.append({"task": "quant_arena", "agent": "market_reference", "period": PERIOD,
                    "sealed": {k: v for k, v in ref_sealed.items() if k not in ("path", "dates")},
                    "research": {k: v for k, v in ref_research.items() if k not in ("path", "dates")},
                    "sealed_nav": {"dates": ref_sealed["dates"], "nav": ref_sealed["path"]}})
    return SectionResult(task="quant_arena", rows=rows, runs=details,
                         extra={"version": ARENA_VERSION, "windows": {"research": [w.research_start, w.research_end],
                                                                   "sealed": [w.sealed_start, w.sealed_end]},
                                "dataset": ds.name, "plots": plots,
                                **({"survivorship": SURVIVORSHIP_NOTE} if own is None else {}),
                                "classical_loop": loop,
                                "records": str(rec_dir), "elapsed_s": time.perf_counter() - t0})


#: the sealed (2024) and research (2022-2023) tables' columns (fit 80 columns)
SEALED_COLS = (Col("agent", "left"), Col("ARR"), Col("xARR"), Col("Sharpe"), Col("MaxDD", short="MDD"),
               Col("RankIC", short="IC"), Col("S_out"), Col("S"))
RESEARCH_COLS = (Col("agent", "left"), Col("ARR"), Col("xARR"), Col("RankIC", short="IC"), Col("IR"), Col("LS SR"),
                 Col("TO"), Col("PSR", group=True), Col("S_in"))


def print_tables(console: Any, n_stocks: int, sealed_rows: list[list[str]], research_rows: list[list[str]],
                 width: int | None = None, note: str = "", own_data: str | None = None) -> None:
    """The bench's sealed and research tables (rows of cells under :data:`SEALED_COLS` / :data:`RESEARCH_COLS`),
    fitted to the terminal, then what the scores mean (and ``note``); ``own_data``: the name of the user's
    panel (``--data``), which replaces the bundled panel's market and survivorship notes."""
    from quantgym.tables import print_table

    market = ("Market = cost-free equal weight of every stock of the full bundled panel (about 5,000 a day). "
              f"{SURVIVORSHIP_NOTE}" if own_data is None else
              f"Market = the data's market_reference.csv, else the cost-free equal weight of its stocks ({own_data}).")
    print_table(console, f"Quant-Arena {ARENA_VERSION}: sealed 2024 ({'bundled' if own_data is None else 'your'} "
                f"{n_stocks} stocks, net of costs)",
                SEALED_COLS, sealed_rows, width=width)
    print_table(console, "Research 2022-2023 (agent's feedback)", RESEARCH_COLS, research_rows, width=width,
                caption="[dim]xARR: ARR in excess of the market; IC: mean daily RankIC; IR: RankIC IR; LS SR: "
                        "long-short Sharpe; TO: turnover. S_out/S_in/S: 0-100 scores (S = 0.5 S_in + 0.5 S_out). "
                        f"{SHARPE_NOTE}. "
                        f"{market}" + (f" {note}" if note else "") + "[/]")


__all__ = ["run_section", "run_example", "classical_loop", "print_tables"]
