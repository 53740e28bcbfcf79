"""The quintile chart keeps a strategy that scored on part of the days only (market timing: in cash on the
others) apart from the strategies that scored every day, and says so."""

from __future__ import annotations

import matplotlib.pyplot as plt

from quantgym.envs.quant_arena.plots import PARTIAL_DAYS_SHARE, plot_quantiles, quantile_figure


def _m(q, days):
    return {"quantile_returns_bp": q, "n_ic_days": days}


def _texts(fig) -> str:
    return " ".join(t.get_text() for t in fig.texts)


def test_a_strategy_scored_on_part_of_the_days_gets_its_own_panel_and_a_note(tmp_path):
    metrics = {"momentum_20d": _m([6.3, 10.2, 10.9, 7.5, 4.5], 241), "low_volatility": _m([11.5, 8.7, 9.1, 6.2, 3.9], 241),
               "market_timing": _m([24.4, 32.6, 38.2, 34.8, 32.5], 58), "market_reference": None}
    fig = quantile_figure(metrics, "quintiles")
    left, right = fig.axes
    assert left.get_title() == "quintiles" and right.get_title() == "scored on part of the days only"
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["momentum_20d (241 days)",
                                                                     "low_volatility (241 days)"]
    assert [t.get_text() for t in right.get_legend().get_texts()] == ["market_timing (58 days)"]
    assert len(left.patches) == 10 and len(right.patches) == 5  # the bars: 5 quintiles per strategy
    assert "market_timing scored on fewer than 90% of the days" in _texts(fig)
    assert "not comparable" in _texts(fig)
    plt.close(fig)
    png = plot_quantiles(metrics, tmp_path / "q.png", "quintiles")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_strategies_that_scored_every_day_share_one_panel_without_a_note():
    metrics = {"momentum_20d": _m([1.0, 2.0, 3.0, 4.0, 5.0], 241), "reversal_5d": _m([5.0, 4.0, 3.0, 2.0, 1.0], 241)}
    fig = quantile_figure(metrics, "t")
    assert len(fig.axes) == 1 and _texts(fig) == ""
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["momentum_20d", "reversal_5d"]
    plt.close(fig)
    # a few days fewer (a longer warm-up) is not "part of the days": same panel, days in the legend
    fig = quantile_figure({**metrics, "x": _m([1.0] * 5, int(241 * PARTIAL_DAYS_SHARE) + 1)}, "t")
    assert len(fig.axes) == 1 and "x (217 days)" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    plt.close(fig)


def test_the_report_uses_the_same_chart(tmp_path):
    import json

    from quantgym.sweep.report import build_report

    d = tmp_path / "bench"
    d.mkdir()
    runs = [{"agent": "low_volatility", "sealed": _m([11.5, 8.7, 9.1, 6.2, 3.9], 241)},
            {"agent": "market_timing", "sealed": _m([24.4, 32.6, 38.2, 34.8, 32.5], 58)}]
    (d / "results.json").write_text(json.dumps({"meta": {"command": "bench"}, "tasks": {"quant_arena": {"runs": runs}}}))
    rep = build_report([d], tmp_path / "rep")
    fig = next(f for s in rep.sections for f in s.figures if f.name == "quant_arena_quantiles")
    assert fig.png[:4] == b"\x89PNG" and "panel of its own" in fig.caption
