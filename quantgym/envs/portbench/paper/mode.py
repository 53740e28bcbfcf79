"""The fidelity mode of a PortBench env: every place where paper mode departs from clean mode (spec Appendix A).

:class:`~quantgym.envs.portbench.env.PortBenchEnv` asks one mode object, never the paper flags:
:class:`CleanMode` (spec §4–§7, the default) answers with the clean rules, :class:`PaperMode` with those of the
flags of a :class:`~quantgym.envs.portbench.paper.config.PaperFidelity` that are on. :func:`fidelity_mode`
picks one for a config; :func:`resolve_fidelity` applies the env's ``fidelity`` / ``paper`` arguments to a config.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from quantgym.envs.portbench import prompts
from quantgym.envs.portbench.config import Period, PortBenchConfig
from quantgym.envs.portbench.execution import cash_cost_drag, cash_key
from quantgym.envs.portbench.paper.config import PaperFidelity
from quantgym.envs.portbench.profiles import PAS_EQUITY_CLASSES_CLEAN, PAS_EQUITY_CLASSES_PAPER
from quantgym.envs.portbench.universe import MACRO_KEYS


def resolve_fidelity(config: PortBenchConfig, fidelity: str, paper: PaperFidelity | dict | None) -> PortBenchConfig:
    """``config`` with the env's fidelity arguments applied: ``paper`` (flags or a dict of them) replaces
    ``config.paper``; ``fidelity="paper"`` without any flag on switches every flag on (spec Appendix A);
    ``config.fidelity`` then says "paper" as soon as one flag is on."""
    if fidelity not in ("clean", "paper"):
        raise ValueError(f"fidelity must be 'clean' or 'paper', got {fidelity!r}")
    if paper is not None and not isinstance(paper, (dict, PaperFidelity)):
        raise ValueError(f"paper must be a PaperFidelity or a dict of its flags (e.g. {{'costs': True}}), got "
                         f"{paper!r}; every paper rule at once is fidelity='paper'")
    if paper is not None:  # single paper items on top of clean mode (Appendix A)
        config = config.replace(paper=PaperFidelity(**paper) if isinstance(paper, dict) else paper)
    if fidelity == "paper" and not config.paper.any:
        config = config.replace(paper=PaperFidelity.paper())
    return config.replace(fidelity="paper" if config.paper.any else "clean")


class CleanMode:
    """Clean mode (spec §4–§7 with the §11 decisions): the rules every :class:`PaperMode` flag departs from."""

    #: the row-dependent observation entries are cached per dataset and row (paper rows are built per step)
    cached_observation = True
    #: §11.9: the S3 oracle gives equal weight when every mean return on ``B`` is ≤ 0
    ew_if_nonpositive_mu = True
    #: §4.4: the S4/S5 truth is the configured oracle's (paper: always the ex-post oracle)
    s45_ex_post = False
    #: §4.0 / §11.3: an unparseable answer gets the fallback and the episode continues (paper: aborts)
    abort_on_parse_failure = False
    #: §6.6: the drawdown counts the starting NAV as a peak
    include_start = True
    #: §7.3: the asset classes PAS counts as equity
    pas_equity_classes = PAS_EQUITY_CLASSES_CLEAN

    def __init__(self, flags: PaperFidelity | None = None):
        self.flags = flags if flags is not None else PaperFidelity()

    def data(self, data: Any):
        """The market data of the env (``data=None``: the bundled data)."""
        from quantgym.envs.portbench.data import as_portbench_data

        return as_portbench_data(data)

    def view(self, data, config: PortBenchConfig):
        from quantgym.envs.portbench.market import MarketView

        return MarketView(data, config)

    def simulator(self, view, period: Period, config: PortBenchConfig):
        """The day loop (§6.1, §6.2), starting in equal weight over the assets available before the start."""
        from quantgym.envs.portbench.simulator import PortfolioSimulator, equal_weight_start

        return PortfolioSimulator(view.dates, view.returns0, period, equal_weight_start(view), config.costs,
                                  config.initial_nav, view.tickers)

    def forward_rows(self, t: int, nxt: int, cap: int) -> tuple[int, int]:
        """Rows ``[lo, hi)`` of the ex-post oracle's returns at decision row ``t`` (§4.3, §11.7): the day after
        ``d`` up to the next decision row ``nxt``, at most ``cap`` rows."""
        return t + 1, min(nxt, t + cap) + 1

    def all_zero_weights(self, available: np.ndarray) -> np.ndarray | None:
        """S3 weights for an answer whose weights on ``A_d`` are all zero (§11.4): None, the §11.6 fallback."""
        return None

    def executed(self, w: np.ndarray, tau: float, rate: float, view) -> np.ndarray:
        """Executed weights of S3 weights ``w`` (§4.4): the weights themselves."""
        return w

    def render_s1(self, snap, config: PortBenchConfig, style: str, cache) -> str:
        return prompts.render_s1(snap, MACRO_KEYS, config.corr_table, style=style, cache=cache, config=config)

    def render_s2(self, snap, prev_views, notes, style: str, config: PortBenchConfig) -> str:
        return prompts.render_s2(snap, prev_views, notes, style=style, config=config)

    def s3_profile_block(self, profile) -> str:
        """The investor profile block of the S3 prompt (§3.1)."""
        return profile.prompt_block()


class PaperMode(CleanMode):
    """Paper mode: the clean rules with every flag of ``flags`` that is on (spec Appendix A)."""

    cached_observation = False

    def __init__(self, flags: PaperFidelity):
        super().__init__(flags)
        self.ew_if_nonpositive_mu = not flags.s3_solver_nonpositive_mu  # §11.9
        self.s45_ex_post = flags.ex_post_s4s5  # §4.4
        self.abort_on_parse_failure = flags.abort_on_parse_failure  # §4.0, §11.3
        self.include_start = not flags.mdd_no_start_peak  # §6.6
        self.pas_equity_classes = PAS_EQUITY_CLASSES_PAPER if flags.pas_real_estate else PAS_EQUITY_CLASSES_CLEAN

    def data(self, data: Any):
        from quantgym.envs.portbench.data import as_portbench_data
        from quantgym.envs.portbench.paper.simulator import paper_data_for

        return paper_data_for(self.flags, None if data is None else as_portbench_data(data))

    def view(self, data, config: PortBenchConfig):
        """The view with the paper snapshot flags (own-calendar windows, NaN correlations)."""
        from quantgym.envs.portbench.paper.simulator import make_view

        return make_view(data, config)

    def simulator(self, view, period: Period, config: PortBenchConfig):
        """The paper day loop (§6.1, §6.2, §2.1 paper mode)."""
        from quantgym.envs.portbench.paper.simulator import make_simulator

        return make_simulator(view, period, config)

    def forward_rows(self, t: int, nxt: int, cap: int) -> tuple[int, int]:
        if self.flags.ex_post_from_d:  # §4.3: starts at d, overlapping the lookback
            return t, t + cap
        return super().forward_rows(t, nxt, cap)

    def all_zero_weights(self, available: np.ndarray) -> np.ndarray | None:
        if not self.flags.s3_all_zero_equal_signals:
            return None
        # §11.4: equal weight over the available assets, round 4
        return np.round(available / available.sum(), 4) if available.any() else np.zeros(available.size)

    def executed(self, w: np.ndarray, tau: float, rate: float, view) -> np.ndarray:
        """``cash_cost_drag`` (§4.4): the cash key (first ticker containing ``BIL``, else the first cash asset)
        reduced by ``K/NAV = rate·τ`` (floored at 0), round 4."""
        if not self.flags.cash_cost_drag:
            return w
        return cash_cost_drag(w, tau, rate, cash_key(view.tickers, view.classes))

    def render_s1(self, snap, config: PortBenchConfig, style: str, cache) -> str:
        if self.flags.short_prompts:  # §4.1: first 8 assets, 6×6 pairwise table
            return prompts.render_s1(snap, MACRO_KEYS, config.corr_table, max_assets=8, max_corr_assets=6,
                                     style=style, cache=cache, config=config)
        return super().render_s1(snap, config, style, cache)

    def render_s2(self, snap, prev_views, notes, style: str, config: PortBenchConfig) -> str:
        if self.flags.s2_prompt_threshold:  # §4.2: the prompt says ±0.15, the truth uses ±0.2
            return prompts.render_s2(snap, prev_views, notes, threshold=0.15, style=style, config=config)
        return super().render_s2(snap, prev_views, notes, style, config)

    def s3_profile_block(self, profile) -> str:
        return "" if self.flags.no_profile_in_s3 else profile.prompt_block()  # §3.1: no profile in S3


def fidelity_mode(config: PortBenchConfig) -> CleanMode:
    """The mode object of ``config``: :class:`PaperMode` when a paper flag is on, else :class:`CleanMode`."""
    return PaperMode(config.paper) if config.paper.any else CleanMode(config.paper)


__all__ = ["CleanMode", "PaperMode", "fidelity_mode", "resolve_fidelity"]
