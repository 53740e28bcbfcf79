"""Small trusted runners for :func:`quantgym.sandbox.run_in_sandbox` (tests, examples, simple tasks).

A runner is trusted project code executed inside the sandbox child after the agent's source has
been executed as a module. Signature: ``runner(namespace: dict, payload) -> value``.
"""

from __future__ import annotations

from typing import Any


def call_function(namespace: dict, payload: dict) -> Any:
    """Call one function defined by the agent code and return its result.

    Parameters
    ----------
    namespace : dict
        The agent module's namespace (globals after executing its source).
    payload : dict
        ``{"function": "score", "args": [...], "kwargs": {...}}``; ``args``/``kwargs`` optional.

    Returns
    -------
    Any
        Whatever the agent function returns (it must be sendable: JSON scalars, lists, dicts,
        numpy arrays, pandas Series/DataFrame/Index; anything else ends as ``bad_output``).

    Raises
    ------
    NameError
        When the agent code does not define a callable named ``payload["function"]`` (status "error").
    ValueError
        When the payload is malformed (a host-side programming error, reported as status "error").
    """
    if not isinstance(payload, dict) or not isinstance(payload.get("function"), str):
        raise ValueError("call_function payload must be a dict with a 'function' name")
    name = payload["function"]
    fn = namespace.get(name)
    if not callable(fn):
        raise NameError(f"the submitted code does not define a function {name!r}")
    args = payload.get("args") or []
    kwargs = payload.get("kwargs") or {}
    return fn(*args, **kwargs)
