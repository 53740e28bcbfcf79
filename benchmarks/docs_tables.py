"""Tables in docs/ that come from quick, offline commands: regenerate them, or check them (CI does).

    python benchmarks/docs_tables.py --write      # rewrite every block below in its docs file
    python benchmarks/docs_tables.py --check      # exit 1 when a block differs (tests/test_docs_generated.py)

Blocks (markdown between ``<!-- generated:NAME begin -->`` / ``<!-- generated:NAME end -->``):

- ``qa-reference`` in docs/qa.md: the reference policies of the static QA layer on the test split, 50
  pairs per template, clean mode (``quantgym qa --agent oracle --agent naive``), and the paper-mode
  naive floor (``--fidelity paper``).
- ``market-bench-v2-rounds`` in docs/market_bench.md: the 15 rounds of Market-Bench task set v2 as shipped
  (data window, rows, parameters, what is real / randomised / synthetic, selected reference outputs).
- ``market-bench-v2-mutants`` in docs/market_bench.md: MAE of the reference source and of every mutant on
  every v2 round (``quantgym.envs.market_bench.agents.trusted_maes``, in-process; about 40 s).
- ``market-bench-v1-rounds`` in docs/market_bench.md: the 15 rounds of task set v1 as shipped (instant).
- ``market-bench-bench`` in docs/market_bench.md: the v1 score table of ``quantgym bench --tasks market_bench``
  (its 60 sandboxed episodes in-process, two at a time; about 30 s on 2 idle cores).
- ``quant-arena-bench`` and ``quant-arena-loop`` in docs/quant_arena.md: the four classical submissions'
  sealed 2024 / research metrics and scores, their PSR and the DSR / PBO of the four as one research loop
  (the episodes of ``quantgym bench --tasks quant_arena``, sandboxed, two at a time; about 30 s on 2 idle
  cores).
- ``rl-ppo`` in docs/rl.md: the committed evaluation rows of the two PPO training runs
  (benchmarks/results/rl/: each run's ``summary.csv`` and ``rl_meta.json``, ``PROVENANCE.json`` with the
  commands and the commit; training never runs here) beside Equal-Weight evaluated on the same env (about 20 s).
- ``floor-blind`` in docs/blind.md: the memorization gap of SmolLM2-135M, replayed offline from the shipped
  ``quantgym eval --blind both`` transcripts in examples/llm_floor/blind/ (a real llama.cpp server recorded them).
- ``perf-quant-arena``, ``perf-market-bench`` and ``perf-blind-prompts`` in docs/performance.md: speed figures
  rendered from the committed result files benchmarks/results/<block>.json (``--measure BLOCK`` runs the
  benchmark and writes the file with the command, the commit, the date and the load average); never
  re-measured by ``--check``.
- ``perf-tools`` in docs/performance.md: the env-side cost of a PortBench tool call, named and blind
  (benchmarks/bench_tools.py), from benchmarks/results/perf-tools.json, measured the same way.
- ``perf-main-job`` in docs/performance.md: ``quantgym bench`` in a fresh clone, first and second run
  (benchmarks/bench_main_job.py), from benchmarks/results/perf-main-job.json, measured the same way.
- ``bl-readings`` in docs/fidelity.md: paper-mode Black–Litterman 2024 under each reading of the repo's
  §8.6 code (``python benchmarks/bl_readings.py``), from benchmarks/results/bl-readings.json, written by
  ``--measure bl-readings`` (its SLSQP row depends on the machine's floating-point kernels); never re-run
  by ``--check``.
- the blocks of ``python benchmarks/run_all.py`` in docs/performance.md, rendered from the figures it saved to
  benchmarks/results/run_all.json.
- ``perf-llm-throughput`` in docs/performance.md: ``quantgym eval -j 1/4/8`` beside a plain load generator
  against a real ``llama-server --parallel 4`` (benchmarks/bench_llm_throughput.py), from
  benchmarks/results/perf-llm-throughput.json.

Whether the code each speed block times changed since the commit it was measured at is checked by
``python benchmarks/staleness.py`` (tests/test_docs_generated.py runs both checks).

Longer than 500 lines as one job: one renderer per generated block, each small, all run by one --check.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_or_check  # noqa: E402


def _f(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def qa_reference() -> str:
    """Markdown of the ``qa-reference`` block (about 20 s)."""
    from quantgym.envs.portbench.static_qa import NaivePolicy, OraclePolicy, run_qa
    from quantgym.envs.portbench.static_qa.aggregate import TABLE_COLUMNS
    from quantgym.envs.portbench.static_qa.env import PortBenchQAEnv

    env = PortBenchQAEnv(split="test", n_per_template=50, restricted="both", fidelity="clean")
    runs = [run_qa(OraclePolicy(), agent="oracle", env=env), run_qa(NaivePolicy(), agent="naive", env=env)]
    lines = ["| agent | " + " | ".join(TABLE_COLUMNS) + " |", "|---" * (len(TABLE_COLUMNS) + 1) + "|"]
    lines += [f"| {r.agent} | " + " | ".join(_f(r.table.get(c, math.nan)) for c in TABLE_COLUMNS) + " |" for r in runs]
    paper_env = PortBenchQAEnv(split="test", n_per_template=50, restricted="both", fidelity="paper")
    naive_paper = run_qa(NaivePolicy(), agent="naive", env=paper_env).table
    return ("Generated by `python benchmarks/docs_tables.py --write` (`quantgym qa --agent oracle --agent naive`,\n"
            "test split, first 50 pairs per template).\n\n" + "\n".join(lines) + "\n\n"
            # the Mean at two decimals only, and no T5: paper mode's T5 follows the CPU's BLAS kernels (0.579 on one
            # machine, 0.588 on another), so it is not a figure CI can check (see the note under the block)
            f"Paper mode (`--fidelity paper`), naive: Mean {naive_paper['Mean']:.2f}.\n")


def _mb_shipped(strategy: str, r: int, task_set: str = "v2"):
    """(params, meta, reference) of a shipped Market-Bench round, read from its files (no input rebuild)."""
    import gzip
    import json

    from quantgym.envs.market_bench.rounds import round_dir

    d = round_dir(strategy, r, version=task_set)
    with gzip.open(d / "reference.json.gz", "rt") as fh:
        ref = json.load(fh)
    return json.loads((d / "params.json").read_text()), json.loads((d / "meta.json").read_text()), ref


def _ns(ns: int) -> str:
    from quantgym.envs.market_bench.prompts import ns_words

    return ns_words(ns).split(" (", 1)[1].rstrip(")")


def _scheduled_out(ref: dict) -> str:
    return (f"fills {ref['n_fills']:.0f}, unfilled {ref['unfilled_qty']:,.0f}, equity {ref['final_equity']:,.2f}, "
            f"max DD {ref['max_drawdown']:,.2f}")


def _delta_cells(step_ns: int, d0: int, sigma: float, p: dict, ref: dict, cur: str) -> tuple[str, str]:
    """(parameters, selected reference outputs) cells of a delta-hedge round."""
    par = (f"delta step {_ns(step_ns)}, D0 {d0:,}, σ {sigma:g}; C0 {p['c0']:,.0f} {cur}, Δ {_ns(p['interval_ns'])}, "
           f"d {_ns(p['delay_ns'])}, f {p['fraction']}, g {_ns(p['min_gap_ns'])}, k {p['k']}")
    out = (f"sent/filled/killed {ref['n_hedges_sent']:.0f}/{ref['n_hedges_filled']:.0f}/{ref['n_hedges_killed']:.0f}, "
           f"equity {ref['final_equity']:,.2f}")
    return par, out


def market_bench_v2_rounds() -> str:
    """Markdown of the ``market-bench-v2-rounds`` block (reads the shipped files; instant)."""
    from quantgym.envs.market_bench.config import N_ROUNDS, round_config

    lines = ["Generated by `python benchmarks/docs_tables.py --write` from the shipped v2 rounds",
             "(`quantgym/data/bundled/market_bench/v2/`). Every price is real; every level size is randomised",
             "(100..2,000 shares, stream `sizes`); the option delta of strategy 3 is a seeded random walk.", "",
             "| strategy | r | real data (local time) | rows | parameters | reference (selected) |",
             "|---|---|---|---|---|---|"]
    for strategy in ("scheduled", "pairs", "delta_hedge"):
        for r in range(1, N_ROUNDS + 1):
            p, meta, ref = _mb_shipped(strategy, r)
            cfg = round_config(strategy, r, "v2")
            w = "-".join(x[:5] for x in meta["window_local"])
            if strategy == "pairs":
                data = f"{p['symbol_a']} / {p['symbol_b']} SZSE 2022-06-01 {w}"
                par = (f"β {p['beta']}, W {p['window']}, z {p['z_in']}/{p['z_out']}, cooldown {_ns(p['cooldown_ns'])}, "
                       f"k {p['k']}, delay {_ns(p['delay_ns'])}, alloc {p['alloc']}, C0 {p['c0']:,.0f} CNY")
                out = (f"entries/exits/orders/fills {ref['n_entries']:.0f}/{ref['n_exits']:.0f}/{ref['n_orders']:.0f}/"
                       f"{ref['n_fills']:.0f}, equity {ref['final_equity']:,.2f}")
            else:
                data = f"MSFT NASDAQ 2012-06-21 {w}"
                if strategy == "scheduled":
                    par = f"C0 {p['c0']:,.0f} USD, {len(cfg.schedule)} orders (s offsets)"
                    out = _scheduled_out(ref)
                else:
                    par, out = _delta_cells(cfg.delta.step_ns, cfg.delta.d0, cfg.delta.sigma, p, ref, "USD")
            lines.append(f"| {strategy} | {r} | {data} | {meta['n_rows']:,} | {par} | {out} |")
    return "\n".join(lines) + "\n\n" + _market_bench_v2_figures() + "\n"


def _market_bench_v2_figures() -> str:
    """Builder-check margins (from the v2 manifest), equal-timestamp rows, shipped size, leg correlation."""
    import json

    import numpy as np

    from quantgym.data.a_share_l2 import read_snapshots
    from quantgym.envs.market_bench.config import PAIRS_ROUNDS_V2
    from quantgym.envs.market_bench.rounds import BUNDLED_ROOT, manifest_path

    checks = [v["checks"] for v in json.loads(manifest_path(version="v2").read_text())["rounds"].values()]

    def lo(key: str) -> float:
        return min(c[key] for c in checks if key in c)

    ties = [(_mb_shipped("pairs", r)[1]["equal_ts_rows"], _mb_shipped("pairs", r)[1]["n_rows"]) for r in range(1, 6)]
    size = sum(f.stat().st_size for f in (BUNDLED_ROOT / "v2").rglob("*") if f.is_file())
    legs = PAIRS_ROUNDS_V2[0].book
    snaps = read_snapshots(legs.file, symbols=[legs.symbol_a, legs.symbol_b])
    c = snaps[snaps["continuous"]]
    mid = ((c["bid_px_00"] + c["ask_px_00"]) / 2).to_numpy()
    wide = c.assign(mid=mid).pivot_table(index="ts_event", columns="symbol", values="mid").ffill().dropna()
    corr = float(np.corrcoef(np.diff(np.log(wide.to_numpy()), axis=0).T)[0, 1])
    import textwrap

    return textwrap.fill(f"Builder checks (manifest): smallest |z| margin {lo('z_margin'):.1e}, entry-size margin "
            f"{lo('sizing_margin'):.1e}, cash/px margin {lo('cash_px_margin'):.1e}; largest gap between the "
            f"reference z and the two-pass z {max(c['exact_z_gap'] for c in checks if 'exact_z_gap' in c):.1e}, "
            f"definedness mismatches {sum(c.get('exact_z_undefined_mismatch', 0) for c in checks)}. Pairs rows "
            "sharing the previous row's ts_event (v2 rule 1), rounds 1-5: "
            + ", ".join(f"{t:,} of {n:,}" for t, n in ties)
            + f". Shipped v2 files: {size / 1024:.0f} KiB. Correlation of the two legs' continuous-trading mid "
            f"log-returns on the union of their snapshot times: {corr:.3f}.", width=104)


def market_bench_v2_mutants() -> str:
    """Markdown of the ``market-bench-v2-mutants`` block (runs the trusted sources on all 15 v2 rounds)."""
    from quantgym.envs.market_bench.agents import mutants_for, trusted_maes
    from quantgym.envs.market_bench.config import N_ROUNDS

    lines = ["Generated by `python benchmarks/docs_tables.py --write`: MAE against the shipped reference outputs",
             "(`agents.trusted_maes`; * = within the correctness tolerance, i.e. correct).", "",
             "| strategy | agent | " + " | ".join(f"r{r}" for r in range(1, N_ROUNDS + 1)) + " |",
             "|---|---|" + "---|" * N_ROUNDS]
    for strategy in ("scheduled", "pairs", "delta_hedge"):
        res = [trusted_maes(strategy, r, "v2") for r in range(1, N_ROUNDS + 1)]
        for name in ["reference"] + [m.name for m in mutants_for(strategy)]:
            cells = [f"{x[name]['mae']:.3g}" + ("*" if x[name]["correct"] else "") for x in res]
            lines.append(f"| {strategy} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _mb_data(meta: dict) -> str:
    """Where a shipped v1 round's book comes from: symbols, local window, 'synthetic' for a generated book."""
    w = "-".join(x[:5] for x in meta["window_local"]) if meta.get("window_local") else ""
    if meta.get("synthetic"):
        return "synthetic book labelled " + " / ".join(meta["symbols"])
    return f"{meta['instrument']} {w}".rstrip()


