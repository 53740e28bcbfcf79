"""The whole peer comparison in one command.

    python benchmarks/run_all.py [--rounds 3] [--duration 2] [--scaling PANEL] [--before REV] [--no-setup]
                                 [--no-write]

1. **Setup** of the peers' venv ``benchmarks/.venv-peers`` when it is missing: ``python
   benchmarks/bench_peers_gyms.py --setup`` (its docstring lists the pip commands it runs: torch CPU,
   gym-anytrading, vectorbt, finrl, ...).
2. **Runs** the existing benchmark scripts, each as a subprocess of this checkout (``PYTHONPATH`` = the
   checkout) with its ``--json`` option, and reads their figures; every pair is measured alternately:
   ``bench_portbench_steps.py`` (PortBench, then gym-anytrading / FinRL / SyncVectorEnv in its peers
   child) ``--rounds`` times, medians over the runs; ``bench_peers_vectorbt.py`` (Quant-Arena sealed-year
   evaluation and Market-Bench replays, alternating with one vectorbt child, medians of ``--rounds``
   rounds); ``bench_market_bench.py`` (wall and CPU time of the three replays);
   ``bench_portbench_scaling.py`` (PortBench cold step, steps/s and peak RSS against the universe size
   N = 20 … 2000 on synthetic universes, default observation and without ``corr``); ``bench_quant_arena.py
   --scaling PANEL`` (time per sealed-year evaluation against the number of stocks; default panel the
   full 5,086-stock raw ``quant_arena/daily.parquet`` of the maintainers' data folder, when present); with ``--before REV``
   also ``bench_before_after.py --base REV`` (the evaluators of this checkout beside those of REV,
   alternating, and whether their outputs are the same).
3. **Writes** the generated blocks ``perf-headline`` (speed ratios against the issue's targets),
   ``perf-scaling``, ``perf-pb-scaling``, ``perf-details`` and (with ``--before``) ``perf-before-after`` of
   docs/performance.md, with the date, the load average and the versions. A figure that a script did not
   deliver is written as "not measured" with the reason, never estimated. The figures are saved with the
   command and the commit to ``benchmarks/results/run_all.json``; CI renders the blocks again from that file
   (``python benchmarks/docs_tables.py --check``) and never re-measures (timings differ from run to run).
   ``perf-pb-scaling`` is also written by ``bench_portbench_scaling.py`` run alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
PEERS_PY = BENCH / ".venv-peers" / "bin" / "python"
DOC = ROOT / "docs" / "performance.md"
RESULTS = BENCH / "results" / "run_all.json"  # the figures of the last written run (checked by CI)
FULL_PANEL = ROOT.parent / "shared" / "data" / "quant_arena" / "daily.parquet"  # the development layout
sys.path.insert(0, str(BENCH))

from _common import write_or_check  # noqa: E402
import bench_portbench_scaling as pb_scaling  # noqa: E402

NM = "not measured"


def log(msg: str) -> None:
    print(f"[run_all {time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.1f}] {msg}", flush=True)


def script(name: str, *args: str, timeout: float = 3600) -> tuple[dict | None, str]:
    """Run ``benchmarks/<name> *args --json TMP`` with this checkout first on the path; (figures, error)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [sys.executable, str(BENCH / name), *args, "--json", str(out)]
        log("+ " + " ".join(["python", f"benchmarks/{name}", *args]))
        try:
            p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"{name} timed out after {timeout:.0f} s"
        if p.returncode != 0 or not out.exists():
            tail = (p.stderr or p.stdout).strip().splitlines()
            return None, f"{name} failed: {tail[-1] if tail else f'exit {p.returncode}'}"
        return json.loads(out.read_text()), ""


def setup() -> str:
    """Create the peers venv with the documented commands when it is missing; '' or the error."""
    if PEERS_PY.exists():
        return ""
    log("creating benchmarks/.venv-peers: python benchmarks/bench_peers_gyms.py --setup")
    p = subprocess.run([sys.executable, str(BENCH / "bench_peers_gyms.py"), "--setup"], cwd=ROOT)
    return "" if p.returncode == 0 and PEERS_PY.exists() else "peers venv setup failed"


