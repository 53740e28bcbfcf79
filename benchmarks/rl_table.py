"""Multi-seed, walk-forward RL table of docs/rl.md: PPO, SAC, A2C × two rewards × four windows × seeds.

Longer than 500 lines as one job, the RL table of docs/rl.md: `run`, `tables` and `ship` read and write the
same result files, and splitting them would only pass those records between modules.

    python benchmarks/rl_table.py run [--out benchmarks/results/rl_table] [--models results/rl_table_models]
                                      [--algos ppo,sac,a2c] [--rewards log_return,risk_adjusted]
                                      [--windows normal_2024,covid_2020,crypto_2022,china_2015]
                                      [--seeds 0-4] [--timesteps N | ppo=N,sac=N,a2c=N] [--jobs 2]
    python benchmarks/rl_table.py tables [--results DIR] [--write docs/rl.md | --check docs/rl.md]
                                         [--perf docs/performance.md]
    python benchmarks/rl_table.py ship [--window normal_2024] [--to examples/rl_policy]
    python benchmarks/rl_table.py speed [--timesteps 4096]    # CPU steps/s of each algorithm's training

``run``
    One training per (algorithm, reward, window, seed), each **walk-forward**: the model evaluated on a
    window is trained only on data before it (:func:`quantgym.envs.portbench.training.walk_forward_windows`:
    the training start up to the day before the window, the other evaluation periods and their 90-day
    lookback buffers cut out). The training start is 2016-01-01 (``TRAIN_START``), except for china_2015,
    which starts in 2015: its model trains from 2014-04-01 (the first date with a full 60-row lookback in
    the bundled data, docs/rl.md). Each training is ``quantgym.envs.portbench.rl.train_sb3`` (what
    ``quantgym train`` runs, with ``--train-period START:<day before the window> --eval-periods WINDOW``),
    and its model is evaluated on the window through the one evaluation loop of ``quantgym bench`` /
    ``quantgym eval`` (:func:`quantgym.evaluation.evaluate`, S1–S5 scoring on, so CEPS is measured).
    The six classical baselines of ``quantgym bench`` are evaluated on the same windows with the same
    loop, so every comparison is on identical days.

    Jobs run in ``--jobs`` worker processes (default 2; one fresh process per training, torch with one
    thread), seed by seed (every cell has seed 0 before any has seed 1, so an interrupted run is a
    complete grid at fewer seeds). A job whose result file exists is skipped (resumable; a file holding
    another training budget is refused). Written to ``--out`` (committed; small JSON):

    - ``run_<algo>_<reward>_<window>_s<seed>.json``: the run's Sharpe, return, MaxDD, volatility, CEPS,
      its daily NAV (relative to the first day, 10 decimals), the budget (timesteps requested and
      trained), the training windows and its times: training wall and CPU seconds, the seconds spent in
      the batched env's ``step_wait``/``reset`` (env share = env / training wall), the wall seconds of
      the rest of ``train_sb3`` (building the envs, saving, the scored evaluation), the 1-min load
      average at start and end;
    - ``baselines_<window>.json``: the six baselines' metrics and daily NAVs on the window (and its dates);
    - ``manifest.json``: the command, the commit and each session's wall time.

    Models (``model.zip``, ``rl_meta.json``, ``results.json`` of each training, about 5 MB each) go to
    ``--models`` (default ``results/rl_table_models``, not committed).

``tables``
    Reads the result files only (no training, no evaluation) and renders the generated block
    ``rl-table`` of docs/rl.md (``--write`` / ``--check``, :func:`_common.write_or_check`). Per
    (algorithm, reward, window):

    - mean ± standard deviation (ddof 1) [min, max] over seeds of Sharpe, return, MaxDD and CEPS;
    - the interquartile mean (IQM) of the seeds' Sharpe ratios (``scipy.stats.trim_mean``, 25 % cut
      at each end, rliable's IQM; Agarwal et al. 2021, "Deep RL at the edge of the statistical
      precipice") with its 95 % percentile bootstrap interval over seeds (``scipy.stats.bootstrap``,
      B and seed of :data:`quantgym.stats.config.DEFAULT_BOOTSTRAP`; with one cell per task rliable's
      stratified bootstrap is this bootstrap over the cell's runs);
    - the **seed ensemble**: capital split equally across the seeds' policies, rebalanced daily, i.e.
      the daily mean of the seeds' returns; its Sharpe ratio, and the Ledoit–Wolf (2008) Sharpe
      difference test (:func:`quantgym.stats.bootstrap.sharpe_difference_test`, studentised circular
      block bootstrap, rf 4 %, 252 days) against Equal-Weight and against the window's best classical
      baseline by Sharpe, on the same days;
    - the profile's stress gate (spec §7.2): on a stress window, the seeds whose MaxDD is within the
      tolerance; on normal_2024, the seeds whose three stress-window models all are.

Training budget (``--timesteps``; default :data:`TIMESTEPS`): 32,768 environment steps for every algorithm,
the same sample budget (PPO trains whole rollouts of 256 × 8 = 2,048 steps, A2C of 16 × 8 = 128; 32,768 is a
multiple of both, so requested = trained). Measured with ``speed`` on this 2-core machine, one training
at a time on covid_2020's training windows (torch 1 thread), while other jobs kept the 1-min load average
at 7–9: the rates are the process CPU time of ``learn`` (``time.process_time``), which the load inflates
far less than wall time (shared caches still slow it, so an idle machine is rather faster); "outside" is the CPU of everything else in the job (imports, data,
building the envs, saving, the scored evaluation on the window):

    algorithm   steps   CPU s of learn   CPU steps/s   env share of wall   CPU s outside learn
    PPO          8,192        5.1            1,606           2 %                  5.8
    SAC          8,192       35.4              232           0 %                  5.1
    A2C          8,192        1.7            4,791           7 %                  5.5
    SAC         32,768      147.4              222           0 %                  4.8
    PPO         32,768       20.8            1,578           1 %                  5.1

At 32,768 steps a training costs about 21 CPU s (PPO), 150 CPU s (SAC) and 7 CPU s (A2C), plus about
5 CPU s outside; the 120 trainings (40 per algorithm) about 2.1 CPU hours, i.e. about 1.1 hours of wall
time with ``--jobs 2`` on two idle cores (more on a loaded machine; ``speed`` prints the estimate for
the machine it runs on). SAC takes about four fifths of it: it makes one gradient step (batch 256) per
8 environment steps, PPO 10 epochs over each rollout, A2C one step per 128. The batched env is a few
per cent of the training time; the networks (MLP 256-256 on a 463-dim observation) are the rest.
65,536 steps (twice the budget) would take about 2.1 hours of wall time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

DOC = "docs/rl.md"
BLOCK = "rl-table"
#: the training-time block of docs/performance.md
SPEED_BLOCK = "rl-table-speed"
RESULTS = ROOT / "benchmarks" / "results" / "rl_table"
SCHEMA_RUN, SCHEMA_BASE = "quantgym-rl-table-run-1", "quantgym-rl-table-baselines-1"
ENV_ID = "PortBench-Balanced-v0"
ALGOS = ("ppo", "sac", "a2c")
REWARDS = ("log_return", "risk_adjusted")
WINDOWS = ("normal_2024", "covid_2020", "crypto_2022", "china_2015")
SEEDS = (0, 1, 2, 3, 4)
#: [project choice] walk-forward training start per window (docs/rl.md): 2016-01-01, china_2015 2014-04-01
CHINA_START = "2014-04-01"
#: [project choice] training steps per algorithm (see the module docstring for the measurement)
TIMESTEPS = {"ppo": 32_768, "sac": 32_768, "a2c": 32_768}
ALPHA = 0.05


# ------------------------------------------------------------------------------------------ helpers
def train_start(window: str) -> str:
    """Walk-forward training start of ``window``: 2014-04-01 for china_2015, else ``TRAIN_START``."""
    from quantgym.envs.portbench.training import TRAIN_START

    return CHINA_START if window == "china_2015" else TRAIN_START


def run_name(algo: str, reward: str, window: str, seed: int) -> str:
    return f"run_{algo}_{reward}_{window}_s{seed}"


def _commit() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def _write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` to ``path`` atomically (a resumed run never sees half a file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    tmp.replace(path)


def _rel_nav(nav: Any) -> list[float]:
    v = [float(x) for x in nav.to_numpy()]
    return [round(x / v[0], 10) for x in v]


def _metrics(res: Any) -> dict[str, Any]:
    m = res.metrics
    return {"sharpe": m.get("sharpe"), "ret_pct": m.get("ret_pct"), "maxdd_pct": m.get("maxdd_pct"),
            "vol_pct": m.get("vol_pct"), "ceps": res.ceps, "max_drawdown": m.get("max_drawdown")}


def _instrument(sb3: Any) -> dict[str, float]:
    """Time the training inside this (worker) process: CPU and wall seconds of ``learn`` and the wall
    seconds of the batched env's ``step_wait`` / ``reset``; returns the dict the wrappers add to."""
    clock = {"learn_cpu": 0.0, "learn_wall": 0.0, "env_wall": 0.0}
    venv = sb3.PortBenchSB3VecEnv
    for meth in ("step_wait", "reset"):
        orig = getattr(venv, meth)

        def timed(self, *a, _orig=orig, **k):
            t = time.perf_counter()
            try:
                return _orig(self, *a, **k)
            finally:
                clock["env_wall"] += time.perf_counter() - t
        setattr(venv, meth, timed)
    for cls in sb3.ALGOS.values():
        orig = cls.learn

        def learn(self, *a, _orig=orig, **k):
            c, t = time.process_time(), time.perf_counter()
            try:
                return _orig(self, *a, **k)
            finally:
                clock["learn_cpu"] += time.process_time() - c
                clock["learn_wall"] += time.perf_counter() - t
        cls.learn = learn
    return clock


