"""Run Quant-Arena on your own daily panel (same parquet schema as the bundled data).

The panel is a long table with columns ``date, symbol, open, high, low, close, volume,
adj_factor, suspended, in_csi300`` (prices raw, volume in shares, ``adj_factor`` a backward
cumulative factor). Here we cut a small real slice of the bundled data and evaluate one
example on custom windows, with costs and impact switched off for comparison.

Run: ``python examples/quant_arena_own_panel.py``.
"""

import pandas as pd

from quantgym.envs.quant_arena.executor import evaluate_submission
from quantgym.envs.quant_arena.config import ArenaConfig, ArenaCostModel, ImpactModel
from quantgym.envs.quant_arena.data import BUNDLED_DIR, ArenaDataset, load_dataset
from quantgym.envs.quant_arena.env import QuantArenaEnv
from quantgym.envs.quant_arena.examples import example_source

panel = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet")
panel = panel[(panel["date"] >= pd.Timestamp("2023-01-01").date())]          # any panel in this schema
ds = ArenaDataset.from_frame(panel, info=load_dataset().info.reset_index(), name="my-panel")
# (or: load_dataset("path/to/daily.parquet") / a qlib-format folder)

windows = dict(research_start="2023-07-01", research_end="2023-12-31", sealed_start="2024-01-01",
               sealed_end="2024-06-30")
env = QuantArenaEnv(data=ds, **windows, record_dir=False)
env.reset(seed=0)
obs, r, *_ = env.step(example_source("momentum_20d"))
print("research feedback:", obs)
_, S, _, _, final = env.step({"freeze": None})
print(f"S = {S:.1f}; sealed ARR {final['sealed']['arr']:.3f}")

free = evaluate_submission(example_source("momentum_20d"), ds.truncate("2024-06-30"), "2024-01-01", "2024-06-30",
                           ArenaConfig(cost=ArenaCostModel.off(), impact=ImpactModel.off()))
print(f"cost-free, impact-free ARR {free.metrics['arr']:.3f} vs {final['sealed']['arr']:.3f} with costs")
