"""Market-Bench agents: the reference agent and the mutation suite (spec issue §4).

An agent maps the env's observation (prompt + input paths + round parameters) to a Python
source defining ``run_backtest(inputs: dict[str, str]) -> dict[str, float]``.

- :class:`ReferenceAgent` submits the reference backtester itself: the source of the shared
  synthetic-book component (:mod:`~quantgym.envs.market_bench.book`) followed by the strategy's
  reference module, the round's parameters as a ``PARAMS`` literal (what a model would copy from
  the prompt) and the ``run_backtest`` entry point. It must score pass@1 = 1 and MAE = 0 on all
  15 rounds, which proves the harness end to end.
- :data:`MUTANTS`: deliberately wrong backtesters, each the reference source with one
  documented textual change at a ``MUTATION-POINT`` marker (LIFO instead of FIFO, ignoring
  consumed liquidity, an off-by-one rolling window, the wrong hedge sign, ignoring the order
  delay). Each must run successfully with MAE > 0. ``write_mutant_sources(folder)`` writes them
  as files for inspection.
- :class:`StubAgent`: returns 0.0 for every metric key without reading the data. It shows why
  the paper's pass@k alone is gameable (it is "solved" on every round) and why ``correct@k``
  is reported beside it (0 on every round).
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quantgym.envs.market_bench import book as _book
from quantgym.envs.market_bench.config import STRATEGIES
from quantgym.envs.market_bench.references import delta_hedge as _dh
from quantgym.envs.market_bench.references import pairs as _pairs
from quantgym.envs.market_bench.references import scheduled as _sched

_MODULES = {"scheduled": _sched, "pairs": _pairs, "delta_hedge": _dh}
_ENTRY = {
    "scheduled": 'backtest_scheduled(inputs["book.csv"], inputs["schedule.csv"], **PARAMS)',
    "pairs": 'backtest_pairs(inputs["book.csv"], **PARAMS)',
    "delta_hedge": 'backtest_delta_hedge(inputs["book.csv"], inputs["option_delta.csv"], **PARAMS)',
}


def _body(module) -> str:
    """Module source without lines importing quantgym internals."""
    src = inspect.getsource(module)
    return "\n".join(line for line in src.splitlines() if "# quantgym-internal" not in line) + "\n"


def reference_source(strategy: str, params: dict[str, Any]) -> str:
    """The self-contained reference attempt for a round: book component + strategy + entry point.

    Parameters
    ----------
    strategy : {"scheduled", "pairs", "delta_hedge"}
    params : dict
        The round's parameters (``Round.params``; also in the observation), written as ``PARAMS``.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    head = f'"""Market-Bench reference backtester ({strategy}), submitted by the reference agent."""\n\n'
    entry = (
        f"\n\nPARAMS = {json.dumps(params, indent=4)}\n\n\n"
        "def run_backtest(inputs):\n"
        '    """inputs: input file name -> path. Returns the metrics dict (plus equity_curve)."""\n'
        f"    return {_ENTRY[strategy]}\n"
    )
    return head + "# ---- shared synthetic-book component ----\n" + _body(_book) + \
        f"\n\n# ---- strategy: {strategy} ----\n" + _body(_MODULES[strategy]) + entry


@dataclass(frozen=True)
class Mutant:
    """A deliberately wrong backtester: the reference source with textual replacements."""

    name: str
    strategy: str
    description: str
    replacements: tuple[tuple[str, str], ...]

    def source(self, params: dict[str, Any]) -> str:
        """Mutated source; raises ``RuntimeError`` if a replacement does not hit exactly once."""
        src = reference_source(self.strategy, params)
        for old, new in self.replacements:
            n = src.count(old)
            if n != 1:
                raise RuntimeError(f"mutant {self.name}: pattern found {n} times, expected once: {old!r}")
            src = src.replace(old, new)
        return src