def train_one(job: dict) -> dict:
    """One walk-forward training and its evaluation (runs in a worker process); the compact result."""
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    import warnings

    import pandas as pd

    from quantgym.envs.portbench.config import resolve_period
    from quantgym.envs.portbench.rl import sb3
    from quantgym.envs.portbench.training import walk_forward_windows

    warnings.filterwarnings("ignore", category=UserWarning)
    clock = _instrument(sb3)
    window, start = job["window"], train_start(job["window"])
    end = str((pd.Timestamp(resolve_period(window).start) - pd.Timedelta(days=1)).date())
    t_call = time.perf_counter()
    out = sb3.train_sb3(job["algo"], job["env_id"], timesteps=job["timesteps"], seed=job["seed"],
                        out_dir=job["model_dir"], train_period=(start, end), reward=job["reward"],
                        eval_periods=[window])
    if [list(w) for w in out["windows"]] != [list(w) for w in walk_forward_windows(window, start=start)]:
        raise RuntimeError(f"training windows {out['windows']} are not walk_forward_windows({window!r})")
    meta = out["section"].extra["training"]
    (res,) = out["results"]
    t_done = time.perf_counter()
    wall, usage = t_done - t0, resource.getrusage(resource.RUSAGE_SELF)
    return {
        "schema": SCHEMA_RUN, "algo": job["algo"], "reward": job["reward"], "window": window, "seed": job["seed"],
        "env_id": job["env_id"], "profile": res.profile, "timesteps": meta["timesteps"],
        "timesteps_trained": meta["timesteps_trained"], "train_period": [start, end],
        "train_windows": [list(w) for w in out["windows"]], "hyperparameters": meta["hyperparameters"],
        "metrics": _metrics(res), "nav_first": str(res.nav.index[0].date()), "nav_last": str(res.nav.index[-1].date()),
        "nav": _rel_nav(res.nav),
        "timing": {"train_wall_s": round(out["train_seconds"], 2), "train_cpu_s": round(clock["learn_cpu"], 2),
                   "env_wall_s": round(clock["env_wall"], 2),
                   "eval_setup_wall_s": round(t_done - t_call - clock["learn_wall"], 2),
                   "job_wall_s": round(wall, 2), "process_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                   "load_avg_start": round(load0, 2), "load_avg_end": round(os.getloadavg()[0], 2)},
        "versions": meta["versions"], "commit": job["commit"],
    }


def baselines_on(window: str, env_id: str = ENV_ID) -> dict:
    """The six classical baselines of ``quantgym bench`` on ``window`` (the same evaluation loop)."""
    from quantgym.envs.portbench.baselines import BASELINES, make_baseline
    from quantgym.evaluation import evaluate

    out: dict[str, Any] = {"schema": SCHEMA_BASE, "window": window, "env_id": env_id, "baselines": {}}
    for key in BASELINES:
        res = evaluate(env_id, make_baseline(key), period=window)
        out.setdefault("dates", [str(d.date()) for d in res.nav.index])
        out["baselines"][key] = {"name": res.agent, "metrics": _metrics(res), "nav": _rel_nav(res.nav)}
    return out


def _parse_list(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in items if s not in allowed]
    if bad or not items:
        raise ValueError(f"unknown {what} {', '.join(bad) or '(none given)'}; choose from {', '.join(allowed)}")
    return items


def _parse_seeds(text: str) -> list[int]:
    try:
        if "-" in text and "," not in text:
            a, b = (int(x) for x in text.split("-"))
            seeds = list(range(a, b + 1))
        else:
            seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--seeds takes A-B or a comma-separated list of integers, got {text!r}") from None
    if not seeds or min(seeds) < 0:
        raise ValueError(f"--seeds needs at least one seed >= 0, got {text!r}")
    return seeds


def _parse_timesteps(text: str | None, algos: list[str]) -> dict[str, int]:
    steps = dict(TIMESTEPS)
    if text:
        try:
            if "=" in text:
                for part in text.split(","):
                    k, v = part.split("=")
                    if k.strip() not in ALGOS:
                        raise ValueError
                    steps[k.strip()] = int(v)
            else:
                steps = {a: int(text) for a in ALGOS}
        except ValueError:
            raise ValueError(f"--timesteps takes N or ppo=N,sac=N,a2c=N, got {text!r}") from None
    if any(steps[a] < 1 for a in algos):
        raise ValueError(f"--timesteps must be >= 1, got {text!r}")
    return {a: steps[a] for a in algos}


# ------------------------------------------------------------------------------------------ run
def _jobs(a: argparse.Namespace) -> tuple[list[dict], dict[str, int]]:
    algos = _parse_list(a.algos, ALGOS, "algorithm")
    rewards = _parse_list(a.rewards, REWARDS, "reward")
    windows = _parse_list(a.windows, WINDOWS, "window")
    seeds = _parse_seeds(a.seeds)
    steps = _parse_timesteps(a.timesteps, algos)
    commit = _commit()
    cost = sorted(algos, key=lambda x: -steps[x] / MEASURED.get(x, {}).get("cpu_steps_s", 1.0))
    jobs = [{"algo": al, "reward": rw, "window": w, "seed": s, "env_id": a.env, "timesteps": steps[al],
             "commit": commit, "model_dir": str(Path(a.models) / run_name(al, rw, w, s))}
            for s in seeds for al in cost for rw in rewards for w in windows]
    return jobs, steps


def run(a: argparse.Namespace) -> int:
    import multiprocessing as mp

    jobs, steps = _jobs(a)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    todo = []
    for j in jobs:
        f = out / f"{run_name(j['algo'], j['reward'], j['window'], j['seed'])}.json"
        if f.exists():
            have = json.loads(f.read_text()).get("timesteps")
            if have != j["timesteps"]:
                raise ValueError(f"{f} holds a {have}-step run, not {j['timesteps']}: use another --out")
            continue
        todo.append(j)
    t0, load0, started = time.perf_counter(), os.getloadavg()[0], time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    for w in dict.fromkeys(j["window"] for j in jobs):
        f = out / f"baselines_{w}.json"
        if not f.exists():
            _write_json(f, baselines_on(w, a.env))
            print(f"baselines on {w}: written", flush=True)
    print(f"{len(jobs) - len(todo)} of {len(jobs)} runs done already; {len(todo)} to train "
          f"({', '.join(f'{k} {v}' for k, v in steps.items())} steps) in {a.jobs} processes", flush=True)
    failed = 0
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=a.jobs, mp_context=ctx, max_tasks_per_child=1) as pool:
        futs = {pool.submit(train_one, j): j for j in todo}
        for k, fut in enumerate(as_completed(futs), 1):
            j = futs[fut]
            name = run_name(j["algo"], j["reward"], j["window"], j["seed"])
            try:
                res = fut.result()
            except Exception as exc:  # noqa: BLE001 - one failed training must not stop the grid
                failed += 1
                import traceback

                log = Path(j["model_dir"]).with_suffix(".error.txt")
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text("".join(traceback.format_exception(exc)))
                first = (str(exc).splitlines() or [""])[0][:200]
                print(f"[{k}/{len(todo)}] {name}: FAILED {type(exc).__name__}: {first} (traceback: {log})", flush=True)
                continue
            _write_json(out / f"{name}.json", res)
            t = res["timing"]
            print(f"[{k}/{len(todo)}] {name}: Sharpe {res['metrics']['sharpe']:.3f}, train {t['train_wall_s']:.0f} s "
                  f"wall / {t['train_cpu_s']:.0f} s CPU, {time.perf_counter() - t0:.0f} s elapsed", flush=True)
    if not todo:
        print("nothing to train")
        return 0
    man_path = out / "manifest.json"
    man = json.loads(man_path.read_text()) if man_path.exists() else {"sessions": []}
    man.update({"command": "python benchmarks/rl_table.py run " + " ".join(sys.argv[2:]), "env_id": a.env,
                "timesteps": steps, "commit": jobs[0]["commit"] if jobs else _commit()})  # at the start
    man["sessions"].append({"start_utc": started, "wall_s": round(time.perf_counter() - t0, 1), "jobs": a.jobs,
                            "trained": len(todo) - failed, "failed": failed, "load_avg_start": round(load0, 2),
                            "load_avg_end": round(os.getloadavg()[0], 2)})
    _write_json(man_path, man)
    print(f"done: {len(todo) - failed} trained, {failed} failed, {time.perf_counter() - t0:.0f} s wall")
    return 1 if failed else 0


