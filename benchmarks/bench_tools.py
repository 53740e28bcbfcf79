"""Env-side cost of a PortBench tool call (docs/tools.md): ``env.step({"tool": ..., "arguments": ...})`` on the
bundled data, the model excluded.

Two stagewise ``PortBench-Balanced-v0`` envs with ``tools=True`` over ``--period``, named and blind (a budget
large enough never to refuse), are reset; at each of its first ``--decisions`` decisions (S1 of each) every data tool is called
``--repeat`` times with typical arguments. A call is the whole env step: parsing the action, validating the
arguments against the tool's JSON schema, charging the budget, reading the point-in-time window, formatting
the text and building the observation (its arrays copied) and the info. Reported per tool: the median and the
best wall time of a call, the median CPU time of the thread (``time.thread_time``: on a loaded machine the wall
time includes waiting for a core) and the result's characters. The target is under 1 ms per call.

Run: ``python benchmarks/bench_tools.py [--repeat 200] [--decisions 4] [--period normal_2024] [--json PATH]``
(``python benchmarks/docs_tables.py --measure perf-tools`` runs it for docs/performance.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks._common import print_table  # noqa: E402
from quantgym.envs.portbench.config import PortBenchToolsConfig  # noqa: E402
from quantgym.envs.portbench.env import PortBenchEnv  # noqa: E402

#: (label, tool call) with typical arguments: a few named assets, the default windows, every asset once
CALLS = (
    ("list_universe", {"tool": "list_universe"}),
    ("asset_stats 5 assets, 60 d", {"tool": "asset_stats", "arguments": {"assets": "FIVE", "window": 60}}),
    ("asset_stats all, 252 d", {"tool": "asset_stats", "arguments": {"assets": [], "window": 252}}),
    ("correlation 5 assets, 60 d", {"tool": "correlation", "arguments": {"assets": "FIVE", "window": 60}}),
    ("correlation 20 assets, 252 d", {"tool": "correlation", "arguments": {"assets": "TWENTY", "window": 252}}),
    ("macro_series 5 series, 21 d", {"tool": "macro_series", "arguments": {
        "series": ["fed_funds_rate", "cpi_yoy", "t10y2y_spread", "hy_oas", "vix"], "window": 21}}),
    ("macro_series all, 252 d weekly", {"tool": "macro_series", "arguments": {"series": [], "window": 252,
                                                                              "every": 5}}),
    ("portfolio", {"tool": "portfolio"}),
    ("investor_profile", {"tool": "investor_profile"}),
)


def _call(env: PortBenchEnv, call: dict) -> dict:
    args = dict(call.get("arguments", {}))
    ids = list(env.prompt_tickers)
    if args.get("assets") == "FIVE":  # one asset of each of five classes, as the agent sees them
        args["assets"] = [ids[i] for i in (0, 30, 45, 60, 75)]
    elif args.get("assets") == "TWENTY":
        args["assets"] = ids[:80:4]
    return {"tool": call["tool"], "arguments": args}


def measure(period: str, decisions: int, repeat: int, blind: bool) -> dict[str, dict]:
    env = PortBenchEnv(profile="balanced", period=period, stagewise=True, tools=True, blind=blind,
                       tool_config=PortBenchToolsConfig(calls=10**9, chars=10**12))
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    times: dict[str, list[float]] = {label: [] for label, _ in CALLS}
    cpu: dict[str, list[float]] = {label: [] for label, _ in CALLS}
    chars: dict[str, int] = {}
    for _ in range(decisions):
        for label, call in CALLS:
            c = _call(env, call)
            info = env.step(c)[4]  # warm (the first call of a decision also fills nothing: the row is cached)
            assert info["tool"]["ok"], info["tool"]
            chars[label] = len(info["tool"]["content"])
            for _ in range(repeat):
                c0, t0 = time.thread_time(), time.perf_counter()
                env.step(c)
                times[label].append(time.perf_counter() - t0)
                cpu[label].append(time.thread_time() - c0)
        n = env.n_assets  # the three stage answers: on to the next decision
        env.step({"views": rng.uniform(-1, 1, n)})
        env.step({"signals": rng.integers(0, 3, n)})
        w = rng.uniform(0, 1, n)
        if env.step({"weights": w / w.sum()})[2]:
            break
    return {label: {"median_s": statistics.median(t), "best_s": min(t), "cpu_median_s": statistics.median(cpu[label]),
                    "chars": chars[label], "n": len(t)} for label, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--decisions", type=int, default=4)
    ap.add_argument("--period", default="normal_2024")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    args = ap.parse_args()
    figures = {"period": args.period, "decisions": args.decisions, "repeat": args.repeat}
    for mode in ("named", "blind"):
        out = figures[mode] = measure(args.period, args.decisions, args.repeat, mode == "blind")
        rows = [(label, f"{1e6 * f['median_s']:.0f} µs", f"{1e6 * f['best_s']:.0f} µs",
                 f"{1e6 * f['cpu_median_s']:.0f} µs", f"{f['chars']:,}") for label, f in out.items()]
        print_table(f"PortBench tool call, env side ({args.period}, {mode}; "
                    f"{args.decisions} decisions x {args.repeat} calls)", rows,
                    columns=("tool call", "median", "best", "CPU median", "result chars"))
        worst = max(out.values(), key=lambda f: f["median_s"])
        print(f"slowest median {1e3 * worst['median_s']:.3f} ms per call, CPU {1e3 * worst['cpu_median_s']:.3f} ms "
              "(target < 1 ms)")
    if args.json:
        import json

        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=1)


if __name__ == "__main__":
    main()
