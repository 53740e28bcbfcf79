"""Blind Quant-Arena (docs/blind.md): no date, year, period name, stock code or price level reaches the agent or
the sandboxed view; scores are computed on the real panel, so return/rank submissions score the same."""

from __future__ import annotations

import json
import pickle

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env

import quantgym  # noqa: F401 - registers the ids
from quantgym.blind import bundled_vocabulary, scan
from quantgym.envs.quant_arena.blinding import ArenaBlinding, blind_vocabulary
from quantgym.envs.quant_arena.config import ArenaConfig
from quantgym.envs.quant_arena.env import QuantArenaEnv, dataset_until
from quantgym.envs.quant_arena.examples import EXAMPLES, example_source
from quantgym.envs.quant_arena.executor import evaluate_submission
from quantgym.envs.quant_arena.handoff import build_payload
from quantgym.envs.quant_arena.account import window_rows
from quantgym.envs.quant_arena.pit import VIEW_FIELDS, ViewBuffer
from quantgym.envs.quant_arena.prompts import feedback_text, task_brief
from quantgym.envs.quant_arena.records import read_record
from quantgym.spaces import PROMPT_STYLES

from .conftest import SMALL_WINDOWS


@pytest.fixture(scope="module")
def vocab():
    """Quant-Arena's bundled codes and period label, through the task registry (``Task.blind_vocabulary``)."""
    v = bundled_vocabulary(["quant_arena"])
    assert "SH600519" in v.codes and v.period_names == set(blind_vocabulary()["period_names"])
    return v


def leaks(text: str, vocab, **kw) -> list:
    return vocab.scan(text, **kw)


def view_at_d0(ds, start, end, blinding=None, config=None):
    """The sandbox's view at D_0 of a window, built from the payload exactly as the child builds it."""
    config = config or ArenaConfig()
    d0, n = window_rows(ds, start, end)
    payload = build_payload(ds, d0, n, max_lookback=config.windows.max_lookback)
    if blinding is not None:
        payload = blinding.blind_payload(payload)
    blk, first = payload["block"], payload["first"]
    buf = ViewBuffer(blk["symbols"], first + 1, payload["info"], payload["max_lookback"])
    for i in range(first + 1):
        buf.append(blk, i, (payload.get("intraday") or {}).get(blk["dates"][i]))
    return buf.view(), payload


def view_text(view) -> str:
    """Every field the view serves, as text (the repr a submission could print or return)."""
    parts = [repr(view), str(view.date), " ".join(map(str, view.symbols)), view.info.to_csv()]
    for f in VIEW_FIELDS:
        h = view.history(f, view.max_lookback)
        parts.append(" ".join(map(str, h.index)))
    return "\n".join(parts)


# ---------------------------------------------------------------------- (a) the leak scanner
@pytest.mark.parametrize("mode", ["iterative", "oneshot"])
def test_blind_brief_has_no_leak_and_the_named_brief_has(bundled, vocab, mode):
    for style in PROMPT_STYLES:
        text, facts = task_brief(ArenaConfig(), mode, 5, bundled, style, blind=True)
        both = text + json.dumps(facts, ensure_ascii=False)
        assert leaks(both, vocab) == [], (style, leaks(both, vocab)[:3])
        assert facts["blind"] is True and facts["windows"]["research_days"] > 0
        named, nfacts = task_brief(ArenaConfig(), mode, 5, bundled, style)
        kinds = {k.kind for k in leaks(named + json.dumps(nfacts, ensure_ascii=False), vocab)}
        assert {"date", "ticker"} <= kinds, (style, kinds)


