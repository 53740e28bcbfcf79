"""PortBench step throughput before/after a change, beside gym-anytrading, alternating in one run.

    python benchmarks/bench_portbench_ab.py [--ref main] [--rounds 3] [--duration 3] [--json PATH] [--no-append]

Each measurement runs in a fresh child process; the rounds alternate ``before`` (the quantgym package of
git ``--ref``, exported with ``git archive`` into a temporary folder and put first on ``PYTHONPATH``),
``after`` (this checkout) and, where there is one, the peer (in ``benchmarks/.venv-peers``, or
``--peers-python``), so load changes on a shared machine hit every side alike. Reported: medians over the
rounds of wall-clock steps/s and of steps per CPU-second (``time.process_time``, less sensitive to other
jobs), and the ratios.

Measurements (bundled real data, 80 assets, seed 0, pre-generated actions, warm per-dataset caches: one full
episode first):

- ``raw``: ``PortBenchEnv(scoring=False)``, allocation mode, daily decisions 2016-2023 (one step = one
  trading day; resets inside the timed loop);
- ``scored``: the same with S1-S5 scoring (lookback oracle, cached per row after the warm-up episode);
- ``vec8``: the batched ``vector_entry_point`` (:class:`PortBenchVectorEnv`), 8 envs, daily 252-day
  training episodes in 2016-2023, env-steps/s;
- peers: gym-anytrading ``stocks-v0`` (one env) for ``raw`` and ``scored``, and
  ``SyncVectorEnv(stocks-v0 x8)`` for ``vec8`` (functions of ``bench_peers_gyms.py``).

``--json PATH`` writes ``{"ref", "rounds", "duration", "context" (versions, load average), "results": {kind: {side:
{"wall": [...], "cpu": [...], "wall_median", "cpu_median"}}}}`` with side in ``before`` / ``after`` / ``peer``
(rates: steps/s; env-steps/s for ``vec8``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import append_performance, run_context  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PEERS_PY = ROOT / "benchmarks" / ".venv-peers" / "bin" / "python"
KINDS = ("raw", "scored", "vec8")
PEER_OF = {"raw": "gym-anytrading stocks-v0", "scored": "gym-anytrading stocks-v0", "vec8": "SyncVectorEnv(stocks-v0 x8)"}

PEER_CODE = """
import json, sys, warnings
sys.path.insert(0, {bench!r})
warnings.filterwarnings("ignore")
import gymnasium as gym, gym_anytrading  # noqa: F401
import bench_peers_gyms as p
kind, dur, seed = {kind!r}, {dur!r}, {seed!r}
out = p.sync_vector(dur, seed) if kind == "vec8" else p.run(gym.make("stocks-v0"), dur, seed)
if isinstance(out, dict):  # rates by wall clock and by CPU time
    out = {{"wall": out.get("steps_per_s", out.get("wall")), "cpu": out.get("cpu_steps_per_s", out.get("cpu"))}}
else:
    out = {{"wall": out, "cpu": None}}
