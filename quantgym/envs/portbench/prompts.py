"""Text rendering of a snapshot per stage (spec §4.1–§4.3, clean mode; §11.9 correlation table).

Longer than 500 lines as one job, the text of every stage in every prompt style: one place to read what the
agent is told.

The text view and the array view are renderings of the same :class:`MarketSnapshot`.

Every stage renders in one of :data:`quantgym.spaces.PROMPT_STYLES`: ``"full"`` (the reference
prompt), ``"compact"`` (≤ 5,000 SmolLM2 tokens on the bundled data) and ``"minimal"`` (≤ 2,000). The
short styles keep the decision date, every available ticker, the stage's rules, the schema, the
format contract, the S3 investor profile and the agent's own earlier answers; they summarise or
drop, in this order: the pairwise correlation table (compact: each asset's most correlated other
asset; minimal: class averages only), decimals and wording (one ``TICKER class ret% vol%`` row per
asset; minimal groups the rows by class), the macro block (minimal: :data:`MINIMAL_MACRO_KEYS`), and
the news text (truncated to :data:`NEWS_CHARS`).

Long because most of it is prompt text: five stages in three styles, named and blind.

Block cache (speed only). :func:`render_s1` and :func:`render_s3` take ``cache``:
None renders everything; a dict keeps the blocks that depend on the snapshot's row only (header,
asset lines, macro lines, correlation block) so that S1 and S3 of one decision date, every style
and every env over the same dataset render them once. The env passes the row cache of the decision
row (:meth:`quantgym.envs.portbench.market.MarketView.row_cache`: one dict per dataset object,
window config and row, at most ``ROW_CACHE_MAX`` rows, freed with the dataset). An entry holds weak
references to the row arrays it was rendered from and is used only when the snapshot carries the
very same (read-only) arrays, date, regime and universe: a dict shared by mistake costs a re-render,
never a changed prompt, and the cache keeps no array alive. The prompt text is the same with and
without the cache (tests/portbench/test_pb_prompt_speed_exact.py). Memory: about 20 k characters per
decision row in the full style at N = 80 (15 k of them the correlation block), 29 k with all three
styles; a block longer than :data:`BLOCK_CACHE_MAX_CHARS` is rendered every time.
"""

from __future__ import annotations

import json
import re
import weakref

import numpy as np

from quantgym.envs.portbench.config import PortBenchConfig
from quantgym.envs.portbench.market import ASSET_CLASSES, REGIME_DISPLAY, MarketSnapshot
from quantgym.models import describe_model
from quantgym.spaces import check_prompt_style

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


#: ``_num(k / 100)`` for k = -100 .. 100: the strings of every two-decimal correlation (index k + 100)
_NUM2 = np.array([_num(k / 100) for k in range(-100, 101)], dtype=object)


def _nums(x: np.ndarray) -> np.ndarray:
    """``"nan"`` or :func:`_num` of every entry of ``x``, as an object array of the same shape.

    The same strings as the scalar function, built by table look-up: an entry is rounded with
    ``rint(100 x)`` only when that cannot differ from ``f"{x:.2f}"`` (finite, in [-1, 1], not within
    1e-6 of a half-cent tie, and not a negative number that rounds to ``-.00``); every other entry goes
    through :func:`_num` itself. Speed only: an 80×80 table costs ~0.3 ms, not ~3 ms.
    """
    x = np.asarray(x, dtype=np.float64)
    out = np.empty(x.shape, dtype=object)
    fin = np.isfinite(x)
    y = np.where(fin, x, 0.0) * 100.0
    k = np.rint(y)
    fast = fin & (np.abs(x) <= 1.0) & (np.abs(np.abs(y - np.trunc(y)) - 0.5) > 1e-6) & ~((k == 0) & np.signbit(x))
    out[fast] = _NUM2[(k[fast] + 100).astype(np.int64)]
    for ij in zip(*np.nonzero(~fast)):
        v = x[ij]
        out[ij] = "nan" if not np.isfinite(v) else _num(float(v))
    return out