def market_bench_v1_rounds() -> str:
    """Markdown of the ``market-bench-v1-rounds`` block (reads the shipped v1 files; instant)."""
    from quantgym.envs.market_bench.config import N_ROUNDS

    lines = ["Generated by `python benchmarks/docs_tables.py --write` from the shipped v1 rounds",
             "(`quantgym/data/bundled/market_bench/v1/`).", "",
             "| strategy | r | data (local time) | rows | parameters | reference (selected) |",
             "|---|---|---|---|---|---|"]
    for strategy in ("scheduled", "pairs", "delta_hedge"):
        for r in range(1, N_ROUNDS + 1):
            p, meta, ref = _mb_shipped(strategy, r, "v1")
            cur = meta.get("currency", "")
            if strategy == "scheduled":
                par = f"C0 {p['c0']:,.0f} {cur}, {len(meta['schedule_offsets'])} orders ({meta['offset_unit']} offsets)"
                out = _scheduled_out(ref)
            elif strategy == "pairs":
                par = (f"β {p['beta']}, W {p['window']}, z {p['z_in']}/{p['z_out']}, cooldown {_ns(p['cooldown_ns'])}, "
                       f"k {p['k']}, delay {_ns(p['delay_ns'])}, alloc {p['alloc']}, C0 {p['c0']:,.0f} {cur}")
                out = (f"entries/orders/fills {ref['n_entries']:.0f}/{ref['n_orders']:.0f}/{ref['n_fills']:.0f}, "
                       f"equity {ref['final_equity']:,.2f}")
            else:
                ds = meta["delta_series"]
                par, out = _delta_cells(ds["step_ns"], ds["d0"], ds["sigma"], p, ref, cur)
            lines.append(f"| {strategy} | {r} | {_mb_data(meta)} | {meta['n_rows']:,} | {par} | {out} |")
    return "\n".join(lines) + "\n"


