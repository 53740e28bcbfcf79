"""The batched vector env's compiled step (quantgym.envs.portbench.vector) against the
numpy form of its formulas, bit for bit: masked softmax / weight validation, 4-decimal rounding, the S3
fallback, the batch trade (``execute_trade``), the day loop and the reward, on synthetic state with
unavailable assets, empty availability rows, invalid weight actions, multi-day gaps and universes above
numpy's 128-element pairwise block (N = 300); and the interpreted kernel (QUANTGYM_JIT=0) equal to the
compiled one."""

from __future__ import annotations

import numpy as np
import pytest

from quantgym.envs.portbench import vector as V
from quantgym.envs.portbench.allocation import LOGIT_SCALE, masked_softmax
from quantgym.envs.portbench.execution import execute_trade, fallback_weights
from tests.rl import NEEDS_RL

RATE, MIN_TRADE, NAV0, KAPPA = 0.0015, 1e-6, 1e6, 1.0


def _state(B, N, T, seed, logits):
    """Synthetic per-env state, tables and actions (some rows with no available asset, some with a few)."""
    rng = np.random.default_rng(seed)
    R = 6  # decision rows in the tables
    avail_table = rng.uniform(size=(R, N)) < 0.9
    avail_table[1] = False  # nothing available: logits -> zero target -> fallback (zeros)
    avail_table[2, 3:] = False  # three assets
    feat_table = rng.normal(size=(R, 7)).astype(np.float32)
    g0 = 1.0 + rng.normal(0, 0.02, size=(T, N))
    rowmap = np.full(T, -1, np.int64)
    dec_rows = np.array([3, 5, 9, 10, 16, 22])  # gaps of 1..6 days
    rowmap[dec_rows] = np.arange(R)
    w = rng.dirichlet(np.ones(N), size=B)
    w[1] = 0.0  # nothing held: the fallback is EW on the available set (row 2: three assets)
    ist = np.zeros((B, 5), np.int64)
    dec = np.tile(dec_rows, (B, 1))
    k = rng.integers(0, R - 1, B)
    k[-1] = R - 1  # last decision: the step terminates
    ist[:, V._K], ist[:, V._T], ist[:, V._NDEC], ist[:, V._LAST] = k, dec_rows[k], R, T - 2
    ist[:, V._ROW] = rowmap[dec_rows[k]]
    ist[: min(B, 3), V._ROW] = [1, 2, 0][: min(B, 3)]
    fst = np.zeros((B, V._FST_WIDTH))
    fst[:, V._NAV] = NAV0 * rng.uniform(0.5, 2.0, B)
    fst[:, V._PEAK] = fst[:, V._NAV] * rng.uniform(1.0, 1.3, B)
    fst[:, V._DD] = np.log(fst[:, V._PEAK] / fst[:, V._NAV])
    if logits:
        a = rng.uniform(-1.5, 1.5, size=(B, N))
    else:
        a = rng.uniform(0, 1, size=(B, N)) * (rng.uniform(size=(B, N)) < 0.7)
        a[1, 0] = np.nan  # invalid -> fallback
        if B > 3:
            a[3] = 0.0  # zero total -> fallback
            a[4, 2] = 1.5  # outside [0, 1] -> fallback
    return dict(a=a, avail_table=avail_table, feat_table=feat_table, g0=g0, rowmap=rowmap, w=w, ist=ist, dec=dec,
                fst=fst)


