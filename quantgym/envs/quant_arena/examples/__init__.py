"""The four classical Quant-Arena submissions (spec quant_arena.md §10.15), as source text,
and an example that uses the Level-2 intraday tables where the view has them.

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
#: Examples outside the classical four (not in ``quantgym bench``): ``intraday_flow`` blends
#: intraday realised volatility and order-flow imbalance into the low-volatility score on the
#: stock-days with Level-2 data (docs/quant_arena.md, "Intraday data").
MORE_EXAMPLES: dict[str, str] = {
    "intraday_flow": "intraday_flow.py",
}


def example_source(name: str) -> str:
    """Source text of an example submission.

    Raises
    ------
    KeyError
        Unknown name (the message lists the available ones).
    """
    files = {**EXAMPLES, **MORE_EXAMPLES}
    if name not in files:
        raise KeyError(f"unknown example {name!r}; available: {', '.join(files)}")
    return resources.files(__name__).joinpath(files[name]).read_text(encoding="utf-8")


__all__ = ["EXAMPLES", "MORE_EXAMPLES", "example_source"]
