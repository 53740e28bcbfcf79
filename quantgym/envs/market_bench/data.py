"""Market-Bench input data: real books from the shared sources and the seeded generators.

Spec market_bench §2, §9.2, §9.3, §9.12. Real books: the MSFT LOBSTER excerpt (692 rows after
cleaning) and the 600519 SSE Level-2 day (4,635 continuous-trading rows) with randomised level
sizes (the paper's preprocessing); synthetic: the KO/PEP pairs book and the option-delta
random walk. All randomness comes from :func:`quantgym.envs.market_bench.config.stream_seed`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.signal import lfilter

from quantgym._util import shared_data_dir
from quantgym.envs.market_bench.config import DATASETS, LEVELS, TICK, DeltaSeriesConfig, PairsBookConfig, RealPairsBook
from quantgym.envs.market_bench.lob import (book_columns, clean_book, lobster_book_frame, lobster_time_to_ns,
                                            read_lobster, sse_book)

#: Default location of the shared raw sources (override with ``QUANTGYM_SHARED_DATA``); only the
#: build script reads it.
SHARED_DATA = shared_data_dir()
SSE_DIR = "quant_arena/intraday/sse_600519_20230207"
#: Shipped copies of the small real LOB sources (gzip of the original files; the MSFT order book
#: is the derived top-10 file, enough for L <= 10).
SOURCES_DIR = Path(__file__).resolve().parents[2] / "data" / "bundled" / "market_bench" / "sources"
#: (shared path, shipped name) of every source copied by the build script
SOURCE_FILES = {
    "msft_message": ("market_bench/lobster_msft_2012-06-21/MSFT_2012-06-21_34200000_37800000_message_50.csv",
                     "MSFT_2012-06-21_34200000_37800000_message_50.csv.gz"),
    "msft_orderbook": ("market_bench/lobster_msft_2012-06-21/MSFT_2012-06-21_34200000_37800000_orderbook_50_top10.csv",
                       "MSFT_2012-06-21_34200000_37800000_orderbook_50_top10.csv.gz"),
    "tsla_message": ("market_bench/lobster_tsla_2015-01-07/TSLA_2015-01-07_34200000_57600000_message_10_SAMPLE.csv",
                     "TSLA_2015-01-07_34200000_57600000_message_10_SAMPLE.csv.gz"),
    "tsla_orderbook": ("market_bench/lobster_tsla_2015-01-07/TSLA_2015-01-07_34200000_57600000_orderbook_10_SAMPLE.csv",
                       "TSLA_2015-01-07_34200000_57600000_orderbook_10_SAMPLE.csv.gz"),
    "dbn_nvda": ("market_bench/databento_dbn/XNAS.ITCH_NVDA_2020-12-28.mbp-10.dbn.zst",
                 "XNAS.ITCH_NVDA_2020-12-28.mbp-10.dbn.zst"),
    "dbn_qqq": ("market_bench/databento_dbn/DBEQ.BASIC_QQQ_2023-03-28.mbp-10.dbn.zst",
                "DBEQ.BASIC_QQQ_2023-03-28.mbp-10.dbn.zst"),
}


def source_path(key: str) -> Path:
    """Path of a shipped real source file (see :data:`SOURCE_FILES`)."""
    return SOURCES_DIR / SOURCE_FILES[key][1]


def real_book(dataset: str, levels: int = LEVELS, shared: str | Path | None = None) -> pd.DataFrame:
    """Cleaned raw book of a v1 real dataset (spec §9.2.4 steps a-e), raw sizes.

    Parameters
    ----------
    dataset : {"msft", "sse_morning", "sse_afternoon", "sse_day"}
    levels : int
        L (3 in v1).
    shared : path, optional
        Root of the shared raw data. Default ``None``: the shipped copies (:data:`SOURCES_DIR`
        and the bundled SSE parquet tables), so no network or shared folder is needed.
    """
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; choose from {list(DATASETS)}")
    spec = DATASETS[dataset]
    if spec["source"] == "lobster_msft_hour":
        book = msft_hour_book(levels)
        return _cut(book, "2012-06-21", spec["tz"], *spec["window"], end_inclusive=False)
    if spec["source"] == "lobster_msft":
        if shared is None:
            msg, ob = source_path("msft_message"), source_path("msft_orderbook")
        else:
            msg, ob = (Path(shared) / SOURCE_FILES[k][0] for k in ("msft_message", "msft_orderbook"))
        raw = read_lobster(msg, ob, symbol="MSFT", date="2012-06-21")
        return clean_book(raw, levels)
    from quantgym.data.sse_l2 import SSE_DAY, load_sse_l2_day

    snaps = load_sse_l2_day(None if shared is None else Path(shared) / SSE_DIR)["snapshots"]
    book = clean_book(sse_book(snaps, levels=10), levels)
    start, end = spec["window"]
    day0 = int(pd.Timestamp(SSE_DAY, tz="Asia/Shanghai").value)
    tod = book["ts_event"].to_numpy() - day0

    def ns(hms: str) -> int:
        h, m, s = (int(x) for x in hms.split(":"))
        return (h * 3600 + m * 60 + s) * 1_000_000_000

    hi = (tod <= ns(end)) if end == "11:30:00" else (tod < ns(end))
    return book[(tod >= ns(start)) & hi].reset_index(drop=True)


def _cut(book: pd.DataFrame, day: str, tz: str, start: str, end: str, end_inclusive: bool) -> pd.DataFrame:
    """Rows of ``book`` whose local time on ``day`` is in [start, end] (or [start, end)) (spec §9.2.4 e)."""
    tod = book["ts_event"].to_numpy(dtype=np.int64) - int(pd.Timestamp(day, tz=tz).value)
    lo, hi = pd.Timedelta(start).value, pd.Timedelta(end).value
    keep = (tod >= lo) & ((tod <= hi) if end_inclusive else (tod < hi))
    return book[keep].reset_index(drop=True)


_HOUR_CACHE: dict[int, pd.DataFrame] = {}


def msft_hour_book(levels: int = LEVELS) -> pd.DataFrame:
    """The real MSFT book of 2012-06-21 09:30-10:30 after every LOBSTER message, cleaned (spec §9.2.4 a-d).

    Rebuilt by :func:`quantgym.data.lobster.rebuild_book` from the bundled full message stream and the
    known 50-level row after message 66,912 (10:00:00; forward to 10:30 and backward to 09:30,
    ``message_levels=50``), top ``levels`` levels, converted by
    :func:`~quantgym.envs.market_bench.lob.lobster_book_frame` (message times parsed exactly from their
    shortest decimal text), then :func:`~quantgym.envs.market_bench.lob.clean_book`. Raw sizes. Cached
    per process (returns a copy).

    Raises
    ------
    ValueError
        If a cell of the top ``levels`` is one the message file cannot determine (never in this hour).
    """
    if levels not in _HOUR_CACHE:
        from quantgym.data import lobster

        msg = lobster.read_messages(lobster.MSFT_HOUR_MESSAGES)
        row = lobster.read_orderbook(lobster.MSFT_EXCERPT_BOOK)[0]
        rb = lobster.rebuild_book(msg, row, lobster.MSFT_EXCERPT_START, levels=levels, message_levels=50)
        if not rb.known.all():
            raise ValueError(f"the rebuilt MSFT hour has {rb.n_unknown} unknown cells in its top {levels} levels")
        time_ns = lobster_time_to_ns([repr(float(t)) for t in msg["Time"].to_numpy()])
        raw = lobster_book_frame(time_ns, rb.book, date="2012-06-21", symbol="MSFT")
        _HOUR_CACHE[levels] = clean_book(raw, levels)
    return _HOUR_CACHE[levels].copy()


def real_pairs_book(config: RealPairsBook, data_dir: str | Path | None = None) -> pd.DataFrame:
    """Two real simultaneous books for strategy 2 (task set v2), raw sizes, in the book schema.

    Reads ``config.file`` with :func:`quantgym.data.a_share_l2.read_snapshots` (folder ``data_dir``, see
    :func:`quantgym.data.a_share_l2.data_dir`), keeps the two symbols' continuous-trading rows within
    ``config.window`` (local, both ends inclusive), cleans each symbol (spec §9.2.4 a-d, top ``config.levels``)
    and merges them in time order, **leg A first at an equal** ``ts_event`` (the v2 rule of equal
    timestamps, docs/market_bench.md).
    """
    from quantgym.data.a_share_l2 import SNAPSHOT_FILES, read_snapshots

    snaps = read_snapshots(config.file, path=data_dir, symbols=[config.symbol_a, config.symbol_b])
    snaps = snaps[snaps["continuous"].to_numpy()]
    book = _cut(snaps, SNAPSHOT_FILES[config.file]["date"], "Asia/Shanghai", *config.window, end_inclusive=True)
    legs = [clean_book(book[book["symbol"] == s], config.levels) for s in (config.symbol_a, config.symbol_b)]
    both = pd.concat(legs, ignore_index=True)
    order = np.lexsort((np.repeat([0, 1], [len(x) for x in legs]), both["ts_event"].to_numpy()))
    return both.iloc[order].reset_index(drop=True)


def randomise_sizes(book: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Replace level sizes with 100·U{1..20} shares, independent per row, level and side (spec §9.3.2).

    ``K = rng.integers(1, 21, size=(n_rows, L, 2))``; ``bid_sz_0i = 100·K[:, i, 0]``,
    ``ask_sz_0i = 100·K[:, i, 1]``. Prices untouched.
    """
    out = book.copy()
    L = sum(1 for c in book.columns if c.startswith("bid_px_"))
    K = rng.integers(1, 21, size=(len(book), L, 2))
    for i in range(L):
        out[f"bid_sz_{i:02d}"] = (100 * K[:, i, 0]).astype(np.int64)
        out[f"ask_sz_{i:02d}"] = (100 * K[:, i, 1]).astype(np.int64)
    return out