def _reference(s, logits, risk):
    """The numpy form: AllocationWrapper's mapping, the env's normalisation/rounding/fallback, the batch
    ``execute_trade``, the simulator's day loop, the wrapper's rewards."""
    a, ist, w, fst = s["a"], s["ist"], s["w"].copy(), s["fst"].copy()
    avail = s["avail_table"][ist[:, V._ROW]]
    if logits:
        raw = masked_softmax(a, avail)
        tot = raw.sum(axis=1)
        bad = ~(tot > 0)
    else:
        raw = np.where(avail, a, 0.0)
        tot = raw.sum(axis=1)
        bad = ~np.isfinite(raw).all(axis=1) | (raw < 0).any(axis=1) | (raw > 1).any(axis=1) | ~(tot > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        target = np.round(raw / tot[:, None], 4)
    target[bad] = fallback_weights(w[bad], avail[bad])
    nav_pre = fst[:, V._NAV].copy()
    ex = execute_trade(w, target, nav_pre, RATE, MIN_TRADE)
    w, nav = ex.weights.copy(), ex.nav.copy()
    k = ist[:, V._K] + 1
    term = k >= ist[:, V._NDEC]
    nxt = np.where(term, ist[:, V._LAST], s["dec"][np.arange(len(k)), np.minimum(k, s["dec"].shape[1] - 1)])
    for i in range(len(k)):
        for r in range(ist[i, V._T] + 1, nxt[i] + 1):
            growth = w[i] * s["g0"][r]
            g = growth.sum()
            nav[i] *= g
            if g > 0:
                w[i] = growth / g
    lr = np.log(nav / nav_pre)
    if risk:
        peak = np.maximum(fst[:, V._PEAK], nav)
        dd = np.log(peak / nav)
        lr = lr - KAPPA * np.maximum(dd - fst[:, V._DD], 0.0)
    return w, nav, lr, term, bad


def _par(risk):
    return np.array([RATE, MIN_TRADE, NAV0, KAPPA, float(risk), LOGIT_SCALE, 6, -1])


def _no_starts(B, N):
    """draw, cut and the episode tables of _batch_step (unused: no env starts an episode)."""
    return (np.zeros(B, np.int64), np.zeros(B, bool), np.arange(10, dtype=np.int64), np.array([[0, 10, 12, 4]]),
            np.zeros((1, N)), np.zeros(30, np.int64))


def _kernel(s, logits, risk, kernel=V._batch_step, shift=V._logit_shift, targets=V._softmax_targets):
    """The kernel's step as BatchCore.run makes it: the fused call, then (return -1) numpy's exp for the softmaxes
    flagged _EXACT and the S3 fallback for the _BAD ones, and the call with the targets given."""
    B, N = s["a"].shape
    ist, w, fst, dec = s["ist"].copy(), s["w"].copy(), s["fst"].copy(), s["dec"].copy()
    ops = np.full(B, V._STEP, np.int8)
    e, target, flag = np.zeros((B, N)), np.zeros((B, N)), np.zeros(B, np.int8)
    rew, term = np.zeros(B), np.zeros(B, bool)
    F = s["feat_table"].shape[1]
    tail = np.zeros((B, N + 4), np.float32)
    tail[:, N + 1 :] = [0.0, 1.0, 0.0]
    out = np.full((B, F + N + 4), np.nan, np.float32)
    args = [ops, logits, 0, s["a"], target, flag, rew, term, w, fst, ist, dec, s["avail_table"], s["feat_table"],
            s["rowmap"], s["g0"], tail, *_no_starts(B, N), out, _par(risk)]
    n_term = kernel(*args)
    flagged = flag.copy()
    if n_term < 0:
        assert n_term == -1
        assert not (ist != s["ist"]).any() and (w == s["w"]).all()  # nothing changed before the targets
        exact = flag == V._EXACT
        if exact.any():
            sel = np.where(exact, V._STEP, V._IDLE).astype(np.int8)
            assert shift(s["a"], sel, s["avail_table"], ist, e, LOGIT_SCALE) == 0
            e[exact] = np.exp(e[exact])
            targets(sel, e, target, flag)
        bad = flag == V._BAD
        avail = s["avail_table"][ist[:, V._ROW]]
        target[bad] = fallback_weights(w[bad], avail[bad])
        args[2] = 1
        n_term = kernel(*args)
    return w, fst[:, V._NAV], rew, term, flagged, n_term, out, ist, tail


@pytest.mark.parametrize("N", [80, 300])
@pytest.mark.parametrize("logits", [True, False])
@pytest.mark.parametrize("risk", [False, True])
def test_kernel_equals_numpy_form_bit_for_bit(N, logits, risk):
    for seed in range(3):
        s = _state(6, N, 30, seed, logits)
        w_ref, nav_ref, lr_ref, term_ref, bad_ref = _reference(s, logits, risk)
        w, nav, rew, term, flagged, n_term, obs, ist, tail = _kernel(s, logits, risk)
        np.testing.assert_array_equal(flagged == V._BAD, bad_ref)
        np.testing.assert_array_equal(w, w_ref)
        np.testing.assert_array_equal(nav, nav_ref)
        np.testing.assert_array_equal(term, term_ref)
        assert n_term == term_ref.sum()
        np.testing.assert_allclose(rew, lr_ref, rtol=1e-13, atol=0)  # np.log (numpy) vs libm log: last ulp
        # the observation of every env: the features of its decision, then the weights and log NAV of the step
        # (a terminated env keeps its last ones: here the initial zeros of tail) and the profile
        F = s["feat_table"].shape[1]
        np.testing.assert_array_equal(obs[:, :F], s["feat_table"][ist[:, V._ROW]])
        np.testing.assert_array_equal(obs[:, F:], tail)
        assert (obs[:, F + N + 1 :] == [0.0, 1.0, 0.0]).all()
        for i in np.flatnonzero(~term):
            np.testing.assert_array_equal(obs[i, F : F + N], np.clip(w_ref[i], 0.0, 1.0).astype(np.float32))
            assert obs[i, F + N] == np.float32(np.clip(np.log(nav_ref[i] / NAV0), -10, 10))
        assert not obs[term, F : F + N + 1].any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_softmax_rounds_as_numpys_exp_on_many_actions(dtype):
    """The kernel's softmax (its own exp, numpy's where a weight lies within _GUARD of a rounding boundary)
    against masked_softmax + np.round on many random and clipped actions, bit for bit."""
    rng = np.random.default_rng(7)
    for seed in range(40):
        s = _state(16, 80, 30, seed, True)
        a = rng.uniform(-1.3, 1.3, size=(16, 80))
        a[rng.uniform(size=a.shape) < 0.2] = rng.choice([-1.0, 1.0, 0.0, -0.0])
        s["a"] = a.astype(dtype)
        w_ref, nav_ref, _, _, bad_ref = _reference(dict(s, a=s["a"].astype(np.float64)), True, False)  # as the env
        w, nav, _, _, flagged, _, _, _, _ = _kernel(s, True, False)
        np.testing.assert_array_equal(flagged == V._BAD, bad_ref)
        np.testing.assert_array_equal(w, w_ref)
        np.testing.assert_array_equal(nav, nav_ref)


def test_softmax_on_a_rounding_boundary_takes_numpys_exp():
    """32 available assets with equal logits: every weight is 1/32 = 0.03125, a tie of the 4-decimal rounding;
    the fast exp leaves it to numpy's (_EXACT) and the targets are np.round's (0.0312, half to even)."""
    s = _state(4, 80, 30, 1, True)
    s["avail_table"][0] = False
    s["avail_table"][0, :32] = True
    s["ist"][:, V._ROW] = 0
    s["a"][:] = 1.0
    s["a"][1, 40] = -0.5  # an unavailable asset's logit does not count
    s["a"][2, :32] = 0.25
    s["a"][3, 0] = 0.9  # no tie: the fast exp decides
    w_ref, nav_ref, _, _, _ = _reference(s, True, False)
    w, nav, _, _, flagged, _, _, _, _ = _kernel(s, True, False)
    assert flagged.tolist() == [V._EXACT, V._EXACT, V._EXACT, V._OK]
    np.testing.assert_array_equal(w, w_ref)
    np.testing.assert_array_equal(nav, nav_ref)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_non_finite_logit_is_refused_before_any_change(bad):
    s = _state(4, 80, 30, 0, True)
    s["a"][2, 5] = bad
    z = np.zeros((4, 80))
    ops = np.full(4, V._STEP, np.int8)
    assert V._non_finite(s["a"], ops)
    assert V._logit_shift(s["a"], ops, s["avail_table"], s["ist"], z, LOGIT_SCALE) == 1 and not z.any()
    ist, w, fst = s["ist"].copy(), s["w"].copy(), s["fst"].copy()
    B, N = s["a"].shape
    out = np.zeros((B, s["feat_table"].shape[1] + N + 4), np.float32)
    got = V._batch_step(ops, True, 0, s["a"], np.zeros((B, N)), np.zeros(B, np.int8), np.zeros(B), np.zeros(B, bool),
                        w, fst, ist, s["dec"], s["avail_table"], s["feat_table"], s["rowmap"], s["g0"],
                        np.zeros((B, N + 4), np.float32), *_no_starts(B, N), out, _par(False))
    assert got == -2 and (ist == s["ist"]).all() and (w == s["w"]).all() and (fst == s["fst"]).all()
    assert not out.any()
    ops[2] = V._IDLE  # an env that does not step is not checked
    assert not V._non_finite(s["a"], ops)
    assert V._logit_shift(s["a"], ops, s["avail_table"], s["ist"], z, LOGIT_SCALE) == 0


@pytest.mark.parametrize("logits", [True, False])
def test_interpreted_kernel_equals_compiled(logits):
    s = _state(5, 300, 30, 4, logits)
    got = _kernel(s, logits, True)
    want = _kernel(s, logits, True, kernel=V._batch_step.py_func, shift=V._logit_shift.py_func,
                   targets=V._softmax_targets.py_func)
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)