#: a rendered block longer than this is not kept (a full-style pairwise table beyond about N = 180 assets):
#: bounds the cache's memory per decision row
BLOCK_CACHE_MAX_CHARS = 65_536


def _row_objects(snap: MarketSnapshot) -> tuple:
    """The snapshot's row arrays a cached block may depend on (compared by identity)."""
    return (snap.available, snap.price, snap.trailing_return, snap.ann_vol, snap.corr, snap.intra, snap.inter,
            snap.macro, snap.macro_mask)


class _Cached:
    """A cached block with what it was rendered from: weak references to the row arrays, the date, regime
    and universe. Pickled (an env is picklable) as an entry that never matches: weak references do not
    pickle, and the clone re-renders."""

    __slots__ = ("refs", "vals", "text")

    def __init__(self, refs: tuple, vals: tuple | None, text: str):
        self.refs, self.vals, self.text = refs, vals, text

    def __reduce__(self):
        return (_Cached, ((), None, ""))

    def matches(self, objs: tuple, vals: tuple) -> bool:
        return bool(self.refs) and self.vals == vals and all(r() is o for r, o in zip(self.refs, objs))


def _block(cache: dict | None, snap: MarketSnapshot, key: tuple, build):
    """``build()``, kept in ``cache[("prompt",) + key]`` for the same snapshot row (module docstring).

    An entry (:class:`_Cached`) holds weak references to the row arrays it was rendered from (so it
    keeps no array alive), the date, regime and universe (tickers, classes, class ids: per env, so by
    value), and the text; it is used only when all of them are the snapshot's."""
    if cache is None:
        return build()
    key = ("prompt",) + key
    objs = _row_objects(snap)
    vals = (snap.decision_date, snap.regime, snap.tickers, snap.classes, snap.class_id.tobytes())
    hit = cache.get(key)
    if hit is not None and hit.matches(objs, vals):
        return hit.text
    text = build()
    if len(text) <= BLOCK_CACHE_MAX_CHARS:
        try:
            cache[key] = _Cached(tuple(weakref.ref(o) for o in objs), vals, text)
        except TypeError:  # a hand-built snapshot with plain sequences: no cache
            pass
    return text


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
        strs = _nums(snap.corr[np.ix_(pidx, pidx)])
        for a, i in enumerate(pidx):
            vals = " ".join(strs[a, a + 1:] if table == "upper" else strs[a])
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


def _blind(snap: MarketSnapshot) -> dict | None:
    """The blind-mode labels of a snapshot (:class:`quantgym.envs.portbench.blinding.BlindView`), None when named."""
    return snap.extra.get("blind") if snap.extra else None


#: blind mode: what the macro values are (docs/blind.md)
BLIND_MACRO_NOTE = "z-scores over the window (latest value vs the window mean, in standard deviations; never levels)"


def _macro_lines(snap: MarketSnapshot, macro_keys) -> list[str]:
    if _blind(snap):
        first5 = ", ".join(f"{k}={snap.macro[i]:+.1f}" for i, k in enumerate(macro_keys[:5]) if snap.macro_mask[i])
        # every series with a z-score, 0 included (at its window mean; named prompts drop 0, a missing level)
        labelled = [f"  {k}: {snap.macro[i]:+.1f}" for i, k in enumerate(macro_keys) if snap.macro_mask[i]]
        return [f"[MACRO] {BLIND_MACRO_NOTE}: {first5}", "[MACRO INDICATORS] (publication lags applied)"] + labelled
    first5 = ", ".join(f"{k}={snap.macro[i]:.4g}" for i, k in enumerate(macro_keys[:5]) if snap.macro_mask[i])
    labelled = [f"  {k}: {snap.macro[i]:.4g}" for i, k in enumerate(macro_keys) if snap.macro_mask[i] and snap.macro[i] != 0]
    return [f"[MACRO] {first5}", "[MACRO INDICATORS] (publication lags applied)"] + labelled


