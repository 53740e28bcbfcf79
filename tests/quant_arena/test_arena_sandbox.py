"""Quant-Arena-specific sandbox attacks: each ends as a recorded, clearly-worded failure (issue §2).

The generic attack list (open('/etc/passwd'), sockets, subprocess, ctypes, fork bomb, 10 GB,
printing a gigabyte, ...) is tested by the sandbox's own tests (tests/sandbox/). These run
submissions through the real sandbox on a small real panel with short limits.
"""

from __future__ import annotations

import numpy as np
import pytest

from quantgym.envs.quant_arena.executor import evaluate_submission
from quantgym.envs.quant_arena.config import ArenaConfig, ArenaSandboxLimits, ArenaScoringConfig
from quantgym.envs.quant_arena.data import BUNDLED_DIR

SHORT = ArenaConfig(sandbox=ArenaSandboxLimits(day_seconds=1.0, eval_seconds=30.0, cpu_seconds=30.0, memory_mb=4096))
HEAD = "import numpy as np\nimport pandas as pd\nFEATURES = ['x']\n"


@pytest.fixture(scope="module")
def sealed(small_real):
    return small_real.truncate("2024-02-29")


def run(src, ds, cfg=SHORT):
    return evaluate_submission(HEAD + src, ds, "2024-01-01", "2024-02-29", cfg)


def test_reading_future_rows_through_the_view_is_a_recorded_error(sealed):
    r = run("""
def compute_features(view):
    return {'x': view.history('close', 1).iloc[-1]}
def score(features, view):
    view.intraday('trades', view.date + pd.Timedelta(days=1))   # a read past the decision date
    return features['x']
""", sealed)
    assert r.status == "failed" and r.S == 0.0 and r.metrics is None
    assert r.errors[0]["type"] == "LookAheadError" and "after the decision date" in r.errors[0]["message"]
    assert r.n_errors == r.n_days


def test_frame_walking_finds_no_later_rows(sealed):
    # the agent walks the interpreter's frames (module level and inside score) looking for the payload.
    # Default: the sandbox refuses frame introspection outright (a recorded violation) ...
    refused = run(PROBE, sealed)
    assert refused.status != "ok"
    assert "frame" in (refused.message or "").lower() or "frame" in str(refused.errors).lower()
    # ... and with that layer switched off, the commit-reveal keeper alone still holds: only rows up to
    # D_0 exist in the agent's process (spec §10.4)
    keeper_only = ArenaConfig(sandbox=ArenaSandboxLimits(day_seconds=1.0, eval_seconds=30.0, cpu_seconds=30.0,
                                                    memory_mb=4096, frame_introspection=True))
    r = run(PROBE, sealed, keeper_only)
    assert r.status == "ok", r.errors[:2]
    assert r.n_errors == 0
    # control: the same probe does find later rows when the payload is held in-process (trusted executor)
    c = evaluate_submission(HEAD + PROBE, sealed, "2024-01-01", "2024-02-29", SHORT, executor="inprocess")
    assert c.status == "failed" and c.errors[0]["message"].startswith("LEAK")


PROBE = """
import collections
def _latest():
    best = ''
    f = collections._sys._getframe(0)
    while f is not None:
        for v in list(f.f_locals.values()):
            if isinstance(v, dict):
                for cand in (v, v.get('payload'), v.get('block')):
                    if isinstance(cand, dict):
                        for key in ('dates',):
                            d = cand.get(key)
                            if isinstance(d, list) and d:
                                best = max(best, str(d[-1]))
                        b = cand.get('block')
                        if isinstance(b, dict) and b.get('dates'):
                            best = max(best, str(b['dates'][-1]))
        f = f.f_back
    return best
AT_IMPORT = _latest()
def compute_features(view):
    return {'x': view.history('close', 1).iloc[-1]}
def score(features, view):
    try:
        raise ValueError
    except ValueError as e:
        f = e.__traceback__.tb_frame
    seen = max(_latest(), AT_IMPORT)
    if seen > str(view.date.date()):
        raise RuntimeError('LEAK ' + seen)
    return features['x']
"""


