"""An RL policy that reads PortBench through its point-in-time tools (docs/tools.md, "RL policies on the tool
interface").

    pip install torch --index-url https://download.pytorch.org/whl/cpu   # CPU-only machine: CPU torch first
    pip install -e '.[rl]'                                               # in a clone of quantgym
    python examples/rl_tools.py [TIMESTEPS]

1. Wrap the tool-mode env (stagewise=True, tools=True) in ToolUsingAllocation: a Box action either calls the
   next tool of a fixed menu (asset_stats over 20/60/120 days, macro_series, portfolio) or answers the stage
   with allocation logits; the observation is what this decision's tool calls returned.
2. Train PPO (stable-baselines3) for a few hundred steps on autumn 2019 (weekly decisions).
3. Evaluate it with quantgym.evaluation.evaluate on February-March 2020, the loop every policy runs in: its
   mean action, and its sampled actions (seeded, reproducible); print the scores and the tool calls per stage.
"""

from __future__ import annotations

import sys
from collections import Counter

import gymnasium as gym

import quantgym  # noqa: F401 - registers the env ids
from quantgym.envs.portbench.rl.tools import ToolPolicy, ToolUsingAllocation
from quantgym.evaluation import evaluate

ENV_ID = "PortBench-Balanced-v0"
TRAIN_PERIOD = {"start": "2019-09-02", "end": "2019-12-31", "freq": "weekly"}
EVAL_PERIOD = {"start": "2020-02-03", "end": "2020-03-31", "freq": "weekly"}


def main(timesteps: int = 256, seed: int = 0, verbose: bool = True) -> dict:
    """Train PPO on the tool interface and evaluate its mean action and its sampled actions (seeded):
    per evaluation, the result and its tool calls per stage and per tool."""
    try:
        import torch
        from stable_baselines3 import PPO
    except ModuleNotFoundError as exc:  # the 'rl' extra is missing: its install line, not a traceback
        from quantgym.envs.portbench.rl import EXTRA_HINT

        sys.exit(f"error: {EXTRA_HINT} ({exc.name} missing)")

    torch.set_num_threads(1)  # a small MLP: one thread is faster on a shared CPU, and the result is the same
    env = ToolUsingAllocation(gym.make(ENV_ID, period=TRAIN_PERIOD, stagewise=True, tools=True))
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=2, seed=seed, device="cpu",
                policy_kwargs={"net_arch": [64, 64]})
    model.learn(total_timesteps=timesteps)
    if verbose:
        print(f"PPO, {timesteps} steps on {TRAIN_PERIOD['start']}..{TRAIN_PERIOD['end']} (seed {seed}); evaluated "
              f"on {ENV_ID}, {EVAL_PERIOD['start']}..{EVAL_PERIOD['end']}:")
    out = {}
    for label, deterministic in (("mean action", True), ("sampled", False)):
        policy = ToolPolicy(model, name=f"PPO-tools ({label})", deterministic=deterministic, seed=seed)
        res = evaluate(ENV_ID, policy, seed=seed, period=EVAL_PERIOD)
        calls = [s for s in res.steps if "tool" in s]
        per_stage = Counter(s["stage"] for s in calls)
        per_tool = Counter(s["tool"]["tool"] for s in calls)
        out[label] = {"result": res, "per_stage": dict(per_stage), "per_tool": dict(per_tool)}
        if verbose:
            m = res.metrics
            print(f"{res.agent}: CEPS {res.ceps:.3f}, return {m['ret_pct']:+.2f}%, max drawdown "
                  f"{m['maxdd_pct']:.2f}%, tool calls {m['tool_calls']} (errors {m['tool_errors']})")
            print("  tool calls per stage: " + ", ".join(f"{k} {per_stage.get(k, 0)}" for k in ("S1", "S2", "S3")))
            print("  per tool: " + (", ".join(f"{k} {v}" for k, v in sorted(per_tool.items())) or "none"))
    return out

if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 256)
