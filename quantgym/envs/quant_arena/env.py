"""The Quant-Arena Gymnasium environment (spec quant_arena.md §9, §10.14).

Longer than 500 lines as one job, the research loop's Gymnasium API (submit, feedback, freeze, the sealed
score).

Registered ids: ``QuantArena-v0`` (``mode="iterative"``) and ``QuantArena-OneShot-v0``
(``mode="oneshot"``). The brief and feedback text it returns are rendered by
:mod:`~quantgym.envs.quant_arena.prompts`; each candidate runs through
:mod:`~quantgym.envs.quant_arena.executor`.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np

from quantgym._util import check_flag
from quantgym.models import ImportableModel
from quantgym.spaces import AnyText, InvalidActionError, check_prompt_style

from .config import (ArenaConfig, ArenaCostModel, ExecutionModel, ImpactModel, ArenaSandboxLimits, ArenaScoringConfig,
                     Windows)
from .blinding import ArenaBlinding, blind_years, check_blind
from .data import ArenaDataset, load_dataset
from .executor import ArenaHostError, WindowResult, evaluate_submission, source_hash
from .metrics import research_overfitting, total_score
from .prompts import round6, feedback_text, research_feedback, task_brief
from .records import RunRecorder

#: Longest submission (characters) the action space accepts.
MAX_SOURCE_CHARS = 200_000
#: Longest observation text.
MAX_OBS_CHARS = 1_000_000

_TRUNC_CACHE: dict[tuple[int, str], ArenaDataset] = {}

#: The action types the env accepts (named in :class:`InvalidActionError` messages).
EXPECTED_ACTIONS = "source text (str) or {'freeze': k} (dict; k = 1-based candidate index or None)"


def dataset_until(ds: ArenaDataset, end: str) -> ArenaDataset:
    """``ds.truncate(end)``: the dataset up to ``end`` (a window's last day), cached per (dataset, end)."""
    key = (id(ds), end)
    if key not in _TRUNC_CACHE:
        if len(_TRUNC_CACHE) > 8:
            _TRUNC_CACHE.clear()
        _TRUNC_CACHE[key] = ds.truncate(end)
    return _TRUNC_CACHE[key]


class QuantArenaEnv(gym.Env):
    """
    ## Description
    The sealed quant research loop of Quant-Arena (spec ``quant_arena.md``). One
    episode = one research run: the agent submits up to 5 candidate strategies
    (Python source), sees bounded research feedback for each, freezes one, and the
    environment evaluates it once on the sealed window (default 2024) that the agent
    never observed. Agent code runs in :mod:`quantgym.sandbox` (separate process,
    limits, no file/network access; data reaches it only through the view).

    ## Action Space
    ``AnyText(200_000)``: the source text of a candidate. The freeze action
    ``{"freeze": k}`` (k = 1-based candidate index, ``None`` = latest) is a dict, outside
    the Text space. Any other type, or a dict other than ``{"freeze": k}``, raises
    :class:`InvalidActionError` (a ``ValueError`` naming the expected action types; also a
    ``TypeError`` as in spec §10.14), and so does a freeze index that names no evaluated
    candidate (``{"freeze": 9}`` with no candidate included). ``{"freeze": None}`` with no
    candidate ends the run with S = 0 (§10.14).

    ## Observation Space
    ``AnyText(1_000_000)``: ``reset`` returns the task brief (markdown); a research
    step returns the JSON text of the feedback dict (spec §10.14; also in
    ``info["feedback"]``); the final step returns the JSON text of the final scores.

    ## Rewards
    Research step: S_in of the candidate (0–100; 0 if its status is not ``ok``).
    Final step: total ``S = 0.5·S_in + 0.5·S_out`` of the frozen candidate. The final info also
    carries ``overfitting``: the Deflated Sharpe Ratio of the frozen candidate's research
    returns and the PBO by CSCV over the candidates' research returns
    (:func:`~quantgym.envs.quant_arena.metrics.research_overfitting`); diagnostics only, S ignores them.

    ## Starting State
    No candidate; budget 5 (one-shot: 1).

    ## Episode End
    Terminates on freeze, on a submit after the 5th candidate (acts as freeze of the
    latest), or — one-shot — on the first submit. Never truncates.

    ## Arguments
    mode : {"iterative", "oneshot"}
    data : None | ArenaDataset | DataFrame | path — None = bundled 800-stock universe.
    research_start, research_end, sealed_start, sealed_end, warmup_start : str — window kwargs
        (or ``windows=Windows(...)``).
    cost, impact, execution, scoring, sandbox : config objects (``ArenaCostModel.off()`` and
        ``ImpactModel.off()`` switch costs/impact off): aliases that set the fields of ``config`` of the same
        name. ``cost`` and ``impact`` may name user models (:class:`~quantgym.models.ImportableModel`). Each may
        also be a dict, as a sweep file or ``--env-kwargs`` gives it: ``{"class_path": ..., "kwargs": ...}`` for a
        user model, else the fields of the built-in config (``{"commission_rate": 0.0003}``).
    record_dir : path — folder of the JSONL run records (default: system temp); ``False``: no record.
    max_candidates : int — research budget (5).
    executor : {"sandbox", "inprocess"} — ``inprocess`` is for trusted code only (tests).
    agent, model, framework : str — labels written into the record.
    prompt_style : {"full", "compact", "minimal"} — the rendering of the brief and the research
        feedback text (:data:`quantgym.spaces.PROMPT_STYLES`; :func:`task_brief`, :func:`feedback_text`;
        ``info["prompt_style"]``); ``info["feedback"]`` and the record keep the full dict.
        :meth:`render_prompt` re-renders the current observation in any style.
    blind : bool — blind evaluation (docs/blind.md): the brief, the feedback and the sandboxed view carry no
        date, year, period name, stock code or price level (aliases that keep the board, relative trading days,
        prices and volumes rebased per stock by powers of two); the alias map is drawn from the episode seed
        and kept in the run record only. Scores are computed on the real panel exactly as named.
    tools : bool — tool mode (docs/tools.md, :mod:`.tools`): a step may also be a tool call
        ``{"tool": name, "arguments": {...}}`` of ``describe_data``, ``explore``, ``submit`` or ``freeze``
        (one-shot: no ``freeze``); ``describe_data``/``explore`` answer with reward 0 and leave the run where it
        is, ``submit``/``freeze`` take the text answer's path. ``info["tools"]`` holds the schemas and
        ``info["tool_budget"]`` the budgets; every call is in ``info["tool"]`` and the run record.
    tool_config : ArenaToolConfig | dict — the budgets of tool mode (per-stage calls and result characters,
        exploration runs per episode; defaults in :class:`~quantgym.envs.quant_arena.config.ArenaToolConfig`).

    ## Costs & Execution
    Top-75 slots of NAV_open/75, next-day open, lots of 100, cash account, band 0.25,
    commission 2.5 bp min 5 CNY, transfer fee, stamp duty 10 bp → 5 bp on 2023-08-28,
    impact from a 10-level simulated book, limit-locks and suspensions (spec §10.5–§10.9).

    ## Data & Point-in-time
    The agent's view holds only rows up to the decision date; research evaluations
    never receive a row after the research end (spec §10.2–§10.4).

    ## Scoring
    ``qa-v1``: logistic transforms of excess ARR, Sharpe, RankIC, IR, long-short
    Sharpe, turnover; Q weights 0.60/0.20/0.05×4; S = 100·Q·(0.9 + 0.1·D) (spec §6, §10.12).

    ## Version History
    v0: first release (scoring ``qa-v1``).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}
    task_name = "quant_arena"

    def __init__(self, mode: str = "iterative", data: Any = None, *, windows: Windows | None = None,
                 research_start: str | None = None, research_end: str | None = None,
                 sealed_start: str | None = None, sealed_end: str | None = None, warmup_start: str | None = None,
                 max_lookback: int | None = None, cost: ArenaCostModel | None = None, impact: ImpactModel | None = None,
                 execution: ExecutionModel | None = None, scoring: ArenaScoringConfig | None = None,
                 sandbox: ArenaSandboxLimits | None = None, record_dir: Any = None, max_candidates: int = 5,
                 executor: str = "sandbox", agent: str | None = None, model: str | None = None,
                 framework: str | None = None, render_mode: str | None = None, prompt_style: str = "full",
                 config: ArenaConfig | None = None, blind: bool = False, tools: bool = False,
                 tool_config: Any = None):
        if mode not in ("iterative", "oneshot"):
            raise ValueError(f"mode must be 'iterative' or 'oneshot', got {mode!r}")
        if executor not in ("sandbox", "inprocess"):
            raise ValueError(f"executor must be 'sandbox' or 'inprocess', got {executor!r}")
        if not isinstance(max_candidates, int) or max_candidates < 1:
            raise ValueError("max_candidates must be a positive int")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if config is not None and not isinstance(config, ArenaConfig):
            raise TypeError(f"config must be an ArenaConfig, got {type(config).__name__}")
        base = config if config is not None else ArenaConfig()  # the kwargs below are shortcuts into it
        w = windows or base.windows
        over = {k: v for k, v in dict(research_start=research_start, research_end=research_end,
                                      sealed_start=sealed_start, sealed_end=sealed_end, warmup_start=warmup_start,
                                      max_lookback=max_lookback).items() if v is not None}
        if over:
            import dataclasses

            w = dataclasses.replace(w, **over)
        # a sweep or JSON config gives a dict: a user model by its class path, else the built-in config's fields
        cost, impact, execution, scoring, sandbox = (
            (ImportableModel.from_dict(obj) if "class_path" in obj else kind.from_dict(obj))
            if isinstance(obj, dict) else obj
            for obj, kind in ((cost, ArenaCostModel), (impact, ImpactModel), (execution, ExecutionModel),
                              (scoring, ArenaScoringConfig), (sandbox, ArenaSandboxLimits)))
        for name, obj, typ in (("cost", cost, (ArenaCostModel, ImportableModel)),
                               ("impact", impact, (ImpactModel, ImportableModel)),
                               ("execution", execution, ExecutionModel), ("scoring", scoring, ArenaScoringConfig),
                               ("sandbox", sandbox, ArenaSandboxLimits)):
            if obj is not None and not isinstance(obj, typ):
                kinds = " or ".join(t.__name__ for t in (typ if isinstance(typ, tuple) else (typ,)))
                raise TypeError(f"{name} must be a {kinds}, got {type(obj).__name__}")
        self.config = ArenaConfig(cost=cost or base.cost, impact=impact or base.impact,
                                  execution=execution or base.execution, scoring=scoring or base.scoring,
                                  sandbox=sandbox or base.sandbox, windows=w)
        self.mode = mode
        self.prompt_style = check_prompt_style(prompt_style)
        self.blind = check_flag("blind", blind)
        self._blinding: ArenaBlinding | None = None
        self._data_arg = data
        self.dataset = load_dataset(data)
        if blind:
            check_blind(self.dataset)
        self.max_candidates = max_candidates
        self.executor = executor
        self.record_dir = record_dir
        self.labels = {"agent": agent, "model": model, "framework": framework}
        self.render_mode = render_mode
        self.action_space = AnyText(MAX_SOURCE_CHARS)
        self.observation_space = AnyText(MAX_OBS_CHARS)
        # window sanity on this panel (raises a clear ValueError now, not mid-episode)
        from .account import window_rows

        window_rows(self.dataset, w.research_start, w.research_end)
        window_rows(self.dataset, w.sealed_start, w.sealed_end)
        self._recorder: RunRecorder | None = None
        self._candidates: list[dict] = []
        self._done = True
        self._final: dict | None = None
        self._brief: tuple[str, dict] | None = None
        self._sealed_result: WindowResult | None = None
        self._current: tuple[str, Any] | None = None  # ("brief", None) | ("feedback", dict) | ("final", dict)
        if not isinstance(tools, bool):
            raise TypeError(f"tools must be True or False, got {type(tools).__name__}")
        from .tools import ArenaTools

        self._tools: ArenaTools | None = ArenaTools(self, tool_config) if tools else None

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict:
        st = self.__dict__.copy()
        if self._data_arg is None or isinstance(self._data_arg, (str, bytes)) or hasattr(self._data_arg, "__fspath__"):
            st["dataset"] = None  # reloaded from its source on unpickle
        return st

    def __setstate__(self, st: dict) -> None:
        self.__dict__.update(st)
        if self.dataset is None:
            self.dataset = load_dataset(self._data_arg)

    # ------------------------------------------------------------------ helpers
    def _research_data(self) -> ArenaDataset:
        return dataset_until(self.dataset, self.config.windows.research_end)

    def _sealed_data(self) -> ArenaDataset:
        return dataset_until(self.dataset, self.config.windows.sealed_end)

    def _record(self, event: str, **fields: Any) -> None:
        if self._recorder is not None:
            self._recorder.write(event, **fields)

    def _evaluate(self, source: str, phase: str) -> WindowResult:
        w = self.config.windows
        if phase == "research":
            res = evaluate_submission(source, self._research_data(), w.research_start, w.research_end, self.config,
                                      phase="research", executor=self.executor, blind=self._blinding)
        else:
            res = evaluate_submission(source, self._sealed_data(), w.sealed_start, w.sealed_end, self.config,
                                      phase="sealed", executor=self.executor, blind=self._blinding)
        if res.status == "host_error":  # quantgym failed, not the agent: recorded, never scored
            self._record("host_error", phase=phase, message=res.message, traceback=res.errors[0]["traceback"])
            raise ArenaHostError(res)
        return res

    @property
    def record_path(self):
        """Path of the current run's JSONL record (None when records are off)."""
        return None if self._recorder is None else self._recorder.path

    @property
    def candidates(self) -> list[dict]:
        """Evaluated candidates of the current run: ``index, source, sha256, research`` (WindowResult)."""
        return list(self._candidates)

    @property
    def sealed_result(self) -> WindowResult | None:
        """The sealed evaluation of the frozen candidate (None until the episode has ended)."""
        return self._sealed_result if self._done else None

    @property
    def toolbox(self):
        """The :class:`~quantgym.tools.Toolbox` of tool mode (``tools=True``; :mod:`.tools`), else None."""
        return None if self._tools is None else self._tools.toolbox

    @property
    def tool_calls(self) -> list[dict]:
        """Every tool call of the episode with its result and the candidate it preceded (tool mode; [] when off)."""
        return [] if self._tools is None else list(self._tools.log)

    @property
    def tool_budget(self):
        """The per-stage :class:`~quantgym.tools.ToolBudget` of tool mode, else None."""
        return None if self._tools is None else self._tools.state.budget

    @property
    def budget_left(self) -> int:
        """Candidates the agent may still submit."""
        cap = self.max_candidates if self.mode == "iterative" else 1
        return max(0, cap - len(self._candidates))

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Start a run; returns the task brief (text) and ``info`` with the same facts as a dict."""
        super().reset(seed=seed)
        if not self._done and self._recorder is not None:
            self._record("cancelled", reason="reset before the episode ended",
                         candidates=len(self._candidates))
        self._candidates = []
        self._done = False
        self._final = None
        self._sealed_result = None
        self._recorder = None if self.record_dir is False else RunRecorder(self.record_dir)
        blind_rec = {}
        if self.blind:  # the alias map of this episode, drawn from its seed; evaluator side only (the record)
            ep_seed = int(self.np_random.integers(2**63)) if seed is None else int(seed)
            boards = self.dataset.info["board"].reindex(self.dataset.symbols).fillna("other")
            self._blinding = ArenaBlinding.draw(self.dataset.symbols, boards, ep_seed)
            blind_rec = {"blind": True, "blind_seed": ep_seed,
                         "aliases": self._blinding.alias_map(self.dataset.symbols)}
        text, facts = task_brief(self.config, self.mode, self.max_candidates, self.dataset, self.prompt_style,
                                 blind=self.blind)
        if self._tools is not None:
            from .tools import tools_section

            self._tools.reset()
            text += tools_section(self.mode)
            blind_rec["tools"] = {"names": self._tools.toolbox.names, **self._tools.config.to_dict()}
        self._brief = (text, facts)
        self._current = ("brief", None)
        self._record("brief", mode=self.mode, seed=seed, labels=self.labels, config=self.config.to_dict(), brief=text,
                     facts=facts, dataset=self.dataset.name, prompt_style=self.prompt_style, **blind_rec)
        info = {"brief": facts, "budget_left": self.budget_left,
                "record_path": None if self._recorder is None else str(self._recorder.path),
                "prompt_style": self.prompt_style}
        if self.blind:
            info["blind"] = True
        if self._tools is not None:
            info.update(tools=self._tools.toolbox.schemas(), tool_budget=self._tools.budget_info())
        return text, info

    def render_prompt(self, style: str | None = None) -> str:
        """The current observation text re-rendered in ``style`` (None: the env's ``prompt_style``).

        After ``reset()`` the task brief (:func:`task_brief`), after a research step the feedback
        (:func:`feedback_text`), after the final step the final-scores JSON (the same in every style).
        Reads the state only: no budget, record, RNG or score changes. Raises ``RuntimeError`` before
        ``reset()`` and ``ValueError`` for an unknown style.
        """
        style = self.prompt_style if style is None else check_prompt_style(style)
        if self._current is None:
            raise RuntimeError("call reset() before render_prompt()")
        kind, payload = self._current
        if kind == "brief":
            from .tools import tools_section

            text = task_brief(self.config, self.mode, self.max_candidates, self.dataset, style, blind=self.blind)[0]
            return text + (tools_section(self.mode) if self._tools is not None else "")
        if kind == "feedback":
            return feedback_text(payload, style)
        return json.dumps(payload, ensure_ascii=False)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        """Submit a candidate (str) or freeze (``{"freeze": k}``); with ``tools=True`` also a tool call
        ``{"tool": name, "arguments": {...}}`` (:mod:`.tools`); see the class docstring."""
        if self._done:
            raise RuntimeError("the episode has ended; call reset() first")
        if self._tools is not None:
            from quantgym.tools import parse_tool_call

            call = parse_tool_call(action)
            if call is not None:
                return self._tools.call(*call)
            out = self._answer(action)
            self._tools.state.reset()  # an answer starts the next stage
            out[4].update(self._tools.stage_info(out[2]))
            return out
        return self._answer(action)

    def _answer(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        """A stage answer: a candidate's source or ``{"freeze": k}``."""
        if isinstance(action, dict):
            if set(action) != {"freeze"}:
                raise InvalidActionError(f"action must be {EXPECTED_ACTIONS}; got a dict with keys "
                                         f"{sorted(map(str, action))}")
            return self._freeze(action["freeze"])
        if not isinstance(action, str):
            raise InvalidActionError(f"action must be {EXPECTED_ACTIONS}, got {type(action).__name__}")
        if len(action) > MAX_SOURCE_CHARS:
            raise ValueError(f"submission longer than {MAX_SOURCE_CHARS} characters")
        if self.mode == "oneshot":
            return self._oneshot(action)
        if self.budget_left == 0:
            self._record("submit_over_budget", source=action, source_sha256=source_hash(action),
                         note="not evaluated; acts as freeze of the latest candidate")
            return self._freeze(None)
        k = len(self._candidates) + 1
        res = self._evaluate(action, "research")
        cand = {"index": k, "source": action, "sha256": source_hash(action), "research": res}
        self._candidates.append(cand)
        fb = research_feedback(res, k, self.budget_left, blind=self.blind)
        reward = float(res.S) if res.status == "ok" else 0.0
        self._record("candidate", candidate=k, source=action, source_sha256=cand["sha256"], feedback=fb,
                     reward=reward, research=res.to_record())
        info = {"feedback": fb, "candidate": k, "budget_left": self.budget_left, "status": res.status,
                "prompt_style": self.prompt_style}
        self._current = ("feedback", fb)
        return feedback_text(fb, self.prompt_style), reward, False, False, info

    def _oneshot(self, source: str) -> tuple[str, float, bool, bool, dict]:
        res = self._evaluate(source, "research")
        cand = {"index": 1, "source": source, "sha256": source_hash(source), "research": res}
        self._candidates.append(cand)
        self._record("candidate", candidate=1, source=source, source_sha256=cand["sha256"], feedback=None,
                     reward=None, research=res.to_record())
        return self._finish(cand)

    def _freeze(self, k: Any) -> tuple[str, float, bool, bool, dict]:
        n = len(self._candidates)
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= int(k) <= n):
            if n == 0:
                raise InvalidActionError(
                    f"freeze index {k!r} names no candidate: none has been evaluated yet; submit a candidate "
                    "(source text) first, or step({'freeze': None}) to end the run with S = 0")
            raise InvalidActionError(f"freeze index must be an int in 1..{n} or None, got {k!r}")
        if not self._candidates:
            self._record("freeze", candidate=None, note="no candidate: S = 0")
            final = {"S": 0.0, "S_in": 0.0, "S_out": 0.0, "frozen_candidate": None, "status_research": None,
                     "status_sealed": None, "research": None, "sealed": None, "note": "freeze with no candidate",
                     "overfitting": research_overfitting([], None, self.config.scoring)}
            return self._end(final)
        if k is None:
            k = len(self._candidates)
        cand = self._candidates[int(k) - 1]
        self._record("freeze", candidate=int(k), source_sha256=cand["sha256"])
        return self._finish(cand)

    def _finish(self, cand: dict) -> tuple[str, float, bool, bool, dict]:
        res_in: WindowResult = cand["research"]
        res_out = self._evaluate(cand["source"], "sealed")
        self._record("sealed", candidate=cand["index"], source_sha256=cand["sha256"], sealed=res_out.to_record())
        s_in = float(res_in.S) if res_in.status == "ok" else 0.0
        s_out = float(res_out.S) if res_out.status == "ok" else 0.0
        final = {"S": total_score(s_in, s_out, self.config.scoring), "S_in": s_in, "S_out": s_out,
                 "frozen_candidate": cand["index"], "source_sha256": cand["sha256"],
                 "status_research": res_in.status, "status_sealed": res_out.status,
                 "message_research": res_in.message, "message_sealed": res_out.message,
                 "research": res_in.metrics, "sealed": res_out.metrics,
                 "research_years": blind_years(res_in.years) if self.blind else res_in.years,
                 "sealed_years": blind_years(res_out.years) if self.blind else res_out.years,
                 "sealed_errors": research_feedback(res_out, cand["index"], 0, blind=self.blind)["errors"],
                 "version": self.config.scoring.version,
                 # diagnostics of the research loop: not part of S
                 "overfitting": research_overfitting(self._candidates, cand["index"], self.config.scoring)}
        self._sealed_result = res_out
        return self._end(final)

    def _end(self, final: dict) -> tuple[str, float, bool, bool, dict]:
        self._done = True
        if self.blind:
            final["blind"] = True
        final = round6(final)
        self._final = final
        self._current = ("final", final)
        self._record("final", **final)
        info = json.loads(json.dumps(final))  # a fresh copy (no shared objects between calls)
        info["prompt_style"] = self.prompt_style
        return json.dumps(final, ensure_ascii=False), float(final["S"]), True, False, info

    def episode_result(self) -> dict[str, Any]:
        """The run for :func:`quantgym.evaluation.evaluate` (protocol ``Evaluable``): the final scores
        (S, S_in, S_out, frozen candidate, sealed and research metrics) plus the sealed window's Sharpe and
        return / drawdown / volatility in percent, and the research candidates as records.

        Raises ``RuntimeError`` before the run has ended (no freeze yet)."""
        if self._final is None:
            raise RuntimeError("the research run has not ended yet (no candidate frozen)")
        m = dict(self._final)
        sealed = m.get("sealed") or {}
        pct = {k: None if sealed.get(src) is None else 100 * sealed[src]
               for k, src in (("ret_pct", "total_return"), ("maxdd_pct", "max_drawdown"), ("vol_pct", "volatility"))}
        m.update(sharpe=sealed.get("sharpe"), **pct)
        if self.blind:  # the agent saw the blinded view (docs/blind.md); scores are on the real data
            m["blind"] = True
        if self._tools is not None:
            m.update(self._tools.metrics())
        return {"metrics": m, "period": self.config.windows.period_label,
                "records": [{"candidate": c["index"], "sha256": c["sha256"], "status": c["research"].status,
                             "research": c["research"].metrics} for c in self.candidates]}

    def log_event(self, event: str = "model_call", **fields: Any) -> None:
        """Append an event to the run's record (spec §7: e.g. every model call of the agent).

        Parameters
        ----------
        event : str
            Event name, default ``"model_call"``.
        **fields
            JSON-able fields (e.g. ``prompt=..., response=..., model=..., tokens=...``).
        """
        if self._recorder is None:
            return
        self._record(str(event), **fields)

    def render(self) -> str | None:
        """``ansi``: a short text status of the run."""
        if self.render_mode != "ansi":
            return None
        lines = [f"Quant-Arena {self.mode}: {len(self._candidates)} candidate(s), budget left {self.budget_left}"]
        for c in self._candidates:
            r = c["research"]
            lines.append(f"  #{c['index']} {c['sha256'][:10]} research {r.status} S_in={r.S:.2f}")
        if self._final:
            lines.append(f"  final S={self._final['S']} (S_in={self._final['S_in']}, S_out={self._final['S_out']})")
        return "\n".join(lines)

    def close(self) -> None:
        """Mark an unfinished run as cancelled in its record."""
        if not self._done and self._recorder is not None:
            self._record("cancelled", reason="closed before the episode ended", candidates=len(self._candidates))
            self._done = True
        super().close()


__all__ = ["QuantArenaEnv", "InvalidActionError"]
