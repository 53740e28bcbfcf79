"""Tool mode of Market-Bench (``gym.make("MarketBench-Scheduled-v0", tools=True)``, docs/tools.md).

Three tools (:data:`TOOL_NAMES`), declared once as typed functions (:func:`quantgym.tools.tool`) and bound to
one env by :class:`MarketBenchTools`:

- ``peek``: the header and first rows of an input file of the round (the order book by default);
- ``run_draft``: a draft backtester run in the process sandbox, under the attempt's limits, on a sample slice
  (the first ``draft_rows`` rows of ``book.csv``, the other input files whole, written beside the round's
  inputs); the result is what the draft returned and printed, or its error. No reference backtester runs on
  the sample and nothing is scored: the result never holds a reference value or a score. Counted against
  the episode's draft budget (:class:`~quantgym.envs.market_bench.config.MarketBenchToolConfig`);
- ``submit``: the attempt in tool form, on the text answer's path (``step(source)``): same sandbox run,
  scoring, reward, feedback and termination. It uses no call of the stage budget and starts a new stage.

``peek`` and ``run_draft`` return reward 0, use no attempt and use the per-stage budget (calls and result
characters, :class:`~quantgym.tools.ToolBudget`). The observation of a tool call is the round's observation
with the tool's result in ``prompt``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quantgym.tools import TaskTools, ToolArgumentError, Toolbox, tool

from .config import METRIC_KEYS, MarketBenchToolConfig

if TYPE_CHECKING:
    from .env import MarketBenchEnv

#: The tools, in the order the model reads them.
TOOL_NAMES = ("peek", "run_draft", "submit")
#: Longest tool result the observation's ``prompt`` carries (its space's bound, ``env.MAX_PROMPT``).
MAX_RESULT = 200_000


class DraftError(RuntimeError):
    """A draft run did not finish (error, timeout, forbidden operation, memory, bad output): its one-line reason."""


def sample_inputs(env: "MarketBenchEnv", rows: int) -> dict[str, str]:
    """The sample slice of the round's inputs, written under the env's work folder: the first ``rows`` rows of
    ``book.csv`` and the other input files whole (input file name -> absolute path)."""
    from .rounds import csv_text

    folder = Path(env._inputs["book.csv"]).parent.parent / "sample"
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, df in env.round.inputs.items():
        p = folder / name
        p.write_text(csv_text(df.iloc[:rows] if name == "book.csv" else df))
        out[name] = str(p.resolve())
    return out


def draft_text(env: "MarketBenchEnv", source: str, rows: int) -> str:
    """Run ``source`` on the sample slice in the sandbox; what it returned and printed (never a reference value).

    Raises :class:`DraftError` with the sandbox's one-line reason when the run does not finish."""
    from quantgym._util import unwrap_fence

    from .harness import run_attempt
    from .scoring import validate_metrics

    inputs = sample_inputs(env, rows)
    source, _ = unwrap_fence(source)
    res = run_attempt(source, inputs, env.strategy, env._limits(readable=tuple(inputs.values())))
    if not res.ok:
        raise DraftError(str(res.message).removeprefix("error: "))
    value = res.value if isinstance(res.value, dict) else {}
    metrics = value.get("metrics") or {}
    keys = METRIC_KEYS[env.strategy]
    _, reason = validate_metrics(metrics, env.strategy)
    n_book = len(env.round.inputs["book.csv"])
    lines = [f"draft run on the sample: the first {min(rows, n_book)} of {n_book} rows of book.csv"
             + "".join(f", {k} whole" for k in inputs if k != "book.csv") + f" ({res.wall_seconds:.1f} s)",
             f"returned {len(metrics)} of the {len(keys)} metric keys (values on the sample):",
             json.dumps(metrics),
             "output contract: " + ("every metric key present and finite" if not reason else f"not met: {reason}")]
    if value.get("path_note"):
        lines.append(str(value["path_note"]))
    lines += ["printed output:", res.stdout if (res.stdout or "").strip() else "(nothing printed)"]
    return "\n".join(lines)


def peek_text(env: "MarketBenchEnv", file: str, rows: int) -> str:
    """The header and first ``rows`` rows of the input file ``file`` as written for the round."""
    if file not in env._inputs:
        raise ToolArgumentError(f"no input file {file!r}; files: {', '.join(env._inputs)}")
    if not 1 <= rows <= env._tools.config.peek_rows:
        raise ToolArgumentError(f"rows must be in 1..{env._tools.config.peek_rows}, got {rows}")
    with open(env._inputs[file], encoding="utf-8") as fh:
        head = [next(fh, "") for _ in range(rows + 1)]
    n = len(env.round.inputs[file])
    return "".join(head).rstrip("\n") + f"\n({min(rows, n)} of {n} rows shown)"


