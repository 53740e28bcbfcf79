"""PortBench-QA in blind mode (docs/blind.md): the question without the tickers and levels that date it.

The rendered question is rewritten: every ticker of the universe becomes its class alias (``EQ07``,
drawn from the reset seed), a ``start=…, end=…`` price pair is rebased (start 100), and each macro value
becomes its z-score over the question's context window (never a level). The answer is mapped back
before scoring: aliases to the real tickers, a real ticker to an unknown name (it selects nothing).
The truth and the §9.4 scoring are those of named mode.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

import numpy as np

from quantgym.blind import AliasMap, zscore
from quantgym.envs.portbench.universe import MACRO_KEYS

_START_END = re.compile(r"start=(-?\d+(?:\.\d+)?), end=(-?\d+(?:\.\d+)?)")
_MACRO_LINE = re.compile(r"^(Macro (?:context|indicators): )(.*)$", re.M)
#: what a real ticker in a blind answer becomes (no asset has this name)
UNKNOWN = "UNKNOWN"


def _words(words) -> re.Pattern:
    words = sorted(set(words), key=len, reverse=True)  # BTC-USD before any shorter name
    return re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(re.escape(w) for w in words) + r")(?![A-Za-z0-9])")


class QABlinding:
    """The blind view of one QA question: its alias map (drawn from ``seed``) and the macro window of its
    decision date. ``qd``: the generator's :class:`~quantgym.envs.portbench.static_qa.context.QAData`."""

    def __init__(self, qd, decision_date: str, seed: Any):
        self.aliases = AliasMap(qd.tickers, qd.data.asset_class, seed)
        self._real = _words(qd.tickers)
        self._alias = _words(self.aliases.aliases)
        lo, hi = qd.window_rows(_dt.date.fromisoformat(str(decision_date)[:10]))
        z = zscore(qd.macro[lo:hi]) if hi > lo else np.full(len(MACRO_KEYS), np.nan)
        self.macro_z = {k: float(v) for k, v in zip(MACRO_KEYS, z) if np.isfinite(v)}

    def prompt(self, text: str) -> str:
        """``text`` (a rendered question) blinded."""
        def start_end(m: re.Match) -> str:
            a, b = float(m.group(1)), float(m.group(2))
            return f"start=100.0, end={100.0 * b / a:.1f}" if a > 0 else "start=n/a, end=n/a"

        def macro(m: re.Match) -> str:
            keys = [p.split("=", 1)[0] for p in m.group(2).split(", ")]
            vals = [f"{k}={self.macro_z[k]:+.1f}" for k in keys if k in self.macro_z]
            return f"{m.group(1)}(z-scores over the window, never levels) " + ", ".join(vals)

        text = _START_END.sub(start_end, text)
        text = _MACRO_LINE.sub(macro, text)
        text = text.replace("Historical prices (past", "Prices rebased to 100 at the window start (past")
        return self.to_aliases(text)

    def to_aliases(self, text: str) -> str:
        """``text`` with every real ticker written as its alias."""
        return self._real.sub(lambda m: self.aliases.alias(m.group(0)), text)

    def answer(self, text: Any) -> Any:
        """The agent's answer with its aliases mapped back to the real tickers (a real ticker in it
        becomes :data:`UNKNOWN`); anything but a string unchanged."""
        if not isinstance(text, str):
            return text
        text = self._real.sub(UNKNOWN, text)
        return self._alias.sub(lambda m: self.aliases.real(m.group(0)), text)

    def record(self) -> dict[str, Any]:
        """The evaluator-side record (results, never the agent)."""
        return self.aliases.to_dict()
