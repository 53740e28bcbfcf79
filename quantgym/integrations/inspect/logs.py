"""Inspect logs of quantgym tasks read back as quantgym results (``quantgym report LOGDIR``).

Each sample's score holds the episode's summary rows, its ``results.json`` runs and plan
(:func:`quantgym.integrations.inspect.tasks.run_episode`). A task whose episodes' run dicts are JSON data
(Market-Bench's attempts, a Quant-Arena research run) has its rows rebuilt from all of the log's episodes
by its eval adapter's ``section``, so a log gives the rows ``quantgym eval`` writes for the same episodes
(Market-Bench: one row of pass@k over the rounds); otherwise each episode's own rows are kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: the file names of Inspect logs (binary ``.eval`` and JSON logs)
LOG_SUFFIXES = (".eval", ".json")


def log_files(path: Path) -> list[Path]:
    """The Inspect log files at ``path`` (a log file, or a folder's logs, newest last by name)."""
    if path.is_file():
        return [path] if path.suffix in LOG_SUFFIXES else []
    return sorted(p for p in path.glob("*") if p.suffix in LOG_SUFFIXES and p.name != "results.json"
                  and not p.name.startswith("."))


class _Agent:
    """What a task's result section reads of an agent, for episodes read back from a log."""

    def __init__(self, name: str, model: str | None):
        self.name = name
        self.engine = type("Engine", (), {"config": type("Config", (), {"model": model})()})()

    def usage(self) -> dict[str, Any]:
        return {"transcript": None}


def _episodes(log: Any) -> list[dict[str, Any]]:
    out = []
    for s in log.samples or []:
        for score in (s.scores or {}).values():
            md = score.metadata or {}
            if isinstance(md, dict) and "rows" in md and "task" in md:
                out.append(md)
                break
    return out


def _regrouped(task: str, eps: list[dict[str, Any]]) -> tuple[list[dict], list[dict]] | None:
    """(rows, runs) of the task's section over all ``eps``, or None when their run dicts are not kept."""
    from quantgym.plan import EvalContext, EvalPlan
    from quantgym.results import to_jsonable
    from quantgym.tasks import get_task, load_ref

    record = get_task(task)
    if record.eval is None or not eps or any(e.get("run") is None for e in eps):
        return None
    adapter = load_ref(record.eval)
    first = eps[0]["rows"][0]
    model = str(first.get("agent") or "").removeprefix("inspect:")
    agent = _Agent(str(first.get("agent")), model or None)
    plan = EvalPlan.from_dict({**eps[0]["plan"], "validated": False})
    import tempfile

    with tempfile.TemporaryDirectory(prefix="quantgym-report-") as tmp:
        sec = adapter.section([dict(e["run"]) for e in eps], agent, plan, EvalContext(Path(tmp), None, lambda: agent))
    rows = [{**{k: v for k, v in vars(r).items() if k != "extra"}, **r.extra} for r in sec.rows]
    return to_jsonable(rows), to_jsonable(sec.runs)


def read_logs(path: str | Path) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]] | None:
    """(summary rows, a ``results.json``-shaped document, warnings) of the quantgym tasks in the Inspect
    logs at ``path``; None when there is no Inspect log there.

    Raises
    ------
    ImportError
        One line naming the extra, when there are logs but Inspect AI is not installed.
    """
    p = Path(path)
    files = log_files(p)
    if not files:
        return None
    from quantgym.integrations.inspect import require_inspect

    require_inspect()
    from inspect_ai.log import read_eval_log

    rows: list[dict[str, Any]] = []
    tasks: dict[str, dict[str, Any]] = {}
    commands: list[str] = []
    created = ""
    warnings: list[str] = []
    for f in files:
        try:
            log = read_eval_log(str(f))
        except Exception as exc:  # noqa: BLE001 - a file that is no Inspect log: said, not fatal
            if f.suffix == ".eval":
                warnings.append(f"{f.name}: not a readable Inspect log ({type(exc).__name__}); skipped")
            continue
        eps = _episodes(log)
        if not eps:
            continue
        created = created or str(log.eval.created)
        commands.append(f"inspect eval {log.eval.task} --model {log.eval.model}")
        if log.status != "success":
            warnings.append(f"{f.name}: Inspect run status {log.status}; its scored samples are read")
        by_task: dict[str, list[dict]] = {}
        for e in eps:
            by_task.setdefault(e["task"], []).append(e)
        for task, group in by_task.items():
            again = _regrouped(task, group)
            if again is None:
                task_rows = [r for e in group for r in e["rows"]]
                runs = [r for e in group for r in e["runs"]]
            else:
                task_rows, runs = again
            rows += task_rows
            entry = tasks.setdefault(task, {"runs": []})
            entry["runs"] += runs
    if not rows:
        return None
    doc = {"meta": {"command": "; ".join(dict.fromkeys(commands)), "source": "inspect"}, "created": created,
           "tasks": tasks}
    return rows, doc, warnings


__all__ = ["LOG_SUFFIXES", "log_files", "read_logs"]
