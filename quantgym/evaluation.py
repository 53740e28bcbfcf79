"""The episode loop shared by every task: :func:`evaluate` runs one episode of any registered env.

A policy is anything with ``act(observation, info) -> action`` (and optionally ``reset(env)`` and a
``name``); :func:`evaluate` runs one episode of any registered env and returns an :class:`EvalResult` in
the results schema of :mod:`quantgym.results`. Every env implements :class:`Evaluable`
(``episode_result()``), so the loop needs no task knowledge. Plans of episodes (:func:`run_eval`, the
engine of ``quantgym eval``, and the tasks' eval adapters) are in :mod:`quantgym.plan`; the summary of
repeats (:func:`repeats_section`) in :mod:`quantgym.stats.repeats`. Both are importable from here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import pandas as pd

from quantgym.results import SummaryRow, episode_status


@runtime_checkable
class Policy(Protocol):
    """A policy: ``act`` maps the observation (and the last ``info``) to an action.

    Attributes
    ----------
    name : label used in result tables.
    env_kwargs : optional dict of env kwargs the policy needs (e.g. ``{"stagewise": True}`` for LLM
        agents, ``{"scoring": False}`` for an allocator that bypasses a task's staged scoring); merged
        under the caller's kwargs by :func:`evaluate`.
    wrap_env : optional ``wrap_env(env) -> env`` applied after ``gym.make`` (e.g. a text-action or
        Box-action wrapper).
    """

    name: str

    def act(self, observation: Any, info: dict) -> Any: ...


@runtime_checkable
class Evaluable(Protocol):
    """What every quantgym env (``env.unwrapped``) implements for :func:`evaluate`.

    ``task_name`` is the env's task (:mod:`quantgym.tasks`); ``episode_result()``, called after the last
    step, returns a dict with ``metrics`` (terminal metrics; PortBench also ``stage_means``) and optionally
    ``stage_scores``, ``ceps``, ``nav`` (pandas Series of NAV by date), ``profile``, ``period`` and
    ``records`` (list of dicts).
    """

    task_name: str

    def episode_result(self) -> dict[str, Any]: ...


@dataclass
class EvalResult:
    """One evaluated episode.

    Attributes
    ----------
    task, agent, env_id, profile, period : identification.
    metrics : terminal metrics (PortBench §7: total_return, sharpe, max_drawdown, volatility, ..., ceps, pas).
    stage_scores : per-stage mean scores (None for direct-allocation baselines).
    ceps : run CEPS (mean of per-step CEPS) or None.
    nav : NAV curve (currency units) indexed by date (empty for tasks without one).
    steps : per-step ``info`` records (orders dropped), with ``reward`` and what the policy's
        ``step_record()`` added.
    config : env kwargs and config used.
    records : the env's own episode records (Market-Bench attempts, Quant-Arena candidates, ...; empty when
        it has none).
    info : the last step's ``info`` as the env returned it (the final scores of a Quant-Arena run, the round
        record of a Market-Bench episode); not written by :meth:`to_dict` (``steps`` holds it).
    agent_key : the name a user passes back on the command line (a baseline's key, ``cov_risk_parity``;
        :func:`policy_key`), written as summary.csv's ``agent`` (what a user types back); ``agent`` is the display name.
    status : ``ok`` | ``partial`` | ``failed``: whether the policy's LLM calls were answered
        (:func:`quantgym.results.episode_status`; ``ok`` for a policy that makes none).
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
    records: list[dict] = field(default_factory=list)
    agent_key: str | None = None
    status: str = "ok"
    info: dict[str, Any] = field(default_factory=dict, repr=False)

    def summary_row(self, gate: bool | None = None) -> SummaryRow:
        m = self.metrics
        return SummaryRow(
            task=self.task, agent=self.agent_key or self.agent, profile=self.profile, period=self.period,
            sharpe=m.get("sharpe"), ret_pct=m.get("ret_pct"), maxdd_pct=m.get("maxdd_pct"), vol_pct=m.get("vol_pct"),
            ceps=self.ceps, gate=gate, status=self.status,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task, "agent": self.agent, "agent_key": self.agent_key or self.agent,
            "status": self.status, "env_id": self.env_id, "profile": self.profile,
            "period": self.period, "metrics": self.metrics, "stage_scores": self.stage_scores, "ceps": self.ceps,
            "nav": {"dates": [d.strftime("%Y-%m-%d") for d in self.nav.index], "values": self.nav.to_numpy()},
            "steps": self.steps, "config": self.config, "records": self.records,
        }


def policy_name(policy: Any) -> str:
    """A policy's display name: its ``name``, else its class name."""
    return getattr(policy, "name", None) or type(policy).__name__


def policy_key(policy: Any) -> str:
    """The name a user passes back on the command line: a policy's ``key`` (a PortBench baseline's
    ``cov_risk_parity``), else :func:`policy_name` (an LLM agent's ``openai:MODEL``)."""
    key = getattr(policy, "key", None)
    return key if isinstance(key, str) and key else policy_name(policy)