def market_bench_bench() -> str:
    """Markdown of the ``market-bench-bench`` block: the v1 score table of ``quantgym bench --tasks market_bench``
    (the bench's own jobs in-process, ``bench.run_jobs(bench.default_jobs(), workers=2)``: 60 sandbox runs)."""
    from quantgym.envs.market_bench import bench
    from quantgym.envs.market_bench.config import STRATEGIES, MarketBenchScoringConfig
    from quantgym.envs.market_bench.scoring import fmt, score_table

    config = MarketBenchScoringConfig()
    k = config.attempts
    records = bench.run_jobs(bench.default_jobs(), workers=2, attempts=k)
    table = score_table(bench.records_to_attempts(records), config).merge(
        bench.extras_table(records), on=["agent", "strategy"], how="left")
    lines = ["Generated by `python benchmarks/docs_tables.py --write`: the jobs of `quantgym bench --tasks market_bench`",
             f"(task set v1; reference and `stub_zeros` on all rounds, each mutant on rounds "
             f"{', '.join(map(str, bench.MUTANT_ROUNDS))} of its strategy).", "",
             f"| strategy | agent | pass@{k} | pass@1 | mean MAE (solved) | avg attempt | correct@{k} | correct@1 "
             "| path corr |", "|---|---|---|---|---|---|---|---|---|"]
    for strategy in STRATEGIES:
        rows = [r for _, r in table[table["strategy"] == strategy].iterrows()]
        rows.sort(key=lambda r: (r["agent"] != "reference", r["agent"] == "stub_zeros", r["agent"]))
        for r in rows:
            name = str(r["agent"]).replace("mutant:", "").split("/")[-1]
            lines.append(f"| {strategy} | {name} | {fmt(r[f'pass@{k}'])} | {fmt(r['pass@1'])} | "
                         f"{r['mean_mae_solved']:,.2f} | {fmt(r['avg_attempt'])} | {fmt(r[f'correct@{k}'])} | "
                         f"{fmt(r['correct@1'])} | {fmt(r.get('mean_path_corr'), 4)} |")
    return "\n".join(lines) + "\n"


