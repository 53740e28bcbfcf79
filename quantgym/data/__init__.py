"""Data readers and the bundled (packaged) real data of quantgym.

PortBench (spec ``portbench.md`` §1): :func:`load_portbench_data` returns a
:class:`PortBenchData` with clean-mode prices, returns and lagged macro on the
NYSE calendar from the bundled real Yahoo/FRED data (see ``docs/data.md``).

The PortBench names below are re-exported lazily (PEP 562), so importing another
reader of this package (e.g. ``quantgym.data.sse_l2``) does not load them.
"""

from __future__ import annotations

import importlib
from typing import Any

_PORTBENCH_EXPORTS = (
    "ASSET_CLASSES",
    "CANONICAL_TICKERS",
    "CLASS_LABEL_MAP",
    "MACRO_KEYS",
    "MACRO_SOURCES",
    "UNIVERSE",
    "PortBenchData",
    "PortBenchDataWarning",
    "availability_matrix",
    "available_mask",
    "load_portbench_data",
    "load_portbench_market",
    "load_portbench_raw",
    "market_regime",
)
_REFRESH_EXPORTS = ("refresh_portbench_data", "RefreshError")

__all__ = list(_PORTBENCH_EXPORTS + _REFRESH_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _PORTBENCH_EXPORTS:
        return getattr(importlib.import_module("quantgym.data.portbench"), name)
    if name in _REFRESH_EXPORTS:
        return getattr(importlib.import_module("quantgym.data.refresh"), name)
    raise AttributeError(f"module 'quantgym.data' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