def test_opening_the_bundled_data_is_a_violation(sealed):
    path = str(BUNDLED_DIR / "daily_default.parquet")
    r = run(f"""
def compute_features(view):
    return {{'x': view.history('close', 1).iloc[-1]}}
def score(features, view):
    open({path!r}, 'rb').read(16)
    return features['x']
""", sealed)
    assert r.status == "violation" and r.S == 0.0
    assert "forbidden" in r.message and "open(" in r.message


@pytest.mark.parametrize("body,status,needle", [
    ("return pd.Series(np.nan, index=view.symbols)", "ok", None),                   # legal: all cash (§10.12)
    ("return pd.Series(np.inf, index=view.symbols)", "failed", "±inf"),             # all inf: day errors
    ("return features['x'].where(features['x'] > 100, -np.inf)", "failed", "±inf"),  # some -inf every day
    ("return pd.Series(1.0, index=['SH999999'] + list(view.symbols))", "failed", "outside view.symbols"),
    ("return list(range(len(view.symbols)))", "failed", "pandas.Series"),
    ("return pd.Series('a', index=view.symbols)", "failed", "numeric"),
    ("raise ZeroDivisionError('inside score')", "failed", "inside score"),
])
def test_bad_scores_are_day_errors(sealed, body, status, needle):
    r = run(f"""
def compute_features(view):
    return {{'x': view.history('close', 1).iloc[-1]}}
def score(features, view):
    {body}
""", sealed)
    assert r.status == status
    if status == "ok":
        assert r.metrics["exposure"] == 0.0 and r.metrics["coverage"] == 0.0
        # coverage 0 stays a legal, scored all-cash strategy (spec §10.5, §10.12), but it is said clearly
        assert r.metrics["no_signal"] is True and r.message.startswith("ok (no signal: coverage 0")
        assert r.errors[0]["type"] == "NoSignal" and "never traded" in r.errors[0]["message"] and r.n_errors == 0
    else:
        assert needle in r.errors[0]["message"] and r.S == 0.0
        assert needle in r.errors[0]["traceback"] and "harness.py" not in r.errors[0]["traceback"]


def test_day_error_tracebacks_start_at_the_agents_first_frame(sealed):
    # the traceback shown to the agent starts at its own first frame (score), never in
    # quant_arena/child/harness.py; library frames below the agent's call stay
    r = run("""
def helper(x):
    return x.loc['no such symbol']
def compute_features(view):
    return {'x': view.history('close', 1).iloc[-1]}
def score(features, view):
    return helper(features['x'])
""", sealed)
    tb = r.errors[0]["traceback"]
    assert r.status == "failed" and r.errors[0]["type"] == "KeyError", r.errors[:1]
    lines = tb.splitlines()
    assert lines[0] == "Traceback (most recent call last):" and 'in score' in lines[1] and "<agent>" in lines[1], tb
    assert "return helper(features['x'])" in tb and "in helper" in tb
    assert "harness" not in tb, tb


def test_infinite_loop_hits_the_day_limit(sealed):
    r = run("""
def compute_features(view):
    while True:
        pass
def score(features, view):
    return features['x']
""", sealed)
    assert r.status == "timeout" and r.S == 0.0 and "timeout" in r.message


def test_host_rejects_scores_not_committed_day_by_day(sealed):
    # the agent monkeypatches the runner's feeder to change the returned scores afterwards
    r = run("""
import collections
def compute_features(view):
    return {'x': view.history('close', 1).iloc[-1]}
def score(features, view):
    h = collections._sys.modules['quantgym.envs.quant_arena.child.runner']
    cls = h.KeeperFeeder
    if not getattr(cls, '_patched', False):
        orig = cls.final
        def final(self):
            res = orig(self)
            res['scores'][:] = 1.0
            return res
        cls.final = final
        cls._patched = True
    return features['x']
""", sealed)
    assert r.status == "violation" and "committed" in r.message


def test_research_payload_has_no_sealed_rows(small_real):
    from quantgym.envs.quant_arena.account import window_rows
    from quantgym.envs.quant_arena.handoff import build_payload

    ds = small_real.truncate("2023-12-31")
    d0, n = window_rows(ds, "2023-11-01", "2023-12-31")
    p = build_payload(ds, d0, n)
    assert max(p["block"]["dates"]) < "2023-12-29"  # the last decision date is D_{n-1}
    assert np.isfinite(p["block"]["close"]).any()


