"""The tasks' own command-line options in the generic commands (``quantgym bench``, ``quantgym eval``).

A task declares them in its record (:attr:`quantgym.tasks.Task.bench_options` / ``eval_options``, each a
:class:`quantgym.tasks.TaskOption`). :class:`TaskCommand` gives typer a command whose parameters are the
command's own, then every registered task's, read from the registry whenever typer builds the command
(so a task registered after import adds its options too). :func:`collect` turns what was typed into
values and refuses, in one line, an option whose tasks are not among those run.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional


def declared(attr: str, needs: str) -> dict[str, dict[str, Any]]:
    """Every registered task's options of record field ``attr`` (``"bench_options"`` or ``"eval_options"``),
    among the tasks that have ``needs`` (``"bench"``, ``"eval"``), by flag: ``option`` (the first
    declaration), ``help`` (every task's, as ``"Title: help"``) and ``tasks`` (their names).

    Raises
    ------
    ValueError
        Two tasks declare one flag with a different key, kind or target.
    """
    from quantgym.tasks import iter_with

    out: dict[str, dict[str, Any]] = {}
    for t in iter_with(needs):
        for o in getattr(t, attr):
            d = out.setdefault(o.flag, {"option": o, "help": [], "tasks": []})
            first = d["option"]
            if (first.key, first.kind, first.agent, first.short) != (o.key, o.kind, o.agent, o.short):
                raise ValueError(f"option {o.flag}: task {t.name} declares it as {o.key!r} ({o.kind}), task "
                                 f"{d['tasks'][0]} as {first.key!r} ({first.kind})")
            d["help"].append(f"{t.title}: {o.help}")
            d["tasks"].append(t.name)
    return out


def param_name(flag: str) -> str:
    """The Python parameter name of a task option (prefixed, so it cannot clash with a command's own)."""
    return "task_opt_" + flag.lstrip("-").replace("-", "_")


def parameters(attr: str, needs: str) -> list[inspect.Parameter]:
    """typer parameters (keyword-only, default None = not given) of the tasks' options."""
    import typer

    P = inspect.Parameter
    params = []
    for flag, d in declared(attr, needs).items():
        o, text = d["option"], " ".join(d["help"])
        if o.kind == "flag":
            ann: Any = Optional[bool]
            info = typer.Option(None, f"{flag}/--no-{flag[2:]}", help=text, show_default=False)
        else:
            ann = {"multi": Optional[list[str]], "int": Optional[int]}.get(o.kind, Optional[str])
            info = typer.Option(None, flag, *((o.short,) if o.short else ()), metavar=o.metavar, help=text)
        params.append(P(param_name(flag), P.KEYWORD_ONLY, annotation=ann, default=info))
    return params


def collect(attr: str, needs: str, values: dict[str, Any], wanted: list[str],
            chosen_by: str = "--tasks") -> list[tuple[Any, Any]]:
    """``[(TaskOption, value), ...]`` of the options given (popped from ``values``, the command's keyword
    arguments), for the tasks ``wanted`` (chosen by the option ``chosen_by``, named in the error).

    Raises
    ------
    ValueError
        One line: a value that does not parse, or an option of no task in ``wanted``.
    """
    out = []
    for flag, d in declared(attr, needs).items():
        o = d["option"]
        value = o.parse(values.pop(param_name(flag), None))
        if value is None:
            continue
        if not set(d["tasks"]) & set(wanted):
            raise ValueError(f"{flag} is an option of {', '.join(d['tasks'])}, which is not among the tasks run "
                             f"({', '.join(wanted)}, from {chosen_by}); drop {flag} or add its task to {chosen_by}")
        out.append((o, value))
    return out


def optional_value_command(optional_values: dict[str, tuple[str, ...]] | None = None) -> type:
    """A typer command class whose options in ``optional_values`` take an optional value.

    ``optional_values`` maps an option (``"--blind"``) to the values it takes, the first being its value when
    given alone: ``--blind`` reads as ``--blind=blind`` unless the next argument is a value, not an option
    (``--blind both``). Typer has no option with an optional value; the arguments are rewritten before
    parsing, and the command checks the value against the listed ones (a bad one is its one-line error).
    """
    from typer.core import TyperCommand

    optional = dict(optional_values or {})

    class OptionalValueCommand(TyperCommand):
        def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
            out: list[str] = []
            i = 0
            while i < len(args):
                a = args[i]
                if a == "--":
                    out += args[i:]
                    break
                if a in optional:
                    nxt = args[i + 1] if i + 1 < len(args) else None
                    if nxt is not None and not nxt.startswith("-"):
                        out.append(f"{a}={nxt}")
                        i += 2
                        continue
                    out.append(f"{a}={optional[a][0]}")
                else:
                    out.append(a)
                i += 1
            return super().parse_args(ctx, out)

    return OptionalValueCommand


class TaskCommand:
    """A typer command: ``func``, whose signature declares the command's own options (typer style) and ends
    in ``**task_options``, which receives the tasks' options of record field ``attr`` (their values as
    typed, by :func:`param_name`; :func:`collect` reads them)."""

    def __init__(self, name: str, func: Callable[..., Any], attr: str, needs: str):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = func.__doc__
        self._func, self._attr, self._needs = func, attr, needs

    def __call__(self, **kw: Any) -> Any:
        return self._func(**kw)

    def _signature(self) -> inspect.Signature:
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
               for p in inspect.signature(self._func, eval_str=True).parameters.values()
               if p.kind is not inspect.Parameter.VAR_KEYWORD]
        return inspect.Signature(own + parameters(self._attr, self._needs))

    @property
    def __signature__(self) -> inspect.Signature:  # read by inspect.signature (typer)
        return self._signature()

    @property
    def __annotations__(self) -> dict[str, Any]:  # read by typing.get_type_hints (typer)
        return {p.name: p.annotation for p in self._signature().parameters.values()}


__all__ = ["optional_value_command", "declared", "param_name", "parameters", "collect", "TaskCommand"]