def _rules(config: PortBenchConfig | None) -> PortBenchConfig:
    """The config a prompt states (the env's, which it is scored with; the defaults without one)."""
    return PortBenchConfig() if config is None else config


def _regime(config: PortBenchConfig | None) -> tuple[str, int]:
    """The §1.9 regime rule a prompt states: the config's ticker and look-back in calendar days."""
    config = _rules(config)
    return config.regime_ticker, int(config.regime_days)


def _header(snap: MarketSnapshot, stage: str, regime: tuple[str, int]) -> list[str]:
    b = _blind(snap)
    if b:  # blind mode: the decision's number and relative trading days, the regime ticker's alias
        return [f"[PORTBENCH {stage}] {b['label'].capitalize()}, day 0 (data through the close of this day; "
                "earlier trading days are day -1, -2, ...).",
                f"Market regime ({b['regime_ticker']} {regime[1]}-day rule): {REGIME_DISPLAY[snap.regime]}"]
    return [f"[PORTBENCH {stage}] Decision date: {snap.decision_date.date()} (data through the close of this date).",
            f"Market regime ({regime[0]} {regime[1]}-day rule): {REGIME_DISPLAY[snap.regime]}"]


def _s1_head(snap: MarketSnapshot, macro_keys, max_assets: int | None, regime: tuple[str, int]) -> str:
    """Full-style S1 header, asset lines and macro lines (row-dependent only)."""
    lines = _header(snap, "S1 MARKET INTERPRETATION", regime)
    if _blind(snap):  # blind mode: aliases, the close rebased to 100 at the window start (docs/blind.md)
        lines.append("[ASSETS] asset (class): close rebased to 100 at the window start, trailing return over the "
                     "window, annualised volatility")
        lines += [f"{snap.tickers[i]} ({snap.classes[i]}): rebased {snap.price[i]:.1f}, "
                  f"return {100 * snap.trailing_return[i]:+.2f}%, vol {100 * snap.ann_vol[i]:.1f}%"
                  for i in snap.avail_idx[:max_assets]]
        return "\n".join(lines + _macro_lines(snap, macro_keys))
    # adjusted closes embed later distributions: a level for returns, never "the price that day" (docs/data.md §1)
    lines.append("[ASSETS] ticker (class): adj. close (split- and dividend-adjusted level, not the traded price), "
                 "trailing return over the window, annualised volatility")
    for i in snap.avail_idx[:max_assets]:
        lines.append(f"{snap.tickers[i]} ({snap.classes[i]}): adj. close {snap.price[i]:.2f}, "
                     f"return {100 * snap.trailing_return[i]:+.2f}%, vol {100 * snap.ann_vol[i]:.1f}%")
    lines += _macro_lines(snap, macro_keys)
    return "\n".join(lines)


def render_s1(snap: MarketSnapshot, macro_keys, corr_table: str = "upper", max_assets: int | None = None,
              max_corr_assets: int | None = None, style: str = "full", cache: dict | None = None,
              config: PortBenchConfig | None = None) -> str:
    """S1 (market interpretation) prompt (spec §4.1, clean mode: every available asset).

    ``max_assets``/``max_corr_assets`` (paper mode: 8 and 6) keep only the first assets of the
    per-asset lines and of the pairwise table. ``style``: one of ``PROMPT_STYLES``; ``cache``: None or
    the row's block cache (module docstring); ``config``: the env's config, whose rules the prompt
    states (the regime ticker and look-back; None: the defaults)."""
    rt = _regime(config)
    if style != "full":
        return _s1_short(snap, macro_keys, check_prompt_style(style), max_assets, max_corr_assets, cache, rt)
    lines = [_block(cache, snap, ("s1_head", tuple(macro_keys), max_assets, rt),
                    lambda: _s1_head(snap, macro_keys, max_assets, rt)),
             _block(cache, snap, ("corr", corr_table, max_corr_assets),
                    lambda: correlation_block(snap, corr_table, max_corr_assets))]
    if snap.news_text:
        lines.append("[NEWS]\n" + snap.news_text[:3000])
    lines.append(
        "[TASK] For every asset listed above give a view in [-1, 1] on its outlook (-1 very negative, "
        "+1 very positive), detect the market regime, state your confidence and summarise the macro picture."
    )
    lines.append("[SCHEMA] " + S1_SCHEMA)
    lines.append(FORMAT_CONTRACT)
    return "\n".join(lines)


