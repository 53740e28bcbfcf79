"""Uncertainty of every leaderboard number (docs/uncertainty.md): generic statistics, no task named here.

- :mod:`quantgym.stats.config`: :class:`BootstrapConfig`, the one place of the bootstrap settings
  (seed 16, B = 2000, 95 %, Politis–White block lengths).
- :mod:`quantgym.stats.bootstrap`: stationary block bootstrap intervals of return statistics
  (Politis & Romano 1994, block length by Politis & White 2004, through ``arch.bootstrap``) and the
  Sharpe-ratio difference test on paired returns (Ledoit & Wolf 2008).
- :mod:`quantgym.stats.overfitting`: Deflated Sharpe Ratio (Bailey & López de Prado 2014) and the
  Probability of Backtest Overfitting by CSCV (Bailey, Borwein, López de Prado & Zhu 2017).
- :mod:`quantgym.stats.passk`: the unbiased pass@k estimator (Chen et al. 2021) and intervals over rounds.

Tasks call these from their own bench / report code.
"""
