"""The evaluators of this checkout beside those of an earlier revision, alternating in one run.

    python benchmarks/bench_before_after.py --base REV [--rounds 5] [--rows 1000000] [--json PATH]

``git archive REV quantgym`` is unpacked into a temporary folder; each round then starts one worker
process on the base's quantgym and one on this checkout's (in that order, alternating), each
timing one call of: the Quant-Arena sealed-year evaluation (``evaluate_scores``, bundled 800 stocks,
sealed 2024, seeded 20-day momentum scores), its cash account (``run_account``) and its signal
metrics (``signal_metrics``), and the three Market-Bench reference replays on the 1M-row books of
bench_market_bench.py; after a warm-up call, wall and CPU time. Medians over the rounds. Each worker
also returns the outputs (metrics, equity) so the run states whether both revisions give the same
numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(rows: int) -> None:
    """Time one call of each evaluator of the quantgym first on the path; print JSON."""
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_market_bench import strategies
    from bench_quant_arena import momentum_scores

    from quantgym.envs.quant_arena.account import labels, run_account, window_rows
    from quantgym.envs.quant_arena.data import load_dataset
    from quantgym.envs.quant_arena.exchange import price_limits
    from quantgym.envs.quant_arena.executor import evaluate_scores
    from quantgym.envs.quant_arena.metrics import signal_metrics

    ds = load_dataset()
    d0, n = window_rows(ds, "2024-01-01", "2024-12-31")
    S = momentum_scores(ds, d0, n)
    price_limits(ds)
    y = labels(ds, d0, n)
    fns = {"qa_eval": lambda: evaluate_scores(ds, d0, n, S), "qa_account": lambda: run_account(ds, d0, n, S),
           "qa_signal": lambda: signal_metrics(S, y, ds.has_row[d0:d0 + n])}
    fns.update({f"mb_{k}": v[0] for k, v in strategies(rows).items()})
    out: dict = {"times": {}, "cpu": {}, "outputs": {}}
    for k, fn in fns.items():
        res = fn()  # warm-up, and the output
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        out["times"][k], out["cpu"][k] = time.perf_counter() - t0, time.process_time() - c0
        if k == "qa_eval":
            res = {m: v for m, v in res["metrics"].items() if isinstance(v, (int, float))}
        elif k == "qa_account":
            res = {"nav": res.nav.tolist(), "fees": res.fees.tolist()}
        elif k == "qa_signal":
            res = {m: v for m, v in res.items() if not m.startswith("_")}
        out["outputs"][k] = hashlib.sha256(json.dumps(res, sort_keys=True, default=str).encode()).hexdigest()
    print(json.dumps(out))


def run(base: str, rounds: int, rows: int) -> dict:
    env0 = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory() as tmp:
        arc = subprocess.run(["git", "archive", base, "quantgym"], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=arc, check=True)
        sha = subprocess.run(["git", "rev-parse", "--short", base], cwd=ROOT, capture_output=True, text=True).stdout
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
        sides = {"base": tmp, "head": str(ROOT)}
        got: dict[str, list[dict]] = {"base": [], "head": []}
        for _ in range(rounds):
            for side, path in sides.items():
                p = subprocess.run([sys.executable, __file__, "--worker", "--rows", str(rows)], cwd=ROOT,
                                   env=dict(env0, PYTHONPATH=path), capture_output=True, text=True, timeout=3600)
                if p.returncode != 0:
                    raise RuntimeError(f"{side} worker failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
                got[side].append(json.loads(p.stdout.strip().splitlines()[-1]))
    keys = list(got["head"][0]["times"])
    med = {side: {k: statistics.median(r["times"][k] for r in runs) for k in keys} for side, runs in got.items()}
    cpu = {side: {k: statistics.median(r["cpu"][k] for r in runs) for k in keys} for side, runs in got.items()}
    same = {k: got["base"][0]["outputs"][k] == got["head"][0]["outputs"][k] for k in keys}
    return {"base": base, "base_sha": sha.strip(), "head_sha": head.strip(), "rounds": rounds, "rows": rows,
            "wall": med, "cpu": cpu, "same_outputs": same}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="main", help="the earlier revision (git rev)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", type=int, default=1_000_000, help="Market-Bench book rows")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(a.rows)
        return
    r = run(a.base, a.rounds, a.rows)
    for k in r["wall"]["head"]:
        b, h = r["wall"]["base"][k], r["wall"]["head"][k]
        print(f"{k:18s} base {1e3 * b:8.1f} ms  head {1e3 * h:8.1f} ms  speed-up {b / h:5.2f}  "
              f"CPU {1e3 * r['cpu']['base'][k]:7.1f} -> {1e3 * r['cpu']['head'][k]:7.1f} ms  "
              f"same outputs: {'yes' if r['same_outputs'][k] else 'NO'}")
    if a.json:
        Path(a.json).write_text(json.dumps(r))


if __name__ == "__main__":
    main()
