"""Integrations with external frameworks (optional extras, imported lazily).

- :mod:`quantgym.integrations.ray`: ``register_envs()`` for Ray RLlib / Tune (extra ``distributed``).
"""
