"""Prompt rendering for the QA layer (spec §9.3).

``[PORTFOLIO MANAGEMENT QA]``, then (paper mode only) ``Context: <context_summary>``, then
``Question: <question>`` and the template's fixed answer instructions. The paper-mode context summary
leaks the answer for T3–T7 (restricted variants keep the leak); clean mode omits it (§9.3, Appendix A).

Styles (:data:`quantgym.spaces.PROMPT_STYLES`): ``"full"`` is the reference prompt; ``"compact"`` joins
the parts with single newlines and writes every decimal without its trailing zeros (``4.1100`` ->
``4.11``, ``5.00%`` -> ``5%``: the same values); ``"minimal"`` also keeps only the macro series of
:data:`~quantgym.envs.portbench.prompts.MINIMAL_MACRO_KEYS` in the macro line of T1/T7. The question's
other inputs and the answer instructions are never shortened.
"""

from __future__ import annotations

import re

from quantgym.envs.portbench.static_qa.config import SYSTEM_PROMPT
from quantgym.spaces import check_prompt_style

#: a plain decimal with trailing zeros (not part of a longer number, not an exponent's digits)
_TRAILING_ZEROS = re.compile(r"(?<![\w.])(\d+)\.(\d*?)0+(?![\d.])")
_MACRO_LINE = re.compile(r"^(Macro (?:context|indicators): )(.*)$", re.M)

#: fixed answer instructions per template (direction: one word; numbers: one decimal; weights: decimals)
INSTRUCTIONS: dict[str, str] = {
    "T1": "Answer with one word: positive, negative or flat.",
    "T2": "Answer with a single decimal number (a daily return, e.g. -0.0150), not a percentage.",
    "T3": "Answer with a single decimal number between 0 and 1, not a percentage.",
    "T4": "Answer with the weights as decimals that sum to 1 (not percentages), one per asset, "
          "in the form w_<TICKER>=<weight>, comma-separated.",
    "T5": "Answer with the weights as decimals that sum to 1 (not percentages), one per asset, "
          "in the form w_<TICKER>=<weight>, comma-separated.",
    "T6": "Answer 'no', or 'yes; sell <amount> of <TICKER>' or 'yes; buy <amount> of <TICKER>' for the most "
          "deviated asset (amount = weight change as a decimal).",
    "T7": "Answer in the form 'Regime: <regime>; Allocations: equities: <d>, bonds: <d>, commodities: <d>, "
          "real_estate: <d>, cryptocurrency: <d>, cash: <d>' with <d> one of increase, decrease, neutral.",
}


def strip_trailing_zeros(text: str) -> str:
    """Every plain decimal of ``text`` without trailing zeros (``0.2500`` -> ``0.25``, ``4.00`` -> ``4``)."""
    return _TRAILING_ZEROS.sub(lambda m: m.group(1) + ("." + m.group(2) if m.group(2) else ""), text)


def _minimal_macro(text: str) -> str:
    from quantgym.envs.portbench.prompts import MINIMAL_MACRO_KEYS

    def keep(m: re.Match) -> str:
        kv = [p for p in m.group(2).split(", ") if p.split("=", 1)[0] in MINIMAL_MACRO_KEYS]
        return m.group(1) + ", ".join(kv) if kv else m.group(0)

    return _MACRO_LINE.sub(keep, text)


def render_prompt(item, fidelity: str = "clean", style: str = "full") -> str:
    """The user prompt of a :class:`~.generator.QAItem` (spec §9.3).

    Parameters
    ----------
    item : QAItem
    fidelity : {"clean", "paper"}
        ``paper`` inserts ``Context: <context_summary>`` (the repo's answer leak).
    style : one of :data:`quantgym.spaces.PROMPT_STYLES` (module docstring).

    Raises
    ------
    ValueError
        Unknown ``style``.
    """
    check_prompt_style(style)
    parts = ["[PORTFOLIO MANAGEMENT QA]"]
    if fidelity == "paper":
        parts.append(f"Context: {item.pair.context_summary}")
    question = item.question
    if style == "minimal":
        question = _minimal_macro(question)
    parts.append(f"Question: {question if style == 'full' else strip_trailing_zeros(question)}")
    parts.append(f"Instructions: {INSTRUCTIONS[item.pair.template]}")
    return "\n\n".join(parts) if style == "full" else "\n".join(parts)


__all__ = ["INSTRUCTIONS", "SYSTEM_PROMPT", "render_prompt", "strip_trailing_zeros"]