def speed(a: argparse.Namespace) -> int:
    """Train each algorithm once, briefly (one at a time), and print its CPU steps/s and the grid estimate."""
    import multiprocessing as mp
    import tempfile

    rows = []
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        for algo in _parse_list(a.algos, ALGOS, "algorithm"):
            job = {"algo": algo, "reward": "log_return", "window": a.window, "seed": 0, "env_id": a.env,
                   "timesteps": a.timesteps, "commit": "", "model_dir": str(Path(tmp) / algo)}
            with ProcessPoolExecutor(1, mp_context=ctx) as pool:
                res = pool.submit(train_one, job).result()
            t = res["timing"]
            rows.append((algo, res["timesteps_trained"], t))
            print(f"{algo}: {res['timesteps_trained']} steps, train {t['train_cpu_s']:.1f} s CPU / "
                  f"{t['train_wall_s']:.1f} s wall -> {res['timesteps_trained'] / t['train_cpu_s']:.0f} CPU steps/s; "
                  f"env {t['env_wall_s']:.1f} s ({100 * t['env_wall_s'] / t['train_wall_s']:.0f} % of training wall); "
                  f"job {t['job_wall_s']:.1f} s wall, process {t['process_cpu_s']:.1f} s CPU; "
                  f"load {t['load_avg_start']:.1f}", flush=True)
    per_cell = len(REWARDS) * len(WINDOWS) * len(SEEDS)
    total = 0.0
    for algo, n, t in rows:
        over = t["process_cpu_s"] - t["train_cpu_s"]  # imports, data, evaluation: CPU outside learn
        cpu = TIMESTEPS[algo] / (n / t["train_cpu_s"]) + over
        total += per_cell * cpu
        print(f"{algo}: default {TIMESTEPS[algo]} steps ≈ {cpu:.0f} CPU s per run (incl. {over:.0f} s outside "
              "training)")
    print(f"grid of {per_cell * len(rows)} runs ≈ {total / 3600:.2f} CPU hours ≈ {total / 3600 / 2:.2f} h wall "
          "with --jobs 2 on 2 idle cores")
    return 0


