"""Reference backtesters of Market-Bench, one module per strategy (spec §4, §9.8-§9.10).

Each module exposes ``backtest_<strategy>(...) -> dict`` (the §9.11 metrics plus
``equity_curve``) and is written so that its source, concatenated after
:mod:`quantgym.envs.market_bench.book`, is a valid attempt (only allow-listed imports); that
is what the reference agent submits.

``BACKTESTERS`` maps each strategy to the function that computes its stored reference outputs:
the readable module's for scheduled, and for pairs and delta_hedge
:func:`~quantgym.envs.market_bench.kernels.backtest_pairs_compiled` and
:func:`~quantgym.envs.market_bench.kernels.backtest_delta_hedge_compiled`, the same backtesters with
their event loops compiled (bit-identical to ``backtest_pairs`` and ``backtest_delta_hedge``; see
that module for how they are held together).
"""

from quantgym.envs.market_bench.kernels import backtest_delta_hedge_compiled, backtest_pairs_compiled
from quantgym.envs.market_bench.references.delta_hedge import backtest_delta_hedge
from quantgym.envs.market_bench.references.pairs import backtest_pairs
from quantgym.envs.market_bench.references.scheduled import backtest_scheduled

BACKTESTERS = {"scheduled": backtest_scheduled, "pairs": backtest_pairs_compiled,
               "delta_hedge": backtest_delta_hedge_compiled}

__all__ = ["BACKTESTERS", "backtest_scheduled", "backtest_pairs", "backtest_pairs_compiled", "backtest_delta_hedge",
           "backtest_delta_hedge_compiled"]
