"""The PortBench Gymnasium environment (spec ``portbench.md`` §4–§7, §11; clean mode).

One module on purpose: :class:`PortBenchEnv` is one state machine (decision date -> S1 -> S2 ->
S3 -> S4/S5 and the day loop between dates) whose stages read and write the same per-date state; the
pieces that stand alone already live beside it (data, market, simulator, execution, stages, prompts)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
import pandas as pd
from gymnasium import spaces

from quantgym.envs.portbench.universe import MACRO_KEYS
from quantgym.envs.portbench.data import as_portbench_data
from quantgym.envs.portbench import prompts
from quantgym.envs.portbench.ceps import ceps as ceps_fn
from quantgym.envs.portbench.ceps import ceps_tier, clip_float
from quantgym.envs.portbench.execution import cash_cost_drag, cash_key, fallback_weights, turnover
from quantgym.envs.portbench.config import (
    STRESS_PERIODS, WEIGHT_SUM_TOLERANCE, LivePeriod, PortBenchConfig, resolve_live, resolve_period, within_tolerance,
)
from quantgym.envs.portbench.paper.config import PaperFidelity
from quantgym.envs.portbench.market import (
    ASSET_CLASSES, REGIMES, MarketSnapshot, MarketView, obs_corr, obs_window,
)
from quantgym.envs.portbench.profiles import PAS_EQUITY_CLASSES_CLEAN, PAS_EQUITY_CLASSES_PAPER, get_profile, pas_step
from quantgym.envs.portbench.simulator import PortfolioSimulator, TickerWeights, by_ticker
from quantgym.envs.portbench.optimize import _single_thread_blas
from quantgym.envs.portbench.stages import (
    BUY, HOLD, SIGNAL_NAMES, RiskReport, risk_report, s1_score, s1_truth, s2_score, s2_truth, s3_score, s3_truth, s4_score,
    s5_score,
)
from quantgym.jit import njit, np_sum
from quantgym.metrics import performance_summary
from quantgym.spaces import AnyText, InvalidActionError, check_prompt_style

STAGES = ("S1", "S2", "S3")
STATUS_OK, STATUS_REFUSED, STATUS_UNPARSEABLE = 0, 1, 2
ACTION_KEYS = ("views", "signals", "weights", "status")
_ACTION_KEYSET = frozenset(ACTION_KEYS)
#: observation keys in the order of the observation dict
OBS_KEYS = ("returns", "returns_mask", "price", "trailing_return", "ann_vol", "corr", "class_id", "available",
            "weights", "nav", "macro", "macro_mask", "regime", "stage", "prev_views", "prev_signals")


#: the kernels' "no output" arrays (never written: size 0)
_NO_F, _NO_I = np.empty(0), np.empty(0, dtype=np.int64)


@njit
def _check_answers(views, signals, weights, available, w_out, views_out, signals_out):
    """The three answers of an allocation step checked and processed in one compiled pass (a kernel,
    :mod:`quantgym.jit`; speed only): the fast checks of ``_process_views`` / ``_process_signals`` /
    ``_process_weights`` and, where they pass, their results with the same arithmetic (``Σw`` is numpy's
    pairwise sum, ``round(4)`` is numpy's ``rint(x·1e4)/1e4``).

    ``w_out`` (2N,) receives ``w_hat = round4(w / tot)`` in ``[:N]`` and its positive entries, in order, from
    ``N`` on; ``views_out`` / ``signals_out`` ((N,) or empty) the processed echoes. Returns
    ``(ok, tot, dropped, n_pos)``: ``ok`` = views in [-1, 1], signals in {0, 1, 2} and weights in [0, 1] (NaN
    fails; nothing is written otherwise); ``tot`` = Σ of the weights on available assets (``w_out`` is valid
    where ``tot > 0``), ``dropped`` = Σ on unavailable ones, ``n_pos`` the count of positive ``w_hat``.
    """
    n = views.shape[0]
    for i in range(n):
        if not (abs(views[i]) <= 1.0 and 0 <= signals[i] <= 2 and weights[i] >= 0.0 and weights[i] <= 1.0):
            return False, 0.0, 0.0, 0
    for i in range(n):  # the weights on A_d, then those dropped (numpy: np.where(a, w, 0), np.where(a, 0, w))
        w_out[i] = weights[i] if available[i] else 0.0
        w_out[n + i] = 0.0 if available[i] else weights[i]
    tot = np_sum(w_out, 0, n)
    dropped = np_sum(w_out, n, n)
    n_pos = 0
    if tot > 0:
        for i in range(n):
            x = np.rint((w_out[i] / tot) * 10000.0) / 10000.0
            w_out[i] = x
            if x > 0:
                w_out[n + n_pos] = x
                n_pos += 1
    for i in range(views_out.shape[0]):
        views_out[i] = views[i] if available[i] else 0.0
        signals_out[i] = signals[i] if available[i] else 1  # HOLD
    return True, tot, dropped, n_pos


@njit
def _s12_parts(views, v_star, signals, s_star, available):
    """S1's ``mean_{A_d} |v̂ − v*|`` and S2's share of right signals (:func:`~.stages.s1_score`,
    :func:`~.stages.s2_score` before their final step) in one compiled pass: numpy's mean = its pairwise sum
    (:func:`quantgym.jit.np_sum`) over the available entries divided by their count. Returns
    ``(n_available, mae, share)`` (0, 0.0, 0.0 for an empty ``A_d``)."""
    n = views.shape[0]
    buf = np.empty(n)
    k, right = 0, 0
    for i in range(n):
        if available[i]:
            buf[k] = abs(views[i] - v_star[i])
            k += 1
            if signals[i] == s_star[i]:
                right += 1
    if k == 0:
        return 0, 0.0, 0.0
    return k, np_sum(buf, 0, k) / k, right / k


_S3_PARTS = ("accuracy", "mae", "intra", "inter", "corr")


# A decision's record is kept as one flat row (PortBenchEnv._finish_decision) and built as a dict when read
# (PortBenchEnv.records). The row holds numbers, strings, arrays and tuples of numbers and strings only, at most
# one tuple deep: the garbage collector untracks such a row before it reaches its oldest generation, so an
# episode of records never triggers its full collections (speed only; measured in docs/performance.md).
#: the columns of a record row (invalid, coerced, status: dicts as _flat items); scoring on appends _SCORED_FIELDS,
#: then var, drawdown, drift, alerts (tuple), trigger of the risk report and of the truth's report (_report_fields)
_ROW_FIELDS = ("date", "regime", "n_available", "available", "turnover", "cost", "nav_after", "invalid", "coerced",
               "status", "w_hat", "w_pos")
_SCORED_FIELDS = ("scores", "ceps", "pas", "s3_values", "tau_hat", "tau_star")
_ROW_BASE = len(_ROW_FIELDS)
#: column of a record row by name (_ROW_FIELDS, then _SCORED_FIELDS, then "risk" and "risk_truth": 5 columns each)
_COL = {name: i for i, name in enumerate(_ROW_FIELDS + _SCORED_FIELDS)}
_COL["risk"] = len(_COL)
_COL["risk_truth"] = _COL["risk"] + 5


def _flat(d: dict) -> tuple:
    """``{k1: v1, k2: v2}`` → ``(k1, v1, k2, v2)`` (one tuple, no inner tuple)."""
    return tuple([x for kv in d.items() for x in kv]) if d else ()


def _unflat(t: tuple) -> dict:
    """The dict of a :func:`_flat` tuple."""
    return dict(zip(t[::2], t[1::2]))


def _report_fields(rep: RiskReport) -> tuple:
    """A :class:`RiskReport`'s fields (var, drawdown, drift, alerts as a tuple, trigger)."""
    return (rep.var, rep.drawdown, rep.drift, tuple(rep.alerts), rep.trigger)



@njit
def _clip(x, lo, hi, out):
    """``out[:] = np.clip(x, lo, hi)`` for 1-D float64 arrays: numpy's result (NaN kept, then ``lo if v < lo``,
    then ``hi if v > hi``; signed zeros as numpy's, :func:`~quantgym.envs.portbench.ceps.clip_float`)."""
    for i in range(x.shape[0]):
        v = x[i]
        if not np.isnan(v):
            v = lo if v < lo else v
            v = hi if v > hi else v
        out[i] = v


class PortBenchEnv(gym.Env):
    """
    ## Description
    PortBench (Zhao, Chen, Su; arXiv 2605.27887): a five-stage allocation pipeline run at every
    rebalance date of a historical period over a real 80-asset multi-asset universe (25 equity ETFs,
    15 bond ETFs, 16 commodity ETFs, 10 real-estate ETFs, 10 cryptocurrencies, 4 cash ETFs). At each
    decision date ``d`` the agent answers S1 market interpretation (a view in [-1, 1] per asset),
    S2 signal generation (buy/hold/sell per asset) and S3 weight optimisation (long-only weights);
    S4 execution and S5 risk monitoring are computed from the S3 weights. Every stage is scored
    against rule-based ground truth from the snapshot; CEPS combines the stage scores; the
    weights are traded in a NAV sandbox with costs. Spec: ``docs/spec/portbench.md`` (clean mode).

    ## Action Space
    ``Dict(views: Box(-1, 1, (N,)), signals: MultiDiscrete([3]*N) (0 sell, 1 hold, 2 buy),
    weights: Box(0, 1, (N,)), status: Discrete(3) (0 ok, 1 refused, 2 unparseable))``, float64,
    ``N`` = universe size in canonical order (80). With ``stagewise=True`` the S1 sub-step reads
    ``views``, S2 ``signals``, S3 ``weights`` (other keys are ignored); with ``stagewise=False`` one
    step reads all three. Entries of unavailable assets are ignored (weights on them are dropped).

    ## Observation Space
    ``Dict`` of float64 arrays (spec §11.2): ``returns`` (L, N) window oldest first (missing → 0),
    ``returns_mask`` (L, N), ``price``, ``trailing_return``, ``ann_vol`` (N,), ``corr`` (N, N)
    (NaN/unavailable → 0 off-diagonal), ``class_id`` (N,), ``available`` (N,), ``weights`` (N,) drifted
    current weights, ``nav`` (1,) = NAV / initial NAV, ``macro`` (17,) and ``macro_mask``, ``regime``
    (0 bull, 1 bear, 2 sideways, 3 crisis), ``stage`` (0 S1, 1 S2, 2 S3), ``prev_views``,
    ``prev_signals`` (the agent's previous sub-step answer), and ``prompt`` (the rendered stage
    prompt for LLM agents) when ``text_obs=True`` (default: ``text_obs = stagewise``).
    ``obs_keys`` (default: all of the above but ``prompt``) keeps only the named entries; an entry
    left out is never computed. ``corr`` is the one O(N²) entry: a pairwise-complete correlation
    (four (N×L)·(L×N) products), about 30 ms of CPU per decision date seen first at N = 1000, so an agent
    that does not read it runs a cold step about 10× faster without it (docs/performance.md). Scoring
    (the S3 correlation score) and the prompt still compute the correlations they need.

    ## Rewards
    ``reward="ceps"``: the decision date's CEPS on the S3 (or only) step, 0 on S1/S2 sub-steps.
    ``reward="log_return"``: ``ln(NAV_pre(d_{k+1}) / NAV_pre(d_k))`` (NAV after marking to market, before
    trading), so a step pays its own trading costs; the last step runs to the period's last day.

    ## Starting State
    NAV 1,000,000 at the close of the last trading day before the period start, held in equal weight
    over the assets available then (§6.1); ``reset`` simulates to the close of the first decision date.

    ## Episode End
    ``terminated=True`` on the step whose simulation reaches the period's last trading day;
    ``truncated`` is False (a time limit is the caller's choice), except for the paper-mode abort on an
    unparseable answer (``abort_on_parse_failure``: ``truncated=True``, ``info["aborted"]``).

    ## Arguments
    ``gym.make("PortBench-Balanced-v0", period="covid_2020", stagewise=True)``.

    - ``profile``: "conservative" | "balanced" | "aggressive" (set by the id).
    - ``period``: "normal_2024" (monthly), "china_2015", "covid_2020", "crypto_2022" (weekly), a repo alias,
      ``dict(start=..., end=..., freq="monthly"|"weekly"|"daily")``, or "live" /
      ``dict(name="live", days=12, as_of="YYYY-MM-DD")`` (§2.5: the last ``days`` trading days up to
      ``as_of``, daily, each decision on data through the previous close).
    - ``stagewise``: True = S1 → S2 → S3 sub-steps (the LLM protocol); False = one step per date.
    - ``config``: a :class:`PortBenchConfig`, everything below that is not the episode's choice (costs,
      scoring, paper switches, lookback, prompt style, ...). ``oracle``, ``fidelity``, ``alpha``, ``lam``,
      ``paper`` and ``prompt_style`` are shortcuts into it: None (default) keeps the config's value, a
      value replaces it, so ``PortBenchEnv(alpha=0.3)`` and
      ``PortBenchEnv(config=PortBenchConfig(scoring=PortBenchScoringConfig(alpha=0.3)))`` are the same env.
    - ``oracle``: "lookback" (default) | "ex_post" (diagnostic; uses future data, flagged in ``info``) |
      "equal_weight".
    - ``fidelity``: "clean" (default) | "paper" (spec Appendix A: every item of
      :class:`~quantgym.envs.portbench.paper.config.PaperFidelity` on, universe ``89_no_crypto``).
    - ``paper``: a :class:`PaperFidelity` (or dict of its flags) to switch single paper items on top of
      clean mode (overrides ``config.paper``); ``fidelity="paper"`` with ``paper`` given uses those flags.
    - ``alpha`` (0.5), ``lam`` (0.1): S3 mix and CEPS penalty. ``reward``: "ceps" | "log_return" (default:
      "ceps" with scoring on, "log_return" with ``scoring=False``; "ceps" without scoring is refused).
    - ``data``: None (bundled real data), a :class:`~quantgym.envs.portbench.data.PortBenchData` or a directory in the
      documented schema (docs/data.md). ``config``: a :class:`PortBenchConfig` (costs, lookback, ...).
    - ``scoring``: False skips S1–S5 scoring (direct allocation, as the classical baselines of §8 run).
    - ``text_provider``: optional callable ``(decision_date) -> str`` returning news strictly before ``d``.
    - ``prompt_style``: "full" | "compact" | "minimal" (:data:`quantgym.spaces.PROMPT_STYLES`; default: the
      config's, "full"): the rendering of the ``prompt`` field (stored as ``config.prompt_style``;
      ``info["prompt_style"]``). ``render_prompt(style=...)`` re-renders the current prompt in any style.
    - ``obs_keys``: None (default: every entry of :data:`OBS_KEYS`) or a subset of :data:`OBS_KEYS`; the
      observation (and ``observation_space``) holds these entries in :data:`OBS_KEYS` order (``prompt``
      follows ``text_obs``). E.g. ``obs_keys=[k for k in OBS_KEYS if k != "corr"]`` for an agent that
      does not read the (N, N) correlation matrix. An unknown key raises ``ValueError``.

    ## Costs & Execution
    Trades execute at the close of the decision date. Cost ``K = 0.0015·τ·NAV`` (10 bps slippage +
    5 bps commission on traded notional, ``τ = Σ|w^T − w^0|`` over ``|Δw| ≥ 1e-6``), charged to NAV once;
    executed weights = S3 weights (§4.4, §6.3). No leverage, no shorting, no lots. ``PortBenchCostModel.off()``
    switches costs off. Between decisions the weights drift with the daily returns (§6.2).

    ## Data & Point-in-time
    Real daily data 2014–2025 (Yahoo adjusted closes, FRED), NYSE calendar; crypto weekend returns are
    compounded into the next trading day, the crypto price of NYSE day t is the UTC close of t−1 (§11.7);
    macro series carry publication lags (§1.4). The observation at ``d`` is built from rows ≤ ``d`` only
    (a test replaces every later row with garbage). The ex-post oracle reads forward returns inside
    the scorer only and sets ``info["uses_future_data"]``.

    ## Scoring
    S1 = 1 − mean|v̂ − v*|/2 with v* = clip(R/10%, ±1); S2 = share of correct signals (±0.2 on v*);
    S3 = α·A + (1−α)·C (weight accuracy vs the 60-day max-Sharpe oracle on the truth buys, and the
    two-layer correlation score); S4 = turnover agreement with the truth's turnover; S5 = trigger
    agreement and VaR/drawdown errors; CEPS = clip(mean − λ·Σ drops); PAS per step. Invalid values
    (NaN, out-of-range views/weights, all-zero weights) and refusals get the §4.0 fallback and score 0,
    flagged in ``info["invalid"]``; the episode continues.

    ## Version History
    - v0: clean mode of spec portbench.md with §11 implementation decisions.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    task_name = "portbench"

    def __init__(
        self,
        profile: str = "balanced",
        period: str | dict = "normal_2024",
        stagewise: bool = False,
        oracle: str | None = None,
        fidelity: str | None = None,
        alpha: float | None = None,
        lam: float | None = None,
        reward: str | None = None,
        data: Any = None,
        config: PortBenchConfig | None = None,
        text_obs: bool | None = None,
        scoring: bool = True,
        text_provider: Callable[[pd.Timestamp], str] | None = None,
        render_mode: str | None = None,
        paper: PaperFidelity | dict | None = None,
        prompt_style: str | None = None,
        obs_keys: Sequence[str] | None = None,
    ):
        cfg = config or PortBenchConfig()
        # shortcuts into ``config`` (None: the config's value)
        fidelity = cfg.fidelity if fidelity is None else fidelity
        oracle = cfg.scoring.oracle if oracle is None else oracle
        alpha = cfg.scoring.alpha if alpha is None else alpha
        lam = cfg.scoring.lam if lam is None else lam
        if fidelity not in ("clean", "paper"):
            raise ValueError(f"fidelity must be 'clean' or 'paper', got {fidelity!r}")
        if reward is None:  # CEPS needs the scores: without scoring the default is the NAV's log return
            reward = "ceps" if scoring else "log_return"
        if reward not in ("ceps", "log_return"):
            raise ValueError(f"reward must be 'ceps' or 'log_return', got {reward!r}")
        if reward == "ceps" and not scoring:
            raise ValueError("reward='ceps' needs scoring=True (CEPS is the stage scores' summary; without them "
                             "every reward would be 0); use reward='log_return'")
        if oracle not in ("lookback", "ex_post", "equal_weight"):
            raise ValueError(f"oracle must be 'lookback', 'ex_post' or 'equal_weight', got {oracle!r}")
        if not (0.0 <= float(alpha) <= 1.0):
            raise ValueError(f"alpha (S3 mix of weight accuracy and correlation score) must be in [0, 1], got {alpha}")
        if not (float(lam) >= 0.0):
            raise ValueError(f"lam (CEPS drop penalty) must be >= 0, got {lam}")
        keys = OBS_KEYS if obs_keys is None else ((obs_keys,) if isinstance(obs_keys, str) else tuple(obs_keys))
        unknown = [k for k in keys if k not in OBS_KEYS]
        if unknown:
            raise ValueError(f"obs_keys: unknown {unknown} (the prompt follows text_obs); valid: {', '.join(OBS_KEYS)}")
        #: the observation's entries (``obs_keys``, in OBS_KEYS order)
        self.obs_keys: tuple[str, ...] = tuple(k for k in OBS_KEYS if k in keys)
        self._obs_dropped = tuple(k for k in OBS_KEYS if k not in keys)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if prompt_style is not None:
            cfg = cfg.replace(prompt_style=check_prompt_style(prompt_style))
        check_prompt_style(cfg.prompt_style)
        period = resolve_period(period)
        if paper is not None:  # single paper items on top of clean mode (Appendix A)
            cfg = cfg.replace(paper=PaperFidelity(**paper) if isinstance(paper, dict) else paper)
        if fidelity == "paper" and not cfg.paper.any:
            cfg = cfg.replace(paper=PaperFidelity.paper())
        cfg = cfg.replace(fidelity="paper" if cfg.paper.any else "clean",
                          scoring=dataclasses.replace(cfg.scoring, alpha=alpha, lam=lam, oracle=oracle))
        self.profile = get_profile(profile)
        if cfg.paper.any:
            from quantgym.envs.portbench.paper.simulator import paper_data_for

            self.data = paper_data_for(cfg.paper, None if data is None else as_portbench_data(data))
        else:
            self.data = as_portbench_data(data)
        if isinstance(period, LivePeriod):  # §2.5: daily decisions on data through the previous close
            period = resolve_live(period, self.data.dates)
            cfg = cfg.replace(as_of="previous_close")
        self.config = cfg
        self.period = period
        self.stagewise = bool(stagewise)
        self.reward_kind = reward
        self.scoring = bool(scoring)
        self.text_obs = self.stagewise if text_obs is None else bool(text_obs)
        self.text_provider = text_provider
        self.render_mode = render_mode
        if cfg.paper.any:  # paper snapshot flags (own-calendar windows, NaN correlations)
            from quantgym.envs.portbench.paper.simulator import make_view

            self.view = make_view(self.data, cfg)
        else:
            self.view = MarketView(self.data, cfg)
        n, lb, m = self.view.n_assets, cfg.lookback, len(MACRO_KEYS)
        self.n_assets = n
        if self.data.macro.shape[1] != m:
            raise ValueError(f"data.macro must have {m} columns (MACRO_KEYS), got {self.data.macro.shape[1]}")
        # validate the period against the data once (clear error at construction)
        self._new_simulator()

        f64 = np.float64
        obs = {
            "returns": spaces.Box(-1.0, 10.0, (lb, n), f64),
            "returns_mask": spaces.MultiBinary((lb, n)),
            "price": spaces.Box(0.0, 1e7, (n,), f64),
            "trailing_return": spaces.Box(-1.0, 1e3, (n,), f64),
            "ann_vol": spaces.Box(0.0, 1e3, (n,), f64),
            "corr": spaces.Box(-1.0, 1.0, (n, n), f64),
            "class_id": spaces.MultiDiscrete([len(ASSET_CLASSES)] * n),
            "available": spaces.MultiBinary(n),
            "weights": spaces.Box(0.0, 1.0, (n,), f64),
            "nav": spaces.Box(0.0, 1e3, (1,), f64),
            "macro": spaces.Box(-1e3, 1e3, (m,), f64),
            "macro_mask": spaces.MultiBinary(m),
            "regime": spaces.Discrete(len(REGIMES)),
            "stage": spaces.Discrete(3),
            "prev_views": spaces.Box(-1.0, 1.0, (n,), f64),
            "prev_signals": spaces.MultiDiscrete([3] * n),
        }
        obs = {k: v for k, v in obs.items() if k in self.obs_keys}
        if self.text_obs:
            obs["prompt"] = AnyText(max_length=262144)
        self.observation_space = spaces.Dict(obs)
        self.action_space = spaces.Dict({
            "views": spaces.Box(-1.0, 1.0, (n,), f64),
            "signals": spaces.MultiDiscrete([3] * n),
            "weights": spaces.Box(0.0, 1.0, (n,), f64),
            "status": spaces.Discrete(3),
        })
        self._profile_block = self.profile.prompt_block()
        self._ticker_array = np.array(self.view.tickers, dtype=object)
        self._uses_future_data = cfg.scoring.oracle == "ex_post" or cfg.paper.ex_post_s4s5
        # the echoes shown before an answer (read-only: observations hand them out without copying)
        self._zero_views = np.zeros(n)
        self._hold_signals = np.full(n, HOLD, dtype=np.int64)
        self._zero_views.flags.writeable = self._hold_signals.flags.writeable = False
        #: free-text notes a text wrapper may attach to the current stage (e.g. S1 regime, macro summary)
        self.stage_notes: dict[str, Any] = {}
        self.sim: PortfolioSimulator | None = None
        self.snapshot: MarketSnapshot | None = None
        self._obs_views = False  # the next observation may hand out the row arrays as views (see _obs)
        self._w_positive: np.ndarray | None = None  # the positive S3 weights of this step, when the kernel made them

    # ------------------------------------------------------------------------------ helpers
    def _initial_weights(self, row: int) -> np.ndarray:
        a = self.view.available_at(row)
        w = np.zeros(self.n_assets)
        if a.any():
            w[a] = 1.0 / a.sum()
        return w

    def _new_simulator(self) -> PortfolioSimulator:
        if self.config.paper.any:  # paper day loop (§6.1, §6.2, §2.1 paper mode)
            from quantgym.envs.portbench.paper.simulator import PaperSimulator

            sim = PaperSimulator(self.view.dates, self.view.returns0, self.period, self._initial_weights,
                                 self.config.costs, self.config.initial_nav, self.view.tickers, self.config.paper)
        else:
            sim = PortfolioSimulator(self.view.dates, self.view.returns0, self.period, self._initial_weights,
                                     self.config.costs, self.config.initial_nav, self.view.tickers)
        if sim.decision_rows.size == 0:
            raise ValueError(f"period {self.period.name} has no {self.period.freq} rebalance date in the data")
        return sim

    def _news(self, d: pd.Timestamp) -> str:
        text = self._profile_block
        if self.text_provider is not None:
            extra = self.text_provider(d) or ""
            if extra:
                text += "\n\n" + prompts.sanitize_news(extra)
        return text

    def _begin_decision(self) -> None:
        """Build the snapshot of the current decision row and its ground truth."""
        sim = self.sim
        t = sim.t
        self.nav_pre = sim.nav
        self.snapshot = self.view.snapshot(t, sim.weights, sim.nav / sim.initial_nav, self._news(self.view.dates[t])
                                           if self.text_provider is not None else self._profile_block)
        parts = self.view.row_cache(int(t))
        info = parts.get("row_info")
        if info is None:  # per-row constants of the info dict and the decision record
            snap = self.snapshot
            info = parts.put("row_info", {"date": str(snap.decision_date.date()),
                                          "n_available": int(snap.available.sum()),
                                          "available_tickers": tuple(self._ticker_array[snap.available].tolist())})
        self._row_info = info
        self._obs_row = self._row_observation(parts)
        self._obs_views = False  # set by a step that reaches this decision (see _obs)
        self.stage = 0
        self.prev_views = self._zero_views
        self.prev_signals = self._hold_signals
        self.step_scores: dict[str, float | None] = {}
        self.step_invalid: dict[str, str] = {}
        self.step_coerced: dict[str, str] = {}
        self.step_status: dict[str, int] = {}
        self.stage_notes = {}
        self._views = self._signals = None
        if self.scoring:
            snap, sc = self.snapshot, self.config.scoring
            key = ("truth", sc.view_scale, sc.signal_threshold)
            truth = parts.get(key)
            if truth is None:  # S1/S2 truth depend on the row only: cached per dataset, read-only (speed only)
                v_star = s1_truth(snap.trailing_return, snap.available, sc.view_scale)
                truth = parts.put(key, (v_star, s2_truth(v_star, sc.signal_threshold)))
            self.v_star, self.s_star = truth
            self.w_star_s45 = None
            self._w_star_key = None
            ew_mu = not self.config.paper.s3_solver_nonpositive_mu  # §11.9: clean mode EW when max μ ≤ 0
            if self.config.paper.ex_post_s4s5:  # paper (§4.4): S4/S5 truth from the ex-post oracle always
                with _single_thread_blas():
                    self.w_star_s45 = s3_truth(snap, self.s_star, "ex_post", self._forward_returns(),
                                               ew_if_nonpositive_mu=ew_mu)
            if sc.oracle == "ex_post":
                with _single_thread_blas():
                    self.w_star = s3_truth(snap, self.s_star, sc.oracle, self._forward_returns(),
                                           ew_if_nonpositive_mu=ew_mu)
            else:
                # lookback / equal-weight oracles depend on the row only: cached per dataset (speed only)
                key = ("w_star", sc.oracle, sc.view_scale, sc.signal_threshold, ew_mu)
                w_star = parts.get(key)
                if w_star is None:
                    with _single_thread_blas():
                        w_star = parts.put(key, s3_truth(snap, self.s_star, sc.oracle, None,
                                                         ew_if_nonpositive_mu=ew_mu))
                self.w_star = w_star
                self._w_star_key = key  # the truth's S5 report is cached with it (_star_report)

    def _forward_returns(self) -> np.ndarray:
        """Ex-post oracle data: returns in (d, next decision], at most 21/5/1 rows (§11.7). Scoring only."""
        sim = self.sim
        k = self.decision_k
        nxt = sim.decision_rows[k + 1] if k + 1 < sim.decision_rows.size else sim.last_row
        cap = self.config.scoring.ex_post_max_obs[self.period.freq]
        if self.config.paper.ex_post_from_d:  # paper (§4.3): starts at d, overlapping the lookback
            return self.view.returns[sim.t : sim.t + cap]
        hi = min(nxt, sim.t + cap)
        return self.view.returns[sim.t + 1 : hi + 1]

    # ------------------------------------------------------------------------------ observation
    def _obs(self) -> dict[str, Any]:
        # No two consecutive calls (nor two resets) share an array (Gymnasium's check_env): the first observation
        # of a decision reached by step() hands out the row's arrays as read-only views of the per-row cache
        # (writing raises; they cannot be made writeable), every other call (reset, stagewise sub-steps on the
        # same row, the final observation) gets copies. The portfolio entries are new arrays every call.
        snap = self.snapshot
        if self._obs_views:
            self._obs_views = False
            obs = dict(self._obs_row)
        else:
            obs = {k: v.copy() if v is not None and type(v) is not int else v for k, v in self._obs_row.items()}
        w = snap.current_weights
        obs["weights"] = clipped = np.empty(w.shape[0])
        _clip(w, 0.0, 1.0, clipped)
        obs["nav"] = np.array([min(max(snap.nav, 0.0), 1e3)])
        obs["stage"] = int(self.stage)
        obs["prev_views"] = self.prev_views.copy()
        obs["prev_signals"] = self.prev_signals.copy()
        for k in self._obs_dropped:  # obs_keys: a subset chosen (the row entries are left out already)
            obs.pop(k, None)
        if self.text_obs:
            obs["prompt"] = self.render_prompt()
        return obs

    def _row_observation(self, parts: dict | None = None) -> dict[str, Any]:
        """The row-dependent observation entries of the current decision (read-only arrays), in the order
        of the observation dict; the portfolio entries are placeholders filled by :meth:`_obs`. ``parts``: the
        row's cache (:meth:`MarketView.row_cache`), if at hand."""
        snap = self.snapshot
        if self.config.fidelity == "clean":  # cached per dataset and row (speed only)
            view, t = self.view, int(snap.t)
            parts = view.row_cache(t) if parts is None else parts
            template = parts.get("obs_template")
            if template is None:  # the O(N) entries in observation order, the large ones to fill in
                small = self._obs_small(snap)
                template = parts.put("obs_template", {k: small.get(k) for k in OBS_KEYS})
            row = template.copy()
            keys = self.obs_keys
            # views of the cached read-only arrays: an observation cannot make them writeable; an entry
            # left out by obs_keys stays None here (dropped by _obs) and is never computed
            if "returns" in keys or "returns_mask" in keys:
                row["returns"] = view.row_array(t, "obs_returns").view()
                row["returns_mask"] = view.row_array(t, "obs_mask").view()
            if "corr" in keys:  # the O(N²) entry: computed only when it is observed
                if self.scoring or self.text_obs or self.stagewise:  # the snapshot's corr is read too: both at once
                    view.row_array(t, "corr")
                row["corr"] = view.row_array(t, "obs_corr").view()
            return row
        row = self._obs_static(snap)
        return {k: row.get(k) for k in OBS_KEYS}

    def _obs_small(self, snap) -> dict[str, Any]:
        """The O(N) row-dependent observation entries (read-only arrays)."""
        out = {
            "price": np.clip(np.nan_to_num(snap.price, nan=0.0), 0.0, 1e7),
            "trailing_return": np.clip(snap.trailing_return, -1.0, 1e3),
            "ann_vol": np.clip(snap.ann_vol, 0.0, 1e3),
            "class_id": snap.class_id.copy(),
            "available": snap.available.astype(np.int8),
            "macro": np.clip(snap.macro, -1e3, 1e3),
            "macro_mask": snap.macro_mask.astype(np.int8),
            "regime": int(REGIMES.index(snap.regime)),
        }
        for k, v in out.items():
            if isinstance(v, np.ndarray):
                v.flags.writeable = False
                out[k] = v.view()  # handed out in observations: a view of a read-only array stays read-only
        return out

    def _obs_static(self, snap) -> dict[str, Any]:
        """Row-dependent observation arrays (everything but weights, NAV, stage and the echoes)."""
        ret, mask = obs_window(snap.returns, self.config.lookback)
        out = {"returns": ret, "returns_mask": mask, **self._obs_small(snap)}
        ret.flags.writeable = mask.flags.writeable = False
        out["returns"], out["returns_mask"] = ret.view(), mask.view()
        if "corr" in self.obs_keys:
            corr = obs_corr(snap.corr)
            corr.flags.writeable = False
            out["corr"] = corr.view()
        return out

    @property
    def prompt_style(self) -> str:
        """The env's own prompt style (``config.prompt_style``): the rendering of ``obs["prompt"]``."""
        return self.config.prompt_style

    def render_prompt(self, stage: int | None = None, style: str | None = None) -> str:
        """The text view of the current state for ``stage`` in ``style``.

        Parameters
        ----------
        stage : 0 (S1), 1 (S2), 2 (S3) or None (the current sub-step). A stage other than the current
            one renders with the current echoes (``prev_views``, ``prev_signals``, notes).
        style : one of :data:`quantgym.spaces.PROMPT_STYLES`, or None (the env's ``prompt_style``).

        Reads the state only: no env state, RNG or score changes. Raises ``RuntimeError`` before
        ``reset()`` and ``ValueError`` for an unknown style.
        """
        style = self.config.prompt_style if style is None else check_prompt_style(style)
        if self.snapshot is None:
            raise RuntimeError("call reset() before render_prompt()")
        stage = self.stage if stage is None else stage
        snap, cfg = self.snapshot, self.config
        # the row's blocks (header, assets, macro, correlations) are rendered once per dataset and decision row
        # and shared by S1/S3, the styles and every env over the same data (speed only; prompts.py docstring)
        cache = self.view.row_cache(int(snap.t))
        if stage == 0 or not self.stagewise:
            if cfg.paper.short_prompts:  # paper (§4.1): first 8 assets, 6×6 pairwise table
                return prompts.render_s1(snap, MACRO_KEYS, cfg.corr_table, max_assets=8, max_corr_assets=6,
                                         style=style, cache=cache, config=cfg)
            return prompts.render_s1(snap, MACRO_KEYS, cfg.corr_table, style=style, cache=cache, config=cfg)
        if stage == 1:
            if cfg.paper.s2_prompt_threshold:  # paper (§4.2): the prompt says ±0.15, truth uses ±0.2
                return prompts.render_s2(snap, self.prev_views, self.stage_notes, threshold=0.15, style=style,
                                         config=cfg)
            return prompts.render_s2(snap, self.prev_views, self.stage_notes, style=style, config=cfg)
        block = "" if cfg.paper.no_profile_in_s3 else self.profile.prompt_block()  # paper (§3.1): no profile
        return prompts.render_s3(snap, self.prev_signals, block, cfg.initial_nav,
                                 self.stage_notes.get("strengths"), cfg.corr_table, style=style, cache=cache,
                                 config=cfg)

    def _base_info(self) -> dict[str, Any]:
        status = self.step_status.values()
        return {
            "date": self._row_info["date"],
            "decision_index": self.decision_k,
            "n_decisions": int(self.sim.decision_rows.size),
            "stage": STAGES[self.stage] if self.stagewise else "all",
            "stage_scores": dict(self.step_scores),
            "invalid": dict(self.step_invalid),
            "coerced": dict(self.step_coerced),
            "refused": STATUS_REFUSED in status,
            "unparseable": STATUS_UNPARSEABLE in status,
            "nav": float(self.sim.nav),
            "uses_future_data": self._uses_future_data,
            "n_available": self._row_info["n_available"],
            "prompt_style": self.config.prompt_style,
        }

    # ------------------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        with _single_thread_blas():
            return self._reset(seed=seed, options=options)

    def _reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.sim = self._new_simulator()
        self._aborted = False
        self.decision_k = 0
        self._steps: list[tuple] = []  # one flat row per traded decision (see _finish_decision)
        self._records: list[dict] = []  # their dicts, built when read (records)
        self.sim.advance_to(int(self.sim.decision_rows[0]))
        self._begin_decision()
        return self._obs(), self._base_info()

    def _check_action(self, action: Any, needed: tuple[str, ...]) -> dict[str, np.ndarray]:
        """Structural validation (§11.4): wrong key, shape or dtype → ValueError naming the field."""
        if not isinstance(action, dict):
            raise InvalidActionError(
                f"action must be a dict with keys {ACTION_KEYS} (views (N,), signals (N,), weights (N,), status int); "
                f"got {type(action).__name__}. Text answers go through quantgym.envs.portbench.text_protocol.TextStageAction."
            )
        if not _ACTION_KEYSET.issuperset(action):
            extra = set(action) - _ACTION_KEYSET
            raise InvalidActionError(f"unknown action key(s) {sorted(extra)}; expected keys {ACTION_KEYS}")
        out: dict[str, np.ndarray] = {}
        n = self.n_assets
        for key in needed:
            if key not in action:
                raise InvalidActionError(f"action is missing key {key!r} (expected shape ({n},)) for stage "
                                 f"{STAGES[self.stage] if self.stagewise else 'S1-S3'}")
            arr = np.asarray(action[key])
            if arr.dtype.kind not in "fiub":
                raise InvalidActionError(f"action[{key!r}] must be numeric with shape ({n},), got dtype {arr.dtype}")
            if arr.shape != (n,):
                raise InvalidActionError(f"action[{key!r}] must have shape ({n},), got {arr.shape}")
            # never stored or written (processing makes new arrays); integer signals stay integers (same values)
            out[key] = arr if key == "signals" and arr.dtype.kind in "iu" else arr.astype(np.float64, copy=False)
        status = action.get("status", 0)
        if type(status) is int and 0 <= status <= 2:  # fast path of the check below
            out["status"] = status
            return out
        st = np.asarray(status)
        if st.shape not in ((), (1,)) or st.dtype.kind not in "iub" or int(st.reshape(-1)[0]) not in (0, 1, 2):
            raise InvalidActionError(f"action['status'] must be an int in {{0 ok, 1 refused, 2 unparseable}}, got {status!r}")
        out["status"] = int(st.reshape(-1)[0])
        return out

    def _flag(self, stage: str, status: int, message: str | None) -> None:
        self.step_status[stage] = status
        if message:
            self.step_invalid[stage] = message

    def _process_views(self, views: np.ndarray, status: int) -> np.ndarray:
        snap = self.snapshot
        if status != STATUS_OK:
            self._flag("S1", status, "refused" if status == STATUS_REFUSED else "unparseable answer")
            return np.zeros(self.n_assets)
        a = snap.available
        if np.abs(views).max() <= 1.0:  # fast path: every view finite and in [-1, 1] (NaN fails the test)
            self.step_status["S1"] = STATUS_OK
            return np.where(a, views, 0.0)
        if not np.isfinite(views).all():
            self._flag("S1", status, "views contain NaN or inf: fallback all views 0, S1 score 0")
            return np.zeros(self.n_assets)
        out_of_range = (np.abs(views) > 1.0) & a
        if out_of_range.any():
            bad = [snap.tickers[i] for i in np.flatnonzero(out_of_range)][:5]
            self._flag("S1", status, f"views outside [-1, 1] for {bad}: fallback all views 0, S1 score 0")
            return np.zeros(self.n_assets)
        self.step_status["S1"] = STATUS_OK
        return np.where(a, views, 0.0)

    def _process_signals(self, signals: np.ndarray, status: int) -> np.ndarray:
        hold = np.full(self.n_assets, HOLD, dtype=np.int64)
        if status != STATUS_OK:
            self._flag("S2", status, "refused" if status == STATUS_REFUSED else "unparseable answer")
            return hold
        if signals.dtype.kind in "iub" and signals.min() >= 0 and signals.max() <= 2:  # fast path: integer codes
            ok = True
        else:  # 0, 1 or 2 on every available asset (NaN fails every comparison)
            ok = ((signals == 0) | (signals == 1) | (signals == 2) | ~self.snapshot.available).all()
        if not ok:
            self._flag("S2", status, "signals must be 0 (sell), 1 (hold) or 2 (buy): fallback all hold, S2 score 0")
            return hold
        self.step_status["S2"] = STATUS_OK
        return np.where(self.snapshot.available, signals, HOLD).astype(np.int64)

    def _fallback_weights(self) -> np.ndarray:
        """S3 fallback (§11.6): current weights with non-available assets set to 0, renormalised."""
        return fallback_weights(self.snapshot.current_weights, self.snapshot.available)

    def _process_weights(self, weights: np.ndarray, status: int) -> tuple[np.ndarray, bool]:
        a = self.snapshot.available
        if status != STATUS_OK:
            self._flag("S3", status, "refused" if status == STATUS_REFUSED else "unparseable answer")
            return self._fallback_weights(), False
        if not (weights.min() >= 0.0 and weights.max() <= 1.0):  # NaN fails the test
            if not np.isfinite(weights).all():
                self._flag("S3", status, "weights contain NaN or inf: fallback current weights, S3 score 0")
            else:
                self._flag("S3", status, "weights outside [0, 1]: fallback current weights, S3 score 0")
            return self._fallback_weights(), False
        w = np.where(a, weights, 0.0)  # weight on an unavailable asset is dropped (§11.4)
        tot = w.sum()
        if tot <= 0 and self.config.paper.s3_all_zero_equal_signals:  # paper (§11.4): EW over signal assets
            self.step_status["S3"] = STATUS_OK
            return np.round(a / a.sum(), 4) if a.any() else w, True
        if tot <= 0:
            self._flag("S3", status, "all weights on the available assets are zero: fallback current weights, "
                                     "S3 score 0")
            return self._fallback_weights(), False
        self.step_status["S3"] = STATUS_OK
        # weight on unavailable assets (0 when every asset is available)
        dropped = float(np.where(a, 0.0, weights).sum()) if self._row_info["n_available"] < a.size else 0.0
        self._coerce_note(dropped, tot)
        return (w / tot).round(4), True

    def step(self, action: Any):
        # the oracle's many tiny BLAS calls run single-threaded (optimize._single_thread_blas, in
        # _begin_decision; the row arrays in MarketView): speed only, the same numbers
        return self._step(action)

    def _step(self, action: Any):
        if self.sim is None:
            raise RuntimeError("call reset() before step()")
        if getattr(self, "_aborted", False):
            raise RuntimeError("episode was aborted (paper mode, unparseable answer); call reset()")
        if self.sim.done and self.stage == 0 and getattr(self, "_terminated", False):
            raise RuntimeError("episode has terminated; call reset()")
        if self.stagewise:
            needed = (("views",), ("signals",), ("weights",))[self.stage]
        else:
            needed = ("views", "signals", "weights")
        act = self._check_action(action, needed)
        status = int(act["status"])
        if status == STATUS_UNPARSEABLE and self.config.paper.abort_on_parse_failure:
            return self._abort()
        if not self.stagewise and status == STATUS_OK and act["signals"].dtype == np.int64:
            w_hat = self._answers_fast(act)
            if w_hat is not None:
                return self._finish_decision(w_hat, True)
        snap = self.snapshot
        if "views" in needed:
            views = self._process_views(act["views"], status)
            if self.scoring:
                self.step_scores["S1"] = 0.0 if "S1" in self.step_invalid else s1_score(views, self.v_star, snap.available)
            views.flags.writeable = False  # handed out as obs["prev_views"]
            self.prev_views = views
            if self.stagewise:
                self.stage = 1
                return self._obs(), 0.0, False, False, self._base_info()
        if "signals" in needed:
            signals = self._process_signals(act["signals"], status)
            if self.scoring:
                self.step_scores["S2"] = 0.0 if "S2" in self.step_invalid else s2_score(signals, self.s_star, snap.available)
            signals.flags.writeable = False  # handed out as obs["prev_signals"]
            self.prev_signals = signals
            if self.stagewise:
                self.stage = 2
                return self._obs(), 0.0, False, False, self._base_info()
        weights, valid = self._process_weights(act["weights"], status)
        return self._finish_decision(weights, valid)

    def _answers_fast(self, act: dict[str, np.ndarray]) -> np.ndarray | None:
        """One allocation step's three answers when all pass the fast checks (views in [-1, 1], integer
        signals in {0, 1, 2}, weights in [0, 1] not all zero on ``A_d``): the same state, scores and S3
        weights as ``_process_views`` / ``_process_signals`` / ``_process_weights``, in one kernel call
        (:func:`_check_answers`; speed only). None: run those (an answer needs a fallback or a message)."""
        snap = self.snapshot
        # the processed views/signals are only read by S1/S2 scoring and the final observation's echoes
        echo = self.scoring or self.decision_k + 1 >= self.sim.decision_rows.size
        n = self.n_assets
        w_out = np.empty(2 * n)
        views, signals = (np.empty(n), np.empty(n, dtype=np.int64)) if echo else (_NO_F, _NO_I)
        ok, tot, dropped, n_pos = _check_answers(act["views"], act["signals"], act["weights"], snap.available, w_out,
                                         views, signals)
        if not (ok and tot > 0):
            return None
        w_hat, w_pos = w_out[:n], w_out[n : n + n_pos]
        status = self.step_status
        status["S1"] = STATUS_OK
        if self.scoring:  # s1_score and s2_score, their means in one kernel
            k, mae, share = _s12_parts(
                views, self.v_star, signals, self.s_star, snap.available)
            self.step_scores["S1"] = clip_float(1.0 - mae / 2.0, 0.0, 1.0) if k else 1.0
        status["S2"] = STATUS_OK
        if self.scoring:
            self.step_scores["S2"] = share if k else 1.0
        if echo:
            views.flags.writeable = signals.flags.writeable = False  # handed out as obs["prev_views"/"prev_signals"]
            self.prev_views, self.prev_signals = views, signals
        status["S3"] = STATUS_OK
        self._w_positive = w_pos
        if dropped > 0 or abs(tot - 1.0) > WEIGHT_SUM_TOLERANCE:
            self._coerce_note(dropped, tot)
        return w_hat

    def _coerce_note(self, dropped: float, tot: float) -> None:
        """The recorded S3 coercions (not invalid; spec §4.3, §11.4): weight on unavailable assets dropped,
        weights renormalised to sum 1."""
        notes = []
        if dropped > 0:
            notes.append(f"weight {dropped:.6g} on unavailable assets dropped (§11.4)")
        if abs(tot - 1.0) > WEIGHT_SUM_TOLERANCE:
            notes.append(f"weights on the available assets summed to {tot:.6g}; normalised to 1 (§4.3)")
        if notes:
            self.step_coerced["S3"] = "; ".join(notes)

    def _abort(self):
        """Paper mode (§4.0, §11.3): an unparseable answer aborts the run (truncated, no trade)."""
        stage = STAGES[self.stage] if self.stagewise else "all"
        self._flag(stage if stage != "all" else "S1", STATUS_UNPARSEABLE, "unparseable answer: run aborted (paper mode)")
        self._terminated = self._aborted = True
        info = self._base_info()
        info.update({"aborted": True, "episode_metrics": self.episode_metrics()})
        self.stage = 0
        return self._obs(), 0.0, False, True, info

    def _executed(self, w: np.ndarray, tau: float, rate: float) -> np.ndarray:
        """Executed weights (§4.4): clean = ``w``; paper ``cash_cost_drag``: the cash key (first ticker
        containing ``BIL``, else the first cash asset) reduced by ``K/NAV = rate·τ`` (floored at 0), round 4."""
        if not (self.config.paper.cash_cost_drag and self.scoring):  # direct allocation bypasses S4 (§4.6)
            return w
        return cash_cost_drag(w, tau, rate, cash_key(self.view.tickers, self.view.classes))

    def _finish_decision(self, w_hat: np.ndarray, valid: bool):
        snap, sim, sc = self.snapshot, self.sim, self.config.scoring
        w0 = snap.current_weights
        ceps_val = scored = None
        pf = self.config.paper
        if self.scoring:
            tau_hat = turnover(w_hat, w0, self.config.costs.min_trade)
            w_exec = self._executed(w_hat, tau_hat, self.config.costs.rate)
            s3 = s3_score(w_hat, self.w_star, snap, sc.alpha)
            self.step_scores["S3"] = s3["score"] if valid else 0.0
            w_truth = self.w_star if self.w_star_s45 is None else self.w_star_s45
            tau_star = turnover(w_truth, w0, self.config.costs.min_trade)
            self.step_scores["S4"] = s4_score(tau_hat, tau_star)
            star_exec = self._executed(w_truth, tau_star, self.config.costs.commission_bps / 1e4)
            rep_hat = risk_report(w_exec, snap, self.profile, sc, include_start=not pf.mdd_no_start_peak)
            rep_star = self._star_report(star_exec, snap, sc, not pf.mdd_no_start_peak)
            self.step_scores["S5"] = s5_score(rep_hat, rep_star)
            ceps_val = ceps_fn([self.step_scores.get(s) for s in ("S1", "S2", "S3", "S4", "S5")], sc.lam)
            pas = pas_step(w_hat, snap.classes, rep_hat.var, self.profile,
                           PAS_EQUITY_CLASSES_PAPER if pf.pas_real_estate else PAS_EQUITY_CLASSES_CLEAN)
            scored = (_flat(self.step_scores), ceps_val, pas, tuple([s3[k] for k in _S3_PARTS]), tau_hat, tau_star,
                      *_report_fields(rep_hat), *_report_fields(rep_star))
        else:  # direct allocation: executed weights = S3 weights (§4.6), no S4 turnover needed
            w_exec = w_hat
        # trade at d's close, then mark to market up to the next decision date (or the period end)
        terminated = self.decision_k + 1 >= sim.decision_rows.size
        trade = sim.trade_and_advance(w_exec, sim.last_row if terminated else int(sim.decision_rows[self.decision_k + 1]))
        w_pos, self._w_positive = self._w_positive, None
        row_info = self._row_info
        # the decision's record as a flat row (columns: _COL), its dict built when the records are read (speed
        # only: the garbage collector untracks the row, and an agent that never reads the records does not build,
        # keep and free a record dict and a weights dict per decision); w_hat and w_pos are never written
        row = (row_info["date"], snap.regime, row_info["n_available"], row_info["available_tickers"], trade.turnover,
               trade.cost, trade.nav_after, _flat(self.step_invalid), _flat(self.step_coerced),
               _flat(self.step_status), w_hat, w_pos)
        self._steps.append(row if scored is None else row + scored)
        info = self._base_info()
        info["turnover"], info["cost"] = trade.turnover, trade.cost
        # the executed target weights of this decision (non-zero entries, by ticker): evaluate() keeps them
        # in each step record of results.json beside turnover and cost
        # (a TickerWeights mapping: the dict is built when read)
        info["weights"] = (TickerWeights(w_hat, self._ticker_array, w_pos, row_info["available_tickers"])
                           if w_exec is w_hat else TickerWeights(w_exec, self._ticker_array))
        info["orders"] = trade.orders  # an Orders sequence (arrays; order dicts built when read)
        if self.scoring:
            info.update({"ceps": ceps_val, "pas": pas, "tau": tau_hat, "tau_star": tau_star,
                         "var": rep_hat.var, "drawdown": rep_hat.drawdown, "drift": rep_hat.drift,
                         "alerts": list(rep_hat.alerts), "trigger": rep_hat.trigger})
        nav_pre = self.nav_pre
        self.decision_k += 1
        if self.reward_kind == "ceps":
            reward = float(ceps_val) if ceps_val is not None else 0.0
        else:
            reward = float(math.log(sim.nav / nav_pre)) if nav_pre > 0 and sim.nav > 0 else 0.0
        info["nav"] = float(sim.nav)
        if terminated:
            self._terminated = True
            info["episode_metrics"] = self.episode_metrics()
            info.update({k: info["episode_metrics"][k] for k in ("dd_within_tolerance",)})
            self.stage = 0
            obs = self._obs()  # final observation: the last snapshot (no new decision)
        else:
            self._terminated = False
            self._begin_decision()
            self._obs_views = True  # a new decision row: its arrays as read-only views (see _obs)
            obs = self._obs()
        return obs, reward, terminated, False, info

    @property
    def records(self) -> list[dict]:
        """One dict per traded decision of the current episode, oldest first: ``date``, ``regime``,
        ``n_available``, the scores (scoring on: ``stage_scores``, ``ceps``, ``pas``, ``s3_parts``, ``tau_hat``,
        ``tau_star``, ``risk``, ``risk_truth``), ``turnover``, ``cost``, ``nav_after_trade``, ``invalid``,
        ``coerced``, ``status`` and ``weights`` (``{ticker: S3 weight}`` of the positive weights). The same list
        object for the whole episode (a new one after ``reset``), brought up to date on each read."""
        recs, steps = self._records, self._steps
        for i in range(len(recs), len(steps)):
            row = steps[i]
            date, regime, n_avail, avail, tau, cost, nav, invalid, coerced, status, w, w_pos = row[:_ROW_BASE]
            rec: dict[str, Any] = {"date": date, "regime": regime, "n_available": n_avail}
            if len(row) > _ROW_BASE:  # scoring on
                scores, ceps_val, pas, s3_vals, tau_hat, tau_star = row[_ROW_BASE : _COL["risk"]]
                rec.update({"stage_scores": _unflat(scores), "ceps": ceps_val, "pas": pas,
                            "s3_parts": dict(zip(_S3_PARTS, s3_vals)), "tau_hat": tau_hat, "tau_star": tau_star,
                            "risk": RiskReport(*row[_COL["risk"] : _COL["risk_truth"]]).as_dict(),
                            "risk_truth": RiskReport(*row[_COL["risk_truth"] :]).as_dict()})
            rec.update({"turnover": tau, "cost": cost, "nav_after_trade": nav, "invalid": _unflat(invalid),
                        "coerced": _unflat(coerced), "status": _unflat(status),
                        "weights": by_ticker(w, self._ticker_array, w_pos, avail)})
            recs.append(rec)
        return recs

    def _star_report(self, w: np.ndarray, snap: MarketSnapshot, sc, include_start: bool) -> RiskReport:
        """S5 report of the truth's executed weights ``w``. When ``w`` is the row's cached oracle weights (a
        lookback or equal-weight oracle, no paper S4/S5 truth, no cash drag), the report depends on the row, the
        profile's limits and the config only, so it is cached with them (speed only; the same report)."""
        key = self._w_star_key
        if key is None or w is not self.w_star or self.w_star_s45 is not None:
            return risk_report(w, snap, self.profile, sc, include_start=include_start)
        key = ("rep_star", *key, self.profile.var_limit, self.profile.max_drawdown, sc.s5_min_obs, sc.drift_limit,
               include_start)
        return self.view.row_cache(int(snap.t)).value(
            key, lambda: risk_report(w, snap, self.profile, sc, include_start=include_start))

    # ------------------------------------------------------------------------------ results
    def episode_metrics(self) -> dict[str, Any]:
        """§6.6/§7 metrics of the episode so far (financial metrics, mean scores, gate diagnostics)."""
        sim = self.sim
        r = sim.daily_returns()
        perf = performance_summary(r, include_start=not self.config.paper.mdd_no_start_peak, rf=self.config.rf)
        out: dict[str, Any] = dict(perf)
        mdd = perf["max_drawdown"]
        tol = self.profile.max_drawdown
        out.update({
            "ret_pct": 100 * perf["total_return"], "maxdd_pct": 100 * mdd, "vol_pct": 100 * perf["volatility"],
            "total_cost": sim.total_cost, "n_rebalances": sim.n_trades,
            "final_nav": sim.nav, "dd_within_tolerance": within_tolerance(mdd, tol),
            "dd_score": max(0.0, 1.0 - abs(mdd) / tol), "is_stress_period": self.period.name in STRESS_PERIODS,
            "profile": self.profile.name, "period": self.period.name,
        })
        steps = self._steps if self.scoring else []  # the record rows (not .records: no dicts built)
        if steps:
            c = _COL
            scores = [_unflat(r[c["scores"]]) for r in steps]
            stage_means = {s: float(np.mean([sc[s] for sc in scores])) for s in ("S1", "S2", "S3", "S4", "S5")}
            ceps_vals = [r[c["ceps"]] for r in steps]
            ratios = [r[c["tau_hat"]] / r[c["tau_star"]] for r in steps if r[c["tau_star"]] > 0]
            refused = sum(1 for r in steps if STATUS_REFUSED in r[c["status"]][1::2])
            out.update({
                "stage_means": stage_means, "ceps": float(np.mean(ceps_vals)), "ceps_tier": ceps_tier(float(np.mean(ceps_vals))),
                "pas": float(np.mean([r[c["pas"]] for r in steps])),
                "turnover_ratio": float(np.mean(ratios)) if ratios else None,
                "refused_steps": refused, "refused_rate": refused / len(steps),
                "invalid_steps": sum(1 for r in steps if r[c["invalid"]]),
            })
        else:
            out.update({"stage_means": None, "ceps": None, "ceps_tier": None, "pas": None})
        return out

    def nav_series(self) -> pd.Series:
        """NAV curve (currency units) of the current episode."""
        return self.sim.nav_series()

    def episode_result(self) -> dict[str, Any]:
        """The episode for :func:`quantgym.evaluation.evaluate` (protocol ``Evaluable``): :meth:`episode_metrics`,
        per-stage means, CEPS, the NAV curve, profile and period."""
        m = self.episode_metrics()
        return {"metrics": m, "stage_scores": m.get("stage_means"), "ceps": m.get("ceps"), "nav": self.nav_series(),
                "profile": self.profile.name, "period": self.period.name}

    def render(self):
        if self.render_mode != "ansi" or self.snapshot is None:
            return None
        s = self.snapshot
        top = np.argsort(-s.current_weights)[:5]
        hold = ", ".join(f"{s.tickers[i]} {s.current_weights[i]:.1%}" for i in top)
        return (f"{s.decision_date.date()} stage={STAGES[self.stage]} regime={s.regime} "
                f"NAV={self.sim.nav:,.0f} top weights: {hold}")


__all__ = ["PortBenchEnv", "STATUS_OK", "STATUS_REFUSED", "STATUS_UNPARSEABLE", "SIGNAL_NAMES", "BUY"]