#: measured CPU steps/s of training (``speed``; see the module docstring), used to order the jobs
MEASURED: dict[str, dict[str, float]] = {"ppo": {"cpu_steps_s": 1578.0}, "sac": {"cpu_steps_s": 222.0},
                                         "a2c": {"cpu_steps_s": 4791.0}}


# ------------------------------------------------------------------------------------------ tables
def load_results(folder: Path) -> tuple[list[dict], dict[str, dict], dict]:
    """(run records, {window: baselines record}, manifest) of a results folder; ValueError when it holds no run."""
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("run_*.json"))]
    if not runs:
        raise ValueError(f"no run_*.json in {folder}: run `python benchmarks/rl_table.py run --out {folder}` first")
    for r in runs:
        if r.get("schema") != SCHEMA_RUN:
            raise ValueError(f"{folder}: a run file of schema {r.get('schema')!r}, expected {SCHEMA_RUN}")
    base = {}
    for p in sorted(folder.glob("baselines_*.json")):
        b = json.loads(p.read_text())
        base[b["window"]] = b
    missing = sorted({r["window"] for r in runs} - set(base))
    if missing:
        raise ValueError(f"{folder}: no baselines_<window>.json for {', '.join(missing)}")
    man_path = folder / "manifest.json"
    return runs, base, json.loads(man_path.read_text()) if man_path.exists() else {}


def _returns(nav: list[float]) -> Any:
    import numpy as np

    v = np.asarray(nav, dtype=float)
    return v[1:] / v[:-1] - 1.0


def spread(values: list[float]) -> dict[str, float | None]:
    """Mean, standard deviation (ddof 1; None for one value), min and max of ``values`` (Nones dropped)."""
    import numpy as np

    v = np.asarray([x for x in values if x is not None], dtype=float)
    if v.size == 0:
        return {"n": 0, "mean": None, "sd": None, "min": None, "max": None}
    return {"n": int(v.size), "mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else None,
            "min": float(v.min()), "max": float(v.max())}


def iqm_interval(values: list[float], config: Any = None) -> dict[str, float | None]:
    """Interquartile mean of ``values`` (``trim_mean``, 25 % cut each end) and its percentile bootstrap interval."""
    import numpy as np
    from scipy import stats

    from quantgym.stats.config import DEFAULT_BOOTSTRAP

    cfg = config or DEFAULT_BOOTSTRAP
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if v.size == 0:
        return {"iqm": None, "lo": None, "hi": None}
    iqm = float(stats.trim_mean(v, 0.25))
    if v.size < 2:
        return {"iqm": iqm, "lo": None, "hi": None}
    res = stats.bootstrap((v,), lambda s, axis: stats.trim_mean(s, 0.25, axis=axis), n_resamples=cfg.n_boot,
                          confidence_level=cfg.confidence, method="percentile", rng=np.random.default_rng(cfg.seed))
    return {"iqm": iqm, "lo": float(res.confidence_interval.low), "hi": float(res.confidence_interval.high)}


