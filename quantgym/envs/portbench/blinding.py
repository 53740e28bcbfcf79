"""PortBench in blind mode (docs/blind.md): what the stage prompts show instead of names, dates and levels.

The scores, the truth and the simulation are those of named mode: blinding changes the text only.

- Assets: :class:`quantgym.blind.AliasMap` by asset class (``EQ07``, ``BD03``, ``CR02``), drawn from the
  episode seed; the agent answers with aliases, which the text path maps back to the universe's order.
- Dates: the decision is named by its number ("decision 3 of 12"), the data by relative trading days.
- Levels: the adjusted close is rebased to 100 at the window start (1 decimal: the window return as a
  level); each macro series is its z-score over the window's rows (1 decimal), never its level.
"""

from __future__ import annotations

from typing import Any


def blind_vocabulary() -> dict[str, Any]:
    """The bundled PortBench words the leak scanner looks for: every ticker of the universe (clean and
    paper), the regime ticker, the period names, aliases and labels (:func:`quantgym.blind.bundled_vocabulary`)."""
    from quantgym.envs.portbench.config import PERIOD_ALIASES, PERIODS, PortBenchConfig
    from quantgym.envs.portbench.universe import CANONICAL_TICKERS, VIX_TICKER

    periods = set(PERIODS) | set(PERIOD_ALIASES)
    periods |= {p.label.split(",")[0].strip() for p in PERIODS.values() if p.label}
    return {"tickers": set(CANONICAL_TICKERS) | {VIX_TICKER, PortBenchConfig.regime_ticker},
            "period_names": periods}
