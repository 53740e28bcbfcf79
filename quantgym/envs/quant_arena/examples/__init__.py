"""The four classical Quant-Arena submissions (spec quant_arena.md §10.15), as source text.

Each file is an ordinary submission (it only imports numpy and pandas) and is run
through the same sandbox as agent code. Use :func:`example_source` to read one::

    from quantgym.envs.quant_arena.examples import example_source, EXAMPLES
    src = example_source("low_volatility")
"""

from __future__ import annotations

from importlib import resources

#: name -> file of the example submissions (order = bench table order).
EXAMPLES: dict[str, str] = {
    "momentum_20d": "momentum_20d.py",
    "reversal_5d": "reversal_5d.py",
    "low_volatility": "low_volatility.py",
    "market_timing": "market_timing.py",
}


def example_source(name: str) -> str:
    """Source text of an example submission.

    Raises
    ------
    KeyError
        Unknown name (the message lists the available ones).
    """
    if name not in EXAMPLES:
        raise KeyError(f"unknown example {name!r}; available: {', '.join(EXAMPLES)}")
    return resources.files(__name__).joinpath(EXAMPLES[name]).read_text(encoding="utf-8")


__all__ = ["EXAMPLES", "example_source"]
