"""PortBench's LLM adapters (the ``llm`` entries of its records in :mod:`quantgym.tasks`): the stagewise
S1 → S2 → S3 text protocol (spec portbench §4) and the static QA layer's one call per question.

- :class:`PortBenchLLMAgent`: the env is built with ``stagewise=True`` and wrapped in
  :class:`~quantgym.envs.portbench.text_protocol.TextStageAction`; each stage prompt (rendered by the env, holding the agent's
  own previous outputs) is sent as one user message with the stage's JSON schema as ``response_format``
  when the endpoint supports it; the raw reply goes to the wrapper, which parses, coerces, re-asks
  (format-correction suffix) or falls back. An empty reply gets one extra call (§4.0); a failed call
  becomes ``None`` (a failed attempt). Completion cap: :func:`~quantgym.agents.llm.tokens.schema_token_bound`
  of the stage's schema.
- :class:`PortBenchQALLMAgent`: one call per static question; the env scores the text.
"""

from __future__ import annotations

from typing import Any

from quantgym.agents.llm.agents import LLMAgent, find_wrapper, fit_log

SYSTEM_PORTBENCH = (
    "You are a portfolio manager taking part in PortBench, a benchmark of staged portfolio decisions on "
    "historical market data (no real money). Each message is one stage of the pipeline. Answer with exactly one "
    "JSON object that follows the stated schema, and nothing else."
)
SYSTEM_QA = (
    "You answer questions about a portfolio and market snapshot. Follow the answer format stated in the question."
)


class PortBenchLLMAgent(LLMAgent):
    """PortBench stagewise agent (see module docstring). ``env_kwargs = {"stagewise": True}``."""

    task = "portbench"
    env_kwargs = {"stagewise": True}

    @staticmethod
    def wrap_env(env):
        from quantgym.envs.portbench.text_protocol import TextStageAction

        return TextStageAction(env)

    def act(self, observation: Any, info: dict) -> str | None:
        self._st()
        env = getattr(self._local, "env", None)
        wrapper = find_wrapper(env, "TextStageAction")
        stage = int(observation["stage"])
        attempt = wrapper.attempt if wrapper is not None else int(info.get("attempt", 0)) + 1
        stage_schema = wrapper.json_schema() if wrapper is not None else None
        schema = stage_schema if self.engine.config.structured != "off" else None
        from quantgym.agents.llm.tokens import schema_token_bound

        cap = schema_token_bound(stage_schema) if stage_schema is not None else self.output_cap
        base = getattr(env, "unwrapped", None)
        snap = getattr(base, "snapshot", None)
        # the decision date of this prompt (info["date"] still names the date just finished when a new S1 starts)
        date = str(snap.decision_date.date()) if snap is not None else info.get("date")
        meta = {"task": "portbench", "date": date, "stage": ("S1", "S2", "S3")[stage], "attempt": attempt}
        full = str(observation["prompt"])

        def build(style: str) -> list[dict]:
            if style == "full" or base is None:
                text = full  # what the env (and the wrapper's re-ask suffix) put in the observation
            else:
                from quantgym.envs.portbench.prompts import FORMAT_CORRECTION_SUFFIX

                text = base.render_prompt(style=style) + (FORMAT_CORRECTION_SUFFIX if attempt > 1 else "")
            return [{"role": "system", "content": SYSTEM_PORTBENCH}, {"role": "user", "content": text}]

        # the re-ask prompt is the same on attempts 2 and 3 (§11.5): the attempt enters the request hash so
        # the cache never answers a re-ask with the answer that just failed
        nonce = 2 * (attempt - 1)
        res = self._fitted_call(build, cap=cap, schema=schema, meta=meta, nonce=nonce)
        extra = False
        if res.ok and not (res.text or "").strip():
            extra = True  # §4.0: an empty API response gets one extra call before it counts as a refusal
            res = self._fitted_call(build, cap=cap, schema=schema, meta={**meta, "extra_call": True}, nonce=nonce + 1)
        self._log(**meta, **fit_log(res), ok=res.ok, error=res.error, error_kind=res.error_kind, extra_call=extra,
                  structured=res.structured, rung=res.rung, usage=res.usage, cached=res.cached, warning=res.warning,
                  finish_reason=res.finish_reason)
        if not res.ok:
            return None
        return res.text or ""

    def dry_run(self, env_id: str, plan: Any, opts: dict, window: int | None, r: dict) -> None:
        """``quantgym eval --dry-run``: add this env id's planned episodes to the task row ``r``
        (:mod:`quantgym.agents.llm.dryrun`); ``self.engine`` is a :class:`~quantgym.agents.llm.dryrun.DryRunEngine`.

        The episode is really run, with an engine that sends nothing and answers every stage with a
        refusal (the env then takes the §4.0 fallback and moves on), so every stage prompt is rendered
        exactly as in a real run, in the style the context budget chooses. One call per stage and date
        is the floor; format re-asks (at most 3 attempts per stage) can triple it (the upper bound).
        """
        from quantgym.agents.llm.dryrun import add_episode as _add, expected_completion as _expected_completion
        from quantgym.envs.portbench.eval import eval_periods
        from quantgym.evaluation import evaluate

        agent = self
        for p in eval_periods(plan):
            n0 = len(agent.engine.planned)
            evaluate(env_id, agent, seed=plan.seed, period=p, **dict(plan.env_kwargs))
            calls = agent.engine.planned[n0:]
            pt = sum(c["prompt_tokens"] for c in calls)
            _add(r, len(calls), 3 * len(calls), pt, 3 * pt,
                 sum(_expected_completion(c["max_tokens"], "json") for c in calls),
                 3 * sum(c["max_tokens"] or 0 for c in calls), None)
        for lab, log in agent.logs.items():
            for e in log:
                st = e.get("prompt_style")
                if st:
                    r["styles"][st] = r["styles"].get(st, 0) + 1


class PortBenchQALLMAgent(LLMAgent):
    """PortBench-QA (static questions): one call per question; the env scores the text."""

    task = "portbench_qa"
    output_cap = 256

    def act(self, observation: Any, info: dict) -> str:
        self._st()
        prompt = observation["prompt"] if isinstance(observation, dict) else str(observation)
        base = getattr(getattr(self._local, "env", None), "unwrapped", None)

        def build(style: str) -> list[dict]:
            text = str(prompt) if style == "full" or base is None else base.render_prompt(style=style)
            return [{"role": "system", "content": SYSTEM_QA}, {"role": "user", "content": text}]

        res = self._fitted_call(build, cap=self.output_cap, meta={"task": "portbench_qa"})
        self._log(**fit_log(res), ok=res.ok, error=res.error, usage=res.usage, warning=res.warning)
        return (res.text or "") if res.ok else ""



__all__ = ["PortBenchLLMAgent", "PortBenchQALLMAgent", "SYSTEM_PORTBENCH", "SYSTEM_QA"]