def paper_preprocess(book: pd.DataFrame, rng: np.random.Generator, levels: int = LEVELS) -> pd.DataFrame:
    """The paper's preprocessing on any book-schema frame: keep the top ``levels`` levels, randomise sizes.

    Applies :func:`quantgym.envs.market_bench.lob.clean_book` (spec §9.2.4 a-d) then :func:`randomise_sizes`
    (§9.3.2). Use it to turn your own L10 data into a Market-Bench-style book.
    """
    return randomise_sizes(clean_book(book, levels), rng)


def generate_pairs_book(config: PairsBookConfig, rng: np.random.Generator) -> pd.DataFrame:
    """Synthetic two-symbol book (spec §9.12.1), labelled KO (leg A) and PEP (leg B).

    Draw order: dt, isA, eB, es, n_draw, u, gaps, K (see the spec). Latent mids
    mB_j = 170 + σ_B·Σ eB, s_j = φ·s_{j−1} + σ_s·es_j, mA_j = (60 − β*·170) + β*·mB_j + s_j;
    each row quotes its symbol's latent mid with a 1-3 tick spread (kept from the symbol's
    previous row with probability 0.8), level gaps of 1-2 ticks and sizes 100..2,000 shares.

    Returns
    -------
    DataFrame in the book schema, ``config.n_rows`` rows, prices with 0.01 resolution (floats).
    """
    N, L = int(config.n_rows), int(config.levels)
    dt = rng.integers(config.dt_lo_ms, config.dt_hi_ms + 1, N)
    dt[0] = 0
    ts = config.t0_ns + np.cumsum(dt).astype(np.int64) * 1_000_000
    is_a = rng.random(N) < config.p_a
    e_b = rng.standard_normal(N)
    e_s = rng.standard_normal(N)
    m_b = config.mid_b0 + config.sigma_b * np.cumsum(e_b)
    s = lfilter([1.0], [1.0, -config.phi], config.sigma_s * e_s)  # s_j = φ s_{j−1} + σ_s e_j, s_{−1} = 0
    m_a = (config.mid_a0 - config.beta_star * config.mid_b0) + config.beta_star * m_b + s
    n_draw = rng.integers(1, 4, N)
    u = rng.random(N)
    gaps = rng.integers(1, 3, (N, L - 1, 2))
    K = rng.integers(1, 21, (N, L, 2))
    # spread in ticks: previous spread of the row's symbol if it had a row and u < 0.8, else n_draw
    spread = np.empty(N, dtype=np.int64)
    prev = {True: None, False: None}
    for j in range(N):
        p = prev[bool(is_a[j])]
        spread[j] = p if (p is not None and u[j] < 0.8) else n_draw[j]
        prev[bool(is_a[j])] = spread[j]
    m = np.where(is_a, m_a, m_b)
    bid, ask = _ladder(m, spread, gaps, L)
    out: dict[str, object] = {"ts_event": ts, "symbol": np.where(is_a, config.symbol_a, config.symbol_b).astype(object)}
    return _book_frame(out, bid, ask, K, L)


