"""``quantgym eval --dry-run``: the calls a run would make, their tokens, cost and wall time, before any call.

Nothing is sent and nothing is written. Each task's LLM adapter plans its episodes (its ``dry_run``
method, with :func:`add_episode`, :func:`code_cap` and :func:`expected_completion` from here; each
adapter's docstring says how it plans).

Tokens are :func:`~quantgym.agents.llm.tokens.estimate_tokens` (an over-estimate on these prompts,
see that module). Completion tokens: the caps are the upper bound; the expected value takes each
JSON cap back to its widest plausible answer (cap minus ``CAP_EXTRA``, over ``CAP_MARGIN``) and each
code cap at half. Cost: the agent's price (USD per 1M tokens: ``--price-in`` / ``--price-out``, ``--prices``
or the bundled table, :func:`quantgym.agents.llm.prices.resolve_price`). Wall time: prompt
tokens / ``prompt_tokens_per_s`` + completion tokens / ``tokens_per_s``, one call at a time.
"""

from __future__ import annotations

from typing import Any

from quantgym.agents.llm.client import CallResult, ChatEngine

class DryRunEngine(ChatEngine):
    """A :class:`ChatEngine` that sends nothing: it records each request's estimated prompt tokens and cap
    and answers with a refusal (so a staged episode moves on without re-asks)."""

    def __init__(self, config):
        super().__init__(config, api_key="dry-run", transcript=None, cache=False)
        self.planned: list[dict] = []
        self._probed = True  # no metadata probe: the window is the configured one (or unknown)

    def _resolve(self, req: dict, h: str, nonce: int):
        from quantgym.agents.llm.tokens import messages_tokens

        self.planned.append({"episode": self.episode, "prompt_tokens": messages_tokens(req["messages"]),
                             "max_tokens": req.get("max_tokens") or req.get("max_completion_tokens")})
        text = "I cannot provide an answer in a dry run."
        res = CallResult(ok=True, text=text, usage={}, request_hash=h)
        return res, {"ok": True, "text": text, "usage": {}, "response": None, "tries": [], "latency_s": 0.0}


def code_cap(opts: dict, auto: int) -> int | None:
    """The cap a code call sends: the task's own (``max_tokens="auto"``), the user's N, or None (not sent)."""
    mt = opts.get("max_tokens", "auto")
    return auto if mt == "auto" else mt


def add_episode(r: dict, calls_min: int, calls_max: int, prompt: float, prompt_max: float, completion: float,
         completion_max: float, style: str | None) -> None:
    """Accumulate one episode's plan into the task row (floor columns, most-calls columns)."""
    r["episodes"] += 1
    r["calls_min"] += calls_min
    r["calls_max"] += calls_max
    r["prompt_tokens"] += prompt
    r["prompt_tokens_max"] += prompt_max
    r["completion_tokens"] += completion
    r["completion_tokens_max"] += completion_max
    if style:
        r["styles"][style] = r["styles"].get(style, 0) + calls_min


def expected_completion(cap: int | None, kind: str) -> float:
    from quantgym.agents.llm.tokens import CAP_EXTRA, CAP_MARGIN

    if not cap:
        return 0.0
    return max(0.0, (cap - CAP_EXTRA) / CAP_MARGIN) if kind == "json" else cap / 2


