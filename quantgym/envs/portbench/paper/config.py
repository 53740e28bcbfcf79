"""The paper-fidelity switches: one frozen config object, one named flag per Appendix A item.

``PaperFidelity()`` (all off) is clean mode; ``PaperFidelity.paper()`` is the full paper mode
(``fidelity="paper"``); ``PaperFidelity.only("weekday_calendar")`` switches a single item on top
of clean mode (the ablation of ``docs/fidelity.md``). Spec sections are given per flag.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from quantgym.config import Config

PAPER_VERSION = "portbench-paper-1.0"

#: §11.1: the 18 large-cap stocks of the default paper universe, after ICSH in canonical order.
PAPER_STOCKS: tuple[str, ...] = (
    "AAPL", "ADBE", "AMAT", "AMD", "AMZN", "AVGO", "COST", "GOOGL", "HON", "META", "MSFT", "MU", "NFLX",
    "NVDA", "PEP", "QCOM", "TSLA", "TXN",
)

#: §11.1 paper universes; ``None`` = the clean 80-asset universe.
UNIVERSES = ("89_no_crypto", "81_crypto")

#: readings of the repo's §8.6 Black–Litterman (``PaperFidelity.bl_reading``); docs/fidelity.md measures
#: each against the page. [project choice] ``"exact"`` (§11.9: the stated problem's optimum) in both modes.
BL_READINGS: tuple[str, ...] = (
    "exact", "slsqp", "slsqp_last_iterate", "tau_0.025", "annual_views", "equilibrium_prior",
)


@dataclass(frozen=True)
class PaperFidelity(Config):
    """Paper-mode items of spec Appendix A, each a switch (defaults = clean mode).

    Attributes
    ----------
    universe : None | "89_no_crypto" | "81_crypto"
        §1.2/§11.1. None: the clean 80 instruments (``^VIX`` macro only). ``"89_no_crypto"`` (the
        paper default): 25 equity ETFs, ``^VIX`` traded as an equity, 15 bonds, 16 commodities,
        10 real estate, 4 cash, then the 18 stocks of :data:`PAPER_STOCKS`; no crypto.
        ``"81_crypto"``: §1.2's 80 plus ``^VIX`` (last equity).
    eqw_all_assets : bool
        §8.1: EqW (and the initial portfolio) over *all* universe assets, available or not.
    log_returns_equities : bool
        §1.3: equities' returns are ``ln(P_t/P_{t-1})`` and consumed as simple returns.
    winsorize : bool
        §1.3/§1.4: full-sample 1st/99th percentile clipping of every price and return column of
        the non-cash classes, and of the 12 ``bonds.csv`` macro keys and ``vix``.
    weekday_calendar : bool
        §1.3/§6.2: Mon–Fri calendar (``pandas.bdate_range``); the day's return of an asset is the
        last own return found in ``[t − 7, t]`` (holidays repeat it; crypto weekend returns are
        never applied); crypto prices are same-day UTC closes.
    no_mtm_on_rebalance : bool
        §6.2: a rebalance date trades *instead of* marking to market (the old portfolio's return of
        that day is lost).
    skip_start_decision : bool
        §2.1/§6.1: the start date (even a weekend) carries the initial NAV with ``round6(1/N)`` on
        every universe asset; a rebalance date equal to the start date is skipped (2024: first
        decision 2024-02-01).
    weekly_friday : bool
        §2.1: weekly rebalancing every Friday (``W-FRI``) instead of the last trading day of the week.
    own_calendar_windows : bool
        §1.6/§11.6: each asset's snapshot window is its last 60 own-calendar observations in
        ``[d − 90, d]`` (crypto: 60 calendar days); available iff the window is non-empty.
    ex_post_from_d : bool
        §4.3: the ex-post oracle's data start *at* ``d`` (overlapping the lookback by one day).
    ex_post_s4s5 : bool
        §4.4: S4/S5 truth chains the ex-post oracle whatever ``oracle`` is set to.
    erc_sweep_renorm : bool
        §8.4: the repo's ERC renormalises after every coordinate sweep (2×2 example stops at
        (0.3637, 0.6363), not equal risk).
    s2_prompt_threshold : bool
        §4.2: the S2 prompt states ±0.15 (truth keeps ±0.2).
    short_prompts : bool
        §4.1: S1 per-asset lines for the first 8 assets only, pairwise table for the first 6.
    no_profile_in_s3 : bool
        §3.1: the S3 prompt carries no investor-profile block.
    cash_cost_drag : bool
        §4.4/§6.3: executed weights = target with the cash key (first ticker containing ``BIL``)
        reduced by ``K/NAV`` (floored at 0, rounded 4); the sandbox trades to them.
    pas_real_estate : bool
        §3.2: PAS counts real estate on the equity side.
    nan_corr_propagate : bool
        §1.6: NaN correlations propagate into the class averages.
    mdd_no_start_peak : bool
        §7.1/§11.9: MaxDD (metrics and S5) without the starting NAV as a peak.
    abort_on_parse_failure : bool
        §4.0/§11.3: an unparseable answer ends the run (``truncated=True``, ``info["aborted"]``).
    s3_all_zero_equal_signals : bool
        §11.4: all-zero S3 weights → equal weight over the signal assets (not invalid).
    s3_solver_nonpositive_mu : bool
        §11.9: when ``max μ ≤ 0`` on the eligible set ``B``, S3's ``w*`` is the solver's answer (SLSQP
        from equal weight: the least-negative Sharpe, as the repo's code returns it) instead of clean
        mode's equal weight on ``B``.
    winsor_start : str
        First date of the full sample the percentiles are taken over (the repo's data start).
    bl_reading : str
        §8.6 Black–Litterman: which reading of the repo's code the baseline follows (one of
        :data:`BL_READINGS`; default ``"exact"`` in clean and paper mode). ``"exact"``: the stated
        problem solved to its optimum (§11.9). ``"slsqp"``: SciPy SLSQP from ``1/n`` (ftol 1e−9,
        500 iterations) with equal weight whenever it reports failure, as §8.6 states the repo's
        code. ``"slsqp_last_iterate"``: SLSQP's last iterate kept even when it reports failure.
        ``"tau_0.025"``: ``τ = 0.025`` (He–Litterman) instead of ``1/T``. ``"annual_views"``: the
        ±1 % views read as annual returns (``Q = ±0.01/252`` per day). ``"equilibrium_prior"``:
        ``π = δΣw_EqW`` with ``δ = 2.5`` instead of the sample mean. The SLSQP readings run with
        single-threaded BLAS (SLSQP's stopping point depends on BLAS threading).
    """

    universe: Literal[None, "89_no_crypto", "81_crypto"] = None
    eqw_all_assets: bool = False
    log_returns_equities: bool = False
    winsorize: bool = False
    weekday_calendar: bool = False
    no_mtm_on_rebalance: bool = False
    skip_start_decision: bool = False
    weekly_friday: bool = False
    own_calendar_windows: bool = False
    ex_post_from_d: bool = False
    ex_post_s4s5: bool = False
    erc_sweep_renorm: bool = False
    s2_prompt_threshold: bool = False
    short_prompts: bool = False
    no_profile_in_s3: bool = False
    cash_cost_drag: bool = False
    pas_real_estate: bool = False
    nan_corr_propagate: bool = False
    mdd_no_start_peak: bool = False
    abort_on_parse_failure: bool = False
    s3_all_zero_equal_signals: bool = False
    s3_solver_nonpositive_mu: bool = False
    winsor_start: str = "2015-01-01"
    bl_reading: str = "exact"
    version: str = PAPER_VERSION

    def __post_init__(self):
        if self.universe is not None and self.universe not in UNIVERSES:
            raise ValueError(f"paper universe must be None or one of {UNIVERSES}, got {self.universe!r}")
        if self.bl_reading not in BL_READINGS:
            raise ValueError(f"bl_reading must be one of {BL_READINGS}, got {self.bl_reading!r}")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def paper(cls, universe: str = "89_no_crypto", **overrides: Any) -> "PaperFidelity":
        """Full paper mode (every flag on) with the §11.1 universe (default ``89_no_crypto``)."""
        kw: dict[str, Any] = {f: True for f in PAPER_FLAGS if f != "universe"}
        kw["universe"] = universe
        kw.update(overrides)
        return cls(**kw)

    @classmethod
    def only(cls, flag: str, value: Any = True) -> "PaperFidelity":
        """Clean mode with one flag switched on (``universe`` takes ``"89_no_crypto"`` by default).

        Raises
        ------
        ValueError
            Unknown flag name.
        """
        if flag not in PAPER_FLAGS:
            raise ValueError(f"unknown paper flag {flag!r}; choose one of {PAPER_FLAGS}")
        if flag == "universe" and value is True:
            value = "89_no_crypto"
        return cls(**{flag: value})

    # ------------------------------------------------------------------ queries
    @property
    def any(self) -> bool:
        """True if any flag (or the Black–Litterman reading) differs from clean mode."""
        return any(self.enabled()) or self.bl_reading != "exact"

    def enabled(self) -> list[str]:
        """Names of the flags that are on."""
        return [f for f in PAPER_FLAGS if getattr(self, f) not in (None, False)]

    @property
    def custom_data(self) -> bool:
        """True if the clean loader's data do not suffice (universe/returns/calendar, own-calendar tables)."""
        return bool(self.universe or self.log_returns_equities or self.winsorize or self.weekday_calendar
                    or self.own_calendar_windows)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "PaperFidelity":
        return dataclasses.replace(self, **changes)


#: every switch of :class:`PaperFidelity`, in Appendix A order (excluding the parameters ``winsor_start``,
#: ``bl_reading`` and ``version``)
PAPER_FLAGS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(PaperFidelity) if f.name not in ("winsor_start", "bl_reading", "version")
)
