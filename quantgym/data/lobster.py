"""LOBSTER order books rebuilt from the message file, forward and backward from one known book row.

LOBSTER (lobsterdata.com) ships two files per stock-day and level count N:

- the **message file**, one row per event, six columns ``Time, Type, OrderID, Size, Price,
  Direction``: time in seconds after midnight (New York); type 1 submission of a new limit
  order, 2 partial cancellation, 3 deletion (total cancellation), 4 execution of a visible
  order, 5 execution of a hidden order, 6 cross trade (auction), 7 trading halt indicator
  (price -1 halt begins, 0 quoting resumes, 1 trading resumes); order reference number; size in
  shares; price in USD x 10,000; direction -1 sell (ask side), 1 buy (bid side);
- the **order-book file**, row i = the book *after* message i, ``4 N`` columns, per level
  ``AskPrice_i, AskSize_i, BidPrice_i, BidSize_i`` (integer prices, USD x 10,000); an empty
  level holds the dummy ask price 9,999,999,999 (bid -9,999,999,999) and size 0.

:func:`rebuild_book` takes a message array and one known order-book row (any row of an
order-book file, with its index in the message stream) and returns the level-L book after
every message, in the order-book file's column order and integer units: rows after the known
row by applying each message's size at its price, rows before it by undoing them.

What the message file cannot tell (the ``known`` mask)
------------------------------------------------------
LOBSTER's N-level message file only holds the events that happen inside the N best price
levels of their side at that moment (LOBSTER ReadMe). Hence:

1. The known row fixes the book only down to its last level on each side (its *frontier*).
   Beyond that price the depth is unknown, unless the row shows an empty level (dummy
   value): then that whole side is known to have no more levels.
2. When some known levels empty, levels from beyond the frontier move up into the window;
   their sizes were never in the message file, so those output cells are *unknown*.
3. Once a side has N or more known levels, events at prices worse than the N-th level are
   not reported, so the frontier moves in to the N-th level's price and stays there (a price
   once unobserved is never known again: its unreported events are lost).

The same rules hold backward (undoing message j restores the book after message j-1; the
events left out between the two lie beyond the N-th level of that book). ``known[i, c]`` is
False for every cell the messages cannot determine; such cells hold 0 (price and size).
Empty levels of a side that is known to the end hold LOBSTER's dummy values and are known.
Messages at prices beyond the frontier are skipped (their level's base size is unknown).
With N = 50 and a rebuilt top 10, the top 10 is exact unless more than 40 levels empty at once.

Everything is vectorised with numpy (a dense size grid over the side's distinct prices, in
chunks of rows; no per-message Python loop): the full MSFT hour (141,507 messages, 50 levels)
rebuilds in about 0.4 CPU-seconds (``benchmarks/bench_lobster_rebuild.py``, docs/performance.md).

Bundled sample (``quantgym/data/bundled/lobster/``, see docs/data.md): the full MSFT message
stream 2012-06-21 09:30-10:30 (:data:`MSFT_HOUR_MESSAGES`), the 1,000 real 50-level book rows
after its messages 66,912-67,911 (:data:`MSFT_EXCERPT_BOOK`, first row at
:data:`MSFT_EXCERPT_START`), and a 999-event AAPL level-10 pair (:data:`AAPL_MESSAGES`,
:data:`AAPL_BOOK`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from quantgym._util import shared_data_dir

#: LOBSTER price scale: integer price = USD x 10,000.
PRICE_SCALE = 10_000
#: Dummy price of an empty ask level (size 0).
EMPTY_ASK = 9_999_999_999
#: Dummy price of an empty bid level (size 0).
EMPTY_BID = -9_999_999_999
#: Column names of a LOBSTER message file, in file order.
MESSAGE_COLUMNS = ("Time", "Type", "OrderID", "Size", "Price", "Direction")
#: Event types (LOBSTER ReadMe).
SUBMISSION, CANCELLATION, DELETION, EXECUTION, HIDDEN_EXECUTION, CROSS_TRADE, HALT = 1, 2, 3, 4, 5, 6, 7

#: Folder of the bundled LOBSTER sample files.
BUNDLED_DIR = Path(__file__).resolve().parent / "bundled" / "lobster"
#: Full MSFT message stream 2012-06-21 09:30-10:30 (50-level request), 141,507 messages.
MSFT_HOUR_MESSAGES = BUNDLED_DIR / "MSFT_2012-06-21_34200000_37800000_message_50.parquet"
#: The real 50-level book rows after messages 66,912-67,911 of :data:`MSFT_HOUR_MESSAGES`.
MSFT_EXCERPT_BOOK = BUNDLED_DIR / "MSFT_2012-06-21_34200000_37800000_orderbook_50_rows66912-67911.csv.gz"
#: Index in the hour's message stream of the first row of :data:`MSFT_EXCERPT_BOOK`.
MSFT_EXCERPT_START = 66_912
#: AAPL 2012-06-21 level-10 excerpt: 999 messages from 09:30:00.004 (49.1 s) and their book rows.
AAPL_MESSAGES = BUNDLED_DIR / "AAPL_2012-06-21_34200000_57600000_message_10.csv.gz"
AAPL_BOOK = BUNDLED_DIR / "AAPL_2012-06-21_34200000_57600000_orderbook_10.csv.gz"

_CHUNK_CELLS = 1 << 16  # rows x grid cells per vectorised chunk (512 KB per int64 array: stays in cache)


def read_messages(path: str | Path) -> pd.DataFrame:
    """A LOBSTER message file (``.csv``, ``.csv.gz`` without header, or ``.parquet``) as a frame
    with :data:`MESSAGE_COLUMNS` (``Time`` float64 seconds after midnight, the rest int64)."""
    path = Path(path)
    if path.suffix == ".parquet":
        df = pd.read_parquet(path)
        df.columns = list(MESSAGE_COLUMNS)
    else:
        df = pd.read_csv(path, header=None, names=list(MESSAGE_COLUMNS), usecols=range(6))
    return df.astype({c: np.int64 for c in MESSAGE_COLUMNS[1:]} | {"Time": np.float64})


def read_orderbook(path: str | Path) -> np.ndarray:
    """A LOBSTER order-book file (``.csv`` / ``.csv.gz``, no header) as an int64 array (n, 4L)."""
    ob = pd.read_csv(path, header=None, dtype=np.int64).to_numpy()
    if ob.shape[1] % 4:
        raise ValueError(f"LOBSTER order book {path} has {ob.shape[1]} columns, not a multiple of 4")
    return ob


@dataclass(frozen=True)
class RebuiltBook:
    """Result of :func:`rebuild_book`.

    Attributes
    ----------
    book : ndarray (n_messages, 4 L) int64
        Row i = the book after message i, LOBSTER order-book column order (ask price, ask size,
        bid price, bid size per level), integer prices (USD x 10,000). Empty levels of a fully
        known side: dummy prices :data:`EMPTY_ASK` / :data:`EMPTY_BID`, size 0. Unknown cells: 0.
    known : ndarray (n_messages, 4 L) bool
        False where the message file cannot determine the cell (see the module docstring).
    known_index : int
        Index of the known row the rebuild started from (``book[known_index]`` equals it).
    """

    book: np.ndarray
    known: np.ndarray
    known_index: int

    @property
    def levels(self) -> int:
        """Number of levels L per side."""
        return self.book.shape[1] // 4

    @property
    def n_unknown(self) -> int:
        """Number of unknown cells (prices and sizes)."""
        return int((~self.known).sum())

    def prices_usd(self) -> np.ndarray:
        """``book``'s price columns in USD (float64; NaN for empty and unknown levels)."""
        px = self.book[:, 0::2].astype(np.float64) / PRICE_SCALE
        empty = (self.book[:, 0::2] == EMPTY_ASK) | (self.book[:, 0::2] == EMPTY_BID) | ~self.known[:, 0::2]
        return np.where(empty, np.nan, px)


