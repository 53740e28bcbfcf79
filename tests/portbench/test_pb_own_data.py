"""PortBench on a user's own data directory (docs/data.md §7): the directory defines its own universe, the
loader's warnings are said once, the errors say what to do, and a baseline that cannot follow its rule on
such data records its fallback in the step records."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from quantgym.envs.portbench.baselines import SIXTY_FORTY_BONDS, SIXTY_FORTY_EQUITY, make_baseline
from quantgym.envs.portbench.config import PortBenchConfig
from quantgym.evaluation import evaluate
from tests.test_bench_data import write_portbench_dir

PERIOD = "2020-03-02:2020-06-30:weekly"


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    root = tmp_path_factory.mktemp("own_portbench")
    return {
        # SPY (the §1.9 regime ticker) and made-up tickers; no bond of 60/40's bond leg
        "nobonds": write_portbench_dir(root / "nobonds", {"SPY": "equity", "FOO": "equity", "BARX": "commodity"}),
        # nothing of 60/40 at all; the regime is labelled on FOO
        "neither": write_portbench_dir(root / "neither", {"FOO": "equity", "BARX": "commodity", "QUX": "bond"}),
    }


def test_sixty_forty_records_its_fallback_per_step_on_data_without_a_leg(own):
    with pytest.warns(UserWarning, match=r"60/40 .*none of its bond tickers .*its equities take the whole budget"):
        res = evaluate("PortBench-Balanced-v0", make_baseline("sixty_forty"), period=PERIOD, data=str(own["nobonds"]))
    assert res.steps
    for st in res.steps:
        assert st["fallback"] == f"60/40: none of its bonds ({', '.join(SIXTY_FORTY_BONDS)}) available; 100 % equities"
        assert set(st["weights"]) == {"SPY"}  # the equity leg (SPY only in this data) takes the whole budget
    assert all(s.get("fallback") for s in res.to_dict()["steps"])  # results.json keeps it


def test_sixty_forty_without_any_of_its_tickers_trades_equal_weight_and_says_so(own):
    with pytest.warns(UserWarning, match=r"none of its bond tickers .* and none of its equity tickers .*equal weight"):
        res = evaluate("PortBench-Balanced-v0", make_baseline("sixty_forty"), period=PERIOD, data=str(own["neither"]),
                       config=PortBenchConfig(regime_ticker="FOO"))
    for st in res.steps:
        assert st["fallback"] == "60/40: none of its equities or bonds available; equal weight"
        assert sorted(st["weights"]) == ["BARX", "FOO", "QUX"]
        np.testing.assert_allclose(list(st["weights"].values()), [1 / 3] * 3, atol=1e-3)


def test_sixty_forty_on_the_bundled_data_has_no_fallback():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the bundled universe has both legs: no warning either
        res = evaluate("PortBench-Balanced-v0", make_baseline("sixty_forty"), period="covid_2020")
    assert res.steps and not any("fallback" in s for s in res.steps)
    legs = set(SIXTY_FORTY_EQUITY) | set(SIXTY_FORTY_BONDS)
    assert all(set(s["weights"]) == legs for s in res.steps)


def test_a_directory_trades_its_own_universe_and_warns_about_nothing_of_the_bundle(own):
    import gymnasium as gym

    import quantgym  # noqa: F401  (registers the envs)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is left out: no warning (none about the bundled 80 either)
        env = gym.make("PortBench-Balanced-v0", data=str(own["nobonds"]), period=PERIOD)
    assert env.unwrapped.view.tickers == ("SPY", "FOO", "BARX")  # canonical order: class, then as given
    obs, _ = env.reset(seed=0)
    assert obs["available"].shape == (3,)
    env.close()


def test_tickers_a_directory_cannot_trade_are_named_once_and_kept_in_meta(tmp_path):
    import pandas as pd

    from quantgym.envs.portbench.data import PortBenchDataWarning, load_portbench_data, not_traded_notes

    d = write_portbench_dir(tmp_path / "d", {"SPY": "equity", "FOO": "equity", "NOCLS": "equity"})
    prices = pd.read_parquet(d / "prices.parquet")
    prices["TEXT"] = "n/a"  # a column with no number in it has no price
    prices.to_parquet(d / "prices.parquet")
    assets = {"SPY": "equity", "FOO": "equity", "GONE": "bond", "TEXT": "bond"}
    pd.DataFrame({"ticker": list(assets), "asset_class": list(assets.values())}).to_csv(d / "assets.csv", index=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's default: a message once per location
        for _ in range(3):
            data = load_portbench_data(d)
    said = [str(w.message) for w in caught if issubclass(w.category, PortBenchDataWarning)]
    assert said == [f"PortBench data ({d.resolve()}): prices: 1 column(s) held text (TEXT), read as numbers; "
                    f"{len(prices)} value(s) that are not numbers became NaN (no value)",
                    f"PortBench data ({d.resolve()}): 1 ticker(s) not traded (no asset_class in assets.csv): NOCLS",
                    f"PortBench data ({d.resolve()}): 2 ticker(s) not traded (no prices in prices.parquet): GONE, TEXT"]
    assert data.tickers == ("SPY", "FOO")
    assert data.meta["not_traded"] == {"no_class": ["NOCLS"], "no_prices": ["GONE", "TEXT"]}
    assert not_traded_notes(data, limit=6) == ["1 ticker(s) not traded (no asset_class in assets.csv): NOCLS",
                                               "2 ticker(s) not traded (no prices in prices.parquet): GONE, TEXT"]


def test_the_missing_tickers_warning_of_an_explicit_universe_is_said_once_per_process(own):
    import gymnasium as gym

    import quantgym  # noqa: F401
    from quantgym.envs.portbench.data import PortBenchDataWarning, as_portbench_data, load_portbench_data

    uni = ["SPY", "FOO", "QQQ", "TLT"]  # QQQ and TLT are not in the data
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        data = load_portbench_data(own["nobonds"], universe=uni)
        load_portbench_data(own["nobonds"], universe=uni)
        as_portbench_data(str(own["nobonds"]))
        gym.make("PortBench-Balanced-v0", data=data, period=PERIOD).close()
        load_portbench_data(own["nobonds"], universe=uni)
    said = [str(w.message) for w in caught if issubclass(w.category, PortBenchDataWarning)]
    assert len(said) == 1 and said[0].endswith("2 universe ticker(s) have no prices and are dropped: QQQ, TLT")
    assert data.tickers == ("SPY", "FOO")
    with pytest.warns(PortBenchDataWarning, match="QQQ, TLT"):  # a filter that asks for every one gets it
        load_portbench_data(own["nobonds"], universe=uni)


def test_empty_universe_says_how_to_choose_one_and_that_spy_is_needed(tmp_path, own):
    import pandas as pd

    from quantgym.envs.portbench.data import load_portbench_data

    d = write_portbench_dir(tmp_path / "d", {"FOO": "equity", "BARX": "bond"})
    pd.DataFrame({"ticker": ["Foo", "Barx"], "asset_class": ["equity", "bond"]}).to_csv(d / "assets.csv", index=False)
    msg = r"empty universe: .*priced: FOO, BARX; with a class: Foo, Barx.*universe=\[\.\.\.\].*SPY, the §1\.9 regime"
    with pytest.raises(ValueError, match=msg):
        load_portbench_data(d)
    # a universe of tickers without prices names them (not the data's other tickers)
    with pytest.raises(ValueError, match=r"empty universe: none of universe=\[AAA, BBB\] has prices in the data.*needs SPY"):
        load_portbench_data(own["nobonds"], universe=["AAA", "BBB"])
    with pytest.raises(ValueError, match=r"none of universe=\[SPY\] has prices"):
        load_portbench_data(own["neither"], universe=["SPY"])


def test_made_up_tickers_without_spy_are_refused_naming_spy_first(own):
    import gymnasium as gym

    import quantgym  # noqa: F401

    with pytest.raises(ValueError, match=r"regime ticker 'SPY' \(spec §1\.9\) .*regime_ticker=\.\.\.\) to one of its "
                                         r"equities \(FOO\)"):
        gym.make("PortBench-Balanced-v0", data=str(own["neither"]), period=PERIOD)