def dry_run_plan(agent_spec: Any, plan: Any, *, agent_options: dict | None = None, tokens_per_s: float = 50.0,
                 prompt_tokens_per_s: float = 1000.0) -> dict[str, Any]:
    """Plan of ``quantgym eval`` for ``agent_spec`` (``openai:MODEL``, a string or a parsed
    :class:`~quantgym.agents.registry.AgentSpec`) and ``plan`` (an ``EvalPlan``).

    Returns
    -------
    dict with ``rows`` (one per task: episodes, calls (min, max), prompt / completion tokens (expected,
    upper bound), cost in USD or None, wall seconds), ``total`` (the same summed), ``context_window``
    and ``notes`` (what the estimate assumes).

    Raises
    ------
    ValueError
        An agent that is not ``openai:MODEL``, or an env id of no task.
    """
    from quantgym.agents.llm.agents import build_agent
    from quantgym.tasks import task_of

    from quantgym.agents.registry import AgentSpec

    if not isinstance(agent_spec, (str, AgentSpec)) or AgentSpec.parse(agent_spec).scheme != "openai":
        raise ValueError("--dry-run plans an openai:MODEL agent (a replay makes no calls; a baseline makes no LLM calls)")
    model = AgentSpec.parse(agent_spec).argument
    opts = {k: v for k, v in dict(agent_options or {}).items()
            if k not in ("api_key", "cache_from", "cache", "transcript")}
    rows: dict[str, dict[str, Any]] = {}

    def row(task: str) -> dict[str, Any]:
        return rows.setdefault(task, {"task": task, "episodes": 0, "calls_min": 0, "calls_max": 0,
                                      "prompt_tokens": 0, "prompt_tokens_max": 0, "completion_tokens": 0.0,
                                      "completion_tokens_max": 0, "styles": {}})

    from quantgym.memorization import views

    window = None
    for vplan in views(plan):  # --blind both: every episode named and blind
        for env_id in plan.env_ids:
            task = task_of(env_id).name
            agent = build_agent(model, task, transcript=False, **opts)
            agent.engine = DryRunEngine(agent.engine.config)
            window = agent.engine.context_window()
            plan_episodes = getattr(agent, "dry_run", None)
            if plan_episodes is None:
                raise ValueError(f"{env_id}: the {task} LLM adapter has no dry_run() plan")
            plan_episodes(env_id, vplan, opts, window, row(task))
    price_in, price_out = agent.engine.config.price_in, agent.engine.config.price_out  # resolved by build_agent
    priced = price_in is not None or price_out is not None
    out_rows = []
    for r in rows.values():
        r["completion_tokens"] = int(round(r["completion_tokens"]))
        r["prompt_tokens"] = int(round(r["prompt_tokens"]))
        r["cost_usd"] = ((r["prompt_tokens"] * (price_in or 0) + r["completion_tokens"] * (price_out or 0)) / 1e6
                         if priced else None)
        r["wall_s"] = r["prompt_tokens"] / prompt_tokens_per_s + r["completion_tokens"] / tokens_per_s
        out_rows.append(r)
    keys = ("episodes", "calls_min", "calls_max", "prompt_tokens", "prompt_tokens_max", "completion_tokens",
            "completion_tokens_max", "wall_s")
    total = {k: sum(r[k] for r in out_rows) for k in keys}
    total["cost_usd"] = sum(r["cost_usd"] for r in out_rows) if priced else None
    notes = []
    if opts.get("max_tokens", "auto") is None:
        notes.append("--max-tokens none: no cap is sent, so completion tokens (and wall time) have no bound here")
    notes += [f"tokens: quantgym's estimate (over-counts, see docs/llm-agents.md); wall time at {tokens_per_s:g} "
             f"completion and {prompt_tokens_per_s:g} prompt tokens/s, one call at a time"]
    if window is None:
        notes.append("context window unknown (pass --context-window): planned with the full prompts; a run "
                     "learns the window from the server and may send smaller ones")
    if priced:
        notes.append(f"price: {agent.price_source}")
    else:
        from quantgym.agents.llm.prices import no_price_note

        notes.append(no_price_note(model))
    return {"model": model, "context_window": window, "rows": out_rows, "total": total, "notes": notes}


def _fmt_tokens(n: float) -> str:
    n = float(n)
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else f"{n:.0f}"


def _fmt_s(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.1f} min" if s >= 60 else f"{s:.0f} s"


def render_plan(report: dict[str, Any], console: Any) -> None:
    """Print ``report`` (from :func:`dry_run_plan`) as a table that fits 80 columns."""
    from quantgym.tables import Col, print_table
    from quantgym.tasks import task_names, get_task

    short = {n: get_task(n).title for n in task_names()}

    def cells(r: dict, name: str) -> list[str]:
        calls = f"{r['calls_min']}" + (f"-{r['calls_max']}" if r["calls_max"] != r["calls_min"] else "")
        cost = "" if r.get("cost_usd") is None else (f"{r['cost_usd']:.2f}" if r["cost_usd"] >= 1
                                                      else f"{r['cost_usd']:.4f}")
        return [short.get(name, name), str(r["episodes"]), calls, _fmt_tokens(r["prompt_tokens"]),
                _fmt_tokens(r["completion_tokens"]), _fmt_tokens(r["completion_tokens_max"]), cost,
                _fmt_s(r["wall_s"])]

    rows = [cells(r, r["task"]) for r in report["rows"]]
    if len(report["rows"]) > 1:
        rows.append(cells(report["total"], "total"))
    print_table(console, f"Dry run: openai:{report['model']} (no call sent)",
                [Col("task", "left"), *[Col(c) for c in ("ep.", "calls", "prompt", "compl.", "≤compl.", "USD", "wall")]],
                rows)
    console.print("calls: the floor (no re-ask; code tasks: the first attempt runs) and the most (every "
                  "re-ask / attempt); prompt, compl.: estimated tokens of the floor; ≤compl.: the caps of the "
                  "most; k = 1,000", highlight=False)
    for r in report["rows"]:
        if r.get("styles"):
            console.print(f"{r['task']} prompt styles: "
                          + ", ".join(f"{k} {v}" for k, v in sorted(r["styles"].items())), highlight=False)
    cw = report["context_window"]
    console.print(f"context window: {cw if cw else 'unknown'}", highlight=False)
    for n in report["notes"]:
        console.print(f"note: {n}", highlight=False, soft_wrap=False)


__all__ = ["DryRunEngine", "dry_run_plan", "render_plan", "add_episode", "code_cap",
           "expected_completion"]