def test_sb3_vec_env_equals_wrapper_with_same_step_autoreset():
    """PortBenchSB3VecEnv (the same batched core, SB3 autoreset) against AllocationWrapper(RandomPeriod(...))."""
    pytest.importorskip("stable_baselines3", reason=NEEDS_RL)
    import gymnasium as gym

    import quantgym  # noqa: F401 - registers the ids
    from quantgym.envs.portbench.allocation import AllocationWrapper
    from quantgym.envs.portbench.rl.sb3 import PortBenchSB3VecEnv
    from quantgym.envs.portbench.training import RandomPeriod, train_windows

    venv = PortBenchSB3VecEnv(3, windows=train_windows(), episode_len=4)
    venv.seed(5)
    obs = venv.reset()
    singles = [AllocationWrapper(RandomPeriod(gym.make("PortBench-Balanced-v0", scoring=False), episode_len=4),
                                 reward="log_return") for _ in range(3)]
    for i, e in enumerate(singles):
        np.testing.assert_array_equal(e.reset(seed=5 + i)[0], obs[i])
    rng = np.random.default_rng(1)
    ends = 0
    for _ in range(10):
        act = rng.uniform(-1, 1, (3, 80)).astype(np.float32)
        obs, rew, done, infos = venv.step(act)
        for i, e in enumerate(singles):
            o, r, term, trunc, _ = e.step(act[i])
            t = term or trunc  # SB3's done: either end (the cut is TimeLimit.truncated in infos)
            assert t == done[i] and rew[i] == pytest.approx(r, rel=1e-6)
            if t:
                ends += 1
                np.testing.assert_array_equal(infos[i]["terminal_observation"], o)
                o, _ = e.reset()
            np.testing.assert_array_equal(obs[i], o)
    assert ends == 6  # two episodes of 4 decisions ended in every sub-env