def test_blind_view_fields_have_no_leak_and_the_named_view_has(bundled, vocab):
    w = ArenaConfig().windows
    ds = dataset_until(bundled, w.research_end)
    b = ArenaBlinding.draw(ds.symbols, ds.info["board"].reindex(ds.symbols), seed=11)
    view, payload = view_at_d0(ds, w.research_start, w.research_end, b)
    text = view_text(view)
    assert leaks(text, vocab) == []
    assert isinstance(view.date, int) and view.date == 0 and list(view.info.columns) == ["industry", "board"]
    # the Level-2 day of the research window, keyed by its relative trading day
    assert set(payload) >= {"block", "info"} and [type(d) for d in payload["intraday"]] == [int]
    raw = pickle.dumps(payload)  # what crosses into the sandbox: no real code, no date, no alias map
    assert not [c for c in map(str, ds.symbols) if c.encode() in raw]
    assert not [y for y in ("2021-", "2022-", "2023-", "2024-") if y.encode() in raw]
    with pytest.raises(KeyError, match="no intraday table 'snapshots' for day 0"):
        view.intraday("snapshots")
    with pytest.raises(KeyError, match="relative trading day"):
        view.intraday("snapshots", "2023-02-07")
    named, _ = view_at_d0(ds, w.research_start, w.research_end)
    kinds = {k.kind for k in leaks(view_text(named), vocab)}
    assert {"date", "ticker"} <= kinds
    # no price or volume level equals the real one; the scanner finds the real closes in the named text only
    real = {s: named.history("close", 5)[s] for s in b.alias_map(ds.symbols)}
    amap = b.alias_map(ds.symbols)
    for f in ("open", "high", "low", "close", "volume", "up_limit", "down_limit", "adj_close"):
        hb, hn = view.history(f, view.max_lookback), named.history(f, named.max_lookback)
        hn = hn.rename(columns=amap)[hb.columns]
        both = np.isfinite(hn.to_numpy()) & (hn.to_numpy() != 0)
        assert both.any() and not (hb.to_numpy()[both] == hn.to_numpy()[both]).any(), f
    some = list(real)[:: 80]
    for s in some:
        levels = [f"{x:.2f}" for x in real[s].dropna()]
        assert scan(named.history("close", 5)[s].to_string(), levels=levels)
        assert not scan(view.history("close", 5)[amap[s]].to_string(), levels=levels)


def test_rebasing_keeps_every_ratio_bit_for_bit(bundled):
    w = ArenaConfig().windows
    ds = dataset_until(bundled, w.research_end)
    b = ArenaBlinding.draw(ds.symbols, ds.info["board"].reindex(ds.symbols), seed=5)
    view, _ = view_at_d0(ds, w.research_start, w.research_end, b)
    named, _ = view_at_d0(ds, w.research_start, w.research_end)
    amap = b.alias_map(ds.symbols)
    for f in ("adj_close", "close", "volume", "up_limit"):
        hb = view.history(f, 21).to_numpy()
        hn = named.history(f, 21).rename(columns=amap)[view.symbols].to_numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            np.testing.assert_array_equal(hb[1:] / hb[:-1], hn[1:] / hn[:-1])
    hb = view.history("close", 1).iloc[-1] / view.history("up_limit", 1).iloc[-1]
    hn = (named.history("close", 1).iloc[-1] / named.history("up_limit", 1).iloc[-1]).rename(index=amap)
    np.testing.assert_array_equal(hb.to_numpy(), hn[view.symbols].to_numpy())
    first = view.history("close", view.max_lookback).bfill().iloc[0].dropna()
    assert ((first >= 100) & (first < 400)).all()  # levels: the first visible close in [100, 400)


# ---------------------------------------------------------------------- (b) the examples score the same
@pytest.mark.parametrize("name", list(EXAMPLES))
def test_classical_examples_score_the_same_blind_and_named(bundled, name):
    """The four classical submissions use returns and ranks only: every metric is identical."""
    c = ArenaConfig()
    ds = dataset_until(bundled, "2023-12-31")
    b = ArenaBlinding.draw(ds.symbols, ds.info["board"].reindex(ds.symbols), seed=3)
    src = example_source(name)
    named = evaluate_submission(src, ds, "2023-07-01", "2023-12-31", c, executor="inprocess")
    blind = evaluate_submission(src, ds, "2023-07-01", "2023-12-31", c, executor="inprocess", blind=b)
    assert named.status == blind.status == "ok"
    assert blind.S == named.S and blind.metrics == named.metrics and blind.years == named.years


LEVEL_FILTER = '''
import numpy as np
import pandas as pd
FEATURES = ["cheap"]
def compute_features(view):
    c = view.history("close", 1).iloc[-1]
    return {"cheap": (c < 5.0).astype(float)}
def score(features, view):
    return features["cheap"].where(features["cheap"] > 0)
'''


def test_a_price_level_filter_sees_rebased_levels(small_real):
    """``close < 5 CNY`` reads a level: blind, the first visible close of every stock is at least 100."""
    ds = dataset_until(small_real, SMALL_WINDOWS["research_end"])
    b = ArenaBlinding.draw(ds.symbols, ds.info["board"].reindex(ds.symbols), seed=1)
    args = (ds, SMALL_WINDOWS["research_start"], SMALL_WINDOWS["research_end"], ArenaConfig())
    named = evaluate_submission(LEVEL_FILTER, *args, executor="inprocess")
    blind = evaluate_submission(LEVEL_FILTER, *args, executor="inprocess", blind=b)
    assert named.status == "ok" and named.metrics["coverage"] > 0
    assert blind.status == "no_signal" or blind.metrics["coverage"] != named.metrics["coverage"]