def test_printing_past_the_output_cap_is_a_violation(sealed):
    cfg = ArenaConfig(sandbox=ArenaSandboxLimits(day_seconds=2.0, eval_seconds=30.0, cpu_seconds=30.0,
                                            max_output_bytes=10_000))
    r = run("""
def compute_features(view):
    print('x' * 5000)
    return {'x': view.history('close', 1).iloc[-1]}
def score(features, view):
    return features['x']
""", sealed, cfg)
    assert r.status == "violation" and "printed more than" in r.message


def test_intraday_tables_reach_the_child_with_their_day(bundled):
    # a small real slice around 2023-02-07 with the bundled Level-2 day of 600519
    from quantgym.envs.quant_arena.data import _default_intraday
    from quantgym.envs.quant_arena.data import ArenaDataset
    import pandas as pd

    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet")
    df = df[df["symbol"].isin(["SH600519", "SH600000", "SZ000001", "SH601318", "SZ000858", "SH600036"])
            & (df["date"] >= pd.Timestamp("2022-12-01").date()) & (df["date"] <= pd.Timestamp("2023-02-28").date())]
    ds = ArenaDataset.from_frame(df.reset_index(drop=True), info=bundled.info.reset_index(), intraday=_default_intraday)
    r = evaluate_submission(HEAD + """
def compute_features(view):
    return {'x': view.history('close', 1).iloc[-1]}
def score(features, view):
    try:
        t = view.intraday('trades')
    except KeyError:
        return features['x']
    assert str(view.date.date()) == '2023-02-07'
    assert int(t['qty'].sum()) == 2432171, t['qty'].sum()
    snap = view.intraday('snapshots', '2023-02-07')
    assert len(snap) > 4000
    return features['x']
""", ds, "2023-02-01", "2023-02-28", SHORT)
    assert r.status == "ok" and r.n_errors == 0, r.errors[:1]


def test_payload_starts_at_the_declared_warmup(small_real):
    from quantgym.envs.quant_arena.account import window_rows
    from quantgym.envs.quant_arena.handoff import build_payload

    d0, n = window_rows(small_real, "2024-01-01", "2024-02-29")
    p = build_payload(small_real, d0, n, warmup_start="2023-10-09")
    assert p["block"]["dates"][0] == "2023-10-09" and p["block"]["dates"][p["first"]] == "2023-12-29"


def test_undeclared_features_are_dropped_and_reported_once(sealed):
    r = run("""
SEEDED = float(np.random.rand())   # module-level RNGs are seeded 0
def compute_features(view):
    x = view.history('close', 1).iloc[-1]
    return {'x': x, 'y_undeclared': x}
def score(features, view):
    if SEEDED != 0.5488135039273248:
        raise RuntimeError('not seeded: %r' % (SEEDED,))
    return features['x']
""", sealed)
    assert r.status == "ok" and r.n_errors == 0
    assert r.extra_keys == ["y_undeclared"]
    assert r.errors[0]["type"] == "UndeclaredFeatures" and len(r.errors) == 1


def test_runner_uses_the_sandbox_prepare_hook_not_frame_walking():
    # the keeper is forked by the supported pre-lockdown hook; the runner never walks the child's frames
    import inspect

    from quantgym.envs.quant_arena.child import runner as cr

    assert cr.score_days.sandbox_prepare is cr._prepare
    src = inspect.getsource(cr)
    assert "_getframe" not in src.replace("collections._sys._getframe(1).f_locals", "")
    assert "f_back" not in src.replace("tb_frame.f_back", "")


def test_failed_keeper_setup_scrubs_later_rows_and_never_runs_unprotected():
    # a payload the keeper cannot be built from (no symbols): later rows are wiped before any agent
    # code exists and the runner refuses to evaluate ("look-ahead isolation unavailable")
    from quantgym.envs.quant_arena.child import runner as cr

    close = np.arange(12.0).reshape(6, 2)
    payload = {"isolate": True, "key": b"k" * 32, "first": 2, "n": 4, "sample_every": 5, "max_features": 3,
               "block": {"close": close, "dates": [f"2024-01-0{i + 1}" for i in range(6)]}}
    out = cr._prepare(payload)
    assert out["isolate"] and "keeper set-up failed" in out["isolation_failed"]
    assert "block" not in out and "key" not in out
    assert np.isnan(close[3:]).all() and np.isfinite(close[:3]).all()  # rows after D_0 overwritten in place
    res = cr.score_days({}, out)
    assert res["status"] == "isolation_error"
    assert res["message"].startswith("look-ahead isolation unavailable (keeper set-up failed")


