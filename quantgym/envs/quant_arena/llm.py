"""Quant-Arena's LLM adapter (the ``llm`` entry of its record in :mod:`quantgym.tasks`): the research loop
(spec quant_arena §5): brief → module → feedback → revised module … up to the budget (or ``rounds``), then
``FREEZE k`` (the model's choice; if it gives none, the candidate with the best research excess ARR).
One-shot track: one module, no feedback."""

from __future__ import annotations

from typing import Any, Callable

from quantgym.agents.llm.agents import LLMAgent, fit_log
from quantgym.agents.llm.code import extract_code, extract_freeze, failure_source

SYSTEM_QUANT_ARENA = (
    "You are a quantitative researcher in Quant-Arena. You write Python modules that score every stock every "
    "trading day, read the research feedback, and improve your module. Always reply either with the complete "
    "module in one ```python code block, or (to stop researching) with the single line FREEZE <k>."
)

QA_FIRST = ("\n\n---\nReply with the complete Python module in one ```python code block (it must define FEATURES, "
            "compute_features and score).")
QA_ONESHOT = "\n\n---\nOne-shot track: reply with the complete Python module in one ```python code block."


def _qa_feedback_msg(obs: str, k: int, budget_left: int, n: int, must_freeze: bool) -> str:
    fence = "json" if obs.lstrip().startswith("{") else ""  # the minimal style's feedback is plain text lines
    head = f"Research feedback for candidate {k}:\n```{fence}\n{obs}\n```\n"
    if must_freeze:
        return head + (f"No more candidates can be submitted. Reply with the single line FREEZE <k> (k in 1..{n}) "
                       "naming the candidate to evaluate on the sealed window.")
    return head + (f"Budget left: {budget_left} candidate(s). Reply with an improved complete module in one "
                   f"```python block, or with the single line FREEZE <k> (k in 1..{n}) to stop and freeze "
                   "candidate k.")


#: estimated tokens of one research feedback message in a conversation (dry run) [project choice]
FEEDBACK_TOKENS = 600


