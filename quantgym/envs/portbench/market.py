"""Market snapshots and point-in-time views (spec §1.6–§1.9, §11.6).

A :class:`MarketSnapshot` holds everything an agent may see at decision date ``d``:
it is built from rows ``≤ t`` of :class:`quantgym.envs.portbench.data.PortBenchData` only, so a
change to any later row cannot change it (tested). Forward data never enter a
snapshot; the ex-post oracle reads them in :mod:`.stages` (scoring only).

Longer than 500 lines as one job, what an agent may see at a date: the per-dataset row table and the
snapshot built from it share the window and availability rules, which must not drift apart.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Hashable

import numpy as np
import pandas as pd

from quantgym.envs.portbench.universe import ASSET_CLASSES
from quantgym.envs.portbench.availability import available_mask, market_regime
from quantgym.envs.portbench.availability import REGIME_LABELS as REGIMES  # noqa: F401 (re-exported)
from quantgym.envs.portbench.config import PortBenchConfig
from quantgym.envs.portbench.correlation import class_correlations, corr_and_obs, obs_corr_rows
from quantgym.envs.portbench.correlation_rolling import ROLLING_MIN_N, RollingCross, obs_corr_rolled
from quantgym.jit import jit_enabled, njit
#: how a regime is displayed in prompts (§1.9: crisis shows as high-volatility)
REGIME_DISPLAY = {"bull": "bull", "bear": "bear", "sideways": "sideways", "crisis": "high-volatility"}
SQRT252 = np.sqrt(252.0)
#: at most this many decision rows per (dataset, config) keep their O(N) snapshot parts in memory (about 10·N
#: floats each: availability, prices, window statistics, class correlations, cached scorer entries)
ROW_CACHE_MAX = 4096
#: byte budget of the per-(dataset, config) cache of the O(L·N) and O(N²) row arrays (window returns, the
#: correlation matrix, their observation forms), least recently used rows dropped first (speed only: a dropped
#: row is recomputed, to the same values). At N = 80 every daily row of 2016-2023 fits (~185 kB a row); at
#: N = 1000 about 30 rows do (~17 MB a row), so memory stays linear in the number of trading days × N.
ROW_CACHE_BYTES = 512 * 2**20
#: at most this many bytes of window arrays are computed in one batch (:meth:`MarketView.row_array`): 7 daily
#: rows at N = 80 with the correlation, one row from N = 320 (larger batches run slower: the batch leaves the cache)
ROW_BATCH_BYTES = 2**20
#: the row arrays of batches are carved from blocks of about this many bytes (:meth:`RowArrays.carve`)
ROW_BLOCK_BYTES = 32 * 2**20
#: a batch past the budget is carved from one of the last this many such buffers that nothing references any
#: more (the transient batch, the caller's last observation, one to fill), else from a new one
ROW_SPARES = 4
#: the row arrays computed in batches (the others per row)
_BATCHED = frozenset({"returns", "obs_returns", "obs_mask", "obs_corr"})
#: data object -> {config key -> {row -> snapshot parts}}; weak keys so a dropped dataset frees its cache
SHARED_CACHES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def obs_window(returns: np.ndarray, lookback: int) -> tuple[np.ndarray, np.ndarray]:
    """Observation form of a return window (spec §11.2): the last ``lookback`` rows, oldest first,
    zero-padded at the top, missing → 0, clipped to [−1, 10].

    Parameters
    ----------
    returns : (L', N) window returns, NaN = missing (L' may exceed ``lookback`` in paper mode).
    lookback : L.

    Returns
    -------
    ret : (L, N) float64; mask : (L, N) int8, 1 where a return was observed.
    """
    win = returns[-lookback:]
    n = returns.shape[1]
    ret = np.zeros((lookback, n))
    mask = np.zeros((lookback, n), dtype=np.int8)
    k = win.shape[0]
    fin = np.isfinite(win)
    ret[lookback - k:] = np.clip(np.where(fin, win, 0.0), -1.0, 10.0)
    mask[lookback - k:] = fin
    return ret, mask


def _window_stats_numpy(win: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column of a return window (L', N), NaN = missing: the growth ``Π (1 + r)``, the count of
    returns and the sum of squared deviations from their mean (missing returns count as 0 in the growth
    and are left out of the rest). The reference of :func:`_window_stats` (run when ``QUANTGYM_JIT=0``)."""
    fin = np.isfinite(win)
    wz = np.where(fin, win, 0.0)
    growth = np.prod(1.0 + wz, axis=0)
    cnt = fin.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = wz.sum(axis=0) / cnt
        sq = (np.where(fin, (win - mean) ** 2, 0.0)).sum(axis=0)
    return growth, cnt, sq


@njit(error_model="numpy")
def _window_stats(win):  # pragma: no cover - compiled; the interpreted twin is the numpy form
    """:func:`_window_stats_numpy` in one compiled pass per statistic: numpy reduces a C-contiguous window
    over its rows row by row from the first, so these loops add and multiply in its order (the same bits,
    tested)."""
    n_rows, n = win.shape
    growth = np.ones(n)
    cnt = np.zeros(n, np.int64)
    total = np.zeros(n)
    for r in range(n_rows):
        for i in range(n):
            v = win[r, i]
            f = np.isfinite(v)
            w = v if f else 0.0
            growth[i] = growth[i] * (1.0 + w) if r > 0 else 1.0 + w
            cnt[i] += f
            total[i] = total[i] + w if r > 0 else w
    mean = total / cnt
    sq = np.zeros(n)
    for r in range(n_rows):
        for i in range(n):
            v = win[r, i]
            d = (v - mean[i]) ** 2 if np.isfinite(v) else 0.0
            sq[i] = sq[i] + d if r > 0 else d
    return growth, cnt, sq


