"""Market-Bench's LLM adapter (the ``llm`` entry of its record in :mod:`quantgym.tasks`): K independent
one-shot attempts (fresh conversation each; the attempt number enters the request hash so the cache never
serves an earlier attempt), or, when the env runs ``feedback=True``, a repair conversation with the failure
trace (spec market_bench §5)."""

from __future__ import annotations

from typing import Any

from quantgym.agents.llm.agents import LLMAgent, fit_log
from quantgym.agents.llm.code import extract_code, failure_source

SYSTEM_MARKET_BENCH = (
    "You are a quantitative developer. Implement the backtester exactly as specified. Reply with the complete "
    "Python module in one ```python code block."
)


def _mb_repair_msg(feedback: str, limit: int = 20000) -> str:
    return ("Your backtester was run on the input files:\n" + feedback[:limit]
            + "\n\nFix it and reply with the complete corrected module in one ```python code block.")


class MarketBenchLLMAgent(LLMAgent):
    """Market-Bench agent: K independent attempts, or repair mode when the env gives feedback."""

    task = "market_bench"
    output_cap = 3072

    def _hash_subs(self) -> tuple[tuple[str, str], ...]:
        # the prompt names the env's temporary input folder: hash it as <WORKDIR> so that a replay or a
        # cache hit does not depend on the folder name
        env = getattr(self._local, "env", None)
        wd = getattr(getattr(env, "unwrapped", None), "workdir", None)
        return ((str(wd), "<WORKDIR>"),) if wd else ()

    def _prompt_variants(self, text: str) -> dict[str, str]:
        env = getattr(self._local, "env", None)
        base = getattr(env, "unwrapped", None)
        return {s: (text if s == "full" else base.render_prompt(style=s)) for s in self._styles(env)}

    def act(self, observation: Any, info: dict) -> str:
        st = self._st()
        used = int(observation.get("attempt", 0))
        feedback = str(observation.get("feedback") or "")
        if used == 0 or "turns" not in st:
            st.clear()
            st["turns"] = [{"role": "user", "variants": self._prompt_variants(str(observation["prompt"]))}]
            st["last"] = None
        if feedback and st.get("last") is not None:  # repair mode: continue the conversation
            st["turns"] += [{"role": "assistant", "text": st["last"]},
                            {"role": "user", "feedback": feedback}]
            turns, nonce, mode = list(st["turns"]), 0, "repair"
        else:
            turns, nonce, mode = st["turns"][:1], used, "independent"

        def build(style: str) -> list[dict]:
            msgs = [{"role": "system", "content": SYSTEM_MARKET_BENCH}]
            for t in turns:
                if t["role"] == "assistant":
                    msgs.append({"role": "assistant", "content": t["text"]})
                elif "feedback" in t:  # [project choice] the failure trace is cut to fit the style
                    limit = {"full": 20000, "compact": 4000}.get(style, 1500)
                    msgs.append({"role": "user", "content": _mb_repair_msg(t["feedback"], limit)})
                else:
                    v = t["variants"]  # the styles of _styles(): "full" is among them only when asked for
                    msgs.append({"role": "user", "content": v[style] if style in v else v["full"]})
            return msgs

        res = self._fitted_call(build, cap=self.output_cap,
                                meta={"task": "market_bench", "attempt": used + 1, "mode": mode}, nonce=nonce)
        st["last"] = res.text if res.ok else ""
        code = extract_code(res.text, "run_backtest") if res.ok else None
        self._log(attempt=used + 1, mode=mode, **fit_log(res), ok=res.ok, error=res.error, has_code=code is not None,
                  usage=res.usage, warning=res.warning)
        if code is None:
            code = failure_source(f"call failed: {res.error}" if not res.ok else "the reply held no Python code block")
        return code

    def dry_run(self, env_id: str, plan: Any, opts: dict, window: int | None, r: dict) -> None:
        """``quantgym eval --dry-run``: add this env id's planned episodes to the task row ``r``
        (:mod:`quantgym.agents.llm.dryrun`); ``self.engine`` is a :class:`~quantgym.agents.llm.dryrun.DryRunEngine`.

        Each round's prompt is rendered; the floor is the first attempt (every attempt with
        ``all_attempts``, ``--attempts n``), the most ``attempts`` calls per round (repair mode: the conversation grows by the code and its trace each time).
        """
        import gymnasium as gym

        from quantgym.agents.llm.dryrun import (add_episode as _add, code_cap as _cap,
                                                expected_completion as _expected_completion)

        from quantgym.envs.market_bench.eval import MarketBenchPlan

        agent = self
        cap = _cap(opts, self.output_cap)
        mb = MarketBenchPlan.of(plan)
        for rnd in mb.rounds:
            env = gym.make(env_id, round=rnd, attempts=mb.attempts, feedback=mb.feedback, **dict(plan.env_kwargs))
            try:
                env.reset(seed=plan.seed)
                texts = {st: env.unwrapped.render_prompt(st) for st in agent._styles(env)}
            finally:
                env.close()
            _, c1, f1 = agent._fit(lambda st: [{"role": "system", "content": SYSTEM_MARKET_BENCH},
                                               {"role": "user", "content": texts[st]}], tuple(texts), cap, window)
            pt, k = f1["prompt_tokens_est"], mb.attempts
            # floor: the first attempt runs and ends the round (all k with --attempts n, independent mode);
            # most: every attempt (repair mode: the conversation grows by the code and its trace each time)
            grow = (c1 or 0) + 400 if mb.feedback else 0
            floor = k if mb.all_attempts and not mb.feedback else 1
            _add(r, floor, k, floor * pt, sum(pt + i * grow for i in range(k)),
                 floor * _expected_completion(c1, "code"), k * (c1 or 0), f1["prompt_style"])


__all__ = ["MarketBenchLLMAgent", "SYSTEM_MARKET_BENCH"]
