"""PortBench step throughput (N = 80) beside gym-anytrading and FinRL, in one run (issue 6).

Prints a table and appends it, with the command, to docs/performance.md (``--no-append`` to skip).

    python benchmarks/bench_portbench_steps.py [--duration 3] [--no-append]

Measurements (bundled real data, 80 assets, seed 0, pre-generated actions; single envs through
``gymnasium.utils.performance.benchmark_step`` with the action space replaced by a replay of the
pre-generated actions; vector envs with the same loop by hand, counting env-steps):

- allocation mode, raw ``PortBenchEnv(scoring=False)`` (no gym.make wrappers), daily decisions
  2016–2023 (one step = one trading day), warm per-dataset caches;
- the same via ``gym.make`` (PassiveEnvChecker + OrderEnforcing), and with ``AllocationWrapper``;
- stagewise mode (S1 → S2 → S3 sub-steps with the text prompt, full scoring), sub-steps/s;
- a full S1–S5 scored allocation step with the 60-day max-Sharpe oracle on the four bench
  periods: cold (first visit of each decision row: snapshot, SLSQP oracle, scoring) and warm
  (row cache hit), ms per step;
- vector envs: ``gym.make_vec(..., "sync")`` (Dict spaces, scoring off) and the batched
  ``vector_entry_point`` (:class:`PortBenchVectorEnv`), 1 and 8 envs (64 for reference);
- gym-anytrading ``stocks-v0`` and FinRL ``StockTradingEnv`` (30 tickers × 2,012 days of the same
  bundled prices), via ``bench_peers_gyms.py`` in ``benchmarks/.venv-peers`` (create it once with
  ``python benchmarks/bench_peers_gyms.py --setup``); reported as the ratio
  quantgym / peer.

``--json PATH`` (for a driver such as ``benchmarks/run_all.py``) writes ``{"results": {key: rate}, "scored_ms":
{"cold": [...], "warm": [...]}, "peers": {"results": {name: {"steps_per_s", "version", "notes"}}, "errors":
{...}}, "versions": {"gymnasium", "numpy"}}`` with the rate keys ``raw``, ``gym.make``, ``alloc_wrapper``,
``stagewise`` (steps/s or sub-steps/s), ``sync1``, ``sync8``, ``vec1``, ``vec8``, ``vec64`` (env-steps/s) and
``cold_episode_s`` (seconds); ``scored_ms`` holds the per-step times (ms) of the scored bench periods. The
before/after comparison of a change is ``bench_portbench_ab.py``; the scaling in N is
``bench_portbench_scaling.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium.utils.performance import benchmark_step

import quantgym  # noqa: F401 - registers the ids
from quantgym.envs.portbench.env import PortBenchEnv
from quantgym.envs.portbench.allocation import AllocationWrapper
from _common import print_table

ROOT = Path(__file__).resolve().parents[1]
PEERS_PY = ROOT / "benchmarks" / ".venv-peers" / "bin" / "python"
ENV_ID = "PortBench-Balanced-v0"
DAILY = {"start": "2016-01-01", "end": "2023-12-31", "freq": "daily"}
BENCH_PERIODS = ("normal_2024", "china_2015", "covid_2020", "crypto_2022")


class ReplayActions(gym.spaces.Space):
    """An action space whose ``sample()`` replays pre-generated actions (cycling)."""

    def __init__(self, base: gym.spaces.Space, actions: list):
        super().__init__(None, None)
        self.base, self.actions, self.i = base, actions, 0

    def sample(self, mask=None, probability=None):
        a = self.actions[self.i % len(self.actions)]
        self.i += 1
        return a

    def contains(self, x) -> bool:
        return self.base.contains(x)


def dict_actions(n_assets: int, k: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"views": rng.uniform(-1, 1, n_assets), "signals": rng.integers(0, 3, n_assets),
             "weights": rng.uniform(0, 1, n_assets), "status": 0} for _ in range(k)]


def box_actions(n_assets: int, k: int, seed: int, batch: int | None = None) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (n_assets,) if batch is None else (batch, n_assets)
    return [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(k)]


def bench_single(env: gym.Env, actions: list, duration: float, seed: int) -> float:
    env.action_space = ReplayActions(env.action_space, actions)
    return benchmark_step(env, target_duration=duration, seed=seed)


def warm(env: gym.Env, actions: list, seed: int) -> None:
    """One full episode so every decision row of the period is in the per-dataset cache."""
    env.reset(seed=seed)
    i, done = 0, False
    while not done:
        _, _, done, _, _ = env.step(actions[i % len(actions)])
        i += 1


def bench_vector(venv, actions: list, duration: float, seed: int) -> float:
    venv.reset(seed=seed)
    for a in actions[:50]:
        venv.step(a)
    steps, i = 0, 0
    t0 = time.perf_counter()
    while True:
        venv.step(actions[i % len(actions)])
        i += 1
        steps += venv.num_envs
        if time.perf_counter() - t0 > duration:
            break
    return steps / (time.perf_counter() - t0)


def scored_step_times(seed: int, blas_default: bool = False) -> dict[str, list[float]]:
    """ms per full S1–S5 scored allocation step on the bench periods: cold (fresh caches) and warm.

    ``blas_default=True`` measures the cold steps without the single-threaded BLAS context of
    :func:`quantgym.envs.portbench.optimize._single_thread_blas` (the behaviour before issue 6).
    """
    import contextlib

    from quantgym.envs.portbench import env as env_mod
    from quantgym.envs.portbench import market, optimize

    market._SHARED.clear()
    saved = (optimize._single_thread_blas, env_mod._single_thread_blas)
    if blas_default:
        optimize._single_thread_blas = env_mod._single_thread_blas = contextlib.nullcontext
    out = {"cold": [], "warm": []}
    try:
        return _scored(seed, out, ("cold",) if blas_default else ("cold", "warm"))
    finally:
        optimize._single_thread_blas, env_mod._single_thread_blas = saved
        market._SHARED.clear()


def _scored(seed: int, out: dict, kinds: tuple[str, ...]) -> dict[str, list[float]]:
    for kind in kinds:
        for per in BENCH_PERIODS:
            env = PortBenchEnv(profile="balanced", period=per, scoring=True)
            acts = dict_actions(env.n_assets, 64, seed)
            env.reset(seed=seed)
            done, i = False, 0
            while not done:
                t0 = time.perf_counter()
                _, _, done, _, _ = env.step(acts[i % 64])
                out[kind].append(1e3 * (time.perf_counter() - t0))
                i += 1
    return out


def peers(duration: float, seed: int) -> dict:
    if not PEERS_PY.exists():
        return {"results": {}, "errors": {"peers venv": f"{PEERS_PY} not found (see bench_peers_gyms.py)"}}
    from quantgym.envs.portbench.data import load_portbench_data

    d = load_portbench_data()
    px = d.frame("prices").loc["2016-01-01":"2023-12-31"]
    tick = [t for t in d.tickers if px[t].notna().all()][:30]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prices30.csv"
        px[tick].to_csv(path)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.run([str(PEERS_PY), str(ROOT / "benchmarks" / "bench_peers_gyms.py"), "--prices", str(path),
                               "--duration", str(duration), "--seed", str(seed)], capture_output=True, text=True,
                              env=env, timeout=900)
    if proc.returncode != 0:
        return {"results": {}, "errors": {"peers": proc.stderr.strip().splitlines()[-1:]}}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per throughput measurement")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-append", action="store_true", help="do not append to docs/performance.md")
    ap.add_argument("--no-peers", action="store_true", help="skip gym-anytrading / FinRL")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH (benchmarks/run_all.py)")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    dur, seed = a.duration, a.seed
    rows: list[tuple[str, str, str]] = []  # (measurement, value, note)
    res: dict[str, float] = {}

    raw = PortBenchEnv(profile="balanced", period=DAILY, scoring=False)
    acts = dict_actions(raw.n_assets, 1024, seed)
    t0 = time.perf_counter()
    warm(raw, acts, seed)
    res["cold_episode_s"] = time.perf_counter() - t0
    res["raw"] = bench_single(raw, acts, dur, seed)
    made = gym.make(ENV_ID, period=DAILY, scoring=False)
    res["gym.make"] = bench_single(made, acts, dur, seed)
    alloc = AllocationWrapper(gym.make(ENV_ID, period=DAILY, scoring=False), reward="log_return")
    res["alloc_wrapper"] = bench_single(alloc, box_actions(80, 1024, seed), dur, seed)
    stg = gym.make(ENV_ID, period="normal_2024", stagewise=True)
    warm(stg, dict_actions(80, 64, seed), seed)
    res["stagewise"] = bench_single(stg, dict_actions(80, 1024, seed), dur, seed)
    times_default = scored_step_times(seed, blas_default=True)
    times = scored_step_times(seed)
    for n in (1, 8):
        sync = gym.make_vec(ENV_ID, num_envs=n, vectorization_mode="sync", period=DAILY, scoring=False)
        batched = [_stack(x) for x in zip(*[dict_actions(80, 256, seed + i) for i in range(n)])]
        res[f"sync{n}"] = bench_vector(sync, batched, dur, seed)
        sync.close()
    for n in (1, 8, 64):
        vec = gym.make_vec(ENV_ID, num_envs=n, vectorization_mode="vector_entry_point", train_windows=[
            ("2016-01-01", "2023-12-31")], freq="daily", episode_len=252)
        res[f"vec{n}"] = bench_vector(vec, box_actions(80, 256, seed, batch=n), dur, seed)
    peer = {"results": {}, "errors": {"peers": "skipped (--no-peers)"}} if a.no_peers else peers(dur, seed)

    cold, warm_ = np.array(times["cold"]), np.array(times["warm"])
    rows += [
        ("allocation, raw PortBenchEnv (scoring off)", f"{res['raw']:,.0f} steps/s", "daily decisions 2016-2023, warm"),
        ("allocation, gym.make (scoring off)", f"{res['gym.make']:,.0f} steps/s", "+ PassiveEnvChecker, OrderEnforcing"),
        ("allocation, AllocationWrapper (Box)", f"{res['alloc_wrapper']:,.0f} steps/s", "gym.make + Box obs/action"),
        ("stagewise (S1/S2/S3 sub-steps, prompts, scoring)", f"{res['stagewise']:,.0f} sub-steps/s", "normal_2024"),
        ("full S1-S5 scored step, cold", _stats(times["cold"]), f"{cold.size} steps, 4 bench periods, incl. "
         "60-day max-Sharpe oracle (exact NNLS), single-threaded BLAS"),
        ("full S1-S5 scored step, cold, multi-threaded BLAS", _stats(times_default["cold"]),
         "same, without the single-threaded BLAS context (behaviour before issue 6)"),
        ("full S1-S5 scored step, warm (row cache)", f"mean {warm_.mean():.2f} ms, p95 {np.percentile(warm_, 95):.2f}",
         "oracle and snapshot cached per dataset"),
        ("make_vec sync, 1 env (Dict, scoring off)", f"{res['sync1']:,.0f} env-steps/s", ""),
        ("make_vec sync, 8 envs (Dict, scoring off)", f"{res['sync8']:,.0f} env-steps/s", ""),
        ("vector_entry_point (batched numpy), 1 env", f"{res['vec1']:,.0f} env-steps/s", "Box spaces, no scoring"),
        ("vector_entry_point (batched numpy), 8 envs", f"{res['vec8']:,.0f} env-steps/s", ""),
        ("vector_entry_point (batched numpy), 64 envs", f"{res['vec64']:,.0f} env-steps/s", "reference"),
    ]
    for name, r in peer.get("results", {}).items():
        rows.append((f"{name} ({r['version']})", f"{r['steps_per_s']:,.0f} steps/s", r["notes"]))
    for name, r in peer.get("results", {}).items():
        rows.append((f"ratio raw PortBench / {name}", f"{res['raw'] / r['steps_per_s']:.3g}",
                     f"gym.make: {res['gym.make'] / r['steps_per_s']:.3g}; batched 8 envs: "
                     f"{res['vec8'] / r['steps_per_s']:.3g}"))
    for name, err in peer.get("errors", {}).items():
        rows.append((name, "not measured", str(err)))

    print_table("PortBench step throughput (N = 80)", rows)
    if a.json:
        Path(a.json).write_text(json.dumps({"results": res, "scored_ms": times, "peers": peer,
                                            "versions": {"gymnasium": gym.__version__, "numpy": np.__version__}}))

    if not a.no_append:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        cmd = "python benchmarks/bench_portbench_steps.py" + "".join(f" {x}" for x in (argv or sys.argv[1:]))
        lines = [
            "", f"## PortBench step throughput vs gym-anytrading and FinRL ({time.strftime('%Y-%m-%d')})", "",
            f"Command: `{cmd}` ({dur:g} s per throughput measurement, seed {seed}, pre-generated actions,",
            f"`gymnasium.utils.performance.benchmark_step` for single envs). Python {platform.python_version()}, "
            f"numpy {np.__version__}, gymnasium {gym.__version__}; this 2-core machine shared with other jobs "
            f"(1-min load average {load:.1f} at the end of the run). First (cold) pass over the 2016-2023 daily "
            f"rows: {res['cold_episode_s']:.1f} s.", "",
            "| measurement | result | note |", "|---|---|---|",
            *[f"| {m} | {v} | {n} |" for m, v, n in rows], "",
        ]
        with (ROOT / "docs" / "performance.md").open("a") as fh:
            fh.write("\n".join(lines) + "\n")
        print("appended to docs/performance.md")


def _stats(ms: list[float]) -> str:
    t = np.asarray(ms)
    return f"mean {t.mean():.1f} ms, p50 {np.median(t):.1f}, p95 {np.percentile(t, 95):.1f}, max {t.max():.1f}"


def _stack(acts: tuple[dict, ...]) -> dict:
    return {k: (np.stack([a[k] for a in acts]) if k != "status" else np.zeros(len(acts), np.int64))
            for k in acts[0]}


if __name__ == "__main__":
    main()