def _m(x: float | None, nd: int = 2, scale: float = 1.0, unit: str = "") -> str:
    """A docs cell: ``x·scale`` with ``nd`` decimals, a typographic minus and ``unit``; – for None."""
    return "–" if x is None else f"{scale * x:.{nd}f}{unit}".replace("-", "−")


_QA_RUNS: dict = {}


def _quant_arena_runs() -> dict:
    """The episodes of ``quantgym bench --tasks quant_arena`` (one per classical submission, sandboxed, two at a
    time), the market reference of both windows and the classical loop; run once per process."""
    if not _QA_RUNS:
        import concurrent.futures as cf

        from quantgym.envs.quant_arena.bench import classical_loop, run_example
        from quantgym.envs.quant_arena.config import Windows
        from quantgym.envs.quant_arena.data import load_dataset
        from quantgym.envs.quant_arena.examples import EXAMPLES
        from quantgym.envs.quant_arena.executor import reference_only

        names = list(EXAMPLES)
        with cf.ThreadPoolExecutor(max_workers=2) as pool:
            runs = dict(zip(names, pool.map(run_example, names)))
        ds, w = load_dataset(), Windows()
        _QA_RUNS.update(runs=runs, loop=classical_loop(runs),
                        ref_sealed=reference_only(ds, w.sealed_start, w.sealed_end),
                        ref_research=reference_only(ds.truncate(w.research_end), w.research_start, w.research_end))
    return _QA_RUNS


def quant_arena_bench() -> str:
    """Markdown of the ``quant-arena-bench`` block: sealed 2024 and research metrics of the four classical
    submissions (the episodes of ``quantgym bench --tasks quant_arena``; about 30 s on 2 cores)."""
    q = _quant_arena_runs()
    lines = ["Generated by `python benchmarks/docs_tables.py --write` (the episodes of `quantgym bench --tasks",
             "quant_arena`: bundled universe, default windows, net of costs).", "",
             "| submission | 2024 ARR | excess | Sharpe | MaxDD | RankIC | A | SR_LS | TO | fees % | S_out "
             "| 2022–23 ARR | S_in | S |", "|---" * 14 + "|"]
    for name, r in q["runs"].items():
        m, mr = r["sealed"] or {}, r["research"] or {}
        lines.append(f"| {name} | {_m(m.get('arr'), 1, 100, ' %')} | {_m(m.get('excess_arr'), 1, 100, ' %')} | "
                     f"{_m(m.get('sharpe'))} | {_m(m.get('max_drawdown'), 1, 100, ' %')} | "
                     f"{_m(m.get('rankic_mean'), 3)} | {_m(m.get('rankic_ir'))} | {_m(m.get('ls_sharpe'))} | "
                     f"{_m(m.get('turnover'))} | {_m(m.get('fees_pct'))} | {_m(r['S_out'], 1)} | "
                     f"{_m(mr.get('arr'), 1, 100, ' %')} | {_m(r['S_in'], 1)} | {_m(r['S'], 1)} |")
    rs, rr = q["ref_sealed"], q["ref_research"]
    lines.append(f"| market reference (EW, no costs) | {_m(rs['arr'], 1, 100, ' %')} | 0 | {_m(rs['sharpe'])} | "
                 f"{_m(rs['max_drawdown'], 1, 100, ' %')} | – | – | – | – | – | – | {_m(rr['arr'], 1, 100, ' %')} "
                 "| – | – |")
    return "\n".join(lines) + "\n"