def _message_columns(messages) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(type, size, price, direction) int64 arrays from a LOBSTER message frame or (n, >= 6) array."""
    if isinstance(messages, pd.DataFrame):
        cols = [messages[c] if c in messages else messages.iloc[:, i]
                for i, c in enumerate(MESSAGE_COLUMNS) if i in (1, 3, 4, 5)]
        return tuple(np.asarray(c, dtype=np.int64) for c in cols)  # type: ignore[return-value]
    a = np.asarray(messages)
    if a.ndim != 2 or a.shape[1] < 6:
        raise ValueError(f"messages must be (n, 6) in LOBSTER column order, got shape {a.shape}")
    return tuple(a[:, i].astype(np.int64) for i in (1, 3, 4, 5))  # type: ignore[return-value]


def _walk(grid: np.ndarray, size0: np.ndarray, frontier0: int, cols: np.ndarray, deltas: np.ndarray,
          n_window: int, rows: np.ndarray, px_out: np.ndarray, sz_out: np.ndarray, known_out: np.ndarray,
          sign: int, empty: int) -> None:
    """One side, one direction: apply ``deltas[j]`` at grid column ``cols[j]``, then write output row j.

    ``grid`` holds the side's price keys best first (ascending; bids negated, ``sign`` = -1). Columns
    ``<= frontier`` are known (``frontier == len(grid)``: the whole side). Row j's L levels go to
    ``px_out[j]``, ``sz_out[j]``, ``known_out[j]`` (views into the result); ``rows[j]`` is the message
    index of row j, for error messages only.
    """
    m, g = len(cols), len(grid)
    levels = px_out.shape[1]
    lv = np.arange(levels)
    state, frontier = size0.astype(np.int64), int(frontier0)
    step = max(1, _CHUNK_CELLS // g)
    for a in range(0, m, step):
        b = min(m, a + step)
        c = b - a
        st = np.zeros((c, g), dtype=np.int64)
        st[np.arange(c), cols[a:b]] = deltas[a:b]
        st[0] += state
        np.cumsum(st, axis=0, out=st)  # sizes at every grid price after each message
        pos = st > 0
        cnt = np.cumsum(pos, axis=1, dtype=np.int32)  # levels so far, best first
        # column of each row's N-th level (g: fewer than N); later events beyond it are not reported
        nth = (cnt < n_window).sum(axis=1)
        front = np.minimum.accumulate(np.minimum(nth, frontier))
        neg = st < 0
        if neg.any():
            r = np.flatnonzero(neg.any(axis=1))
            r = r[neg[r].argmax(axis=1) <= front[r]]
            if r.size:
                raise ValueError(f"LOBSTER rebuild: a known level's size is negative in the book after message "
                                 f"{rows[a + r[0]]}; the known row and the messages are inconsistent")
        n_known = np.minimum(cnt[np.arange(c), np.minimum(front, g - 1)], levels)
        have = lv[None, :] < n_known[:, None]
        sel = pos & (cnt <= n_known[:, None])  # the first n_known levels (all inside the frontier)
        to_end = (front >= g)[:, None] & ~have  # empty levels of a side known to its end
        px = np.zeros((c, levels), dtype=np.int64)
        px[have] = sign * np.broadcast_to(grid, st.shape)[sel]
        px[to_end] = empty
        sz = np.zeros((c, levels), dtype=np.int64)
        sz[have] = st[sel]
        px_out[a:b], sz_out[a:b], known_out[a:b] = px, sz, have | to_end
        state, frontier = st[-1], int(front[-1])


def rebuild_book(messages, known_row, known_index: int, *, levels: int | None = None,
                 message_levels: int | None = None) -> RebuiltBook:
    """The level-L book after every message, rebuilt from one known LOBSTER order-book row.

    Parameters
    ----------
    messages : DataFrame or array (n, 6)
        The message stream in LOBSTER column order (see :func:`read_messages`).
    known_row : array (4 K,)
        One LOBSTER order-book row (K levels, any K), the book after message ``known_index``.
    known_index : int
        Position of that row in ``messages`` (0 <= known_index < n).
    levels : int, optional
        Output levels L per side (default K).
    message_levels : int, optional
        The level count N of the LOBSTER request the message file came from (default K): the
        message file holds only events inside the N best levels. Pass 50 for a 50-level file
        even when the known row is a 10-level one.

    Returns
    -------
    :class:`RebuiltBook` with ``book`` and ``known`` of shape (n, 4 L): rows after
    ``known_index`` by applying messages, rows before it by undoing them, row ``known_index``
    = ``known_row`` (its first L levels). Types 1 (+size), 2, 3, 4 (-size) change the book at
    ``Price`` on the ``Direction`` side; 5 (hidden execution), 6 (cross trade) and 7 (halt) do not.

    Raises
    ------
    ValueError
        On a malformed row or message array, an unknown event type, or inconsistent inputs (a
        known level's size would become negative, e.g. when the row is not the book after
        message ``known_index`` or ``message_levels`` is larger than the file's request).
    """
    typ, size, price, direction = _message_columns(messages)
    n = len(typ)
    row = np.asarray(known_row, dtype=np.int64).ravel()
    if row.size % 4 or row.size == 0:
        raise ValueError(f"known_row has {row.size} values, not a positive multiple of 4")
    k_levels = row.size // 4
    L = k_levels if levels is None else int(levels)
    N = k_levels if message_levels is None else int(message_levels)
    if not 0 <= known_index < n:
        raise ValueError(f"known_index {known_index} outside the {n} messages")
    if L < 1 or N < 1:
        raise ValueError("levels and message_levels must be >= 1")
    bad_type = ~np.isin(typ, np.arange(1, 8))
    if bad_type.any():
        raise ValueError(f"unknown LOBSTER event type {typ[bad_type][0]} at message {int(np.argmax(bad_type))}")
    signed = np.where(typ == SUBMISSION, size, np.where(np.isin(typ, (CANCELLATION, DELETION, EXECUTION)), -size, 0))
    book = np.zeros((n, 4 * L), dtype=np.int64)
    known = np.zeros((n, 4 * L), dtype=bool)
    for px_col, sgn, empty, dirn in ((0, 1, EMPTY_ASK, -1), (2, -1, EMPTY_BID, 1)):
        px0, sz0 = row[px_col::4], row[px_col + 1::4]
        real = (px0 != empty) & (sz0 > 0)
        n_real = int(np.argmin(real)) if not real.all() else k_levels  # levels before the first empty one
        if real[n_real:].any():
            raise ValueError("known_row has a real level after an empty one")
        keys0 = sgn * px0[:n_real]
        if n_real > 1 and np.any(np.diff(keys0) <= 0):
            raise ValueError("known_row's prices are not strictly ordered best first")
        mine = (direction == dirn) & (signed != 0)
        mkeys = sgn * price
        limit = keys0[-1] if n_real == k_levels else np.iinfo(np.int64).max  # beyond: unknown forever
        grid = np.unique(np.concatenate([keys0, mkeys[mine & (mkeys <= limit)]]))
        if grid.size == 0:  # an empty side that no message touches: one placeholder price, size 0
            grid = np.zeros(1, dtype=np.int64)
        frontier0 = int(np.searchsorted(grid, keys0[-1])) if n_real == k_levels else len(grid)
        s0 = np.zeros(len(grid), dtype=np.int64)
        s0[np.searchsorted(grid, keys0)] = sz0[:n_real]
        ongrid = mine & (mkeys <= limit)
        cols = np.where(ongrid, np.searchsorted(grid, mkeys), 0)
        delta = np.where(ongrid, signed, 0)
        views = dict(px_out=book[:, px_col::4], sz_out=book[:, px_col + 1::4], known_out=known[:, px_col::4])
        # forward: rows known_index .. n-1 (row known_index: no message applied)
        fd = delta[known_index:].copy()
        fd[0] = 0
        fwd = slice(known_index, n)
        _walk(grid, s0, frontier0, cols[fwd], fd, N, np.arange(n)[fwd], sign=sgn, empty=empty,
              **{k: v[fwd] for k, v in views.items()})
        if known_index > 0:  # backward: rows known_index-1 .. 0; row j = row j+1 with message j+1 undone
            bwd = slice(known_index - 1, None, -1)
            _walk(grid, s0, frontier0, cols[known_index:0:-1], -delta[known_index:0:-1], N, np.arange(n)[bwd],
                  sign=sgn, empty=empty, **{k: v[bwd] for k, v in views.items()})
    known[:, 1::2] = known[:, 0::2]  # a level's size is known exactly when its price is
    return RebuiltBook(book=book, known=known, known_index=int(known_index))


def write_bundled(shared: str | Path, dest: str | Path = BUNDLED_DIR) -> list[Path]:
    """Write the bundled LOBSTER sample from the maintainers' raw ``market_bench/`` folder.

    Copies the MSFT hour's messages (parquet, zstd level 19, same columns and values), the MSFT
    1,000-row 50-level book excerpt (gzip), the AAPL level-10 pair (as is) and the provenance
    files, after checking that the excerpt's own message file is rows 66,912-67,911 of the hour.
    Run ``python -m quantgym.data.lobster --shared RAW`` (RAW: ``$QUANTGYM_SHARED_DATA``).
    """
    import gzip
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    src = Path(shared) / "market_bench"
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    hour_dir, excerpt_dir, aapl_dir = (src / f"lobster_{s}_2012-06-21{x}" for s, x in
                                       (("msft", "_hour"), ("msft", ""), ("aapl", "")))
    hour = read_messages(hour_dir / MSFT_HOUR_MESSAGES.name)
    excerpt = read_messages(excerpt_dir / "MSFT_2012-06-21_34200000_37800000_message_50.csv")
    part = hour.iloc[MSFT_EXCERPT_START:MSFT_EXCERPT_START + len(excerpt)].reset_index(drop=True)
    if not part.equals(excerpt):
        raise ValueError("the MSFT excerpt's messages are not rows 66,912-67,911 of the hour's message file")
    table = pa.Table.from_pandas(pd.read_parquet(hour_dir / MSFT_HOUR_MESSAGES.name), preserve_index=False)
    pq.write_table(table, dest / MSFT_HOUR_MESSAGES.name, compression="zstd",
                   compression_level=19)
    with open(excerpt_dir / "MSFT_2012-06-21_34200000_37800000_orderbook_50.csv", "rb") as fi, \
            gzip.GzipFile(dest / MSFT_EXCERPT_BOOK.name, "wb", mtime=0) as fo:
        shutil.copyfileobj(fi, fo)
    for name in (AAPL_MESSAGES.name, AAPL_BOOK.name):
        shutil.copyfile(aapl_dir / name, dest / name)
    shutil.copyfile(hour_dir / "PROVENANCE.md", dest / "PROVENANCE_msft_hour.md")
    shutil.copyfile(aapl_dir / "PROVENANCE.md", dest / "PROVENANCE_aapl.md")
    return sorted(dest.iterdir())


__all__ = ["PRICE_SCALE", "EMPTY_ASK", "EMPTY_BID", "MESSAGE_COLUMNS", "SUBMISSION", "CANCELLATION", "DELETION",
           "EXECUTION", "HIDDEN_EXECUTION", "CROSS_TRADE", "HALT", "BUNDLED_DIR", "MSFT_HOUR_MESSAGES",
           "MSFT_EXCERPT_BOOK", "MSFT_EXCERPT_START", "AAPL_MESSAGES", "AAPL_BOOK", "RebuiltBook",
           "read_messages", "read_orderbook", "rebuild_book", "write_bundled"]


if __name__ == "__main__":  # pragma: no cover - development-time bundle builder
    import argparse

    _ap = argparse.ArgumentParser(description="write quantgym/data/bundled/lobster/ from the raw data")
    _ap.add_argument("--shared", default=str(shared_data_dir()))
    for _p in write_bundled(_ap.parse_args().shared):
        print(_p.name, _p.stat().st_size)
