"""``TextStageAction``: PortBench's text protocol for LLM agents (spec portbench.md §4.0, §11.4, §11.5).

The wrapped env must run ``stagewise=True`` (S1 → S2 → S3 sub-steps with a ``prompt`` in every
observation). The wrapper's action is the model's raw answer (``str``); it

1. detects a refusal (§4.0: refusal phrases, an answer shorter than 120 characters without ``{``,
   an empty answer) and sends ``status=1`` with the stage fallback — no re-ask;
2. otherwise extracts a JSON object (fences, first balanced object, greedy span, salvaged pairs,
   braces) and applies the §4.1–§4.3 coercions, recorded in ``info["text"]["coercions"]``;
3. on a parse failure with fewer than 3 attempts returns the *same* observation with
   ``prompt = original prompt + FORMAT_CORRECTION_SUFFIX``, reward 0, ``info["attempt"] = k`` and does
   not advance the simulator; after the 3rd failure it sends ``status=2`` (unparseable, fallback,
   score 0).

In tool mode (``tools=True``, docs/tools.md) a tool call, as a dict or its JSON text, is passed to the env
unchanged (its result is the next observation; the stage's attempts are not used).

``None`` as the action means "no answer" (the agent's API call failed after its retries): it counts as
a failed attempt like an unparseable answer. The wrapper never calls a model.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from quantgym.envs.portbench.coercion import COERCERS, stage_json_schema
from quantgym.envs.portbench.parsing import extract_json, is_refusal
from quantgym.spaces import AnyText
from quantgym.tools import parse_tool_call

#: attempts per stage before status=2 (§4.0: the first call plus 2 re-asks)
MAX_ATTEMPTS = 3
STATUS_OK, STATUS_REFUSED, STATUS_UNPARSEABLE = 0, 1, 2
_KEYS = ("views", "signals", "weights")


class TextStageAction(gym.Wrapper):
    """Text-answer action wrapper of a stagewise PortBench env (spec §11.5).

    Parameters
    ----------
    env : a PortBench env created with ``stagewise=True`` (and ``text_obs`` left at its default).
    max_attempts : attempts per stage (default 3, spec §4.0).

    Attributes
    ----------
    action_space : ``AnyText(max_length=65536)``.
    observation_space : unchanged (the ``prompt`` field carries the stage prompt).

    ``info["text"]`` after every step: ``stage`` ("S1"|"S2"|"S3"), ``attempt`` (1..3), ``answers`` (raw
    answers of this stage so far), ``status`` ("ok" | "refused" | "unparseable" | "retry"),
    ``parse_method``, ``coercions``, ``error`` (refusal reason or parse error). ``info["attempt"]`` is
    the attempt number that was just used.

    Raises
    ------
    ValueError
        If the env is not a stagewise PortBench env with text observations.
    TypeError
        If the action is neither ``str`` nor ``None`` (a caller bug, not model output).
    """

    def __init__(self, env: gym.Env, max_attempts: int = MAX_ATTEMPTS):
        super().__init__(env)
        base = env.unwrapped
        if not getattr(base, "stagewise", False) or not getattr(base, "text_obs", False):
            raise ValueError("TextStageAction needs a PortBench env built with stagewise=True (text observations); "
                             "e.g. gym.make('PortBench-Balanced-v0', stagewise=True)")
        if int(max_attempts) < 1:
            raise ValueError("max_attempts must be >= 1")
        self.max_attempts = int(max_attempts)
        self.action_space = AnyText(max_length=65536)
        self._obs: dict | None = None
        self._info: dict = {}
        self._attempt = 1
        self._answers: list[Any] = []

    # ------------------------------------------------------------------ helpers
    @property
    def stage(self) -> int:
        """Current sub-step: 0 S1, 1 S2, 2 S3."""
        return int(self._obs["stage"]) if self._obs is not None else 0

    @property
    def attempt(self) -> int:
        """Attempt number of the next answer (1-based)."""
        return self._attempt

    def _tickers(self) -> tuple[str, ...]:
        return tuple(self.env.unwrapped.prompt_tickers)  # the aliases in blind mode (docs/blind.md)

    def _available(self) -> np.ndarray:
        return np.asarray(self._obs["available"], bool)

    def json_schema(self) -> dict:
        """Structured-output schema of the current stage over the available assets (see
        :func:`quantgym.envs.portbench.coercion.stage_json_schema`)."""
        tick = self._tickers()
        return stage_json_schema(self.stage, [tick[i] for i in np.flatnonzero(self._available())])

    def _action(self, values: np.ndarray | None, status: int) -> dict[str, Any]:
        n = len(self._tickers())
        act = {"views": np.zeros(n), "signals": np.ones(n), "weights": np.zeros(n), "status": int(status)}
        if values is not None:
            act[_KEYS[self.stage]] = np.asarray(values, dtype=np.float64)
        return act

    def _set_notes(self, notes: dict) -> None:
        base = self.env.unwrapped
        if not isinstance(getattr(base, "stage_notes", None), dict):
            base.stage_notes = {}
        base.stage_notes.update(notes)

    # ------------------------------------------------------------------ gym API
    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._obs, self._info = obs, dict(info)
        self._attempt, self._answers = 1, []
        return obs, info

    def step(self, action: Any):
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        if getattr(self.env.unwrapped, "toolbox", None) is not None and parse_tool_call(action) is not None:
            # tool mode (docs/tools.md): a tool call (dict or its JSON text) goes to the env as it is; the
            # stage prompt and its attempt count stay
            return self.env.step(action)
        if action is not None and not isinstance(action, str):
            raise TypeError(f"TextStageAction takes the model's answer as str (or None for no answer), "
                            f"got {type(action).__name__}")
        stage = self.stage
        name = ("S1", "S2", "S3")[stage]
        self._answers.append(action)
        rec: dict[str, Any] = {"stage": name, "attempt": self._attempt, "answers": list(self._answers),
                               "parse_method": None, "coercions": [], "error": None}
        if action is None:
            refused, reason = False, None
            parsed, perr = None, "no answer (the agent's API call failed)"
        else:
            refused, reason = is_refusal(action)
            parsed, perr = None, None
            if not refused:
                res = extract_json(action)
                parsed, perr = res.obj, res.error
                rec["parse_method"] = res.method
        if refused:
            rec.update(status="refused", error=reason)
            defaults = ({"detected_regime": "sideways", "macro_summary": "n/a", "confidence": 0.0},
                        {"strengths": np.full(len(self._tickers()), 0.5)}, {})[stage]
            self._set_notes(defaults)
            return self._send(self._action(None, STATUS_REFUSED), rec)
        if parsed is None:
            rec["error"] = perr
            if self._attempt < self.max_attempts:
                rec["status"] = "retry"
                from quantgym.envs.portbench.prompts import FORMAT_CORRECTION_SUFFIX

                obs = dict(self._obs)
                obs["prompt"] = str(self._obs["prompt"]) + FORMAT_CORRECTION_SUFFIX
                info = {k: v for k, v in self._info.items() if k not in ("orders", "episode_metrics")}
                info.update(attempt=self._attempt, text=rec)
                self._attempt += 1
                return obs, 0.0, False, False, info
            rec["status"] = "unparseable"
            defaults = ({"detected_regime": "sideways", "macro_summary": "n/a", "confidence": 0.0},
                        {"strengths": np.full(len(self._tickers()), 0.5)}, {})[stage]
            self._set_notes(defaults)
            return self._send(self._action(None, STATUS_UNPARSEABLE), rec)
        co = COERCERS[stage](parsed, self._tickers(), self._available())
        rec.update(status="ok" if co.usable else "invalid", coercions=co.coercions)
        self._set_notes(co.notes)
        return self._send(self._action(co.values, STATUS_OK), rec)

    def _send(self, action: dict, rec: dict):
        used = self._attempt
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._obs, self._info = obs, dict(info)
        self._attempt, self._answers = 1, []
        info = dict(info)
        info["attempt"] = used
        info["text"] = rec
        return obs, reward, terminated, truncated, info


__all__ = ["TextStageAction", "MAX_ATTEMPTS"]
