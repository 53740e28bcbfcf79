"""Trusted runners used only by the sandbox tests (imported by the sandbox child)."""

from __future__ import annotations

import os

from quantgym.sandbox.runners import call_function


def _prepare(payload: dict) -> dict:
    """Pre-lockdown hook: runs in the child before lockdown, may use what lockdown forbids."""
    out = dict(payload)
    out["prepared_pid"] = os.getpid()
    out["secret"] = None  # e.g. move data out of the agent's reach before lockdown
    return out


def prepared_echo(namespace: dict, payload: dict) -> dict:
    """Return the prepared payload and the agent's ``f()``."""
    return {"payload": payload, "agent": namespace["f"]()}


prepared_echo.sandbox_prepare = _prepare  # type: ignore[attr-defined]


def frames_allowed(namespace: dict, payload: dict):
    """``call_function`` for a runner that allows frame introspection (``sandbox_allow_frame_introspection``)."""
    return call_function(namespace, payload)


frames_allowed.sandbox_allow_frame_introspection = True  # type: ignore[attr-defined]



def _cache_modules(payload: dict) -> dict:
    """Pre-lockdown hook: leaves ``socket`` and ``gc`` in ``sys.modules`` (as a heavier runner's imports would)."""
    import gc  # noqa: F401
    import socket  # noqa: F401

    return payload


def modules_cached(namespace: dict, payload: dict):
    """``call_function`` in a child whose ``sys.modules`` already holds ``socket`` and ``gc``."""
    return call_function(namespace, payload)


modules_cached.sandbox_prepare = _cache_modules  # type: ignore[attr-defined]


def _fork_helper(payload: dict) -> dict:
    """Pre-lockdown hook forking a helper process (like Quant-Arena's keeper) that sleeps, then exits."""
    pid = os.fork()
    if pid == 0:
        try:
            import time

            time.sleep(float(payload.get("helper_sleep", 0.0)))
        finally:
            os._exit(0)
    return {"helper_pid": pid}


def forked_helper(namespace: dict, payload: dict) -> dict:
    """Return the helper's pid and the agent's ``f()``."""
    return {"helper_pid": payload["helper_pid"], "agent": namespace["f"]()}


forked_helper.sandbox_prepare = _fork_helper  # type: ignore[attr-defined]
