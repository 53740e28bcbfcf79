"""The executor of Quant-Arena: one evaluation of a submission on one window.

Spec quant_arena.md §4–§6, §10.4, §10.11–§10.14.

:func:`evaluate_submission` is the path every candidate takes: build the payload (only
rows up to D_{n−1}; for research the dataset is already cut at the research end;
:mod:`~quantgym.envs.quant_arena.handoff`), run the agent in the sandbox child
(:mod:`~quantgym.envs.quant_arena.child`; in process:
:func:`~quantgym.envs.quant_arena.child.harness.score_days`),
re-validate the returned scores in the host, then run the cash account, the metrics
and the score. :func:`evaluate_scores` is the host-only part (no agent code), used by
the speed benchmark and the market reference.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantgym.blind import day_label

from .config import ArenaConfig
from .account import AccountResult, labels, reference_path, run_account, score_order, window_rows
from .child.harness import score_days
from .blinding import ArenaBlinding
from .data import ArenaDataset
from .handoff import RUNNER, ChildOutputError, build_payload, validate_child_value
from .metrics import account_metrics, diversity, label_order, score_window, signal_metrics, yearly_returns

#: Statuses of an evaluation (spec §10.4), plus ``host_error``: quantgym itself failed (not the submission);
#: such a result is never scored (the env raises :class:`ArenaHostError`).
STATUSES = ("ok", "invalid", "violation", "timeout", "oom", "failed", "no_signal", "host_error")


class ArenaHostError(RuntimeError):
    """quantgym failed while evaluating a submission (building its payload, running the sandbox, reading the
    result): an infrastructure error, never the agent's, so nothing is scored. The message is one line; the
    traceback is in ``result.errors[0]["traceback"]`` and the run's record."""

    def __init__(self, result: "WindowResult"):
        super().__init__(result.message)
        self.result = result
#: the evaluation status of each sandbox status; ``output_limit``: the submission printed more than
#: ``ArenaSandboxLimits.max_output_bytes`` (stdout and stderr of one evaluation; the sandbox itself keeps the
#: first bytes and reports ``ok`` with ``output_truncated``), a violation of the limits of spec §10.4
_SANDBOX_TO_ARENA = {"error": "invalid", "forbidden": "violation", "timeout": "timeout", "memory": "oom",
                  "bad_output": "violation", "crashed": "failed", "output_limit": "violation"}


def _host_error(exc: BaseException, doing: str, base: dict, timings: dict) -> "WindowResult":
    """The result of an infrastructure failure: status ``host_error``, the traceback kept, never scored."""
    import traceback

    one = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    msg = f"host error while {doing} (quantgym's failure, not the submission's; nothing is scored): {one}"
    err = {"date": None, "phase": "host", "type": "host_error", "message": msg,
           "traceback": "".join(traceback.format_exception(exc))[-4000:]}
    return WindowResult(status="host_error", message=msg, errors=[err], n_errors=1, timings=timings, **base)


