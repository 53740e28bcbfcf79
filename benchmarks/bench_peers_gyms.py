"""Step throughput of peer trading gyms, measured in the separate benchmark venv.

Runs inside ``benchmarks/.venv-peers`` (it does not import quantgym) and prints one JSON object.
``bench_portbench_steps.py`` calls it in the same run and reports the ratios; run it alone with::

    benchmarks/.venv-peers/bin/python benchmarks/bench_peers_gyms.py --prices PRICES.csv

Setup of the venv (the real packages from PyPI, nothing reimplemented), or ``python
benchmarks/bench_peers_gyms.py --setup`` which runs exactly these commands::

    python -m venv benchmarks/.venv-peers
    benchmarks/.venv-peers/bin/pip install torch==2.13.0   # CPU build, before anything pulls torch
    benchmarks/.venv-peers/bin/pip install gym-anytrading vectorbt finrl stable-baselines3 alpaca-trade-api \
        exchange-calendars stockstats wrds yfinance   # FinRL 0.3.7 declares no dependencies; these are the
                                                      # modules its package __init__ imports

Versions measured on 2026-11-29: gym-anytrading 2.0.0, FinRL 0.3.7, vectorbt 1.2.0, gymnasium 1.4.0,
numpy 2.4.6, pandas 2.2.3, numba 0.68.1, stockstats 0.6.10, stable-baselines3 2.9.2, torch 2.13.0+cpu.
A venv created on 2026-12-04 by ``--setup`` resolved pandas 3.1.1 (with wrds 3.1.6); ``python
benchmarks/run_all.py`` writes the versions of each run beside its figures in docs/performance.md.

Measured with the loop of ``gymnasium.utils.performance.benchmark_step`` (``_common.step_rates``: fixed seed;
the env's action space is replaced by a replay of pre-generated actions, so sampling costs the same for every
env), by wall clock (``steps_per_s``) and by the process's CPU time (``cpu_steps_per_s``), with the 1-minute
load average (``load``):

- gym-anytrading ``stocks-v0`` (its bundled STOCKS_GOOGL data, default window 30);
- ``gymnasium.vector.SyncVectorEnv`` of 8 ``stocks-v0`` (env-steps/s, a hand loop like quantgym's
  vector-env measurement);
- FinRL ``StockTradingEnv`` on the given close prices (30 tickers × ~2,000 days; FinRL's own
  ``FeatureEngineer`` adds its default ``INDICATORS``; open = high = low = close, volume 1e6, as the
  price file holds closes only).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
import warnings

import os
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import step_rates  # noqa: E402 - stdlib only, runs in the peers venv


class ReplayActions(gym.spaces.Space):
    """An action space whose ``sample()`` replays pre-generated actions (cycling)."""

    def __init__(self, base: gym.spaces.Space, actions: list):
        super().__init__(base.shape, base.dtype)
        self.base, self.actions, self.i = base, actions, 0

    def sample(self, mask=None, probability=None):
        a = self.actions[self.i % len(self.actions)]
        self.i += 1
        return a

    def contains(self, x) -> bool:
        return self.base.contains(x)


def pregenerate(space: gym.spaces.Space, n: int, seed: int) -> list:
    space.seed(seed)
    return [space.sample() for _ in range(n)]


def run(env: gym.Env, duration: float, seed: int, n_actions: int = 1024) -> dict:
    """``{"steps_per_s": wall rate, "cpu_steps_per_s": CPU-time rate, "load": 1-min load average}``."""
    env.action_space = ReplayActions(env.action_space, pregenerate(env.action_space, n_actions, seed))
    with contextlib.redirect_stdout(io.StringIO()):  # FinRL prints a summary at episode ends
        r = step_rates(env, duration, seed)
    return {"steps_per_s": r["wall"], "cpu_steps_per_s": r["cpu"], "load": r["load"]}


def finrl_env(prices_csv: str):
    from finrl.config import INDICATORS
    from finrl.meta.env_stock_trading.env_stocktrading import StockTradingEnv
    from finrl.meta.preprocessor.preprocessors import FeatureEngineer

    wide = pd.read_csv(prices_csv, index_col=0, parse_dates=True)
    long = wide.stack().rename("close").reset_index()
    long.columns = ["date", "tic", "close"]
    long["open"] = long["high"] = long["low"] = long["close"]
    long["volume"] = 1e6
    long["date"] = long["date"].dt.strftime("%Y-%m-%d")
    long = long.sort_values(["date", "tic"], ignore_index=True)
    with contextlib.redirect_stdout(io.StringIO()):
        fe = FeatureEngineer(use_technical_indicator=True, tech_indicator_list=INDICATORS, use_vix=False,
                             use_turbulence=False, user_defined_feature=False)
        df = fe.preprocess_data(long)
    df = df.sort_values(["date", "tic"], ignore_index=True)
    df.index = df["date"].factorize()[0]
    n = df["tic"].nunique()
    state = 1 + 2 * n + len(INDICATORS) * n
    env = StockTradingEnv(df=df, stock_dim=n, hmax=100, initial_amount=1_000_000, num_stock_shares=[0] * n,
                          buy_cost_pct=[0.001] * n, sell_cost_pct=[0.001] * n, reward_scaling=1e-4,
                          state_space=state, action_space=n, tech_indicator_list=INDICATORS,
                          print_verbosity=10**9)
    return env, {"tickers": n, "days": int(df.index.max() + 1), "indicators": list(INDICATORS)}


def sync_vector(duration: float, seed: int, n: int = 8) -> dict:
    """Env-steps/s of ``gymnasium.vector.SyncVectorEnv`` over ``n`` gym-anytrading ``stocks-v0`` (autoreset),
    the same hand loop as quantgym's vector-env measurement (pre-generated batched actions)."""
    import gym_anytrading  # noqa: F401

    venv = gym.vector.SyncVectorEnv([lambda: gym.make("stocks-v0") for _ in range(n)])
    rng = np.random.default_rng(seed)
    acts = [rng.integers(0, 2, n) for _ in range(256)]
    venv.reset(seed=seed)
    for act in acts[:50]:
        venv.step(act)
    steps, i = 0, 0
    t0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 <= duration:
        venv.step(acts[i % len(acts)])
        i += 1
        steps += n
    rate = {"steps_per_s": steps / (time.perf_counter() - t0), "cpu_steps_per_s": steps / (time.process_time() - c0),
            "load": os.getloadavg()[0]}
    venv.close()
    return rate


