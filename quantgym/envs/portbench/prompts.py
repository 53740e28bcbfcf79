"""Text rendering of a snapshot per stage (spec §4.1–§4.3, clean mode; §11.9 correlation table).

The text view and the array view are renderings of the same :class:`MarketSnapshot`.
"""

from __future__ import annotations

import json
import re

import numpy as np

from quantgym.envs.portbench.market import ASSET_CLASSES, REGIME_DISPLAY, MarketSnapshot

FORMAT_CONTRACT = (
    "Respond with exactly one JSON object and nothing else: no prose before or after it, no code fences."
)
FORMAT_CORRECTION_SUFFIX = (
    "\n\nYour previous answer could not be parsed. Reply again with ONE valid JSON object that follows the "
    "schema above exactly, and nothing else."
)

S1_SCHEMA = ('{"asset_views": {"<TICKER>": <float in [-1, 1]>, ...}, '
             '"detected_regime": "bull|bear|sideways|high-volatility", "confidence": <float in [0, 1]>, '
             '"macro_summary": "<one or two sentences>"}')
S2_SCHEMA = ('{"signals": {"<TICKER>": "buy|hold|sell", ...}, "strengths": {"<TICKER>": <float in [0, 1]>, ...}, '
             '"reasoning": "<short text>"}')
S3_SCHEMA = ('{"weights": {"<TICKER>": <float in [0, 1]>, ...}, "expected_return": <annual decimal>, '
             '"expected_vol": <annual decimal>, "sharpe_estimate": <float>}')


def _num(x: float) -> str:
    """Two decimals without a leading zero (``.85``, ``-.12``), as in §11.9."""
    s = f"{x:.2f}"
    return s.replace("0.", ".", 1) if s.startswith(("0.", "-0.")) else s


def correlation_block(snap: MarketSnapshot, table: str = "upper", max_assets: int | None = None) -> str:
    """Pairwise table (upper triangle, one row per asset), intra-class averages, inter-class matrix.

    ``max_assets`` (paper mode: 6) limits the pairwise table to the first available assets."""
    idx = snap.avail_idx
    tick = [snap.tickers[i] for i in idx[:max_assets]]
    lines = ["[CORRELATIONS] Pearson correlation of the daily returns in the window."]
    if table != "none" and idx.size:
        lines.append("pairwise (" + ("upper triangle; " if table == "upper" else "") + "row asset vs columns): "
                     + " ".join(tick))
        pidx = idx[:max_assets]
        for a, i in enumerate(pidx):
            cols = pidx[a + 1:] if table == "upper" else pidx
            vals = " ".join("nan" if not np.isfinite(snap.corr[i, j]) else _num(snap.corr[i, j]) for j in cols)
            lines.append(f"{snap.tickers[i]}: {vals}")
    lines.append("intra-class average correlation:")
    counts = np.bincount(snap.class_id[idx], minlength=len(ASSET_CLASSES))
    for c, name in enumerate(ASSET_CLASSES):
        if counts[c] >= 2 and np.isfinite(snap.intra[c]):
            lines.append(f"  {name}: mean {snap.intra[c]:+.3f} (n={counts[c]})")
    present = sorted(ASSET_CLASSES[c] for c in range(len(ASSET_CLASSES)) if counts[c] > 0)
    if len(present) >= 2:
        lines.append("inter-class average correlation: " + " ".join(present))
        for a in present:
            ia = ASSET_CLASSES.index(a)
            row = " ".join(
                "nan" if not np.isfinite(snap.inter[ia, ASSET_CLASSES.index(b)]) else f"{snap.inter[ia, ASSET_CLASSES.index(b)]:+.2f}"
                for b in present
            )
            lines.append(f"  {a}: {row}")
    return "\n".join(lines)


def _macro_lines(snap: MarketSnapshot, macro_keys) -> list[str]:
    first5 = ", ".join(f"{k}={snap.macro[i]:.4g}" for i, k in enumerate(macro_keys[:5]) if snap.macro_mask[i])
    labelled = [f"  {k}: {snap.macro[i]:.4g}" for i, k in enumerate(macro_keys) if snap.macro_mask[i] and snap.macro[i] != 0]
    return [f"[MACRO] {first5}", "[MACRO INDICATORS] (publication lags applied)"] + labelled


def _header(snap: MarketSnapshot, stage: str) -> list[str]:
    return [f"[PORTBENCH {stage}] Decision date: {snap.decision_date.date()} (data through the close of this date).",
            f"Market regime (SPY 126-day rule): {REGIME_DISPLAY[snap.regime]}"]


