"""Prompt sizes per family and prompt style on the bundled data: characters, SmolLM2 tokens, the estimate.

Renders every prompt the envs produce, in every style of :data:`quantgym.spaces.PROMPT_STYLES`:

- PortBench S1 / S2 / S3: every decision date of ``normal_2024``, ``china_2015``, ``covid_2020``,
  ``crypto_2022`` for the three profiles, driven stagewise through ``TextStageAction`` by a fixed
  policy (views = clip(trailing return / 10 %), signals from the ±0.2 rule, equal weight over the
  buys), each stage re-rendered with ``render_prompt(style=...)``;
- PortBench-QA: the static test items (50 per template, restricted variants included);
- Quant-Arena: the brief of both tracks, and the research feedback of the four example strategies
  and two failing candidates (real day errors and tracebacks) on a 40-stock slice of the bundled panel
  (in-process executor), plus a worst case (20 errors, 500-character messages, 2,000-character
  tracebacks);
- Market-Bench: rounds 1-5 of the three strategies.

Per family and style it prints: number of prompts, characters (median/max), tokens with the SmolLM2
tokenizer (median/max; ``$QUANTGYM_LLM_TEST_MODEL`` or ``--model``; needs ``llama-cpp-python``), the
estimate :func:`quantgym.agents.llm.tokens.estimate_tokens` (median/max), bytes per token (min/median),
estimate / tokens (min: below 1 the estimate under-counts) and the budget check.

Run: ``python benchmarks/prompt_tokens.py [--model PATH] [--markdown docs/_prompt_tokens.md]``
(about 25 s on 2 cores).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import quantgym  # noqa: E402,F401
from quantgym.agents.llm.tokens import estimate_tokens, find_test_model, gguf_token_counter  # noqa: E402
from quantgym.spaces import PROMPT_STYLES  # noqa: E402
from quantgym.envs.portbench.config import BENCH_PERIODS as PERIODS  # noqa: E402
from quantgym.envs.portbench.text_protocol import TextStageAction  # noqa: E402

PROFILES = ("Conservative", "Balanced", "Aggressive")
#: token budgets (SmolLM2 tokenizer) per family and style; None = no budget beyond "<= full"
BUDGETS = {
    "minimal": {"PortBench S1": 2000, "PortBench S2": 2000, "PortBench S3": 2000, "Quant-Arena brief": 1200,
                "Quant-Arena feedback": 400, "Market-Bench": 1800, "PortBench-QA": 600},
    "compact": {"PortBench S1": 5000, "PortBench S2": 5000, "PortBench S3": 5000, "Market-Bench": 3500},
}


def fixed_answer(env: TextStageAction, obs: dict) -> str:
    """A valid JSON answer to the current stage, built from the observation arrays (not the prompt)."""
    tick = env.unwrapped.view.tickers
    avail = np.flatnonzero(np.asarray(obs["available"], bool))
    stage = int(obs["stage"])
    if stage == 0:
        v = np.clip(np.asarray(obs["trailing_return"]) / 0.10, -1.0, 1.0)
        return json.dumps({"asset_views": {tick[i]: round(float(v[i]), 3) for i in avail},
                           "detected_regime": "sideways", "confidence": 0.6,
                           "macro_summary": "Policy rates stay high while inflation eases; equities lead, bonds lag."})
    if stage == 1:
        pv = np.asarray(obs["prev_views"])
        sig = {tick[i]: "buy" if pv[i] > 0.2 else "sell" if pv[i] < -0.2 else "hold" for i in avail}
        return json.dumps({"signals": sig, "strengths": {tick[i]: round(min(1.0, abs(float(pv[i]))), 2) for i in avail},
                           "reasoning": "the +/-0.2 rule on the views"})
    ps = np.asarray(obs["prev_signals"])
    buys = [tick[i] for i in avail if ps[i] == 2] or [tick[i] for i in avail]
    return json.dumps({"weights": {t: round(1.0 / len(buys), 6) for t in buys}, "expected_return": 0.05,
                       "expected_vol": 0.10, "sharpe_estimate": 0.5})


def portbench_prompts(out: dict) -> None:
    for prof in PROFILES:
        for per in PERIODS:
            env = TextStageAction(gym.make(f"PortBench-{prof}-v0", period=per, stagewise=True))
            obs, _ = env.reset(seed=0)
            while True:
                fam = f"PortBench S{int(obs['stage']) + 1}"
                for style in PROMPT_STYLES:
                    out.setdefault((fam, style), []).append(env.unwrapped.render_prompt(style=style))
                obs, _, term, trunc, _ = env.step(fixed_answer(env, obs))
                if term or trunc:
                    break


def qa_prompts(out: dict) -> None:
    env = gym.make("PortBench-QA-v0", restricted="both")
    for i in range(env.unwrapped.n_items):
        env.reset(options={"index": i})
        for style in PROMPT_STYLES:
            out.setdefault(("PortBench-QA", style), []).append(env.unwrapped.render_prompt(style))


_FAILING = {
    "key_error": ('FEATURES = ["x"]\n\ndef compute_features(view):\n    return {"x": view.history("close", 1).iloc[-1]}\n\n'
                  'def score(features, view):\n    return features["missing column " + "of the feature table " * 20]\n'),
    "deep_error": ('FEATURES = ["x"]\n\ndef compute_features(view):\n    return {"x": view.history("close", 1).iloc[-1]}\n\n'
                   'def _walk(n, f):\n    return f["x"] / 0 if n == 0 else _walk(n - 1, f)\n\n'
                   'def score(features, view):\n    import numpy as np\n    return np.log(_walk(40, features) - 1e300) / None\n'),
}


def arena_prompts(out: dict) -> None:
    import pandas as pd

    from quantgym.envs.quant_arena.data import BUNDLED_DIR, ArenaDataset, load_dataset
    from quantgym.envs.quant_arena.env import QuantArenaEnv
    from quantgym.envs.quant_arena.prompts import feedback_text, research_feedback
    from quantgym.envs.quant_arena.examples import EXAMPLES, example_source

    for env_id in ("QuantArena-v0", "QuantArena-OneShot-v0"):
        env = gym.make(env_id, record_dir=False)
        env.reset(seed=0)
        for style in PROMPT_STYLES:
            out.setdefault(("Quant-Arena brief", style), []).append(env.unwrapped.render_prompt(style))
    bundled = load_dataset()
    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet")
    syms = sorted(df["symbol"].unique())[::20][:40]
    df = df[df["symbol"].isin(syms) & (df["date"] >= pd.Timestamp("2021-10-01").date())]
    ds = ArenaDataset.from_frame(df.reset_index(drop=True), info=bundled.info.reset_index(), name="slice-40")
    env = QuantArenaEnv(data=ds, executor="inprocess", record_dir=False, warmup_start="2021-10-01",
                        max_candidates=len(EXAMPLES) + len(_FAILING))
    env.reset(seed=0)
    for src in [example_source(n) for n in EXAMPLES] + list(_FAILING.values()):
        env.step(src)
        for style in PROMPT_STYLES:
            out.setdefault(("Quant-Arena feedback", style), []).append(env.render_prompt(style))
    # worst case: the first example's metrics (two research years) with 480 day errors, 600-character
    # messages and long tracebacks (research_feedback keeps 20 errors, 500 characters, 2,000-character tracebacks)
    tb = "Traceback (most recent call last):\n" + "".join(
        f'  File "<submission>", line {i}, in _walk\n    return _walk(n - 1, f)\n' for i in range(60)) + "ZeroDivisionError: x"
    msg = ("division by zero in feature vol_20d_rank while scoring 812 symbols; " * 10)[:600]
    errs = [{"date": f"2022-02-{i + 1:02d}", "phase": "score", "type": "ZeroDivisionError", "message": msg,
             "traceback": tb} for i in range(25)]
    worst = dataclasses.replace(env.candidates[0]["research"], errors=errs, n_errors=480)
    fb = research_feedback(worst, 7, 0)
    for style in PROMPT_STYLES:
        out.setdefault(("Quant-Arena feedback", style), []).append(feedback_text(fb, style))


def market_bench_prompts(out: dict) -> None:
    with tempfile.TemporaryDirectory(prefix="qg-prompt-tokens-") as wd:
        for name in ("Scheduled", "Pairs", "DeltaHedge"):
            for rnd in range(1, 6):
                env = gym.make(f"MarketBench-{name}-v0", round=rnd, workdir=wd)
                env.reset(seed=0)
                # the prompt names the run's input folder: count it as one fixed path (the request hash
                # does the same with <WORKDIR>), so the table does not depend on the temporary name
                real = str(env.unwrapped.workdir)
                for style in PROMPT_STYLES:
                    text = env.unwrapped.render_prompt(style).replace(real, "/tmp/quantgym-market-bench/input")
                    out.setdefault(("Market-Bench", style), []).append(text)
                env.close()


def collect() -> dict[tuple[str, str], list[str]]:
    """``{(family, style): [prompt, ...]}`` over the whole bundled set (module docstring)."""
    out: dict[tuple[str, str], list[str]] = {}
    portbench_prompts(out)
    qa_prompts(out)
    arena_prompts(out)
    market_bench_prompts(out)
    return out


def measure(prompts: dict, counter) -> list[dict]:
    rows = []
    for (fam, style), texts in prompts.items():
        nb = [len(t.encode("utf-8")) for t in texts]
        est = [estimate_tokens(t) for t in texts]
        tok = [counter(t) for t in texts] if counter is not None else None
        row = {"family": fam, "style": style, "n": len(texts),
               "chars_med": statistics.median(len(t) for t in texts), "chars_max": max(len(t) for t in texts),
               "est_med": statistics.median(est), "est_max": max(est), "budget": BUDGETS.get(style, {}).get(fam)}
        if tok is not None:
            ratio = [b / t for b, t in zip(nb, tok) if t]
            row.update(tok_med=statistics.median(tok), tok_max=max(tok), bpt_min=min(ratio),
                       bpt_med=statistics.median(ratio), est_over_tok_min=min(e / t for e, t in zip(est, tok) if t))
        rows.append(row)
    return rows


COLUMNS = ("family", "style", "n", "chars med/max", "tokens med/max", "estimate med/max", "bytes/token min/med",
           "est/tokens min", "budget")


def _cells(r: dict) -> list[str]:
    have = "tok_max" in r
    budget = "-" if r["budget"] is None else str(r["budget"])
    if r["budget"] is not None:
        tmax = r["tok_max"] if have else r["est_max"]
        budget += " ok" if tmax <= r["budget"] else " OVER"
    return [r["family"], r["style"], str(r["n"]), f"{r['chars_med']:.0f} / {r['chars_max']}",
            f"{r['tok_med']:.0f} / {r['tok_max']}" if have else "n/a",
            f"{r['est_med']:.0f} / {r['est_max']}",
            f"{r['bpt_min']:.2f} / {r['bpt_med']:.2f}" if have else "n/a",
            f"{r['est_over_tok_min']:.2f}" if have else "n/a", budget]


def text_table(cells: list[list[str]]) -> str:
    """Plain fixed-width table (no wrapping, whatever the terminal width)."""
    table = [list(COLUMNS)] + cells
    width = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip()  # noqa: E731
    return "\n".join([fmt(table[0]), fmt(["-" * w for w in width])] + [fmt(r) for r in table[1:]])


def markdown(rows: list[dict], counter_name: str) -> str:
    lines = [f"Tokens: {counter_name}; estimate: `quantgym.agents.llm.tokens.estimate_tokens`; budget: the style's "
             "ceiling on the max tokens (`ok` / `OVER`).", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="GGUF file whose vocabulary counts tokens (default: $QUANTGYM_LLM_TEST_MODEL)")
    ap.add_argument("--markdown", type=Path, help="also write the table as markdown to this file")
    ap.add_argument("--write", help="write the table into the 'prompt-tokens' block of this markdown file")
    ap.add_argument("--check", help="exit 1 when this file's 'prompt-tokens' block differs from the table")
    args = ap.parse_args()
    path = args.model or find_test_model()
    counter, name = None, "n/a (no GGUF model or no llama-cpp-python: estimate only)"
    if path:
        try:
            counter, name = gguf_token_counter(str(path)), f"SmolLM2 vocabulary of {Path(path).name}"
        except (ImportError, OSError, ValueError, RuntimeError) as exc:
            print(f"no real tokenizer ({exc}); estimate only", file=sys.stderr)
    t0 = time.perf_counter()
    prompts = collect()
    t1 = time.perf_counter()
    order = ["PortBench S1", "PortBench S2", "PortBench S3", "PortBench-QA", "Quant-Arena brief",
             "Quant-Arena feedback", "Market-Bench"]
    prompts = {k: prompts[k] for k in sorted(prompts, key=lambda k: (order.index(k[0]), PROMPT_STYLES.index(k[1])))}
    rows = measure(prompts, counter)
    t2 = time.perf_counter()
    print(f"Prompt sizes per family and style (tokens: {name})")
    print(text_table([_cells(r) for r in rows]))
    if counter is not None:
        fams = dict.fromkeys(r["family"] for r in rows)
        print("min bytes/token per family: " + ", ".join(
            f"{f} {min(r['bpt_min'] for r in rows if r['family'] == f):.2f}" for f in fams))
        under = [r for r in rows if r["est_over_tok_min"] < 1.0]
        print("estimate under-counts: " + (", ".join(f"{r['family']}/{r['style']} ({r['est_over_tok_min']:.2f})"
                                                      for r in under) if under else "never"))
    print(f"rendering {t1 - t0:.1f} s, counting {t2 - t1:.1f} s")
    if args.markdown:
        args.markdown.write_text(markdown(rows, name), encoding="utf-8")
        print(f"wrote {args.markdown}")
    if args.write or args.check:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _common import write_or_check

        if counter is None:
            print("no real tokenizer: the docs table needs the SmolLM2 vocabulary (extra llm-server + model)")
            return 1
        rc = write_or_check(args.write or args.check, "prompt-tokens", markdown(rows, name), bool(args.check))
        if rc:
            return rc
    over = [r for r in rows if r["budget"] is not None and r.get("tok_max", r["est_max"]) > r["budget"]]
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
