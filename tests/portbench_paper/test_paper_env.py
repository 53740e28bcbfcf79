"""Paper-mode flags inside the env (spec §3.1, §3.2, §4.0–§4.5, §11.3, §11.4, §11.9; Appendix A).

Each test builds the clean env and the env with ONE flag switched on (same bundled data, same
period, same actions) and checks the targeted quantity and that the rest is unchanged.
"""

import pickle
import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from quantgym.envs.portbench.env import PortBenchEnv
from quantgym.envs.portbench.paper import PaperFidelity
from quantgym.envs.portbench.profiles import PROFILES, pas_step
from quantgym.metrics import max_drawdown

PERIOD = dict(start="2024-03-01", end="2024-05-31", freq="monthly")


def _env(flag=None, **kw):
    paper = PaperFidelity.only(flag) if flag else None
    return PortBenchEnv(profile="conservative", period=PERIOD, stagewise=True, paper=paper, **kw)


def _action(env, views=0.0, signal=1, weights=None, status=0):
    n = env.n_assets
    w = np.full(n, 1.0 / n) if weights is None else weights
    return {"views": np.full(n, views), "signals": np.full(n, signal, dtype=np.int64), "weights": w, "status": status}


def _decision(env, weights=None):
    env.reset(seed=0)
    a = _action(env, weights=weights)
    env.step(a)
    env.step(a)
    return env.step(a)


