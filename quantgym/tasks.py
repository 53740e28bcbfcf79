"""The task registry: one record per task, and the only place that lists the tasks.

A task (PortBench, its static QA layer, Quant-Arena, Market-Bench, or your own) lives in one folder
and describes itself with a :class:`Task` record. The generic layers iterate over the registry and
name no task:

- :mod:`quantgym.envs` registers every record's env ids with Gymnasium;
- ``quantgym bench`` runs every record's ``bench`` section (:mod:`quantgym.cli`);
- ``quantgym eval`` asks the record's ``eval`` adapter for its episodes and its result section
  (:mod:`quantgym.evaluation`);
- an LLM agent for a task is the record's ``llm`` adapter class (:mod:`quantgym.agents.llm.agents`);
- ``quantgym sweep`` / ``report`` find a run's task with :func:`task_of` and the record's ``report``
  section (:mod:`quantgym.sweep`);
- the CLI adds the record's ``commands``.

Every reference is a lazy ``"module:attribute"`` (or ``"module"``) string, so ``import quantgym``
imports no task code. A new task touches its own folder and adds one line to :data:`BUILTIN`. A task
from outside the package is added by :func:`register_task` (this process only), or, so that every
process sees it (``quantgym`` commands, sweep workers), by an entry point in the group
``quantgym.tasks`` or the environment variable ``QUANTGYM_TASKS`` (comma-separated
``"module:attribute"`` references of :class:`Task` records).

Example::

    from quantgym.tasks import Task, register_task
    register_task(Task(name="toy", title="Toy", envs={"Toy-v0": ("mypkg.toy:ToyEnv", {})},
                       bench="mypkg.toy_bench", eval="mypkg.toy_eval:ADAPTER"))
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

#: the built-in tasks, one line each: "module:attribute" of their :class:`Task` record (order = order
#: of the bench report, the eval sections and the leaderboard)
BUILTIN: tuple[str, ...] = (
    "quantgym.envs.portbench.task:TASK",
    "quantgym.envs.portbench.task:STATIC_QA_TASK",
    "quantgym.envs.quant_arena.task:TASK",
    "quantgym.envs.market_bench.task:TASK",
)


#: kinds of :class:`TaskOption` values (what the command line turns the typed text into)
OPTION_KINDS = ("list", "str", "multi", "int", "int_list", "flag")


@dataclass(frozen=True)
class TaskOption:
    """One of a task's own command-line options (``quantgym bench`` or ``quantgym eval``), declared in its
    record (:attr:`Task.bench_options`, :attr:`Task.eval_options`); the generic commands add them, so they
    name no task.

    Attributes
    ----------
    flag : the option as typed, e.g. ``"--profiles"``. Two tasks may declare the same flag with the same key
        and kind (their help texts are joined).
    key : where the value goes: ``ctx.options[key]`` of a bench section, ``EvalPlan.options[key]`` of an eval
        plan, or with ``agent=True`` the task's LLM agent's option ``key``. Absent when not given.
    help : what the option means for this task; ``--help`` shows it as ``"<title>: <help>"``.
    kind : ``"list"`` (comma-separated -> list of str), ``"str"``, ``"multi"`` (repeatable -> list of str),
        ``"int"``, ``"int_list"`` (comma-separated -> list of int) or ``"flag"`` (``--x/--no-x`` -> bool).
    metavar : the value's name in ``--help`` (None: typer's default).
    agent : eval only: an option of the task's LLM agent (``quantgym.agents.llm.make_openai_agent``), not of
        the plan.
    implies : eval only: further plan options that giving this one sets, e.g. ``{"all_attempts": True}``.
    short : a one-letter alias such as ``"-p"`` (None: none).
    """

    flag: str
    key: str
    help: str
    kind: str = "list"
    metavar: str | None = None
    agent: bool = False
    implies: Mapping[str, Any] = field(default_factory=dict)
    short: str | None = None

    def __post_init__(self) -> None:
        if not self.flag.startswith("--") or self.kind not in OPTION_KINDS:
            raise ValueError(f"TaskOption {self.flag!r}: the flag must start with '--' and the kind be one of "
                             f"{', '.join(OPTION_KINDS)}")

    def parse(self, raw: Any) -> Any:
        """The value of the typed ``raw`` (None: not given -> None).

        Raises
        ------
        ValueError
            One line naming the flag, e.g. a non-integer in an ``int_list``.
        """
        if raw is None:
            return None
        if self.kind == "multi":
            return [str(v) for v in raw] or None
        if self.kind in ("list", "int_list"):
            items = [v.strip() for v in str(raw).split(",") if v.strip()]
            if self.kind == "list":
                return items or None
            try:
                return [int(v) for v in items] or None
            except ValueError:
                raise ValueError(f"{self.flag} takes integers, comma-separated; got {raw!r}") from None
        return raw


@dataclass(frozen=True)
class Task:
    """What a task contributes to the generic layers.

    Attributes
    ----------
    name : task key, as written in ``summary.csv``'s ``task`` column and accepted by ``--tasks``.
    title : display name (report headings).
    envs : env id -> (Gymnasium entry point ``"module:Class"``, default kwargs).
    vector_entry_points : env id -> ``"module:function"`` for ``gym.make_vec(..., "vector_entry_point")``.
    bench : module with ``run_section(ctx) -> SectionResult`` and optional ``validate(options)``
        (``quantgym bench``), or None when the task has no bench section. ``--data TASK=PATH`` needs
        ``load_data(path, options) -> (data, notes)`` in it (the task's own loader; a one-line ``ValueError``
        when the data does not fit the options); the section then gets the data as ``ctx.data``. Without it
        ``--data`` is refused, with the module's ``DATA_REFUSAL`` string as the reason when it has one.
    bench_options : the task's own ``quantgym bench`` options (:class:`TaskOption`); the generic command
        adds them and refuses one whose tasks are not run.
    eval : ``"module:attribute"`` of an :class:`EvalAdapter` (``quantgym eval``), or None.
    eval_options : the task's own ``quantgym eval`` options (:class:`TaskOption`), read by its ``eval``
        adapter from ``EvalPlan.options`` (or by its LLM agent, ``agent=True``).
    eval_refusal : the one-line message ``quantgym eval`` gives for this task's ids when ``eval`` is None.
    llm : ``"module:Class"`` of the task's LLM adapter (a subclass of
        :class:`quantgym.agents.llm.agents.LLMAgent`), or None.
    report : ``"module:function"`` of ``section(sources, rows) -> Section | None`` for
        ``quantgym report`` (:mod:`quantgym.sweep.report`), or None.
    baselines : ``"module:function"`` of ``make(name) -> policy`` for the task's classical agents, or None.
    schemes : agent spec scheme -> ``"module:function"`` of a factory ``f(argument, task=..., **options)``
        that only this task has (PortBench: ``sb3:PATH``); ``openai:`` and ``replay:`` are generic.
    sweep : ``"module:attribute"`` of the task's sweep hooks (shared data, per-run evaluation, gates),
        or None: each run is then one :func:`quantgym.evaluation.evaluate` episode (its ``EvalResult``).
    columns : extra result columns the task writes (documentation of its results).
    sharpe_note : ``"module:attribute"`` of a one-line text starting with ``"Sharpe = "``: how the task computes
        the Sharpe ratio of ``summary.csv`` (risk-free rate, days a year); tables that show Sharpes of several
        tasks state it in their footer (:func:`sharpe_notes`). None: the task reports no Sharpe.
    docs : the task's docs page (relative to the repository).
    commands : modules exposing ``register(app)`` that add the task's own CLI commands.
    blind_vocabulary : ``"module:function"`` returning the task's bundled ``tickers``, ``names``, ``codes`` and
        ``period_names`` (a mapping) for the leak scanner (:func:`quantgym.blind.bundled_vocabulary`), or None.
    """

    name: str
    title: str
    envs: Mapping[str, tuple[str, dict]]
    vector_entry_points: Mapping[str, str] = field(default_factory=dict)
    bench: str | None = None
    bench_options: tuple[TaskOption, ...] = ()
    eval: str | None = None
    eval_options: tuple[TaskOption, ...] = ()
    eval_refusal: str | None = None
    llm: str | None = None
    report: str | None = None
    baselines: str | None = None
    schemes: Mapping[str, str] = field(default_factory=dict)
    sweep: str | None = None
    columns: tuple[str, ...] = ()
    docs: str = ""
    commands: tuple[str, ...] = ()
    sharpe_note: str | None = None
    blind_vocabulary: str | None = None

    @property
    def classical(self) -> bool:
        """True when the task has agents besides LLM ones: classical baselines or its own schemes (``sb3:``)."""
        return bool(self.baselines or self.schemes)

_TASKS: dict[str, Task] = {}
_LOADED = False
_ENV_SEEN = ""


def load_ref(ref: str) -> Any:
    """Import a ``"module:attribute"`` (or ``"module"``) reference.

    Raises
    ------
    ModuleNotFoundError, AttributeError
        The module or attribute does not exist.
    """
    mod, _, attr = ref.partition(":")
    module = importlib.import_module(mod)
    return getattr(module, attr) if attr else module


def _load_refs(refs: list[str], register: bool) -> None:
    for ref in refs:
        try:
            task = load_ref(ref)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"task record {ref!r} cannot be loaded: {exc}") from exc
        if not isinstance(task, Task):
            raise ValueError(f"task record {ref!r} is a {type(task).__name__}, not a quantgym.tasks.Task")
        if task.name not in _TASKS:
            _TASKS[task.name] = task
            if register:
                _register_envs(task)


def _load_builtin() -> None:
    """Load the built-in records and the entry points once, and the ``QUANTGYM_TASKS`` records whenever
    that variable has changed (a sweep worker forked before the driver set it still finds them)."""
    global _LOADED, _ENV_SEEN
    if not _LOADED:
        _LOADED = True
        refs = list(BUILTIN)
        try:
            from importlib.metadata import entry_points

            refs += [ep.value for ep in entry_points(group="quantgym.tasks")]
        except Exception as exc:  # pragma: no cover - broken metadata must not break the built-in tasks
            import warnings

            warnings.warn(f"quantgym: the 'quantgym.tasks' entry points could not be read ({type(exc).__name__}: "
                          f"{exc}); only the built-in tasks and $QUANTGYM_TASKS are loaded", RuntimeWarning,
                          stacklevel=2)
        _load_refs(refs, register=False)
    env = os.environ.get("QUANTGYM_TASKS", "")
    if env != _ENV_SEEN:
        _ENV_SEEN = env
        for ref in (r.strip() for r in env.split(",") if r.strip()):
            try:
                _load_refs([ref], register=True)
            except ValueError as exc:  # a bad user record must not take the built-in tasks down with it
                import warnings

                warnings.warn(f"QUANTGYM_TASKS: {exc}; that task is skipped", RuntimeWarning, stacklevel=2)


def register_task(task: Task, *, replace: bool = False) -> Task:
    """Add a task to the registry and register its env ids with Gymnasium.

    Raises
    ------
    ValueError
        A task of that name (or one of its env ids) is already registered, unless ``replace``.
    """
    _load_builtin()
    if not replace:
        if task.name in _TASKS:
            raise ValueError(f"task {task.name!r} is already registered")
        taken = {e: t.name for t in _TASKS.values() for e in t.envs}
        dup = sorted(e for e in task.envs if e in taken)
        if dup:
            raise ValueError(f"env id(s) {dup} of task {task.name!r} are already registered by "
                             f"{sorted({taken[e] for e in dup})}")
    _TASKS[task.name] = task
    _register_envs(task, replace=replace)
    return task


def unregister_task(name: str) -> None:
    """Remove a task (and its env ids from Gymnasium); unknown names are ignored."""
    import gymnasium as gym

    task = _TASKS.pop(name, None)
    if task is not None:
        for env_id in task.envs:
            gym.registry.pop(env_id, None)


def _register_envs(task: Task, replace: bool = False) -> None:
    import gymnasium as gym

    for env_id, (entry_point, kwargs) in task.envs.items():
        if env_id in gym.registry:
            if not replace:
                continue
            gym.registry.pop(env_id)
        gym.register(id=env_id, entry_point=entry_point, kwargs=dict(kwargs), disable_env_checker=False,
                     vector_entry_point=task.vector_entry_points.get(env_id))


def tasks() -> list[Task]:
    """Every registered task, built-in ones first (in :data:`BUILTIN` order)."""
    _load_builtin()
    return list(_TASKS.values())


def get_task(name: str) -> Task:
    """The task called ``name``.

    Raises
    ------
    ValueError
        Unknown name (the message lists the registered ones).
    """
    _load_builtin()
    try:
        return _TASKS[name]
    except KeyError:
        raise ValueError(f"unknown task {name!r}; choose from {', '.join(_TASKS)}") from None


def default_task() -> str:
    """The task an agent spec means when none is named: the first registered one (PortBench)."""
    return tasks()[0].name


def task_names() -> list[str]:
    return [t.name for t in tasks()]


def task_of(env_id: str) -> Task:
    """The task that registers ``env_id``.

    Raises
    ------
    ValueError
        An id that no registered task has (the message lists the known ids).
    """
    for t in tasks():
        if env_id in t.envs:
            return t
    known = [e for t in tasks() for e in t.envs]
    raise ValueError(f"unknown env id {env_id!r}; known: {', '.join(known)}")


def env_ids() -> list[str]:
    """Every registered env id (in task order)."""
    return [e for t in tasks() for e in t.envs]


def register_envs() -> None:
    """Register the env ids of every task with Gymnasium (idempotent)."""
    for t in tasks():
        _register_envs(t)


def sharpe_notes(names: Iterable[str | None]) -> str:
    """The footer of a table with Sharpe ratios of the tasks ``names``: each task's :attr:`Task.sharpe_note`
    (unknown names and tasks without one are skipped), ending with a full stop; with two or more conventions
    it adds that their Sharpes are not comparable with each other. Empty when no task has a note."""
    notes: dict[str, str] = {}
    for name in dict.fromkeys(n for n in names if n):
        try:
            t = get_task(name)
        except ValueError:
            continue
        if t.sharpe_note:
            notes[t.title] = str(load_ref(t.sharpe_note))
    if len(notes) < 2:
        return "".join(f"{text}." for text in notes.values())
    return ("Sharpe conventions differ by task; compare Sharpes within a task only: "
            + "; ".join(f"{title}: {text}" for title, text in notes.items()) + ".")


def iter_with(attr: str) -> Iterator[Task]:
    """The tasks whose record sets ``attr`` (``"bench"``, ``"eval"``, ``"report"``, ...)."""
    return (t for t in tasks() if getattr(t, attr))


__all__ = ["BUILTIN", "Task", "TaskOption", "OPTION_KINDS", "register_task", "unregister_task", "tasks", "get_task", "default_task", "task_names", "task_of",
           "env_ids", "register_envs", "iter_with", "load_ref", "sharpe_notes"]
