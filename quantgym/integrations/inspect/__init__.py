"""quantgym's tasks as Inspect AI evals (docs/inspect.md): ``inspect eval quantgym/portbench``.

Inspect (UK AI Security Institute; PyPI ``inspect-ai``) finds the tasks through the ``inspect_ai`` entry
point of this package (:mod:`quantgym._registry`). One ``@task`` per registered task with an LLM adapter is
built from the task registry (:mod:`quantgym.integrations.inspect.tasks`); its solver runs the quantgym env
with the task's own LLM agent, whose model calls go to Inspect's model
(:class:`~quantgym.integrations.inspect.engine.InspectEngine`); its scorer returns the env's own scores.
:mod:`quantgym.integrations.inspect.logs` reads Inspect logs back for ``quantgym report``.
"""

from __future__ import annotations

#: the one-line error of a quantgym Inspect feature used without the extra
MISSING_EXTRA = "quantgym's Inspect tasks need Inspect AI: pip install 'quantgym[inspect]'"


def require_inspect() -> None:
    """Raise ``ImportError`` (one line naming the extra) when ``inspect_ai`` is not installed."""
    import importlib.util

    if importlib.util.find_spec("inspect_ai") is None:
        raise ImportError(MISSING_EXTRA)


__all__ = ["MISSING_EXTRA", "require_inspect"]
