"""Paper-mode data flags on tiny hand-made panels (spec §1.2, §1.3, §1.4, §6.2, §11.1; Appendix A).

Each test switches ONE data flag on top of clean mode and checks what it must change and that the
other columns / arrays stay as in clean mode.
"""

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.portbench.paper import PaperFidelity
from quantgym.envs.portbench.paper.data import build_paper_data, paper_universe, winsorize_frame

from ._panel import TICKERS, _panel


def _build(flags):
    return build_paper_data(flags, raw=_panel(), tickers=TICKERS)


def _col(d, t):
    return d.tickers.index(t)


def test_clean_flags_reproduce_the_clean_loader_rules():
    d = _build(PaperFidelity())
    # NYSE-style calendar: weekdays with a SPY price (the 15th is missing), 9 rows
    assert len(d.dates) == 9 and pd.Timestamp("2024-01-15") not in d.dates
    spy = d.returns[:, _col(d, "SPY")]
    # SPY on Tue 16th: 105/104 - 1 (the holiday has no row and loses nothing)
    assert spy[list(d.dates).index(pd.Timestamp("2024-01-16"))] == pytest.approx(105 / 104 - 1)
    # BTC (clean, prior-day close): Tue 16th sees the close of Mon 15th (121) vs Fri 12th's row = close of Thu 11th
    # (100): the weekend +21 % is compounded into one trading day
    btc = d.returns[:, _col(d, "BTC-USD")]
    assert btc[list(d.dates).index(pd.Timestamp("2024-01-16"))] == pytest.approx(0.21)


def test_log_returns_equities_changes_equities_only():
    clean, paper = _build(PaperFidelity()), _build(PaperFidelity.only("log_returns_equities"))
    i = _col(clean, "SPY")
    # Tue 9th: ln(101/100) = 0.00995033 instead of 0.01
    assert paper.returns[1, i] == pytest.approx(np.log(1.01))
    assert clean.returns[1, i] == pytest.approx(0.01)
    others = [j for j, t in enumerate(clean.tickers) if t != "SPY"]
    np.testing.assert_array_equal(np.nan_to_num(paper.returns[:, others]), np.nan_to_num(clean.returns[:, others]))
    np.testing.assert_array_equal(paper.prices, clean.prices)


def test_winsorize_frame_full_sample_percentiles():
    x = pd.DataFrame({"a": np.arange(101.0), "b": np.r_[np.nan, np.arange(100.0)]},
                     index=pd.bdate_range("2015-01-01", periods=101))
    w = winsorize_frame(x)
    # numpy linear quantiles of 0..100: q01 = 1, q99 = 99
    assert (w["a"].min(), w["a"].max()) == (1.0, 99.0)
    assert np.isnan(w["b"].iloc[0])  # NaN stays NaN
    # rows before the sample start do not enter the percentiles but are clipped
    w2 = winsorize_frame(x, start="2015-03-01")
    sub = x.loc["2015-03-01":, "a"]
    assert w2["a"].min() == pytest.approx(sub.quantile(0.01))


def test_winsorize_clips_non_cash_and_leaves_cash():
    clean, paper = _build(PaperFidelity()), _build(PaperFidelity.only("winsorize", True).replace(winsor_start="2024-01-01"))
    b = _col(clean, "BIL")
    np.testing.assert_array_equal(paper.returns[:, b], clean.returns[:, b])  # cash is not winsorised
    np.testing.assert_array_equal(paper.prices[:, b], clean.prices[:, b])
    s = _col(clean, "SPY")
    ps = paper.prices[:, s]
    # SPY prices 100..108 on 9 days: q01 = 100.08, q99 = 107.92 (linear interpolation)
    assert np.nanmin(ps) == pytest.approx(100.08) and np.nanmax(ps) == pytest.approx(107.92)
    r = paper.returns[:, s]
    raw = clean.returns[:, s]
    fin = np.isfinite(raw)
    assert np.nanmax(r) < np.nanmax(raw[fin]) and np.nanmin(r) > np.nanmin(raw[fin])


def test_weekday_calendar_repeats_holiday_return_and_drops_crypto_weekends():
    clean, paper = _build(PaperFidelity()), _build(PaperFidelity.only("weekday_calendar"))
    # Mon-Fri calendar (pandas.bdate_range): 10 weekdays, the holiday included
    assert list(paper.dates) == list(pd.bdate_range("2024-01-08", "2024-01-19"))
    dates = list(paper.dates)
    s, c = _col(paper, "SPY"), _col(paper, "BTC-USD")
    hol = dates.index(pd.Timestamp("2024-01-15"))
    # holiday: the last own return in [t-7, t] = Friday 12th's 104/103 - 1 is applied again
    assert paper.returns[hol, s] == pytest.approx(104 / 103 - 1)
    assert paper.returns[hol + 1, s] == pytest.approx(105 / 104 - 1)
    # crypto: same-day closes; Sat +10 % and Sun +10 % are never applied (Mon 15th: 121/121 - 1 = 0)
    assert paper.returns[hol, c] == pytest.approx(0.0)
    assert np.nansum(paper.returns[:, c]) == pytest.approx(0.0)
    assert np.nansum(clean.returns[:, c]) == pytest.approx(0.21)  # clean compounds the weekend
    # the real-price mask marks the holiday as not traded
    assert not paper.real_price[hol, s] and paper.real_price[hol, c]


def test_paper_universes_order():
    t89, c89 = paper_universe("89_no_crypto")
    assert len(t89) == 89 and t89[25] == "^VIX" and t89[26] == "SHV" and "BTC-USD" not in t89
    assert t89[-18:][0] == "AAPL" and t89[-19] == "ICSH" and c89[-1] == "equities"
    t81, c81 = paper_universe("81_crypto")
    assert len(t81) == 81 and t81[25] == "^VIX" and c81[25] == "equities" and "BTC-USD" in t81
    t80, _ = paper_universe(None)
    assert len(t80) == 80 and "^VIX" not in t80


def test_universe_flag_on_bundled_data_trades_vix():
    from quantgym.envs.portbench.paper.data import load_paper_data

    d = load_paper_data(PaperFidelity.only("universe"))
    assert d.n_assets == 89 and d.tickers[25] == "^VIX"
    v = d.returns[:, 25]
    assert np.isfinite(v[-100:]).all()  # VIX has returns like any ETF
    # everything else is the clean data of those tickers
    from quantgym.envs.portbench.data import load_portbench_data

    c = load_portbench_data()
    np.testing.assert_array_equal(np.nan_to_num(d.returns[:, 0]), np.nan_to_num(c.returns[:, 0]))


def test_flag_helpers():
    p = PaperFidelity.paper()
    assert p.universe == "89_no_crypto" and p.weekday_calendar and p.any
    assert PaperFidelity().enabled() == [] and not PaperFidelity().any
    assert PaperFidelity.only("winsorize").enabled() == ["winsorize"]
    with pytest.raises(ValueError, match="unknown paper flag"):
        PaperFidelity.only("nope")
    with pytest.raises(ValueError, match="universe"):
        PaperFidelity(universe="42")
