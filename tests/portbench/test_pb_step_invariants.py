"""The compiled step and the O(N) row cache change no number the env produces.

``EXPECTED`` digests were computed with the uncompiled numpy step (commit 9691abf) by
:func:`episode_digest`; they cover every observation array, reward, the info numbers and order records
of 60 daily steps at N = 80 (scoring on and off) and of a stagewise episode.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.portbench import market
from quantgym.envs.portbench.data import PortBenchData
from quantgym.envs.portbench.env import PortBenchEnv

DAILY = {"start": "2020-02-03", "end": "2020-05-29", "freq": "daily"}
INFO_KEYS = ("date", "decision_index", "nav", "turnover", "cost", "weights", "ceps", "pas", "tau", "tau_star", "var",
             "drawdown", "drift", "alerts", "trigger", "stage_scores", "invalid", "coerced", "n_available")


def _update(h, obj) -> None:
    if isinstance(obj, Mapping):  # dicts and info["weights"] (a read-only TickerWeights mapping)
        for k in sorted(obj):
            h.update(str(k).encode())
            _update(h, obj[k])
    elif isinstance(obj, np.ndarray):
        h.update(str(obj.dtype).encode() + str(obj.shape).encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    else:
        h.update(json.dumps(obj, sort_keys=True, default=repr).encode())


def episode_digest(scoring: bool, stagewise: bool = False, steps: int = 60) -> str:
    """sha256 over the observations, rewards, info numbers and orders of a seeded episode (bundled data)."""
    env = PortBenchEnv(profile="balanced", period=DAILY if not stagewise else "covid_2020", scoring=scoring,
                       stagewise=stagewise)
    rng = np.random.default_rng(7)
    h = hashlib.sha256()
    obs, info = env.reset(seed=0)
    _update(h, obs)
    for i in range(steps):
        n = env.n_assets
        w = rng.uniform(0, 1, n)
        if i % 7 == 3:
            w[:5] = np.nan  # an invalid answer: fallback, recorded
        act = {"views": rng.uniform(-1, 1, n), "signals": rng.integers(0, 3, n), "weights": w,
               "status": 1 if i % 11 == 5 else 0}
        obs, reward, term, trunc, info = env.step(act)
        _update(h, obs)
        _update(h, {"reward": reward, "term": term, **{k: info.get(k) for k in INFO_KEYS}})
        _update(h, {"orders": [dict(o) for o in info.get("orders", [])]})
        if term:
            _update(h, env.episode_metrics())
            break
    return h.hexdigest()


EXPECTED = {
    # scoring off: the default reward is now the log return (it was CEPS, i.e. 0 on every step without scores);
    # with the rewards zeroed this episode still gives the digest before (dd6151af...), checked when it changed
    "scoring_off": "cbecdc376dafdf807323ff14a786a46bafffd1d7bbd8ee161d914a325ba7f5f5",
    "scoring_on": "852b6c7baedf72125ace5c4dde5a4f394ae2658ef6078f35adcd25b388aeccf4",
    # stagewise: the S1 prompt text names the levels 'adj. close'; with every string left out of the hash the
    # episode gives the same digest as with the earlier wording (982155a1...), checked when the wording changed
    "stagewise": "455632f0450ac1ce667ea98ba2157e64ec2c017cbfb3cf9d44004bea18e26d7a",
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_episode_numbers_identical_to_before(kind):
    got = episode_digest(scoring=kind != "scoring_off", stagewise=kind == "stagewise")
    assert got == EXPECTED[kind]


def test_observations_are_new_arrays_and_writing_them_changes_nothing():
    env = PortBenchEnv(period=DAILY, scoring=False)
    obs1, _ = env.reset(seed=0)
    keep = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in obs1.items()}
    for v in obs1.values():  # an agent scribbling over everything it was given
        if isinstance(v, np.ndarray):
            v[...] = 0
    obs2, _ = env.reset(seed=0)
    for k, v in keep.items():
        assert not isinstance(v, np.ndarray) or (np.array_equal(obs2[k], v) and not np.shares_memory(obs2[k], obs1[k]))
    snap = env.snapshot  # the cached row arrays behind the observation are read-only
    with pytest.raises(ValueError):
        snap.corr[0, 0] = 2.0
    with pytest.raises(ValueError):
        env.view.row_array(snap.t, "obs_corr")[0, 1] = 2.0


def test_step_observations_are_read_only_row_views_or_new_arrays():
    """A step that reaches a new decision hands out the row's arrays as read-only views of the
    per-row cache (never writeable, so the cache cannot be changed through them); consecutive observations share
    no memory (Gymnasium's check_env), and a row seen again shows the same values."""
    env = PortBenchEnv(period=DAILY, scoring=False)
    rng = np.random.default_rng(2)
    prev, _ = env.reset(seed=0)
    seen, n_views = [], 0
    for _ in range(6):
        n = env.n_assets
        obs, _, term, _, _ = env.step({"views": rng.uniform(-1, 1, n), "signals": rng.integers(0, 3, n),
                                       "weights": rng.uniform(0, 1, n), "status": 0})
        for k, v in obs.items():
            if not isinstance(v, np.ndarray):
                continue
            assert not np.shares_memory(v, prev[k]), k
            if not v.flags.writeable:
                n_views += 1
                with pytest.raises(ValueError):
                    v[...] = 0
                with pytest.raises(ValueError):
                    v.flags.writeable = True
        assert obs["weights"].flags.writeable and obs["prev_views"].flags.writeable  # per-step arrays are new
        seen.append({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in obs.items()})
        prev = obs
    assert n_views >= 6 * 3  # at least returns, returns_mask and corr of every step
    env.reset(seed=0)
    for ref in seen:  # the second episode shows the same observations
        n = env.n_assets
        obs, *_ = env.step({"views": rng.uniform(-1, 1, n), "signals": rng.integers(0, 3, n),
                            "weights": rng.uniform(0, 1, n), "status": 0})
        for k in ("returns", "returns_mask", "corr", "price", "available", "macro", "regime"):
            assert np.array_equal(obs[k], ref[k]), k


def _synthetic(n: int = 30, seed: int = 3) -> PortBenchData:
    from quantgym.envs.portbench.data import load_portbench_data

    dates = pd.DatetimeIndex(load_portbench_data().dates)
    dates = dates[(dates >= "2018-06-01") & (dates <= "2019-12-31")]
    rng = np.random.default_rng(seed)
    r = rng.normal(0.0003, 0.01, (len(dates), n)) + rng.normal(0, 0.01, (len(dates), 1))
    px = 100 * np.exp(np.cumsum(r, axis=0))
    px[:80, 3] = np.nan  # one late listing
    tickers = ["SPY", *[f"X{i:02d}" for i in range(1, n)]]
    classes = ["equity", "bond", "commodity", "real_estate", "crypto", "cash"]
    return PortBenchData.from_frames(pd.DataFrame(px, index=dates, columns=tickers),
                                     {t: classes[i % 6] for i, t in enumerate(tickers)})


def _run(data, steps: int = 120):
    env = PortBenchEnv(period={"start": "2019-01-02", "end": "2019-12-31", "freq": "daily"}, scoring=True, data=data)
    rng = np.random.default_rng(1)
    obs, _ = env.reset(seed=0)
    out = [obs["corr"].copy(), obs["returns"].copy()]
    for _ in range(steps):
        n = env.n_assets
        obs, rew, term, _, info = env.step({"views": rng.uniform(-1, 1, n), "signals": rng.integers(0, 3, n),
                                            "weights": rng.uniform(0, 1, n), "status": 0})
        out += [obs["corr"].copy(), obs["returns"].copy(), rew, info["ceps"], info["nav"]]
        if term:
            break
    return env, out


def test_row_cache_is_linear_in_n_and_the_array_budget_holds(monkeypatch):
    data = _synthetic()
    env, ref = _run(data)
    n = env.n_assets
    # the per-row parts hold O(N) arrays only: no N×N or L×N matrix per trading day
    parts = env.view._row_cache
    assert len(parts) > 100
    def arrays(v):
        if isinstance(v, dict):
            return [a for x in v.values() for a in arrays(x)]
        return [a for a in (v if isinstance(v, tuple) else (v,)) if isinstance(a, np.ndarray)]

    for p in parts.values():
        for a in arrays(p):
            assert a.size <= 5 * n + 64  # O(N): an N×N (900) or L×N (1,800) matrix would fail
    # the large arrays live in a byte-bounded cache; a budget of three rows gives the same numbers
    row_bytes = sum(a.nbytes for a in env.view._arrays.rows[env.snapshot.t].values())
    monkeypatch.setattr(market, "ROW_CACHE_BYTES", 3 * row_bytes)
    data2 = _synthetic()  # a new data object: a new (small) cache
    env2, got = _run(data2)
    assert env2.view._arrays.max_bytes == 3 * row_bytes
    assert env2.view._arrays.nbytes <= 3 * row_bytes and len(env2.view._arrays.rows) <= 3
    assert len(got) == len(ref)
    for a, b in zip(ref, got):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("scoring", [False, True])
def test_record_weights_are_the_steps_weights_however_the_records_are_read(scoring):
    """env.records builds each record's "weights" when read (speed only): the same {ticker: weight} as the
    step's info["weights"], whether read at every step, once at the end, or after a reset (a new list)."""
    rng = np.random.default_rng(3)
    runs = []
    for read_every_step in (True, False):
        env = PortBenchEnv(profile="balanced", period="covid_2020", scoring=scoring)
        env.reset(seed=0)
        n = env.n_assets
        infos, done, k = [], False, 0
        rng = np.random.default_rng(3)
        while not done:
            w = rng.uniform(0, 1, n)
            if k % 3 == 1:
                w[: n // 2] = 0.0  # zero weights: the records keep only the positive ones
            act = {"views": rng.uniform(-1, 1, n), "signals": rng.integers(0, 3, n), "weights": w, "status": 0}
            _, _, done, _, info = env.step(act)
            infos.append(info)
            if read_every_step:
                assert env.records[-1]["weights"] == info["weights"]
            k += 1
        recs = env.records
        assert recs is env.records and len(recs) == len(infos)
        assert [r["weights"] for r in recs] == [i["weights"] for i in infos]
        assert all(list(r)[-1] == "weights" for r in recs)
        runs.append(json.dumps(recs, sort_keys=True, default=str))
        env.reset(seed=0)
        assert env.records == [] and env.records is not recs
    assert runs[0] == runs[1]


def _random_steps(env, k: int, seed: int = 5) -> list[dict]:
    rng = np.random.default_rng(seed)
    infos = []
    n = env.n_assets
    for _ in range(k):
        act = {"views": rng.uniform(-1, 1, n), "signals": rng.integers(0, 3, n), "weights": rng.uniform(0, 1, n),
               "status": 0}
        infos.append(env.step(act)[4])
    return infos


def test_info_weights_mapping_is_the_dict():
    """info["weights"] is a read-only TickerWeights mapping built when read: equal to the dict of the
    positive weights in canonical order, a dict when copied, pickled or written to JSON."""
    import copy
    import pickle

    from quantgym.envs.portbench.simulator import TickerWeights
    from quantgym.results import to_jsonable

    env = PortBenchEnv(profile="balanced", period=DAILY, scoring=False)
    env.reset(seed=0)
    info = _random_steps(env, 3)[-1]
    m = info["weights"]
    assert isinstance(m, TickerWeights)
    d = env.records[-1]["weights"]
    assert type(d) is dict and m == d and d == m and dict(m) == d and list(m) == list(d) and len(m) == len(d)
    assert list(m) == [t for t in env.view.tickers if t in d]  # canonical order
    assert all(v > 0 for v in m.values()) and abs(sum(m.values()) - 1) < 1e-3
    assert m.to_dict() == d and type(m.copy()) is dict and m.copy() is not m._dict()
    assert type(pickle.loads(pickle.dumps(m))) is dict and pickle.loads(pickle.dumps(m)) == d
    assert copy.deepcopy(m) == d
    assert to_jsonable({"w": m}) == {"w": d} and json.loads(json.dumps(to_jsonable(m))) == d
    with pytest.raises(TypeError):
        m["SPY"] = 1.0  # read-only
    with pytest.raises(KeyError):
        m["NO SUCH TICKER"]
    assert repr(m).startswith("TickerWeights({")


def test_trades_built_when_read_are_the_steps_trades():
    """sim.trades keeps flat rows and builds its Trade objects when read (speed only): the same dates,
    turnovers, costs, NAVs and orders as each step's info, read at any time; one list per episode."""
    env = PortBenchEnv(profile="balanced", period=DAILY, scoring=False)
    env.reset(seed=0)
    infos = _random_steps(env, 4)
    trades = env.sim.trades
    assert env.sim.n_trades == len(trades) == 4
    infos += _random_steps(env, 3, seed=6)
    assert env.sim.n_trades == 7 and env.sim.trades is trades and len(trades) == 7
    recs = env.records
    for tr, info, rec in zip(trades, infos, recs):
        assert str(tr.date.date()) == info["date"] == rec["date"]
        assert tr.turnover == info["turnover"] and tr.cost == info["cost"] and tr.nav_after == rec["nav_after_trade"]
        assert tr.orders == info["orders"] and len(tr.orders) == len(info["orders"])


def test_per_step_history_is_left_to_the_garbage_collector_untracked():
    """Speed: a step keeps no object the garbage collector tracks (the records and trades are rows of
    preallocated arrays, the records' per-decision lists hold the row cache's info dicts, None or untracked
    tuples), so an episode of daily steps does not grow the collector's oldest generation (its full collections
    were about a tenth of the step time) and a reset frees a few arrays."""
    import gc

    for scoring in (False, True):
        env = PortBenchEnv(profile="balanced", period=DAILY, scoring=scoring)
        env.reset(seed=0)
        _random_steps(env, 20)
        gc.collect()
        gc.collect()  # (a tuple inside a tuple is untracked one collection after its items)
        recs = env._records
        kept = [x for x in recs.logs + recs.scored if x is not None]
        assert len(recs) == 20 and env.sim.n_trades == 20 and not any(gc.is_tracked(x) for x in kept)
        assert all(info is env.view.row_cache(int(t)).get("row_info")
                   for info, t in zip(recs.infos, env.sim.decision_rows))
        assert not env.sim._trades  # no Trade object until sim.trades is read


def test_without_scoring_the_default_reward_is_the_log_return_and_ceps_is_refused():
    env = PortBenchEnv(profile="balanced", period="covid_2020", scoring=False)
    assert env.reward_kind == "log_return" and PortBenchEnv(period="covid_2020").reward_kind == "ceps"
    with pytest.raises(ValueError, match="reward='ceps' needs scoring=True"):
        PortBenchEnv(period="covid_2020", scoring=False, reward="ceps")


@pytest.mark.parametrize("obs_keys", [None, ("weights", "nav", "returns", "class_id")])
def test_the_lean_allocation_step_is_the_full_step(obs_keys):
    """Speed only: an allocation step without scoring that passes the compiled checks takes one compiled call
    (``PortBenchEnv._lean_step``, rows seen before); its observation, reward, info (types included), records,
    metrics, NAV history and trades are those of the full step (``_step``), over two episodes (the second on
    rows whose templates are cached), with invalid answers and refusals in between."""
    a, b = (PortBenchEnv(period=DAILY, scoring=False, obs_keys=obs_keys) for _ in range(2))
    n_lean = 0
    for _episode in range(2):
        a.reset(seed=0)
        b.reset(seed=0)
        rng, done, i = np.random.default_rng(3), False, 0
        while not done:
            n = a.n_assets
            act = {"views": rng.uniform(-1, 1, n), "signals": rng.integers(0, 3, n), "weights": rng.uniform(0, 1, n),
                   "status": 1 if i % 13 == 6 else 0}
            if i % 9 == 4:
                act["weights"][:3] = np.nan
            n_lean += a._lean and a.decision_k + 1 < a.sim.decision_rows.size and a.sim.t in a._lean_rows
            got, want = a.step(act), b._step(act)
            for x, y in zip(got[:4], want[:4]):
                if isinstance(x, dict):
                    assert list(x) == list(y)
                    for k in x:
                        assert type(x[k]) is type(y[k]) and np.array_equal(x[k], y[k]), k
                        assert not isinstance(x[k], np.ndarray) or x[k].dtype == y[k].dtype
                else:
                    assert x == y and type(x) is type(y)
            assert list(got[4]) == list(want[4])
            for k, v in got[4].items():
                if k != "episode_metrics":  # (interpreted kernels, QUANTGYM_JIT=0, give numpy floats)
                    assert v == want[4][k] and (type(v) is type(want[4][k]) or isinstance(v, float)), k
            done, i = got[2], i + 1
        assert a.records == b.records and a.episode_metrics() == b.episode_metrics()
        assert np.array_equal(a.sim.nav_history, b.sim.nav_history) and a.sim.nav_dates == b.sim.nav_dates
        assert [(t.date, t.turnover, t.cost, t.nav_after, t.orders) for t in a.sim.trades] == \
            [(t.date, t.turnover, t.cost, t.nav_after, t.orders) for t in b.sim.trades]
    assert n_lean > 40  # the second episode's steps took the lean path