# ---------------------------------------------------------------------- (d) hard-coded real codes
HARD_CODED = '''
import numpy as np
import pandas as pd
FEATURES = ["pick"]
PICKS = {picks!r}
def compute_features(view):
    s = pd.Series(np.nan, index=view.symbols)
    for code in PICKS:
        if code in s.index:
            s[code] = 1.0
    return {{"pick": s}}
def score(features, view):
    return features["pick"]
'''

HARD_CODED_INDEX = '''
import numpy as np
import pandas as pd
FEATURES = ["pick"]
PICKS = {picks!r}
def compute_features(view):
    return {{"pick": pd.Series(1.0, index=pd.Index(PICKS))}}
def score(features, view):
    return features["pick"]
'''


def test_hard_coded_real_codes_select_nothing_blind(small_real):
    ds = dataset_until(small_real, SMALL_WINDOWS["research_end"])
    picks = [str(s) for s in ds.symbols[:10]]
    b = ArenaBlinding.draw(ds.symbols, ds.info["board"].reindex(ds.symbols), seed=2)
    args = (ds, SMALL_WINDOWS["research_start"], SMALL_WINDOWS["research_end"], ArenaConfig())
    for tmpl in (HARD_CODED, HARD_CODED_INDEX):
        src = tmpl.format(picks=picks)
        named = evaluate_submission(src, *args, executor="inprocess")
        assert named.status == "ok" and named.metrics["coverage"] > 0
        blind = evaluate_submission(src, *args, executor="inprocess", blind=b)
        # nothing selected: no finite score on any day (all cash), or a day error on every day
        assert blind.status == "failed" or (blind.metrics["no_signal"] and blind.metrics["coverage"] == 0)
        assert blind.account is None or float(np.abs(blind.account.position_value).sum()) == 0.0
        assert all(str(e["date"]).startswith("day ") for e in blind.errors if e.get("date"))


# ---------------------------------------------------------------------- the env, (c) the checker
@pytest.mark.parametrize("env_id", ["QuantArena-v0", "QuantArena-OneShot-v0"])
def test_blind_ids_pass_the_env_checker(env_id):
    env = gym.make(env_id, blind=True)
    check_env(env.unwrapped)
    brief, info = env.reset(seed=0)
    assert info["blind"] is True and "Blind mode" in brief


def test_blind_episode_feedback_record_and_scores(small_real, tmp_path, vocab):
    kw = dict(data=small_real, executor="inprocess", **SMALL_WINDOWS)
    named = QuantArenaEnv(record_dir=False, **kw)
    env = QuantArenaEnv(record_dir=tmp_path, blind=True, **kw)
    brief, info = env.reset(seed=7)
    named.reset(seed=7)
    codes = [str(s) for s in small_real.symbols]
    assert not scan(brief, tickers=codes) and info["blind"]
    src = example_source("momentum_20d")
    obs, r, *_ , fb_info = env.step(src)
    obs_n, r_n, *_ = named.step(src)
    assert r == r_n
    fb = json.loads(obs)
    assert fb["years"] and all(k.startswith("year ") for k in fb["years"])
    for style in PROMPT_STYLES:
        assert leaks(feedback_text(fb_info["feedback"], style), vocab) == []
        assert not scan(env.render_prompt(style), tickers=codes)
    assert {k.kind for k in leaks(obs_n, vocab)} >= {"year"}
    final_obs, S, term, _, fin = env.step({"freeze": 1})
    _, S_n, *_ = named.step({"freeze": 1})
    assert term and S == S_n and fin["blind"] is True and leaks(final_obs, vocab) == []
    assert all(k.startswith("year ") for k in fin["sealed_years"])
    assert env.episode_result()["metrics"]["blind"] is True
    rec = read_record(env.record_path)
    first = rec[0]
    assert first["blind"] is True and first["blind_seed"] == 7
    assert set(first["aliases"]) == set(codes)  # evaluator side: real code -> alias
    assert not (set(first["aliases"].values()) & set(codes))
    # drawn from the episode seed: the same seed gives the same map, another seed another one
    env.reset(seed=7)
    again = env._blinding.aliases
    env.reset(seed=8)
    assert again == tuple(first["aliases"][c] for c in codes) and env._blinding.aliases != again


