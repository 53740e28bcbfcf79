"""The S1 prompt names the asset levels as what they are: Yahoo adjusted closes (docs/data.md §1), which embed
distributions paid after the date, so they are never presented as "the price" of the day."""

import re

import pytest

from quantgym.envs.portbench.env import PortBenchEnv
from quantgym.envs.portbench.prompts import render_s1
from quantgym.envs.portbench.universe import MACRO_KEYS
from quantgym.spaces import PROMPT_STYLES


@pytest.fixture(scope="module")
def snap():
    env = PortBenchEnv(period="normal_2024", scoring=False)
    env.reset(seed=0)
    yield env.snapshot
    env.close()


def test_full_s1_labels_the_level_adjusted_close_and_never_price(snap):
    text = render_s1(snap, MACRO_KEYS, style="full")
    assert "adj. close (split- and dividend-adjusted level, not the traded price)" in text
    rows = re.findall(r"^(\S+) \([a-z_ ]+\): adj\. close ([\d.]+), return", text, re.M)
    assert [t for t, _ in rows] == [snap.tickers[i] for i in snap.avail_idx]
    spy = dict(rows)["SPY"]
    assert float(spy) == pytest.approx(snap.price[snap.tickers.index("SPY")], abs=0.005)
    assert not re.search(r"\bprice [\d.]", text)  # no level is called a price


@pytest.mark.parametrize("style", [s for s in PROMPT_STYLES if s != "full"])
def test_short_styles_show_no_level_at_all(snap, style):
    text = render_s1(snap, MACRO_KEYS, style=style)
    spy = f"{snap.price[snap.tickers.index('SPY')]:.2f}"
    assert spy not in text and not re.search(r"\bprice\b", text)


def test_the_level_is_the_adjusted_close_of_the_data(snap):
    from quantgym.envs.portbench.data import load_portbench_data

    data = load_portbench_data()
    t = data.index_at(snap.decision_date)
    j = data.ticker_index["SPY"]
    assert snap.price[j] == data.prices[t, j]  # the adjusted close of the decision date