def quant_arena_loop() -> str:
    """Markdown of the ``quant-arena-loop`` block: each submission's PSR and the DSR / PBO of the four taken
    as one research loop that keeps the best S_in (``classical_loop``, as ``quantgym bench`` prints it)."""
    q = _quant_arena_runs()
    psr = ", ".join(f"{_m((r.get('overfitting') or {}).get('psr0'))} {n}" for n, r in q["runs"].items())
    lp = q["loop"]
    return ("Generated by `python benchmarks/docs_tables.py --write` (the episodes of `quantgym bench --tasks "
            f"quant_arena`). PSR of each submission: {psr}.\n\n"
            f"| trials | kept (best S_in) | research Sharpe | expected max of {lp['n_trials']} skill-less trials | DSR "
            f"| PBO ({lp['pbo_splits'] or 0:,} splits) |\n|---|---|---|---|---|---|\n"
            f"| {lp['n_trials']} | {lp['frozen']} | {_m(lp['sharpe_research'])} | {_m(lp['sharpe_benchmark'])} | "
            f"{_m(lp['dsr'])} | {_m(lp['pbo'])} |\n")


#: committed outputs of the two training runs of docs/rl.md (``summary.csv`` and ``rl_meta.json`` of each
#: ``quantgym train --out``), with ``PROVENANCE.json`` (the commands and the commit they ran at)
RL_RESULTS = ROOT / "benchmarks" / "results" / "rl"
RL_RUNS = ("ppo_log_return", "ppo_risk_adjusted")


def rl_ppo() -> str:
    """Markdown of the ``rl-ppo`` block: the committed training runs' evaluation rows (no training here)
    beside Equal-Weight on the same env and periods (``evaluate``; about 20 s)."""
    import csv
    import json

    from quantgym.envs.portbench.baselines import make_baseline
    from quantgym.envs.portbench.bench import ENV_IDS
    from quantgym.evaluation import evaluate

    prov = json.loads((RL_RESULTS / "PROVENANCE.json").read_text())
    rows = {}
    for run in RL_RUNS:
        with (RL_RESULTS / run / "summary.csv").open() as fh:
            rows[run] = {r["period"]: r for r in csv.DictReader(fh)}
    meta = json.loads((RL_RESULTS / RL_RUNS[0] / "rl_meta.json").read_text())
    periods = meta["eval_periods"]
    ew = {per: evaluate(ENV_IDS["balanced"], make_baseline("equal_weight"), period=per).summary_row()
          for per in periods}

    def cell(sharpe, ret, mdd) -> str:
        return " / ".join(_m(float(x), nd) for x, nd in ((sharpe, 3), (ret, 2), (mdd, 2)))

    lines = [f"Generated by `python benchmarks/docs_tables.py --write` from the committed outputs of the two "
             f"training runs in benchmarks/results/rl/ (`{prov['commands'][0]}` and `{prov['commands'][1]}`, run at "
             f"commit {prov['commit']}; training took {prov['train_seconds'][0]:.0f} s and "
             f"{prov['train_seconds'][1]:.0f} s on a 2-core machine at 1-min load average {prov['load_avg']:.1f}); "
             "Equal-Weight evaluated here on the same env (Balanced profile; Sharpe / Ret% / MaxDD%):", "",
             "| period | PPO log_return | PPO risk_adjusted | Equal-Weight |", "|---|---|---|---|"]
    for per in periods:
        a, b, e = rows[RL_RUNS[0]][per], rows[RL_RUNS[1]][per], ew[per]
        lines.append(f"| {per} | {cell(a['sharpe'], a['ret_pct'], a['maxdd_pct'])} | "
                     f"{cell(b['sharpe'], b['ret_pct'], b['maxdd_pct'])} | {cell(e.sharpe, e.ret_pct, e.maxdd_pct)} |")
    ceps = [" / ".join(_m(float(rows[run][per]["ceps"]), 3) for per in periods) for run in RL_RUNS]
    gates = ["; ".join(per for per in periods if rows[run][per]["gate"] == "false") or "none" for run in RL_RUNS]
    return "\n".join(lines) + (f"\n\nRun CEPS of the two PPO policies ({', '.join(periods)}): {ceps[0]} and "
                                f"{ceps[1]}. Periods failing the Balanced stress gate (§7.2): {gates[0]} and "
                                f"{gates[1]}.\n")


#: the blind floor (docs/blind.md "The floor, blind"): ``quantgym eval --blind both`` transcripts of SmolLM2-135M on a
#: real llama.cpp server (examples/llm_floor/blind/), replayed offline
FLOOR_BLIND = ROOT / "examples" / "llm_floor" / "blind"


