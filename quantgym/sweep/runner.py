"""Execute a sweep grid on a backend, resumably, and write the common results schema.

Layout of the output folder ``OUT`` (the schema of :mod:`quantgym.results`):

- ``OUT/sweep.json``: the grid and its expanded run list (run id -> spec);
- ``OUT/runs/<run_id>.json``: one record per finished run, written as soon as the run
  ends (atomic rename): ``{"run_id", "spec", "task", "status": "ok"|"error", "result",
  "summary", "error", "timing"}``. ``result`` is JSON only (numbers already converted), so
  the two backends write identical files apart from ``timing``;
- ``OUT/summary.csv`` and ``OUT/results.json``: every run of the grid in the common schema
  (:mod:`quantgym.results`), rebuilt from the run files at the end.

Backends
--------
``local``: a :class:`concurrent.futures.ProcessPoolExecutor` (``forkserver`` start method,
which preloads the env modules once; ``spawn`` where fork is unavailable), one worker per
CPU by default; a task's shared data (PortBench's data set, through its sweep hooks) is loaded once in the driver and handed to each worker
once by the pool initializer. As with any ``multiprocessing`` code, a script that calls
:func:`run_sweep` must guard its entry point with ``if __name__ == "__main__":``. ``ray``: Ray Core remote tasks; ``ray.init(address=...)``
connects to a running cluster (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``) or
starts a local one (``None``). The data is ``ray.put`` once and its ``ObjectRef`` is passed
to every task inside a list, never the object by value (Ray's "passing the same large argument
by value" anti-pattern); each worker process resolves it once (``ray.get``: the shared, zero-copy
object) and keeps it for its next runs, so per-dataset caches built on it survive from run to run.
Each run records the Ray node it ran on (``timing.node``); ``backend_info["nodes"]`` lists the
cluster's nodes as seen at the start (address, CPUs, custom resources) with whether each was alive
at the end. A run whose worker process or node dies (``ray.get`` raises) is submitted again, up to
``retries`` times, and each failure is kept in its record (``retries``).

Every run evaluates with one BLAS thread (``threadpoolctl``), so results do not depend on
the backend or on how many runs share a machine.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from quantgym.results import SectionResult, SummaryRow, write_results
from quantgym.sweep.grid import Grid, RunSpec
from quantgym.sweep.runs import (RECORD_SCHEMA, init_worker, error_record, execute_ray_run,  # noqa: F401
                                 execute_run, load_record, read_record, runs_dir, sweep_hooks, task_of, write_record)

BACKENDS = ("local", "ray")


class SweepError(RuntimeError):
    """A sweep could not start (bad backend, missing extra, unreadable data)."""


# --------------------------------------------------------------------------- backends


def _default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


#: modules the fork server imports once, so each pool worker starts without re-importing them
PRELOAD = ("quantgym.sweep.runner", "quantgym.evaluation")


def _preload() -> tuple[str, ...]:
    """:data:`PRELOAD` and the modules of every task's sweep hooks."""
    from quantgym.tasks import iter_with, load_ref

    return PRELOAD + tuple(m for t in iter_with("sweep") for m in getattr(load_ref(t.sweep), "preload", ()))


def _pool_context() -> Any:
    """``forkserver`` (fork-safe: the server is single-threaded; preloads :func:`_preload`), else ``spawn``."""
    try:
        ctx = mp.get_context("forkserver")
    except ValueError:  # pragma: no cover - platforms without fork
        return mp.get_context("spawn")
    from multiprocessing import forkserver

    if getattr(forkserver._forkserver, "_forkserver_pid", None) is None:  # not started yet: set what it preloads
        ctx.set_forkserver_preload(list(_preload()))
    return ctx


def _run_local(todo: Sequence[RunSpec], data: Any, workers: int | None, on_result: Callable[[dict], None],
               transcript_dir: str | None = None) -> None:
    n = max(1, min(workers or _default_workers(), len(todo)))
    ctx = _pool_context()
    with cf.ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=init_worker, initargs=(data, dict(os.environ))) as pool:
        futs = {pool.submit(execute_run, s.to_dict(), None, transcript_dir): s for s in todo}
        for fut in cf.as_completed(futs):
            spec = futs[fut]
            try:
                rec = fut.result()
            except Exception as exc:  # BrokenProcessPool: a worker died
                rec = error_record(spec, exc)
            on_result(rec)


_REMOTE: dict[str, Any] = {}


def _remote_execute(ray: Any) -> Any:
    """``execute_ray_run`` as a Ray remote function, defined once per process (Ray anti-pattern: redefining).
    ``max_retries=0``: the driver resubmits a run whose worker or node died and records it (:func:`_run_ray`)."""
    if "fn" not in _REMOTE:
        _REMOTE["fn"] = ray.remote(num_cpus=1, max_retries=0)(execute_ray_run)
    return _REMOTE["fn"]


