"""Prompt rendering for the QA layer (spec §9.3).

``[PORTFOLIO MANAGEMENT QA]``, then (paper mode only) ``Context: <context_summary>``, then
``Question: <question>`` and the template's fixed answer instructions. The paper-mode context summary
leaks the answer for T3–T7 (restricted variants keep the leak); clean mode omits it (§9.3, Appendix A).
"""

from __future__ import annotations

from quantgym.envs.portbench.qa.config import SYSTEM_PROMPT

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


def render_prompt(item, fidelity: str = "clean") -> str:
    """The user prompt of a :class:`~.generator.QAItem` (spec §9.3).

    Parameters
    ----------
    item : QAItem
    fidelity : {"clean", "paper"}
        ``paper`` inserts ``Context: <context_summary>`` (the repo's answer leak).
    """
    parts = ["[PORTFOLIO MANAGEMENT QA]"]
    if fidelity == "paper":
        parts.append(f"Context: {item.pair.context_summary}")
    parts.append(f"Question: {item.question}")
    parts.append(f"Instructions: {INSTRUCTIONS[item.pair.template]}")
    return "\n\n".join(parts)


__all__ = ["INSTRUCTIONS", "SYSTEM_PROMPT", "render_prompt"]