@njit(error_model="numpy")
def _window_stats_rows(returns, lo, hi):  # pragma: no cover - compiled; the interpreted twin is the numpy form
    """:func:`_window_stats` of the window ``returns[lo[k]:hi[k]]`` of every row ``k``, as (T, N) arrays (one
    compiled call per dataset; each row the same arithmetic as the single-window kernel)."""
    n_rows = lo.shape[0]
    n = returns.shape[1]
    growth = np.empty((n_rows, n))
    cnt = np.empty((n_rows, n), np.int64)
    sq = np.empty((n_rows, n))
    for k in range(n_rows):
        g, c, s = _window_stats(returns[lo[k]:hi[k]])
        growth[k] = g
        cnt[k] = c
        sq[k] = s
    return growth, cnt, sq


@njit
def _window_rows_batch(returns, lo, hi, available, win, z, ret, mask):  # pragma: no cover - compiled
    """The window arrays of a batch of rows: row ``k``'s window ``returns[lo[k]:hi[k]]`` with unavailable columns
    NaN into ``win[k, :hi[k] − lo[k]]`` (:meth:`MarketView.window_returns`), the same with NaN → 0 into ``z[k]``,
    and its observation form into ``ret[k]`` / ``mask[k]`` (:func:`obs_window`: the window in the last rows, the
    rows above zero, clipped to [−1, 10]; the window has at most L rows). Values are copied or selected, never
    computed, except the clip, which keeps numpy's result (signed zeros included)."""
    n = returns.shape[1]
    lookback = ret.shape[1]
    for k in range(lo.shape[0]):
        a = lo[k]
        n_r = hi[k] - a
        off = lookback - n_r
        for r in range(off):
            for i in range(n):
                ret[k, r, i] = 0.0
                mask[k, r, i] = 0
        for r in range(n_r):
            for i in range(n):
                v = returns[a + r, i] if available[k, i] else np.nan
                win[k, r, i] = v
                f = np.isfinite(v)
                c = v if f else 0.0
                z[k, r, i] = c
                c = -1.0 if c < -1.0 else c
                ret[k, off + r, i] = 10.0 if c > 10.0 else c
                mask[k, off + r, i] = f


def row_table(view: "MarketView") -> dict[str, Any]:
    """The O(N) snapshot parts of every row of ``view``'s dataset at once, vectorised over the dates (speed only:
    row ``k`` holds what the per-row rules give at data row ``k``, tested): ``lo`` / ``hi`` (T,) the return
    window ``[lo, hi)`` (:meth:`MarketView.window_rows`), ``available`` (T, N) ``A_d`` (§11.6,
    :func:`~.availability.available_mask`), ``price``, ``trailing_return``, ``ann_vol`` (T, N), ``macro`` /
    ``macro_mask`` (T, 17) and ``regime`` (T,) labels (§1.9, :func:`~.availability.market_regime`). Arrays are
    read-only; computed once per dataset and window config (:data:`SHARED_CACHES`)."""
    config = view.config
    dates64 = view._dates64
    returns = view.returns
    n_rows = returns.shape[0]
    hi = np.arange(1, n_rows + 1, dtype=np.int64)
    lo = np.maximum(hi - config.lookback, 0)
    lo = np.maximum(lo, np.searchsorted(dates64, dates64 - np.timedelta64(config.window_days, "D"), side="left"))
    counts = np.zeros((n_rows + 1, returns.shape[1]), np.int64)
    np.cumsum(np.isfinite(returns), axis=0, out=counts[1:])
    available = np.isfinite(view.prices) & (counts[hi] - counts[lo] >= int(config.min_obs))
    if jit_enabled():
        growth, cnt, sq = _window_stats_rows(returns, lo, hi)
    else:
        stats = [_window_stats_numpy(returns[a:b]) for a, b in zip(lo.tolist(), hi.tolist())]
        growth, cnt, sq = (np.array([x[i] for x in stats]).reshape(n_rows, -1) for i in range(3))
    with np.errstate(invalid="ignore", divide="ignore"):
        var = sq / (cnt - 1)
    vol = np.sqrt(np.where(cnt > 1, var, 0.0)) * SQRT252
    macro_mask = np.isfinite(view.macro)
    out = {
        "lo": lo, "hi": hi, "available": available,
        "price": np.where(available, view.prices, np.nan),
        "trailing_return": np.where(available, growth - 1.0, 0.0),
        "ann_vol": np.where(available, vol, 0.0),
        "macro": np.where(macro_mask, view.macro, 0.0), "macro_mask": macro_mask,
        "regime": _regimes(view, dates64),
    }
    for v in out.values():
        v.flags.writeable = False
    return out


