"""The six classical PortBench baselines (spec ``portbench.md`` §8) as policies.

Each baseline reads the same snapshot window as the agent (60 return rows through the
close of ``d``; ``observation["returns"]`` with ``returns_mask``), allocates over the
available assets, trades at the same dates with the same costs, and bypasses the
S1–S5 pipeline (``direct_allocation = True``: no stage scores, CEPS or PAS, §4.6).
Outputs are rounded to 6 decimals (all but EqW renormalised first).

ERC and minimum variance use skfolio (``RiskBudgeting`` and ``MeanRisk``, variance,
long-only, fully invested); the covariance ``Σ = 252·cov + 1e−4·mean(diag)·I`` is
obtained with skfolio's ``ShrunkCovariance(shrinkage=1e−4/(1+1e−4))``, which is
proportional to it and therefore gives the same weights. Black–Litterman follows §8.6
with numpy/scipy (§11.9: no library's BL prior matches it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from quantgym.envs.portbench.optimize import _max_sharpe_slsqp, max_sharpe, single_thread_blas

RIDGE = 1e-4
#: §8.6 paper-mode readings (``PaperFidelity.bl_reading``): He–Litterman's τ and the textbook risk aversion δ
BL_TAU_HE_LITTERMAN = 0.025
BL_DELTA = 2.5
MIN_OBS = 20
SIXTY_FORTY_EQUITY = ("SPY", "QQQ", "IWM", "VTI", "EEM", "ACWI")
SIXTY_FORTY_BONDS = ("TLT", "IEF", "BIL", "LQD", "HYG")
#: the two legs of §8.2, by name
SIXTY_FORTY_LEGS = {"bond": SIXTY_FORTY_BONDS, "equity": SIXTY_FORTY_EQUITY}


def _window(obs: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(returns with NaN for missing (L, N), valid mask, available (N,) bool) from an observation."""
    mask = np.asarray(obs["returns_mask"], dtype=bool)
    r = np.where(mask, np.asarray(obs["returns"], dtype=np.float64), np.nan)
    return r, mask, np.asarray(obs["available"], dtype=bool)


def _action(obs: dict, weights: np.ndarray) -> dict[str, Any]:
    n = weights.size
    return {"views": np.zeros(n), "signals": np.ones(n, dtype=np.int64), "weights": weights, "status": 0}


def _finish(weights: np.ndarray, renormalise: bool = True) -> np.ndarray:
    w = np.clip(weights, 0.0, None)
    if renormalise and w.sum() > 0:
        w = w / w.sum()
    return np.round(w, 6)


def _equal(n: int, idx: np.ndarray) -> np.ndarray:
    w = np.zeros(n)
    if idx.size:
        w[idx] = 1.0 / idx.size
    return w


def _shrunk_prior():
    from skfolio.moments import ShrunkCovariance
    from skfolio.prior import EmpiricalPrior

    return EmpiricalPrior(covariance_estimator=ShrunkCovariance(shrinkage=RIDGE / (1.0 + RIDGE)))


def _fit_skfolio(model, x: np.ndarray, idx: np.ndarray, n: int, notes: list[str] | None = None) -> np.ndarray:
    """Fit a skfolio estimator on the joined window ``x`` of assets ``idx``; equal weight on failure
    (the documented fallback, §8.4/§8.5), with the reason appended to ``notes`` (recorded per step)."""
    w = np.zeros(n)
    try:
        w[idx] = model.fit(x).weights_
    except Exception as exc:  # solver failure -> equal weight, recorded
        if notes is not None:
            notes.append(f"solver failed ({type(exc).__name__}: {' '.join(str(exc).split())[:160]}); equal weight")
        return _finish(_equal(n, idx))
    return _finish(w)


