"""Policies: the evaluation loop, classical baselines (and, in later modules, LLM and RL agents).

The names below are imported on first use (module ``__getattr__``), so importing a submodule such as
``quantgym.agents.llm.cli`` (the CLI does, for ``quantgym --help``) loads no pandas or scipy.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> submodule that defines it
_LAZY = {
    "EvalResult": "base", "Policy": "base", "evaluate": "base",
    "BASELINES": "baselines", "make_baseline": "baselines",
}

__all__ = ["EvalResult", "Policy", "evaluate", "BASELINES", "make_baseline"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