def test_paper_fidelity_kwarg_sets_every_flag_and_env_checks():
    env = PortBenchEnv(fidelity="paper", period="covid_2020")
    assert env.config.paper == PaperFidelity.paper() and env.config.fidelity == "paper"
    assert env.n_assets == 89 and env.view.tickers[25] == "^VIX"
    assert PortBenchEnv().config.paper == PaperFidelity()  # clean default
    with pytest.raises(ValueError, match="fidelity"):
        PortBenchEnv(fidelity="bogus")
    # random actions include status=2, which aborts in paper mode; check_env with that one flag off
    e2 = PortBenchEnv(period="covid_2020", stagewise=True, paper=PaperFidelity.paper(abort_on_parse_failure=False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(e2.unwrapped)
    pickle.loads(pickle.dumps(e2))


def test_s2_prompt_threshold_changes_prompt_not_truth():
    clean, paper = _env(), _env("s2_prompt_threshold")
    for e in (clean, paper):
        e.reset(seed=0)
        e.step(_action(e))
    pc, pp = clean.render_prompt(1), paper.render_prompt(1)
    assert "above +0.2," in pc and "above +0.15," in pp and "below -0.15," in pp
    assert pc.replace("0.2", "0.15") == pp
    np.testing.assert_array_equal(clean.truth.s_star, paper.truth.s_star)  # truth keeps ±0.2


def test_short_prompts_and_no_profile_in_s3():
    clean, short, noprof = _env(), _env("short_prompts"), _env("no_profile_in_s3")
    for e in (clean, short, noprof):
        e.reset(seed=0)
    s1c, s1s = clean.render_prompt(0), short.render_prompt(0)
    asset_lines = [ln for ln in s1s.splitlines() if "(equities):" in ln or "(bonds):" in ln]
    assert [ln.split()[0] for ln in asset_lines] == ["SPY", "QQQ", "IWM", "VTI", "IVV", "EEM", "EFA", "VEA"]
    head = next(ln for ln in s1s.splitlines() if ln.startswith("pairwise"))
    assert head.split(": ", 1)[1].split() == ["SPY", "QQQ", "IWM", "VTI", "IVV", "EEM"]
    assert len(s1c) > len(s1s) and s1c.count("(bonds):") == 15
    assert "[INVESTOR PROFILE]" in clean.render_prompt(2) and "[INVESTOR PROFILE]" not in noprof.render_prompt(2)
    assert "[INVESTOR PROFILE]" in noprof.render_prompt(0)  # S1/S2 keep it (through news_text)
    assert noprof.render_prompt(0) == s1c


def test_pas_real_estate_flag():
    clean, paper = _env(), _env("pas_real_estate")
    n = clean.n_assets
    w = np.zeros(n)
    cls = np.array(clean.view.classes)
    w[np.flatnonzero(cls == "equities")[0]] = 0.5
    w[np.flatnonzero(cls == "real_estate")[0]] = 0.2
    w[np.flatnonzero(cls == "bonds")[0]] = 0.3
    _, _, _, _, ic = _decision(clean, w)
    _, _, _, _, ip = _decision(paper, w)
    var = ic["var"]
    prof = PROFILES["conservative"]
    assert ic["pas"] == pas_step(w, cls, var, prof)
    assert ip["pas"] == pas_step(w, cls, var, prof, ("equities", "cryptocurrency", "real_estate"))
    # E = 0.7 > cap 0.4 in paper mode: s_E = 1 - 0.3/0.4 = 0.25 instead of 1 - 0.1/0.4 = 0.75
    assert ip["pas"] < ic["pas"]
    assert ic["stage_scores"] == ip["stage_scores"] and ic["nav"] == ip["nav"]


def test_cash_cost_drag_executed_weights():
    clean, paper = _env(), _env("cash_cost_drag")
    n = clean.n_assets
    w = np.full(n, 1.0 / n)
    _, _, _, _, ic = _decision(clean, w)
    _, _, _, _, ip = _decision(paper, w)
    assert ic["tau"] == ip["tau"]  # the agent's τ̂ (S4) is computed on the S3 weights in both modes
    b = clean.view.tickers.index("BIL")
    w_hat = round(1.0 / n, 4)  # S3 weights are normalised and rounded to 4 (§4.3)
    # executed BIL weight = w_hat − K/NAV with K/NAV = 0.0015·τ̂ (floored at 0, rounded 4); the sandbox trades to it
    exec_b = round(max(w_hat - 0.0015 * ic["tau"], 0.0), 4)
    dw = {o["asset"]: o["delta_w"] for o in paper.sim.trades[0].orders}
    dw_clean = {o["asset"]: o["delta_w"] for o in clean.sim.trades[0].orders}
    assert dw.get("BIL", 0.0) == pytest.approx(dw_clean.get("BIL", 0.0) - (w_hat - exec_b), abs=1e-12)
    others = [t for t in dw_clean if t != "BIL"]
    assert all(dw.get(t, 0.0) == pytest.approx(dw_clean[t], abs=1e-12) for t in others)
    assert paper.records[0]["weights"] == clean.records[0]["weights"]  # recorded S3 weights unchanged
    assert ip["stage_scores"]["S1"] == ic["stage_scores"]["S1"] and ip["stage_scores"]["S3"] == ic["stage_scores"]["S3"]


def test_ex_post_flags():
    base, d_flag, s45 = _env(), _env("ex_post_from_d"), _env("ex_post_s4s5")
    for e in (base, d_flag):
        e.reset(seed=0)
    t = base.sim.t
    fb, fd = base._forward_returns(), d_flag._forward_returns()
    np.testing.assert_array_equal(fb[0], base.view.returns[t + 1])  # clean: starts after d
    np.testing.assert_array_equal(fd[0], base.view.returns[t])  # paper: starts at d
    assert fd.shape[0] == 21
    _, _, _, _, ib = _decision(base)
    _, _, _, _, i45 = _decision(s45)
    assert not ib["uses_future_data"] and i45["uses_future_data"]
    assert ib["stage_scores"]["S3"] == i45["stage_scores"]["S3"]  # S3 keeps the lookback oracle
    assert s45.records[0]["tau_star"] != base.records[0]["tau_star"]  # S4 truth from the ex-post oracle


def test_abort_on_parse_failure():
    clean, paper = _env(), _env("abort_on_parse_failure")
    for e in (clean, paper):
        e.reset(seed=0)
    _, _, term, trunc, info = clean.step(_action(clean, status=2))
    assert not trunc and "S1" in info["invalid"]
    _, r, term, trunc, info = paper.step(_action(paper, status=2))
    assert trunc and not term and info["aborted"] and r == 0.0
    with pytest.raises(RuntimeError, match="aborted"):
        paper.step(_action(paper))
    paper.reset(seed=0)
    paper.step(_action(paper))  # a fresh episode runs again


def test_all_zero_s3_weights():
    clean, paper = _env(), _env("s3_all_zero_equal_signals")
    z = np.zeros(clean.n_assets)
    _, _, _, _, ic = _decision(clean, z)
    _, _, _, _, ip = _decision(paper, z)
    assert "S3" in ic["invalid"] and ic["stage_scores"]["S3"] == 0.0
    assert "S3" not in ip["invalid"] and ip["stage_scores"]["S3"] > 0
    w = paper.records[0]["weights"]
    assert len(set(w.values())) == 1 and len(w) == paper.records[0]["n_available"]  # EW over the signal assets


def test_mdd_flag_in_env_metrics_and_s5():
    clean, paper = _env(), _env("mdd_no_start_peak")
    for e in (clean, paper):
        e.reset(seed=0)
        done = False
        while not done:
            *_, done, _, info = e.step(_action(e))
        e.final = info["episode_metrics"]
    r = np.asarray(clean.sim.daily_returns())
    assert clean.final["max_drawdown"] == pytest.approx(max_drawdown(r, include_start=True))
    assert paper.final["max_drawdown"] == pytest.approx(max_drawdown(r, include_start=False))
    assert clean.final["sharpe"] == paper.final["sharpe"]


def test_full_paper_episode_through_the_env_matches_direct_run():
    from quantgym.evaluation import evaluate
    from quantgym.envs.portbench.baselines import make_baseline
    from quantgym.envs.portbench.paper.simulator import run_direct

    res = evaluate("PortBench-Balanced-v0", make_baseline("equal_weight"), period="normal_2024", fidelity="paper")
    direct = run_direct("equal_weight", "normal_2024", PaperFidelity.paper()).metrics
    # same schedule and accounting; the env rounds S3 weights to 4 decimals (1/89 -> 0.0112, §4.3),
    # the direct runner trades the baseline's 6-decimal weights: differences stay below 0.01 pp / 0.001
    assert abs(res.metrics["ret_pct"] - direct["ret_pct"]) < 0.01
    assert abs(res.metrics["sharpe"] - direct["sharpe"]) < 1e-3
    assert res.metrics["n_rebalances"] == 11


@pytest.mark.parametrize("paper", [True, "yes", 1])
def test_paper_takes_flags_only_and_says_so_in_one_line(paper):
    with pytest.raises(ValueError, match=r"^paper must be a PaperFidelity or a dict of its flags") as e:
        PortBenchEnv(paper=paper)
    assert "\n" not in str(e.value) and "fidelity='paper'" in str(e.value)
