"""Cost of blind prompt rendering (docs/blind.md): the PortBench stage prompts blind vs named, per stage.

Cold renders (the worst case: the first prompt of a decision row): at every decision of a stagewise
``PortBench-Balanced-v0`` episode over ``--period`` (fixed random answers), each stage prompt is rendered
named and blind with the prompt block caches emptied first; the best of ``--repeat`` renders is kept per decision,
stage, style and mode, and summed over the episode (the blinded row is built once per decision, so it is
rebuilt before every S1 render and counted there). Reported per style and stage with the blind overhead.

Run: ``python benchmarks/bench_blind_prompts.py [--repeat 15] [--period covid_2020]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks._common import print_table  # noqa: E402
from quantgym.envs.portbench.env import PortBenchEnv  # noqa: E402
from quantgym.spaces import PROMPT_STYLES  # noqa: E402

STAGES = ("S1", "S2", "S3")


def _cold(env: PortBenchEnv, style: str, repeat: int) -> float:
    """Best time of a cold render of the current stage prompt in ``style``."""
    best = float("inf")
    t = int(env.snapshot.t)
    for _ in range(repeat):
        if env._blind is not None:
            env._blind.caches.clear()
            if env.stage == 0:  # the blinded row and snapshot are built once per decision: charged to S1
                env._blind._rows.clear()
                env._blind._last = None
        else:
            cache = env.view.row_cache(t)
            for key in [k for k in list(cache.keys()) if isinstance(k, tuple) and k[:1] == ("prompt",)]:
                del cache[key]
        t0 = time.perf_counter()
        env.render_prompt(style=style)
        best = min(best, time.perf_counter() - t0)
    return best


def measure(period: str, repeat: int) -> dict[tuple[str, str, str], float]:
    """Summed best cold render times over the episode, by (mode, style, stage)."""
    envs = {m: PortBenchEnv(profile="balanced", period=period, stagewise=True, blind=(m == "blind"))
            for m in ("named", "blind")}
    out: dict[tuple[str, str, str], float] = {}
    rng = np.random.default_rng(0)
    for e in envs.values():
        e.reset(seed=0)
    term = False
    while not term:
        named = envs["named"]
        for style in PROMPT_STYLES:
            for mode, e in envs.items():  # both modes at the same state, alternating
                key = (mode, style, STAGES[e.stage])
                out[key] = out.get(key, 0.0) + _cold(e, style, repeat)
        n = named.n_assets
        if named.stage == 0:
            a = {"views": rng.uniform(-1, 1, n)}
        elif named.stage == 1:
            a = {"signals": rng.integers(0, 3, n)}
        else:
            w = rng.uniform(0, 1, n)
            a = {"weights": w / w.sum()}
        for e in envs.values():
            term = e.step(a)[2]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--period", default="covid_2020")
    args = ap.parse_args()
    out = measure(args.period, args.repeat)
    rows = []
    for style in PROMPT_STYLES:
        for s in STAGES:
            a, b = out[("named", style, s)], out[("blind", style, s)]
            rows.append((f"{style} {s}", f"{1e3 * a:.2f} ms", f"{1e3 * b:.2f} ms", f"{100 * (b / a - 1):+.1f} %"))
    print_table(f"PortBench stage prompts of one {args.period} episode, cold renders, best of {args.repeat}", rows,
                columns=("style / stage", "named", "blind", "blind overhead"))


if __name__ == "__main__":
    main()
