"""Data loaders and bundled real data of quantgym.

PortBench (spec ``portbench.md`` §1): :func:`load_portbench_data` returns a
:class:`PortBenchData` with clean-mode prices, returns and lagged macro on the
NYSE calendar from the bundled real Yahoo/FRED data (see ``docs/data.md``).
"""

from quantgym.data.portbench import (
    ASSET_CLASSES,
    CANONICAL_TICKERS,
    CLASS_LABEL_MAP,
    MACRO_KEYS,
    MACRO_SOURCES,
    UNIVERSE,
    PortBenchData,
    PortBenchDataWarning,
    availability_matrix,
    available_mask,
    load_portbench_data,
    load_portbench_market,
    market_regime,
)

__all__ = [
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
    "market_regime",
]