def render_s1(snap: MarketSnapshot, macro_keys, corr_table: str = "upper", max_assets: int | None = None,
              max_corr_assets: int | None = None) -> str:
    """S1 (market interpretation) prompt (spec §4.1, clean mode: every available asset).

    ``max_assets``/``max_corr_assets`` (paper mode: 8 and 6) keep only the first assets of the
    per-asset lines and of the pairwise table."""
    lines = _header(snap, "S1 MARKET INTERPRETATION")
    lines.append("[ASSETS] ticker (class): price, trailing return over the window, annualised volatility")
    for i in snap.avail_idx[:max_assets]:
        lines.append(f"{snap.tickers[i]} ({snap.classes[i]}): price {snap.price[i]:.2f}, "
                     f"return {100 * snap.trailing_return[i]:+.2f}%, vol {100 * snap.ann_vol[i]:.1f}%")
    lines += _macro_lines(snap, macro_keys)
    lines.append(correlation_block(snap, corr_table, max_corr_assets))
    if snap.news_text:
        lines.append("[NEWS]\n" + snap.news_text[:3000])
    lines.append(
        "[TASK] For every asset listed above give a view in [-1, 1] on its outlook (-1 very negative, "
        "+1 very positive), detect the market regime, state your confidence and summarise the macro picture."
    )
    lines.append("[SCHEMA] " + S1_SCHEMA)
    lines.append(FORMAT_CONTRACT)
    return "\n".join(lines)


def render_s2(snap: MarketSnapshot, views: np.ndarray, notes: dict | None = None, threshold: float = 0.2) -> str:
    """S2 (signal generation) prompt: the agent's own S1 views (spec §4.2, ±0.2 thresholds; paper mode
    states ``threshold=0.15``)."""
    notes = notes or {}
    lines = _header(snap, "S2 SIGNAL GENERATION")
    lines.append("[YOUR S1 VIEWS]")
    lines += [f"{snap.tickers[i]}: view={views[i]:+.3f}" for i in snap.avail_idx]
    lines.append(f"Your detected regime: {notes.get('detected_regime', 'n/a')}")
    lines.append(f"Your macro summary: {notes.get('macro_summary', 'n/a')}")
    if snap.news_text:
        lines.append("[NEWS]\n" + snap.news_text)
    lines.append(
        f"[RULES] Turn the views into trading signals: 'buy' when the view is above +{threshold:g}, 'sell' when "
        f"it is below -{threshold:g}, otherwise 'hold'. Give a strength in [0, 1] per asset."
    )
    lines.append("[SCHEMA] " + S2_SCHEMA)
    lines.append(FORMAT_CONTRACT)
    return "\n".join(lines)


def render_s3(snap: MarketSnapshot, signals: np.ndarray, profile_block: str, nav_units: float,
              strengths: np.ndarray | None = None, corr_table: str = "upper") -> str:
    """S3 (weight optimisation) prompt: signals, current weights, NAV, correlations, constraints,
    and (clean mode) the investor profile (spec §4.3, §3.1)."""
    from quantgym.envs.portbench.stages import SIGNAL_NAMES

    lines = _header(snap, "S3 WEIGHT OPTIMISATION")
    if profile_block:  # paper mode (§3.1): no profile block in S3
        lines.append(profile_block)
    lines.append("[YOUR S2 SIGNALS] ticker: signal (strength)")
    for i in snap.avail_idx:
        st = 0.5 if strengths is None else float(strengths[i])
        lines.append(f"{snap.tickers[i]}: {SIGNAL_NAMES[int(signals[i])]} ({st:.2f})")
    cw = {snap.tickers[i]: round(float(snap.current_weights[i]), 3) for i in range(len(snap.tickers))
          if snap.current_weights[i] > 5e-4}
    lines.append("[CURRENT WEIGHTS] " + json.dumps(cw))
    lines.append(f"[NAV] {snap.nav * nav_units:,.2f}")
    lines.append(correlation_block(snap, corr_table))
    lines.append(
        "[CONSTRAINTS] Long-only weights in [0, 1] that sum to 1, only over the assets listed under your signals. "
        "Assets with a 'sell' signal should ideally get 0, 'buy' assets should be increased; avoid unnecessary "
        "turnover (trading costs 15 bps of traded notional)."
    )
    lines.append("[SCHEMA] " + S3_SCHEMA)
    lines.append(FORMAT_CONTRACT)
    return "\n".join(lines)


#: §1.8 sanitisation of news text: alarming words → neutral phrases (with inflections)
_SANITISE = (
    (r"\bcrash(es|ed|ing)?\b", "sharp decline"),
    (r"\bcollaps(e|es|ed|ing)\b", "sharp correction"),
    (r"\bcris(is|es)\b", "high-volatility period"),
    (r"\bbankrupt(cy|cies)?\b", "financial difficulty"),
    (r"\bmeltdowns?\b", "significant drawdown"),
    (r"\bpanic(s|ked|king)?\b", "rapid"),
    (r"\bcatastroph(e|es|ic)\b", "adverse event"),
    (r"\bdisasters?\b", "adverse event"),
    (r"\bdefault(s|ed|ing)?\b", "payment difficulty"),
)


def sanitize_news(text: str) -> str:
    """Replace crash/collapse/crisis/bankruptcy/meltdown/panic/catastrophe/disaster/default (and
    inflections) by neutral phrases before the text enters a prompt (spec §1.8)."""
    for pat, rep in _SANITISE:
        text = re.sub(pat, rep, text, flags=re.IGNORECASE)
    return text
