"""Ray RLlib / Tune integration: every quantgym env id as a Ray-registered env.

RLlib builds environments inside its remote env-runner workers, where the Gymnasium
registry filled by ``import quantgym`` in the driver is not visible. :func:`register_envs`
therefore registers each id with :func:`ray.tune.registry.register_env` through an env
creator that imports :mod:`quantgym` and calls ``gymnasium.make(env_id, **env_config)``
inside the worker. Use the same id string as ``PPOConfig().environment("PortBench-Balanced-v0")``
(example in docs/sweeps.md). Needs the ``distributed`` extra (``ray``); Ray is imported only
when :func:`register_envs` is called.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable


class EnvCreator:
    """Picklable env creator: ``EnvCreator(env_id)(env_config) -> gym.make(env_id, **env_config)``.

    Parameters
    ----------
    env_id : a registered quantgym id (``PortBench-Conservative-v0``...).
    wrap : optional ``wrap(env) -> env`` applied after ``gym.make`` (e.g. an action-space wrapper); must
        itself be picklable (a module-level function or class).

    Notes
    -----
    ``env_config`` is RLlib's :class:`EnvContext` (a dict with ``worker_index``/``vector_index``
    attributes); its items are passed to ``gym.make`` as keyword arguments.
    """

    def __init__(self, env_id: str, wrap: Callable[[Any], Any] | None = None) -> None:
        self.env_id = env_id
        self.wrap = wrap

    def __call__(self, env_config: dict | None = None) -> Any:
        import gymnasium as gym

        import quantgym  # noqa: F401  (registers the ids in this worker)

        env = gym.make(self.env_id, **dict(env_config or {}))
        return self.wrap(env) if self.wrap is not None else env

    def __repr__(self) -> str:
        return f"EnvCreator({self.env_id!r})"


def env_ids() -> list[str]:
    """Every quantgym env id (of every task in :mod:`quantgym.tasks`)."""
    from quantgym.tasks import env_ids as _ids

    return _ids()


def register_envs(ids: Iterable[str] | None = None, *, prefix: str = "",
                  wrap: Callable[[Any], Any] | None = None) -> list[str]:
    """Register quantgym env ids with Ray Tune / RLlib.

    Parameters
    ----------
    ids : ids to register (default: all of :func:`env_ids`).
    prefix : prepended to each name registered with Ray (default none: the Gymnasium id itself).
    wrap : optional picklable ``wrap(env) -> env`` applied to every created env.

    Returns
    -------
    list of str
        The names registered with Ray.

    Raises
    ------
    ImportError
        Ray (with Tune) is not installed: ``pip install 'quantgym[distributed]'``.
    ValueError
        An id that is not a quantgym env id.
    """
    try:
        from ray.tune.registry import register_env
    except ImportError as exc:
        raise ImportError("quantgym.integrations.ray needs Ray with Tune: pip install 'quantgym[distributed]'") from exc
    known = env_ids()
    wanted = list(ids) if ids is not None else known
    unknown = [i for i in wanted if i not in known]
    if unknown:
        raise ValueError(f"not quantgym env ids: {unknown}; known: {known}")
    names = []
    for env_id in wanted:
        name = f"{prefix}{env_id}"
        register_env(name, EnvCreator(env_id, wrap))
        names.append(name)
    return names


__all__ = ["EnvCreator", "env_ids", "register_envs"]