def _regimes(view: "MarketView", dates64: np.ndarray) -> np.ndarray:
    """§1.9 regime label of every row (:func:`~.availability.market_regime` vectorised: ``g`` = the last price
    up to the row over the first one dated ``≥ d − regime_days`` days)."""
    n_rows = dates64.shape[0]
    if not view.regime_ticker:
        return np.full(n_rows, "sideways", dtype=object)
    px = view.prices[:, view.tickers.index(view.regime_ticker)]
    fin = np.isfinite(px)
    idx = np.arange(n_rows)
    last = np.maximum.accumulate(np.where(fin, idx, -1))  # the last finite price at or before each row
    nxt = np.minimum.accumulate(np.where(fin, idx, n_rows)[::-1])[::-1]  # the first at or after each row
    start = np.searchsorted(dates64, dates64 - np.timedelta64(int(view.config.regime_days), "D"), side="left")
    first = np.append(nxt, n_rows)[start]
    ok = first <= idx
    with np.errstate(invalid="ignore", divide="ignore"):
        g = px[np.where(ok, last, 0)] / px[np.where(ok, first, 0)] - 1.0
    labels = np.full(n_rows, "sideways", dtype=object)
    labels[ok & (g > 0.10)] = "bull"
    labels[ok & (g < -0.05)] = "bear"
    labels[ok & (g < -0.20)] = "crisis"
    return labels


@dataclass(slots=True)
class _Spare:
    """A buffer for batches past the budget (:meth:`RowArrays._spare`)."""

    buf: np.ndarray  # uint8
    ro: memoryview  # read-only, over ``buf``: the stored arrays are made over it
    refs: list  # weak references to the ``np.frombuffer`` arrays of the batch last carved from it