def render_s2(snap: MarketSnapshot, views: np.ndarray, notes: dict | None = None, threshold: float | None = None,
              style: str = "full", config: PortBenchConfig | None = None) -> str:
    """S2 (signal generation) prompt: the agent's own S1 views (spec §4.2: ``threshold`` None states the
    truth's ``config.scoring.signal_threshold``, ±0.2 by default; paper mode states ``threshold=0.15``).
    ``style``: one of ``PROMPT_STYLES`` (module docstring); ``config``: the env's config (None: the defaults)."""
    notes = notes or {}
    config = _rules(config)
    threshold = config.scoring.signal_threshold if threshold is None else threshold
    if style != "full":
        return _s2_short(snap, views, notes, threshold, check_prompt_style(style), _regime(config))
    lines = _header(snap, "S2 SIGNAL GENERATION", _regime(config))
    lines.append("[YOUR S1 VIEWS]")
    tk = snap.tickers
    vals = np.asarray(views)[snap.available].tolist()
    lines += [f"{tk[i]}: view={v:+.3f}" for i, v in zip(snap.avail_idx.tolist(), vals)]
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
              strengths: np.ndarray | None = None, corr_table: str = "upper", style: str = "full",
              cache: dict | None = None, config: PortBenchConfig | None = None) -> str:
    """S3 (weight optimisation) prompt: signals, current weights, NAV, correlations, constraints,
    and (clean mode) the investor profile (spec §4.3, §3.1). ``style``: one of ``PROMPT_STYLES``;
    ``cache``: None or the row's block cache (module docstring); ``config``: the env's config, whose
    rules the prompt states (the cost model's ``describe(style)``, the regime rule; None: the defaults)."""
    from quantgym.envs.portbench.stages import SIGNAL_NAMES

    config = _rules(config)
    rt, costs = _regime(config), describe_model(config.costs, style=check_prompt_style(style))
    if style != "full":
        return _s3_short(snap, signals, profile_block, nav_units, strengths, style, cache, rt, costs)

    lines = [_block(cache, snap, ("s3_header", rt), lambda: "\n".join(_header(snap, "S3 WEIGHT OPTIMISATION", rt)))]
    if profile_block:  # paper mode (§3.1): no profile block in S3
        lines.append(profile_block)
    lines.append("[YOUR S2 SIGNALS] ticker: signal (strength)")
    tk, avail = snap.tickers, snap.available
    idx = snap.avail_idx.tolist()
    names = [SIGNAL_NAMES[int(sg)] for sg in np.asarray(signals)[avail].tolist()]
    if strengths is None:  # the default strength 0.5 prints as (0.50)
        lines += [tk[i] + ": " + nm + " (0.50)" for i, nm in zip(idx, names)]
    else:
        lines += [f"{tk[i]}: {nm} ({float(st):.2f})"
                  for i, nm, st in zip(idx, names, np.asarray(strengths)[avail].tolist())]
    cwv = snap.current_weights
    held = np.flatnonzero(cwv > 5e-4)
    cw = {tk[i]: round(float(w), 3) for i, w in zip(held.tolist(), cwv[held].tolist())}
    lines.append("[CURRENT WEIGHTS] " + json.dumps(cw))
    lines.append(f"[NAV] {snap.nav * nav_units:,.2f}")
    lines.append(_block(cache, snap, ("corr", corr_table, None), lambda: correlation_block(snap, corr_table)))
    lines.append(
        "[CONSTRAINTS] Long-only weights in [0, 1] that sum to 1, only over the assets listed under your signals. "
        "Assets with a 'sell' signal should ideally get 0, 'buy' assets should be increased; avoid unnecessary "
        f"turnover ({costs})."
    )
    lines.append("[SCHEMA] " + S3_SCHEMA)
    lines.append(FORMAT_CONTRACT)
    return "\n".join(lines)