def summarise(runs: list[dict], base: dict[str, dict]) -> list[dict]:
    """One record per (window, algorithm, reward): seed spread, Sharpe IQM, ensemble tests, stress gate."""
    import numpy as np

    from quantgym.envs.portbench.config import STRESS_PERIODS, within_tolerance
    from quantgym.envs.portbench.profiles import PROFILES
    from quantgym.metrics import RISK_FREE, TRADING_DAYS
    from quantgym.stats.bootstrap import return_stats, sharpe_difference_test

    cells: dict[tuple, list[dict]] = {}
    for r in runs:
        cells.setdefault((r["window"], r["algo"], r["reward"]), []).append(r)
    passed: dict[tuple, dict[str, bool]] = {}
    for r in runs:
        if r["window"] in STRESS_PERIODS:
            tol = PROFILES[r["profile"]].max_drawdown
            passed.setdefault((r["algo"], r["reward"], r["seed"]), {})[r["window"]] = within_tolerance(
                r["metrics"]["max_drawdown"], tol)
    order = {w: i for i, w in enumerate(("normal_2024", *STRESS_PERIODS))}
    out = []
    for (window, algo, reward), rs in sorted(cells.items(), key=lambda kv: (order.get(kv[0][0], 9), ALGOS.index(
            kv[0][1]), REWARDS.index(kv[0][2]))):
        rs = sorted(rs, key=lambda r: r["seed"])
        b = base[window]
        for r in rs:
            if len(r["nav"]) != len(b["dates"]) or (r["nav_first"], r["nav_last"]) != (b["dates"][0], b["dates"][-1]):
                raise ValueError(f"{run_name(algo, reward, window, r['seed'])}: its NAV days differ from the "
                                 f"baselines' on {window}")
        rec: dict[str, Any] = {"window": window, "algo": algo, "reward": reward, "seeds": [r["seed"] for r in rs],
                               "timesteps": sorted({r["timesteps"] for r in rs}),
                               "timesteps_trained": sorted({r["timesteps_trained"] for r in rs})}
        for k in ("sharpe", "ret_pct", "maxdd_pct", "ceps"):
            rec[k] = spread([r["metrics"][k] for r in rs])
        rec["sharpe_iqm"] = iqm_interval([r["metrics"]["sharpe"] for r in rs])
        ens = np.mean([_returns(r["nav"]) for r in rs], axis=0)
        rec["ensemble_sharpe"] = float(return_stats(ens, RISK_FREE, TRADING_DAYS)["sharpe"][0])
        bl = b["baselines"]
        best = max(bl, key=lambda k: bl[k]["metrics"]["sharpe"])
        rec["best_baseline"] = {"key": best, "name": bl[best]["name"], "sharpe": bl[best]["metrics"]["sharpe"]}
        for ref, key in (("vs_equal_weight", "equal_weight"), ("vs_best", best)):
            t = sharpe_difference_test(ens, _returns(bl[key]["nav"]), rf=RISK_FREE, periods_per_year=TRADING_DAYS)
            rec[ref] = {k: t[k] for k in ("delta", "lo", "hi", "p", "n")}
        if window in STRESS_PERIODS:
            rec["gate"] = (sum(passed[(algo, reward, r["seed"])][window] for r in rs), len(rs))
        else:
            full = [passed.get((algo, reward, r["seed"]), {}) for r in rs]
            rec["gate"] = ((sum(all(p.values()) for p in full), len(rs))
                           if all(set(p) == set(STRESS_PERIODS) for p in full) else None)
        rec["timing"] = {k: float(sum(r["timing"][k] for r in rs))
                         for k in ("train_wall_s", "train_cpu_s", "env_wall_s")}
        out.append(rec)
    return out


def _m(x: float | None, nd: int = 2) -> str:
    """A docs cell: ``nd`` decimals, typographic minus; – for None."""
    return "–" if x is None or not math.isfinite(x) else f"{x:.{nd}f}".replace("-", "−")


def _p(p: float | None) -> str:
    return "–" if p is None else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def _sp(s: dict, nd: int = 2) -> str:
    sd = "" if s["sd"] is None else f" ± {_m(s['sd'], nd)}"
    rng = "" if s["n"] < 2 else f" [{_m(s['min'], nd)}, {_m(s['max'], nd)}]"
    return f"{_m(s['mean'], nd)}{sd}{rng}"


def _test(t: dict) -> str:
    return f"{_m(t['delta'])} [{_m(t['lo'])}, {_m(t['hi'])}]"