class QuantArenaLLMAgent(LLMAgent):
    """Quant-Arena research loop / one-shot agent (see module docstring).

    Adapter options
    ---------------
    rounds : int or None — most candidates to submit (default: the env's budget).
    """

    task = "quant_arena"
    output_cap = 2048

    def _best(self, st: dict) -> int | None:
        best, best_v = None, None
        for k, fb in st["feedback"].items():
            if fb.get("status") == "ok" and fb.get("window"):
                v = fb["window"].get("excess_arr")
                if v is not None and (best_v is None or v > best_v):
                    best, best_v = k, v
        return best or (st["n"] or None)

    def _freeze(self, st: dict, k: int | None, how: str) -> dict:
        if k is None or not 1 <= k <= st["n"]:
            if k is not None:
                how += f"; index {k} out of range -> best research excess ARR"
            k = self._best(st)
        self._log(action="freeze", candidate=k, how=how)
        st["frozen"] = True
        return {"freeze": k}

    def _submit(self, st: dict, reply: str | None, err: str | None) -> str:
        code = extract_code(reply, "score") if reply else None
        if code is None:
            code = failure_source(err or "the reply held no Python code block")
        st["n"] += 1
        self._log(action="submit", candidate=st["n"], has_code=not code.startswith("raise RuntimeError"),
                  chars=len(code))
        return code

    def _variants(self, text: str) -> dict[str, str]:
        """The current observation in every prompt style the env renders (``full`` = ``text``)."""
        env = getattr(self._local, "env", None)
        base = getattr(env, "unwrapped", None)
        out = {"full": text}
        for style in self._styles(env):
            if style != "full":
                out[style] = base.render_prompt(style=style)
        return out

    def _build(self, st: dict) -> Callable[[str], list[dict]]:
        """Conversation renderer: ``full`` sends every turn as it was; ``compact`` keeps the code of the
        last two candidates and renders brief and feedback compactly; ``minimal`` keeps only the last
        candidate's code (earlier ones are named, not repeated) [project choice]."""
        turns = list(st["turns"])

        def build(style: str) -> list[dict]:
            keep_code = {"full": None, "compact": 2, "minimal": 1}.get(style, 1)
            codes = [i for i, t in enumerate(turns) if t["role"] == "assistant"]
            drop = set(codes[:-keep_code]) if keep_code is not None and len(codes) > keep_code else set()
            msgs = [{"role": "system", "content": SYSTEM_QUANT_ARENA}]
            k = 0
            for i, t in enumerate(turns):
                if t["role"] == "assistant":
                    k += 1
                    text = (f"[candidate {k}: code omitted to fit the context window; its feedback follows]"
                            if i in drop else t["text"])
                    msgs.append({"role": "assistant", "content": text})
                else:
                    v = t["variants"]
                    msgs.append({"role": "user", "content": v.get(style, v["full"]) + t.get("suffix", "")})
            return msgs

        return build

    def _turn(self, st: dict, meta: dict):
        res = self._fitted_call(self._build(st), cap=self.output_cap, meta=meta)
        self._log(action="call", **meta, **fit_log(res), ok=res.ok, error=res.error, usage=res.usage,
                  warning=res.warning)
        st["turns"].append({"role": "assistant", "text": res.text if res.ok else ""})
        return res

    def act(self, observation: Any, info: dict) -> Any:
        st = self._st()
        if "brief" in info or not st:
            facts = info.get("brief") or {}
            env = getattr(self._local, "env", None)
            mode = facts.get("mode") or getattr(getattr(env, "unwrapped", None), "mode", "iterative")
            budget = int(facts.get("budget") or info.get("budget_left") or 5)
            rounds = self.adapter_options.get("rounds")
            st.clear()
            st.update(mode=mode, cap=min(budget, int(rounds)) if rounds else budget, n=0, feedback={},
                      turns=[{"role": "user", "variants": self._variants(str(observation)),
                              "suffix": QA_ONESHOT if mode == "oneshot" else QA_FIRST}])
            res = self._turn(st, {"task": "quant_arena", "turn": 1})
            return self._submit(st, res.text if res.ok else None, None if res.ok else f"call failed: {res.error}")
        # a research feedback observation
        fb = info.get("feedback")
        if isinstance(fb, dict):
            st["feedback"][int(fb.get("candidate", st["n"]))] = fb
        budget_left = int(info.get("budget_left", 0))
        must_freeze = budget_left <= 0 or st["n"] >= st["cap"]
        variants = {k: _qa_feedback_msg(v, st["n"], budget_left, st["n"], must_freeze)
                    for k, v in self._variants(str(observation)).items()}
        st["turns"].append({"role": "user", "variants": variants})
        res = self._turn(st, {"task": "quant_arena", "turn": st["n"] + 1, "must_freeze": must_freeze})
        if not res.ok:
            return self._freeze(st, None, f"rule (call failed: {res.error})")
        found, k = extract_freeze(res.text)
        code = extract_code(res.text, "score")
        if must_freeze or (found and code is None):
            return self._freeze(st, k if found else None, "model" if found else "rule (no FREEZE line)")
        return self._submit(st, res.text, None)

    def dry_run(self, env_id: str, plan: Any, opts: dict, window: int | None, r: dict) -> None:
        """``quantgym eval --dry-run``: add this env id's planned episodes to the task row ``r``
        (:mod:`quantgym.agents.llm.dryrun`); ``self.engine`` is a :class:`~quantgym.agents.llm.dryrun.DryRunEngine`.

        The brief is rendered; an iterative run makes ``budget`` candidate calls plus a freeze call
        (``--rounds`` caps the candidates), each turn's prompt holding the conversation so far, estimated
        as the brief plus, per earlier turn, the code cap and :data:`FEEDBACK_TOKENS`; one-shot: one call.
        """
        import gymnasium as gym

        from quantgym.agents.llm.dryrun import (add_episode as _add, code_cap as _cap,
                                                expected_completion as _expected_completion)

        agent = self
        env = gym.make(env_id, record_dir=False, **dict(plan.env_kwargs))
        try:
            brief, info = env.reset(seed=plan.seed)
            briefs = {st: env.unwrapped.render_prompt(st) for st in agent._styles(env)}
        finally:
            env.close()
        mode = (info.get("brief") or {}).get("mode", "iterative")
        budget = int((info.get("brief") or {}).get("budget") or 5)
        cand = min(budget, int(opts.get("rounds") or budget))
        turns = 1 if mode == "oneshot" else cand + 1
        cap = _cap(opts, self.output_cap)
        _, c1, f1 = agent._fit(lambda st: [{"role": "system", "content": SYSTEM_QUANT_ARENA},
                                           {"role": "user", "content": briefs[st]}], tuple(briefs), cap, window)
        b = f1["prompt_tokens_est"]
        # each later turn adds the code and the feedback; with a known window the conversation is rendered
        # to fit it (older code dropped), so a turn never holds more than the window minus the cap
        prompts = [b + k * ((c1 or 0) + FEEDBACK_TOKENS) for k in range(turns)]
        if window is not None:
            prompts = [min(p, max(b, window - (c1 or 0) - 16)) for p in prompts]
        _add(r, turns, turns, sum(prompts), sum(prompts), turns * _expected_completion(c1, "code"),
             turns * (c1 or 0), f1["prompt_style"])


__all__ = ["FEEDBACK_TOKENS", "QuantArenaLLMAgent", "SYSTEM_QUANT_ARENA"]
