"""Tool mode of Quant-Arena (``gym.make("QuantArena-v0", tools=True)``, docs/tools.md).

The research loop as four tools (:data:`TOOL_NAMES`), declared once as typed functions
(:func:`quantgym.tools.tool`) and bound to one env by :class:`ArenaTools`:

- ``describe_data``: the panel (stocks, boards, industries, view fields) and the research calendar (decision
  dates by month; blind: trading-day counts only), the budgets left;
- ``explore``: an exploratory snippet on research-window data, run in the process sandbox with the limits of
  a submission's module code; it reads the same point-in-time (and, blind, blinded) view a submission reads,
  at a research decision date it chooses (:func:`explore_payload`: no row after that date exists in the
  sandbox, the sealed window never); what it prints is the result. Counted against the episode's
  exploration budget (:class:`~quantgym.envs.quant_arena.config.ArenaToolConfig`), separate from the
  candidates;
- ``submit`` / ``freeze``: the stage answers in tool form. They take the path of the text answer
  (``step(source)``, ``step({"freeze": k})``): same evaluation, feedback, reward and termination, the
  candidate budget of spec §10.14; a submit past that budget and a freeze index that names no candidate are
  ``ok=False`` results instead of the text path's freeze-of-the-latest and ``InvalidActionError``. They use
  no call of the stage budget and start a new stage.

``describe_data`` and ``explore`` return reward 0, never move the run on, and use the per-stage budget
(calls and result characters, :class:`~quantgym.tools.ToolBudget`).
"""

from __future__ import annotations

import ast
import contextlib
import io
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from quantgym.tools import TaskTools, ToolArgumentError, Toolbox, tool

from .config import ArenaToolConfig

if TYPE_CHECKING:
    from .env import QuantArenaEnv

#: The tools of the iterative track, in the order the model reads them (one-shot: without ``freeze``).
TOOL_NAMES = ("describe_data", "explore", "submit", "freeze")
#: Tools that answer the stage (the text path's actions in tool form).
ANSWER_TOOLS = ("submit", "freeze")
#: File name the snippet runs under (tracebacks and the sandbox's messages name it).
SNIPPET_FILE = "<explore>"


class SnippetError(RuntimeError):
    """An exploration snippet did not finish (error, timeout, forbidden operation, memory): its one-line reason."""


