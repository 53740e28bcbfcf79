"""Evaluate one policy on the QA layer: every item of a :class:`~.env.PortBenchQAEnv`, then §9.5 aggregation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from quantgym.envs.portbench.static_qa.aggregate import aggregate
from quantgym.envs.portbench.static_qa.env import PortBenchQAEnv


@dataclass
class QARun:
    """Result of :func:`run_qa`.

    Attributes
    ----------
    agent : str
    records : list of dict
        One per item: id, template, restricted, regime, complexity, decision_date, score, correct,
        truth, response, prediction, error.
    summary : dict
        :func:`~.aggregate.aggregate` output (``table`` holds the paper's columns).
    env_kwargs : dict
    """

    agent: str
    records: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    env_kwargs: dict = field(default_factory=dict)

    @property
    def table(self) -> dict[str, float]:
        return self.summary.get("table", {})


#: exception class names that stop a run (configuration problems of the LLM agent), not one item
FATAL_ERRORS: tuple[str, ...] = ("LLMConfigError", "ReplayMismatchError")


def _call(policy: Any, obs: dict, info: dict) -> Any:
    act = getattr(policy, "act", None)
    return act(obs, info) if callable(act) else policy(obs, info)


def run_qa(policy: Any, agent: str | None = None, env: PortBenchQAEnv | None = None,
           on_item: Callable[[dict], None] | None = None, workers: int = 1, **env_kwargs: Any) -> QARun:
    """Run ``policy`` on every item of the QA env and aggregate (spec §9.3–§9.5).

    Parameters
    ----------
    policy : callable ``f(observation, info) -> str`` or object with ``act(observation, info)``
        An exception raised by the policy is recorded as a failed answer (score 0, ``error``), never
        propagated (except the LLM agent's configuration errors, :data:`FATAL_ERRORS`, which stop the
        run); a non-``str`` answer is a failed answer too.
    agent : str, optional
        Label (default: ``policy.name`` or the class name).
    env : PortBenchQAEnv, optional
        Prebuilt env; else one is built from ``env_kwargs`` (default ``restricted="both"``: the paper's
        9 template columns).
    on_item : callable, optional
        Called with each record (e.g. to advance a progress bar).
    workers : int
        Policy calls in parallel threads (LLM agents: network-bound). Items are independent one-step
        episodes, so the records are identical for any ``workers`` (order preserved); scoring stays
        sequential. Default 1.

    Returns
    -------
    QARun
    """
    env_kwargs.setdefault("restricted", "both")
    env = env or PortBenchQAEnv(**env_kwargs)
    name = agent or getattr(policy, "name", None) or type(policy).__name__
    # blind (docs/blind.md): item i's aliases are drawn from seed i, the same map for the question the policy
    # reads and for the step that scores its answer
    blind = bool(getattr(env, "blind", False))
    episodes = [env.reset(seed=i if blind else None, options={"index": i}) for i in range(env.n_items)]

    def answer_of(i: int) -> tuple[Any, str | None]:
        obs, info = episodes[i]
        try:
            return _call(policy, obs, info), None
        except Exception as exc:  # untrusted agent: a recorded, scored failure
            if type(exc).__name__ in FATAL_ERRORS:
                raise
            return None, f"policy error: {type(exc).__name__}: {exc}"

    records = []

    def score(i: int, answer: Any, err: str | None) -> None:
        env.reset(seed=i if blind else None, options={"index": i})
        aliased = blind and err is None and isinstance(answer, str) and getattr(policy, "answers_real_tickers", False)
        if aliased:  # an evaluator-side reference (oracle, naive) writes real tickers: given in aliases
            answer = env.blinding.to_aliases(answer)
        _, reward, _, _, out = env.step(answer if err is None else "")
        rec = {
            "id": out["id"], "template": out["template"].split("_")[0], "label": out["template"],
            "restricted": out["restricted"], "regime": out["regime"], "complexity": out["complexity"],
            "decision_date": out["decision_date"], "assets": out["assets"], "score": float(reward),
            "correct": bool(out["correct"]), "truth": out["truth"],
            "response": answer if isinstance(answer, str) else (None if answer is None else repr(answer)),
            "prediction": out["prediction"], "error": err or out["error"],
            **({"answer_in_aliases": True} if aliased else {}),
        }
        records.append(rec)
        if on_item is not None:
            on_item(rec)

    if int(workers) <= 1:
        for i in range(env.n_items):
            score(i, *answer_of(i))
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=int(workers)) as pool:
            for i, (answer, err) in enumerate(pool.map(answer_of, range(env.n_items))):
                score(i, answer, err)
    return QARun(agent=name, records=records, summary=aggregate(records),
                 env_kwargs={k: v for k, v in env_kwargs.items() if k != "data"})
