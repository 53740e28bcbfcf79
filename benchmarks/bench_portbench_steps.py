"""PortBench step throughput (N = 80) beside gym-anytrading and FinRL, in one run.

Prints a table and appends it, with the command, to docs/performance.md (``--no-append`` to skip).

    python benchmarks/bench_portbench_steps.py [--duration 3] [--no-append]
    python benchmarks/bench_portbench_steps.py --stagewise-only [--text] [--baseline REV --rounds 5]

Measurements (bundled real data, 80 assets, seed 0, pre-generated actions; single envs through
``gymnasium.utils.performance.benchmark_step`` with the action space replaced by a replay of the
pre-generated actions; vector envs with the same loop by hand, counting env-steps):

- allocation mode, raw ``PortBenchEnv(scoring=False)`` (no gym.make wrappers), daily decisions
  2016–2023 (one step = one trading day), warm per-dataset caches; the same steps with
  ``scoring=True`` (S1–S5, CEPS and PAS every step);
- the same via ``gym.make`` (PassiveEnvChecker + OrderEnforcing), and with ``AllocationWrapper``;
- stagewise mode (S1 → S2 → S3 sub-steps with the text prompt, full scoring), sub-steps/s, and
  ms per decision (the three sub-steps of one decision date, median over decisions; wall and CPU);
  ``--text``: the answers are JSON text through ``TextStageAction`` (parse + coerce per sub-step);
  ``--stagewise-only --baseline REV`` measures only these two, alternately on the code of git revision
  ``REV`` (``git archive`` of ``quantgym/``) and on this checkout, each run in a fresh process;
- a full S1–S5 scored allocation step with the 60-day max-Sharpe oracle on the four bench
  periods: cold (first visit of each decision row: snapshot, SLSQP oracle, scoring) and warm
  (row cache hit), ms per step;
- vector envs: ``gym.make_vec(..., "sync")`` (Dict spaces, scoring off) and the batched
  ``vector_entry_point`` (:class:`PortBenchVectorEnv`), 1 and 8 envs (64 for reference);
- gym-anytrading ``stocks-v0`` and FinRL ``StockTradingEnv`` (30 tickers × 2,012 days of the same
  bundled prices), via ``bench_peers_gyms.py`` in ``benchmarks/.venv-peers`` (create it once with
  ``python benchmarks/bench_peers_gyms.py --setup``); reported as the ratio
  quantgym / peer.

Every rate is measured by wall clock and by the process's CPU time (``time.process_time``; on a shared machine
the CPU rate is the one that compares runs), with the 1-minute load average when it ended.

``--json PATH`` (for a driver such as ``benchmarks/run_all.py``) writes ``{"results": {key: rate, "cpu": {key:
CPU rate}, "load": {key: load average}}, "scored_ms": {"cold", "warm", "cold_cpu", "warm_cpu": [...]}, "peers":
{"results": {name: {"steps_per_s", "cpu_steps_per_s", "load", "version", "notes"}}, "errors": {...}}, "versions":
{"gymnasium", "numpy"}}`` with the rate keys ``raw``, ``raw_scored`` (the same steps with scoring on), ``gym.make``,
``alloc_wrapper``, ``stagewise`` (steps/s or sub-steps/s), ``sync1``, ``sync8``, ``vec1``, ``vec8``, ``vec64``
(env-steps/s); ``cold_episode_s`` / ``cold_episode_cpu_s`` (seconds) and ``cold_steps`` of the first pass over the
daily rows, ``reset_ms`` / ``reset_cpu_ms`` of the reset after a daily episode; ``scored_ms`` holds the per-step
times (ms, wall and CPU) of the scored bench periods. The
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

ROOT = Path(__file__).resolve().parents[1]
# the checkout this script belongs to, not an installed quantgym (the --baseline children point elsewhere)
sys.path.insert(0, os.environ.get("QUANTGYM_BENCH_CODE", str(ROOT)))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import quantgym  # noqa: F401,E402 - registers the ids
from quantgym.envs.portbench.config import BENCH_PERIODS  # noqa: E402
from quantgym.envs.portbench.env import PortBenchEnv  # noqa: E402
from quantgym.envs.portbench.allocation import AllocationWrapper  # noqa: E402
from _common import print_table, step_rates  # noqa: E402

PEERS_PY = ROOT / "benchmarks" / ".venv-peers" / "bin" / "python"
ENV_ID = "PortBench-Balanced-v0"
DAILY = {"start": "2016-01-01", "end": "2023-12-31", "freq": "daily"}


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


def bench_single(env: gym.Env, actions: list, duration: float, seed: int) -> dict[str, float]:
    """``{"wall", "cpu", "steps", "load"}``: steps/s by wall clock and by CPU time (``_common.step_rates``)."""
    env.action_space = ReplayActions(env.action_space, actions)
    return step_rates(env, duration, seed)


def warm(env: gym.Env, actions: list, seed: int) -> dict[str, float]:
    """One full episode so every decision row of the period is in the per-dataset cache; its steps, wall and CPU
    seconds (resets not counted), and the wall and CPU seconds of the reset that follows it."""
    env.reset(seed=seed)
    i, done = 0, False
    t0, c0 = time.perf_counter(), time.process_time()
    while not done:
        _, _, done, _, _ = env.step(actions[i % len(actions)])
        i += 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    env.reset(seed=seed)
    return {"steps": i, "wall_s": wall, "cpu_s": cpu, "reset_wall_s": time.perf_counter() - t0,
            "reset_cpu_s": time.process_time() - c0}


def bench_vector(venv, actions: list, duration: float, seed: int) -> dict[str, float]:
    """``{"wall", "cpu", "steps", "load"}``: env-steps/s by wall clock and by CPU time."""
    venv.reset(seed=seed)
    for a in actions[:50]:
        venv.step(a)
    steps, i = 0, 0
    t0, c0 = time.perf_counter(), time.process_time()
    while True:
        venv.step(actions[i % len(actions)])
        i += 1
        steps += venv.num_envs
        if time.perf_counter() - t0 > duration:
            break
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall": steps / wall, "cpu": steps / cpu if cpu > 0 else float("nan"), "steps": steps,
            "load": os.getloadavg()[0]}


def stagewise_decision_ms(duration: float, seed: int, text: bool = False) -> dict[str, float]:
    """ms per stagewise decision: the S1, S2 and S3 sub-steps of one decision date through ``gym.make``
    (text prompts in the full style, full scoring: S1-S5, CEPS, PAS), normal_2024, after one warm
    episode; medians over the decisions timed in ``duration`` seconds (resets not timed).

    ``text=True``: through :class:`~quantgym.envs.portbench.text_protocol.TextStageAction`, the three
    answers being JSON text (``tests/llm/pb_script.py``'s answers to the episode's prompts, made before
    timing), so each sub-step also parses and coerces an answer (1.2-2.4 k characters)."""
    env = gym.make(ENV_ID, period="normal_2024", stagewise=True)
    if text:
        from quantgym.envs.portbench.text_protocol import TextStageAction

        env = TextStageAction(env)
        acts = _scripted_answers(env, seed)
    else:
        acts = dict_actions(80, 64, seed)
        warm(env, acts, seed)
    env.reset(seed=seed)
    wall, cpu, i = [], [], 0
    stop = time.perf_counter() + duration
    while time.perf_counter() < stop:
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(3):
            _, _, done, _, _ = env.step(acts[i % len(acts)])
            i += 1
        wall.append(1e3 * (time.perf_counter() - t0))
        cpu.append(1e3 * (time.process_time() - c0))
        if done:
            env.reset(seed=seed)
            i = 0
    return {"wall_ms": float(np.median(wall)), "cpu_ms": float(np.median(cpu)), "n": len(wall)}


def _scripted_answers(env: gym.Env, seed: int) -> list[str]:
    """The scripted model's JSON answer to every prompt of one episode (which also warms the caches)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("pb_script", ROOT / "tests" / "llm" / "pb_script.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    obs, _ = env.reset(seed=seed)
    out, done = [], False
    while not done:
        out.append(json.dumps(script.answer({"messages": [{"role": "user", "content": obs["prompt"]}]})))
        obs, _, done, _, _ = env.step(out[-1])
    return out