print(json.dumps(out))
"""


def worker(kind: str, duration: float, seed: int) -> dict:
    """One measurement in this process (run as a child): wall and CPU rates after a warm-up episode."""
    import warnings

    import numpy as np

    warnings.filterwarnings("ignore")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_portbench_steps import DAILY, box_actions, dict_actions, warm

    if kind == "vec8":
        import gymnasium as gym

        import quantgym  # noqa: F401 - registers the ids

        venv = gym.make_vec("PortBench-Balanced-v0", num_envs=8, vectorization_mode="vector_entry_point",
                            train_windows=[("2016-01-01", "2023-12-31")], freq="daily", episode_len=252)
        acts = box_actions(80, 256, seed, batch=8)
        venv.reset(seed=seed)
        for a in acts[:50]:
            venv.step(a)
        step, per = (lambda i: venv.step(acts[i % 256])), 8
    else:
        from quantgym.envs.portbench.env import PortBenchEnv

        env = PortBenchEnv(profile="balanced", period=DAILY, scoring=kind == "scored")
        acts = dict_actions(env.n_assets, 1024, seed)
        warm(env, acts, seed)
        env.reset(seed=seed)

        def step(i):
            if env.step(acts[i % 1024])[2]:
                env.reset()
        per = 1
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    while True:
        step(n)
        n += 1
        if n % 64 == 0 and time.perf_counter() - t0 > duration:
            break
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall": n * per / wall, "cpu": n * per / cpu if cpu > 0 else None, "numpy": np.__version__}


def child(tree: Path, kind: str, duration: float, seed: int) -> dict:
    # QUANTGYM_BENCH_CODE: bench_portbench_steps (imported by the worker) puts that tree first on sys.path;
    # without it both sides would import this checkout's quantgym
    env = {**os.environ, "PYTHONPATH": str(tree), "QUANTGYM_BENCH_CODE": str(tree)}
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--duration", str(duration),
                        "--seed", str(seed)], capture_output=True, text=True, env=env, cwd=tree, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"{kind} in {tree}: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def peer(py: Path, kind: str, duration: float, seed: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = PEER_CODE.format(bench=str(ROOT / "benchmarks"), kind=kind, dur=duration, seed=seed)
    p = subprocess.run([str(py), "-c", code], capture_output=True, text=True, env=env, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"peer {kind}: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def export(ref: str, dest: Path) -> Path:
    """``git archive REF quantgym`` unpacked into ``dest`` (the package as it is at ``ref``)."""
    tar = dest / "ref.tar"
    subprocess.run(["git", "archive", "-o", str(tar), ref, "quantgym"], cwd=ROOT, check=True)
    with tarfile.open(tar) as tf:
        tf.extractall(dest, filter="data")
    return dest


def _median(xs: list) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    return None if not xs else (xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="main", help="git ref of the 'before' code (default main)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per measurement")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {KINDS}")
    ap.add_argument("--peers-python", default=str(PEERS_PY), help="python of the peers venv (bench_peers_gyms.py)")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    ap.add_argument("--no-append", action="store_true", help="do not append to docs/performance.md")
    ap.add_argument("--worker", choices=KINDS, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(a.worker, a.duration, a.seed)))
        return
    kinds = [k for k in a.kinds.split(",") if k]
    peers_py = Path(a.peers_python)
    res: dict = {k: {s: {"wall": [], "cpu": []} for s in ("before", "after", "peer")} for k in kinds}
    errors: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        before = export(a.ref, Path(tmp))
        for r in range(a.rounds):
            for kind in kinds:
                sides = [("before", lambda: child(before, kind, a.duration, a.seed)),
                         ("after", lambda: child(ROOT, kind, a.duration, a.seed))]
                if peers_py.exists():
                    sides.append(("peer", lambda: peer(peers_py, kind, a.duration, a.seed)))
                else:
                    errors["peer"] = f"{peers_py} not found (python benchmarks/bench_peers_gyms.py --setup)"
                for side, fn in (sides if r % 2 == 0 else sides[::-1]):
                    try:
                        out = fn()
                    except Exception as exc:  # noqa: BLE001 - reported, never substituted
                        errors[f"{kind} {side}"] = str(exc)
                        continue
                    res[kind][side]["wall"].append(out["wall"])
                    res[kind][side]["cpu"].append(out.get("cpu"))
                    print(f"round {r + 1} {kind:6s} {side:6s} {out['wall']:>12,.0f}/s wall", flush=True)
    for kind in kinds:
        for side in res[kind].values():
            side["wall_median"], side["cpu_median"] = _median(side["wall"]), _median(side["cpu"])
    ctx = run_context()
    rows = []
    for kind in kinds:
        b, f, p = (res[kind][s] for s in ("before", "after", "peer"))
        unit = "env-steps/s" if kind == "vec8" else "steps/s"
        sp = (f["wall_median"] / b["wall_median"]) if f["wall_median"] and b["wall_median"] else None
        spc = (f["cpu_median"] / b["cpu_median"]) if f["cpu_median"] and b["cpu_median"] else None
        rp = (f["wall_median"] / p["wall_median"]) if f["wall_median"] and p["wall_median"] else None
        rows.append(f"| {kind} | {_fmt(b['wall_median'])} ({_fmt(b['cpu_median'])}) | {_fmt(f['wall_median'])} "
                    f"({_fmt(f['cpu_median'])}) | {_x(sp)} ({_x(spc)}) | {PEER_OF[kind]} {_fmt(p['wall_median'])} | "
                    f"{_x(rp)} | {unit} |")
    table = ["| measurement | before: wall (per CPU-s) | after: wall (per CPU-s) | after / before | peer | "
             "after / peer | unit |", "|---|---|---|---|---|---|---|", *rows]
    print("\n".join(table))
    for k, v in errors.items():
        print(f"not measured: {k}: {v}")
    if a.json:
        Path(a.json).write_text(json.dumps({"ref": a.ref, "rounds": a.rounds, "duration": a.duration, "context": ctx,
                                            "results": res, "errors": errors}, indent=1))
    if not a.no_append:
        cmd = "python benchmarks/bench_portbench_ab.py" + "".join(f" {x}" for x in (argv or sys.argv[1:]))
        append_performance("PortBench before/after, alternating", cmd,
                           f"Before = `{a.ref}`; {a.rounds} rounds × {a.duration:g} s, medians; a fresh child process "
                           f"per measurement.", table, [f"Not measured: {k}: {v}" for k, v in errors.items()])

def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def _x(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


if __name__ == "__main__":
    main()
