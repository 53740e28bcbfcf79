"""The task folders (``quantgym.envs.<task>``) and the registration of their env ids with Gymnasium.

Env ids are not listed here: each task's record in the task registry (:mod:`quantgym.tasks`) carries
them, with lazy string entry points, so importing :mod:`quantgym` stays cheap.
"""

from __future__ import annotations


def register_envs() -> None:
    """Register the env ids of every registered task with Gymnasium (idempotent)."""
    from quantgym.tasks import register_envs as _register

    _register()


__all__ = ["register_envs"]
