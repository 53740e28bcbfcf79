"""One run of a sweep: executed in a worker process (:func:`execute_run`, never raising for a failing run)
and its record file ``OUT/runs/<run_id>.json`` (:func:`write_record`, :func:`load_record`).

Every run evaluates with one BLAS thread (``threadpoolctl``), so results do not depend on the backend or on
how many runs share a machine. Record layout: :mod:`quantgym.sweep.runner`.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from quantgym.results import SummaryRow, to_jsonable
from quantgym.sweep.grid import RunSpec

RECORD_SCHEMA = "quantgym-sweep-run-v1"

#: worker-side shared data (set by the pool initializer, or resolved from the Ray object store)
_WORKER_DATA: Any = None


# --------------------------------------------------------------------------- tasks of env ids


def task_of(env_id: str) -> str:
    """The task name of an env id (:func:`quantgym.tasks.task_of`); ids of no quantgym task (any other
    Gymnasium env) give ``"other"``."""
    from quantgym.tasks import task_of as _task_of

    try:
        return _task_of(env_id).name
    except ValueError:
        return "other"


def sweep_hooks(task: str) -> Any:
    """The task's sweep hooks (its record's ``sweep``), or None: a generic episode is run."""
    from quantgym.tasks import get_task, load_ref

    if task == "other":
        return None
    ref = get_task(task).sweep
    return load_ref(ref) if ref else None


# --------------------------------------------------------------------------- one run (worker side)


def _episode(spec: RunSpec, policy: Any, data: Any) -> tuple[dict[str, Any], SummaryRow]:
    """One episode through :func:`quantgym.evaluation.evaluate` for a run of a task without sweep hooks: its
    :class:`~quantgym.evaluation.EvalResult` and summary row; an env of no quantgym task (any other Gymnasium
    env) gives its total reward, length and last ``info``."""
    from quantgym.evaluation import evaluate

    res = evaluate(spec.env_id, policy, seed=spec.seed, any_env=True, **dict(spec.env_kwargs))
    if res.task != "other":
        return res.to_dict(), res.summary_row()
    result = {"task": res.task, "agent": res.agent, "agent_key": res.agent_key, "env_id": spec.env_id,
              "profile": None, "period": res.period, **res.metrics,
              "final_info": {k: v for k, v in res.info.items() if not callable(v)}, "config": res.config}
    return result, SummaryRow(task=res.task, agent=res.agent_key, period=res.period)


def blind_label(name: str) -> str:
    """``name`` with `` (blind)``, as :meth:`quantgym.plan.EvalPlan.agent_label` labels a blind run."""
    from quantgym.plan import EvalPlan

    return EvalPlan([], env_kwargs={"blind": True}).agent_label(name)


def execute_run(spec_dict: dict[str, Any], data: Any = None, transcript_dir: str | None = None) -> dict[str, Any]:
    """Run one spec and return its JSON-only record (never raises for a failing run).

    Parameters
    ----------
    spec_dict : :meth:`RunSpec.to_dict` of the run.
    data : the task's shared data (PortBench: a :class:`PortBenchData`), or None to use the worker's
        pool-initialised data / the spec's data directory / the bundled data.
    transcript_dir : folder for the JSONL transcript of an ``openai:`` agent whose options set no
        ``transcript`` (:func:`~quantgym.agents.llm.transcript.transcript_path` with the run id:
        ``<task>-<model>-<run_id>.jsonl``; on a cluster, on the node that ran the task). Replay it with the
        agent spec ``replay:PATH``.

    Returns
    -------
    dict
        ``run_id, spec, task, status ("ok" | "error"), result, summary, error, timing``.
    """
    from threadpoolctl import threadpool_limits

    spec = RunSpec.from_dict(spec_dict)
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"schema": RECORD_SCHEMA, "run_id": spec.run_id, "spec": spec.to_dict(),
                           "task": None, "status": "error", "result": None, "summary": None, "error": None}
    try:
        rec["task"] = task_of(spec.env_id)
        with threadpool_limits(limits=1):
            from quantgym.agents.registry import AgentSpec, make_agent

            agent = AgentSpec.parse(spec.agent)
            options = dict(spec.agent_options)
            if transcript_dir and agent.scheme == "openai" and "transcript" not in options:
                from quantgym.agents.llm.transcript import transcript_path

                options["transcript"] = str(transcript_path(transcript_dir, rec["task"], agent.argument, spec.run_id))
                rec["transcript"] = options["transcript"]
            policy = make_agent(agent, **({} if rec["task"] == "other" else {"task": rec["task"]}), **options)
            hooks = sweep_hooks(rec["task"])
            if hooks is not None:
                result, row = hooks.run(spec, policy, data if data is not None else _WORKER_DATA)
            else:
                result, row = _episode(spec, policy, data)
        if spec.env_kwargs.get("blind") is True:  # the agent saw the blind view (docs/blind.md): its label says so
            result["agent"] = blind_label(result.get("agent") or spec.agent)
            row.agent = blind_label(row.agent)
        rec["result"] = to_jsonable(result)
        rec["summary"] = to_jsonable(row)
        rec["status"] = "ok"
    except Exception as exc:  # a failing run is recorded, never fatal for the grid
        rec["error"] = {"type": type(exc).__name__, "message": str(exc), "traceback": traceback.format_exc()}
    rec["timing"] = {"wall_s": time.perf_counter() - t0, **where()}
    return json.loads(json.dumps(rec, allow_nan=False, default=str))


def where() -> dict[str, Any]:
    """Where this process runs: ``host``, ``pid`` and, inside a Ray worker, ``node`` (the Ray node id, hex;
    several raylets on one host have one host name but distinct node ids), else ``node`` None."""
    node = None
    ray = sys.modules.get("ray")  # never imported here: only a Ray worker has it loaded and initialised
    if ray is not None and ray.is_initialized():
        node = ray.get_runtime_context().get_node_id()
    return {"host": socket.gethostname(), "pid": os.getpid(), "node": node}


#: a Ray worker's resolved shared data: ObjectRef hex -> object (the latest sweep's only)
_RAY_DATA: dict[str, Any] = {}


def execute_ray_run(spec_dict: dict[str, Any], data_box: list | None = None,
                    transcript_dir: str | None = None) -> dict[str, Any]:
    """:func:`execute_run` in a Ray worker, with the shared data resolved once per worker process.

    ``data_box`` is ``[ObjectRef]`` (or None): a reference inside a list is not resolved by Ray before the
    call, so this worker fetches the object once and keeps it for the sweep's next runs. A task's
    per-dataset caches (PortBench's row table, keyed by the data object) then survive from run to run, as
    they do in a local pool worker; a reference resolved by Ray per call would be a new object each run and
    rebuild them every time.
    """
    data = None
    if data_box:
        import ray

        ref = data_box[0]
        key = ref.hex()
        if key not in _RAY_DATA:
            _RAY_DATA.clear()  # one sweep's data per worker; the previous one is released
            _RAY_DATA[key] = ray.get(ref)
        data = _RAY_DATA[key]
    return execute_run(spec_dict, data, transcript_dir)


def error_record(spec: RunSpec, exc: BaseException) -> dict[str, Any]:
    """Record of a run whose worker died (crash, OOM kill, Ray task failure)."""
    return {"schema": RECORD_SCHEMA, "run_id": spec.run_id, "spec": spec.to_dict(), "task": task_of(spec.env_id),
            "status": "error", "result": None, "summary": None,
            "error": {"type": type(exc).__name__, "message": str(exc),
                      "traceback": "".join(traceback.format_exception(exc))},
            "timing": {"wall_s": None, "host": platform.node(), "pid": None, "node": None}}


def init_worker(data: Any, environ: dict[str, str] | None = None) -> None:
    """Pool initializer: the shared data, and the driver's environment at pool start (the fork server
    may be older than a variable such as ``OPENAI_API_KEY`` set later in the driver)."""
    global _WORKER_DATA
    _WORKER_DATA = data
    if environ:
        os.environ.update(environ)


# --------------------------------------------------------------------------- run files


def runs_dir(out_dir: Path) -> Path:
    return Path(out_dir) / "runs"


def write_record(out_dir: Path, rec: dict[str, Any]) -> Path:
    """Write ``OUT/runs/<run_id>.json`` atomically (write a temp file, then rename)."""
    d = runs_dir(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{rec['run_id']}.json"
    tmp = d / f".{rec['run_id']}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(rec, indent=1, allow_nan=False))
    os.replace(tmp, path)
    return path


def load_record(out_dir: Path, run_id: str) -> tuple[dict[str, Any] | None, str | None]:
    """The stored record of ``run_id`` and, when its file exists but cannot be read as a run record (a torn
    write, a foreign file), why (one line); ``(None, None)`` when there is no file."""
    path = runs_dir(out_dir) / f"{run_id}.json"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{type(exc).__name__}: {exc.strerror or exc}"
    try:
        rec = json.loads(text)
    except ValueError as exc:
        return None, f"not JSON: {' '.join(str(exc).split())}"
    if not isinstance(rec, dict) or rec.get("run_id") != run_id:
        return None, "not the record of this run"
    return rec, None


def read_record(out_dir: Path, run_id: str) -> dict[str, Any] | None:
    """The stored record of ``run_id``, or None when absent or unreadable (:func:`load_record` says why)."""
    return load_record(out_dir, run_id)[0]