def erc_polish(x: np.ndarray, w0: np.ndarray, max_iter: int = 50) -> tuple[np.ndarray, str | None]:
    """Polish an equal-risk-contribution solution to machine precision (Newton's method).

    The ERC weights are the unique minimiser, rescaled to sum 1, of Spinu's strictly convex
    ``f(y) = ½ yᵀΣy − (1/n) Σᵢ log yᵢ`` (F. Spinu, "An algorithm for computing risk parity weights",
    2013): at the minimum ``yᵢ (Σy)ᵢ = 1/n`` for every i. A conic solver (skfolio's ``RiskBudgeting``
    through cvxpy/Clarabel) stops at its tolerance, about 1e−6 in the weights, and where it stops
    depends on the machine's floating-point kernels; the 6-decimal rounding of the baselines then
    flips, and the Sharpe ratios of the baseline moved in the fourth digit between two CPUs. A few
    damped Newton steps from the solver's answer reach the exact optimum (risk contributions equal to
    about 1e−15), so the baseline is the same on every machine.

    Parameters
    ----------
    x : (T, n) inner-joined daily returns; ``Σ = cov(x) + 1e−4·mean(diag)·I`` (spec §8.4; any
        positive scale gives the same weights).
    w0 : (n,) starting weights (the solver's answer; entries ≤ 0 are lifted to a small positive value).

    Returns
    -------
    (weights (n,) summing to 1, None) on convergence; ``(w0, reason)`` when Newton did not converge
    (the caller records the reason and keeps the solver's answer).
    """
    n = x.shape[1]
    cov = np.cov(x, rowvar=False, ddof=1).reshape(n, n)
    sigma = cov + RIDGE * np.mean(np.diag(cov)) * np.eye(n)
    b = 1.0 / n
    y = np.maximum(np.asarray(w0, dtype=np.float64), 1e-12)
    y = y / np.sqrt(y @ sigma @ y)  # the scale at which Σ yᵢ(Σy)ᵢ = Σ bᵢ = 1

    def f(v: np.ndarray) -> float:
        return 0.5 * v @ sigma @ v - b * np.log(v).sum()

    for _ in range(max_iter):
        g = sigma @ y - b / y
        step = np.linalg.solve(sigma + np.diag(b / (y * y)), g)
        dec = float(g @ step)  # Newton decrement squared: f(y) − min f ≈ dec / 2
        if not np.isfinite(dec):
            break
        if np.max(np.abs(step) / y) < 1e-15:  # converged to the last bits
            return y / y.sum(), None
        t = 1.0
        if dec > 1e-10:  # far from the optimum: backtracking (Armijo); near it, full steps converge quadratically
            fy = f(y)
            while t > 1e-12 and not (np.all(y - t * step > 0) and f(y - t * step) <= fy - 0.25 * t * dec):
                t *= 0.5
        while not np.all(y - t * step > 0):
            t *= 0.5
        y = y - t * step
        if dec < 1e-30:
            return y / y.sum(), None
    return np.asarray(w0, dtype=np.float64), f"ERC Newton polish did not converge in {max_iter} steps; solver answer kept"


