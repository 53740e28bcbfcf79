"""The Market-Bench Gymnasium environment (spec market_bench §5-§7, §9)."""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from gymnasium import spaces

from quantgym._util import unwrap_fence
from quantgym.envs.market_bench.config import (
    ALLOWED_IMPORTS, LEVELS, METRIC_KEYS, N_ROUNDS, PATH_KEY, STRATEGIES, MarketBenchConfig, MarketBenchSandboxLimits,
    MarketBenchScoringConfig, check_task_set,
)
from quantgym.envs.market_bench.prompts import render_prompt
from quantgym.envs.market_bench.rounds import Round, load_round, run_reference, write_inputs
from quantgym.envs.market_bench.scoring import (
    FAILED, SUCCESS, AttemptRecord, attempt_reward, is_correct, mae, mean_clipped_rel_error, metric_errors,
    path_correlation, validate_metrics,
)
from quantgym.spaces import AnyText, InvalidActionError, check_prompt_style

MAX_PROMPT = 200_000
MAX_SOURCE = 1_000_000

class MarketBenchEnv(gym.Env):
    """
    ## Description
    Backtester synthesis over limit-order-book data (Market-Bench paper; spec
    ``docs/spec/market_bench.md``). One episode = one (strategy, round): the agent reads a
    natural-language strategy description with every rule and parameter, and submits Python
    source for a backtester; the env runs it in a sandbox on the round's input files and
    compares its metrics with the reference backtester's (mean absolute error, §6).

    ## Action Space
    ``AnyText(1_000_000)``: the Python source of one attempt. It must define
    ``run_backtest(inputs: dict[str, str]) -> dict[str, float]`` (``inputs``: input file name ->
    absolute path) returning every metric key of the strategy (spec §9.11). One markdown code
    fence around the whole reply (```` ```python ... ``` ````) is stripped before running
    (``info["fence_stripped"]``). A non-``str`` action raises :class:`InvalidActionError` (a
    ``ValueError``, also a ``TypeError``) without using an attempt.

    ## Observation Space
    ``Dict`` of text fields and counters: ``prompt`` (the full task text), ``strategy``,
    ``round`` (1..5; 0 for user data), ``inputs_json`` (JSON: file name -> path),
    ``params_json`` (JSON of the round's parameters, also stated in the prompt), ``attempt``
    (attempts used), ``last_status`` (``""``/``SUCCESS``/``FAILED``) and ``feedback``: empty
    unless ``feedback=True`` (repair mode), then the failure reason and error trace, or the
    per-metric errors after a success.

    ## Rewards
    Spec §7 defines no reward; [project choice] (``MarketBenchScoringConfig``): 1.0 for a **correct**
    attempt (SUCCESS and every metric within ``max(1e-6, 1e-6·|reference|)`` of the
    reference); 0.0 for a FAILED attempt; a SUCCESS that is not correct gets
    ``0.5·exp(−mean_clipped_rel_error/0.1)`` in [0, 0.5) (mean over the metrics of
    min(relative error, 1)), so a stub returning constants gets ≈ 0. The paper's SUCCESS/MAE
    record is unchanged in ``info`` (``status``, ``mae``, ``record["solved"]``).

    ## Starting State
    ``reset()`` writes the round's plain ``.csv`` input files into the env's work folder
    (``workdir`` or a fresh temporary folder; never inside the installed package) and returns
    the prompt. The round is fixed by (task version, strategy, round); ``seed`` changes nothing.

    ## Episode End
    Terminated after a SUCCESS (``end_on_success=True``, default) or after ``attempts``
    attempts (K = 3). Stepping a finished episode raises ``RuntimeError``.

    ## Arguments
    - ``strategy``: ``"scheduled"`` | ``"pairs"`` | ``"delta_hedge"`` (set by the registered ids).
    - ``round``: 1..5.
    - ``task_set``: ``"v1"`` (default; spec §9.13) or ``"v2"`` (real MSFT hour rebuilt from LOBSTER for
      strategies 1 and 3, a real SZSE pair for strategy 2; docs/market_bench.md "Task set v2").
    - ``data_dir``: v2 pairs only: the A-share Level-2 folder (default ``$QUANTGYM_A_SHARE_L2``, else
      ``a_share_l2`` in the maintainers' raw-data folder, else the shipped extract of the pair;
      :func:`quantgym.data.a_share_l2.read_snapshots`).
    - ``config``: a :class:`~quantgym.envs.market_bench.config.MarketBenchConfig` (sandbox, scoring,
      feedback, end_on_success, prompt_style, task_set). Those six kwargs and ``attempts`` are shortcuts into
      it: None (default) keeps the config's value, a value replaces it (``env.config`` is the result).
    - ``attempts``: K, default 3: an alias of ``config.scoring.attempts`` (K's one place: the episode's
      length and the k of pass@k).
    - ``feedback``: False (paper, independent one-shot attempts) or True (error trace back).
    - ``data``: optional user round instead of a shipped one: ``{"book": DataFrame|path,
      "schedule" | "option_delta": DataFrame|path, "params": dict, "meta": dict (optional)}``.
      The reference outputs are computed on it with the reference backtester.
    - ``sandbox``: :class:`MarketBenchSandboxLimits` (CPU 120 s, wall 150 s, 2 GiB).
    - ``scoring``: :class:`MarketBenchScoringConfig`.
    - ``end_on_success``: end the episode at the first success (default True).
    - ``workdir``: folder for the input files (default: a temporary folder removed by ``close``).
    - ``prompt_style``: "full" (default) | "compact" | "minimal" (:data:`quantgym.spaces.PROMPT_STYLES`): the
      rendering of ``prompt`` (:func:`~quantgym.envs.market_bench.prompts.render_prompt`;
      ``info["prompt_style"]``); :meth:`render_prompt` re-renders the current prompt in any style.
    - ``tools``: tool mode (docs/tools.md, :mod:`.tools`): a step may also be a tool call
      ``{"tool": name, "arguments": {...}}`` of ``peek``, ``run_draft`` or ``submit``; ``peek``/``run_draft``
      answer with reward 0 and use no attempt, ``submit`` takes the text answer's path; the result is in the
      observation's ``prompt`` and ``info["tool"]``, every call in :attr:`tool_calls` and the episode result
      (with the tool-use counts in its metrics).
    - ``tool_config``: :class:`~quantgym.envs.market_bench.config.MarketBenchToolConfig` (or its dict): the
      budgets of tool mode (per-stage calls and result characters, draft runs, sample rows, peek rows).

    ## Costs & Execution
    As stated in the prompt: synthetic book net of own consumed liquidity, level walks, FIFO
    accounting, no fees (spec §3, §9.4-§9.10).

    ## Data & Point-in-time
    v1: real books where they exist (MSFT LOBSTER excerpt 2012-06-21, 600519 SSE Level-2 day
    2023-02-07, level sizes randomised as in the paper), a seeded synthetic KO/PEP book for the
    pairs strategy (labelled synthetic in the prompt and metadata), seeded random-walk option
    delta. Shipped with sha256 manifest (``quantgym/data/bundled/market_bench``). v2: the MSFT
    hour 09:30-10:30 rebuilt from LOBSTER messages and a real SZSE pair (300274.SZ / 300122.SZ,
    2022-06-01), sizes randomised; inputs rebuilt at load and checked against the manifest.

    ## Scoring
    Per attempt: status and MAE (spec §6) plus per-metric relative errors, the equity-path
    correlation and the ``correct`` flag (beside the paper's metrics). ``info["record"]`` is the
    round record (``solved``, ``best_mae``, ``first_attempt``, ``correct``, ``first_correct``,
    attempts); aggregate with :func:`quantgym.envs.market_bench.scoring.score_table`
    (``pass@k`` as in the paper, ``correct@k`` beside it).

    ## Version History
    - v0: task set ``v1`` (spec §9); ``task_set="v2"`` selects the real-data task set v2.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}
    task_name = "market_bench"

    def __init__(self, strategy: str = "scheduled", round: int = 1, attempts: int | None = None,
                 feedback: bool | None = None, data: dict[str, Any] | None = None,
                 sandbox: MarketBenchSandboxLimits | None = None, scoring: MarketBenchScoringConfig | None = None,
                 end_on_success: bool | None = None, workdir: str | Path | None = None,
                 render_mode: str | None = None, prompt_style: str | None = None,
                 config: MarketBenchConfig | None = None, task_set: str | None = None,
                 data_dir: str | Path | None = None, tools: bool = False, tool_config: Any = None):
        if config is not None and not isinstance(config, MarketBenchConfig):
            raise TypeError(f"config must be a MarketBenchConfig, got {type(config).__name__}")
        config = config if config is not None else MarketBenchConfig()
        # shortcuts into ``config`` (None: the config's value)
        attempts = config.scoring.attempts if attempts is None else attempts  # K: scoring.attempts
        feedback = config.feedback if feedback is None else feedback
        sandbox = config.sandbox if sandbox is None else sandbox
        scoring = config.scoring if scoring is None else scoring
        end_on_success = config.end_on_success if end_on_success is None else end_on_success
        prompt_style = config.prompt_style if prompt_style is None else prompt_style
        task_set = check_task_set(config.task_set if task_set is None else task_set)
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; choose from {STRATEGIES}")
        if data is None and not (isinstance(round, (int, np.integer)) and 1 <= int(round) <= N_ROUNDS):
            raise ValueError(f"round must be an int in 1..{N_ROUNDS}, got {round!r}")
        if not isinstance(attempts, (int, np.integer)) or int(attempts) < 1:
            raise ValueError(f"attempts must be a positive int, got {attempts!r}")
        if not isinstance(sandbox, MarketBenchSandboxLimits):
            raise TypeError("sandbox must be a MarketBenchSandboxLimits")
        if not isinstance(scoring, MarketBenchScoringConfig):
            raise TypeError("scoring must be a MarketBenchScoringConfig")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.prompt_style = check_prompt_style(prompt_style)
        scoring = scoring if scoring.attempts == int(attempts) else scoring.replace(attempts=int(attempts))
        self.config = MarketBenchConfig(sandbox=sandbox, scoring=scoring, feedback=bool(feedback),
                                        end_on_success=bool(end_on_success), prompt_style=self.prompt_style,
                                        task_set=task_set)
        self.task_set = task_set
        self.strategy = strategy
        self.round_number = 0 if data is not None else int(round)
        self.attempts = int(attempts)
        self.feedback = bool(feedback)
        self.sandbox_config = sandbox
        self.scoring_config = scoring
        self.end_on_success = bool(end_on_success)
        self.render_mode = render_mode
        self.round = (load_round(strategy, int(round), task_set=task_set, data_dir=data_dir) if data is None
                      else self._user_round(strategy, data, task_set))
        self._own_workdir = workdir is None
        self._cleanup = None
        self.workdir = Path(workdir) if workdir is not None else None
        self.action_space = AnyText(MAX_SOURCE)
        self.observation_space = spaces.Dict({
            "prompt": AnyText(MAX_PROMPT),
            "strategy": AnyText(32),
            "round": spaces.Discrete(N_ROUNDS + 1),
            "inputs_json": AnyText(20_000),
            "params_json": AnyText(20_000),
            "attempt": spaces.Discrete(self.attempts + 1),
            "last_status": AnyText(16),
            "feedback": AnyText(MAX_PROMPT),
        })
        self.records: list[dict[str, Any]] = []  # full attempt records (incl. per-metric errors)
        self._inputs: dict[str, str] = {}
        self._prompt = ""
        self._attempt = 0
        self._done = True
        self._last_status = ""
        self._feedback = ""
        if not isinstance(tools, bool):
            raise TypeError(f"tools must be True or False, got {type(tools).__name__}")
        from quantgym.envs.market_bench.tools import MarketBenchTools

        self._tools = MarketBenchTools(self, tool_config) if tools else None

    @property
    def toolbox(self):
        """The :class:`~quantgym.tools.Toolbox` of tool mode (``tools=True``; :mod:`.tools`), else None."""
        return None if self._tools is None else self._tools.toolbox

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Every tool call of the episode with its result and the attempts made before it (tool mode; [] when off)."""
        return [] if self._tools is None else list(self._tools.log)

    @property
    def tool_budget(self):
        """The per-stage :class:`~quantgym.tools.ToolBudget` of tool mode, else None."""
        return None if self._tools is None else self._tools.state.budget

    # ------------------------------------------------------------------ data
    @staticmethod
    def _user_round(strategy: str, data: dict[str, Any], task_set: str) -> Round:
        if not isinstance(data, dict) or "book" not in data or "params" not in data:
            raise ValueError("data must be a dict with 'book' and 'params' (and 'schedule' / 'option_delta')")
        need = {"scheduled": "schedule", "delta_hedge": "option_delta"}.get(strategy)
        if need and need not in data:
            raise ValueError(f"data for {strategy!r} needs {need!r}")

        def frame(x):
            return x.copy() if isinstance(x, pd.DataFrame) else pd.read_csv(x)

        inputs = {"book.csv": frame(data["book"])}
        if need:
            inputs[f"{need}.csv"] = frame(data[need])
        book = inputs["book.csv"]
        missing = [c for c in ("ts_event", "symbol", "bid_px_00", "bid_sz_00", "ask_px_00", "ask_sz_00") if c not in book]
        if missing:
            raise ValueError(f"data['book'] lacks the book-schema columns {missing}")
        ts = pd.to_numeric(book["ts_event"], errors="coerce")
        if ts.isna().any() or (ts.diff().dropna() < 0).any():
            raise ValueError("data['book'].ts_event must be integer ns, sorted ascending (spec §9.1.2)")
        symbols = set(book["symbol"].astype(str))
        if strategy != "pairs" and len(symbols) != 1:
            raise ValueError(f"data['book'] for {strategy!r} must hold exactly one symbol, got {sorted(symbols)}")
        if strategy == "pairs":
            legs = {str(data["params"].get("symbol_a", "KO")), str(data["params"].get("symbol_b", "PEP"))}
            if not legs <= symbols:
                raise ValueError(f"data['book'] for 'pairs' must hold the legs {sorted(legs)}, got {sorted(symbols)}")
        meta = {"task_version": task_set, "strategy": strategy, "round": 0, "synthetic": False,
                "instrument": "user-supplied book", "currency": "currency units", **dict(data.get("meta", {}))}
        rnd = Round(strategy, 0, inputs, dict(data["params"]), meta)
        try:
            rnd.reference = run_reference(rnd)
        except TypeError as exc:
            raise ValueError(f"data['params'] do not fit the {strategy} reference: {exc}") from None
        return rnd

    # ------------------------------------------------------------------ gym API
    def _obs(self) -> dict[str, Any]:
        return {
            "prompt": self._prompt,
            "strategy": self.strategy,
            "round": self.round_number,
            "inputs_json": json.dumps(self._inputs),
            "params_json": json.dumps(self.round.params),
            "attempt": self._attempt,
            "last_status": self._last_status,
            "feedback": self._feedback[:MAX_PROMPT],
        }

    def _round_record(self) -> dict[str, Any]:
        ok = [r for r in self.records if r["status"] == SUCCESS]
        good = [r for r in ok if r.get("correct")]
        return {
            "task_version": self.task_set, "strategy": self.strategy, "round": self.round_number,
            "attempts_used": self._attempt, "solved": bool(ok),
            "best_mae": min(r["mae"] for r in ok) if ok else None,
            "first_attempt": ok[0]["attempt"] if ok else None,
            "correct": bool(good), "first_correct": good[0]["attempt"] if good else None,
            "statuses": [r["status"] for r in self.records],
        }

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="quantgym-market-bench-"))
            # removed by close(), or when the env is garbage-collected / the interpreter exits
            self._cleanup = weakref.finalize(self, shutil.rmtree, str(self.workdir), True)
        folder = self.workdir / f"{self.strategy}_round{self.round_number}" / "inputs"
        self._inputs = write_inputs(self.round, folder)
        self._prompt = self._render(self.prompt_style)
        self._attempt = 0
        self._done = False
        self._last_status = ""
        self._feedback = ""
        self.records = []
        info = {"task_version": self.task_set, "strategy": self.strategy, "round": self.round_number,
                "inputs": dict(self._inputs), "meta": copy.deepcopy(self.round.meta), "metric_keys": list(METRIC_KEYS[self.strategy]),
                "allowed_imports": list(ALLOWED_IMPORTS), "prompt_style": self.prompt_style}
        if self._tools is not None:
            self._tools.reset()
            info.update(tools=self._tools.toolbox.schemas(), tool_budget=self._tools.budget_info())
        return self._obs(), info

    def _render(self, style: str) -> str:
        text = render_prompt(self.strategy, self.round.params, self.round.meta, self._inputs,
                             self.sandbox_config.cpu_seconds, self._levels(), style,
                             wall_limit_s=self.sandbox_config.wall_seconds)
        if self._tools is None:
            return text
        return text + ("\n\n## Tools\nBefore each attempt you may call peek (the first rows of an input file), "
                       "run_draft (a draft run on a sample slice: what it returns and prints, or its error; "
                       "nothing is scored) and submit (the attempt in tool form).")

    def render_prompt(self, style: str | None = None) -> str:
        """The round's prompt in ``style`` (None: the env's ``prompt_style``), with this episode's input paths.

        Reads the state only (no attempt, record or score changes). Raises ``RuntimeError`` before
        ``reset()`` and ``ValueError`` for an unknown style.
        """
        style = self.prompt_style if style is None else check_prompt_style(style)
        if not self._inputs:
            raise RuntimeError("call reset() before render_prompt()")
        return self._prompt if style == self.prompt_style else self._render(style)

    def _levels(self) -> int:
        return sum(1 for c in self.round.inputs["book.csv"].columns if str(c).startswith("bid_px_")) or LEVELS

    def _limits(self, readable: tuple[str, ...] | None = None):
        """The sandbox limits of an attempt; ``readable``: the files it may read (default: the round's inputs)."""
        from quantgym.sandbox import SandboxLimits

        c = self.sandbox_config
        return SandboxLimits(cpu_seconds=c.cpu_seconds, wall_seconds=c.wall_seconds, memory_mb=c.memory_mb,
                             allowed_imports=ALLOWED_IMPORTS,
                             readable_paths=tuple(self._inputs.values()) if readable is None else readable)

    def evaluate(self, source: Any) -> dict[str, Any]:
        """Run one source in the sandbox and score it against the reference (no episode state)."""
        from quantgym.envs.market_bench.harness import run_attempt

        if not isinstance(source, str):
            raise InvalidActionError(
                f"action must be a str (the Python source of the backtester), got {type(source).__name__}")
        source, fenced = unwrap_fence(source)
        rec: dict[str, Any] = {"status": FAILED, "mae": None, "reason": "", "sandbox_status": "", "traceback": None,
                               "path_corr": None, "path_note": None, "max_rel_error": None, "metric_errors": None,
                               "wall_seconds": None, "cpu_seconds": None, "correct": None,
                               "mean_rel_error": None, "reward": 0.0, "fence_stripped": fenced}
        if len(source) > MAX_SOURCE:
            rec["reason"] = f"source longer than {MAX_SOURCE} characters"
            return rec
        res = run_attempt(source, self._inputs, self.strategy, self._limits())
        rec.update(sandbox_status=res.status, traceback=res.traceback, wall_seconds=res.wall_seconds,
                   cpu_seconds=res.cpu_seconds)
        if not res.ok:
            rec["reason"] = res.message
            return rec
        value = res.value if isinstance(res.value, dict) else {}
        metrics, reason = validate_metrics(value.get("metrics"), self.strategy)
        if metrics is None:
            rec["reason"] = f"bad_output: {reason}"
            return rec
        ref = self.round.metrics
        config = self.scoring_config
        errs = metric_errors(metrics, ref, self.strategy, config.rel_floor)
        correct = is_correct(metrics, ref, self.strategy, config)
        rec.update(status=SUCCESS, mae=mae(metrics, ref, self.strategy), metric_errors=errs,
                   max_rel_error=max(e["rel_error"] for e in errs.values()),
                   path_corr=path_correlation(value.get("path"), self.round.reference.get(PATH_KEY)),
                   path_note=value.get("path_note") if isinstance(value.get("path_note"), str) else None,
                   metrics=metrics, correct=correct, mean_rel_error=mean_clipped_rel_error(errs),
                   reward=attempt_reward(SUCCESS, correct, errs, config))
        return rec

    def step(self, action: Any):
        if self._done:
            raise RuntimeError("episode is over (success or all attempts used); call reset()")
        if self._tools is not None:
            from quantgym.tools import parse_tool_call

            call = parse_tool_call(action)
            if call is not None:
                return self._tools.call(*call)
            out = self._answer(action)
            self._tools.state.reset()
            out[4].update(self._tools.stage_info(out[2]))
            return out
        return self._answer(action)

    def _answer(self, action: Any):
        """An attempt: the backtester's source."""
        if not isinstance(action, str):
            raise InvalidActionError(
                f"action must be a str (the Python source of the backtester), got {type(action).__name__}")
        self._attempt += 1
        rec = self.evaluate(action)
        rec["attempt"] = self._attempt
        self.records.append(rec)
        self._last_status = rec["status"]
        if self.feedback:
            if rec["status"] == SUCCESS:
                self._feedback = ("SUCCESS (" + ("correct" if rec["correct"] else "ran, but not within tolerance of "
                                  "the reference") + "). Per-metric absolute errors: ") + json.dumps(
                    {k: e["abs_error"] for k, e in rec["metric_errors"].items()})
            else:
                self._feedback = f"FAILED: {rec['reason']}" + (f"\n{rec['traceback']}" if rec["traceback"] else "")
        else:
            self._feedback = ""
        success = rec["status"] == SUCCESS
        terminated = (success and self.end_on_success) or self._attempt >= self.attempts
        self._done = terminated
        info = {"attempt": self._attempt, "status": rec["status"], "mae": rec["mae"], "reason": rec["reason"],
                "sandbox_status": rec["sandbox_status"], "path_corr": rec["path_corr"], "path_note": rec["path_note"],
                "max_rel_error": rec["max_rel_error"], "correct": rec["correct"],
                "mean_rel_error": rec["mean_rel_error"], "fence_stripped": rec["fence_stripped"],
                "record": self._round_record(), "prompt_style": self.prompt_style}
        return self._obs(), float(rec["reward"]), terminated, False, info

    def episode_result(self) -> dict[str, Any]:
        """The round for :func:`quantgym.evaluation.evaluate` (protocol ``Evaluable``): the round record
        (solved, best MAE, first successful / correct attempt, statuses) as metrics and the attempt records
        (without their per-metric errors)."""
        out = {"metrics": self._round_record(), "period": self.task_set,
               "records": [{k: v for k, v in r.items() if k != "metrics"} for r in self.records]}
        if self._tools is not None:
            out["metrics"].update(self._tools.metrics())
            out["tool_calls"] = self.tool_calls
        return out

    def attempt_records(self, agent: str) -> list[AttemptRecord]:
        """This episode's attempts as rows of the scorer's attempt table."""
        return [AttemptRecord(agent, self.strategy, self.round_number, r["attempt"], r["status"], r["mae"], r["reason"],
                              r["sandbox_status"], r["path_corr"], r["max_rel_error"], r.get("correct"))
                for r in self.records]

    def render(self):
        if self.render_mode != "ansi":
            return None
        rr = self._round_record()
        return (f"Market-Bench {self.strategy} round {self.round_number}: attempt {self._attempt}/{self.attempts}, "
                f"last {self._last_status or '-'}, solved {rr['solved']}, correct {rr['correct']}, best MAE {rr['best_mae']}")

    def close(self):
        if self._own_workdir and self.workdir is not None:
            if self._cleanup is not None:
                self._cleanup()
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        super().close()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_np_random"] = None
        state["_cleanup"] = None
        if self._own_workdir:  # a copy makes its own temporary folder on reset()
            state["workdir"] = None
            state["_inputs"] = {}
        return state