def stagewise_before_after(rev: str, rounds: int, duration: float, seed: int) -> list[tuple[str, str, str]]:
    """:func:`stagewise_decision_ms` (array and text answers) on git revision ``rev`` and on this checkout,
    alternately, ``rounds`` times each (a fresh process per run); rows for :func:`print_table` (medians
    of the per-run medians)."""
    res: dict[tuple[str, bool], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        arch = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "quantgym"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=arch.stdout, check=True)
        for _ in range(rounds):
            for text in (False, True):
                for label, code in (("before", tmp), ("after", str(ROOT))):
                    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"QUANTGYM_BENCH_CODE": code}
                    cmd = [sys.executable, __file__, "--stagewise-child", "--duration", str(duration), "--seed",
                           str(seed)] + (["--text"] if text else [])
                    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
                    res.setdefault((label, text), []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    rows = []
    for text in (False, True):
        med = {lab: {m: float(np.median([r[m] for r in res[(lab, text)]])) for m in ("wall_ms", "cpu_ms")}
               for lab in ("before", "after")}
        what = "text answers (parse + coerce)" if text else "array actions"
        for lab, name in (("before", rev), ("after", "this checkout")):
            n = sum(r["n"] for r in res[(lab, text)])
            rows.append((f"stagewise decision, {what}, {lab} ({name})",
                         f"{med[lab]['wall_ms']:.2f} ms wall, {med[lab]['cpu_ms']:.2f} ms CPU",
                         f"{n} decisions in {rounds} runs"))
        rows.append((f"speed-up, {what}", f"{med['before']['wall_ms'] / med['after']['wall_ms']:.2f}x wall, "
                     f"{med['before']['cpu_ms'] / med['after']['cpu_ms']:.2f}x CPU", "before / after"))
    return rows


def scored_step_times(seed: int, blas_default: bool = False) -> dict[str, list[float]]:
    """ms per full S1–S5 scored allocation step on the bench periods: cold (fresh caches) and warm.

    ``blas_default=True`` measures the cold steps without the single-threaded BLAS context of
    :func:`quantgym.envs.portbench.optimize.single_thread_blas` (numpy's multi-threaded default).
    """
    import contextlib

    from quantgym.envs.portbench import env as env_mod
    from quantgym.envs.portbench import market, optimize

    market.SHARED_CACHES.clear()
    saved = (optimize.single_thread_blas, env_mod.single_thread_blas)
    if blas_default:
        optimize.single_thread_blas = env_mod.single_thread_blas = contextlib.nullcontext
    out = {"cold": [], "warm": []}
    try:
        return _scored(seed, out, ("cold",) if blas_default else ("cold", "warm"))
    finally:
        optimize.single_thread_blas, env_mod.single_thread_blas = saved
        market.SHARED_CACHES.clear()


def _scored(seed: int, out: dict, kinds: tuple[str, ...]) -> dict[str, list[float]]:
    for kind in kinds:
        cpu = out.setdefault(f"{kind}_cpu", [])
        for per in BENCH_PERIODS:
            env = PortBenchEnv(profile="balanced", period=per, scoring=True)
            acts = dict_actions(env.n_assets, 64, seed)
            env.reset(seed=seed)
            done, i = False, 0
            while not done:
                t0, c0 = time.perf_counter(), time.process_time()
                _, _, done, _, _ = env.step(acts[i % 64])
                out[kind].append(1e3 * (time.perf_counter() - t0))
                cpu.append(1e3 * (time.process_time() - c0))
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
    ap.add_argument("--stagewise-only", action="store_true", help="only the ms per stagewise decision (no append)")
    ap.add_argument("--baseline", metavar="REV", help="with --stagewise-only: also git revision REV, alternately")
    ap.add_argument("--rounds", type=int, default=5, help="runs of each side with --baseline")
    ap.add_argument("--stagewise-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--text", action="store_true", help="with --stagewise-only: text answers (parse + coerce)")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH (benchmarks/run_all.py)")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    dur, seed = a.duration, a.seed
    if a.stagewise_child:
        print(json.dumps(stagewise_decision_ms(dur, seed, a.text)))
        return
    if a.stagewise_only:
        if a.baseline:
            rows = stagewise_before_after(a.baseline, a.rounds, dur, seed)
        else:
            r = stagewise_decision_ms(dur, seed, a.text)
            rows = [(f"stagewise decision (S1+S2+S3 sub-steps{', text answers' if a.text else ''})",
                     f"{r['wall_ms']:.2f} ms wall, {r['cpu_ms']:.2f} ms CPU",
                     f"median of {r['n']} decisions, normal_2024")]
        print_table("PortBench stagewise decision (N = 80, prompts, scoring)", rows)
        load = os.getloadavg()
        print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {load[0]:.1f} / {load[1]:.1f} / "
              f"{load[2]:.1f}; Python {platform.python_version()}, numpy {np.__version__}, gymnasium {gym.__version__}")
        return
    rows: list[tuple[str, str, str]] = []  # (measurement, value, note)
    # res[key]: the wall rate (steps/s); res["cpu"][key]: the CPU-time rate; res["load"][key]: the 1-min load
    # average when the measurement ended
    res: dict = {"cpu": {}, "load": {}}

    def keep(key: str, r: dict) -> None:
        res[key], res["cpu"][key], res["load"][key] = r["wall"], r["cpu"], r["load"]

    raw = PortBenchEnv(profile="balanced", period=DAILY, scoring=False)
    acts = dict_actions(raw.n_assets, 1024, seed)
    cold = warm(raw, acts, seed)  # the first pass: every decision row seen first (per-dataset caches empty)
    res["cold_episode_s"], res["cold_episode_cpu_s"], res["cold_steps"] = cold["wall_s"], cold["cpu_s"], cold["steps"]
    res["load"]["cold"] = os.getloadavg()[0]
    again = warm(raw, acts, seed)  # a second pass over warm caches: the reset after a full daily episode
    res["reset_ms"], res["reset_cpu_ms"] = 1e3 * again["reset_wall_s"], 1e3 * again["reset_cpu_s"]
    keep("raw", bench_single(raw, acts, dur, seed))
    scored = PortBenchEnv(profile="balanced", period=DAILY, scoring=True)  # the same steps, S1-S5 + CEPS scored
    warm(scored, acts, seed)
    keep("raw_scored", bench_single(scored, acts, dur, seed))
    made = gym.make(ENV_ID, period=DAILY, scoring=False)
    keep("gym.make", bench_single(made, acts, dur, seed))
    alloc = AllocationWrapper(gym.make(ENV_ID, period=DAILY, scoring=False), reward="log_return")
    keep("alloc_wrapper", bench_single(alloc, box_actions(80, 1024, seed), dur, seed))
    stg = gym.make(ENV_ID, period="normal_2024", stagewise=True)
    warm(stg, dict_actions(80, 64, seed), seed)
    keep("stagewise", bench_single(stg, dict_actions(80, 1024, seed), dur, seed))
    res["stagewise_decision"] = stagewise_decision_ms(dur, seed)
    times_default = scored_step_times(seed, blas_default=True)
    times = scored_step_times(seed)
    for n in (1, 8):
        sync = gym.make_vec(ENV_ID, num_envs=n, vectorization_mode="sync", period=DAILY, scoring=False)
        batched = [_stack(x) for x in zip(*[dict_actions(80, 256, seed + i) for i in range(n)])]
        keep(f"sync{n}", bench_vector(sync, batched, dur, seed))
        sync.close()
    for n in (1, 8, 64):
        vec = gym.make_vec(ENV_ID, num_envs=n, vectorization_mode="vector_entry_point", train_windows=[
            ("2016-01-01", "2023-12-31")], freq="daily", episode_len=252)
        keep(f"vec{n}", bench_vector(vec, box_actions(80, 256, seed, batch=n), dur, seed))
    peer = {"results": {}, "errors": {"peers": "skipped (--no-peers)"}} if a.no_peers else peers(dur, seed)

    def rate(key: str, unit: str = "steps/s") -> str:
        return f"{res[key]:,.0f} {unit} wall, {res['cpu'][key]:,.0f} CPU (load {res['load'][key]:.1f})"

    cold_ms, warm_ = np.array(times["cold"]), np.array(times["warm"])
    warm_cpu = np.array(times["warm_cpu"])
    cold_rate, cold_cpu = res["cold_steps"] / res["cold_episode_s"], res["cold_steps"] / res["cold_episode_cpu_s"]
    rows += [
        ("allocation, raw PortBenchEnv (scoring off)", rate("raw"), "daily decisions 2016-2023, warm"),
        ("allocation, raw PortBenchEnv (scoring on)", rate("raw_scored"), "the same, S1-S5, CEPS, PAS scored"),
        ("allocation, raw PortBenchEnv, first (cold) pass", f"{cold_rate:,.0f} steps/s wall, {cold_cpu:,.0f} CPU "
         f"(load {res['load']['cold']:.1f})", f"{res['cold_steps']} daily steps, empty per-dataset caches"),
        ("reset after a daily episode", f"{res['reset_ms']:.2f} ms wall, {res['reset_cpu_ms']:.2f} ms CPU",
         "raw PortBenchEnv, warm caches"),
        ("allocation, gym.make (scoring off)", rate("gym.make"), "+ PassiveEnvChecker, OrderEnforcing"),
        ("allocation, AllocationWrapper (Box)", rate("alloc_wrapper"), "gym.make + Box obs/action"),
        ("stagewise (S1/S2/S3 sub-steps, prompts, scoring)", rate("stagewise", "sub-steps/s"), "normal_2024"),
        ("stagewise decision (S1+S2+S3 sub-steps)", f"{res['stagewise_decision']['wall_ms']:.2f} ms wall, "
         f"{res['stagewise_decision']['cpu_ms']:.2f} ms CPU", f"median of {res['stagewise_decision']['n']} decisions"),
        ("full S1-S5 scored step, cold", _stats(times["cold"], times["cold_cpu"]), f"{cold_ms.size} steps, 4 bench "
         "periods, incl. 60-day max-Sharpe oracle (exact NNLS), single-threaded BLAS"),
        ("full S1-S5 scored step, cold, multi-threaded BLAS", _stats(times_default["cold"], times_default["cold_cpu"]),
         "same, without the single-threaded BLAS context (the plain multi-threaded default)"),
        ("full S1-S5 scored step, warm (row cache)", f"mean {warm_.mean():.2f} ms, p95 {np.percentile(warm_, 95):.2f} "
         f"wall; mean {warm_cpu.mean():.2f} ms CPU", "oracle and snapshot cached per dataset"),
        ("make_vec sync, 1 env (Dict, scoring off)", rate("sync1", "env-steps/s"), ""),
        ("make_vec sync, 8 envs (Dict, scoring off)", rate("sync8", "env-steps/s"), ""),
        ("vector_entry_point (batched numpy), 1 env", rate("vec1", "env-steps/s"), "Box spaces, no scoring"),
        ("vector_entry_point (batched numpy), 8 envs", rate("vec8", "env-steps/s"), ""),
        ("vector_entry_point (batched numpy), 64 envs", rate("vec64", "env-steps/s"), "reference"),
    ]
    for name, r in peer.get("results", {}).items():
        cpu = r.get("cpu_steps_per_s")
        rows.append((f"{name} ({r['version']})", f"{r['steps_per_s']:,.0f} steps/s wall" + (
            f", {cpu:,.0f} CPU (load {r.get('load', float('nan')):.1f})" if cpu else ""), r["notes"]))
    for name, r in peer.get("results", {}).items():
        cpu = r.get("cpu_steps_per_s")
        rows.append((f"ratio raw PortBench / {name}", f"{res['raw'] / r['steps_per_s']:.3g} wall" + (
            f", {res['cpu']['raw'] / cpu:.3g} CPU" if cpu else ""),
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
            f"rows: {res['cold_episode_s']:.1f} s wall, {res['cold_episode_cpu_s']:.1f} s CPU.", "",
            "| measurement | result | note |", "|---|---|---|",
            *[f"| {m} | {v} | {n} |" for m, v, n in rows], "",
        ]
        with (ROOT / "docs" / "performance.md").open("a") as fh:
            fh.write("\n".join(lines) + "\n")
        print("appended to docs/performance.md")


def _stats(ms: list[float], cpu_ms: list[float]) -> str:
    t = np.asarray(ms)
    return (f"mean {t.mean():.1f} ms, p50 {np.median(t):.1f}, p95 {np.percentile(t, 95):.1f}, max {t.max():.1f} "
            f"wall; mean {np.mean(cpu_ms):.1f} ms CPU")


def _stack(acts: tuple[dict, ...]) -> dict:
    return {k: (np.stack([a[k] for a in acts]) if k != "status" else np.zeros(len(acts), np.int64))
            for k in acts[0]}


if __name__ == "__main__":
    main()