#: [project choice] times a Ray run is submitted again after its worker or node died (docs/sweeps.md)
RAY_RETRIES = 2


def _ray_nodes(ray: Any) -> dict[str, dict[str, Any]]:
    """Node id -> address, name, alive, CPUs of every node the cluster knows (dead ones included)."""
    try:
        nodes = ray.nodes()
    except Exception:  # noqa: BLE001 - informational only (e.g. a client connection that cannot list nodes)
        return {}
    builtin = {"CPU", "GPU", "memory", "object_store_memory"}
    return {n["NodeID"]: {"address": n.get("NodeManagerAddress"), "name": n.get("NodeName"),
                          "alive": bool(n.get("Alive")), "cpus": (n.get("Resources") or {}).get("CPU", 0.0),
                          "resources": sorted(k for k in (n.get("Resources") or {})  # custom tags (--resources)
                                              if k not in builtin and not k.startswith("node:"))}
            for n in nodes}


def _run_ray(todo: Sequence[RunSpec], data: Any, workers: int | None, address: str | None,
             on_result: Callable[[dict], None], ray_init: dict[str, Any] | None = None,
             transcript_dir: str | None = None, retries: int = RAY_RETRIES) -> dict[str, Any]:
    try:
        import ray
    except ImportError as exc:
        raise SweepError("backend 'ray' needs the 'distributed' extra: pip install 'quantgym[distributed]'") from exc
    started = False
    starts_local = address == "local" or (not address and not os.environ.get("RAY_ADDRESS"))
    if not ray.is_initialized():
        kw = dict(ray_init or {})
        if starts_local:
            kw.setdefault("include_dashboard", False)
        kw.setdefault("log_to_driver", False)
        try:
            ray.init(address=address or None, **kw)
        except Exception as exc:  # no cluster at that address, bad kwargs...
            raise SweepError(f"could not {'start' if starts_local else 'connect to'} Ray "
                             f"(address={address!r}): {type(exc).__name__}: {exc}") from exc
        started = True
    info = {"address": address, "started_local": started and starts_local,
            "cluster_cpus": ray.cluster_resources().get("CPU"), "nodes": _ray_nodes(ray)}
    try:
        data_ref = ray.put(data) if data is not None else None  # once; tasks get the reference
        box = [data_ref] if data_ref is not None else None  # in a list: each worker resolves it once
        remote = _remote_execute(ray)
        queue = list(todo)
        limit = workers or len(queue) or 1
        pending: dict[Any, RunSpec] = {}
        failures: dict[str, list[dict[str, str]]] = {}
        while queue or pending:
            while queue and len(pending) < limit:
                spec = queue.pop(0)
                pending[remote.remote(spec.to_dict(), box, transcript_dir)] = spec
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                spec = pending.pop(ref)
                try:
                    rec = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - execute_run never raises: the worker or its node died
                    tries = failures.setdefault(spec.run_id, [])
                    tries.append({"type": type(exc).__name__, "message": " ".join(str(exc).split())[:300]})
                    if len(tries) <= retries:  # again, first in line, on whichever node has room
                        queue.insert(0, spec)
                        continue
                    rec = error_record(spec, exc)
                if spec.run_id in failures:
                    rec["retries"] = failures[spec.run_id]
                on_result(rec)
        for node, now in _ray_nodes(ray).items():  # a dead node no longer reports its resources: keep the first view
            info["nodes"].setdefault(node, now)["alive"] = now["alive"]
    finally:
        if started:
            ray.shutdown()
    info["retried"] = {k: len(v) for k, v in failures.items()}
    return info


# --------------------------------------------------------------------------- the sweep


@dataclass
class SweepOutcome:
    """What :func:`run_sweep` did: counts, the output folder and every run's record (grid order)."""

    out_dir: Path
    n_runs: int
    executed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0
    backend_info: dict[str, Any] = field(default_factory=dict)
    unreadable: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def load_shared_data(specs: Iterable[RunSpec]) -> Any:
    """Load a task's shared data once if any run needs it (None otherwise): the runs of a task whose sweep
    hooks have ``load_data`` (PortBench) share one data set.

    Raises
    ------
    SweepError
        Runs with different ``data`` directories in one sweep, or two tasks that each share data.
    """
    specs = list(specs)
    tasks = {t for t in (task_of(s.env_id) for s in specs) if hasattr(sweep_hooks(t), "load_data")}
    if not tasks:
        return None
    if len(tasks) > 1:
        raise SweepError(f"one sweep shares the data of one task; got {sorted(tasks)}")
    task = next(iter(tasks))
    needed = {s.data for s in specs if task_of(s.env_id) == task}
    if len(needed) > 1:
        raise SweepError(f"one sweep uses one {task} data set; got {sorted(map(str, needed))}")
    return sweep_hooks(task).load_data(next(iter(needed)))