def policy_status(policy: Any) -> str:
    """The ``status`` of the policy's current episode: from its LLM usage (``episode_usage()``), ``ok``
    for a policy that makes no LLM call (:func:`quantgym.results.episode_status`)."""
    fn = getattr(policy, "episode_usage", None)
    return episode_status(fn()) if callable(fn) else "ok"


def evaluate(env_or_id: str | gym.Env, policy: Any, *, seed: int | None = 0, any_env: bool = False,
             **env_kwargs: Any) -> EvalResult:
    """Run one episode of ``policy`` and collect the results: the one episode loop of quantgym (``bench``,
    ``eval``, ``sweep`` and the tasks' adapters all run their episodes here).

    Parameters
    ----------
    env_or_id : a registered env id (``"PortBench-Balanced-v0"``) or an env instance.
    policy : a :class:`Policy` (``act(obs, info)``; optional ``reset(env)``; optional
        ``step_record() -> dict`` whose keys are merged into the step's record after each step), or a
        plain callable ``f(obs, info) -> action``.
    seed : passed to ``env.reset``.
    any_env : also summarise an env without the :class:`Evaluable` protocol (any Gymnasium env, e.g. in a
        sweep): task ``"other"``, metrics ``total_reward`` and ``n_steps``, period the ``period`` env kwarg.
    **env_kwargs : passed to ``gym.make`` when ``env_or_id`` is an id (e.g. ``period="covid_2020"``).

    Returns
    -------
    EvalResult

    Raises
    ------
    ValueError
        For env kwargs the env rejects (unknown period, profile, ...).
    TypeError
        An env without the :class:`Evaluable` protocol, unless ``any_env``.
    """
    if isinstance(env_or_id, str):
        env_kwargs = {**dict(getattr(policy, "env_kwargs", None) or {}), **env_kwargs}
        env = gym.make(env_or_id, **env_kwargs)
        if callable(getattr(policy, "wrap_env", None)):
            env = policy.wrap_env(env)
        env_id = env_or_id
    else:
        env = env_or_id
        env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    try:
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
        return _result(env.unwrapped, env_id, policy, steps, info, env_kwargs, any_env)
    finally:
        env.close()


def _result(base: Any, env_id: str, policy: Any, steps: list[dict], info: dict, env_kwargs: dict,
            any_env: bool) -> EvalResult:
    """The :class:`EvalResult` of an episode that has ended (``base``: the env's ``unwrapped``)."""
    if isinstance(base, Evaluable):
        ep = base.episode_result()
        task = base.task_name
    elif any_env:  # a Gymnasium env of no quantgym task: its reward total and length
        ep = {"metrics": {"total_reward": float(sum(s["reward"] for s in steps)), "n_steps": len(steps)},
              "period": env_kwargs.get("period")}
        task = "other"
    else:
        raise TypeError(f"{type(base).__name__} does not implement episode_result() / task_name "
                        "(quantgym.evaluation.Evaluable), so evaluate() cannot summarise its episode")
    metrics = ep["metrics"]
    nav = ep.get("nav")
    return EvalResult(
        task=task,
        agent=policy_name(policy),
        agent_key=policy_key(policy),
        env_id=env_id,
        profile=ep.get("profile"),
        period=ep.get("period"),
        metrics={k: v for k, v in metrics.items() if k != "stage_means"},
        stage_scores=ep.get("stage_scores", metrics.get("stage_means")),
        ceps=ep.get("ceps", metrics.get("ceps")),
        nav=nav if nav is not None else pd.Series(dtype=float),
        steps=steps,
        config={"env_kwargs": {k: v for k, v in env_kwargs.items() if k != "data"},
                "config": base.config.to_dict() if hasattr(getattr(base, "config", None), "to_dict") else {}},
        records=list(ep.get("records") or []),
        status=policy_status(policy),
        info=info,
    )


def llm_summary(agent: Any, label: str | None) -> dict[str, Any] | None:
    """The agent's per-episode record of its LLM calls (``agent.llm_summary(label)``), or None for a
    policy that makes none."""
    fn = getattr(agent, "llm_summary", None)
    return fn(label) if callable(fn) and label is not None else None



def is_llm_agent(agent: Any) -> bool:
    """True for an LLM agent (it has a chat engine and per-episode usage)."""
    return hasattr(agent, "engine") and hasattr(agent, "episode_usage")


def job_label(env_id: str, extra: Any = None) -> str:
    """The progress label of an episode: ``env_id`` or ``"env_id extra"``."""
    return env_id if extra is None else f"{env_id} {extra}"


#: names defined in :mod:`quantgym.plan` and :mod:`quantgym.stats.repeats`, importable from here
_MOVED = {**dict.fromkeys(("EvalPlan", "EvalContext", "EvalAdapter", "check_env_kwargs", "validate_plan",
                           "run_eval", "release_stopped_agents"), "quantgym.plan"),
          "repeats_section": "quantgym.stats.repeats"}


def __getattr__(name: str) -> Any:  # PEP 562: loaded on first use (quantgym.plan imports this module)
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
