"""Sweep timings: the 72-run paper grid on the local pool and on a local Ray; resume cost.

Usage: ``python benchmarks/bench_sweep.py [--out /tmp/bench_sweep]``. Prints one line per measurement
(wall seconds, from time.perf_counter). Needs the ``distributed`` extra for the Ray lines.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/bench_sweep")
    ap.add_argument("--grid", default=str(Path(__file__).resolve().parents[1] / "examples" / "sweep_paper_grid.yaml"))
    args = ap.parse_args()
    from quantgym.envs.portbench.data import load_portbench_data
    from quantgym.sweep import load_grid, run_sweep

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    grid = load_grid(args.grid)
    n = len(grid.expand())
    t = time.perf_counter()
    data = load_portbench_data()
    print(f"load PortBench data: {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    o = run_sweep(grid, out / "local", backend="local", data=data)
    print(f"local pool ({o.backend_info['workers']} workers), {n} runs: {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    o = run_sweep(grid, out / "local", backend="local", data=data)
    print(f"resume, all {len(o.skipped)} runs finished: {time.perf_counter() - t:.2f} s")
    try:
        import ray
    except ImportError:
        print("ray not installed: Ray lines skipped")
        return
    t = time.perf_counter()
    ray.init(num_cpus=None, include_dashboard=False, log_to_driver=False)
    print(f"ray.init (local Ray, {ray.cluster_resources().get('CPU'):.0f} CPUs): {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    o = run_sweep(grid, out / "ray", backend="ray", data=data)
    print(f"ray backend, {n} runs (cold workers): {time.perf_counter() - t:.2f} s")
    shutil.rmtree(out / "ray")
    t = time.perf_counter()
    o = run_sweep(grid, out / "ray", backend="ray", data=data)
    print(f"ray backend, {n} runs (warm workers): {time.perf_counter() - t:.2f} s")
    ray.shutdown()
    same = (out / "local" / "summary.csv").read_bytes() == (out / "ray" / "summary.csv").read_bytes()
    diff = 0
    for f in (out / "local" / "runs").glob("*.json"):
        a, b = json.loads(f.read_text()), json.loads((out / "ray" / "runs" / f.name).read_text())
        a.pop("timing"), b.pop("timing")
        diff += a != b
    print(f"local vs ray: summary.csv identical={same}, run records differing={diff}")


if __name__ == "__main__":
    main()