def test_arena_runner_works_under_the_sandbox_frame_policy(sealed):
    # with the sandbox's frame-introspection refusal forced on, the frame-walking probe is refused
    # outright, and an honest submission still runs with the keeper and a valid commit tag
    import secrets

    from quantgym.envs.quant_arena.account import window_rows
    from quantgym.envs.quant_arena.handoff import RUNNER, build_payload, validate_child_value
    from quantgym.sandbox import SandboxLimits, run_in_sandbox

    limits = SandboxLimits(cpu_seconds=30.0, wall_seconds=60.0, memory_mb=4096, allow_frame_introspection=False)
    d0, n = window_rows(sealed, "2024-01-01", "2024-02-29")

    def payload(key):
        return build_payload(sealed, d0, n, day_seconds=2.0, key=key)

    r = run_in_sandbox(HEAD + PROBE, RUNNER, payload(secrets.token_bytes(32)), limits)
    assert r.status == "forbidden" and r.message.startswith("forbidden: frame introspection (sys._getframe)")
    assert r.details["frame_policy"] is True
    key = secrets.token_bytes(32)
    honest = HEAD + """
def compute_features(view):
    return {'x': view.history('close', 5).pct_change(fill_method=None).iloc[-1].fillna(0.0)}
def score(features, view):
    return features['x'].rank()
"""
    r = run_in_sandbox(honest, RUNNER, payload(key), limits)
    assert r.status == "ok", r.message
    assert r.value["status"] == "ok" and r.value["isolation"] == "commit-reveal" and r.value["n_errors"] == 0
    clean, bad = validate_child_value(r.value, n, sealed.N, sealed.has_row[d0:d0 + n], 1,
                                      len(range(0, n, 5)), key=key)
    assert bad == [] and np.isfinite(clean["scores"]).any()


def test_inf_score_on_one_date_is_a_recorded_day_error(sealed):
    # -inf for one stock on the first decision date only: that date is a day error (all its scores NaN),
    # the other dates trade; the message names the symbol and says what to return instead
    r = run("""
_calls = [0]
def compute_features(view):
    return {'x': view.history('close', 1).iloc[-1]}
def score(features, view):
    _calls[0] += 1
    s = features['x'].astype(float)
    if _calls[0] == 1:
        s.iloc[0] = -np.inf
    return s
""", sealed)
    assert r.status == "ok" and r.n_errors == 1 and r.message == "ok (1 day error(s))"
    e = r.errors[0]
    assert e["date"] == "2023-12-29" and e["phase"] == "score" and e["type"] == "ValueError"
    assert "±inf for 1 symbol(s)" in e["message"] and "return NaN for 'not eligible'" in e["message"]
    assert r.metrics["no_signal"] is False and r.metrics["coverage"] > 0
    # the spec's literal "±inf -> NaN" cast is kept for features, and for scores behind the config switch
    feats_inf = run("""
def compute_features(view):
    return {'x': view.history('close', 1).iloc[-1] * np.inf}
def score(features, view):
    return view.history('close', 1).iloc[-1]
""", sealed)
    assert feats_inf.status == "ok" and feats_inf.n_errors == 0
    cast = ArenaConfig(sandbox=SHORT.sandbox, scoring=ArenaScoringConfig(inf_score_is_day_error=False))
    r2 = run("""
def compute_features(view):
    return {'x': view.history('close', 1).iloc[-1]}
def score(features, view):
    return pd.Series(np.inf, index=view.symbols)
""", sealed, cfg=cast)
    assert r2.status == "ok" and r2.n_errors == 0 and r2.metrics["coverage"] == 0.0 and r2.metrics["no_signal"]