def _env_params(env_id: str) -> set[str] | None:
    """The keyword names the env class of ``env_id`` accepts (None: any, or unknown)."""
    import inspect

    import gymnasium as gym

    from quantgym.tasks import load_ref

    try:
        ep = gym.spec(env_id).entry_point
        cls = load_ref(ep) if isinstance(ep, str) else ep
        params = inspect.signature(cls).parameters.values()
    except (gym.error.Error, ImportError, AttributeError, TypeError, ValueError):
        return None  # an entry point that cannot be inspected: no name check here, its runs report any error
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def check_runs(specs: Iterable[RunSpec], data: Any = None) -> Any:
    """Validate every run of a sweep before the first one starts, and load the task's shared data once.

    Checks each env id (a quantgym task's, or another registered Gymnasium id), each env kwarg name, each
    agent spec for its task (:func:`quantgym.agents.registry.check_agent`, no agent is built), the shared
    data (unless ``data`` is given) and then each run with its task's sweep hook ``validate(spec, data)``
    (e.g. a task's period names).

    Returns
    -------
    The shared data (:func:`load_shared_data`, or ``data``).

    Raises
    ------
    SweepError
        One line naming the first bad value and what is valid.
    """
    import gymnasium as gym

    from quantgym.agents.registry import check_agent
    from quantgym.tasks import env_ids, register_envs

    specs = list(specs)
    register_envs()
    for env_id in dict.fromkeys(s.env_id for s in specs):
        if task_of(env_id) == "other" and env_id not in gym.registry:
            raise SweepError(f"unknown env id {env_id!r}; quantgym ids: {', '.join(env_ids())} "
                             "(or any registered Gymnasium id)")
    for env_id, key in dict.fromkeys((s.env_id, k) for s in specs for k in s.env_kwargs):
        names = _env_params(env_id)
        if names is not None and key not in names and key == "blind":
            raise SweepError(f"blind: {env_id} has no blind mode (docs/blind.md); blind runs are for the "
                             "PortBench and Quant-Arena ids")
        if names is not None and key not in names:
            raise SweepError(f"env kwarg {key!r} is not accepted by {env_id}; valid: {', '.join(sorted(names))}")
    for spec, task in dict.fromkeys((s.agent, task_of(s.env_id)) for s in specs):
        try:
            check_agent(spec, None if task == "other" else task)
        except ValueError as exc:
            raise SweepError(str(exc)) from None
    import warnings

    with warnings.catch_warnings(record=True) as caught:  # shown only when the sweep can start
        warnings.simplefilter("always")
        if data is None:
            try:
                data = load_shared_data(specs)
            except (ValueError, OSError) as exc:
                raise SweepError(f"data: {exc}") from None
        for s in specs:
            check = getattr(sweep_hooks(task_of(s.env_id)), "validate", None)
            if check is not None:
                try:
                    check(s, data)
                except ValueError as exc:
                    raise SweepError(f"{s.env_id}: {exc}") from None
    for w in caught:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return data


