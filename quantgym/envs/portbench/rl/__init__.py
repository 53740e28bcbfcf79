"""Reinforcement-learning agents for PortBench with stable-baselines3 (extra ``rl``).

Nothing here imports stable-baselines3 or torch at import time; the functions below import
:mod:`quantgym.envs.portbench.rl.sb3` on first use and fail with a clear message if the extra is missing.

- :func:`load_sb3_agent` — the ``sb3:PATH`` agent scheme (``quantgym bench --agent sb3:DIR``).
- :func:`train_sb3` — train PPO / SAC / A2C on the training split and evaluate on the bench periods.
- :func:`make_sb3_vec_env` — an SB3 ``VecEnv`` over PortBench (the batched core or one env per worker).
- :class:`ToolUsingAllocation`, :class:`ToolPolicy` — an RL policy on the tool interface (``tools=True``,
  :mod:`quantgym.envs.portbench.rl.tools`, docs/tools.md); they need no SB3.
"""

from __future__ import annotations

from typing import Any

#: CPU-only machines: torch's CPU build first (the default wheel pulls the CUDA libraries) [project choice]
TORCH_CPU_HINT = ("no GPU: install torch's CPU build first: pip install torch --index-url "
                  "https://download.pytorch.org/whl/cpu (or a local CPU wheel, e.g. pip install torch==2.13.0)")
#: how to install the 'rl' extra (quantgym installs from a clone, not from PyPI)
RL_INSTALL = "pip install -e '.[rl]' in a clone"
EXTRA_HINT = f"stable-baselines3 and torch are needed: {RL_INSTALL}; {TORCH_CPU_HINT}"


def _sb3():
    """The sb3 module; :class:`~quantgym._util.MissingExtraError` (one line) when the extra is missing."""
    from quantgym._util import MissingExtraError

    try:
        from quantgym.envs.portbench.rl import sb3
    except ModuleNotFoundError as exc:
        if isinstance(exc, MissingExtraError):
            raise
        raise MissingExtraError(f"{EXTRA_HINT} ({exc.name or exc} missing)", name=exc.name) from exc
    return sb3


def load_sb3_agent(arg: str, task: str = "portbench", **options: Any):
    """Agent factory of the ``sb3:PATH`` scheme; see :func:`quantgym.envs.portbench.rl.sb3.load_sb3_agent`."""
    return _sb3().load_sb3_agent(arg, task=task, **options)


def train_sb3(*args: Any, **kwargs: Any):
    """Train and evaluate; see :func:`quantgym.envs.portbench.rl.sb3.train_sb3`."""
    return _sb3().train_sb3(*args, **kwargs)


def make_sb3_vec_env(*args: Any, **kwargs: Any):
    """SB3 VecEnv over PortBench; see :func:`quantgym.envs.portbench.rl.sb3.make_sb3_vec_env`."""
    return _sb3().make_sb3_vec_env(*args, **kwargs)


def __getattr__(name: str) -> Any:  # PEP 562: the tool-mode wrapper loads on first use
    if name in ("ToolUsingAllocation", "ToolPolicy"):
        from quantgym.envs.portbench.rl import tools

        return getattr(tools, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["load_sb3_agent", "train_sb3", "make_sb3_vec_env", "ToolUsingAllocation", "ToolPolicy", "EXTRA_HINT",
           "RL_INSTALL", "TORCH_CPU_HINT"]