# ------------------------------------------------------------------------------ compact / minimal styles
#: news characters kept by the short styles (the investor profile block comes first and is kept)
NEWS_CHARS = {"compact": 1500, "minimal": 400}
#: characters of the agent's own S1 macro summary repeated in S2 by the short styles
SUMMARY_CHARS = {"compact": 600, "minimal": 200}
#: the macro series of the minimal style (policy rate, inflation, labour, curve, credit, volatility)
MINIMAL_MACRO_KEYS = ("fed_funds_rate", "cpi_yoy", "unemployment", "t10y2y_spread", "hy_oas", "vix")
_SHORT_CONTRACT = "Reply with one JSON object only: no prose, no code fences."


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(n - 3, 0)].rstrip() + "..."


def _short_header(snap: MarketSnapshot, stage: str, style: str, regime: tuple[str, int]) -> list[str]:
    b = _blind(snap)
    if b:  # blind mode: the decision's number, day 0, the regime ticker's alias
        if style == "compact":
            return [f"[PORTBENCH {stage}] {b['label'].capitalize()}, day 0 (data through its close).",
                    f"Regime ({b['regime_ticker']} {regime[1]}-day rule): {REGIME_DISPLAY[snap.regime]}"]
        return [f"[PORTBENCH {stage}] {b['label'].capitalize()}, day 0 (data to its close). "
                f"Regime ({b['regime_ticker']} {regime[1]}d): {REGIME_DISPLAY[snap.regime]}"]
    if style == "compact":
        return [f"[PORTBENCH {stage}] Decision date: {snap.decision_date.date()} (data through its close).",
                f"Regime ({regime[0]} {regime[1]}-day rule): {REGIME_DISPLAY[snap.regime]}"]
    return [f"[PORTBENCH {stage}] Date {snap.decision_date.date()} (data to its close). "
            f"Regime ({regime[0]} {regime[1]}d): {REGIME_DISPLAY[snap.regime]}"]


def _by_class(snap: MarketSnapshot, idx) -> list[tuple[str, list[int]]]:
    """Available assets grouped by class (class order of ASSET_CLASSES, canonical order inside)."""
    return [(c, [int(i) for i in idx if snap.classes[i] == c]) for c in ASSET_CLASSES
            if any(snap.classes[i] == c for i in idx)]


def class_correlation_lines(snap: MarketSnapshot) -> list[str]:
    """Class averages only: intra-class means and the inter-class pairs (upper triangle, classes present)."""
    idx = snap.avail_idx
    counts = np.bincount(snap.class_id[idx], minlength=len(ASSET_CLASSES))
    intra = [f"{name} {_num(snap.intra[c])}" for c, name in enumerate(ASSET_CLASSES)
             if counts[c] >= 2 and np.isfinite(snap.intra[c])]
    present = [c for c in range(len(ASSET_CLASSES)) if counts[c] > 0]
    inter = []
    for a, ia in enumerate(present):
        for ib in present[a + 1:]:
            v = snap.inter[ia, ib]
            inter.append(f"{ASSET_CLASSES[ia]}/{ASSET_CLASSES[ib]} {'nan' if not np.isfinite(v) else _num(v)}")
    out = []
    if intra:
        out.append("intra-class mean: " + ", ".join(intra))
    if inter:
        out.append("inter-class mean: " + ", ".join(inter))
    return out