class RowArrays:
    """Cache of large per-row arrays within a byte budget (speed only: a row not kept is recomputed, to the same
    values).

    ``get(t)`` returns the dict ``name -> array`` of row ``t`` (or None); ``put(t, name, array)`` stores a
    read-only array, ``put_rows({t: {name: array}})`` the rows of a batch. Bytes are those of the arrays' own
    buffers, each counted once: an array stored under two names, or the rows of a batch carved from one block
    (:meth:`carve`). Rows are kept while the budget allows; past it, a batch is kept only until the next one
    (``transient``): a pass over more rows than fit keeps its first rows for the next pass, instead of each row
    replacing an older one and the next pass finding none (what a least-recently-used order does to a pass
    repeated in the same order: every episode over the same dates).
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self.rows: dict[int, dict[str, np.ndarray]] = {}
        #: the last batch past the budget (not counted; replaced by the next one)
        self.transient: dict[int, dict[str, np.ndarray]] = {}
        self._owners: dict[int, list] = {}  # id of a buffer's owner -> [owner, references]
        self._block: np.ndarray | None = None  # the block batches are carved from (:meth:`carve`)
        self._block_ro: memoryview | None = None
        self._block_used = 0
        self._spares: list[_Spare] = []  # buffers of batches past the budget (:meth:`_spare`)
        self._row_max = 0  # bytes of the largest row kept

    def get(self, t: int) -> dict[str, np.ndarray] | None:
        row = self.transient.get(t)
        return self.rows.get(t) if row is None else row

    def put(self, t: int, name: str, value: np.ndarray) -> np.ndarray:
        self.put_rows({t: {name: value}})
        return value

    def fits(self, n_bytes: int) -> bool:
        """Whether ``n_bytes`` more stay within the budget."""
        return self.nbytes + n_bytes <= self.max_bytes

    def put_rows(self, rows: dict[int, dict[str, np.ndarray]]) -> None:
        """Store the arrays of several rows (made read-only): kept if they fit the budget, else as the
        transient batch."""
        owners = {}
        for arrays in rows.values():
            for value in arrays.values():
                value.flags.writeable = False
                owner = self._owner(value)
                if owner is value.base and not isinstance(owner.base, memoryview) and owner is not self._block:
                    # a view of a plain writeable array (not carved: a carved array's base is a read-only
                    # memoryview already) could be made writeable again through its base: freeze the base too
                    owner.flags.writeable = False
                if id(owner) not in self._owners:
                    owners[id(owner)] = owner.nbytes
        # a new row is kept only with room for it to grow to the largest row kept so far
        new_rows = sum(t not in self.rows for t in rows)
        if self.fits(max(sum(owners.values()), new_rows * self._row_max)):
            for t, arrays in rows.items():
                row = self.rows.get(t)
                if row is None:
                    row = self.rows[t] = {}
                for name, value in arrays.items():
                    old = row.get(name)
                    row[name] = value
                    self._ref(value, 1)
                    if old is not None:
                        self._ref(old, -1)
                self._row_max = max(self._row_max, sum({id(v): v.nbytes for v in row.values()}.values()))
                self.transient.pop(t, None)
            return
        fresh = {t: {**self.rows.get(t, {}), **self.transient.get(t, {}), **arrays} for t, arrays in rows.items()}
        if fresh.keys() <= self.transient.keys():  # more arrays of rows of the transient batch: added to it
            self.transient.update(fresh)
        else:
            self.transient = fresh

    def carve(self, specs: list[tuple[tuple[int, ...], Any]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """New arrays of the given (shape, dtype), uninitialised: carved from a block of about
        :data:`ROW_BLOCK_BYTES` (at most an eighth of the budget) while the budget has room for the block,
        else (a transient batch) from a buffer of a past transient batch that no array references any more,
        or a new one (:meth:`_spare`). Speed only: one large allocation, transparent huge pages where the system
        offers them, instead of one page fault per 4 kB of each row; past the budget, no fresh pages (their
        faults and zeroing) per batch. Each as a pair: a writeable array to fill, and a read-only array over
        the same memory to store (no view of it can be made writeable). Bytes count when stored
        (:meth:`put_rows`)."""
        sizes = [-(-math.prod(shape) * np.dtype(dtype).itemsize // 64) * 64 for shape, dtype in specs]
        need = sum(sizes)
        block = self._block
        if block is None or self._block_used + need > block.nbytes:
            size = max(1, min(ROW_BLOCK_BYTES, self.max_bytes // 8) // need) * need
            if not self.fits(size):
                # a transient batch: it replaces the last one, dropped first, so that the last one's buffer is
                # free again (the one most likely in cache) unless an observation still holds a view of it
                self.transient = {}
                spare = self._spare(need)
                spare.refs.clear()
                return self._cut(spare.buf, spare.ro, 0, specs, sizes, spare.refs)
            block = np.empty(size, np.uint8)
            self._block, self._block_used = block, 0
            self._block_ro = memoryview(block).toreadonly()
        out = self._cut(block, self._block_ro, self._block_used, specs, sizes)
        self._block_used += need
        return out

    @staticmethod
    def _cut(block: np.ndarray, block_ro: memoryview, at: int, specs: list, sizes: list[int],
             track: list | None = None) -> list:
        """The (fill, read-only) pairs of ``specs`` from ``block`` at byte ``at``, the read-only arrays over
        ``block_ro``; ``track``: gets a weak reference to each array every view of a read-only one holds (its
        ``np.frombuffer`` array: numpy stops a view's base at the first array whose base is not an array)."""
        out = []
        for (shape, dtype), size in zip(specs, sizes):
            count = math.prod(shape)
            fill = block[at:at + count * np.dtype(dtype).itemsize].view(dtype).reshape(shape)
            whole = np.frombuffer(block_ro, dtype, count, at)
            if track is not None:
                track.append(weakref.ref(whole))
            out.append((fill, whole.reshape(shape)))
            at += size
        return out

    def _spare(self, need: int) -> _Spare:
        """A buffer of at least ``need`` bytes for a batch past the budget: one of the last :data:`ROW_SPARES`
        such buffers none of whose read-only arrays is alive any more (weak references: every view of one,
        the cache's and those an observation handed out, keeps it alive), else a new one."""
        spares = self._spares
        for k in range(len(spares) - 1, -1, -1):  # the most recently used first (the likeliest still in cache)
            spare = spares[k]
            if spare.buf.nbytes >= need and all(ref() is None for ref in spare.refs):
                spares.append(spares.pop(k))
                return spare
        buf = np.empty(need, np.uint8)
        spare = _Spare(buf, memoryview(buf).toreadonly(), [])
        self._spares = [*spares[1 - ROW_SPARES:], spare]
        return spare

    @staticmethod
    def _owner(value: np.ndarray) -> np.ndarray:
        """The array that holds ``value``'s memory (a carved array's block)."""
        while isinstance(value.base, np.ndarray):
            value = value.base
        base = value.base
        return base.obj if isinstance(base, memoryview) and isinstance(base.obj, np.ndarray) else value

    def _ref(self, value: np.ndarray, step: int) -> None:
        owner = self._owner(value)
        entry = self._owners.get(id(owner))
        if entry is None:
            entry = self._owners[id(owner)] = [owner, 0]
            self.nbytes += owner.nbytes
        entry[1] += step
        if entry[1] == 0:
            del self._owners[id(owner)]
            self.nbytes -= owner.nbytes

    def __getstate__(self) -> dict:
        """Pickled empty (a cache: its rows are recomputed, to the same values; its blocks are not picklable)."""
        return {"max_bytes": self.max_bytes}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["max_bytes"])

    def clear(self) -> None:
        self.rows.clear()
        self.transient = {}
        self._owners.clear()
        self._block = self._block_ro = None
        self._spares = []
        self.nbytes = 0


def read_only(value: Any) -> Any:
    """``value`` with its arrays (itself, or the items of a tuple) made read-only; returned as is."""
    for v in value if isinstance(value, tuple) else (value,):
        if isinstance(v, np.ndarray):
            v.flags.writeable = False
    return value


class RowCache(dict):
    """The cache of one decision row of a :class:`MarketView` (:meth:`MarketView.row_cache`), speed only.

    A plain dict to read (``cache.get(key)``): the snapshot's parts under string keys (``"available"``,
    ``"price"``, ``"trailing_return"``, ...) and what consumers derived from the row. A consumer stores
    a value that depends on the row and the config only with :meth:`value` (compute once) or :meth:`put`,
    under a key of its own (a tuple naming the consumer and every setting the value depends on, e.g.
    ``("w_star", oracle, view_scale, signal_threshold, ew_mu)``); arrays are stored read-only. The cache is
    shared by every env over the same data object and window config, so a stored value must be the one
    an uncached computation gives.
    """

    __slots__ = ()

    def put(self, key: Any, value: Any) -> Any:
        """Store ``value`` under ``key`` (its arrays made read-only) and return it."""
        self[key] = read_only(value)
        return value

    def value(self, key: Any, compute: Callable[[], Any]) -> Any:
        """The value under ``key``; on a miss ``compute()`` stored with :meth:`put`."""
        v = self.get(key)
        if v is None:
            v = self.put(key, compute())
        return v


