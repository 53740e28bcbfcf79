"""Timing of the PortBench data layer (same-machine figures only; see docs/performance.md).

    python benchmarks/bench_data_portbench.py

Measures: cold load of the bundled data (parquet read + every clean-mode rule), a cached
load, ``PortBenchData.from_frames`` alone, ``availability_matrix`` over all days, and
``available_mask`` per call. Best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse

import pandas as pd

from _common import best_time
from quantgym.envs.portbench import availability as av
from quantgym.envs.portbench import data as pb
from quantgym.envs.portbench.raw import bundled_portbench_path
from quantgym.envs.portbench.universe import CANONICAL_TICKERS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    def cold():
        pb._load_cached.cache_clear()
        pb.load_portbench_data()

    root = bundled_portbench_path()
    raw = pd.read_parquet(root / "prices.parquet")
    assets = pd.read_csv(root / "assets.csv")
    macro = pd.read_parquet(root / "macro.parquet")
    classes = dict(zip(assets.ticker, assets.asset_class))
    data = pb.load_portbench_data()
    t = data.index_at("2024-06-28")
    n_calls = 1000
    rows = [
        ("cold load_portbench_data() [bundled]", best_time(cold, args.repeat)),
        ("cached load_portbench_data()", best_time(pb.load_portbench_data, args.repeat)),
        ("from_frames (80 tickers, 15 FRED + VIX)", best_time(lambda: pb.PortBenchData.from_frames(
            raw, classes, macro=macro, tickers=CANONICAL_TICKERS), args.repeat)),
        ("availability_matrix (3018 x 80)", best_time(lambda: av.availability_matrix(data), args.repeat)),
        (f"available_mask x{n_calls}", best_time(lambda: [av.available_mask(data, t) for _ in range(n_calls)], args.repeat)),
    ]
    for name, sec in rows:
        print(f"{name:45s} {sec * 1e3:9.2f} ms")


if __name__ == "__main__":
    main()