def top_correlation_line(snap: MarketSnapshot, max_assets: int | None = None) -> str:
    """Each available asset's most correlated other available asset: ``"SPY IVV 1.00; QQQ XLK .97; ..."``."""
    idx = snap.avail_idx
    sub = snap.corr[np.ix_(idx, idx)].copy()
    np.fill_diagonal(sub, np.nan)
    parts = []
    for a, i in enumerate(idx[:max_assets]):
        row = sub[a]
        if not np.isfinite(row).any():
            continue
        b = int(np.nanargmax(row))
        parts.append(f"{snap.tickers[i]} {snap.tickers[idx[b]]} {_num(row[b])}")
    return "; ".join(parts)


def _short_corr(snap: MarketSnapshot, style: str, max_assets: int | None = None) -> list[str]:
    if style == "compact":
        lines = ["[CORRELATIONS] Pearson correlation of the daily returns in the window.",
                 "most correlated other asset: " + top_correlation_line(snap, max_assets)]
    else:
        lines = ["[CORRELATIONS] daily returns, class averages"]
    return lines + class_correlation_lines(snap)


def _short_macro(snap: MarketSnapshot, macro_keys, style: str) -> str:
    keys = list(macro_keys)
    if style == "compact":  # the union of full's two macro lines (first 5 with a value, others when non-zero)
        sel = [i for i, k in enumerate(keys) if snap.macro_mask[i] and (i < 5 or snap.macro[i] != 0)]
        head = "[MACRO] (publication lags applied) "
    else:
        sel = [i for i, k in enumerate(keys) if k in MINIMAL_MACRO_KEYS and snap.macro_mask[i]]
        head = "[MACRO] "
    if _blind(snap):
        return head + "z-scores over the window: " + ", ".join(f"{keys[i]} {snap.macro[i]:+.1f}" for i in sel)
    return head + ", ".join(f"{keys[i]} {snap.macro[i]:.4g}" for i in sel)


def _short_news(snap: MarketSnapshot, style: str) -> list[str]:
    return ["[NEWS] " + _cut(snap.news_text, NEWS_CHARS[style])] if snap.news_text else []


def _s1_short(snap: MarketSnapshot, macro_keys, style: str, max_assets: int | None,
              max_corr_assets: int | None, cache: dict | None, regime: tuple[str, int]) -> str:
    head = _block(cache, snap, ("s1_short", style, tuple(macro_keys), max_assets, max_corr_assets, regime),
                  lambda: _s1_short_head(snap, macro_keys, style, max_assets, max_corr_assets, regime))
    lines = [head] + _short_news(snap, style)
    if style == "compact":
        lines.append("[TASK] For every asset listed above give a view in [-1, 1] on its outlook (-1 very negative, "
                     "+1 very positive), detect the market regime, state your confidence and summarise the macro "
                     "picture.")
    else:
        lines.append("[TASK] Per listed asset a view in [-1, 1] (-1 very negative, +1 very positive); "
                     "the regime; your confidence; a macro summary.")
    lines.append("[SCHEMA] " + S1_SCHEMA)
    lines.append(FORMAT_CONTRACT if style == "compact" else _SHORT_CONTRACT)
    return "\n".join(lines)


def _s1_short_head(snap: MarketSnapshot, macro_keys, style: str, max_assets: int | None,
                   max_corr_assets: int | None, regime: tuple[str, int]) -> str:
    """Short-style S1 header, asset lines, macro line and correlation lines (row-dependent only)."""
    idx = snap.avail_idx[:max_assets]
    lines = _short_header(snap, "S1 MARKET INTERPRETATION", style, regime)
    if style == "compact":
        lines.append("[ASSETS] ticker class ret% vol% (return over the window, annualised volatility)")
        lines += [f"{snap.tickers[i]} {snap.classes[i]} {100 * snap.trailing_return[i]:+.1f} "
                  f"{100 * snap.ann_vol[i]:.1f}" for i in idx]
    else:
        lines.append("[ASSETS] class: ticker ret% vol% (window return, annual volatility)")
        lines += [f"{c}: " + ", ".join(f"{snap.tickers[i]} {100 * snap.trailing_return[i]:+.1f} "
                                       f"{100 * snap.ann_vol[i]:.0f}" for i in members)
                  for c, members in _by_class(snap, idx)]
    lines.append(_short_macro(snap, macro_keys, style))
    lines += _short_corr(snap, style, max_corr_assets)
    return "\n".join(lines)