MUTANTS: tuple[Mutant, ...] = (
    Mutant("lifo", "scheduled", "closes the newest lot first (LIFO) instead of the oldest (FIFO)", (
        ("lot = self.lots[0]  # MUTATION-POINT lot-order", "lot = self.lots[-1]  # MUTANT: LIFO"),
        ("self.lots.popleft()  # MUTATION-POINT lot-pop", "self.lots.pop()  # MUTANT: LIFO"),
    )),
    Mutant("no_consumed", "scheduled", "walks the raw book, ignoring the liquidity its own fills consumed", (
        ("syn = raw - consumed.get((s, side, p), 0)  # MUTATION-POINT consumed", "syn = raw  # MUTANT"),
        ("if raw - consumed.get((s, side, p), 0) > 0:  # MUTATION-POINT consumed-best", "if raw > 0:  # MUTANT"),
    )),
    Mutant("window_off_by_one", "pairs", "rolling z-score over W-1 spreads instead of W", (
        ("rolling(int(window), min_periods=int(window))  # MUTATION-POINT window",
         "rolling(int(window) - 1, min_periods=int(window) - 1)  # MUTANT"),
    )),
    Mutant("ignore_delay", "pairs", "matches each leg order on the leg's next row, ignoring the order delay", (
        ("bk.first_at_or_after(leg, t + delay_ns)  # MUTATION-POINT s2-delay",
         "bk.first_at_or_after(leg, t + 1)  # MUTANT"),
    )),
    Mutant("wrong_delta_sign", "delta_hedge", "hedges in the direction of the net delta (sign flipped)", (
        ("buy = net < 0  # MUTATION-POINT hedge-sign", "buy = net > 0  # MUTANT"),
    )),
    Mutant("ignore_delay", "delta_hedge", "matches each hedge at the first row at or after the grid time (no exchange delay)", (
        ("np.searchsorted(ts, grid + int(delay_ns), side=\"left\")  # MUTATION-POINT s3-delay",
         "np.searchsorted(ts, grid, side=\"left\")  # MUTANT"),
    )),
)


def mutants_for(strategy: str) -> list[Mutant]:
    """The mutants of one strategy."""
    return [m for m in MUTANTS if m.strategy == strategy]


class ReferenceAgent:
    """Submits the reference backtester for the observed round (``act(obs) -> source``)."""

    name = "reference"

    def act(self, obs: dict[str, Any]) -> str:
        return reference_source(obs["strategy"], json.loads(obs["params_json"]))


class MutantAgent:
    """Submits one mutant's source for the observed round."""

    def __init__(self, mutant: Mutant):
        self.mutant = mutant
        self.name = f"mutant:{mutant.name}"

    def act(self, obs: dict[str, Any]) -> str:
        if obs["strategy"] != self.mutant.strategy:
            raise ValueError(f"{self.name} is a {self.mutant.strategy} mutant, round is {obs['strategy']}")
        return self.mutant.source(json.loads(obs["params_json"]))


class StubAgent:
    """Answers every round with ``{key: 0.0 for key in the metric keys}`` (anti-stub demonstration)."""

    name = "stub_zeros"

    def act(self, obs: dict[str, Any]) -> str:
        from quantgym.envs.market_bench.config import METRIC_KEYS

        keys = list(METRIC_KEYS[obs["strategy"]])
        return f"def run_backtest(inputs):\n    return {{k: 0.0 for k in {keys!r}}}\n"


def trusted_maes(strategy: str, round_: int, task_set: str | None = None) -> dict[str, dict[str, float]]:
    """MAE and correctness of the reference source and of each mutant of ``strategy`` on one shipped round.

    The sources are OUR trusted ones (reference + mutants), so they run in this process, without the sandbox
    (about 10x faster than :class:`~quantgym.envs.market_bench.env.MarketBenchEnv`, which the bench and the env
    tests use). Returns ``{name: {"mae": float, "correct": bool}}`` with ``"reference"`` first.
    """
    import tempfile

    from quantgym.envs.market_bench.config import METRIC_KEYS, MarketBenchScoringConfig
    from quantgym.envs.market_bench.rounds import load_round, write_inputs
    from quantgym.envs.market_bench.scoring import is_correct, mae

    rnd = load_round(strategy, round_, task_set=task_set)
    config = MarketBenchScoringConfig()
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="quantgym-mb-trusted-") as tmp:
        inputs = write_inputs(rnd, tmp)
        for name, src in [("reference", reference_source(strategy, rnd.params))] + \
                [(m.name, m.source(rnd.params)) for m in mutants_for(strategy)]:
            scope: dict[str, Any] = {"__name__": f"market_bench_{name}"}
            exec(compile(src, f"<{strategy} {name}>", "exec"), scope)  # noqa: S102 - our own sources
            res = scope["run_backtest"](inputs)
            metrics = {k: float(res[k]) for k in METRIC_KEYS[strategy]}
            out[name] = {"mae": mae(metrics, rnd.metrics, strategy),
                         "correct": is_correct(metrics, rnd.metrics, strategy, config)}
    return out


def write_mutant_sources(folder: str | Path, round_: int = 1) -> list[Path]:
    """Write the reference and every mutant's source of ``round_`` as ``.py`` files (for reading)."""
    from quantgym.envs.market_bench.rounds import load_round

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for strategy in STRATEGIES:
        params = load_round(strategy, round_).params
        p = folder / f"{strategy}_reference.py"
        p.write_text(reference_source(strategy, params))
        out.append(p)
        for m in mutants_for(strategy):
            p = folder / f"{strategy}_mutant_{m.name}.py"
            p.write_text(m.source(params))
            out.append(p)
    return out


__all__ = ["reference_source", "Mutant", "MUTANTS", "mutants_for", "ReferenceAgent", "MutantAgent", "StubAgent",
           "trusted_maes", "write_mutant_sources"]
