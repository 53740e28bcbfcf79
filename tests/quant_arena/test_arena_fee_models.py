"""A user-defined fee model in Quant-Arena's cash account and env (quantgym.models; spec §10.9 is the built-in)."""

from __future__ import annotations

import numpy as np
import pytest

from quantgym.envs.quant_arena.account import run_account, window_rows
from quantgym.envs.quant_arena.config import ArenaConfig, ArenaCostModel, ExecutionModel, ImpactModel
from quantgym.envs.quant_arena.env import QuantArenaEnv
from quantgym.envs.quant_arena.examples import example_source
from quantgym.envs.quant_arena.executor import evaluate_submission
from quantgym.envs.quant_arena.records import read_record
from quantgym.models import ImportableModel

from .conftest import SMALL_WINDOWS, flat_rows, make_panel


class SpecFeesInPython:
    """The spec's fees (ArenaCostModel) as a user model of this module: runs in the interpreted loop."""

    def order_fee(self, value, side, day):
        return ArenaCostModel().order_fee(value, side, day)


class FullFillAtOpen:
    """An impact model of this module: every order fills in full at the open (what ImpactModel.off() does)."""

    def fill(self, side, qty, price, sigma, adv, limit, day):
        return qty, qty * price


class TenBpSpread:
    """An impact model of this module: every order fills in full, 10 bp worse than the open."""

    def fill(self, side, qty, price, sigma, adv, limit, day):
        assert sigma > 0 and adv >= 0 and len(day) == 10  # the §10.8 inputs reach the model
        return qty, qty * price * (1 + side * 0.001)

    def describe(self):
        return "fills 10 bp worse than the open"


FLAT = ImportableModel("quantgym.models:FlatFee", {"per_order": 7.0, "currency": "CNY"})


def test_flat_fee_on_a_hand_worked_account():
    # two stocks at a flat 10 CNY, both selected every day, no impact, 1,000,000 CNY, lots of 100
    dates = ["2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]
    ds = make_panel(flat_rows(["SH600000", "SH600004"], dates, price=10.0))
    ex = ExecutionModel(top_n=2, initial_capital=1_000_000.0)
    sc = np.ones((3, 2))
    acc = run_account(ds, 0, 3, sc, execution=ex, impact=ImpactModel.off(), cost=FLAT, record_trades=True)
    # D1: V* = 500,000; A: 50,000 sh = 500,000 + 7 -> cash 499,993; B: min(500,000, 499,993) -> 499 lots =
    # 49,900 sh = 499,000 + 7 -> cash 986. Later days: both slots within the band, no order.
    assert [(t["symbol"], t["filled"], t["commission"], t["transfer"], t["stamp"]) for t in acc.trades] == [
        ("SH600000", 50_000, 7.0, 0.0, 0.0), ("SH600004", 49_900, 7.0, 0.0, 0.0)]
    assert acc.fees.tolist() == [14.0, 0.0, 0.0] and acc.stamp.sum() == 0.0
    assert acc.cash[1] == pytest.approx(1_000_000 - 500_007 - 499_007, abs=1e-9)
    assert acc.nav[-1] == pytest.approx(1_000_000 - 2 * 7.0, abs=1e-9)


def test_the_spec_fees_as_a_python_model_give_the_compiled_bits(small_real):
    d0, n = window_rows(small_real, "2024-01-01", "2024-02-29")
    sc = np.random.default_rng(3).normal(size=(n, small_real.N))
    compiled = run_account(small_real, d0, n, sc, record_trades=True)
    by_path = run_account(small_real, d0, n, sc, cost=ImportableModel("quantgym.envs.quant_arena.config:ArenaCostModel"))
    python = run_account(small_real, d0, n, sc, cost=ImportableModel(f"{__name__}:SpecFeesInPython"),
                         record_trades=True)
    assert compiled.fees.sum() > 0
    for a in (by_path, python):
        assert np.array_equal(a.nav, compiled.nav) and np.array_equal(a.fees, compiled.fees)
        assert np.array_equal(a.stamp, compiled.stamp)
    assert python.trades == compiled.trades


def test_flat_fee_through_the_evaluator_and_the_env_is_recorded(small_real, tmp_path):
    ds = small_real.truncate("2024-02-29")
    src = example_source("low_volatility")
    res = evaluate_submission(src, ds, "2024-01-01", "2024-02-29", ArenaConfig(cost=FLAT), executor="inprocess")
    spec = evaluate_submission(src, ds, "2024-01-01", "2024-02-29", executor="inprocess")
    assert res.status == spec.status == "ok"
    m = res.metrics
    assert m["n_orders"] > 0 and m["fees_cny"] == pytest.approx(7.0 * m["n_orders"], abs=1e-9)
    assert m["stamp_cny"] == 0.0 and m["fees_cny"] != spec.metrics["fees_cny"]
    # the env: the shortcut sets config.cost; the run record names the model and its arguments
    env = QuantArenaEnv("oneshot", small_real, record_dir=tmp_path, executor="inprocess", cost=FLAT, **SMALL_WINDOWS)
    assert env.config.cost == FLAT
    env.reset(seed=0)
    _, _, term, _, info = env.step(src)
    assert term
    sealed = env.sealed_result.metrics
    assert sealed["fees_cny"] == pytest.approx(7.0 * sealed["n_orders"], abs=1e-9)
    brief = read_record(env.record_path)[0]
    assert brief["config"]["cost"] == {"class_path": "quantgym.models:FlatFee",
                                       "kwargs": {"per_order": 7.0, "currency": "CNY"}}
    assert ArenaConfig.from_dict(brief["config"]).cost == FLAT
    assert "a flat fee of 7 CNY per order" in brief["brief"]  # the brief states the model's describe()


def test_a_bad_class_path_fails_in_one_line(small_real):
    d0, n = window_rows(small_real, "2024-01-01", "2024-01-31")
    sc = np.zeros((n, small_real.N))
    cases = [("no_such_module_xyz:Fee", "cannot import 'no_such_module_xyz'"),
             (f"{__name__}:NoSuchFee", "has no 'NoSuchFee'"),
             (f"{__name__}:ArenaConfig", "has no order_fee")]
    for path, msg in cases:
        with pytest.raises(ValueError, match=msg) as e:
            run_account(small_real, d0, n, sc, cost=ImportableModel(path))
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="expected 'package.module:Class'"):
        ImportableModel("quantgym.envs.quant_arena.config.ArenaCostModel")
    for kwargs in ({"rate": 1}, {"per_order": -7}):
        with pytest.raises(ValueError, match="cannot build it with") as e:
            run_account(small_real, d0, n, sc, cost=ImportableModel(FLAT.class_path, kwargs))
        assert "\n" not in str(e.value)