def _ladder(mid: np.ndarray, spread: np.ndarray, gaps: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer-tick bid/ask ladders (N, levels): best bid below the mid's tick by (spread−1)//2, best
    ask = best bid + spread, deeper levels ``gaps[:, i−1, 0|1]`` ticks further out."""
    n = mid.shape[0]
    c = np.floor(mid / TICK).astype(np.int64)
    bid = np.empty((n, levels), dtype=np.int64)
    ask = np.empty((n, levels), dtype=np.int64)
    bid[:, 0] = c - (spread - 1) // 2
    ask[:, 0] = bid[:, 0] + spread
    for i in range(1, levels):
        bid[:, i] = bid[:, i - 1] - gaps[:, i - 1, 0]
        ask[:, i] = ask[:, i - 1] + gaps[:, i - 1, 1]
    return bid, ask


def _book_frame(out: dict, bid: np.ndarray, ask: np.ndarray, lots: np.ndarray, levels: int) -> pd.DataFrame:
    """Book-schema DataFrame: ``out`` (ts_event, symbol) plus ``levels`` price (ticks/100) and size
    (100-share lots) columns per side."""
    for i in range(levels):
        out[f"bid_px_{i:02d}"] = bid[:, i] / 100
        out[f"bid_sz_{i:02d}"] = (100 * lots[:, i, 0]).astype(np.int64)
        out[f"ask_px_{i:02d}"] = ask[:, i] / 100
        out[f"ask_sz_{i:02d}"] = (100 * lots[:, i, 1]).astype(np.int64)
    return pd.DataFrame(out)[book_columns(levels)]


def generate_option_delta(config: DeltaSeriesConfig, t0: int, t_last: int, rng: np.random.Generator) -> pd.DataFrame:
    """Seeded random-walk option delta (spec §9.12.2).

    t_j = t0 + j·step while <= ``t_last``; ``inc = rint(σ·z)`` (int), inc_0 = 0;
    option_delta_j = D0 + Σ_{i<=j} inc_i (shares-equivalent).
    """
    J = (int(t_last) - int(t0)) // int(config.step_ns) + 1
    ts = int(t0) + np.arange(J, dtype=np.int64) * int(config.step_ns)
    z = rng.standard_normal(J)
    inc = np.rint(config.sigma * z).astype(np.int64)
    inc[0] = 0
    return pd.DataFrame({"ts_event": ts, "option_delta": int(config.d0) + np.cumsum(inc)})


def synthetic_book(n_rows: int, *, levels: int = LEVELS, n_symbols: int = 1, seed: int = 0,
                   start_mid: float = 100.0, sigma: float = 0.01, rho: float = 0.7,
                   t0_ns: int = 1_709_305_200_000_000_000, dt_ms: tuple[int, int] = (1, 100),
                   top: int | None = None) -> pd.DataFrame:
    """General seeded synthetic book: any number of levels and symbols (spec §2).

    Mid of each symbol is a Gaussian random walk (σ per row, currency units) with correlation
    ``rho`` between the symbols' increments; spread 1-3 ticks; level gaps 1-2 ticks; sizes
    100..2,000 shares (the paper's randomised volumes). Rows alternate randomly between
    symbols; ``ts_event`` strictly increasing. ``top`` keeps only the best ``top`` levels
    (the paper's "keep the top 3"). Labelled synthetic by construction (symbols ``SYN0``…).

    Returns
    -------
    DataFrame in the book schema with ``min(levels, top)`` levels.
    """
    rng = np.random.default_rng(seed)
    N, L, S = int(n_rows), int(levels), int(n_symbols)
    dt = rng.integers(dt_ms[0], dt_ms[1] + 1, N)
    dt[0] = 0
    ts = int(t0_ns) + np.cumsum(dt).astype(np.int64) * 1_000_000
    sym = rng.integers(0, S, N) if S > 1 else np.zeros(N, dtype=np.int64)
    cov = np.full((S, S), rho) + (1 - rho) * np.eye(S)
    e = rng.standard_normal((N, S)) @ np.linalg.cholesky(cov).T
    mids = start_mid * (1 + 0.1 * np.arange(S)) + sigma * np.cumsum(e, axis=0)
    m = mids[np.arange(N), sym]
    spread = rng.integers(1, 4, N)
    gaps = rng.integers(1, 3, (N, max(L - 1, 0), 2))
    K = rng.integers(1, 21, (N, L, 2))
    bid, ask = _ladder(m, spread, gaps, L)
    keep = L if top is None else min(L, int(top))
    out: dict[str, object] = {"ts_event": ts, "symbol": np.array([f"SYN{k}" for k in range(S)], dtype=object)[sym]}
    return _book_frame(out, bid, ask, K, keep)


__all__ = ["real_book", "msft_hour_book", "real_pairs_book", "randomise_sizes", "paper_preprocess", "generate_pairs_book", "generate_option_delta", "synthetic_book",
           "SHARED_DATA", "SOURCES_DIR", "SOURCE_FILES", "source_path"]
