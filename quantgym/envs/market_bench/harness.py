"""Trusted sandbox runner of Market-Bench attempts (spec §7).

:func:`run_backtester` is imported by the sandbox child before lockdown and called after the
agent's source was executed: it calls the agent's ``run_backtest(inputs)`` and turns the
returned object into plain JSON data (numbers, short strings, one optional float array). The
host re-validates that data (:func:`quantgym.envs.market_bench.scoring.validate_metrics`); this
runner never decides success.

:func:`run_attempt` (host side) runs one source through :func:`quantgym.sandbox.run_in_sandbox`.
"""

from __future__ import annotations

import math
from typing import Any


def _prewarm() -> None:
    """Run, before the sandbox locks down, the probes pandas makes on first use.

    pandas >= 3.1 ``read_csv`` reads ``/sys/fs/cgroup/cpu.max`` once to size its worker pool
    (``pandas.compat._cpu.available_cpu_count``, cached for the process); after lockdown that
    open is refused, so an agent's plain ``pd.read_csv`` would fail as *forbidden*. This module
    is imported by the child before lockdown, so the probe runs (and is cached) here.
    """
    try:
        from pandas.compat import _cpu

        _cpu.available_cpu_count()
    except Exception:  # noqa: BLE001 - older pandas: nothing to warm
        pass


_prewarm()

ENTRY_POINT = "run_backtest"
RUNNER = "quantgym.envs.market_bench.harness:run_backtester"
MAX_PATH_POINTS = 5_000_000


def _plain(v: Any) -> Any:
    """A returned metric value as JSON-able data: float/bool/short str, else a type tag."""
    if isinstance(v, bool):
        return v
    try:
        import numpy as np

        if isinstance(v, np.bool_):
            return bool(v)
        if isinstance(v, (np.integer, np.floating)):
            return float(v)
    except ImportError:  # pragma: no cover
        pass
    if isinstance(v, (int, float)):
        f = float(v)
        return f if math.isfinite(f) else f"<non-finite {f}>"  # JSON cannot carry it; the host rejects it
    if isinstance(v, str):
        return v[:80]
    return f"<{type(v).__name__}>"


def run_backtester(namespace: dict, payload: dict) -> dict:
    """Call the agent's ``run_backtest(inputs)`` and return its metrics as plain data.

    Parameters
    ----------
    namespace : dict
        The agent module's globals.
    payload : dict
        ``{"inputs": {file name: absolute path}, "keys": [metric keys], "path_key": "equity_curve"}``.

    Returns
    -------
    dict
        ``{"metrics": {key: number | str tag} for the required keys present, "n_keys": int,
        "path": float array or None, "path_note": why a returned path was ignored, or None}``.

    Raises
    ------
    SandboxOutputError
        No callable ``run_backtest``; the result is not a dict (status ``bad_output``).
    """
    from quantgym.sandbox import SandboxOutputError

    fn = namespace.get(ENTRY_POINT)
    if not callable(fn):
        raise SandboxOutputError(f"the submitted code defines no function {ENTRY_POINT}(inputs)")
    out = fn(dict(payload["inputs"]))
    if not isinstance(out, dict):
        raise SandboxOutputError(f"{ENTRY_POINT} returned {type(out).__name__}, expected a dict of metrics")
    metrics = {k: _plain(out[k]) for k in payload["keys"] if k in out}
    path = note = None
    key = payload.get("path_key", "equity_curve")
    raw_path = out.get(key)
    if raw_path is not None:  # an unscored extra: a rejected path is noted, never silently absent
        try:
            import numpy as np

            arr = np.asarray(raw_path, dtype=float).ravel()
            if 0 < arr.size <= MAX_PATH_POINTS:
                path = arr
            else:
                note = f"{key} ignored: {arr.size} points (1 to {MAX_PATH_POINTS} are compared)"
        except (TypeError, ValueError) as exc:
            note = f"{key} ignored: not a float array ({type(exc).__name__})"
    return {"metrics": metrics, "n_keys": len(out), "path": path, "path_note": note}


def run_attempt(source: str, inputs: dict[str, str], strategy: str, limits) -> Any:
    """Run one attempt in the sandbox (host side); returns the :class:`~quantgym.sandbox.SandboxResult`."""
    from quantgym.envs.market_bench.config import METRIC_KEYS, PATH_KEY
    from quantgym.sandbox import run_in_sandbox

    payload = {"inputs": dict(inputs), "keys": list(METRIC_KEYS[strategy]), "path_key": PATH_KEY}
    return run_in_sandbox(source, RUNNER, payload=payload, limits=limits, filename="<backtester>")
