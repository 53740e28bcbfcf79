"""Gymnasium wrappers: text-answer protocol for LLM agents, recording.

PortBench's Box spaces for RL live with the task: :mod:`quantgym.envs.portbench.allocation`.

Names are imported lazily so that importing :mod:`quantgym.wrappers` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "TextStageAction": "quantgym.wrappers.text",
    "RecordEpisode": "quantgym.wrappers.recording",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'quantgym.wrappers' has no attribute {name!r}")


__all__ = list(_LAZY)
