"""Train PPO on PortBench, evaluate it like the baselines, and look inside one episode.

    pip install torch --index-url https://download.pytorch.org/whl/cpu   # CPU-only machine: CPU torch first
    pip install -e '.[rl]'                                               # in a clone of quantgym
    python examples/train_ppo_portbench.py [TIMESTEPS]

1. Train PPO (stable-baselines3) on random half-year weekly episodes of 2016-2023 with the four
   bench periods cut out (normal_2024 and the three stress windows never seen in training).
2. Evaluate with quantgym.evaluation.evaluate on normal_2024 and the stress windows (full S1-S5
   scoring; S1/S2 answers derived from the weights), beside the Equal-Weight baseline.
3. Replay normal_2024 with RecordEpisode to get NAV, weights and stage scores per step.

The same from the shell: quantgym train --algo ppo --timesteps 20000 --seed 0 --out results/ppo
and then:               quantgym bench --tasks portbench --agent sb3:results/ppo
"""

import sys

import gymnasium as gym

import quantgym  # noqa: F401 - registers the env ids
from quantgym._util import MissingExtraError
from quantgym.evaluation import evaluate
from quantgym.agents.registry import make_agent
from quantgym.envs.portbench.rl import train_sb3
from quantgym.envs.portbench.recording import RecordEpisode

timesteps = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
try:
    res = train_sb3("ppo", "PortBench-Balanced-v0", timesteps=timesteps, seed=0, out_dir="results/example-ppo",
                    reward="log_return")
except MissingExtraError as exc:  # the 'rl' extra is missing: its install line, not a traceback
    sys.exit(f"error: {exc}")
print(f"trained {timesteps} steps in {res['train_seconds']:.1f} s on windows {res['windows']}")

ew = make_agent("equal_weight")
print(f"{'period':<12} {'agent':<13} {'Sharpe':>7} {'Ret%':>7} {'MaxDD%':>7} {'CEPS':>6}")
for r in res["results"]:
    b = evaluate("PortBench-Balanced-v0", ew, period=r.period)
    for x in (r, b):
        ceps = "" if x.ceps is None else f"{x.ceps:.3f}"
        print(f"{x.period:<12} {x.agent:<13} {x.metrics['sharpe']:>7.3f} {x.metrics['ret_pct']:>7.2f} "
              f"{x.metrics['maxdd_pct']:>7.2f} {ceps:>6}")

# the saved model is an ordinary agent spec: sb3:DIR
agent = make_agent(f"sb3:{res['out_dir']}")
env = RecordEpisode(agent.wrap_env(gym.make("PortBench-Balanced-v0", period="normal_2024", scoring=True)))
obs, info = env.reset(seed=0)
done = False
while not done:
    obs, reward, done, _, info = env.step(agent.act(obs, info))
df = env.to_dataframe()
top = df.filter(like="w_").iloc[-1].sort_values(ascending=False).head(5)
cols = ["nav", "ceps", "S1", "S2", "S3", "S4", "S5", "turnover"]
print(df[["date"]].join(df[cols].round(4)).to_string(index=False))
print("largest weights at the last rebalance:", {k[2:]: round(v, 4) for k, v in top.items()})