def test_blind_must_be_a_bool(small_real):
    with pytest.raises(ValueError, match="^blind must be True or False, got 'yes'$"):
        QuantArenaEnv(data=small_real, blind="yes", **SMALL_WINDOWS)


def test_blind_through_the_sandbox_scores_the_same(small_real):
    """The sandbox child (commit-reveal keeper) serves the blinded rows; the scores map back to the real codes."""
    from .test_arena_env import FAST

    c = ArenaConfig(sandbox=FAST)
    ds = dataset_until(small_real, SMALL_WINDOWS["research_end"])
    b = ArenaBlinding.draw(ds.symbols, ds.info["board"].reindex(ds.symbols), seed=4)
    args = (example_source("reversal_5d"), ds, SMALL_WINDOWS["research_start"], SMALL_WINDOWS["research_end"], c)
    named, blind = evaluate_submission(*args), evaluate_submission(*args, blind=b)
    assert named.status == blind.status == "ok" and blind.sandbox["isolation"] == "commit-reveal"
    assert blind.S == named.S and blind.metrics == named.metrics


def test_intraday_example_scores_the_same_blind_and_named(bundled):
    """``intraday_flow`` reads the blinded Level-2 tables of the shipped day (time of day, rebased prices,
    relative sizes): its realised volatility and order-flow share are the named ones, so every metric is; the
    intraday part is used (the low-volatility score alone differs)."""
    c = ArenaConfig()
    ds = dataset_until(bundled, "2023-02-28")
    b = ArenaBlinding.draw(ds.symbols, ds.info["board"].reindex(ds.symbols), seed=9)
    args = (ds, "2023-02-01", "2023-02-28", c)
    blind = evaluate_submission(example_source("intraday_flow"), *args, executor="inprocess", blind=b)
    named = evaluate_submission(example_source("intraday_flow"), *args, executor="inprocess")
    assert named.status == blind.status == "ok" and not blind.errors
    assert blind.S == named.S and blind.metrics == named.metrics and blind.years == named.years
    low_vol = evaluate_submission(example_source("low_volatility"), *args, executor="inprocess", blind=b)
    assert low_vol.metrics["rankic_mean"] != blind.metrics["rankic_mean"]


