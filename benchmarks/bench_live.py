"""Timing of the PortBench live runner (same-machine figures only; see docs/performance.md).

    python benchmarks/bench_live.py [--repeat 3] [--days 12]

Measures, on the bundled data with ``as_of=2025-12-31`` and plots off (best of ``--repeat``):
a fresh 12-day live run of the Equal-Weight baseline and of a deterministic stagewise array agent
(S1→S2→S3 with full scoring), the idempotent re-run of the latter (replay of 12 journalled
decisions, nothing new), and ``check_data_dir`` on the bundle (the refresh's extra validation).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

import numpy as np

from _common import best_time
from quantgym.envs.portbench.raw import bundled_portbench_path
from quantgym.envs.portbench.live.data import check_data_dir
from quantgym.envs.portbench.live.runner import run_live


class Momentum:
    """Stagewise array agent: trailing-return views, ±0.2 signals, inverse-vol weights on buys."""

    name = "BenchMomentum"
    env_kwargs = {"stagewise": True}

    def act(self, obs, info):
        avail = np.asarray(obs["available"], bool)
        views = np.where(avail, np.clip(np.asarray(obs["trailing_return"]) / 0.1, -1, 1), 0.0)
        pv = np.asarray(obs["prev_views"])
        signals = np.where(pv > 0.2, 2, np.where(pv < -0.2, 0, 1))
        buys = avail & (np.asarray(obs["prev_signals"]) == 2)
        w = np.where(buys, 1.0 / np.maximum(np.asarray(obs["ann_vol"]), 1e-3), 0.0) if buys.any() else avail * 1.0
        return {"views": views, "signals": signals, "weights": w / w.sum(), "status": 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--days", type=int, default=12)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-live-")
    run_live("equal_weight", os.path.join(tmp, "warm"), days=2, as_of="2025-12-31", plots=False)  # load caches

    def fresh(agent):
        def go():
            d = os.path.join(tmp, "fresh")
            shutil.rmtree(d, ignore_errors=True)
            run_live(agent, d, days=args.days, as_of="2025-12-31", plots=False)
        return go

    t_ew = best_time(fresh("equal_weight"), args.repeat)
    t_mo = best_time(fresh(Momentum()), args.repeat)
    keep = os.path.join(tmp, "keep")
    run_live(Momentum(), keep, days=args.days, as_of="2025-12-31", plots=False)
    t_replay = best_time(lambda: run_live(Momentum(), keep, as_of="2025-12-31", plots=False), args.repeat)
    t_check = best_time(lambda: check_data_dir(str(bundled_portbench_path()), since="2025-01-01"), args.repeat)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average: {os.getloadavg()[0]:.1f}")
    print(f"fresh {args.days}-day live run, Equal-Weight baseline: {t_ew * 1e3:.0f} ms")
    print(f"fresh {args.days}-day live run, stagewise agent (scored): {t_mo * 1e3:.0f} ms "
          f"({t_mo / args.days * 1e3:.0f} ms per decision incl. journal fsync)")
    print(f"idempotent re-run (replay of {args.days} decisions): {t_replay * 1e3:.0f} ms")
    print(f"check_data_dir (bundle, 2025 window): {t_check * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