def median(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------------- collecting
def portbench(rounds: int, duration: float) -> dict:
    """Medians over ``rounds`` runs of bench_portbench_steps.py (each: quantgym, then the peers)."""
    runs, errs = [], []
    for _ in range(rounds):
        r, e = script("bench_portbench_steps.py", "--duration", str(duration), "--no-append", timeout=3600)
        (runs.append(r) if r else errs.append(e))
    out: dict = {"runs": len(runs), "errors": errs, "qg": {}, "peer": {}, "peer_versions": {}, "peer_errors": {},
                 "qg_cpu": {}, "peer_cpu": {}, "load": {}}
    for key in ("raw", "raw_scored", "gym.make", "stagewise", "sync8", "vec8", "vec64"):
        out["qg"][key] = median([r.get("results", {}).get(key) for r in runs])
        # the same rate by CPU time (time.process_time) and the load average when it was measured
        out["qg_cpu"][key] = median([r.get("results", {}).get("cpu", {}).get(key) for r in runs])
        out["load"][key] = median([r.get("results", {}).get("load", {}).get(key) for r in runs])
    for key in ("cold_episode_s", "cold_episode_cpu_s", "cold_steps", "reset_ms", "reset_cpu_ms"):
        out["qg"][key] = median([r.get("results", {}).get(key) for r in runs])
    out["load"]["cold"] = median([r.get("results", {}).get("load", {}).get("cold") for r in runs])
    # ms per stagewise decision where the script measures it (median over decisions of each run)
    dec = [(r.get("results", {}).get("stagewise_decision") or {}).get("wall_ms") for r in runs]
    out["qg"]["stagewise_decision_ms"] = median(dec)
    for r in runs:
        for name, v in r.get("peers", {}).get("results", {}).items():
            out["peer"].setdefault(name, []).append(v.get("steps_per_s"))
            out["peer_cpu"].setdefault(name, []).append(v.get("cpu_steps_per_s"))
            out["load"].setdefault(name, []).append(v.get("load"))
            out["peer_versions"][name] = v.get("version")
        out["peer_errors"].update({k: str(v) for k, v in r.get("peers", {}).get("errors", {}).items()})
        out["versions"] = r.get("versions", {})
    out["peer"] = {k: median(v) for k, v in out["peer"].items()}
    out["peer_cpu"] = {k: median(v) for k, v in out["peer_cpu"].items()}
    out["load"].update({k: median(v) for k, v in out["load"].items() if isinstance(v, list)})
    return out


def collect(a: argparse.Namespace) -> dict:
    import staleness

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    if staleness.dirty(staleness.WATCHED["run_all"][1]):
        log("the timed code has uncommitted changes: recorded as +dirty, which benchmarks/staleness.py reports "
            "as stale")
        commit += "+dirty"
    res: dict = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": [os.getloadavg()[0]],
                 "errors": {}, "commit": commit, "host": host_versions()}
    if not a.no_setup:
        e = setup()
        if e:
            res["errors"]["setup"] = e
    res["portbench"] = portbench(a.rounds, a.duration)
    res["load"].append(os.getloadavg()[0])
    res["vec_one_core"], e = script("bench_portbench_vec.py", "--one-core", "--vec-envs", "64", "--rounds",
                                    str(max(a.rounds, 3)), "--duration", str(a.duration))
    if e:
        res["errors"]["bench_portbench_vec.py"] = e
    res["vectorbt"], e = script("bench_peers_vectorbt.py", "--rounds", str(max(a.rounds, 3)))
    if e:
        res["errors"]["bench_peers_vectorbt.py"] = e
    res["load"].append(os.getloadavg()[0])
    res["market_bench"], e = script("bench_market_bench.py", "--repeat", "3")
    if e:
        res["errors"]["bench_market_bench.py"] = e
    res["pb_scaling"], e = script("bench_portbench_scaling.py", "--no-write", timeout=7200)
    if e:
        res["errors"]["bench_portbench_scaling.py"] = e
    res["load"].append(os.getloadavg()[0])
    panel = a.scaling or (str(FULL_PANEL) if FULL_PANEL.exists() else None)
    if panel:
        res["scaling"], e = script("bench_quant_arena.py", "--scaling", panel, "--repeat", "3", timeout=7200)
        if e:
            res["errors"]["bench_quant_arena.py --scaling"] = e
    else:
        res["scaling"], res["errors"]["scaling"] = None, "no panel (--scaling PANEL)"
    res["load"].append(os.getloadavg()[0])
    if a.before:
        res["before_after"], e = script("bench_before_after.py", "--base", a.before, "--rounds", str(a.rounds))
        if e:
            res["errors"]["bench_before_after.py"] = e
        res["load"].append(os.getloadavg()[0])
    res["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return res


# ---------------------------------------------------------------------- tables
def _rate(x: float | None, unit: str = "/s") -> str:
    if x is None:
        return NM
    return f"{x / 1e6:.2f} M{unit}" if x >= 1e6 else f"{x / 1e3:.1f} k{unit}" if x >= 1e3 else f"{x:.0f}{unit}"


def _ms(s: float | None) -> str:
    return NM if s is None else f"{1e3 * s:.1f} ms"


def _ratio(q: float | None, p: float | None) -> float | None:
    return None if q is None or p is None or p == 0 else q / p


def _with_cpu(wall: float | None, cpu: float | None, load: float | None, unit: str) -> str:
    """A wall rate with its CPU-time rate and load average beside it (the wall rate alone when the run did not
    record CPU time)."""
    text = _rate(wall, unit)
    if cpu is None:
        return text
    return f"{text} wall, {_rate(cpu, unit)} CPU" + ("" if load is None else f" (load {load:.1f})")


def headline(res: dict) -> list[tuple[str, str, str, float | None, str, bool | None]]:
    """(what, quantgym, peer, speed ratio, target, met) rows; speed ratio = quantgym speed / peer speed.

    With CPU-time rates in the figures (``bench_portbench_steps.py`` records them), each PortBench and peer rate
    shows its CPU-time rate and load average beside the wall rate, the targets are met by the CPU-time rates (on
    a shared machine the wall rate measures the other jobs too), and the single-env rows include the first
    (cold) pass and the reset after a daily episode."""
    pb, vb = res["portbench"], res.get("vectorbt") or {}
    q, p = pb["qg"], pb["peer"]
    qc, pc, ld = pb.get("qg_cpu") or {}, pb.get("peer_cpu") or {}, pb.get("load") or {}
    cpu_rates = qc.get("raw") is not None

    def qg(key: str, unit: str) -> str:
        return _with_cpu(q.get(key), qc.get(key), ld.get(key), unit)

    def peer(name: str, unit: str) -> str:
        return _with_cpu(p.get(name), pc.get(name), ld.get(name), unit)

    rows = []
    ga = "gym-anytrading stocks-v0"
    any_ = p.get(ga)
    finrl = p.get("FinRL StockTradingEnv")
    sync = p.get("SyncVectorEnv(stocks-v0 x8)")
    raw = q.get("raw")
    if cpu_rates:  # the targets on CPU time: ≥ 60k steps/s and ≥ 0.25× gym-anytrading in the same run
        raw_c, any_c = qc.get("raw"), pc.get(ga)
        ratio_c = _ratio(raw_c, any_c)
        rows.append(("PortBench raw allocation step, daily 2016-2023, scoring off, one env, warm",
                     qg("raw", " steps/s"), f"{ga} {peer(ga, ' steps/s')}", ratio_c,
                     "≥ 60k steps/s and ratio ≥ 0.25 (CPU time)",
                     None if ratio_c is None else raw_c >= 60_000 and ratio_c >= 0.25))
    else:
        rows.append(("PortBench raw allocation step, daily 2016-2023, scoring off, one env", _rate(raw, " steps/s"),
                     f"gym-anytrading stocks-v0 {_rate(any_, ' steps/s')}", _ratio(raw, any_), "≥ 30k steps/s",
                     None if raw is None else raw >= 30_000))
    rows.append(("same, beside FinRL StockTradingEnv (30 tickers)", qg("raw", " steps/s"),
                 f"FinRL {peer('FinRL StockTradingEnv', ' steps/s')}",
                 _ratio(qc.get("raw"), pc.get("FinRL StockTradingEnv")) if cpu_rates else _ratio(raw, finrl), "–",
                 None))
    scored = q.get("raw_scored")
    rows.append(("same, scoring on (S1-S5, CEPS, PAS every step)", qg("raw_scored", " steps/s"),
                 f"gym-anytrading stocks-v0 {peer(ga, ' steps/s')}",
                 _ratio(qc.get("raw_scored"), pc.get(ga)) if cpu_rates else _ratio(scored, any_), "≥ 10k steps/s",
                 None if scored is None else (qc.get("raw_scored") if cpu_rates else scored) >= 10_000))
    if cpu_rates and q.get("cold_steps"):
        cold_w, cold_c = q["cold_steps"] / q["cold_episode_s"], q["cold_steps"] / q["cold_episode_cpu_s"]
        rows.append(("same, first (cold) pass over the daily rows, scoring off (empty per-dataset caches)",
                     _with_cpu(cold_w, cold_c, ld.get("cold"), " steps/s"), "–", None, "≥ 5k steps/s (CPU time)",
                     cold_c >= 5_000))
        rows.append(("same, reset after a daily episode", f"{q['reset_ms']:.1f} ms wall, {q['reset_cpu_ms']:.1f} ms "
                     "CPU", "–", None, "≤ 5 ms (CPU time)", q["reset_cpu_ms"] <= 5.0))
    v8 = q.get("vec8")
    r8 = _ratio(qc.get("vec8"), pc.get("SyncVectorEnv(stocks-v0 x8)")) if cpu_rates else _ratio(v8, sync)
    rows.append(("PortBench batched vector env, 8 envs", qg("vec8", " env-steps/s"),
                 f"SyncVectorEnv(stocks-v0 ×8) {peer('SyncVectorEnv(stocks-v0 x8)', ' env-steps/s')}", r8, "ratio ≥ 2",
                 None if r8 is None else r8 >= 2))
    v1 = res.get("vec_one_core") or {}
    if v1:
        rows.append((f"PortBench batched vector env, {v1['vec_envs']} envs, one thread on one core "
                     "(bench_portbench_vec.py --one-core)",
                     _with_cpu(v1.get("wall"), v1.get("cpu"), v1.get("load"), " env-steps/s"), "–", None,
                     "≥ 1M env-steps/s (CPU time)", None if v1.get("cpu") is None else v1["cpu"] >= 1e6))
    st, measured = q.get("stagewise"), q.get("stagewise_decision_ms")
    dec = measured / 1e3 if measured is not None else (None if not st else 3.0 / st)
    how = "median per decision" if measured is not None else "3 sub-steps at the sub-step rate"
    rows.append((f"PortBench stagewise S1+S2+S3 scored decision ({how})", _ms(dec), "–", None, "≤ 2 ms",
                 None if dec is None else dec <= 0.002))
    pbs = (res.get("pb_scaling") or {}).get("results", {})
    for obs, what in (("no-corr", "observation without `corr` (`obs_keys`)"), ("full", "default observation")):
        r = pbs.get(f"1000/{obs}")
        # the mean: a pass computes a batch of dates at the first of them, so the median step is one without
        cold, cold_c = (None, None) if r is None else (r["cold_ms_mean"] / 1e3, r["cold_cpu_ms_mean"] / 1e3)
        rows.append((f"PortBench cold step, N = 1000 synthetic, daily 2016-2023, scoring off, {what}, mean",
                     f"{_ms(cold)} wall, {_ms(cold_c)} CPU", "–", None, "≤ 5 ms (CPU time)",
                     None if cold_c is None else cold_c <= 0.005))
        warm, warm_c = (None, None) if r is None else (1 / r["steps_per_s"], 1 / r["steps_per_cpu_s"])
        rows.append((f"same, warm step (the second episode over the same data), {what}, mean",
                     f"{_ms(warm)} wall, {_ms(warm_c)} CPU", "–", None, "≤ 1 ms (CPU time)",
                     None if warm_c is None else warm_c <= 0.001))
    r = pbs.get("1000/full")
    rss = None if r is None else r["peak_rss_mib"]
    rows.append(("PortBench peak RSS, same run, default observation", NM if rss is None else f"{rss:,.0f} MiB", "–",
                 None, "≤ 2 GiB", None if rss is None else rss <= 2048))
    t, c = vb.get("times", {}), vb.get("cpu_times", {})
    qa = vb.get("qa", {})
    who = f"{qa.get('stocks', '?')} stocks × {qa.get('days', '?')} days"
    ev_c, vq_c = c.get("qa_eval"), c.get("vbt_qa")
    r = _ratio(vq_c, ev_c)  # the peer's CPU time over ours: > 1 is faster
    rows.append((f"Quant-Arena sealed-year evaluation ({who}: account + metrics + score), median",
                 f"{_ms(t.get('qa_eval'))} wall, {_ms(ev_c)} CPU",
                 f"vectorbt from_orders, same orders {_ms(t.get('vbt_qa'))} wall, {_ms(vq_c)} CPU", r,
                 "≤ 10 ms and ratio ≥ 8 (CPU time)", None if r is None else ev_c <= 0.010 and r >= 8))
    rows.append(("Quant-Arena cash account alone (same run)", f"{_ms(t.get('qa_account'))} wall, "
                 f"{_ms(c.get('qa_account'))} CPU", "vectorbt, as above", _ratio(vq_c, c.get("qa_account")), "–",
                 None))
    n = vb.get("mb_rows")
    for k in ("scheduled", "pairs", "delta_hedge"):
        q, v = c.get(f"mb_{k}"), c.get(f"vbt_mb_{k}")
        o = (vb.get("mb_orders") or {}).get(k) or {}
        rr = _ratio(v, q)
        rows.append((f"Market-Bench {k} reference, {n or 0:,}-row book, {o.get('n_orders', '?'):,} orders"
                     if isinstance(o.get("n_orders"), int) else f"Market-Bench {k} reference, {n or 0:,}-row book",
                     f"{_ms(t.get(f'mb_{k}'))} wall, {_ms(q)} CPU",
                     f"vectorbt from_orders, the same orders on the same rows {_ms(t.get(f'vbt_mb_{k}'))} wall, "
                     f"{_ms(v)} CPU", rr, "ratio ≥ 2 (CPU time)", None if rr is None else rr >= 2))
    return rows


def host_versions() -> dict[str, str]:
    """The versions of the measuring interpreter, saved with the figures (a later render must not read its own)."""
    import numpy as np
    import pandas as pd

    return {"Python": platform.python_version(), "numpy": np.__version__, "pandas": pd.__version__}


def versions(res: dict) -> str:
    parts = [f"{k} {v}" for k, v in (res.get("host") or host_versions()).items()]
    g = res["portbench"].get("versions", {}).get("gymnasium")
    if g:
        parts.append(f"gymnasium {g}")
    vb = (res.get("vectorbt") or {}).get("vectorbt") or {}
    peers = [f"vectorbt {vb['vectorbt']}", f"numba {vb['numba']}", f"numpy {vb['numpy']}", f"pandas {vb['pandas']}"] \
        if vb else []
    for name, ver in res["portbench"].get("peer_versions", {}).items():
        if ver:
            peers.append(f"{'FinRL' if name.startswith('FinRL') else 'gym-anytrading'} {ver}")
    return (f"quantgym at {res.get('commit') or '?'}; " + ", ".join(parts) + "; peers venv: " +
            (", ".join(dict.fromkeys(peers)) if peers else NM))


def render(res: dict, argv: list[str]) -> dict[str, str]:
    load = ", ".join(f"{x:.1f}" for x in res["load"])
    cmd = "python benchmarks/run_all.py" + "".join(f" {x}" for x in argv)
    head = (f"Generated by `{cmd}` ({res['started']} to {res['finished']}; 1-min load average at start, after "
            f"each stage: {load}; this 2-core machine is shared with other jobs). {versions(res)}.\n\n")
    rows = headline(res)
    lines = ["| what | quantgym | peer | speed ratio | target | met |", "|---|---|---|---|---|---|"]
    for what, qg, peer, r, target, met in rows:
        lines.append(f"| {what} | {qg} | {peer} | {NM if r is None else f'{r:.2f}'} | {target} | "
                     f"{'–' if met is None else 'yes' if met else 'no'} |")
    errs = {**res["errors"], **{f"portbench run {i + 1}": e for i, e in enumerate(res['portbench']['errors'])},
            **res["portbench"].get("peer_errors", {})}
    vb = res.get("vectorbt") or {}
    errs.update({f"vectorbt: {k}": v for k, v in vb.get("errors", {}).items()})
    note = ("\nSpeed ratio = quantgym's speed ÷ the peer's (> 1: quantgym is faster): throughputs divided, or the "
            "peer's time divided by quantgym's; a target marked (CPU time) is judged on the CPU-time figures. Medians: PortBench over "
            f"{res['portbench']['runs']} runs of bench_portbench_steps.py (each measures quantgym, then the peers); "
            f"Quant-Arena and Market-Bench over {vb.get('rounds', 0)} alternating rounds of bench_peers_vectorbt.py. "
            "The stagewise decision is the script's median per decision where it measures one, else three "
            "sub-steps at the measured sub-step rate.\n")
    if errs:
        note += "\nNot measured: " + "; ".join(f"{k}: {v}" for k, v in errs.items()) + ".\n"
    blocks = {"perf-headline": head + "\n".join(lines) + "\n" + note}
    sc = res.get("scaling")
    if sc and sc.get("points"):
        pts = sc["points"]
        base = pts[0]
        sl = ["| stocks | orders | sealed-year evaluation | account alone | time per stock vs the smallest N | load |",
              "|---|---|---|---|---|---|"]
        for p in pts:
            rel = (p["eval_s"] / p["stocks"]) / (base["eval_s"] / base["stocks"])
            sl.append(f"| {p['stocks']:,} | {p['orders']:,} | {_ms(p['eval_s'])} | {_ms(p['account_s'])} | "
                      f"{rel:.2f} | {p['load_avg']:.1f} |")
        blocks["perf-scaling"] = (f"Generated by `{cmd}` (stage `python benchmarks/bench_quant_arena.py --scaling "
                                  f"{sc['panel']} --repeat {sc['repeat']}`): sealed year 2024, seeded 20-day momentum "
                                  "scores, N stocks drawn (seeded) from the panel; medians. A time per stock that "
                                  "falls as N grows is better than linear.\n\n" + "\n".join(sl) + "\n")
    else:
        blocks["perf-scaling"] = f"Not measured: {res['errors'].get('bench_quant_arena.py --scaling') or res['errors'].get('scaling', '')}\n"
    pbs = res.get("pb_scaling")
    if pbs:
        blocks[pb_scaling.BLOCK] = pb_scaling.block(pbs, cmd, "python benchmarks/bench_portbench_scaling.py")
    else:
        blocks[pb_scaling.BLOCK] = f"Not measured: {res['errors'].get('bench_portbench_scaling.py', '')}\n"
    dl = ["| figure | value |", "|---|---|"]
    qc, pc, ld = (res["portbench"].get(k) or {} for k in ("qg_cpu", "peer_cpu", "load"))
    for k, v in res["portbench"]["qg"].items():
        if k.endswith("_s") or k == "cold_steps":
            val = NM if v is None else f"{v:.2f} s" if k.endswith("_s") else f"{v:,.0f}"
        elif k.endswith("_ms"):
            val = _ms(None if v is None else v / 1e3)
        else:
            val = _with_cpu(v, qc.get(k), ld.get(k), "/s")
        dl.append(f"| PortBench {k} (bench_portbench_steps.py key) | {val} |")
    for k, v in res["portbench"]["peer"].items():
        dl.append(f"| peer {k} | {_with_cpu(v, pc.get(k), ld.get(k), '/s')} |")
    for k, v in (vb.get("times") or {}).items():
        dl.append(f"| bench_peers_vectorbt.py {k}: wall / CPU (medians) | {_ms(v)} / "
                  f"{_ms((vb.get('cpu_times') or {}).get(k))} |")
    if vb.get("vectorbt"):
        dl.append(f"| vectorbt first from_orders call (numba compile) | {vb['vectorbt']['qa_first_call_s']:.1f} s |")
        dl.append(f"| final value: vectorbt / evaluator NAV (no dividends/splits in from_orders) | "
                  f"{vb['vectorbt']['qa_final_value']:,.0f} / {vb['qa']['final_nav']:,.0f} |")
    mb = res.get("market_bench") or {}
    for k, v in (mb.get("strategies") or {}).items():
        dl.append(f"| bench_market_bench.py {k}: wall / CPU (best of {mb['repeat']}) | {v['wall_s']:.3f} s / "
                  f"{v['cpu_s']:.3f} s ({mb['rows'] / v['cpu_s'] / 1e6:.2f} M snapshots/CPU-s) |")
    blocks["perf-details"] = f"Generated by `{cmd}`: every figure the stages returned.\n\n" + "\n".join(dl) + "\n"
    ba = res.get("before_after")
    if ba:
        bl = ["| evaluator | before (wall / CPU) | after (wall / CPU) | speed-up (wall / CPU) | same outputs |",
              "|---|---|---|---|---|"]
        for k, h in ba["wall"]["head"].items():
            b, cb, ch = ba["wall"]["base"][k], ba["cpu"]["base"][k], ba["cpu"]["head"][k]
            bl.append(f"| {k} | {_ms(b)} / {_ms(cb)} | {_ms(h)} / {_ms(ch)} | {b / h:.2f} / {cb / ch:.2f} | "
                      f"{'yes' if ba['same_outputs'][k] else 'NO'} |")
        blocks["perf-before-after"] = (
            f"Generated by `{cmd}` (stage `python benchmarks/bench_before_after.py --base {ba['base']} --rounds "
            f"{ba['rounds']}`): {ba['base']} at {ba['base_sha']} (before) and this checkout at {ba['head_sha']} "
            f"(after), one worker process each per round, alternating; medians of {ba['rounds']} rounds; "
            f"Market-Bench books of {ba['rows']:,} rows. qa_* = Quant-Arena sealed 2024 (800 stocks), mb_* = "
            "Market-Bench reference replays.\n\n" + "\n".join(bl) + "\n")
    elif "bench_before_after.py" in res["errors"]:
        blocks["perf-before-after"] = f"Not measured: {res['errors']['bench_before_after.py']}\n"
    return blocks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds / runs per pair (medians)")
    ap.add_argument("--duration", type=float, default=2.0, help="seconds per PortBench throughput measurement")
    ap.add_argument("--scaling", metavar="PANEL", help=f"Quant-Arena panel for the scaling curve (default {FULL_PANEL})")
    ap.add_argument("--before", metavar="REV", help="also time the evaluators of git revision REV beside this checkout")
    ap.add_argument("--no-setup", action="store_true", help="do not create the peers venv when it is missing")
    ap.add_argument("--no-write", action="store_true", help="print the tables, leave docs/performance.md alone")
    ap.add_argument("--from-json", metavar="PATH", help=argparse.SUPPRESS)  # re-render a saved run
    ap.add_argument("--save-json", metavar="PATH", help="also save every collected figure as JSON")
    argv = sys.argv[1:] if argv is None else argv
    a = ap.parse_args(argv)
    res = json.loads(Path(a.from_json).read_text()) if a.from_json else collect(a)
    if a.save_json:
        Path(a.save_json).write_text(json.dumps(res))
    shown = [x for x in argv if not x.startswith("--from-json") and x != a.from_json and x != a.save_json
             and not x.startswith("--save-json")]
    blocks = render(res, shown)
    for name, body in blocks.items():
        print(f"\n== {name} ==\n{body}")
        if not (a.no_write or a.from_json):  # a re-rendered run is printed only: its command is not this one
            write_or_check(str(DOC), name, body, check=False)
    if not (a.no_write or a.from_json):
        # the figures the blocks were rendered from: python benchmarks/docs_tables.py --check renders them again
        RESULTS.write_text(json.dumps({"command": "python benchmarks/run_all.py" + "".join(f" {x}" for x in shown),
                                       "argv": shown, "commit": res.get("commit"), "figures": res}, indent=1) + "\n")
        log(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
