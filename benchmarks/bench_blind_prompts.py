"""Cost of blind prompt rendering (docs/blind.md): the PortBench stage prompts blind vs named, per stage.

Each measurement is one episode in a fresh process (cold block caches, as in a first run): a stagewise
``PortBench-Balanced-v0`` over ``covid_2020`` with fixed random answers; the time of every prompt the env
renders (``render_prompt``, called once per sub-step for the observation) is summed per stage. The best
of ``--repeat`` processes is reported per mode and style, with the blind overhead in percent.

Run: ``python benchmarks/bench_blind_prompts.py [--repeat 5] [--period covid_2020]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STAGES = ("S1", "S2", "S3")


def one(blind: bool, style: str, period: str) -> dict[str, float]:
    """Seconds per rendered prompt, by stage, over one episode."""
    import numpy as np

    from quantgym.envs.portbench.env import PortBenchEnv

    env = PortBenchEnv(profile="balanced", period=period, stagewise=True, blind=blind, prompt_style=style)
    total = {s: 0.0 for s in STAGES}
    count = {s: 0 for s in STAGES}
    render = env.render_prompt

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        out = render(*args, **kwargs)
        dt = time.perf_counter() - t0
        total[STAGES[env.stage]] += dt
        count[STAGES[env.stage]] += 1
        return out

    env.render_prompt = timed
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    n, term = env.n_assets, False
    while not term:
        if env.stage == 0:
            a = {"views": rng.uniform(-1, 1, n)}
        elif env.stage == 1:
            a = {"signals": rng.integers(0, 3, n)}
        else:
            w = rng.uniform(0, 1, n)
            a = {"weights": w / w.sum()}
        term = env.step(a)[2]
    return {s: total[s] / max(count[s], 1) for s in STAGES}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--period", default="covid_2020")
    ap.add_argument("--one", nargs=2, metavar=("MODE", "STYLE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0] == "blind", args.one[1], args.period)))
        return
    from benchmarks._common import print_table

    rows = []
    for style in ("full", "compact", "minimal"):
        best = {m: {s: float("inf") for s in STAGES} for m in ("named", "blind")}
        for _ in range(args.repeat):
            for mode in ("named", "blind"):  # alternating: drift of the machine hits both
                out = subprocess.run([sys.executable, __file__, "--one", mode, style, "--period", args.period],
                                     capture_output=True, text=True, check=True)
                got = json.loads(out.stdout.strip().splitlines()[-1])
                best[mode] = {s: min(best[mode][s], got[s]) for s in STAGES}
        for s in STAGES:
            a, b = best["named"][s], best["blind"][s]
            rows.append((f"{style} {s}", f"{1e3 * a:.3f} ms", f"{1e3 * b:.3f} ms", f"{100 * (b / a - 1):+.1f} %"))
    print_table(f"PortBench prompt per stage, named vs blind ({args.period}, best of {args.repeat} episodes)", rows,
                columns=("style / stage", "named", "blind", "blind overhead"))


if __name__ == "__main__":
    main()