def render(runs: list[dict], base: dict[str, dict], manifest: dict, folder: Path = RESULTS) -> str:
    """Markdown of the ``rl-table`` block (``folder``: where the result files were read, named in the text)."""
    import numpy as np

    from quantgym.envs.portbench.baselines import BASELINES

    cells = summarise(runs, base)
    n_seeds = sorted({len(c["seeds"]) for c in cells})
    budget = {}
    for r in runs:
        budget.setdefault(r["algo"], (set(), set()))
        budget[r["algo"]][0].add(r["timesteps"])
        budget[r["algo"]][1].add(r["timesteps_trained"])
    steps = "; ".join(f"{a.upper()} {'/'.join(f'{x:,}' for x in sorted(req))} steps requested "
                      f"({'/'.join(f'{x:,}' for x in sorted(tr))} trained)" for a, (req, tr) in
                      sorted(budget.items(), key=lambda kv: ALGOS.index(kv[0])))
    train_wall = sum(r["timing"]["train_wall_s"] for r in runs)
    train_cpu = sum(r["timing"]["train_cpu_s"] for r in runs)
    env_wall = sum(r["timing"]["env_wall_s"] for r in runs)
    sessions = manifest.get("sessions") or []
    wall = sum(s["wall_s"] for s in sessions)
    loads = [x for s in sessions for x in (s["load_avg_start"], s["load_avg_end"])]
    commits = sorted({r["commit"] for r in runs})
    where = (str(Path(folder).resolve().relative_to(ROOT)) if Path(folder).resolve().is_relative_to(ROOT)
             else str(folder))
    lines = [f"Generated by `python benchmarks/rl_table.py tables --write docs/rl.md` from the {len(runs)} result "
             f"files in {where}/ (`{manifest.get('command', 'python benchmarks/rl_table.py run')}`"
             f", commit {', '.join(commits)}; {manifest.get('env_id', ENV_ID)}). Walk-forward: each window's models "
             f"trained only on data before it; seeds per cell: {'/'.join(map(str, n_seeds))}; {steps}. Training "
             f"{train_wall / 3600:.2f} h wall summed over runs ({train_cpu / 3600:.2f} CPU h; the batched env "
             f"{100 * env_wall / max(train_wall, 1e-9):.0f} % of the training wall)"
             + (f"; the whole run {wall / 3600:.2f} h wall in {len(sessions)} session(s) with "
                f"{'/'.join(str(s['jobs']) for s in sessions)} worker(s), 1-min load average "
                f"{min(loads):.1f}–{max(loads):.1f}" if sessions else "") + ".", "",
             "Seed spread (mean ± sd [min, max] over seeds; IQM = interquartile mean of the seeds' Sharpe ratios "
             "with its 95 % percentile bootstrap interval; gate = seeds within the Balanced stress gate, §7.2):", "",
             "| window | algo | reward | Sharpe | Sharpe IQM [95 % CI] | Ret % | MaxDD % | CEPS | gate |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        iq = c["sharpe_iqm"]
        gate = "–" if c["gate"] is None else f"{c['gate'][0]}/{c['gate'][1]}"
        lines.append(f"| {c['window']} | {c['algo'].upper()} | {c['reward']} | {_sp(c['sharpe'])} | "
                     f"{_m(iq['iqm'])} [{_m(iq['lo'])}, {_m(iq['hi'])}] | {_sp(c['ret_pct'], 1)} | "
                     f"{_sp(c['maxdd_pct'], 1)} | {_sp(c['ceps'], 3)} |{' ' + gate} |")
    lines += ["", "Seed ensemble (the daily mean of the seeds' returns: capital split equally across the seeds' "
              "policies) against Equal-Weight and against the window's best classical baseline by Sharpe: "
              "Ledoit–Wolf (2008) Sharpe difference Δ with its 95 % studentised bootstrap interval and two-sided "
              "p-value, on the same days:", "",
              "| window | algo | reward | ensemble Sharpe | Δ vs EqW [95 % CI] | p | best baseline | "
              "Δ vs best [95 % CI] | p |", "|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        bb = c["best_baseline"]
        lines.append(f"| {c['window']} | {c['algo'].upper()} | {c['reward']} | {_m(c['ensemble_sharpe'])} | "
                     f"{_test(c['vs_equal_weight'])} | {_p(c['vs_equal_weight']['p'])} | {bb['name']} "
                     f"({_m(bb['sharpe'])}) | {_test(c['vs_best'])} | {_p(c['vs_best']['p'])} |")
    better = sum(1 for c in cells if (c["vs_equal_weight"]["p"] or 1) < ALPHA and c["vs_equal_weight"]["delta"] > 0)
    worse = sum(1 for c in cells if (c["vs_equal_weight"]["p"] or 1) < ALPHA and c["vs_equal_weight"]["delta"] < 0)
    lines += ["", f"Cells whose seed ensemble has a higher Sharpe than Equal-Weight at p < {ALPHA}: {better} of "
              f"{len(cells)}; a lower one: {worse} of {len(cells)}.", ""]
    windows = list(dict.fromkeys(c["window"] for c in cells))
    algos = [a for a in ALGOS if any(c["algo"] == a for c in cells)]
    rewards = [r for r in REWARDS if any(c["reward"] == r for c in cells)]
    lines += ["Algorithm or reward: the mean seed Sharpe of each algorithm (over its rewards' cells) and of each "
              "reward (over the algorithms' cells), with the spread each factor makes (max − min of its means):", "",
              "| window | " + " | ".join(a.upper() for a in algos) + " | spread | " + " | ".join(rewards)
              + " | spread | Equal-Weight |", "|---|" + "---|" * (len(algos) + len(rewards) + 3)]
    for w in windows:
        by_a = [float(np.mean([c["sharpe"]["mean"] for c in cells if (c["window"], c["algo"]) == (w, a)]))
                for a in algos]
        by_r = [float(np.mean([c["sharpe"]["mean"] for c in cells if (c["window"], c["reward"]) == (w, r)]))
                for r in rewards]
        ew = base[w]["baselines"].get("equal_weight", {}).get("metrics", {}).get("sharpe")
        lines.append(f"| {w} | " + " | ".join(_m(x) for x in by_a) + f" | {_m(max(by_a) - min(by_a))} | "
                     + " | ".join(_m(x) for x in by_r) + f" | {_m(max(by_r) - min(by_r))} | {_m(ew)} |")
    lines += ["", "The classical baselines on the same windows (Sharpe / Ret % / MaxDD %):", ""]
    lines += ["| baseline | " + " | ".join(windows) + " |", "|---|" + "---|" * len(windows)]
    for key in BASELINES:
        if not all(key in base[w]["baselines"] for w in windows):
            continue
        m = [base[w]["baselines"][key]["metrics"] for w in windows]
        lines.append(f"| {base[windows[0]]['baselines'][key]['name']} | " + " | ".join(
            f"{_m(x['sharpe'])} / {_m(x['ret_pct'], 1)} / {_m(x['maxdd_pct'], 1)}" for x in m) + " |")
    return "\n".join(lines) + "\n"


def render_speed(runs: list[dict], manifest: dict) -> str:
    """Markdown of the ``rl-table-speed`` block of docs/performance.md: the training time of the grid per
    algorithm, from the run files (the wall and CPU seconds of ``learn``, the batched env's share of it)."""
    commits = sorted({r["commit"] for r in runs})
    lines = [f"Generated by `python benchmarks/rl_table.py tables --write docs/rl.md --perf docs/performance.md` "
             f"from the {len(runs)} result files of the RL table (benchmarks/results/rl_table/, "
             f"`{manifest.get('command', 'python benchmarks/rl_table.py run')}`, commit {', '.join(commits)}). "
             "Per training: `learn` wall and CPU seconds (`time.process_time`), the seconds in the batched env's "
             "`step_wait`/`reset` (its share of the training wall), and the rest of the job (data, envs, "
             "saving, the scored evaluation on the window):", "",
             "| algo | trainings | steps each | train wall h | train CPU h | CPU steps/s | env share | "
             "rest of job, wall s each |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for algo in ALGOS:
        rs = [r for r in runs if r["algo"] == algo]
        if not rs:
            continue
        wall = sum(r["timing"]["train_wall_s"] for r in rs)
        cpu = sum(r["timing"]["train_cpu_s"] for r in rs)
        env = sum(r["timing"]["env_wall_s"] for r in rs)
        steps = sum(r["timesteps_trained"] for r in rs)
        rest = sum(r["timing"]["job_wall_s"] - r["timing"]["train_wall_s"] for r in rs) / len(rs)
        lines.append(f"| {algo.upper()} | {len(rs)} | {'/'.join(f'{x:,}' for x in sorted({r['timesteps_trained'] for r in rs}))} "
                     f"| {wall / 3600:.2f} | {cpu / 3600:.2f} | {steps / cpu:,.0f} | {100 * env / wall:.1f} % | "
                     f"{rest:.1f} |")
    sessions = manifest.get("sessions") or []
    if sessions:
        loads = [x for s in sessions for x in (s["load_avg_start"], s["load_avg_end"])]
        lines += ["", f"The whole grid: {sum(s['wall_s'] for s in sessions) / 3600:.2f} h wall in {len(sessions)} "
                  f"session(s) with {'/'.join(str(s['jobs']) for s in sessions)} worker process(es) on this 2-core "
                  f"machine, 1-min load average {min(loads):.1f}–{max(loads):.1f} (read at each session's start and end)."]
    return "\n".join(lines) + "\n"


def tables(a: argparse.Namespace) -> int:
    runs, base, manifest = load_results(Path(a.results))
    body = render(runs, base, manifest, Path(a.results))
    if a.check or a.write:
        from _common import write_or_check

        rc = write_or_check(a.check or a.write, BLOCK, body, bool(a.check))
        if a.perf:
            rc = max(rc, write_or_check(a.perf, SPEED_BLOCK, render_speed(runs, manifest), bool(a.check)))
        return rc
    print(body)
    if a.perf:
        print(render_speed(runs, manifest))
    return 0


# ------------------------------------------------------------------------------------------ ship
#: where ``ship`` writes the example policy (``quantgym bench --agent sb3:examples/rl_policy``)
SHIP_DIR = ROOT / "examples" / "rl_policy"


def strip_optimizer_state(model: Any) -> int:
    """Empty the state (the running moment estimates of Adam or RMSprop) of every torch optimizer ``model`` saves;
    return how many.

    The weights and the hyperparameters stay; SB3's ``load`` accepts an optimizer with no state (it is what
    a freshly built optimizer saves), and prediction never reads it. Continued training would restart
    Adam's moments. This divides the size of a saved model by about three.
    """
    from operator import attrgetter

    import torch

    names, _ = model._get_torch_save_params()
    n = 0
    for name in names:
        obj = attrgetter(name)(model)
        if isinstance(obj, torch.optim.Optimizer):
            obj.state.clear()
            n += 1
    return n


def ship(a: argparse.Namespace) -> int:
    """Copy the best run on ``--window`` (highest Sharpe over every algorithm, reward and seed) to ``--to``:
    its model without optimizer state, its rl_meta.json, shipped.json (which run, its metrics) and a
    README.md; the copy is evaluated again and must reproduce the run's metrics."""
    from quantgym.agents.registry import make_agent
    from quantgym.envs.portbench.rl.sb3 import ALGOS as SB3_ALGOS
    from quantgym.evaluation import evaluate

    runs, _, _ = load_results(Path(a.results))
    cand = [r for r in runs if r["window"] == a.window]
    if not cand:
        raise ValueError(f"no run on {a.window} in {a.results}")
    best = max(cand, key=lambda r: r["metrics"]["sharpe"])
    name = run_name(best["algo"], best["reward"], best["window"], best["seed"])
    src = Path(a.models) / name
    if not (src / "model.zip").exists():
        raise ValueError(f"{src / 'model.zip'} not found: the models of `run` are in --models")
    dst = Path(a.to)
    dst.mkdir(parents=True, exist_ok=True)
    model = SB3_ALGOS[best["algo"]].load(str(src / "model.zip"), device="cpu")
    n_opt = strip_optimizer_state(model)
    model.save(str(dst / "model.zip"))
    meta = json.loads((src / "rl_meta.json").read_text())
    meta["name"] = f"SB3-{best['algo'].upper()} s{best['seed']}"  # short: a column of the bench tables
    (dst / "rl_meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    res = evaluate(best["env_id"], make_agent(f"sb3:{dst}", task="portbench"), period=a.window)
    again = _metrics(res)
    for k in ("sharpe", "ret_pct", "maxdd_pct", "ceps"):
        if not math.isclose(again[k], best["metrics"][k], rel_tol=1e-9, abs_tol=1e-12):
            raise RuntimeError(f"the shipped copy gives {k} {again[k]!r} on {a.window}, the run {best['metrics'][k]!r}")
    same = sorted(r["metrics"]["sharpe"] for r in cand if (r["algo"], r["reward"]) == (best["algo"], best["reward"]))
    info = {"run": name, "algo": best["algo"], "reward": best["reward"], "seed": best["seed"],
            "env_id": best["env_id"], "window": a.window, "train_period": best["train_period"],
            "timesteps_trained": best["timesteps_trained"], "metrics": best["metrics"],
            "cell_sharpes": same, "candidates": len(cand), "commit": best["commit"],
            "bytes": {"original": (src / "model.zip").stat().st_size, "shipped": (dst / "model.zip").stat().st_size},
            "optimizers_emptied": n_opt}
    (dst / "shipped.json").write_text(json.dumps(info, indent=1) + "\n")
    m = best["metrics"]
    (dst / "README.md").write_text(f"""# A trained PortBench policy (stable-baselines3)

Generated by `python benchmarks/rl_table.py ship --window {a.window}` from the walk-forward RL table of
docs/rl.md (run `{name}`). Evaluate it beside the six classical baselines, no training
needed (extra `rl`, docs/rl.md "Install"):

    pip install -e ".[rl]"
    quantgym bench --tasks portbench --profiles balanced --periods {a.window} --agent sb3:examples/rl_policy

- **What it is:** {best['algo'].upper()} with the `{best['reward']}` reward on {best['env_id']}, seed {best['seed']},
  {best['timesteps_trained']:,} environment steps, trained on {best['train_period'][0]} to {best['train_period'][1]}
  with the evaluation windows and their lookback buffers cut out (walk-forward, docs/rl.md).
- **Its numbers on {a.window}:** Sharpe {m['sharpe']:.2f}, return {m['ret_pct']:.1f} %, MaxDD
  {m['maxdd_pct']:.1f} %, CEPS {m['ceps']:.3f}.
- **Chosen on that window:** it is the best of the table's {len(cand)} runs on {a.window} (every algorithm, reward and
  seed) by Sharpe on that same window, so its row overstates what one more seed would do. The seeds of its cell
  had Sharpe {', '.join(f'{x:.2f}' for x in same)}; docs/rl.md gives the cell's interquartile mean and interval.
- **Size:** {info['bytes']['shipped'] / 1e6:.1f} MB. The optimizer's state (its running moment estimates:
  RMSprop for A2C, Adam for PPO and SAC) is removed ({info['bytes']['original'] / 1e6:.1f} MB with it); the weights
  are the trained ones, and the copy reproduces the run's metrics exactly (checked by `ship` and by
  tests/rl/test_shipped_policy.py). Training it further restarts those estimates.
- Files: `model.zip` (SB3), `rl_meta.json` (action mode, reward, training record), `shipped.json` (which run,
  its metrics).
""")
    print(f"shipped {name} to {dst}: Sharpe {m['sharpe']:.3f}, {info['bytes']['shipped'] / 1e6:.2f} MB "
          f"(was {info['bytes']['original'] / 1e6:.2f} MB)")
    return 0


# ------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train and evaluate the grid (resumable)")
    r.add_argument("--out", default=str(RESULTS), help="folder of the per-run result files (committed)")
    r.add_argument("--models", default=str(ROOT / "results" / "rl_table_models"), help="folder of the models")
    r.add_argument("--algos", default=",".join(ALGOS))
    r.add_argument("--rewards", default=",".join(REWARDS))
    r.add_argument("--windows", default=",".join(WINDOWS))
    r.add_argument("--seeds", default=f"{SEEDS[0]}-{SEEDS[-1]}", help="A-B or a comma-separated list")
    r.add_argument("--timesteps", default=None, help="N for every algorithm, or ppo=N,sac=N,a2c=N "
                   f"(default {', '.join(f'{k}={v}' for k, v in TIMESTEPS.items())})")
    r.add_argument("--jobs", type=int, default=2, help="worker processes (one training each at a time)")
    r.add_argument("--env", default=ENV_ID)
    s = sub.add_parser("speed", help="CPU steps/s of each algorithm's training and the grid's estimated time")
    s.add_argument("--timesteps", type=int, default=8192)
    s.add_argument("--algos", default=",".join(ALGOS))
    s.add_argument("--window", default="covid_2020")
    s.add_argument("--env", default=ENV_ID)
    t = sub.add_parser("tables", help="render the block of docs/rl.md from the result files")
    t.add_argument("--results", default=str(RESULTS))
    g = t.add_mutually_exclusive_group()
    g.add_argument("--write", default=None, help=f"write the '{BLOCK}' block of this file")
    g.add_argument("--check", default=None, help=f"exit 1 when this file's '{BLOCK}' block differs")
    t.add_argument("--perf", default=None, help=f"also write (or check) the '{SPEED_BLOCK}' block of this file "
                   "(docs/performance.md): the grid's training time")
    h = sub.add_parser("ship", help="copy the best run on a window, without optimizer state, to examples/")
    h.add_argument("--results", default=str(RESULTS))
    h.add_argument("--models", default=str(ROOT / "results" / "rl_table_models"))
    h.add_argument("--window", default="normal_2024", choices=WINDOWS)
    h.add_argument("--to", default=str(SHIP_DIR))
    a = ap.parse_args(argv)
    try:
        if a.cmd == "run" and a.jobs < 1:
            raise ValueError(f"--jobs must be >= 1, got {a.jobs}")
        return {"run": run, "speed": speed, "tables": tables, "ship": ship}[a.cmd](a)
    except ValueError as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