def floor_blind() -> str:
    """Markdown of the ``floor-blind`` block: every shipped ``--blind both`` transcript replayed through
    ``quantgym eval`` (its recorded plan, the replay agent), and per episode pair and headline metric the named
    and blind values, the gap (blind − named), its paired bootstrap interval, the Ledoit-Wolf p-value of the
    Sharpe gap and the likely-recall flag (:mod:`quantgym.memorization`)."""
    import json
    import tempfile

    from quantgym.agents.llm.client import read_transcript
    from quantgym.agents.registry import make_eval_agents
    from quantgym.plan import EvalPlan, run_eval

    def f3(x) -> str:
        return "" if x is None else f"{x:.3f}"

    lines = ["| transcript | calls | episode | metric | named | blind | gap | 95% CI | p | likely recall |",
             "|---|---:|---|---|---:|---:|---:|---|---:|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for f in sorted(FLOOR_BLIND.glob("*.jsonl.gz")):
            header, calls = read_transcript(f)
            ev = dict(header.get("eval") or {})
            if not ev.get("blind_both"):
                continue
            name = f.name[: -len(".jsonl.gz")]
            plan = EvalPlan.from_dict({**ev, "plots": False})
            work = Path(tmp) / name
            agents, _ = make_eval_agents(f"replay:{f}", plan, work)
            run_eval(agents, plan, work, concurrency=1, own_agents=True)
            res = json.loads((work / "results.json").read_text())
            first = True
            for sec in res["tasks"].values():
                for rec in sec.get("memorization_gap") or []:
                    episode = " ".join(str(v) for v in rec["key"].values() if v is not None)
                    for m, d in rec["metrics"].items():
                        if d.get("named") is None and d.get("blind") is None:  # no value either way (no returns)
                            continue
                        ci = "" if d.get("lo") is None else f"[{d['lo']:.3f}, {d['hi']:.3f}]"
                        p = (d.get("test") or {}).get("p")
                        flag = d.get("lo") is not None and (d["lo"] > 0 or d["hi"] < 0)
                        lines.append(f"| {name if first else ''} | {len(calls) if first else ''} | {episode} | {m} | "
                                     f"{f3(d.get('named'))} | {f3(d.get('blind'))} | {f3(d.get('gap'))} | {ci} | "
                                     f"{f3(p)} | {'yes' if flag else 'no' if d.get('lo') is not None else ''} |")
                        first = episode = ""
    return "\n".join(lines) + "\n"


#: speed measurements rendered from committed result files (timings differ from run to run, so CI checks that
#: the docs show the committed file, never a re-measurement): block -> the benchmark command; ``--measure BLOCK``
#: runs it with ``--json`` and writes benchmarks/results/BLOCK.json with the commit, the date, the load average
#: and the versions
MEASURED = {"perf-tools": "python benchmarks/bench_tools.py --repeat 200",
            "perf-quant-arena": "python benchmarks/bench_quant_arena.py --repeat 5",
            "perf-market-bench": "python benchmarks/bench_market_bench.py --repeat 5",
            "perf-blind-prompts": "python benchmarks/bench_blind_prompts.py --repeat 15",
            "perf-main-job": "python benchmarks/bench_main_job.py",
            "bl-readings": "python benchmarks/bl_readings.py"}
RESULTS = ROOT / "benchmarks" / "results"


def measure(block: str) -> Path:
    """Run the benchmark command of ``block`` and write its figures with their provenance to
    benchmarks/results/<block>.json (the working tree's commit, ``+dirty`` when it has changes)."""
    import datetime
    import json
    import os
    import platform
    import subprocess
    import tempfile

    import numpy

    cmd = MEASURED[block]
    git = ["git", "-C", str(ROOT)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    import staleness

    dirty = staleness.dirty(staleness.WATCHED[block][1]) if block in staleness.WATCHED else False
    if dirty:
        print(f"{block}: the code it times has uncommitted changes; the figures will be recorded as "
              f"{commit}+dirty, which the staleness check (benchmarks/staleness.py) reports as stale")
    load0 = os.getloadavg()[0]
    t0 = datetime.datetime.now(datetime.timezone.utc)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        subprocess.run([sys.executable, *cmd.split()[1:], "--json", str(out)], cwd=ROOT, check=True)
        figures = json.loads(out.read_text())
    res = {"command": cmd, "commit": commit + ("+dirty" if dirty else ""),
           "measured_utc": t0.strftime("%Y-%m-%d %H:%M"), "load_avg": [round(load0, 1), round(os.getloadavg()[0], 1)],
           "cpus": os.cpu_count(), "python": platform.python_version(), "numpy": numpy.__version__, "figures": figures}
    path = RESULTS / f"{block}.json"
    path.write_text(json.dumps(res, indent=1) + "\n")
    return path


def _measured_head(res: dict) -> str:
    return (f"Generated by `python benchmarks/docs_tables.py --write` from benchmarks/results/ (measured with "
            f"`{res['command']}` by `python benchmarks/docs_tables.py --measure`, at commit {res['commit']}, "
            f"{res['measured_utc']} UTC; Python {res['python']}, numpy {res['numpy']}, {res['cpus']} CPUs shared "
            f"with other jobs, 1-min load average {res['load_avg'][0]} before and {res['load_avg'][1]} after: the "
            "wall time includes waiting for a core, compare the CPU times where given).")


def _t(s: float) -> str:
    return f"{s * 1000:,.0f} ms" if s < 10 else f"{s:.1f} s"


def perf_quant_arena() -> str:
    """Markdown of the ``perf-quant-arena`` block, from benchmarks/results/perf-quant-arena.json."""
    import json

    res = json.loads((RESULTS / "perf-quant-arena.json").read_text())
    f = res["figures"]
    lines = [_measured_head(res), "", f"Bundled universe ({f['stocks']} stocks), sealed 2024 ({f['days']} days); "
             f"best of {f['repeat']} (one run for the sandboxed rows); check values ARR {f['check']['arr']:.4f}, "
             f"fees {f['check']['fees_pct']:.2f} % of capital, S {f['check']['S']:.2f}.", "",
             "| step | time |", "|---|---|"]
    lines += [f"| {name} | {_t(t)} |" for name, t in f["rows"]]
    return "\n".join(lines) + "\n"


def perf_market_bench() -> str:
    """Markdown of the ``perf-market-bench`` block, from benchmarks/results/perf-market-bench.json."""
    import json

    res = json.loads((RESULTS / "perf-market-bench.json").read_text())
    f = res["figures"]
    n = f["rows"]
    lines = [_measured_head(res), "", f"Books of {n:,} rows; best of {f['repeat']}. Parsing the book into arrays "
             f"(`BookData`, not part of a replay): {f['parse_s']:.3f} s.", "",
             "| replay | wall | CPU | M snapshots/s (wall) | M snapshots/CPU-s | note |", "|---|---|---|---|---|---|"]
    for name, v in f["strategies"].items():
        note = v.get("note") or ("same result as the compiled loop" if v.get("same_result") else
                                 "RESULT DIFFERS from the compiled loop" if "same_result" in v else "")
        if "first_call_s" in v:
            note += f"; first call {v['first_call_s']:.2f} s (numba compile or cache load)"
        lines.append(f"| {name} | {v['wall_s']:.3f} s | {v['cpu_s']:.3f} s | {n / v['wall_s'] / 1e6:.2f} | "
                     f"{n / v['cpu_s'] / 1e6:.2f} | {note} |")
    return "\n".join(lines) + "\n"


def perf_blind_prompts() -> str:
    """Markdown of the ``perf-blind-prompts`` block, from benchmarks/results/perf-blind-prompts.json."""
    import json

    res = json.loads((RESULTS / "perf-blind-prompts.json").read_text())
    f = res["figures"]
    lines = [_measured_head(res), "", f"Cold renders of every stage prompt of one stagewise `PortBench-Balanced-v0` "
             f"{f['period']} episode, CPU time, best of {f['repeat']} per decision, summed over the episode; "
             "\"with the row\": blind S1 charged with the blinded row as well.", "",
             "| style | stage | named | blind | blind overhead | with the row |", "|---|---|---:|---:|---:|---:|"]
    for r in f["rows"]:
        a, c = r["named_s"], r.get("blind_with_row_s")
        row = "" if c is None else f"{100 * (c / a - 1):+.1f} %"
        lines.append(f"| {r['style']} | {r['stage']} | {1e3 * a:.2f} ms | {1e3 * r['blind_s']:.2f} ms | "
                     f"{100 * (r['blind_s'] / a - 1):+.1f} % | {row} |")
    return "\n".join(lines) + "\n"


def perf_tools() -> str:
    """Markdown of the ``perf-tools`` block, from benchmarks/results/perf-tools.json."""
    import json

    res = json.loads((RESULTS / "perf-tools.json").read_text())
    f = res["figures"]
    named, blind = f["named"], f["blind"]
    lines = [_measured_head(res), "", f"Bundled data, `{f['period']}`, {f['decisions']} decisions x {f['repeat']} "
             "calls per tool; a call is the whole env step of tool mode without the model.", "",
             "| tool call | median | CPU median | median, blind | CPU median, blind | result characters |",
             "|---|---:|---:|---:|---:|---:|"]
    us = "{:,.0f} µs".format
    lines += [f"| {label} | {us(1e6 * v['median_s'])} | {us(1e6 * v['cpu_median_s'])} | "
              f"{us(1e6 * blind[label]['median_s'])} | {us(1e6 * blind[label]['cpu_median_s'])} | {v['chars']:,} |"
              for label, v in named.items()]
    return "\n".join(lines) + "\n"


def perf_main_job() -> str:
    """Markdown of the ``perf-main-job`` block, from benchmarks/results/perf-main-job.json."""
    import json

    res = json.loads((RESULTS / "perf-main-job.json").read_text())
    f = res["figures"]
    tasks = list(f["first"]["tasks"])
    lines = [_measured_head(res), "",
             "| `quantgym bench` in a fresh clone | wall | CPU (process tree) | " + " | ".join(
                 f"{t} wall / CPU" for t in tasks) + " |", "|---|---:|---:|" + "---:|" * len(tasks)]
    for name, label in (("first", "first run (no `.pyc`, numba cache empty)"), ("second", "second run (warm)")):
        r = f[name]
        lines.append(f"| {label} | {r['wall_s']:.1f} s | {r['cpu_s']:.1f} s | " + " | ".join(
            f"{r['tasks'][t]['wall_s']:.1f} / {r['tasks'][t]['cpu_s']:.1f} s" for t in tasks) + " |")
    met = f["first"]["wall_s"] <= f["target_s"]
    lines += ["", f"Target for the first run: {f['target_s']:.0f} s of wall time on this 2-core machine: "
              + ("met." if met else "**not met**.")]
    return "\n".join(lines) + "\n"


def perf_llm_throughput() -> str:
    """Markdown of the ``perf-llm-throughput`` block, from benchmarks/results/perf-llm-throughput.json (written by
    ``python benchmarks/bench_llm_throughput.py`` itself: it starts the server and records its own provenance)."""
    import json

    import bench_llm_throughput

    return bench_llm_throughput.render(json.loads((RESULTS / "perf-llm-throughput.json").read_text()))


def bl_readings() -> str:
    """Markdown of the ``bl-readings`` block, from benchmarks/results/bl-readings.json."""
    import json

    from quantgym.envs.portbench.paper import reproduce as rp

    res = json.loads((RESULTS / "bl-readings.json").read_text())
    return (f"Generated by `python benchmarks/docs_tables.py --write` from benchmarks/results/bl-readings.json "
            f"(run with `{res['command']}` by `python benchmarks/docs_tables.py --measure bl-readings`, at commit "
            f"{res['commit']}, {res['measured_utc']} UTC; numpy {res['numpy']}, SciPy {res['figures']['scipy']}). "
            "Paper mode (`PaperFidelity.paper(bl_reading=...)`, every other flag on), 2024, direct runner as the "
            "paper column above; Δ against the page. Fallbacks: decisions at which the baseline fell back to "
            "equal weight over its assets (recorded per step).\n\n" + rp._md(*rp.table_bl_readings(res["figures"]["rows"]))
            + "\n\n" + bl_fallback_sets(res["figures"]["patterns"]) + "\n")


def bl_fallback_sets(pat: dict) -> str:
    """The ``bl-readings`` block's second table: the sets of equal-weight decisions nearest the page."""
    from quantgym.envs.portbench.paper.reproduce import METRICS, PUBLISHED_2024, _f

    pub = dict(zip(METRICS, PUBLISHED_2024["black_litterman"]))
    lines = [f"Which decisions would have to fall back to equal weight (the repo's SLSQP reporting failure there, "
             f"the optimum elsewhere) to give the page's row: the nearest of the {pat['n_sets']} sets of the "
             f"{pat['n_decisions']} decisions, from a local search of {pat['n_exact_runs']} exact runs "
             "(`benchmarks/bl_readings.py`; distance = |ΔRet| + |ΔVol| + |ΔMaxDD| in pp).", "",
             "| equal weight at | Sharpe | Δ | Ret% | Δ | MaxDD% | Δ | Vol% | Δ | distance |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in pat["nearest"]:
        nd = {m: 3 if m == "sharpe" else 2 for m in METRICS}
        cells = [f"{_f(r[m], nd[m])} | {_f(r[m] - pub[m], nd[m], True)}" for m in METRICS]
        lines.append(f"| {', '.join(r['fallback_dates'])} | " + " | ".join(cells) + f" | {_f(r['distance_pp'])} |")
    return "\n".join(lines)


BLOCKS = {"qa-reference": ("docs/qa.md", qa_reference),
          "market-bench-v2-rounds": ("docs/market_bench.md", market_bench_v2_rounds),
          "market-bench-v2-mutants": ("docs/market_bench.md", market_bench_v2_mutants),
          "market-bench-v1-rounds": ("docs/market_bench.md", market_bench_v1_rounds),
          "market-bench-bench": ("docs/market_bench.md", market_bench_bench),
          "quant-arena-bench": ("docs/quant_arena.md", quant_arena_bench),
          "quant-arena-loop": ("docs/quant_arena.md", quant_arena_loop),
          "rl-ppo": ("docs/rl.md", rl_ppo),
          "perf-tools": ("docs/performance.md", perf_tools),
          "perf-quant-arena": ("docs/performance.md", perf_quant_arena),
          "perf-market-bench": ("docs/performance.md", perf_market_bench),
          "perf-blind-prompts": ("docs/performance.md", perf_blind_prompts),
          "perf-main-job": ("docs/performance.md", perf_main_job),
          "perf-llm-throughput": ("docs/performance.md", perf_llm_throughput),
          "floor-blind": ("docs/blind.md", floor_blind),
          "bl-readings": ("docs/fidelity.md", bl_readings)}


def run_all_blocks() -> dict:
    """The blocks of ``python benchmarks/run_all.py`` rendered again from its committed figures
    (benchmarks/results/run_all.json, written by its last run); {} when no run has written that file."""
    import json

    path = RESULTS / "run_all.json"
    if not path.exists():
        return {}
    import run_all

    saved = json.loads(path.read_text())
    blocks = run_all.render(saved["figures"], saved["argv"])
    return {name: ("docs/performance.md", lambda body=body: body) for name, body in blocks.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="rewrite every block in its docs file")
    g.add_argument("--check", action="store_true", help="exit 1 when a block differs from its command's output")
    g.add_argument("--measure", metavar="BLOCK", choices=sorted(MEASURED),
                   help="run the speed benchmark of BLOCK and write benchmarks/results/BLOCK.json (then --write)")
    ap.add_argument("--only", default=None, help="comma-separated block names (default: all)")
    a = ap.parse_args()
    if a.measure:
        print(f"wrote {measure(a.measure)}")
        return 0
    blocks = {**BLOCKS, **run_all_blocks()}
    names = a.only.split(",") if a.only else list(blocks)
    if not a.only and "perf-headline" not in blocks:
        print("docs/performance.md: the blocks of benchmarks/run_all.py are not checked: no committed "
              "benchmarks/results/run_all.json (the next `python benchmarks/run_all.py` writes it)")
    rc = 0
    for name in names:
        path, make = blocks[name]
        rc |= write_or_check(str(ROOT / path), name, make(), check=a.check)
    return rc


if __name__ == "__main__":
    sys.exit(main())
