"""Batched PortBench vector env throughput on one core: env-steps/s of ``PortBenchVectorEnv`` (the
``vector_entry_point`` of ``gym.make_vec``), CPU rate and wall rate.

    python benchmarks/bench_portbench_vec.py [--vec-envs 64] [--one-core] [--duration 3] [--rounds 5]
                                             [--json PATH]

The workload is ``bench_portbench_steps.py``'s ``vec64``: ``PortBench-Balanced-v0``, bundled data (N = 80),
``train_windows=[("2016-01-01", "2023-12-31")]``, daily decisions, 252-decision episodes (next-step autoresets
included), logit actions, 256 pre-generated float32 batches uniform in [-1, 1] (seed 0) replayed in turn; the
reset and 600 steps (kernels compiled or loaded from numba's cache, tables built) are not timed.

``--one-core`` (the target's setting) pins the process to one CPU (``os.sched_setaffinity``, the first CPU it
may run on, or ``--cpu``) and sets ``NUMBA_NUM_THREADS``, ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and
``MKL_NUM_THREADS`` to 1 before numpy is imported: one thread on one core.

Each round steps for ``--duration`` seconds in chunks of 100 steps and reports env-steps/s by the process's
CPU time (``time.process_time``; the rate that compares runs on a shared machine) and by wall clock, and the
median of the chunks' CPU rates (a chunk that another process's burst slowed is one chunk of many); the
summary is the median over rounds, with the 1-minute load average. ``--json PATH`` writes ``{"vec_envs",
"one_core", "rounds": [{"cpu", "wall", "chunk_cpu_median", "steps", "load"}], "cpu", "wall",
"chunk_cpu_median", "load", "commit", "versions"}`` (rates in env-steps/s, medians over rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV_ID = "PortBench-Balanced-v0"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vec-envs", type=int, default=64, help="sub-envs of the batched env (default 64)")
    p.add_argument("--one-core", action="store_true", help="one thread pinned to one CPU (the target's setting)")
    p.add_argument("--cpu", type=int, default=None, help="the CPU for --one-core (default: the first allowed)")
    p.add_argument("--duration", type=float, default=3.0, help="seconds per round (default 3)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds (default 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the figures to this JSON file")
    return p.parse_args(argv)


def one_core(cpu: int | None) -> int:
    """Pin this process to one CPU and make every thread pool single-threaded (before numpy is imported)."""
    for var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    cpu = min(os.sched_getaffinity(0)) if cpu is None else cpu
    os.sched_setaffinity(0, {cpu})
    return cpu


def commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "quantgym"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv: list[str] | None = None) -> dict:
    a = parse(argv)
    cpu = one_core(a.cpu) if a.one_core else None
    sys.path.insert(0, str(ROOT))
    import gymnasium as gym
    import numpy as np

    import quantgym  # noqa: F401 - registers the ids
    from quantgym.envs.portbench import vector as V

    n = a.vec_envs
    vec = gym.make_vec(ENV_ID, num_envs=n, vectorization_mode="vector_entry_point",
                       train_windows=[("2016-01-01", "2023-12-31")], freq="daily", episode_len=252)
    rng = np.random.default_rng(a.seed)
    acts = [rng.uniform(-1, 1, (n, vec.single_action_space.shape[0])).astype(np.float32) for _ in range(256)]
    vec.reset(seed=a.seed)
    for i in range(600):
        vec.step(acts[i % 256])
    core = vec.core
    if hasattr(core, "_targets"):  # compile (or load) the rare path too: numpy's exp for a softmax on a tie
        core.flag[:] = V._OK
        core.flag[0] = V._EXACT
        core._targets(acts[0])
    rounds, i = [], 0
    for _ in range(a.rounds):
        chunks, steps = [], 0
        t0, c0 = time.perf_counter(), time.process_time()
        while time.perf_counter() - t0 < a.duration:
            cc = time.process_time()
            for _ in range(100):
                vec.step(acts[i % 256])
                i += 1
            dc = time.process_time() - cc
            steps += 100 * n
            if dc > 0:
                chunks.append(100 * n / dc)
        wall, cpu_s = time.perf_counter() - t0, time.process_time() - c0
        rounds.append({"cpu": steps / cpu_s, "wall": steps / wall, "chunk_cpu_median": float(np.median(chunks)),
                       "steps": steps, "load": os.getloadavg()[0]})
        r = rounds[-1]
        print(f"round {len(rounds)}: {r['cpu'] / 1e6:.3f} M env-steps/s CPU, {r['wall'] / 1e6:.3f} M wall, chunk "
              f"median {r['chunk_cpu_median'] / 1e6:.3f} M CPU ({steps:,} env-steps, load {r['load']:.2f})", flush=True)
    med = {k: float(np.median([r[k] for r in rounds])) for k in ("cpu", "wall", "chunk_cpu_median", "load")}
    where = f"one core (CPU {cpu}, one thread)" if a.one_core else f"{len(os.sched_getaffinity(0))} CPUs allowed"
    print(f"PortBenchVectorEnv, {n} envs, {where}: {med['cpu'] / 1e6:.3f} M env-steps/s CPU, {med['wall'] / 1e6:.3f} M "
          f"wall, chunk median {med['chunk_cpu_median'] / 1e6:.3f} M CPU (median of {len(rounds)} rounds, load "
          f"{med['load']:.2f})")
    res = {"vec_envs": n, "one_core": bool(a.one_core), "rounds": rounds, **med, "commit": commit(),
           "versions": {"numpy": np.__version__, "gymnasium": gym.__version__}}
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
