"""PortBench user data that needs normalising (dates as text, a time zone, unsorted rows, prices as text) gives
the same data as the clean frame, and says what was normalised: one line per change in ``data.notes``, each
said once as a PortBenchDataWarning (a UserWarning); clean frames have no notes and no warning."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.portbench.data import PortBenchData, PortBenchDataWarning, load_portbench_data

CLASSES = {"SPY": "equity", "TLT": "bond"}


def _prices() -> pd.DataFrame:
    days = pd.bdate_range("2024-01-01", periods=60, name="date")
    rng = np.random.default_rng(3)
    return pd.DataFrame(100 * np.cumprod(1 + rng.normal(0, 0.01, (60, 2)), axis=0), index=days, columns=list(CLASSES))


def _load(prices: pd.DataFrame) -> tuple[PortBenchData, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = PortBenchData.from_frames(prices, CLASSES)
    return data, [str(w.message) for w in caught if issubclass(w.category, PortBenchDataWarning)]


def _same(a: PortBenchData, b: PortBenchData) -> None:
    assert a.dates.equals(b.dates) and a.tickers == b.tickers
    np.testing.assert_array_equal(a.prices, b.prices)
    np.testing.assert_array_equal(a.returns, b.returns)


def test_clean_frames_have_no_notes():
    data, said = _load(_prices())
    assert data.notes == () and said == []


@pytest.mark.parametrize("case, expect", [
    ("text_dates", "prices: the index held text (e.g. '2024-01-01'), parsed as dates"),
    ("tz", "prices: the index was timezone-aware (UTC), converted to UTC and the zone dropped"),
    ("unsorted", "prices: the rows were not in date order, sorted"),
    ("text_prices", "prices: 2 column(s) held text (SPY, TLT), read as numbers"),
    ("times", "prices: the index had times of day, dropped (each row is its date)"),
])
def test_each_normalisation_is_noted_once_and_the_data_is_the_clean_data(case, expect):
    clean, _ = _load(_prices())
    px = _prices()
    if case == "text_dates":
        px.index = px.index.strftime("%Y-%m-%d")
    elif case == "tz":
        px.index = px.index.tz_localize("UTC")
    elif case == "unsorted":
        px = px.iloc[::-1]
    elif case == "text_prices":
        px = px.map(repr)
    elif case == "times":
        px.index = px.index + pd.Timedelta(hours=16)
    data, said = _load(px)
    _same(data, clean)
    assert data.notes == (expect,)
    assert said == [f"PortBench data: {expect}"]


def test_text_that_is_not_a_number_is_counted_and_zone_and_order_notes_add_up():
    px = _prices().astype(object)
    px.iloc[3, 0] = "n/a"
    px = px.iloc[::-1]
    px.index = px.index.tz_localize("America/New_York")
    data, said = _load(px)
    assert data.notes == (
        "prices: the index was timezone-aware (America/New_York), converted to UTC and the zone dropped",
        "prices: the index had times of day, dropped (each row is its date)",
        "prices: the rows were not in date order, sorted",
        "prices: 2 column(s) held text (SPY, TLT), read as numbers; 1 value(s) that are not numbers became NaN "
        "(no value)",
    )
    assert len(said) == 4 and data.dates.size == 59  # the day without a SPY price is no trading day


def test_a_directory_says_its_notes_once_and_keeps_them(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    px = _prices().iloc[::-1]
    px.to_parquet(d / "prices.parquet")
    pd.DataFrame({"ticker": list(CLASSES), "asset_class": list(CLASSES.values())}).to_csv(d / "assets.csv",
                                                                                           index=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's default: a message once per location
        for _ in range(3):
            data = load_portbench_data(d)
    said = [str(w.message) for w in caught if issubclass(w.category, PortBenchDataWarning)]
    assert said == [f"PortBench data ({d.resolve()}): prices: the rows were not in date order, sorted"]
    assert data.notes == ("prices: the rows were not in date order, sorted",)


def test_an_empty_frame_has_nothing_to_note():
    """An empty frame (no rows: the paper loader's macro without series, say) is cleaned without a note."""
    from quantgym.envs.portbench.data import clean_index

    notes: list[str] = []
    out = clean_index(pd.DataFrame({"x": []}), "macro", notes)
    assert len(out) == 0 and isinstance(out.index, pd.DatetimeIndex) and notes == []