def _s2_short(snap: MarketSnapshot, views: np.ndarray, notes: dict, threshold: float, style: str,
              regime: tuple[str, int]) -> str:
    idx = snap.avail_idx
    lines = _short_header(snap, "S2 SIGNAL GENERATION", style, regime)
    summary = _cut(str(notes.get("macro_summary", "n/a")), SUMMARY_CHARS[style])
    if style == "compact":
        lines.append("[YOUR S1 VIEWS] ticker view")
        lines += [f"{snap.tickers[i]} {views[i]:+.3f}" for i in idx]
    else:
        lines.append("[YOUR S1 VIEWS] " + ", ".join(f"{snap.tickers[i]} {_signed(views[i])}" for i in idx))
    lines.append(f"Your detected regime: {notes.get('detected_regime', 'n/a')}. Your macro summary: {summary}")
    lines += _short_news(snap, style)
    lines.append(
        f"[RULES] Signal per asset: 'buy' if its view > +{threshold:g}, 'sell' if < -{threshold:g}, else 'hold'; "
        "and a strength in [0, 1].")
    lines.append("[SCHEMA] " + S2_SCHEMA)
    lines.append(FORMAT_CONTRACT if style == "compact" else _SHORT_CONTRACT)
    return "\n".join(lines)


def _signed(x: float) -> str:
    """Two decimals with a sign and without a leading zero (``+.12``, ``-.72``, ``+1.00``)."""
    return _num(x) if x < 0 else "+" + _num(x)


def _w3(x: float) -> str:
    """A weight with 3 decimals, no leading zero (``.013``, ``0``, ``1``)."""
    s = f"{x:.3f}".rstrip("0").rstrip(".")
    return s[1:] if s.startswith("0.") else s


def _s3_short(snap: MarketSnapshot, signals: np.ndarray, profile_block: str, nav_units: float,
              strengths: np.ndarray | None, style: str, cache: dict | None, regime: tuple[str, int], costs: str) -> str:
    from quantgym.envs.portbench.stages import SIGNAL_NAMES

    idx = snap.avail_idx
    lines = [_block(cache, snap, ("s3_short_header", style, regime),
                    lambda: "\n".join(_short_header(snap, "S3 WEIGHT OPTIMISATION", style, regime)))]
    if profile_block:  # paper mode (§3.1): no profile block in S3
        lines.append(profile_block)
    cw = snap.current_weights
    lines.append("[YOUR S2 SIGNALS] ticker signal strength current-weight")

    def row(i: int) -> str:
        st = 0.5 if strengths is None else float(strengths[i])
        w = cw[i] if cw[i] > 5e-4 else 0.0  # full lists weights above 5e-4
        return f"{snap.tickers[i]} {SIGNAL_NAMES[int(signals[i])]} {_w3(round(st, 2))} {_w3(w)}"

    if style == "compact":
        lines += [row(int(i)) for i in idx]
    else:
        lines += [f"{c}: " + ", ".join(row(i) for i in members) for c, members in _by_class(snap, idx)]
    held = [i for i in range(len(snap.tickers)) if cw[i] > 5e-4 and not snap.available[i]]
    if held:
        lines.append("[OTHER HOLDINGS] (not available now) " + ", ".join(f"{snap.tickers[i]} {_w3(cw[i])}" for i in held))
    lines.append(f"[NAV] {snap.nav * nav_units:,.2f}")
    lines.append(_block(cache, snap, ("short_corr", style), lambda: "\n".join(_short_corr(snap, style))))
    if style == "compact":
        lines.append(
            "[CONSTRAINTS] Long-only weights in [0, 1] that sum to 1, only over the assets listed under your "
            "signals. Assets with a 'sell' signal should ideally get 0, 'buy' assets should be increased; avoid "
            f"unnecessary turnover ({costs}).")
    else:
        lines.append(
            "[CONSTRAINTS] Long-only weights in [0, 1] summing to 1, only over the listed assets; 'sell' ideally 0, "
            f"'buy' increased; avoid needless turnover ({costs}).")
    lines.append("[SCHEMA] " + S3_SCHEMA)
    lines.append(FORMAT_CONTRACT if style == "compact" else _SHORT_CONTRACT)
    return "\n".join(lines)


