"""Cost of blind prompt rendering (docs/blind.md): the PortBench stage prompts blind vs named, per stage.

Cold renders (the worst case: the first prompt of a decision row): at every decision of a stagewise
``PortBench-Balanced-v0`` episode over ``--period`` (fixed random answers), each stage prompt is rendered
named and blind with the prompt block caches emptied first; the best of ``--repeat`` renders is kept per decision,
stage, style and mode, and summed over the episode. Blind S1 builds the decision's blinded snapshot (shared by
S2 and S3) and its permuted correlations; the blinded row (aliased, rebased per-asset rows and macro z-scores)
is built by the step's observation before any prompt, as in an episode, and the last column charges it to
S1 as well. The modes alternate render by render, and each render is timed by the CPU time of its thread
(``time.thread_time``), so waiting for a core on a shared machine is not counted.

Run: ``python benchmarks/bench_blind_prompts.py [--repeat 15] [--period covid_2020] [--json PATH]``.
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


def _cold(env: PortBenchEnv, style: str, repeat: int = 1, row: bool = False) -> float:
    """Best time of ``repeat`` cold renders of the current stage prompt in ``style``; blind S1 with ``row``:
    the blinded row rebuilt too (else the one the step's observation built is used, as in an episode)."""
    best = float("inf")
    t = int(env.snapshot.t)
    for _ in range(repeat):
        b = env._blind
        if b is not None:
            b.caches.clear()
            if env.stage == 0:  # the blinded snapshot (and its permuted correlations) is built by S1
                b._last = None
                if row:
                    b._rows.pop(t, None)
                elif t in b._rows:
                    b._rows[t]["lazy"].clear()
        else:
            cache = env.view.row_cache(t)
            for key in [k for k in list(cache.keys()) if isinstance(k, tuple) and k[:1] == ("prompt",)]:
                del cache[key]
        t0 = time.thread_time()
        env.render_prompt(style=style)
        best = min(best, time.thread_time() - t0)
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
            modes = [("named", envs["named"], False), ("blind", envs["blind"], False)]
            if named.stage == 0:
                modes.append(("blind+row", envs["blind"], True))
            best = {m: float("inf") for m, _, _ in modes}
            for _ in range(repeat):
                for mode, e, row in modes:  # the modes at the same state, alternating render by render
                    best[mode] = min(best[mode], _cold(e, style, row=row))
            for mode, e, _ in modes:
                key = (mode, style, STAGES[e.stage])
                out[key] = out.get(key, 0.0) + best[mode]
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
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    args = ap.parse_args()
    out = measure(args.period, args.repeat)
    rows, figures = [], []
    for style in PROMPT_STYLES:
        for s in STAGES:
            a, b, c = out[("named", style, s)], out[("blind", style, s)], out.get(("blind+row", style, s))
            rows.append((f"{style} {s}", f"{1e3 * a:.2f} ms", f"{1e3 * b:.2f} ms", f"{100 * (b / a - 1):+.1f} %",
                         "" if c is None else f"{100 * (c / a - 1):+.1f} %"))
            figures.append({"style": style, "stage": s, "named_s": a, "blind_s": b, "blind_with_row_s": c})
    print_table(f"PortBench stage prompts of one {args.period} episode, cold renders, best of {args.repeat} "
                "(CPU time)", rows,
                columns=("style / stage", "named", "blind", "blind overhead", "with the row"))
    if args.json:
        import json

        with open(args.json, "w") as fh:
            json.dump({"period": args.period, "repeat": args.repeat, "rows": figures}, fh, indent=1)


if __name__ == "__main__":
    main()
