"""Sandbox runner of a Quant-Arena exploration snippet (tool mode, docs/tools.md).

The host (:mod:`quantgym.envs.quant_arena.tools`) builds the payload of a research evaluation cut at the
chosen decision date (:func:`~quantgym.envs.quant_arena.handoff.build_payload`, blinded in blind mode), so
no row after that date, and no row of the sealed window, exists in this process. Before lockdown,
:func:`_prepare` (the runner's ``sandbox_prepare`` hook, docs/security.md "Pre-lockdown hook") replays the
block into a :class:`~quantgym.envs.quant_arena.pit.ViewBuffer` and binds the resulting
:class:`~quantgym.envs.quant_arena.pit.PITView` as the builtin name ``view``: the agent's namespace gets
a copy of the builtins at lockdown, so the snippet (executed as the agent's module, under every limit of
a submission) reads ``view`` exactly as ``compute_features(view)`` does. What the snippet prints is the
tool's result (the sandbox's captured output).
"""

from __future__ import annotations

from typing import Any

from ..pit import ViewBuffer

#: Runner path passed to ``run_in_sandbox``.
RUNNER = "quantgym.envs.quant_arena.child.explore:run_snippet"


def build_view(payload: dict) -> Any:
    """The :class:`PITView` at the last row of the payload's block (every row of the block appended)."""
    blk = payload["block"]
    n = len(blk["dates"])
    intr = payload.get("intraday") or {}
    buf = ViewBuffer(blk["symbols"], n, payload["info"], int(payload["max_lookback"]))
    for i in range(n):
        buf.append(blk, i, intr.get(blk["dates"][i]))
    return buf.view()


def _prepare(payload: Any) -> dict:
    """Pre-lockdown hook: seed the RNGs as for a submission (spec §10.4), bind ``view``, drop the payload."""
    import builtins
    import random

    import numpy as np

    random.seed(0)
    np.random.seed(0)
    builtins.view = build_view(payload)  # type: ignore[attr-defined] - copied into the agent's builtins
    payload.clear()
    return {}


def run_snippet(namespace: dict, payload: dict) -> dict:
    """Sandbox runner: the snippet ran as the agent's module; its printed output is the result."""
    return {"status": "ok"}


run_snippet.sandbox_prepare = _prepare  # type: ignore[attr-defined] - the sandbox's pre-lockdown hook

__all__ = ["RUNNER", "build_view", "run_snippet"]