class MarketBenchTools(TaskTools):
    """The tools of one :class:`~quantgym.envs.market_bench.env.MarketBenchEnv` and their budgets
    (:class:`quantgym.tools.TaskTools`): ``state`` is the stage budget (reset by every attempt),
    ``drafts_used`` counts the episode's draft runs, ``log`` holds every call with the attempts made before it
    (``attempt``).
    """

    config_class = MarketBenchToolConfig
    answer_tools = ("submit",)

    def __init__(self, env: "MarketBenchEnv", config: MarketBenchToolConfig | dict | None = None):
        super().__init__(env, config)
        self.drafts_used = 0
        self._answer: tuple | None = None

    @property
    def drafts_left(self) -> int:
        return max(0, self.config.draft_runs - self.drafts_used)

    def reset(self) -> None:
        """A new episode: full stage and draft budgets, an empty log."""
        super().reset()
        self.drafts_used = 0

    def refuse(self, name: str) -> str | None:
        if name == "run_draft" and self.drafts_left == 0:
            return f"draft budget exhausted ({self.config.draft_runs} runs per episode): submit an attempt"
        return None

    def _build(self) -> Toolbox:
        env = self.env

        @tool
        def peek(file: str = "book.csv", rows: int = 5) -> str:
            """The header and first rows of an input file of the round (the order book by default).

            Parameters
            ----------
            file : str
                Input file name: book.csv, or the strategy's other input (schedule.csv, option_delta.csv).
            rows : int
                Rows to show after the header (at most 50 by default).
            """
            return peek_text(env, file, rows)

        @tool
        def run_draft(source: str) -> str:
            """Run a draft backtester on a sample slice of the inputs (the first rows of book.csv) in the
            sandbox and return what run_backtest returned and printed, or its error. Nothing is scored and no
            reference value is shown. Uses one of the episode's draft runs, whatever the outcome.

            Parameters
            ----------
            source : str
                Python source defining run_backtest(inputs) -> dict of metrics, as for an attempt.
            """
            self.drafts_used += 1
            return draft_text(env, source, self.config.draft_rows)

        @tool
        def submit(source: str) -> str:
            """Submit the backtester as an attempt: it runs on the full inputs and is scored against the
            reference. Uses one attempt.

            Parameters
            ----------
            source : str
                Python source defining run_backtest(inputs) -> dict of metrics.
            """
            self._answer = env._answer(source)
            obs, _, ended, _, info = self._answer
            text = f"attempt {info['attempt']} of {env.attempts}: {info['status']}"
            if obs["feedback"]:
                text += "\n" + obs["feedback"]
            return text + ("\nThe episode has ended." if ended else "")

        return Toolbox([peek, run_draft, submit])

    def call(self, name: Any, arguments: Any) -> tuple[dict, float, bool, bool, dict]:
        """Run one tool call; the env's ``step`` result (see the module docstring)."""
        self._answer = None
        res = self.run(name, arguments, attempt=self.env._attempt)
        reward, terminated, truncated, info = 0.0, False, False, {"attempt": self.env._attempt,
                                                                   "prompt_style": self.env.prompt_style}
        if self._answer is not None:
            _, reward, terminated, truncated, info = self._answer
        obs = dict(self.env._obs(), prompt=res.content[:MAX_RESULT])
        info = dict(info, tool=res.to_dict(), **(self.stage_info(terminated) if res.ok and self._answer is not None
                                                 else {"tool_budget": self.budget_info()}))
        return obs, float(reward), terminated, truncated, info

    def metrics(self) -> dict:
        """The episode's tool use (:func:`quantgym.tools.tool_use` of the log) and its draft runs."""
        return {**super().metrics(), "draft_runs_used": self.drafts_used}

    def budget_info(self) -> dict:
        """``info["tool_budget"]``: the stage budget used and left, and the draft runs."""
        return {**self.state.to_dict(), "draft_runs": self.config.draft_runs, "drafts_left": self.drafts_left}


__all__ = ["MarketBenchTools", "DraftError", "TOOL_NAMES", "draft_text", "peek_text", "sample_inputs"]
