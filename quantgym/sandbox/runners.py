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


def score_series(namespace: dict, payload: dict) -> Any:
    """Call the agent's scoring function and check that it returned usable scores.

    A small example of a *validating* runner (the Quant-Arena pattern in miniature): the agent's
    function must return a pandas Series of finite numbers indexed by exactly the symbols in
    ``payload["index"]``.

    Parameters
    ----------
    namespace : dict
        The agent module's namespace.
    payload : dict
        ``{"function": name, "args": [...], "kwargs": {...}, "index": [symbols...]}``.

    Returns
    -------
    pandas.Series
        float64 scores, index sorted like ``payload["index"]``.

    Raises
    ------
    SandboxOutputError
        Not a Series, non-numeric values, NaN/inf values, or a different index (status "bad_output").
    """
    import numpy as np
    import pandas as pd

    from quantgym.sandbox._types import SandboxOutputError

    out = call_function(namespace, payload)
    if not isinstance(out, pd.Series):
        raise SandboxOutputError(f"score must return a pandas Series, got {type(out).__name__}")
    try:
        values = out.to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SandboxOutputError(f"scores must be numeric: {exc}") from None
    if not np.isfinite(values).all():
        raise SandboxOutputError(f"scores contain {int((~np.isfinite(values)).sum())} NaN/inf values")
    want = list(payload.get("index", []))
    if sorted(map(str, out.index)) != sorted(map(str, want)) or out.index.has_duplicates:
        raise SandboxOutputError(f"score index must be exactly the {len(want)} requested symbols")
    return pd.Series(values, index=out.index.astype(object), name="score").reindex(want)