def run_sweep(grid: Grid, out_dir: str | Path, *, backend: str = "local", address: str | None = None,
              workers: int | None = None, retry_failed: bool = True,
              on_result: Callable[[dict[str, Any]], None] | None = None,
              ray_init: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
              data: Any = None, retries: int = RAY_RETRIES) -> SweepOutcome:
    """Run every run of ``grid`` not yet finished in ``out_dir``; write run files and the results.

    Parameters
    ----------
    grid : the grid (:func:`~quantgym.sweep.grid.load_grid`).
    out_dir : output folder; existing ``runs/*.json`` of the same run ids are reused (resume).
    backend : ``"local"`` (process pool, default) or ``"ray"``.
    address : Ray only: ``None`` / ``"local"`` starts a local Ray, ``"auto"`` or an address connects to a
        cluster. If Ray is already initialised in this process it is used as is.
    workers : local: pool size (default: CPUs available); ray: max tasks in flight (default: all).
    retry_failed : run again the runs whose stored record has ``status == "error"`` (default True);
        ``False`` keeps their error records.
    on_result : called in the driver with each new record (progress bars).
    ray_init : extra ``ray.init`` kwargs (``runtime_env``, ``num_cpus``...).
    retries : Ray only: how many times a run is submitted again when its worker process or its node dies
        (``ray.get`` raises: ``WorkerCrashedError``, ``NodeDiedError``, a lost result); each failure is kept in
        the run's record under ``retries`` and the run ids in ``backend_info["retried"]``. A run that fails
        in its own code is never retried (it returns an error record). Default :data:`RAY_RETRIES`.
    meta : extra entries for ``results.json``'s ``meta``.
    data : already loaded shared data of the task whose runs share one (PortBench: a
        :class:`~quantgym.envs.portbench.data.PortBenchData`; default: loaded once from the grid's ``data``
        directory or the bundled data).

    Returns
    -------
    SweepOutcome

    Raises
    ------
    SweepError
        Unknown backend, missing Ray, inconsistent data directories.
    """
    if backend not in BACKENDS:
        raise SweepError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise SweepError(f"retries must be an integer >= 0, got {retries!r}")
    if backend == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:  # before anything is written
            raise SweepError("backend 'ray' needs the 'distributed' extra: pip install 'quantgym[distributed]'")
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    specs = grid.expand()
    (out / "sweep.json").write_text(json.dumps(
        {"grid": grid.to_dict(), "runs": {s.run_id: s.to_dict() for s in specs}}, indent=1))
    todo, skipped, unreadable = [], [], []
    for s in specs:
        rec, problem = load_record(out, s.run_id)
        if problem is not None:  # a torn or foreign file: the run runs again, and the sweep says so
            unreadable.append({"run_id": s.run_id, "path": str(runs_dir(out) / f"{s.run_id}.json"), "error": problem})
        if rec is not None and (rec.get("status") == "ok" or (rec.get("status") == "error" and not retry_failed)):
            skipped.append(s.run_id)
        else:
            todo.append(s)
    outcome = SweepOutcome(out_dir=out, n_runs=len(specs), skipped=skipped, unreadable=unreadable,
                           warnings=[f"unreadable run record {u['path']} ({u['error']}): run {u['run_id'][:8]} "
                                     "runs again" for u in unreadable])

    def _done(rec: dict[str, Any]) -> None:
        write_record(out, rec)
        outcome.executed.append(rec["run_id"])
        if on_result is not None:
            on_result(rec)

    if todo:
        if data is None:
            data = load_shared_data(todo)
        tdir = str((out / "transcripts").resolve())
        if backend == "local":
            _run_local(todo, data, workers, _done, tdir)
            outcome.backend_info = {"workers": max(1, min(workers or _default_workers(), len(todo)))}
        else:
            outcome.backend_info = _run_ray(todo, data, workers, address, _done, ray_init, tdir, retries)
    outcome.records = [read_record(out, s.run_id) or error_record(s, RuntimeError("run record missing"))
                       for s in specs]
    outcome.failed = [r["run_id"] for r in outcome.records if r.get("status") != "ok"]
    outcome.elapsed_s = time.perf_counter() - t0
    write_sweep_results(out, outcome.records, meta={
        "command": "sweep", "grid": grid.to_dict(), "backend": backend, "backend_info": outcome.backend_info,
        "n_runs": outcome.n_runs, "n_executed": len(outcome.executed), "n_skipped": len(skipped),
        "n_failed": len(outcome.failed), "n_retried": len(outcome.backend_info.get("retried") or {}),
        "unreadable_records": unreadable, "warnings": outcome.warnings,
        "elapsed_s": outcome.elapsed_s, **(meta or {})})
    return outcome


# --------------------------------------------------------------------------- results in the common schema


def _gates(records: list[dict[str, Any]]) -> dict[str, bool]:
    """Run id -> gate set by the tasks' sweep hooks from the whole grid (normal_2024's gate, spec portbench §7.2)."""
    out: dict[str, bool] = {}
    for task in dict.fromkeys(r.get("task") for r in records if r.get("status") == "ok"):
        hooks = sweep_hooks(task or "other")
        if hooks is not None and hasattr(hooks, "gates"):
            out.update(hooks.gates([r for r in records if r.get("status") == "ok" and r.get("task") == task]))
    return out


def sections_from_records(records: list[dict[str, Any]]) -> list[SectionResult]:
    """Group run records by task into :class:`SectionResult` (ok runs -> rows + runs; failures -> extra)."""
    gates = _gates(records)
    sections: dict[str, SectionResult] = {}
    for r in records:
        task = r.get("task") or "other"
        sec = sections.setdefault(task, SectionResult(task=task, extra={"failed": []}))
        if r.get("status") != "ok":
            sec.extra["failed"].append({"run_id": r["run_id"], "spec": r["spec"], "error": r.get("error")})
            continue
        row = SummaryRow(**r["summary"])
        if r["run_id"] in gates:
            row.gate = gates[r["run_id"]]
        sec.rows.append(row)
        sec.runs.append({**r["result"], "run_id": r["run_id"], "seed": r["spec"]["seed"],
                         "agent_spec": r["spec"]["agent"], "gate": row.gate})
    return list(sections.values())


def write_sweep_results(out_dir: Path, records: list[dict[str, Any]], meta: dict[str, Any]) -> Path:
    """``summary.csv`` + ``results.json`` of a sweep from its run records (grid order)."""
    return write_results(Path(out_dir), sections_from_records(records), meta=meta)
