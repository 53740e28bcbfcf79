"""Policies and the evaluation loop shared by every task.

A policy is anything with ``act(observation, info) -> action`` (and optionally
``reset(env)`` and a ``name``); :func:`evaluate` runs one episode and returns an
:class:`EvalResult` in the results schema of :mod:`quantgym.results`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import pandas as pd

from quantgym.results import SummaryRow


@runtime_checkable
class Policy(Protocol):
    """A policy: ``act`` maps the observation (and the last ``info``) to an action.

    Attributes
    ----------
    name : label used in result tables.
    direct_allocation : True for classical allocators that bypass the S1–S5 pipeline (PortBench
        baselines, spec §4.6): :func:`evaluate` then builds the env with ``scoring=False``.
    env_kwargs : optional dict of env kwargs the policy needs (e.g. ``{"stagewise": True}`` for LLM
        agents); merged under the caller's kwargs by :func:`evaluate`.
    wrap_env : optional ``wrap_env(env) -> env`` applied after ``gym.make`` (e.g. a text-action or
        Box-action wrapper).
    """

    name: str

    def act(self, observation: Any, info: dict) -> Any: ...


@dataclass
class EvalResult:
    """One evaluated episode.

    Attributes
    ----------
    task, agent, env_id, profile, period : identification.
    metrics : terminal metrics (§7: total_return, sharpe, max_drawdown, volatility, ..., ceps, pas).
    stage_scores : per-stage mean scores (None for direct-allocation baselines).
    ceps : run CEPS (mean of per-step CEPS) or None.
    nav : NAV curve (currency units) indexed by date.
    steps : per-step ``info`` records (orders dropped).
    config : env kwargs and config used.
    """

    task: str
    agent: str
    env_id: str
    profile: str | None
    period: str | None
    metrics: dict[str, Any]
    stage_scores: dict[str, float] | None
    ceps: float | None
    nav: pd.Series
    steps: list[dict] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    def summary_row(self, gate: bool | None = None) -> SummaryRow:
        m = self.metrics
        return SummaryRow(
            task=self.task, agent=self.agent, profile=self.profile, period=self.period,
            sharpe=m.get("sharpe"), ret_pct=m.get("ret_pct"), maxdd_pct=m.get("maxdd_pct"), vol_pct=m.get("vol_pct"),
            ceps=self.ceps, gate=gate,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task, "agent": self.agent, "env_id": self.env_id, "profile": self.profile,
            "period": self.period, "metrics": self.metrics, "stage_scores": self.stage_scores, "ceps": self.ceps,
            "nav": {"dates": [d.strftime("%Y-%m-%d") for d in self.nav.index], "values": self.nav.to_numpy()},
            "steps": self.steps, "config": self.config,
        }


def policy_name(policy: Any) -> str:
    return getattr(policy, "name", None) or type(policy).__name__


def evaluate(env_or_id: str | gym.Env, policy: Any, *, seed: int | None = 0, **env_kwargs: Any) -> EvalResult:
    """Run one episode of ``policy`` and collect the results.

    Parameters
    ----------
    env_or_id : a registered env id (``"PortBench-Balanced-v0"``) or an env instance.
    policy : a :class:`Policy` (``act(obs, info)``; optional ``reset(env)``; optional
        ``step_record() -> dict`` whose keys are merged into the step's record after each step), or a
        plain callable ``f(obs, info) -> action``.
    seed : passed to ``env.reset``.
    **env_kwargs : passed to ``gym.make`` when ``env_or_id`` is an id (e.g. ``period="covid_2020"``).

    Returns
    -------
    EvalResult

    Raises
    ------
    ValueError
        For env kwargs the env rejects (unknown period, profile, ...).
    """
    if isinstance(env_or_id, str):
        if getattr(policy, "direct_allocation", False):
            env_kwargs.setdefault("scoring", False)
        env_kwargs = {**dict(getattr(policy, "env_kwargs", None) or {}), **env_kwargs}
        env = gym.make(env_or_id, **env_kwargs)
        if callable(getattr(policy, "wrap_env", None)):
            env = policy.wrap_env(env)
        env_id = env_or_id
    else:
        env = env_or_id
        env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    act = policy.act if hasattr(policy, "act") else policy
    obs, info = env.reset(seed=seed)
    if hasattr(policy, "reset"):
        policy.reset(env)
    steps: list[dict] = []
    terminated = truncated = False
    while not (terminated or truncated):
        action = act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        rec = {k: v for k, v in info.items() if k not in ("orders", "episode_metrics")}
        rec["reward"] = float(reward)
        note = policy.step_record() if callable(getattr(policy, "step_record", None)) else None
        if note:  # what the policy itself did at this step (an LLM agent: prompt style sent, cap, rung)
            rec.update(note)
        steps.append(rec)
    base = env.unwrapped
    metrics = info.get("episode_metrics") or base.episode_metrics()
    result = EvalResult(
        task=getattr(base, "task_name", "portbench"),
        agent=policy_name(policy),
        env_id=env_id,
        profile=getattr(getattr(base, "profile", None), "name", None),
        period=getattr(getattr(base, "period", None), "name", None),
        metrics={k: v for k, v in metrics.items() if k != "stage_means"},
        stage_scores=metrics.get("stage_means"),
        ceps=metrics.get("ceps"),
        nav=base.nav_series() if hasattr(base, "nav_series") else pd.Series(dtype=float),
        steps=steps,
        config={"env_kwargs": {k: v for k, v in env_kwargs.items() if k != "data"},
                "config": base.config.to_dict() if hasattr(base, "config") else {}},
    )
    env.close()
    return result