def source_hash(source: str) -> str:
    """SHA-256 of a submission's source text (UTF-8)."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class WindowResult:
    """Outcome of one submission on one window.

    Attributes
    ----------
    phase : str
        ``research`` or ``sealed``.
    status : str
        One of :data:`STATUSES`.
    message : str
        One line.
    S : float
        The window's score 0–100 (0 if status ≠ ok).
    metrics : dict or None
        Account, signal, cost metrics, score components, Q, D, K (None if status ≠ ok).
    years : dict
        Calendar-year returns (research feedback).
    errors : list[dict]
        Day errors / the evaluation error (date, phase, type, message, traceback).
    """

    phase: str
    start: str
    end: str
    status: str
    message: str
    S: float = 0.0
    metrics: dict | None = None
    years: dict = field(default_factory=dict)
    errors: list = field(default_factory=list)
    n_errors: int = 0
    n_days: int = 0
    extra_keys: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    sandbox: dict = field(default_factory=dict)
    account: AccountResult | None = field(default=None, repr=False)
    daily: dict = field(default_factory=dict, repr=False)

    def to_record(self, with_daily: bool = True) -> dict:
        """JSON-ready dict (the account path as lists when ``with_daily``)."""
        out = {k: getattr(self, k) for k in ("phase", "start", "end", "status", "message", "S", "metrics", "years",
                                             "errors", "n_errors", "n_days", "extra_keys", "timings", "sandbox")}
        if with_daily and self.daily:
            out["daily"] = self.daily
        return out


def _window_inputs(ds: ArenaDataset, d0: int, n: int) -> tuple[np.ndarray, np.ndarray, tuple]:
    """Market reference path, labels and the labels' order of a window (the same for every candidate
    scored on it), cached on the dataset; read-only arrays."""
    key = ("window_inputs", int(d0), int(n))
    if key not in ds._cache:
        ref, y = reference_path(ds, d0, n), labels(ds, d0, n)
        y_order = label_order(y)
        for a in (ref, y, *y_order):
            a.setflags(write=False)
        ds._cache[key] = (ref, y, y_order)
    return ds._cache[key]


def evaluate_scores(ds: ArenaDataset, d0: int, n: int, scores: np.ndarray, config: ArenaConfig | None = None,
                    features: np.ndarray | None = None, sample_days: np.ndarray | None = None) -> dict[str, Any]:
    """Account, metrics and score of a validated score matrix (host only, no agent code).

    Parameters
    ----------
    ds : ArenaDataset
    d0, n : int
        Row of D_0 and number of execution days.
    scores : ndarray (n, ds.N)
        Validated scores (finite or NaN).
    features : ndarray (n_samples, F, N), optional
        Feature matrices of the diversity sample dates.
    sample_days : ndarray of int, optional
        Decision indices j of those dates.

    Returns
    -------
    dict
        ``account`` (:class:`AccountResult`), ``metrics`` (flat dict), ``score``
        (:class:`~quantgym.envs.quant_arena.metrics.ScoreBreakdown`), ``years``,
        ``reference`` (path), ``signal`` (incl. daily IC), ``diversity``.
    """
    config = config or ArenaConfig()
    sc = config.scoring
    # one sort of the scores serves the selections and the signal metrics (run_account checks the shape)
    order = score_order(scores) if np.shape(scores) == (n, ds.N) else None
    acct = run_account(ds, d0, n, scores, execution=config.execution, cost=config.cost, impact=config.impact,
                       order=order)
    ref, y, y_order = _window_inputs(ds, d0, n)
    am = account_metrics(acct.nav, acct.position_value, acct.bought, acct.sold, acct.nav_open, ref, sc.n_ann)
    in_view = ds.has_row[d0:d0 + n]
    sm = signal_metrics(scores, y, in_view, sc, label_order=y_order, score_order=order)
    if features is not None and sample_days is not None and features.shape[1] > 0:
        div = diversity(features, scores[np.asarray(sample_days, dtype=np.int64)], sc)
    else:
        div = {"K": 0, "D": 0.0, "n_features": 0, "n_clusters": 0, "labels": [], "rho_score": []}
    sb = score_window(am["excess_arr"], am["sharpe"], sm["rankic_mean"], sm["rankic_ir"], sm["ls_sharpe"],
                      am["turnover"], div["K"], sc)
    cap = config.execution.initial_capital
    metrics = {**am, **{k: v for k, v in sm.items() if not k.startswith("_")},
               "fees_cny": float(acct.fees.sum()), "fees_pct": float(acct.fees.sum() / cap * 100),
               "stamp_cny": float(acct.stamp.sum()), "impact_cny": float(acct.impact.sum()),
               "impact_pct": float(acct.impact.sum() / cap * 100),
               "n_orders": int(acct.n_buys.sum() + acct.n_sells.sum()),
               "blocked_buys": int(acct.blocked_buy.sum()), "blocked_sells": int(acct.blocked_sell.sum()),
               "partial_fills": int(acct.partial.sum()), "stale_holdings": len(acct.stale),
               **sb.components, "Q": sb.Q, "D": sb.D, "K": sb.K, "S": sb.S,
               "n_features_measured": div["n_features"], "n_clusters": div["n_clusters"]}
    return {"account": acct, "metrics": metrics, "score": sb, "reference": ref.copy(),
            "years": yearly_returns(acct.dates, acct.nav, ref), "signal": sm, "diversity": div}


def _run_child(source: str, payload: dict, config: ArenaConfig, executor: str) -> tuple[str, str, Any, dict]:
    """Run :func:`score_days` on ``source``; returns (sandbox status, message, value, record)."""
    if executor == "inprocess":
        # Trusted code only (tests of the evaluator, benchmarks of example strategies).
        ns: dict[str, Any] = {"__name__": "submission"}
        try:
            exec(compile(source, "<submission>", "exec"), ns)  # noqa: S102 - trusted path
        except Exception as exc:  # noqa: BLE001
            return "error", f"error: {type(exc).__name__}: {exc}", None, {}
        return "ok", "ok", score_days(ns, payload), {"executor": "inprocess"}
    from quantgym.sandbox import SandboxLimits, run_in_sandbox

    sb = config.sandbox
    limits = SandboxLimits(cpu_seconds=float(sb.cpu_seconds), wall_seconds=float(sb.eval_seconds + sb.import_seconds),
                           memory_mb=int(sb.memory_mb), max_output_bytes=int(sb.max_output_bytes),
                           allow_frame_introspection=bool(sb.frame_introspection))
    res = run_in_sandbox(source, RUNNER, payload=payload, limits=limits)
    rec = {"executor": "sandbox", "status": res.status, "isolation": (res.value or {}).get("isolation")
           if isinstance(res.value, dict) else None, "message": res.message, "wall_seconds": res.wall_seconds,
           "cpu_seconds": res.cpu_seconds, "output_truncated": res.output_truncated,
           "stdout_bytes": len(res.stdout or ""), "details": dict(res.details or {}), "traceback": res.traceback}
    return res.status, res.message, res.value, rec


def evaluate_submission(source: str, ds: ArenaDataset, start: Any, end: Any, config: ArenaConfig | None = None, *,
                        phase: str = "research", executor: str = "sandbox",
                        blind: "ArenaBlinding | None" = None) -> WindowResult:
    """Evaluate one submission on one window (spec §10.2–§10.4, §10.11–§10.13).

    Parameters
    ----------
    source : str
        Submission source (module text defining ``FEATURES``, ``compute_features``,
        ``score``).
    ds : ArenaDataset
        Panel already truncated at ``end`` by the caller when later rows must not be
        read (research).
    start, end : date-like
        The window.
    config : ArenaConfig
    phase : str
        Label written into the result.
    executor : {"sandbox", "inprocess"}
        ``inprocess`` runs the code in this process: for trusted code only.
    blind : ArenaBlinding, optional
        Blind evaluation (docs/blind.md): the payload is blinded before it reaches the submission
        (:meth:`~quantgym.envs.quant_arena.blinding.ArenaBlinding.blind_payload`) and its scores are
        mapped back to the real columns before the account and the metrics run on the real panel.

    Returns
    -------
    WindowResult
        Never raises for anything the agent does; every failure is a status.
    """
    config = config or ArenaConfig()
    if not isinstance(source, str):
        raise TypeError(f"source must be str, got {type(source).__name__}")
    d0, n = window_rows(ds, start, end)
    t0 = time.perf_counter()
    key = secrets.token_bytes(32) if executor == "sandbox" else None
    base = dict(phase=phase, start=str(ds.dates[d0 + 1]), end=str(ds.dates[d0 + n]), n_days=n)
    try:
        payload = build_payload(ds, d0, n, max_lookback=config.windows.max_lookback,
                            max_features=config.scoring.max_features, sample_every=config.scoring.sample_every,
                            day_seconds=config.sandbox.day_seconds, import_seconds=config.sandbox.import_seconds,
                            max_output_bytes=config.sandbox.max_output_bytes,
                            key=key, warmup_start=config.windows.warmup_start,
                            inf_score_error=config.scoring.inf_score_is_day_error)
        if blind is not None:
            payload = blind.blind_payload(payload)
    except Exception as exc:  # noqa: BLE001 - quantgym's own failure: its own status, with the traceback
        return _host_error(exc, "building the payload", base, {"payload_s": time.perf_counter() - t0})
    t_payload = time.perf_counter() - t0
    try:
        status, message, value, rec = _run_child(source, payload, config, executor)
    except Exception as exc:  # noqa: BLE001 - the host side of the sandbox failed, not the submission
        return _host_error(exc, "running the sandbox", base, {"payload_s": t_payload})
    del payload
    t_child = time.perf_counter() - t0 - t_payload
    timings = {"payload_s": t_payload, "child_s": t_child}
    if status == "ok" and rec.get("output_truncated"):
        status = "output_limit"
        message = (f"output_limit: the submission printed more than {config.sandbox.max_output_bytes:,} bytes "
                   "(stdout and stderr of one evaluation; ArenaSandboxLimits.max_output_bytes)")
    if status != "ok":
        qa = _SANDBOX_TO_ARENA.get(status, "failed")
        # the record's ``type`` is the sandbox status: its message drops the same leading "<status>: "
        # (SandboxResult.message starts with it), so a reader never sees "error: error: SyntaxError ..."
        detail = str(message).removeprefix(f"{status}: ")
        err = {"date": None, "phase": "module" if qa == "invalid" else "evaluation", "type": status,
               "message": detail[:500], "traceback": (rec.get("traceback") or "")[-2000:]}
        return WindowResult(status=qa, message=str(message)[:500], errors=[err], n_errors=1, timings=timings,
                            sandbox=rec, **base)
    in_view = ds.has_row[d0:d0 + n]
    n_samples = len(range(0, n, config.scoring.sample_every))
    try:
        F = len(value.get("feature_names") or []) if isinstance(value, dict) else 0
        if isinstance(value, dict) and value.get("status") == "ok":
            names = value.get("feature_names")
            if not isinstance(names, list) or len(names) > config.scoring.max_features:
                raise ChildOutputError("malformed feature_names")
        seen = in_view if blind is None else blind.in_blind_order(in_view)
        clean, bad_days = validate_child_value(value, n, ds.N, seen, F, n_samples, key=key)
        if blind is not None and clean["status"] == "ok":  # alias columns back to the real codes
            clean["scores"] = blind.unblind_scores(clean["scores"])
            clean["features"] = blind.unblind_scores(clean["features"])
    except ChildOutputError as exc:
        msg = f"violation: invalid result from the child: {exc}"
        return WindowResult(status="violation", message=msg, errors=[{"date": None, "phase": "evaluation",
                            "type": "bad_output", "message": msg}], n_errors=1, timings=timings, sandbox=rec, **base)
    if clean["status"] != "ok":
        st = {"timeout": "timeout", "isolation_error": "failed"}.get(clean["status"], "invalid")
        msg = str(clean.get("message", st))[:500]
        return WindowResult(status=st, message=msg, errors=[{"date": None, "phase": "module", "type": st,
                            "message": msg}], n_errors=1, timings=timings, sandbox=rec, **base)
    errors = list(clean["errors"])[:20]
    for j in bad_days[: max(0, 20 - len(errors))]:
        when = day_label(j) if blind is not None else str(ds.dates[d0 + j])  # blind: relative day
        errors.append({"date": when, "phase": "host_check", "type": "InvalidOutput",
                       "message": "scores outside view.symbols or infinite; the date's scores were dropped"})
    n_err = int(clean["n_errors"])
    t1 = time.perf_counter()
    ev = evaluate_scores(ds, d0, n, clean["scores"], config, clean["features"], clean["sample_days"])
    timings["evaluator_s"] = time.perf_counter() - t1
    acct = ev["account"]
    daily = {"dates": [str(d) for d in acct.dates], "nav": acct.nav.tolist(), "reference": ev["reference"].tolist(),
             "exposure": (acct.position_value / acct.nav).tolist(), "cash": acct.cash.tolist(),
             "rank_ic": ev["signal"]["_daily_ic"].tolist(), "n_held": acct.n_held.tolist()}
    extra = [str(k) for k in (clean.get("extra_keys") or [])][:50]
    if extra:  # reported once, not a day error (§10.4)
        errors.insert(0, {"date": None, "phase": "compute_features", "type": "UndeclaredFeatures",
                          "message": f"features not in FEATURES were dropped: {', '.join(extra)[:400]}"})
        errors = errors[:20]
    if n_err > config.scoring.failed_day_fraction * n:
        msg = f"failed: day errors on {n_err} of {n} decision dates (> {config.scoring.failed_day_fraction:.0%})"
        return WindowResult(status="failed", message=msg, S=0.0, metrics=None, years=ev["years"], errors=errors,
                            n_errors=n_err, extra_keys=extra, timings=timings, sandbox=rec, account=acct,
                            daily=daily, **base)
    # coverage 0: no finite score on any decision date -> the account never traded (§10.5 all cash)
    no_signal = not bool(np.isfinite(np.where(in_view, clean["scores"], np.nan)).any())
    if no_signal:
        why = (f"coverage 0: score() returned no finite value on any of the {n} decision dates, so the account "
               "never traded (all cash)")
        if config.scoring.zero_coverage_status == "no_signal":
            msg = f"no_signal: {why}; not scored (S = 0)"
            errors.insert(0, {"date": None, "phase": "evaluation", "type": "NoSignal", "message": msg})
            return WindowResult(status="no_signal", message=msg[:500], S=0.0, metrics=None, years=ev["years"],
                                errors=errors[:20], n_errors=n_err, extra_keys=extra, timings=timings, sandbox=rec,
                                account=acct, daily=daily, **base)
        note = f"{why}; scored as the all-cash strategy (spec §10.5, §10.12)"
        errors.insert(0, {"date": None, "phase": "evaluation", "type": "NoSignal", "message": note})
        errors = errors[:20]
    m = ev["metrics"]
    m["diversity"] = {k: ev["diversity"][k] for k in ("K", "D", "n_features", "n_clusters")}
    m["no_signal"] = no_signal
    msg = "ok" if not n_err else f"ok ({n_err} day error(s))"
    if no_signal:
        msg = f"ok (no signal: coverage 0, never traded; scored as all cash){msg[2:]}"
    return WindowResult(status="ok", message=msg, S=float(m["S"]), metrics=m, years=ev["years"], errors=errors,
                        n_errors=n_err, extra_keys=extra, timings=timings, sandbox=rec, account=acct, daily=daily,
                        **base)


def reference_only(ds: ArenaDataset, start: Any, end: Any, config: ArenaConfig | None = None) -> dict[str, float]:
    """Metrics of the cost-free market reference on a window (ARR, Sharpe, MaxDD, total return)."""
    from quantgym import metrics as qm

    config = config or ArenaConfig()
    d0, n = window_rows(ds, start, end)
    ref = reference_path(ds, d0, n)
    r = ref[1:] / ref[:-1] - 1.0
    a = (ref[-1] / ref[0]) ** (config.scoring.n_ann / n) - 1.0
    return {"arr": float(a), "excess_arr": 0.0, "sharpe": qm.sharpe(r, rf=0.0, periods_per_year=config.scoring.n_ann),
            "max_drawdown": qm.max_drawdown(r, include_start=True), "total_return": float(ref[-1] - 1.0),
            "volatility": qm.volatility(r, config.scoring.n_ann), "n_days": n, "path": ref.tolist(),
            "dates": [str(d) for d in ds.dates[d0:d0 + n + 1]]}


__all__ = ["ArenaHostError", "WindowResult", "evaluate_submission", "evaluate_scores", "reference_only", "source_hash", "STATUSES"]