def test_zero_coverage_opt_in_failure_status(sealed):
    # [project choice] switch: coverage 0 as a failure status "no_signal" (S = 0, null metrics), recorded
    cfg = ArenaConfig(sandbox=SHORT.sandbox, scoring=ArenaScoringConfig(zero_coverage_status="no_signal"))
    r = run("""
def compute_features(view):
    return {'x': view.history('close', 1).iloc[-1]}
def score(features, view):
    return pd.Series(np.nan, index=view.symbols)
""", sealed, cfg=cfg)
    assert r.status == "no_signal" and r.S == 0.0 and r.metrics is None
    assert r.message.startswith("no_signal: coverage 0") and r.errors[0]["type"] == "NoSignal"
    with pytest.raises(ValueError, match="zero_coverage_status"):
        ArenaScoringConfig(zero_coverage_status="fail")


# the per-date limit is enforced by the keeper, outside the agent's process. Each
# submission reaches `signal` through an object it is given (collections._sys) and defeats the child's
# own SIGALRM alarm; before the fix each held its step until the whole-run wall limit (30 s here).
_DEFEATS = {
    "cancel_itimer": """
    s = collections._sys.modules['signal']
    s.setitimer(s.ITIMER_REAL, 0)
    while True:
        pass""",
    "ignore_sigalrm_and_sleep": """
    s = collections._sys.modules['signal']
    s.signal(s.SIGALRM, s.SIG_IGN)
    while True:
        time.sleep(0.05)""",
    "swallow_the_day_timeout": """
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass""",
    "sleep_through_the_alarm": """
    while True:
        try:
            time.sleep(0.05)
        except BaseException:
            pass""",
    "cancel_itimer_and_close_the_keeper_pipes": """
    s = collections._sys.modules['signal']
    s.setitimer(s.ITIMER_REAL, 0)
    s.signal(s.SIGALRM, s.SIG_IGN)
    k = collections._sys.modules['quantgym.envs.quant_arena.child.runner']._KEEPER
    collections._sys.modules['os'].close(k[1])
    while True:
        time.sleep(0.05)""",
}


@pytest.mark.parametrize("attack", sorted(_DEFEATS))
def test_defeating_the_child_alarm_still_ends_the_date_on_time(sealed, attack):
    import textwrap
    import time as _time

    src = """import collections
time = collections._sys.modules['time']
def compute_features(view):
    if str(view.date.date()) >= '2024-01-05':""" + textwrap.indent(_DEFEATS[attack], "    ") + """
    return {'x': view.history('close', 1).iloc[-1]}
def score(features, view):
    return features['x']
"""
    t0 = _time.monotonic()
    r = run(src, sealed)
    took = _time.monotonic() - t0
    assert r.status == "timeout" and r.S == 0.0, (r.status, r.message)
    assert r.message.startswith("timeout: decision date 2024-01-05 took more than 1 s wall"), r.message
    # 1 s limit + the keeper's 1.1 s grace + start-up and the first dates; the whole-run limit is 30 s
    assert took < 15.0, took


@pytest.mark.parametrize("body", [
    "while True:\n    pass",
    "s = collections._sys.modules['signal']\ns.setitimer(s.ITIMER_REAL, 0)\ns.signal(s.SIGALRM, s.SIG_IGN)\n"
    "while True:\n    try:\n        time.sleep(0.05)\n    except BaseException:\n        pass",
])
def test_module_level_code_is_bounded_by_the_import_limit(sealed, body):
    # code that runs at import, before the first decision date, has its own import limit (not only the whole-run one)
    import time as _time
    from dataclasses import replace

    cfg = ArenaConfig(sandbox=replace(SHORT.sandbox, import_seconds=2.0))
    t0 = _time.monotonic()
    r = run("import collections\ntime = collections._sys.modules['time']\n" + body + """
def compute_features(view):
    return {'x': view.history('close', 1).iloc[-1]}
def score(features, view):
    return features['x']
""", sealed, cfg=cfg)
    took = _time.monotonic() - t0
    assert r.status == "timeout" and r.S == 0.0, (r.status, r.message)
    assert r.message.startswith("timeout: importing the submission (its module-level code) took more than 2 s"), \
        r.message
    assert took < 15.0, took  # 2 s + the keeper's 1.2 s grace + start-up; the whole-run limit is 30 s