# ---------------------------------------------------------------------- explore: the host side
def print_last_expression(code: str) -> str:
    """``code`` with its last statement printed when it is a bare expression other than a call of ``print``
    (as a notebook cell shows it); line numbers unchanged. Code that does not parse is returned as is (the
    sandbox reports the ``SyntaxError``)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return code
    value = tree.body[-1].value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print":
        return code
    node = tree.body[-1]  # the statement: its span includes the expression's parentheses
    lines = code.splitlines(keepends=True)
    # ast offsets are UTF-8 byte offsets within a line: convert them to character offsets
    start = sum(len(x) for x in lines[:node.lineno - 1]) + len(
        lines[node.lineno - 1].encode()[:node.col_offset].decode(errors="ignore"))
    end = sum(len(x) for x in lines[:node.end_lineno - 1]) + len(
        lines[node.end_lineno - 1].encode()[:node.end_col_offset].decode(errors="ignore"))
    return (code[:start] + "__explore_value__ = (" + code[start:end] + ")" + code[end:]
            + "\nif __explore_value__ is not None:\n    print(__explore_value__)\n")


def research_days(env: "QuantArenaEnv") -> tuple[int, int]:
    """(row of D_0, number of decision dates) of the research window on the research data."""
    from .account import window_rows

    w = env.config.windows
    return window_rows(env._research_data(), w.research_start, w.research_end)


def day_index(day: Optional[int], n: int) -> int:
    """The research decision date ``day`` (0 = the first, negative counts from the last, None = the last)."""
    if day is None:
        return n - 1
    j = int(day) + n if day < 0 else int(day)
    if not 0 <= j < n:
        raise ToolArgumentError(f"day must be in 0..{n - 1} (or -{n}..-1 from the last), got {day}")
    return j


def explore_payload(env: "QuantArenaEnv", day: Optional[int] = None) -> dict:
    """The sandbox payload of an exploration at research decision date ``day``.

    It is the payload of a research evaluation (:func:`~quantgym.envs.quant_arena.handoff.build_payload` on
    the panel cut at the research end) whose window stops at that date: the block holds the rows from the
    submission's first visible row to that date and nothing later, so the view the snippet reads is the one
    ``compute_features(view)`` reads on that date, blinded with the episode's map in blind mode (same
    aliases, relative days and rebased levels).
    """
    from .handoff import build_payload

    d0, n = research_days(env)
    j = day_index(day, n)
    c = env.config
    payload = build_payload(env._research_data(), d0, j + 1, max_lookback=c.windows.max_lookback,
                            max_features=c.scoring.max_features, sample_every=c.scoring.sample_every,
                            day_seconds=c.sandbox.day_seconds, import_seconds=c.sandbox.import_seconds,
                            max_output_bytes=c.sandbox.max_output_bytes, key=None,
                            warmup_start=c.windows.warmup_start, inf_score_error=c.scoring.inf_score_is_day_error)
    if env._blinding is not None:
        payload = env._blinding.blind_payload(payload)
    return payload


def snippet_limits(env: "QuantArenaEnv"):
    """The sandbox limits of a snippet: those of a submission's module-level code and one decision date
    (``import_seconds + day_seconds`` wall, the same memory, output cap and frame policy)."""
    from quantgym.sandbox import SandboxLimits

    sb = env.config.sandbox
    wall = float(sb.import_seconds + sb.day_seconds)
    return SandboxLimits(cpu_seconds=min(float(sb.cpu_seconds), wall), wall_seconds=wall,
                         memory_mb=int(sb.memory_mb), max_output_bytes=int(sb.max_output_bytes),
                         allow_frame_introspection=bool(sb.frame_introspection))


def run_snippet(env: "QuantArenaEnv", code: str, day: Optional[int] = None) -> str:
    """Run ``code`` with ``view`` bound (sandbox; ``executor="inprocess"``: in this process, trusted code
    only) and return what it printed. Raises :class:`SnippetError` with the one-line reason otherwise."""
    payload = explore_payload(env, day)
    source = print_last_expression(code)
    if env.executor == "inprocess":
        from .child.explore import build_view

        ns: dict[str, Any] = {"__name__": "__explore__", "view": build_view(payload)}
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(source, SNIPPET_FILE, "exec"), ns)  # noqa: S102 - trusted path (tests)
        except Exception as exc:  # noqa: BLE001 - the snippet's error is the result
            raise SnippetError(f"{type(exc).__name__}: {exc}") from None
        text, cut = out.getvalue(), False
    else:
        from quantgym.sandbox import run_in_sandbox

        from .child.explore import RUNNER

        res = run_in_sandbox(source, RUNNER, payload=payload, limits=snippet_limits(env), filename=SNIPPET_FILE)
        if not res.ok:
            raise SnippetError(str(res.message).removeprefix("error: "))
        text, cut = res.stdout or "", res.output_truncated
    if cut:
        text += (f"\n[output cut at {env.config.sandbox.max_output_bytes:,} bytes: "
                 "ArenaSandboxLimits.max_output_bytes]")
    return text if text.strip() else "(the snippet printed nothing)"


# ---------------------------------------------------------------------- describe_data
def describe_text(env: "QuantArenaEnv") -> str:
    """The panel and the research calendar as the model reads them (blind: no date, code or dataset name)."""
    ds = env.dataset
    w = env.config.windows
    d0, n = research_days(env)
    boards = ds.info["board"].reindex(ds.symbols).fillna("other").value_counts()
    n_ind = int(ds.info["industry"].reindex(ds.symbols).nunique()) if "industry" in ds.info else 0
    from .pit import VIEW_FIELDS
    from .prompts import window_days

    days = window_days(env.config, ds)
    lines = ["# Data",
             f"- {ds.N} stocks" + ("" if env.blind else f" ({ds.name})") + "; boards: "
             + ", ".join(f"{b} {int(k)}" for b, k in boards.items()) + f"; {n_ind} industries (view.info).",
             f"- view.history(field, lookback): lookback 1..{w.max_lookback}; fields: {', '.join(VIEW_FIELDS)}."]
    if not env.blind and ds.intraday_days():
        lines.append(f"- Intraday tables (view.intraday) on: {', '.join(map(str, ds.intraday_days()))}.")
    lines += ["", "# Research calendar"]
    if env.blind:
        lines += [f"- Warm-up: {days['warmup_days']} trading days before day 0.",
                  f"- Research window: {n} decision days, day 0 .. day {n - 1} (explore(day=...)).",
                  f"- Sealed window: {days['sealed_days']} decision days after the research window, never visible."]
    else:
        dates = env._research_data().dates[d0:d0 + n].astype("datetime64[D]").astype(str)
        lines += [f"- Warm-up history from {w.warmup_start}.",
                  f"- Research window {w.research_start} .. {w.research_end}: {n} decision dates, day 0 = {dates[0]} "
                  f".. day {n - 1} = {dates[-1]} (explore(day=...)). First day of each month:"]
        months = np.asarray([d[:7] for d in dates])
        first = np.flatnonzero(np.r_[True, months[1:] != months[:-1]])
        lines += ["  " + ", ".join(f"{months[i]}: day {int(i)}" for i in first[k:k + 6]) for k in range(0, len(first), 6)]
        lines.append(f"- Sealed window {w.sealed_start} .. {w.sealed_end}: {days['sealed_days']} decision dates, "
                     "never visible.")
    t = env._tools
    lines += ["", "# Budget",
              f"- Candidates left: {env.budget_left}.",
              f"- Exploration runs left: {t.explore_left} of {t.config.explore_runs} (this episode).",
              f"- Tool calls left this stage: {t.state.calls_left}; result characters left: {t.state.chars_left}."]
    return "\n".join(lines)


def tools_section(mode: str) -> str:
    """The brief's lines on tool mode (no date, code or level: blind-safe)."""
    names = [n for n in TOOL_NAMES if mode == "iterative" or n != "freeze"]
    return ("\n\n## Tools\nYou may call the tools " + ", ".join(names) + " (their schemas describe them) before "
            "each answer. describe_data shows the panel, the research calendar and your budgets; explore runs a "
            "snippet on research-window data in the sandbox (`view` predefined, print what you want to see). "
            "submit and freeze are the answers in tool form.")


