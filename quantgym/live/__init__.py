"""PortBench real-time (live) evaluation: data refresh, daily decisions, append-only run folders.

See ``docs/live.md``. Names are imported lazily so that ``import quantgym.live`` stays cheap:

- :func:`run_live`, :class:`LiveResult`, :class:`LiveError`, :class:`LiveAgentError` (``quantgym.live.runner``);
- :func:`refresh_live_data`, :func:`check_data_dir`, :func:`data_vintage` (``quantgym.live.data``);
- :class:`LiveConfig`, :class:`DataChecks`, :func:`default_portbench_dir` (``quantgym.live.config``).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "run_live": "quantgym.live.runner",
    "LiveResult": "quantgym.live.runner",
    "LiveError": "quantgym.live.runner",
    "LiveAgentError": "quantgym.live.runner",
    "refresh_live_data": "quantgym.live.data",
    "check_data_dir": "quantgym.live.data",
    "data_vintage": "quantgym.live.data",
    "LiveConfig": "quantgym.live.config",
    "DataChecks": "quantgym.live.config",
    "default_portbench_dir": "quantgym.live.config",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'quantgym.live' has no attribute {name!r}")


__all__ = list(_LAZY)