#: placeholder of a snapshot field computed on first access (``MarketSnapshot.loader``)
LAZY: Any = type("Lazy", (), {"__repr__": lambda self: "LAZY"})()
LAZY_FIELDS = ("returns", "corr", "intra", "inter", "window_dates")


@dataclass(eq=False)
class MarketSnapshot:
    """What the agent sees at decision date ``d`` (spec §1.6). Arrays are over the universe (N).

    Attributes
    ----------
    decision_date : the decision date ``d`` (trades execute at its close).
    t : row index of ``d`` in the dataset.
    tickers, classes : universe in canonical order and each ticker's §1.1 class.
    class_id : (N,) int index into :data:`ASSET_CLASSES`.
    available : (N,) bool, the set ``A_d`` (§11.6).
    window_dates : (L,) dates of the return window, oldest first.
    returns : (L, N) simple returns in the window, NaN = missing.
    price : (N,) last adjusted close at ``d`` (NaN if none).
    trailing_return : (N,) ``Π(1 + r) − 1`` over the window (0 for unavailable assets).
    ann_vol : (N,) ``std(r)·√252`` (ddof 1; 0 for unavailable assets).
    corr : (N, N) pairwise-complete Pearson correlation (NaN where undefined).
    intra, inter : class averages (:func:`~.correlation.class_correlations`).
    macro : (17,) macro vector at ``d`` (publication lags applied); ``macro_mask`` marks real values.
    regime : one of :data:`REGIMES`.
    current_weights : (N,) drifted weights before trading; ``nav`` : NAV before trading.
    """

    decision_date: pd.Timestamp
    t: int
    tickers: tuple[str, ...]
    classes: tuple[str, ...]
    class_id: np.ndarray
    available: np.ndarray
    window_dates: pd.DatetimeIndex
    returns: np.ndarray
    price: np.ndarray
    trailing_return: np.ndarray
    ann_vol: np.ndarray
    corr: np.ndarray
    intra: np.ndarray
    inter: np.ndarray
    macro: np.ndarray
    macro_mask: np.ndarray
    regime: str
    current_weights: np.ndarray
    nav: float
    news_text: str = ""
    extra: dict = field(default_factory=dict)
    #: optional ``name -> value`` loader of the fields passed as :data:`LAZY` (``returns``, ``corr``, ``intra``,
    #: ``inter``, ``window_dates``): they are computed on first access (speed only; the view's snapshots use it)
    loader: Callable[[str], Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in LAZY_FIELDS:
            if self.__dict__.get(name) is LAZY:
                del self.__dict__[name]

    def __getattr__(self, name: str):  # only called for a lazy field not loaded yet
        loader = self.__dict__.get("loader")
        if name in LAZY_FIELDS and loader is not None:
            value = self.__dict__[name] = loader(name)
            return value
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def avail_idx(self) -> np.ndarray:
        """Indices of the available assets, canonical order."""
        return np.flatnonzero(self.available)


def check_regime_ticker(ticker: str, tickers, classes, config_name: str = "PortBenchConfig") -> None:
    """Refuse a universe without the §1.9 regime ticker (``PortBenchConfig.regime_ticker``, SPY).

    Raises
    ------
    ValueError
        Names the missing ticker and what is valid: add it to the data, or set ``regime_ticker`` to one of
        the universe's equities.
    """
    if ticker in tuple(tickers):
        return
    eq = [t for t, c in zip(tickers, classes) if c == "equities"]
    raise ValueError(f"the regime ticker {ticker!r} (spec §1.9) is not in the data's universe: add its prices to "
                     f"prices.parquet and a row to assets.csv (and to universe=[...] if you pass one), or set "
                     f"{config_name}(regime_ticker=...) to one of its equities ({', '.join(eq[:8]) + (', ...' if len(eq) > 8 else '') if eq else 'none'})")


class MarketView:
    """Point-in-time view over a :class:`~quantgym.envs.portbench.data.PortBenchData` (one per env).

    Precomputes contiguous arrays once; :meth:`snapshot` reads rows ``≤ t`` only.
    """

    def __init__(self, data, config: PortBenchConfig):
        self.data = data
        self.config = config
        self.dates: pd.DatetimeIndex = pd.DatetimeIndex(data.dates)
        self.tickers: tuple[str, ...] = tuple(data.tickers)
        self.classes: tuple[str, ...] = tuple(data.asset_class)
        unknown = sorted(set(self.classes) - set(ASSET_CLASSES))
        if unknown:
            raise ValueError(f"unknown asset class label(s) {unknown}; expected {ASSET_CLASSES}")
        self.class_id = np.array([ASSET_CLASSES.index(c) for c in self.classes], dtype=np.int64)
        self.prices = np.ascontiguousarray(data.prices, dtype=np.float64)
        self.returns = np.ascontiguousarray(data.returns, dtype=np.float64)
        self.returns0 = np.nan_to_num(self.returns, nan=0.0)  # day loop: no return = 0
        self.macro = np.ascontiguousarray(data.macro, dtype=np.float64)
        # §1.9 labels the regime on SPY (config.regime_ticker); a universe without it is refused, never
        # silently measured on another ticker
        check_regime_ticker(config.regime_ticker, self.tickers, self.classes)
        self.regime_ticker = config.regime_ticker
        self.n_assets = len(self.tickers)
        self._dates64 = self.dates.values
        # per-dataset caches (speed only): day-loop returns and snapshot row parts, shared by every view
        # over the same data object with the same window/availability config
        shared = SHARED_CACHES.setdefault(data, {})
        key = (config.lookback, config.window_days, config.min_obs, config.as_of, self.regime_ticker,
               config.regime_days)
        self._row_cache: dict[int, dict] = shared.setdefault(key, {})
        self._row_cache_key = key
        self._shared = shared
        self._arrays: RowArrays = shared.setdefault(("arrays", *key), RowArrays(ROW_CACHE_BYTES))
        self._batch_corr = False  # row_array: batches include the observation form of the correlation
        self._batch_returns = False  # row_array: batches keep the snapshot's window returns
        self._work: dict[str, np.ndarray] = {}  # _scratch
        self._rolling: RollingCross | None = None  # _fill_rows at N ≥ ROLLING_MIN_N

    def window_rows(self, t: int) -> tuple[int, int]:
        """Row range ``[lo, hi)`` of the return window ending at ``t`` (≤ L rows within 90 days)."""
        config = self.config
        hi = t + 1
        lo = max(0, hi - config.lookback)
        first_allowed = self._dates64[t] - np.timedelta64(config.window_days, "D")
        lo = max(lo, int(np.searchsorted(self._dates64, first_allowed, side="left")))
        return lo, hi

    def available_at(self, t: int) -> np.ndarray:
        """``A_d`` (§11.6): a price at ``t`` and ≥ ``min_obs`` valid returns in the window (L rows, 90 days)."""
        return available_mask(self.data, t, self.config.lookback, self.config.min_obs, window_days=self.config.window_days)

    def regime_at(self, t: int) -> str:
        """§1.9 regime label at row ``t`` (sideways without an equity to measure it on)."""
        return (market_regime(self.data, t, self.regime_ticker, self.config.regime_days) if self.regime_ticker
                else "sideways")

    def row_cache(self, t: int) -> RowCache:
        """The :class:`RowCache` of decision row ``t``: the O(N) row-dependent parts of its snapshot (cached per
        dataset, read-only) and the values consumers keep with them.

        Everything in a snapshot except the portfolio state (weights, NAV, news) depends on the
        row and the config only, so it is computed once per ``(dataset, config, row)`` and shared
        by every env over the same :class:`~quantgym.envs.portbench.data.PortBenchData` (speed only; the values
        are those of the uncached computation). Consumers keep values derived from the row in it
        (:meth:`RowCache.value`: the lookback oracle, the S1/S2 truth, the observation template, the prompt
        blocks). The O(L·N) and O(N²) arrays (window returns, correlations) are not in it: :meth:`row_array`
        keeps them in a byte-bounded cache.
        """
        cache = self._row_cache
        parts = cache.get(t)
        if parts is not None:
            return parts
        parts = RowCache(self._compute_row_parts(int(t)))
        if len(cache) >= ROW_CACHE_MAX:
            cache.pop(next(iter(cache)))
        cache[t] = parts
        return parts

    def table(self) -> dict[str, Any] | None:
        """:func:`row_table` of this view (built on first use, shared per dataset and config), or None when a
        subclass changes the per-row rules (its rows are computed one by one)."""
        cls = type(self)
        if (cls.available_at is not MarketView.available_at or cls.regime_at is not MarketView.regime_at
                or cls.window_rows is not MarketView.window_rows or int(self.config.regime_days) < 1):
            return None
        return self.shared("row_table", lambda: row_table(self), per_config=True)

    def shared(self, name: Hashable, compute: Callable[[], Any], per_config: bool = False) -> Any:
        """``compute()``, computed once per dataset (``per_config``: per dataset and window config) and shared
        by every view of it (:data:`SHARED_CACHES`); keep it read-only."""
        key = (name, *self._row_cache_key) if per_config else name
        value = self._shared.get(key)
        if value is None:
            value = self._shared[key] = compute()
        return value

    def _timestamps(self) -> list:
        """``self.dates`` as a list of Timestamps (built once per dataset: indexing the index costs more)."""
        return self.shared("timestamps", self.dates.tolist)

    def _compute_row_parts(self, t: int) -> dict:
        config = self.config
        td = t - 1 if config.as_of == "previous_close" else t
        if td < 0:
            raise ValueError("no data before the first decision date")
        table = self.table()
        if table is not None:  # the row of the per-dataset table (read-only views)
            lo, hi = int(table["lo"][td]), int(table["hi"][td])
            return {
                "decision_date": self._timestamps()[t], "available": table["available"][td], "window": (lo, hi),
                "price": table["price"][td],
                "trailing_return": table["trailing_return"][td], "ann_vol": table["ann_vol"][td],
                "macro": table["macro"][td], "macro_mask": table["macro_mask"][td], "regime": table["regime"][td],
            }
        lo, hi = self.window_rows(td)
        win = self.returns[lo:hi]
        available = self.available_at(td)
        growth, cnt, sq = (_window_stats if jit_enabled() else _window_stats_numpy)(win)
        trailing = growth - 1.0
        with np.errstate(invalid="ignore", divide="ignore"):
            var = sq / (cnt - 1)
        vol = np.sqrt(np.where(cnt > 1, var, 0.0)) * SQRT252
        trailing = np.where(available, trailing, 0.0)
        vol = np.where(available, vol, 0.0)
        macro = self.macro[td]
        mmask = np.isfinite(macro)
        parts = {
            "decision_date": self._timestamps()[t],
            "available": available,
            "window": (lo, hi),
            "price": np.where(available, self.prices[td], np.nan),
            "trailing_return": trailing,
            "ann_vol": vol,
            "macro": np.where(mmask, macro, 0.0),
            "macro_mask": mmask,
            "regime": self.regime_at(td),
        }
        for v in parts.values():
            if isinstance(v, np.ndarray):
                v.flags.writeable = False
        return parts

    def window_returns(self, parts: dict) -> np.ndarray:
        """(L', N) returns of a row's window (``parts["window"]``), unavailable columns NaN."""
        lo, hi = parts["window"]
        return np.where(parts["available"][None, :], self.returns[lo:hi], np.nan)

    def row_array(self, t: int, name: str) -> np.ndarray:
        """A large row array of decision row ``t`` (read-only; cached within :data:`ROW_CACHE_BYTES`).

        ``name``: ``"returns"`` (L', N) window returns with unavailable columns NaN (the snapshot's
        ``returns``; ``"returns0"`` the same with NaN → 0); ``"corr"`` (N, N) :func:`~.correlation.pairwise_corr` of them; ``"obs_returns"`` / ``"obs_mask"``
        (L, N) and ``"obs_corr"`` (N, N): the observation forms (:func:`obs_window`, :func:`~.correlation.obs_corr`).
        ``"corr"`` stores ``"obs_corr"`` too (one pass, :func:`~.correlation.corr_and_obs`); ``"obs_corr"`` asked for first
        computes the observation form alone (a raw step never reads ``corr``).
        """
        row = self._arrays.get(t)
        if row is not None:
            v = row.get(name)
            if v is not None:
                return v
        if name in _BATCHED:
            # a view that observes the correlation computes it with the windows (one batch, not two); the
            # snapshot's window ("returns") is kept with them once a consumer asked for it (a raw step never does)
            self._batch_corr = self._batch_corr or name == "obs_corr"
            self._batch_returns = self._batch_returns or name == "returns"
            if self._fill_rows(t, self._batch_corr):
                return self._arrays.get(t)[name]
        if name == "returns":
            v = self.window_returns(self.row_cache(t))
        elif name == "returns0":  # missing = 0 (the S5 risk report's window)
            v = np.nan_to_num(self.row_array(t, "returns"), nan=0.0)
        elif name in ("corr", "obs_corr"):
            from quantgym.envs.portbench.optimize import single_thread_blas  # lazy: optimize imports scipy

            # "corr": both forms in one pass (the observation form is corr itself when corr has no NaN);
            # "obs_corr" alone: only the observation form (the raw step's default observation)
            rets = self.row_array(t, "returns")
            with single_thread_blas():
                corr, obs = corr_and_obs(rets, corr=name == "corr", obs=True)
            if corr is not None:
                self._arrays.put(t, "obs_corr", obs)
            v = corr if corr is not None else obs
        elif name in ("obs_returns", "obs_mask"):
            ret, mask = obs_window(self.row_array(t, "returns"), self.config.lookback)
            self._arrays.put(t, "obs_mask" if name == "obs_returns" else "obs_returns",
                             mask if name == "obs_returns" else ret)
            v = ret if name == "obs_returns" else mask
        else:
            raise KeyError(f"unknown row array {name!r}")
        return self._arrays.put(t, name, v)

    def _fill_rows(self, t: int, with_corr: bool) -> bool:
        """Compute the window arrays of decision row ``t`` (``returns``, ``obs_returns``, ``obs_mask``; with
        ``with_corr`` also ``obs_corr``) and, when row ``t − 1`` was computed too (a pass over consecutive rows,
        e.g. a daily episode), those of the next rows not computed yet, in one batch (:func:`_window_rows_batch`,
        :func:`~.correlation.obs_corr_rows`; at most :data:`ROW_BATCH_BYTES` and a quarter of the budget), and
        store them. The values are those of the per-row path (tested). False (nothing done) without the
        compiled kernels or the per-dataset table (a subclass's rules), or before the first return row."""
        table = self.table() if jit_enabled() else None
        if table is None:
            return False
        shift = 1 if self.config.as_of == "previous_close" else 0
        n_dates, n = self.returns.shape
        lookback = int(self.config.lookback)
        if t - shift < 0:
            return False
        keep = self._batch_returns
        need = ("obs_returns", "obs_mask") + (("returns",) if keep else ()) + (("obs_corr",) if with_corr else ())
        arrays = self._arrays
        row_bytes = lookback * n * (17 if keep else 9) + (8 * n * n if with_corr else 0)
        size = 1
        if arrays.get(t - 1) is not None:
            size = max(1, min(ROW_BATCH_BYTES, arrays.max_bytes // 4) // row_bytes)
        rows = [t]
        for u in range(t + 1, min(t + size, n_dates)):
            have = arrays.get(u)
            if have is not None and all(k in have for k in need):
                break
            rows.append(u)
        td = np.asarray(rows, np.int64) - shift
        lo, hi = table["lo"][td], table["hi"][td]
        n_rows = hi - lo
        if int(n_rows.max()) > lookback:
            return False
        b, n_max = len(rows), int(n_rows.max())
        (ret, ret_ro), (mask, mask_ro), *more = arrays.carve(
            [((b, lookback, n), np.float64), ((b, lookback, n), np.int8)]
            + ([((b, n_max, n), np.float64)] if keep else []) + ([((b, n, n), np.float64)] if with_corr else []))
        (win, win_ro) = more.pop(0) if keep else (self._scratch("win", (b, n_max, n)),) * 2  # kept, or work only
        z = self._scratch("z", (b, n_max, n))
        _window_rows_batch(self.returns, lo, hi, table["available"][td], win, z, ret, mask)
        out = {u: {"obs_returns": ret_ro[k], "obs_mask": mask_ro[k]} for k, u in enumerate(rows)}
        if keep:
            for k, u in enumerate(rows):
                out[u]["returns"] = win_ro[k, : n_rows[k]]
        if with_corr:
            from quantgym.envs.portbench.optimize import single_thread_blas  # lazy: optimize imports scipy

            (obs, obs_ro), = more
            if n >= ROLLING_MIN_N:  # wide: cross products rolled along the rows (speed only, within 1e-12)
                if self._rolling is None:  # (its products single-threaded, like those below)
                    self._rolling = RollingCross(self.returns0, table["lo"], table["hi"], blas=single_thread_blas)
                todo = [not obs_corr_rolled(win[k], z[k], int(n_rows[k]), self._rolling, int(td[k]), obs[k])
                        for k in range(b)]
            else:
                with single_thread_blas():
                    todo = obs_corr_rows(win, z, n_rows, self._scratch("sxy", obs.shape), obs)[1]
            for k, u in enumerate(rows):
                if not todo[k]:
                    out[u]["obs_corr"] = obs_ro[k]
                    continue
                with single_thread_blas():
                    out[u]["obs_corr"] = corr_and_obs(win[k, : n_rows[k]], corr=False, obs=True)[1]
        arrays.put_rows(out)
        return True

    def _scratch(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """A float64 work array of ``shape``, reused by this view's batches (never handed out)."""
        a = self._work.get(name)
        size = math.prod(shape)
        if a is None or a.size < size:
            a = self._work[name] = np.empty(size)
        return a[:size].reshape(shape)

    def class_corr(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(intra (6,), inter (6, 6)) class correlations of decision row ``t`` (:func:`~.correlation.class_correlations`),
        cached with the row parts."""
        parts = self.row_cache(t)
        cc = parts.get("class_corr")
        if cc is None:
            from quantgym.envs.portbench.optimize import single_thread_blas  # lazy: optimize imports scipy

            corr = self.row_array(t, "corr")
            with single_thread_blas():
                cc = class_correlations(corr, self.class_id, parts["available"])
            parts.put("class_corr", cc)
        return cc

    def snapshot(self, t: int, current_weights: np.ndarray, nav: float, news_text: str = "") -> MarketSnapshot:
        """Build the snapshot of decision row ``t`` from rows ``≤ t`` (``≤ t − 1`` with ``as_of='previous_close'``).

        Row-dependent arrays come from a per-dataset cache and are read-only (copy before modifying); ``returns``,
        ``corr``, ``intra``, ``inter`` and ``window_dates`` are computed when first read.
        """
        t = int(t)
        p = self.row_cache(t)
        fields = p.get("snapshot_fields")
        if fields is None:  # the row's constant fields, built once (speed only: no dataclass __init__ per step)
            fields = p.put("snapshot_fields", MarketSnapshot(
                decision_date=p["decision_date"], t=t, tickers=self.tickers, classes=self.classes,
                class_id=self.class_id, available=p["available"], window_dates=LAZY, returns=LAZY,
                price=p["price"], trailing_return=p["trailing_return"], ann_vol=p["ann_vol"], corr=LAZY, intra=LAZY,
                inter=LAZY, macro=p["macro"], macro_mask=p["macro_mask"], regime=p["regime"], current_weights=None,
                nav=0.0,
            ).__dict__)
        snap = object.__new__(MarketSnapshot)
        d = snap.__dict__
        d.update(fields)
        d["current_weights"] = np.array(current_weights, dtype=np.float64)
        d["nav"] = float(nav)
        d["news_text"] = news_text
        d["extra"] = {}
        d["loader"] = partial(self._snapshot_field, t)  # not cached with the row: it holds this view
        return snap

    def _snapshot_field(self, t: int, name: str) -> np.ndarray:
        """The lazy snapshot fields of row ``t`` (``MarketSnapshot.loader``)."""
        if name in ("intra", "inter"):
            return self.class_corr(t)[name == "inter"]
        if name == "window_dates":
            parts = self.row_cache(t)
            if "window_dates" in parts:  # a subclass's own window (paper mode: its calendar)
                return parts["window_dates"]
            lo, hi = parts["window"]
            return self.dates[lo:hi]
        return self.row_array(t, name)
