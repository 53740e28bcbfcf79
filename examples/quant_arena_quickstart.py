"""Quant-Arena quick start: submit a strategy, read the feedback, freeze, read the sealed score.

Run: ``python examples/quant_arena_quickstart.py`` (about 10-20 s: two sandboxed evaluations
on the bundled 800-stock universe, research 2022-2023 and sealed 2024).
"""

import json
from pathlib import Path

import gymnasium as gym

import quantgym  # noqa: F401  (registers QuantArena-v0 and QuantArena-OneShot-v0)
from quantgym.envs.quant_arena.examples import example_source

MY_STRATEGY = '''
import numpy as np
import pandas as pd

FEATURES = ["vol_20d", "mom_60d"]

def compute_features(view):
    px = view.history("adj_close", 61)
    lr = np.log(px).diff().iloc[-20:]
    vol = lr.std(ddof=1, skipna=False)
    mom = px.iloc[-1] / px.iloc[0] - 1.0 if len(px) == 61 else pd.Series(np.nan, index=view.symbols)
    suspended = view.history("suspended", 1).iloc[-1] == 1.0
    vol[suspended] = np.nan
    return {"vol_20d": vol, "mom_60d": mom}

def score(features, view):
    # low volatility, tilted away from the strongest 60-day run-ups
    return -features["vol_20d"].rank(pct=True) - 0.3 * features["mom_60d"].rank(pct=True)
'''

env = gym.make("QuantArena-v0")  # records go to $QUANTGYM_RECORD_DIR or the system temp folder
brief, info = env.reset(seed=0)
print(brief[:600], "...\n")

for name, source in [("my strategy", MY_STRATEGY), ("low_volatility example", example_source("low_volatility"))]:
    obs, reward, terminated, truncated, info = env.step(source)
    fb = json.loads(obs)
    print(f"{name}: status={fb['status']} S_in={reward:.1f} window={fb['window']} errors={fb['n_errors']}")

# freeze the better research candidate; the sealed 2024 evaluation runs once
best = 1 + max(range(2), key=lambda i: env.unwrapped.candidates[i]["research"].S)
obs, S, terminated, truncated, final = env.step({"freeze": best})
print(f"\nfrozen candidate {best}: S = {final['S']:.1f} (S_in {final['S_in']:.1f}, S_out {final['S_out']:.1f})")
print("sealed 2024:", {k: final["sealed"][k] for k in ("arr", "excess_arr", "sharpe", "max_drawdown", "rankic_mean")})
print("record:", env.unwrapped.record_path)

# diagnostics PNG: NAV vs market, exposure over time, next-day return by score quintile
from quantgym.envs.quant_arena.plots import plot_run  # noqa: E402

sealed = env.unwrapped.sealed_result
out = Path("results") / "quant_arena_quickstart"  # never the repository root
out.mkdir(parents=True, exist_ok=True)
print("plot:", plot_run(sealed.daily, sealed.metrics, out / "quant_arena_sealed_2024.png", "frozen candidate, 2024"))