def test_the_cost_model_example_of_docs_quant_arena_md_runs_as_written(tmp_path, monkeypatch):
    import re
    import sys
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "quant_arena.md").read_text()
    part = text[text.index("**Your own cost model.**"):]
    module, use = re.findall(r"```python\n(.*?)```", part, re.S)[:2]
    (tmp_path / "my_fees.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    ns: dict = {}
    exec(use, ns)  # builds QuantArenaEnv("oneshot", cost=ImportableModel("my_fees:TicketFee", ...))
    env = ns["env"]
    assert env.config.cost == ImportableModel("my_fees:TicketFee", {"per_order": 7.0})
    assert env.config.cost.describe() == "a flat fee of 7 CNY per order"
    ds = make_panel(flat_rows(["SH600000"], ["2024-01-02", "2024-01-03"], price=10.0))
    acc = run_account(ds, 0, 1, np.ones((1, 1)), execution=ExecutionModel(top_n=1, initial_capital=10_000.0),
                      impact=ImpactModel.off(), cost=env.config.cost)
    assert acc.fees.tolist() == [7.0] and acc.nav[-1] == 10_000.0 - 7.0
    sys.modules.pop("my_fees", None)


def test_a_user_impact_model_fills_the_orders(small_real, tmp_path):
    d0, n = window_rows(small_real, "2024-01-01", "2024-02-29")
    sc = np.random.default_rng(5).normal(size=(n, small_real.N))
    off = run_account(small_real, d0, n, sc, impact=ImpactModel.off(), record_trades=True)
    full = run_account(small_real, d0, n, sc, impact=ImportableModel(f"{__name__}:FullFillAtOpen"), record_trades=True)
    assert np.array_equal(full.nav, off.nav) and full.trades == off.trades
    spread = run_account(small_real, d0, n, sc, impact=ImportableModel(f"{__name__}:TenBpSpread"), cost=FLAT,
                         record_trades=True)
    assert spread.trades and all(t["filled"] == t["want"] or t["side"] == "buy" for t in spread.trades)
    expected = sum(t["filled"] * t["price"] * 0.001 for t in spread.trades)  # 10 bp of each fill at the open
    assert spread.impact.sum() == pytest.approx(expected, rel=1e-9)
    assert spread.fees.sum() == 7.0 * len(spread.trades)
    env = QuantArenaEnv("oneshot", small_real, record_dir=tmp_path, executor="inprocess",
                        impact=ImportableModel(f"{__name__}:TenBpSpread"), **SMALL_WINDOWS)
    text, _ = env.reset(seed=0)
    assert "fills 10 bp worse than the open" in text
    assert read_record(env.record_path)[0]["config"]["impact"]["class_path"] == f"{__name__}:TenBpSpread"
    with pytest.raises(ValueError, match="has no fill\\(side, qty, price, sigma, adv, limit, day\\) method"):
        run_account(small_real, d0, n, sc, impact=ImportableModel(f"{__name__}:SpecFeesInPython"))


def test_cost_and_impact_given_as_dicts_as_a_sweep_file_gives_them():
    env = QuantArenaEnv(mode="oneshot", record_dir=False,
                        cost={"class_path": "quantgym.models:FlatFee", "kwargs": {"per_order": 7.0}},
                        impact={"enabled": False})
    assert env.config.cost == ImportableModel("quantgym.models:FlatFee", {"per_order": 7.0})
    assert env.config.impact.enabled is False
    env = QuantArenaEnv(mode="oneshot", record_dir=False, cost={"commission_rate": 0.0003})
    assert env.config.cost == ArenaCostModel(commission_rate=0.0003)
    with pytest.raises(ValueError, match="unknown key 'commision_rate'"):
        QuantArenaEnv(mode="oneshot", record_dir=False, cost={"commision_rate": 0.0003})