# ------------------------------------------------------------------------------ tool mode
def tools_note(names, calls: int, chars: int) -> str:
    """The brief's ``[TOOLS]`` line: there is no data in the prompt, which tools read it and the stage budget."""
    return (f"[TOOLS] This prompt holds no market data: call the tools to read what you need (data up to the "
            f"decision date only), then give the stage answer. Per stage: {calls} tool calls, {chars:,} result "
            f"characters. Tools: {', '.join(names)}.")


def render_tool_brief(stage: int, snap: MarketSnapshot, note: str, config: PortBenchConfig | None = None,
                      style: str = "full", views: np.ndarray | None = None, notes: dict | None = None,
                      signals: np.ndarray | None = None, strengths: np.ndarray | None = None, news: str = "") -> str:
    """The stage prompt of tool mode (docs/tools.md): the stage's brief without the data tables, which the agent
    reads through tools (``note``: :func:`tools_note`). S1: the header, the ids to answer for, the task;
    S2: the S2 prompt (it holds no market data, only the agent's own views) with the note; S3: the header,
    the agent's own signals, the constraints (the profile, weights, NAV and correlations are tools).
    ``news``: the text provider's news (S1), if any."""
    from quantgym.envs.portbench.stages import SIGNAL_NAMES

    config = _rules(config)
    style = check_prompt_style(style)
    rt = _regime(config)
    if stage == 1:
        text = render_s2(snap, views, notes, style=style, config=config)
        return text.replace("\n[RULES]", "\n" + note + "\n[RULES]", 1)
    contract = FORMAT_CONTRACT if style != "minimal" else _SHORT_CONTRACT
    head = _header(snap, "S1 MARKET INTERPRETATION" if stage == 0 else "S3 WEIGHT OPTIMISATION", rt)
    idx = snap.avail_idx.tolist()
    if stage == 0:
        lines = head + [note, f"[ASSETS] {len(idx)} available assets (details: list_universe): "
                        + ", ".join(snap.tickers[i] for i in idx)]
        if news:
            lines.append("[NEWS]\n" + _cut(news, NEWS_CHARS.get(style, 3000)))
        lines += ["[TASK] For every available asset give a view in [-1, 1] on its outlook (-1 very negative, "
                  "+1 very positive), detect the market regime, state your confidence and summarise the macro picture.",
                  "[SCHEMA] " + S1_SCHEMA, contract]
        return "\n".join(lines)
    st = np.full(len(snap.tickers), 0.5) if strengths is None else np.asarray(strengths, dtype=np.float64)
    sig = np.asarray(signals)
    lines = head + ["[YOUR S2 SIGNALS] id signal strength: " + ", ".join(
        f"{snap.tickers[i]} {SIGNAL_NAMES[int(sig[i])]} {_w3(round(float(st[i]), 2))}" for i in idx), note]
    costs = describe_model(config.costs, style=style)
    lines += ["[CONSTRAINTS] Long-only weights in [0, 1] that sum to 1, only over the assets listed under your "
              "signals, within your investor profile (investor_profile). Assets with a 'sell' signal should ideally "
              f"get 0, 'buy' assets should be increased; avoid unnecessary turnover from the current weights "
              f"(portfolio; {costs}).", "[SCHEMA] " + S3_SCHEMA, contract]
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