def test_blinded_intraday_tables_have_no_leak_and_keep_every_ratio(bundled, vocab):
    """The view's intraday tables on the Level-2 day (day 0): aliases, time of day, no date, no real price;
    prices and sizes differ from the named ones by one power of two per stock."""
    from quantgym.data.sse_l2 import SSE_SYMBOL
    from quantgym.envs.quant_arena.pit import LookAheadError

    ds = dataset_until(bundled, "2023-02-28")
    b = ArenaBlinding.draw(ds.symbols, ds.info["board"].reindex(ds.symbols), seed=6)
    view, payload = view_at_d0(ds, "2023-02-08", "2023-02-28", b)  # D_0 = 2023-02-07, the shipped day
    named, _ = view_at_d0(ds, "2023-02-08", "2023-02-28")
    alias = b.alias_map(ds.symbols)["SH" + SSE_SYMBOL]
    assert list(payload["intraday"]) == [0] and view.date == 0
    raw = pickle.dumps(payload["intraday"])
    assert SSE_SYMBOL.encode() not in raw and b"2023" not in raw
    day_ns = 86_400 * 10**9
    for table in ("snapshots", "trades", "orders"):
        tb, tn = view.intraday(table, 0), named.intraday(table)
        assert leaks(tb.to_csv(), vocab) == [], table
        assert {k.kind for k in leaks(tn.head(20).to_csv(), vocab)} >= {"date", "ticker"}
        assert list(tb.columns) == list(tn.columns) and set(tb["symbol"]) == {alias}
        np.testing.assert_array_equal(tb["ts_event"], tn["ts_event"].to_numpy() % day_ns)
        assert (tb["time"].dt.total_seconds() // 3600).between(8, 15).all()  # local time of day, no date
        price = [c for c in tb.columns if c == "price" or c.endswith(("_px_00", "prev_close", "last_px"))]
        size = [c for c in tb.columns if c == "qty" or c.endswith("_sz_00") or c == "total_volume"]
        for cols in (price, size):
            assert cols
            for c in cols:
                xb, xn = tb[c].to_numpy(float), tn[c].to_numpy(float)
                ok = np.isfinite(xn) & (xn != 0)
                ratio = np.unique(xb[ok] / xn[ok])
                assert ok.any() and len(ratio) == 1 and ratio[0] != 1.0, (table, c)
                assert np.log2(ratio[0]) == round(np.log2(ratio[0]))  # a power of two: ratios exact
    with pytest.raises(LookAheadError, match=r"day \+1 is after the decision day day 0"):
        view.intraday("trades", 1)


def test_blinded_intraday_drops_unknown_columns_and_other_stocks():
    """A user table's own columns may hold a date or a level: dropped; rows of a stock outside the panel too."""
    t = pd.DataFrame({"ts_event": [1_675_733_100_800_000_000] * 2, "symbol": ["SH600519", "SZ000001"],
                      "price": [1808.08, 14.0], "qty": [100, 200], "side": ["B", "S"],
                      "trade_date": ["2023-02-07"] * 2})
    out = ArenaBlinding.blind_intraday(t, {"SH600519": ("MB07", -4, -2)})
    assert list(out.columns) == ["ts_event", "symbol", "price", "qty", "side"]
    assert out.to_dict("records") == [{"ts_event": 1_675_733_100_800_000_000 % (86_400 * 10**9), "symbol": "MB07",
                                       "price": 1808.08 / 16, "qty": 25.0, "side": "B"}]


def test_blind_user_panel_without_board_or_industry():
    """A user panel with no info: the board comes from the code (the aliases keep it) and the industry is None,
    as named; a dataset whose info has no board column is refused in one line naming it."""
    import dataclasses

    from quantgym.envs.quant_arena.data import BUNDLED_DIR, ArenaDataset, board_of

    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet")
    codes = sorted(df["symbol"].unique())
    syms = [s for s in codes if s.startswith("SZ300")][:3] + [s for s in codes if s.startswith("SH688")][:3] + [
        "SH600519"]
    df = df[df["symbol"].isin(syms) & (df["date"] >= pd.Timestamp("2023-09-01").date())
            & (df["date"] <= pd.Timestamp("2024-02-29").date())]
    ds = ArenaDataset.from_frame(df.drop(columns=["industry"], errors="ignore").reset_index(drop=True), name="own")
    assert ds.info["industry"].isna().all()
    env = QuantArenaEnv(data=ds, blind=True, record_dir=False, executor="inprocess", **SMALL_WINDOWS)
    env.reset(seed=2)
    prefix = {"main": "MB", "chinext": "GE", "star": "SR"}
    aliases = env._blinding.alias_map(ds.symbols)
    assert {a[:2] for a in aliases.values()} == {"MB", "GE", "SR"}
    assert all(aliases[s].startswith(prefix[board_of(s)]) for s in aliases)
    no_board = dataclasses.replace(ds, info=ds.info.drop(columns=["board"]))
    with pytest.raises(ValueError, match="^blind=True needs each stock's board: the data lacks the 'board' column") as e:
        QuantArenaEnv(data=no_board, blind=True, **SMALL_WINDOWS)
    assert "\n" not in str(e.value)


def test_intraday_example_through_the_sandbox_scores_the_same(bundled):
    """The keeper reveals each day's blinded Level-2 tables with its row (relative-day keys): ``intraday_flow``
    gives the named scores through the sandbox, and uses the intraday part (low volatility alone differs)."""
    from .test_arena_env import FAST
    from quantgym.envs.quant_arena.data import BUNDLED_DIR, ArenaDataset

    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet")
    syms = sorted(df["symbol"].unique())[::20][:40] + ["SH600519"]
    df = df[df["symbol"].isin(syms) & (df["date"] >= pd.Timestamp("2022-12-01").date())
            & (df["date"] <= pd.Timestamp("2023-02-28").date())]
    ds = ArenaDataset.from_frame(df.reset_index(drop=True), info=bundled.info.reset_index(),
                                 intraday=bundled.intraday(), name="small-l2")
    b = ArenaBlinding.draw(ds.symbols, ds.info["board"].reindex(ds.symbols), seed=4)
    c = ArenaConfig(sandbox=FAST)
    args = (ds, "2023-02-01", "2023-02-28", c)
    named = evaluate_submission(example_source("intraday_flow"), *args)
    blind = evaluate_submission(example_source("intraday_flow"), *args, blind=b)
    assert named.status == blind.status == "ok" and blind.sandbox["isolation"] == "commit-reveal"
    assert blind.S == named.S and blind.metrics == named.metrics
    assert evaluate_submission(example_source("low_volatility"), *args, blind=b).S != blind.S
