"""quantgym.blind: aliases by class from the seed, relative time, level blinding and the leak scanner."""

import numpy as np
import pytest

from quantgym import blind
from quantgym.blind import AliasMap, Leak, scan

ITEMS = ("SPY", "QQQ", "TLT", "IEF", "BTC-USD", "ETH-USD", "GLD")
CLASSES = ("equities", "equities", "bonds", "bonds", "cryptocurrency", "cryptocurrency", "commodities")


def test_alias_map_keeps_only_the_class_and_maps_both_ways():
    m = AliasMap(ITEMS, CLASSES, seed=7)
    assert sorted(m.alias(t) for t in ("SPY", "QQQ")) == ["EQ01", "EQ02"]
    assert sorted(m.alias(t) for t in ("TLT", "IEF")) == ["BD01", "BD02"]
    assert m.alias("GLD") == "CM01"
    assert {m.alias("BTC-USD")[:2], m.alias("ETH-USD")[:2]} == {"CR"}
    for t in ITEMS:
        assert m.real(m.alias(t)) == t
    with pytest.raises(KeyError):
        m.real("SPY")
    assert m.real("EQ99", None) is None
    assert m.to_dict() == {"seed": 7, "aliases": dict(zip(ITEMS, m.aliases))}


def test_alias_map_is_drawn_from_the_seed():
    items = [f"T{i}" for i in range(30)]
    same = AliasMap(items, ["equities"] * 30, seed=3).aliases
    assert AliasMap(items, ["equities"] * 30, seed=3).aliases == same  # stable for one seed
    assert AliasMap(items, ["equities"] * 30, seed=4).aliases != same  # another episode, other aliases
    assert same != tuple(f"EQ{i:02d}" for i in range(1, 31))  # not the canonical order
    assert AliasMap([f"T{i}" for i in range(120)], ["bonds"] * 120, seed=0).aliases[0].startswith("BD")
    assert len(AliasMap([f"T{i}" for i in range(120)], ["bonds"] * 120, seed=0).aliases[0]) == 5


def test_alias_map_rejects_bad_input():
    with pytest.raises(ValueError, match="classes"):
        AliasMap(["A", "B"], ["equities"], seed=0)
    with pytest.raises(ValueError, match="repeat"):
        AliasMap(["A", "A"], ["equities", "equities"], seed=0)
    with pytest.raises(ValueError, match="share the prefix"):
        AliasMap(["A", "B"], ["equities", "equity"], seed=0)
    assert blind.class_prefix("infrastructure") == "IN"


def test_relative_time_labels():
    assert blind.relative_days(60).tolist()[:2] == [-59, -58]
    assert blind.relative_days(60)[-1] == 0
    assert blind.day_label(-59) == "day -59" and blind.day_label(0) == "day 0" and blind.day_label(5) == "day +5"
    assert blind.decision_label(0, 12) == "decision 1 of 12" and blind.decision_label(4) == "decision 5"


def test_level_blinding():
    p = np.array([[np.nan, 50.0], [200.0, 55.0], [220.0, 45.0]])
    r = blind.rebase(p)
    assert np.isnan(r[0, 0]) and r[1, 0] == 100.0 and r[2, 0] == pytest.approx(110.0)
    assert r[0, 1] == 100.0 and r[2, 1] == pytest.approx(90.0)
    m = np.array([[1.5, 2.0], [1.6, 2.0], [np.nan, 2.0], [1.9, 2.0]])
    assert blind.change(m).tolist() == pytest.approx([0.4, 0.0])
    z = blind.zscore(m)
    x = np.array([1.5, 1.6, 1.9])
    assert z[0] == pytest.approx((1.9 - x.mean()) / x.std()) and z[1] == 0.0
    assert np.abs(blind.zscore(np.arange(60.0))) <= np.sqrt(59)
    assert blind.relative_volume(np.array([1.0, 3.0])).tolist() == [0.5, 1.5]


@pytest.mark.parametrize("text, kind", [
    ("Decision date: 2020-02-07 (data", "date"),
    ("as of 2020/2/7.", "date"),
    ("on 02/07/2020 we", "date"),
    ("stamp 20200207 ok", "date"),
    ("Feb 7 2020", "date"),
    ("Feb 7, 2020", "date"),
    ("7 February 2020", "date"),
    ("Friday, 7th of February", "date"),
    ("in February 2020 the", "date"),
    ("month 2020-02 end", "date"),
    ("the year 2015 began", "year"),
    ("since 2026.", "year"),
    ("SPY (equities)", "ticker"),
    ("weights {\"BTC-USD\": 0.1}", "ticker"),
    ("Kweichow Moutai rose", "name"),
    ("code 600519.SH up", "code"),
    ("code 000001 up", "code"),
    ("300750.SZ", "code"),
    ("a COVID 2020 window", "period"),
    ("covid_2020", "period"),
    ("vix: 14.96", "level"),
    ("rate +1.590 now", "level"),
])
def test_scan_finds(text, kind):
    leaks = scan(text, tickers=["SPY", "BTC-USD"], names=["Kweichow Moutai"], period_names=["covid_2020"],
                 levels=[14.96, "1.59"])
    assert [lk.kind for lk in leaks] == [kind], leaks
    assert all(isinstance(lk, Leak) and text[lk.start:lk.end] == lk.text for lk in leaks)


@pytest.mark.parametrize("text", [
    "[PORTBENCH S1] decision 3 of 12, day 0 (data through its close).",
    "EQ07 (equities): rebased 108.3, return +8.26%, vol 9.7%",
    "SPYX and XSPY are other words; spy lower case",
    "NAV 1,020,153.22 and 1,000,000.00",
    "vix z +1.2, fed_funds_rate z -0.4",
    "vix 14.9 and 15 (less precise than the real print)",
    "return 14.96% is relative",
    "correlations .85 -.12 +0.523 and a level 0.52 of two digits",
    "120 days, 60 rows, 2.5 %, 2009 and 2027 are outside the years",
    "a price of 2015.37",
    "weights {\"EQ01\": 0.25}",
])
def test_scan_passes_clean_text(text):
    assert scan(text, tickers=["SPY"], names=["Moutai"], period_names=["covid_2020"],
                levels=[14.96, 1.59, "0.52"]) == []


def test_scan_year_inside_a_decimal_is_not_reported_twice():
    leaks = scan("2020-02-07 and 2020", period_names=())
    assert [lk.kind for lk in leaks] == ["date", "year"]


def test_percent_levels_match_only_percentages():
    assert [lk.kind for lk in scan("rate 1.59%", levels=["1.59%"])] == ["level"]
    assert scan("rate 1.59", levels=["1.59%"]) == []


def test_vocabulary_scans_with_its_words():
    v = blind.Vocabulary().update({"tickers": ["SPY"], "codes": ["600519"], "period_names": ["normal_2024"]})
    assert [lk.kind for lk in v.scan("SPY 600519 normal 2024")] == ["ticker", "ticker", "period"]


def test_bundled_vocabulary_collects_the_task_records_words():
    v = blind.bundled_vocabulary(["portbench"])
    assert {"SPY", "BTC-USD", "^VIX", "AAPL"} <= v.tickers
    assert {"covid_2020", "COVID Crash", "2020_covid_flash_crash"} <= v.period_names
    assert [lk.kind for lk in v.scan("SPY in the COVID Crash")] == ["ticker", "period"]
