"""Blind evaluation: what an agent is told without the names, dates and levels that identify a window.

A model trained on text up to its cutoff may recognise a historical window from a ticker, a date or a
level (a VIX of 82 names March 2020) and answer from memory instead of skill. Blind mode replaces them
in what the agent sees; the scores are computed on the real data exactly as in named mode (docs/blind.md).

This module names no task. It provides

- :class:`AliasMap`: tickers / codes → aliases that keep only the class a task needs (``EQ07``,
  ``BD03``, ``CR02``), drawn from the episode seed, stable within an episode, recorded evaluator-side;
- relative time: :func:`relative_days`, :func:`day_label`, :func:`decision_label` ("day -59 … day 0");
- level blinding: :func:`rebase` (100 at the window start), :func:`zscore` and :func:`change` of macro
  series over the window (never levels), :func:`relative_volume`;
- :func:`scan`, the leak scanner: tickers, names, A-share codes, ISO and written dates, years
  2010–2026, period names and numbers equal to given real levels; :func:`bundled_vocabulary`
  collects the bundled tickers, names, codes and period names from the registered tasks (each task
  record's ``blind_vocabulary``).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

#: asset class → the two-letter alias prefix (a class not listed uses its first two letters, upper case)
CLASS_PREFIX: dict[str, str] = {
    "equities": "EQ", "equity": "EQ", "stock": "EQ", "stocks": "EQ",
    "bonds": "BD", "bond": "BD", "fixed_income": "BD",
    "commodities": "CM", "commodity": "CM",
    "real_estate": "RE", "reit": "RE",
    "cryptocurrency": "CR", "crypto": "CR",
    "cash": "CA",
}


def class_prefix(cls: str) -> str:
    """The alias prefix of asset class ``cls`` (:data:`CLASS_PREFIX`, else its first two letters)."""
    key = str(cls).strip().lower()
    if key in CLASS_PREFIX:
        return CLASS_PREFIX[key]
    letters = re.sub(r"[^A-Za-z]", "", key).upper()
    if not letters:
        raise ValueError(f"asset class {cls!r} has no letters to build an alias prefix from")
    return (letters + "X")[:2]


class AliasMap:
    """Real identifiers → aliases by class, drawn from a seed (blind mode, docs/blind.md).

    Parameters
    ----------
    items : the real tickers / codes, in the task's canonical order.
    classes : each item's class (same length): the only thing an alias keeps.
    seed : the episode seed (int, None or a ``numpy.random.Generator``): within each class the alias
        numbers are a permutation drawn with ``numpy.random.default_rng(seed)``, so an alias says nothing
        about the item's position in the canonical order and cannot be learned across seeds.
    prefixes : class → prefix overrides (default :func:`class_prefix`).

    Aliases are ``PREFIX`` + a number from 1, zero-padded to two digits (``EQ07``; three digits from
    100 members of a class). :meth:`alias` and :meth:`real` map both ways; :meth:`to_dict` is the
    evaluator-side record (never shown to the agent).
    """

    def __init__(self, items: Sequence[str], classes: Sequence[str], seed: Any = None,
                 prefixes: Mapping[str, str] | None = None):
        items, classes = [str(x) for x in items], [str(c) for c in classes]
        if len(items) != len(classes):
            raise ValueError(f"AliasMap: {len(items)} items but {len(classes)} classes")
        if len(set(items)) != len(items):
            raise ValueError("AliasMap: the items repeat")
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.seed = None if isinstance(seed, np.random.Generator) else seed
        prefixes = dict(prefixes or {})
        by_class: dict[str, list[int]] = {}
        for i, c in enumerate(classes):
            by_class.setdefault(c, []).append(i)
        aliases: list[str] = [""] * len(items)
        used: dict[str, str] = {}
        for c in sorted(by_class):  # sorted: the draw does not depend on the order classes first appear
            members = by_class[c]
            prefix = prefixes.get(c) or class_prefix(c)
            if used.setdefault(prefix, c) != c:
                raise ValueError(f"AliasMap: classes {used[prefix]!r} and {c!r} share the prefix {prefix!r}")
            width = max(2, len(str(len(members))))
            for i, k in zip(members, rng.permutation(len(members)) + 1):
                aliases[i] = f"{prefix}{int(k):0{width}d}"
        self.items: tuple[str, ...] = tuple(items)
        self.classes: tuple[str, ...] = tuple(classes)
        self.aliases: tuple[str, ...] = tuple(aliases)
        self._to_alias = dict(zip(self.items, self.aliases))
        self._to_real = dict(zip(self.aliases, self.items))

    def __len__(self) -> int:
        return len(self.items)

    def alias(self, item: str) -> str:
        """The alias of real ``item`` (KeyError when it is not in the map)."""
        return self._to_alias[item]

    def real(self, alias: str, default: Any = KeyError) -> Any:
        """The real item behind ``alias``; an unknown alias raises KeyError unless ``default`` is given."""
        if default is KeyError:
            return self._to_real[alias]
        return self._to_real.get(alias, default)

    def to_dict(self) -> dict[str, Any]:
        """The evaluator-side record: ``{"seed": …, "aliases": {real: alias}}`` (results, never the agent)."""
        return {"seed": self.seed if self.seed is None or isinstance(self.seed, (int, str))
                else repr(self.seed), "aliases": dict(self._to_alias)}

    def __repr__(self) -> str:
        return f"AliasMap({len(self)} items, {len(set(self.classes))} classes)"


# ----------------------------------------------------------------------------------------- time
def relative_days(n: int, anchor: int | None = None) -> np.ndarray:
    """Relative trading days of ``n`` consecutive rows whose last (or ``anchor``-th) row is day 0:
    ``relative_days(60)`` is ``[-59, …, 0]``."""
    anchor = n - 1 if anchor is None else int(anchor)
    return np.arange(n, dtype=np.int64) - anchor


def day_label(k: int) -> str:
    """``"day -59"``, ``"day 0"``, ``"day +5"``: a trading day relative to the decision day."""
    k = int(k)
    return f"day {k:+d}" if k > 0 else f"day {k}"


def decision_label(k: int, n: int | None = None) -> str:
    """``"decision 3"`` or ``"decision 3 of 12"`` (``k`` 0-based: decisions are numbered from 1)."""
    return f"decision {int(k) + 1}" + ("" if n is None else f" of {int(n)}")


# ----------------------------------------------------------------------------------------- levels
def rebase(prices: np.ndarray, base: float = 100.0, axis: int = 0) -> np.ndarray:
    """Prices rebased to ``base`` at the first valid value along ``axis`` (NaN stays NaN; a series
    without a positive first value is all NaN)."""
    p = np.asarray(prices, dtype=np.float64)
    moved = np.moveaxis(p, axis, 0)
    valid = np.isfinite(moved)
    first_idx = np.argmax(valid, axis=0)
    first = np.take_along_axis(moved, first_idx[None, ...], axis=0)[0]
    first = np.where(valid.any(axis=0) & (first > 0), first, np.nan)
    return np.moveaxis(base * moved / first, 0, axis)


def change(series: np.ndarray, axis: int = 0) -> np.ndarray:
    """Last valid value minus first valid value along ``axis`` (the change over the window)."""
    s = np.moveaxis(np.asarray(series, dtype=np.float64), axis, 0)
    valid = np.isfinite(s)
    any_valid = valid.any(axis=0)
    first = np.take_along_axis(s, np.argmax(valid, axis=0)[None, ...], axis=0)[0]
    last = np.take_along_axis(s, (s.shape[0] - 1 - np.argmax(valid[::-1], axis=0))[None, ...], axis=0)[0]
    return np.where(any_valid, last - first, np.nan)


def zscore(series: np.ndarray, axis: int = 0) -> np.ndarray:
    """The last valid value standardised over the window: ``(last − mean) / std`` (ddof 0) along
    ``axis``; 0 for a constant series, NaN without a valid value. ``|z| ≤ √(n − 1)`` over n values."""
    s = np.moveaxis(np.asarray(series, dtype=np.float64), axis, 0)
    if s.shape[0] == 0:
        return np.full(s.shape[1:], np.nan)
    valid = np.isfinite(s)
    cnt = valid.sum(axis=0)
    s0 = np.where(valid, s, 0.0)
    mean = np.divide(s0.sum(axis=0), cnt, out=np.zeros(cnt.shape), where=cnt > 0)
    var = np.divide((np.where(valid, s - mean, 0.0) ** 2).sum(axis=0), cnt, out=np.zeros(cnt.shape), where=cnt > 0)
    std = np.sqrt(var)
    last = np.take_along_axis(s, (s.shape[0] - 1 - np.argmax(valid[::-1], axis=0))[None, ...], axis=0)[0]
    ok = std > 1e-12 * np.maximum(1.0, np.abs(mean))
    z = np.divide(last - mean, std, out=np.zeros(std.shape), where=ok)
    return np.where(cnt > 0, z, np.nan)


def relative_volume(volume: np.ndarray, axis: int = 0) -> np.ndarray:
    """Volumes in units of their window mean along ``axis`` (1 = an average day; NaN when the mean is 0)."""
    v = np.asarray(volume, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nanmean(v, axis=axis, keepdims=True)
        return np.where(mean > 0, v / np.where(mean > 0, mean, 1.0), np.nan)


# ----------------------------------------------------------------------------------------- scanner
@dataclass(frozen=True)
class Leak:
    """One finding of :func:`scan`: ``kind`` ("ticker", "name", "code", "date", "year", "period",
    "level"), the matched ``text`` and its span ``start:end`` in the scanned text."""

    kind: str
    text: str
    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.kind} {self.text!r} at {self.start}"


_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
          r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?")
_YEAR4 = r"(?:19|20)\d{2}"
_DATE_PATTERNS = (
    rf"(?<!\d){_YEAR4}[-/.](?:0?[1-9]|1[0-2])[-/.](?:0?[1-9]|[12]\d|3[01])(?!\d)",  # 2020-02-07, 2020/2/7
    rf"(?<!\d)(?:0?[1-9]|[12]\d|3[01])[-/.](?:0?[1-9]|[12]\d|3[01])[-/.]{_YEAR4}(?!\d)",  # 07/02/2020, 2/7/2020
    rf"(?<!\d)(?:19|20)\d{{2}}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])(?!\d)",  # 20200207
    rf"\b{_MONTH}\s+(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?\b(?:,?\s+{_YEAR4}\b)?",  # Feb 7, Feb 7 2020
    rf"\b(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR4})?\b",  # 7 February 2020
    rf"\b{_MONTH},?\s+{_YEAR4}\b",  # February 2020
    rf"(?<![\w-]){_YEAR4}-(?:0[1-9]|1[0-2])(?![\d-])",  # 2020-02
)
_DATE_RE = re.compile("|".join(f"(?:{p})" for p in _DATE_PATTERNS))
#: a year 2010–2026 standing alone (not part of a longer number or a decimal)
_YEAR_RE = re.compile(r"(?<![\d.,])20(?:1\d|2[0-6])(?!\d|[.,]\d)")
#: an A-share code: six digits of a Shanghai / Shenzhen / Beijing board, optionally with its suffix;
#: any six digits with an explicit .SH/.SZ/.BJ suffix
_CODE_RE = re.compile(r"(?<![\d.,])(?:(?:00[0-3]|30[01]|60[0-5]|68[89]|8[3-9]\d|43\d)\d{3}(?:\.(?:SH|SZ|BJ))?"
                      r"|\d{6}\.(?:SH|SZ|BJ|sh|sz|bj))(?![\d])")
#: a printed number: optional sign, digits with thousands separators, decimals; or a leading-dot decimal
_NUM_RE = re.compile(r"(?<![\w.])[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?![\w])")


def _sig_digits(digits: str) -> int:
    return len(digits.lstrip("0"))


def _parse_level(x: Any, decimals: int) -> tuple[float, int, int, bool] | None:
    """(value, decimals, significant digits, is_percent) of a level given as a float or a printed string."""
    if isinstance(x, str):
        s = x.strip().replace(",", "").replace("−", "-")
        pct = s.endswith("%")
        s = s.rstrip("%").strip()
        try:
            v = float(s)
        except ValueError:
            raise ValueError(f"scan: level {x!r} is not a number") from None
        dec = len(s.split(".", 1)[1]) if "." in s else 0
    else:
        v = float(x)
        if not np.isfinite(v):
            return None
        s = f"{v:.{decimals}f}"
        v, dec, pct = float(s), decimals, False
    digits = s.lstrip("+-").replace(".", "")
    return v, dec, _sig_digits(digits), pct


def _word_re(words: Iterable[str], flags: int = 0) -> re.Pattern | None:
    words = sorted({w for w in (str(w).strip() for w in words) if w}, key=len, reverse=True)
    if not words:
        return None
    return re.compile(r"(?<![A-Za-z0-9_^])(?:" + "|".join(re.escape(w) for w in words) + r")(?![A-Za-z0-9_])",
                      flags)


def _period_words(names: Iterable[str]) -> list[str]:
    """Period names as written: ``covid_2020`` also as ``covid 2020`` and ``covid-2020``."""
    out = []
    for n in names:
        n = str(n).strip()
        if n:
            out += [n, n.replace("_", " "), n.replace("_", "-")]
    return out


def scan(text: str, *, tickers: Iterable[str] = (), names: Iterable[str] = (), levels: Iterable[Any] = (),
         period_names: Iterable[str] = (), level_decimals: int = 2, min_level_digits: int = 3,
         codes: bool = True, dates: bool = True, years: bool = True) -> list[Leak]:
    """The leaks of ``text``: whatever could date a window or name an asset (docs/blind.md).

    Parameters
    ----------
    text : the prompt (or any text) to check.
    tickers : tickers / codes to find as whole words, case-sensitive (``"SPY"``, ``"BTC-USD"``).
    names : asset or company names to find as whole words, case-insensitive.
    levels : real levels (prices, macro values) to find as printed numbers: a float is printed with
        ``level_decimals`` decimals, a string is taken as printed (``"14.96"``, ``"1.59%"``). A number
        of the text is a leak when it has at least the level's decimals and rounds to the level there
        (``"302.81"``, ``"+302.810"`` and ``"302.814"`` name 302.81; ``"302.8"`` does not). Levels with fewer than
        ``min_level_digits`` significant digits are skipped (``"4"`` or ``"0.52"`` date nothing by
        themselves). A number followed by ``%`` is compared only with levels given as percentages.
    period_names : period names or labels, case-insensitive (``covid_2020`` also matches
        ``covid 2020``).
    codes : find A-share codes (six digits of a Shanghai / Shenzhen / Beijing board, optionally
        ``.SH``/``.SZ``/``.BJ``; any six digits with such a suffix).
    dates : find ISO and written dates (``2020-02-07``, ``2/7/2020``, ``Feb 7 2020``,
        ``7 February 2020``, ``February 2020``, ``2020-02``).
    years : find any year 2010–2026 standing alone.

    Returns
    -------
    list[Leak] in text order (a span found as a date is not reported again as a year or a code).
    """
    leaks: list[Leak] = []
    taken = bytearray(len(text))  # 1 where a reported leak lies: one lookup per finding, linear in the text

    def add(kind: str, m: re.Match) -> None:
        a, b = m.span()
        if taken.find(1, a, b) != -1:
            return
        taken[a:b] = b"\x01" * (b - a)
        leaks.append(Leak(kind, m.group(0), a, b))

    if dates:
        for m in _DATE_RE.finditer(text):
            add("date", m)
    for kind, rx in (("period", _word_re(_period_words(period_names), re.IGNORECASE)),
                     ("ticker", _word_re(tickers)), ("name", _word_re(names, re.IGNORECASE))):
        if rx is not None:
            for m in rx.finditer(text):
                add(kind, m)
    if codes:
        for m in _CODE_RE.finditer(text):
            add("code", m)
    if years:
        for m in _YEAR_RE.finditer(text):
            add("year", m)
    parsed = [p for p in (_parse_level(x, level_decimals) for x in levels) if p is not None]
    parsed = [p for p in parsed if p[2] >= min_level_digits]
    if parsed:
        for m in _NUM_RE.finditer(text):
            s = m.group(0)
            if not any(ch.isdigit() for ch in s):
                continue
            pct = text[m.end():m.end() + 1] == "%"
            body = s.replace(",", "").replace("−", "-")
            dec = len(body.split(".", 1)[1]) if "." in body else 0
            v = float(body)
            for lv, ldec, _, lpct in parsed:
                if lpct == pct and dec >= ldec and round(v, ldec) == lv:
                    add("level", m)
                    break
    leaks.sort(key=lambda k: k.start)
    return leaks


# ----------------------------------------------------------------------------------------- vocabulary
@dataclass
class Vocabulary:
    """What :func:`scan` looks for in a task's bundled data: tickers, names, codes and period names."""

    tickers: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    codes: set[str] = field(default_factory=set)
    period_names: set[str] = field(default_factory=set)

    def update(self, other: "Vocabulary | Mapping[str, Iterable[str]]") -> "Vocabulary":
        get = (lambda k: getattr(other, k)) if isinstance(other, Vocabulary) else (lambda k: other.get(k, ()))
        for k in ("tickers", "names", "codes", "period_names"):
            getattr(self, k).update(str(x) for x in get(k))
        return self

    def scan(self, text: str, **kwargs) -> list[Leak]:
        """:func:`scan` of ``text`` with this vocabulary (codes are scanned as tickers, too)."""
        return scan(text, tickers=self.tickers | self.codes, names=self.names, period_names=self.period_names,
                    **kwargs)


def bundled_vocabulary(task_names: Iterable[str] | None = None) -> Vocabulary:
    """The bundled tickers, names, A-share codes and period names of the registered tasks (or of
    ``task_names``): each task record's ``blind_vocabulary`` (``"module:function"`` returning a mapping
    with any of ``tickers``, ``names``, ``codes``, ``period_names``) is loaded and called lazily."""
    from quantgym.tasks import get_task, load_ref, tasks

    chosen = tasks() if task_names is None else [get_task(n) for n in task_names]
    vocab = Vocabulary()
    for task in chosen:
        ref = getattr(task, "blind_vocabulary", None)
        if ref:
            vocab.update(load_ref(ref)())
    return vocab


__all__ = ["AliasMap", "CLASS_PREFIX", "Leak", "Vocabulary", "bundled_vocabulary", "change", "class_prefix",
           "day_label", "decision_label", "rebase", "relative_days", "relative_volume", "scan", "zscore"]
