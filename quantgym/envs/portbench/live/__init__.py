"""PortBench real-time (live) evaluation: data refresh, daily decisions, append-only run folders.

See ``docs/live.md``. Names are imported lazily so that ``import quantgym.envs.portbench.live`` stays cheap:

- :func:`run_live`, :class:`LiveResult`, :class:`LiveError`, :class:`LiveAgentError` (:mod:`.runner`);
- :func:`refresh_live_data`, :func:`check_data_dir`, :func:`data_vintage` (:mod:`.data`);
- :class:`LiveConfig`, :class:`DataChecks`, :func:`default_portbench_dir` (:mod:`.config`).

The online download of the market data itself is :func:`.refresh.refresh_portbench_data` (docs/data.md §8).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "run_live": "quantgym.envs.portbench.live.runner",
    "LiveResult": "quantgym.envs.portbench.live.runner",
    "LiveError": "quantgym.envs.portbench.live.runner",
    "LiveAgentError": "quantgym.envs.portbench.live.runner",
    "refresh_live_data": "quantgym.envs.portbench.live.data",
    "check_data_dir": "quantgym.envs.portbench.live.data",
    "data_vintage": "quantgym.envs.portbench.live.data",
    "LiveConfig": "quantgym.envs.portbench.live.config",
    "DataChecks": "quantgym.envs.portbench.live.config",
    "default_portbench_dir": "quantgym.envs.portbench.live.config",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'quantgym.envs.portbench.live' has no attribute {name!r}")


__all__ = list(_LAZY)
