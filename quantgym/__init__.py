"""quantgym: Gymnasium environments that benchmark LLM agents and RL policies on finance work.

Importing the package registers every environment id with Gymnasium
(``PortBench-*-v0``, ``QuantArena-*-v0``, ``MarketBench-*-v0``), so
``gym.make("PortBench-Conservative-v0")`` works after ``import quantgym``.

Start-up stays cheap (``quantgym --help``, the sandbox child): importing the package loads neither
Gymnasium nor numpy, pandas, scipy, matplotlib or torch. If ``gymnasium`` is already imported, the ids
are registered at once; otherwise they are registered the moment ``gymnasium`` finishes importing (a
one-shot import hook), which is before any ``gym.make`` / ``gym.registry`` can be reached.
:func:`register_envs` registers them explicitly (idempotent).
"""

from __future__ import annotations

import sys
from typing import Any

__version__ = "0.1.0"


def register_envs() -> None:
    """Register the env ids of every task in the registry (:mod:`quantgym.tasks`) with Gymnasium (idempotent;
    imports gymnasium)."""
    from quantgym.envs import register_envs as _register

    _register()


class _RegisterWhenGymnasiumLoads:
    """Meta-path finder: wraps the ``gymnasium`` module's loader so that :func:`register_envs` runs right
    after ``gymnasium/__init__`` has executed. Removes itself on first use (one shot)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "gymnasium":
            return None
        import importlib.util

        _uninstall()
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_register(module: Any) -> None:
            exec_module(module)
            register_envs()

        loader.exec_module = exec_then_register
        return spec


def _uninstall() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _RegisterWhenGymnasiumLoads)]


if "gymnasium" in sys.modules:
    register_envs()
elif not any(isinstance(f, _RegisterWhenGymnasiumLoads) for f in sys.meta_path):
    sys.meta_path.insert(0, _RegisterWhenGymnasiumLoads())

__all__ = ["__version__", "register_envs"]