SETUP = [
    ["-m", "venv", "{venv}"],
    ["{pip}", "install", "torch==2.13.0"],
    ["{pip}", "install", "gym-anytrading", "vectorbt", "finrl", "stable-baselines3", "alpaca-trade-api",
     "exchange-calendars", "stockstats", "wrds", "yfinance"],
]


def setup(venv: str) -> None:
    """Create the peers venv with the documented commands (run with the main interpreter)."""
    import subprocess
    from pathlib import Path

    pip = str(Path(venv) / "bin" / "pip")
    for cmd in SETUP:
        args = [a.format(venv=venv, pip=pip) for a in cmd]
        if args[0] == "-m":
            args = [sys.executable, *args]
        print("+", " ".join(args), flush=True)
        subprocess.run(args, check=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setup", action="store_true", help="create benchmarks/.venv-peers and exit")
    ap.add_argument("--prices", help="CSV of close prices (dates × tickers) for FinRL")
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per benchmark_step run")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.setup:
        from pathlib import Path

        setup(str(Path(__file__).resolve().parent / ".venv-peers"))
        return
    if not a.prices:
        ap.error("--prices is required (bench_portbench_steps.py writes it)")
    warnings.filterwarnings("ignore")  # passive-checker notes of the peers' envs; timings are unaffected
    out: dict = {"python": sys.version.split()[0], "results": {}, "errors": {}}
    try:
        import gym_anytrading  # noqa: F401 - registers stocks-v0

        env = gym.make("stocks-v0")
        run(env, 0.3, a.seed)  # warm-up
        out["results"]["gym-anytrading stocks-v0"] = {
            **run(gym.make("stocks-v0"), a.duration, a.seed),
            "version": __import__("importlib.metadata").metadata.version("gym-anytrading"),
            "notes": "bundled STOCKS_GOOGL, window 30, Discrete(2) actions"}
    except Exception as exc:  # noqa: BLE001 - report, do not substitute
        out["errors"]["gym-anytrading stocks-v0"] = f"{type(exc).__name__}: {exc}"
    try:
        out["results"]["SyncVectorEnv(stocks-v0 x8)"] = {
            **sync_vector(a.duration, a.seed),
            "version": __import__("importlib.metadata").metadata.version("gym-anytrading"),
            "notes": "gymnasium SyncVectorEnv of 8 stocks-v0, env-steps/s (batch steps x 8)"}
    except Exception as exc:  # noqa: BLE001
        out["errors"]["SyncVectorEnv(stocks-v0 x8)"] = f"{type(exc).__name__}: {exc}"
    try:
        t0 = time.perf_counter()
        env, info = finrl_env(a.prices)
        info["setup_s"] = time.perf_counter() - t0
        run(env, 0.3, a.seed)
        env2, _ = finrl_env(a.prices)
        out["results"]["FinRL StockTradingEnv"] = {
            **run(env2, a.duration, a.seed),
            "version": __import__("importlib.metadata").metadata.version("finrl"),
            "notes": f"{info['tickers']} tickers x {info['days']} days, {len(info['indicators'])} indicators", **info}
    except Exception as exc:  # noqa: BLE001
        out["errors"]["FinRL StockTradingEnv"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(out))


if __name__ == "__main__":
    main()