# ---------------------------------------------------------------------- the tools bound to one env
class ArenaTools(TaskTools):
    """The tools of one :class:`~quantgym.envs.quant_arena.env.QuantArenaEnv` and their budgets
    (:class:`quantgym.tools.TaskTools`): ``state`` is the stage budget (reset by every stage answer),
    ``explore_used`` counts the episode's exploration runs, ``log`` holds every call with the candidate it
    preceded (``candidate``, 1-based).
    """

    config_class = ArenaToolConfig
    answer_tools = ANSWER_TOOLS

    def __init__(self, env: "QuantArenaEnv", config: ArenaToolConfig | dict | None = None):
        super().__init__(env, config)
        self.explore_used = 0
        self._answer: tuple | None = None
        self._host_error: BaseException | None = None

    @property
    def explore_left(self) -> int:
        return max(0, self.config.explore_runs - self.explore_used)

    def reset(self) -> None:
        """A new episode: full stage and exploration budgets, an empty log."""
        super().reset()
        self.explore_used = 0

    def refuse(self, name: str) -> str | None:
        env = self.env
        if name == "submit" and env.mode == "iterative" and env.budget_left == 0:
            return f"the research budget of {env.max_candidates} candidates is used: call freeze"
        if name == "explore" and self.explore_left == 0:
            return f"exploration budget exhausted ({self.config.explore_runs} runs per episode): submit a candidate"
        return None

    def _build(self) -> Toolbox:
        env = self.env

        @tool
        def describe_data() -> str:
            """The data (stocks, boards, industries, view fields), the research calendar (decision dates by
            month; blind: trading-day counts) and the budgets left (candidates, exploration runs, tool calls)."""
            return describe_text(env)

        @tool
        def explore(code: str, day: Optional[int] = None) -> str:
            """Run a Python snippet on research-window data in the sandbox and return what it prints.

            The snippet runs like a submission's module code (same sandbox, limits and allowed imports) with
            `view` predefined: the point-in-time view of one research decision date, exactly as
            compute_features(view) sees it. A last bare expression is printed. Each run uses one of the
            episode's exploration runs (describe_data shows how many are left), whatever its outcome.

            Parameters
            ----------
            code : str
                Python source, e.g. "px = view.history('adj_close', 60)\\npx.pct_change().mean(axis=1).describe()".
            day : int
                Research decision date: 0 = the first, -1 = the last (default: the last).
            """
            day_index(day, research_days(env)[1])  # a date outside the window uses no run
            self.explore_used += 1
            return run_snippet(env, code, day)

        @tool
        def submit(source: str) -> str:
            """Submit a candidate (the module source: FEATURES, compute_features, score) for evaluation on the
            research window; returns its research feedback. Uses one candidate of the budget.

            Parameters
            ----------
            source : str
                The full Python module text of the candidate.
            """
            return self._answer_with(source)

        @tool
        def freeze(candidate: Optional[int] = None) -> str:
            """Freeze a candidate: it is evaluated once on the sealed window and the episode ends with the final
            scores.

            Parameters
            ----------
            candidate : int
                1-based index of an evaluated candidate (default: the latest).
            """
            return self._answer_with({"freeze": candidate})

        tools = [describe_data, explore, submit, freeze]
        return Toolbox([t for t in tools if env.mode == "iterative" or t.name != "freeze"])

    def _answer_with(self, action: Any) -> str:
        from .executor import ArenaHostError

        try:
            self._answer = self.env._answer(action)
        except ArenaHostError as exc:  # quantgym's failure, not the agent's: raised after the call
            self._host_error = exc
            return ""
        return self._answer[0]

    def call(self, name: Any, arguments: Any) -> tuple[str, float, bool, bool, dict]:
        """Run one tool call; the env's ``step`` result (see the module docstring)."""
        self._answer = self._host_error = None
        res = self.run(name, arguments, candidate=len(self.env.candidates) + 1)
        if self._host_error is not None:
            raise self._host_error
        rec = res.to_dict()
        self.env._record("tool_call", call=rec, explore_used=self.explore_used)
        reward, terminated, truncated, info = 0.0, False, False, {"budget_left": self.env.budget_left,
                                                                   "prompt_style": self.env.prompt_style}
        if self._answer is not None:
            _, reward, terminated, truncated, info = self._answer
        info = dict(info, tool=rec, **(self.stage_info(terminated) if res.ok and self._answer is not None
                                       else {"tool_budget": self.budget_info()}))
        return res.content, float(reward), terminated, truncated, info

    def metrics(self) -> dict:
        """The episode's tool use (:func:`quantgym.tools.tool_use` of the log) and its exploration runs."""
        return {**super().metrics(), "explore_runs_used": self.explore_used}

    def budget_info(self) -> dict:
        """``info["tool_budget"]``: the stage budget used and left, and the exploration runs."""
        return {**self.state.to_dict(), "explore_runs": self.config.explore_runs, "explore_left": self.explore_left}


__all__ = ["ArenaTools", "SnippetError", "TOOL_NAMES", "ANSWER_TOOLS", "describe_text", "explore_payload",
           "print_last_expression", "run_snippet", "snippet_limits", "tools_section"]
