"""The LOBSTER book rebuilder (quantgym.data.lobster) on real bundled LOBSTER files and a hand-made stream.

Real checks: MSFT 2012-06-21, the whole hour's message stream (141,507 messages) rebuilt forward
and backward from a 50-level excerpt row and compared with all 1,000 real excerpt rows; AAPL
level 10 (999 events) and TSLA level 10 (50 events, with a cross trade) from their first and last
rows. The data is the package's bundled copy (no network).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from quantgym.data import lobster as lob
from quantgym.data.lobster import EMPTY_ASK, EMPTY_BID, rebuild_book

SOURCES = lob.BUNDLED_DIR.parent / "market_bench" / "sources"
K = lob.MSFT_EXCERPT_START


@pytest.fixture(scope="module")
def hour() -> pd.DataFrame:
    return lob.read_messages(lob.MSFT_HOUR_MESSAGES)


@pytest.fixture(scope="module")
def excerpt() -> np.ndarray:
    return lob.read_orderbook(lob.MSFT_EXCERPT_BOOK)


@pytest.fixture(scope="module")
def forward(hour, excerpt) -> lob.RebuiltBook:
    return rebuild_book(hour, excerpt[0], K, levels=50, message_levels=50)


@pytest.fixture(scope="module")
def backward(hour, excerpt) -> lob.RebuiltBook:
    return rebuild_book(hour, excerpt[-1], K + len(excerpt) - 1)


def mismatches(rebuilt: lob.RebuiltBook, rows: slice, truth: np.ndarray) -> int:
    """Known cells of ``rebuilt.book[rows]`` that differ from the real rows ``truth``."""
    return int(((rebuilt.book[rows] != truth) & rebuilt.known[rows]).sum())


def test_bundled_hour_holds_the_excerpt_messages(hour, excerpt):
    assert len(hour) == 141_507 and excerpt.shape == (1000, 200)
    assert hour["Time"].is_monotonic_increasing
    ex = lob.read_messages(SOURCES / "MSFT_2012-06-21_34200000_37800000_message_50.csv.gz")
    assert hour.iloc[K:K + 1000].reset_index(drop=True).equals(ex)  # rows 66,912-67,911


def test_msft_hour_forward_exact_on_all_1000_rows(forward, excerpt):
    sl = slice(K, K + 1000)
    assert forward.book.shape == (141_507, 200)
    assert np.array_equal(forward.book[K], excerpt[0]) and forward.known[K].all()
    assert mismatches(forward, sl, excerpt) == 0
    # what the message file cannot know in the excerpt's 2.8 s: deep levels that emptied (200,000 cells)
    assert int((~forward.known[sl]).sum()) == 7718
    unknown_levels = (~forward.known[sl]).reshape(1000, 50, 4).any(axis=2).any(axis=0)
    assert not unknown_levels[:13].any()  # levels 1-13 known in every excerpt row
    # the top 10 of the whole hour is known in every row, and never crossed
    assert forward.known[:, :40].all()
    assert (forward.book[:, 0] > forward.book[:, 2]).all()
    assert 306_000 <= forward.book[:, 2].min() and forward.book[:, 0].max() <= 312_000


def test_msft_hour_backward_from_the_last_row(backward, excerpt):
    sl = slice(K, K + 1000)
    assert np.array_equal(backward.book[K + 999], excerpt[-1])
    assert mismatches(backward, sl, excerpt) == 0
    assert int((~backward.known[sl]).sum()) == 4028
    assert backward.known[:, :40].all()


def test_msft_forward_and_backward_agree_over_the_hour(forward, backward):
    both = forward.known & backward.known
    assert not ((forward.book != backward.book) & both).any()
    assert np.array_equal(forward.book[:, :40], backward.book[:, :40])  # top 10, all 141,507 rows


def test_msft_top10_row_with_50_level_messages(hour, excerpt):
    """A 10-level known row over a 50-level message file: same values, fewer known cells."""
    r = rebuild_book(hour.iloc[K:K + 1000], excerpt[0, :40], 0, message_levels=50)
    assert r.book.shape == (1000, 40)
    assert mismatches(r, slice(None), excerpt[:, :40]) == 0
    assert 0 < r.n_unknown < 40_000 and r.known[:, :4].all()


@pytest.mark.parametrize("first", [True, False])
def test_aapl_level10_excerpt(first):
    msg, ob = lob.read_messages(lob.AAPL_MESSAGES), lob.read_orderbook(lob.AAPL_BOOK)
    assert msg.shape == (999, 6) and ob.shape == (999, 40)
    k = 0 if first else len(ob) - 1
    r = rebuild_book(msg, ob[k], k)
    assert mismatches(r, slice(None), ob) == 0
    # a level-10 file says little about depth once the opening sweeps levels away
    assert r.n_unknown == (27_114 if first else 17_914)
    assert r.known.sum() > 0.3 * r.known.size


@pytest.mark.parametrize("k", [0, 20, 49])
def test_tsla_level10_sample_with_a_cross_trade(k):
    msg = lob.read_messages(SOURCES / "TSLA_2015-01-07_34200000_57600000_message_10_SAMPLE.csv.gz")
    ob = lob.read_orderbook(SOURCES / "TSLA_2015-01-07_34200000_57600000_orderbook_10_SAMPLE.csv.gz")
    assert (msg["Type"] == lob.CROSS_TRADE).sum() == 1
    r = rebuild_book(msg.to_numpy(), ob[k], k)
    assert mismatches(r, slice(None), ob) == 0 and r.known[:, :4].all()


# --- a hand-made stream with every event type -------------------------------------------------
# prices in LOBSTER units (USD x 10,000); 3 levels, a 3-level message file
A1, A15, A2, A3 = 1_010_000, 1_015_000, 1_020_000, 1_030_000
B05, B1, B2, B3 = 1_005_000, 1_000_000, 990_000, 980_000
ROW0 = [A1, 10, B1, 5, A2, 20, B2, 15, A3, 30, B3, 25]
HAND = np.array([
    # Time, Type, OrderID, Size, Price, Direction
    [1.0, 1, 1, 30, A3, -1],   # 0: the message the known row follows (not applied)
    [2.0, 1, 2, 7, B05, 1],    # 1: submission, new best bid; B3 becomes level 4 -> unknown from here
    [3.0, 2, 3, 5, A2, -1],    # 2: partial cancel at A2
    [4.0, 4, 4, 10, A1, -1],   # 3: visible execution empties A1; ask level 3 enters from beyond
    [5.0, 5, 0, 3, B1, 1],     # 4: hidden execution: no book change
    [6.0, 3, 2, 7, B05, 1],    # 5: deletion of the new bid; bid level 3 (B3) cannot be known
    [7.0, 6, -1, 100, A2, -1],  # 6: cross trade: no book change
    [8.0, 7, 0, 0, -1, -1],    # 7: trading halt: no book change
    [9.0, 1, 5, 8, A15, -1],   # 8: submission inside the spread: three known asks again
])
U = None  # an unknown level
HAND_ASKS = [[(A1, 10), (A2, 20), (A3, 30)], [(A1, 10), (A2, 20), (A3, 30)], [(A1, 10), (A2, 15), (A3, 30)],
             [(A2, 15), (A3, 30), U], [(A2, 15), (A3, 30), U], [(A2, 15), (A3, 30), U],
             [(A2, 15), (A3, 30), U], [(A2, 15), (A3, 30), U], [(A15, 8), (A2, 15), (A3, 30)]]
HAND_BIDS = [[(B1, 5), (B2, 15), (B3, 25)]] + [[(B05, 7), (B1, 5), (B2, 15)]] * 4 + [[(B1, 5), (B2, 15), U]] * 4


def expected(asks, bids):
    """(book, known) arrays from per-row level lists."""
    n = len(asks)
    book, known = np.zeros((n, 12), dtype=np.int64), np.zeros((n, 12), dtype=bool)
    for i in range(n):
        for lvl in range(3):
            for off, side in ((0, asks), (2, bids)):
                if side[i][lvl] is not U:
                    book[i, 4 * lvl + off:4 * lvl + off + 2] = side[i][lvl]
                    known[i, 4 * lvl + off:4 * lvl + off + 2] = True
    return book, known


def test_hand_stream_forward_every_event_type():
    assert set(HAND[:, 1].astype(int)) == set(range(1, 8))
    r = rebuild_book(HAND, ROW0, 0)
    book, known = expected(HAND_ASKS, HAND_BIDS)
    assert np.array_equal(r.known, known)
    assert np.array_equal(r.book, book)  # unknown cells hold 0
    assert r.n_unknown == 2 * 5 + 2 * 4 and r.levels == 3
    frame = pd.DataFrame(HAND, columns=list(lob.MESSAGE_COLUMNS))
    assert np.array_equal(rebuild_book(frame, ROW0, 0).book, r.book)


def test_hand_stream_backward_from_the_last_row():
    last = [A15, 8, B1, 5, A2, 15, B2, 15, A3, 30, B3, 25]  # the true book after message 8
    r = rebuild_book(HAND, last, len(HAND) - 1)
    assert np.array_equal(r.book[-1], last) and r.known[-1].all()
    # undoing 8 drops A15 (ask level 3 then unknown); undoing 3 restores A1; bids: undoing 5 re-adds
    # B05, which pushes B3 out of the 3-level window, so bid level 3 stays unknown back to row 0
    asks = [[(A1, 10), (A2, 20), (A3, 30)]] * 2 + [[(A1, 10), (A2, 15), (A3, 30)]] + [[(A2, 15), (A3, 30), U]] * 5 \
        + [[(A15, 8), (A2, 15), (A3, 30)]]
    bids = [[(B1, 5), (B2, 15), U]] + [[(B05, 7), (B1, 5), (B2, 15)]] * 4 + [[(B1, 5), (B2, 15), (B3, 25)]] * 4
    book, known = expected(asks, bids)
    assert np.array_equal(r.known, known) and np.array_equal(r.book, book)


def test_hand_stream_empty_levels_and_deeper_windows():
    # a bid side with one level and two LOBSTER dummies is known to its end: a new deeper bid is known
    row = [A1, 10, B1, 5, A2, 20, EMPTY_BID, 0, A3, 30, EMPTY_BID, 0]
    msgs = np.array([[1.0, 1, 1, 5, B1, 1], [2.0, 1, 2, 4, B2, 1], [3.0, 3, 9, 5, B1, 1], [4.0, 3, 2, 4, B2, 1]])
    r = rebuild_book(msgs, row, 0)
    assert r.known[:, 2::4].all()  # every bid level known in every row
    assert r.book[:, 2::4].tolist() == [[B1, EMPTY_BID, EMPTY_BID], [B1, B2, EMPTY_BID],
                                        [B2, EMPTY_BID, EMPTY_BID], [EMPTY_BID] * 3]
    assert r.book[:, 3::4].tolist() == [[5, 0, 0], [5, 4, 0], [4, 0, 0], [0, 0, 0]]
    # more output levels than the row has: the extra levels are unknown unless the side is known to its end
    wide = rebuild_book(msgs, row, 0, levels=5)
    assert wide.book.shape == (4, 20) and not wide.known[:, 12::4].any() and wide.known[:, 14::4].all()
    px = wide.prices_usd()
    assert px[0, 0] == 101.0 and np.isnan(px[0, 3]) and np.isnan(px[0, 6])


def test_inconsistent_inputs_raise():
    with pytest.raises(ValueError, match="inconsistent"):
        rebuild_book(HAND, [A1, 5, B1, 5, A2, 20, B2, 15, A3, 30, B3, 25], 0)  # A1 executes 10 of 5
    with pytest.raises(ValueError, match="event type"):
        rebuild_book(np.array([[1.0, 8, 1, 1, A1, -1]]), ROW0, 0)
    with pytest.raises(ValueError, match="known_index"):
        rebuild_book(HAND, ROW0, len(HAND))
    with pytest.raises(ValueError, match="multiple of 4"):
        rebuild_book(HAND, ROW0[:5], 0)


def test_chunking_does_not_change_the_result(monkeypatch):
    msg, ob = lob.read_messages(lob.AAPL_MESSAGES), lob.read_orderbook(lob.AAPL_BOOK)
    ref = rebuild_book(msg, ob[500], 500)
    monkeypatch.setattr(lob, "_CHUNK_CELLS", 7)  # one row per chunk
    one = rebuild_book(msg, ob[500], 500)
    assert np.array_equal(one.book, ref.book) and np.array_equal(one.known, ref.known)
    assert mismatches(ref, slice(None), ob) == 0