def _risk_data(r: np.ndarray, avail: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """§8.4 data preparation: assets with ≥ 20 observations, inner-joined rows (≥ 20 needed).

    Returns (asset indices, joined returns or None when equal weight applies)."""
    ok = np.flatnonzero(avail & (np.isfinite(r).sum(axis=0) >= MIN_OBS))
    if ok.size < 2:
        return np.flatnonzero(avail), None
    x = r[:, ok]
    x = x[np.isfinite(x).all(axis=1)]
    if x.shape[0] < MIN_OBS:
        return np.flatnonzero(avail), None
    return ok, x


class _Baseline:
    #: display name (tables, plots, results.json ``agent``)
    name = "baseline"
    #: the CLI key (``bench --agents``, ``eval --agent``; summary.csv's ``agent`` column); None
    #: for a user's subclass, which is then written under its ``name``
    key: str | None = None
    direct_allocation = True
    #: env kwargs a baseline needs (merged under the caller's by :func:`quantgym.evaluation.evaluate`): it
    #: bypasses the S1–S5 pipeline (§4.6), so the env is built without stage scoring
    env_kwargs = {"scoring": False}
    tickers: tuple[str, ...] = ()
    #: paper-mode switches (``PortBenchConfig.paper``; None = clean mode), set by :meth:`reset`
    paper = None

    def __init__(self) -> None:
        self._notes: list[str] = []

    def reset(self, env) -> None:
        self.tickers = tuple(env.unwrapped.view.tickers)
        self.paper = getattr(env.unwrapped.config, "paper", None)
        self._notes = []

    def act(self, obs: dict, info: dict) -> dict[str, Any]:
        self._notes = []
        r, mask, avail = _window(obs)
        return _action(obs, self.allocate(r, avail))

    def step_record(self) -> dict[str, Any] | None:
        """What the baseline itself did at this step, merged into the step's record by
        :func:`quantgym.evaluation.evaluate`: ``{"fallback": reason}`` when its optimiser failed and it
        fell back to equal weight (never silent), else None."""
        notes = getattr(self, "_notes", None)
        return {"fallback": "; ".join(notes)} if notes else None

    def allocate(self, r: np.ndarray, avail: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class EqualWeight(_Baseline):
    """§8.1: ``w_i = 1/n`` over the available assets, rebalanced back at every date."""

    name = "Equal-Weight"
    key = "equal_weight"

    def allocate(self, r, avail):
        if self.paper is not None and self.paper.eqw_all_assets:  # paper mode (§8.1): every universe asset
            return _finish(_equal(avail.size, np.arange(avail.size)), renormalise=False)
        return _finish(_equal(avail.size, np.flatnonzero(avail)), renormalise=False)


def sixty_forty_gaps(tickers) -> tuple[list[str], list[str]]:
    """What a universe lacks of the §8.2 60/40 legs: (legs with none of their tickers, ``"bond"`` /
    ``"equity"``; the leg tickers it does not have). One source for the refusal and the note of
    ``quantgym bench --data`` and for the baseline's own recorded fallback."""
    have = set(tickers)
    empty = [leg for leg, ts in SIXTY_FORTY_LEGS.items() if not have.intersection(ts)]
    short = [t for ts in SIXTY_FORTY_LEGS.values() for t in ts if t not in have]
    return empty, short


class SixtyForty(_Baseline):
    """§8.2: 60 % equally over SPY, QQQ, IWM, VTI, EEM, ACWI; 40 % equally over TLT, IEF, BIL, LQD, HYG.

    Only available tickers count; no equity → its budget goes to bonds; neither → equal weight. Those two
    fallbacks are recorded in the step's ``fallback`` (:meth:`step_record`); a universe without a whole leg
    also warns once at :meth:`reset`.
    """

    name = "60/40"
    key = "sixty_forty"

    def reset(self, env) -> None:
        super().reset(env)
        empty, _ = sixty_forty_gaps(self.tickers)
        if empty:
            from quantgym.envs.portbench.data import warn_once

            what = " and none of its ".join(f"{leg} tickers ({', '.join(SIXTY_FORTY_LEGS[leg])})" for leg in empty)
            then = ("it trades equal weight over the available assets" if len(empty) == 2 else
                    f"its {'equities' if empty == ['bond'] else 'bonds'} take the whole budget")
            warn_once(f"60/40 (spec §8.2): the data has none of its {what}: {then} (recorded per step as "
                      "'fallback')", UserWarning)

    def allocate(self, r, avail):
        n = avail.size
        pos = {t: i for i, t in enumerate(self.tickers)}
        eq = np.array([pos[t] for t in SIXTY_FORTY_EQUITY if t in pos and avail[pos[t]]], dtype=int)
        bd = np.array([pos[t] for t in SIXTY_FORTY_BONDS if t in pos and avail[pos[t]]], dtype=int)
        w = np.zeros(n)
        if eq.size and bd.size:
            w[eq], w[bd] = 0.6 / eq.size, 0.4 / bd.size
        elif bd.size:
            w[bd] = 1.0 / bd.size
            self._notes.append(f"60/40: none of its equities ({', '.join(SIXTY_FORTY_EQUITY)}) available; "
                               "100 % bonds")
        elif eq.size:
            w[eq] = 1.0 / eq.size
            self._notes.append(f"60/40: none of its bonds ({', '.join(SIXTY_FORTY_BONDS)}) available; "
                               "100 % equities")
        else:
            w = _equal(n, np.flatnonzero(avail))
            self._notes.append("60/40: none of its equities or bonds available; equal weight")
        return _finish(w)


class RiskParity(_Baseline):
    """§8.3 inverse volatility: ``w_i ∝ 1/σ_i``, ``σ_i = std(r_i)·√252`` from the window; assets with fewer
    than 20 observations get the cross-sectional median σ; ``σ ≥ 1e−8``."""

    name = "Risk Parity"
    key = "risk_parity"

    def allocate(self, r, avail):
        idx = np.flatnonzero(avail)
        w = np.zeros(avail.size)
        if idx.size == 0:
            return w
        x = r[:, idx]
        cnt = np.isfinite(x).sum(axis=0)
        with np.errstate(invalid="ignore"):
            sig = np.nanstd(x, axis=0, ddof=1) * np.sqrt(252.0)
        few = (cnt < MIN_OBS) | ~np.isfinite(sig)
        if few.any():
            med = np.median(sig[~few]) if (~few).any() else 1.0
            sig = np.where(few, med, sig)
        w[idx] = 1.0 / np.maximum(sig, 1e-8)
        return _finish(w)


class CovarianceRiskParity(_Baseline):
    """§8.4 equal risk contribution (ERC): ``w_i (Σw)_i`` equal for all i, long-only, fully invested,
    on ``Σ = 252·cov + 1e−4·mean(diag)·I``; solved with skfolio ``RiskBudgeting``, then polished to
    machine precision by :func:`erc_polish` (so the 6-decimal weights are the same on every CPU)."""

    name = "Cov. Risk Parity"
    key = "cov_risk_parity"

    def allocate(self, r, avail):
        from skfolio import RiskMeasure
        from skfolio.optimization import RiskBudgeting

        idx, x = _risk_data(r, avail)
        if x is None:
            return _finish(_equal(avail.size, idx))
        if self.paper is not None and self.paper.erc_sweep_renorm:  # paper mode (§8.4): repo's solver
            from quantgym.envs.portbench.paper.erc import erc_sweep_renorm

            cov = 252.0 * np.cov(x, rowvar=False, ddof=1)
            w = np.zeros(avail.size)
            w[idx] = erc_sweep_renorm(cov + RIDGE * np.mean(np.diag(cov)) * np.eye(idx.size))
            return _finish(w)
        notes: list[str] = []
        w = _fit_skfolio(RiskBudgeting(risk_measure=RiskMeasure.VARIANCE, prior_estimator=_shrunk_prior()),
                         x, idx, avail.size, notes)
        self._notes += notes
        if notes:  # the solver failed: its recorded equal-weight fallback stands
            return w
        polished, why = erc_polish(x, w[idx])
        if why is not None:
            self._notes.append(why)
            return w
        out = np.zeros(avail.size)
        out[idx] = polished
        return _finish(out)


class MinimumVariance(_Baseline):
    """§8.5 minimum variance ``min wᵀΣw``, ``0 ≤ w ≤ 1``, ``Σw = 1`` (same data and Σ as ERC), skfolio
    ``MeanRisk(MINIMIZE_RISK, VARIANCE)``; on failure ``1/n``."""

    name = "Min-Variance"
    key = "min_variance"

    def allocate(self, r, avail):
        from skfolio import RiskMeasure
        from skfolio.optimization import MeanRisk, ObjectiveFunction

        idx, x = _risk_data(r, avail)
        if x is None:
            return _finish(_equal(avail.size, idx))
        model = MeanRisk(objective_function=ObjectiveFunction.MINIMIZE_RISK, risk_measure=RiskMeasure.VARIANCE,
                         prior_estimator=_shrunk_prior())
        return _fit_skfolio(model, x, idx, avail.size, self._notes)


def black_litterman_weights(x: np.ndarray, notes: list[str] | None = None, reading: str = "exact") -> np.ndarray:
    """§8.6 Black–Litterman as in the repo (no market-cap equilibrium).

    Parameters
    ----------
    x : (T, n) inner-joined daily returns.
    reading : one of :data:`~quantgym.envs.portbench.paper.config.BL_READINGS` (paper mode's
        ``PaperFidelity.bl_reading``); ``"exact"`` is the description below. The others change one
        step: the solver (``"slsqp"``: the repo's SLSQP, equal weight when it reports failure;
        ``"slsqp_last_iterate"``: its last iterate whatever it reports), ``τ`` (``"tau_0.025"``),
        the views' unit (``"annual_views"``: ``Q = ±0.01/252``) or the prior
        (``"equilibrium_prior"``: ``π = 2.5·Σw_EqW``).

    Returns
    -------
    (n,) long-only weights (sum 1, not rounded): prior ``π`` = sample mean, ``Σ`` = sample covariance
    + 1e−4·mean(diag)·I, ``τ = 1/T``; one absolute view per asset with ``|R_i| > 0.01`` (trailing
    cumulative return over the rows), ``Q_i = sign(R_i)·0.01``; ``Ω = diag(PτΣPᵀ) + 1e−8·I``;
    posterior ``μ_BL``; weights = long-only max ``wᵀμ_BL / sqrt(wᵀΣw + 1e−10)``. Equal weight when
    there are no views, a singular ``Ω``/bracket, or the solver fails.
    """
    t, n = x.shape
    ew = np.full(n, 1.0 / n)
    pi = x.mean(axis=0)
    sigma = np.cov(x, rowvar=False, ddof=1).reshape(n, n)
    sigma = sigma + RIDGE * np.mean(np.diag(sigma)) * np.eye(n)
    if reading == "equilibrium_prior":
        pi = BL_DELTA * sigma @ ew
    tau = BL_TAU_HE_LITTERMAN if reading == "tau_0.025" else 1.0 / t
    cum = np.prod(1.0 + x, axis=0) - 1.0
    views = np.flatnonzero(np.abs(cum) > 0.01)
    if views.size == 0:
        return ew
    p = np.zeros((views.size, n))
    p[np.arange(views.size), views] = 1.0
    q = np.sign(cum[views]) * (0.01 / 252.0 if reading == "annual_views" else 0.01)
    ts = tau * sigma
    omega = np.diag(np.diag(p @ ts @ p.T)) + 1e-8 * np.eye(views.size)
    try:
        ts_inv = np.linalg.inv(ts)
    except np.linalg.LinAlgError:
        ts_inv = np.linalg.pinv(ts)
    try:
        om_inv = np.linalg.inv(omega)
        bracket = np.linalg.inv(ts_inv + p.T @ om_inv @ p)
    except np.linalg.LinAlgError:
        if notes is not None:
            notes.append("Black-Litterman posterior singular (LinAlgError); equal weight")
        return ew
    mu_bl = bracket @ (ts_inv @ pi + p.T @ om_inv @ q)
    if reading in ("slsqp", "slsqp_last_iterate"):
        with single_thread_blas():  # SLSQP's stopping point depends on BLAS threading: one thread, one answer
            w = _max_sharpe_slsqp(mu_bl, sigma, last_iterate=reading == "slsqp_last_iterate")
    else:
        w = max_sharpe(mu_bl, sigma)
    if w is None and notes is not None:
        notes.append("max-Sharpe on the posterior found no portfolio"
                     + (" (SLSQP reported failure)" if reading == "slsqp" else "") + "; equal weight")
    return ew if w is None else w


class BlackLitterman(_Baseline):
    """§8.6 Black–Litterman (repo variant: sample-mean prior, ±1 % daily absolute views); in paper mode
    it follows ``PaperFidelity.bl_reading`` (:func:`black_litterman_weights`)."""

    name = "Black-Litterman"
    key = "black_litterman"

    def allocate(self, r, avail):
        idx = np.flatnonzero(avail)
        w = np.zeros(avail.size)
        if idx.size == 0:
            return w
        x = r[:, idx]
        x = x[np.isfinite(x).all(axis=1)]
        if idx.size < 2 or x.shape[0] < 2:
            return _finish(_equal(avail.size, idx))
        w[idx] = black_litterman_weights(x, self._notes, getattr(self.paper, "bl_reading", "exact"))
        return _finish(w)


#: CLI key -> class, in the paper's table order
BASELINES: dict[str, type[_Baseline]] = {c.key: c for c in (
    EqualWeight, SixtyForty, RiskParity, CovarianceRiskParity, MinimumVariance, BlackLitterman)}


def baseline_display_name(agent: str) -> str:
    """The display name of a baseline key (``cov_risk_parity`` -> ``Cov. Risk Parity``); any other
    agent name unchanged (summary.csv files of older quantgym versions hold display names)."""
    cls = BASELINES.get(agent)
    return agent if cls is None else cls.name


def make_baseline(name: str) -> _Baseline:
    """Instantiate a baseline by key (``equal_weight``, ``sixty_forty``, ``risk_parity``,
    ``cov_risk_parity``, ``min_variance``, ``black_litterman``) or display name."""
    key = name.lower()
    for k, cls in BASELINES.items():
        if key in (k, cls.name.lower()):
            return cls()
    raise ValueError(f"unknown baseline {name!r}; choose one of {list(BASELINES)}")
